/* test_pt.c - Intel PT packet decoder/encoder: table-driven tests of every
 * packet type and IP compression (expected values worked out by hand from
 * the SDM layouts, not from the encoder), encode/decode round trips,
 * streaming splits, truncation, sync and error recovery. */
#include "check.h"
#include "btr/pt.h"

#include <stdint.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define LAST 0x00007f1234567890ull
#define LAST_HI 0xabcd000000000000ull

struct tcase {
	const char *what;
	uint8_t bytes[20];
	int len;
	uint64_t last_ip;           /* decoder's last IP before the packet */
	struct btr_pt_packet pkt;   /* expected (size = len) */
	const char *text;           /* btr_pt_pkt_format */
};

#define P(t) .pkt = { .type = (t)

static const struct tcase cases[] = {
	{ "pad", { 0x00 }, 1, 0, P(BTR_PT_PAD) }, "" },
	{ "psb", { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 }, 16, 0,
	  P(BTR_PT_PSB) }, "" },
	{ "psbend", { 0x02, 0x23 }, 2, 0, P(BTR_PT_PSBEND) }, "" },
	{ "tnt.8 1 taken", { 0x06 }, 1, 0, P(BTR_PT_TNT), .u.tnt = { 1, 1 } }, "!" },
	{ "tnt.8 1 not taken", { 0x04 }, 1, 0, P(BTR_PT_TNT), .u.tnt = { 0, 1 } }, "." },
	{ "tnt.8 2", { 0x0a }, 1, 0, P(BTR_PT_TNT), .u.tnt = { 1, 2 } }, ".!" },
	{ "tnt.8 6", { 0xac }, 1, 0, P(BTR_PT_TNT), .u.tnt = { 0x16, 6 } }, ".!.!!." },
	{ "tnt.64 2", { 0x02, 0xa3, 0x05, 0, 0, 0, 0, 0 }, 8, 0, P(BTR_PT_TNT), .u.tnt = { 1, 2 } }, ".!" },
	{ "tnt.64 47", { 0x02, 0xa3, 0x55, 0x55, 0x55, 0x55, 0x55, 0xd5 }, 8, 0, P(BTR_PT_TNT),
	  .u.tnt = { 0x555555555555ull, 47 } }, "!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!.!" },
	/* every IP compression, on TIP */
	{ "tip suppressed", { 0x0d }, 1, LAST, P(BTR_PT_TIP), .u.ip = { 0, 0, 0 } }, "0: suppressed" },
	{ "tip update16", { 0x2d, 0xcd, 0xab }, 3, LAST, P(BTR_PT_TIP),
	  .u.ip = { 0x00007f123456abcdull, 0xabcd, 1 } }, "1: 0x00007f123456abcd" },
	{ "tip update32", { 0x4d, 0x44, 0x33, 0x22, 0x11 }, 5, LAST, P(BTR_PT_TIP),
	  .u.ip = { 0x00007f1211223344ull, 0x11223344, 2 } }, "2: 0x00007f1211223344" },
	{ "tip sext48 negative", { 0x6d, 0x00, 0x10, 0x00, 0x81, 0xff, 0xff }, 7, LAST, P(BTR_PT_TIP),
	  .u.ip = { 0xffffffff81001000ull, 0xffff81001000ull, 3 } }, "3: 0xffffffff81001000" },
	{ "tip sext48 positive", { 0x6d, 0x10, 0x32, 0x54, 0x76, 0x98, 0x7a }, 7, LAST_HI, P(BTR_PT_TIP),
	  .u.ip = { 0x00007a9876543210ull, 0x7a9876543210ull, 3 } }, "3: 0x00007a9876543210" },
	{ "tip update48", { 0x8d, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06 }, 7, LAST_HI, P(BTR_PT_TIP),
	  .u.ip = { 0xabcd060504030201ull, 0x060504030201ull, 4 } }, "4: 0xabcd060504030201" },
	{ "tip full", { 0xcd, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11 }, 9, LAST, P(BTR_PT_TIP),
	  .u.ip = { 0x1122334455667788ull, 0x1122334455667788ull, 6 } }, "6: 0x1122334455667788" },
	/* the other IP packets */
	{ "tip.pge sext48", { 0x71, 0x00, 0x10, 0x40, 0x00, 0x00, 0x00 }, 7, 0, P(BTR_PT_TIP_PGE),
	  .u.ip = { 0x401000, 0x401000, 3 } }, "3: 0x0000000000401000" },
	{ "tip.pge update16", { 0x31, 0x34, 0x12 }, 3, LAST, P(BTR_PT_TIP_PGE),
	  .u.ip = { 0x00007f1234561234ull, 0x1234, 1 } }, "1: 0x00007f1234561234" },
	{ "tip.pgd suppressed", { 0x01 }, 1, LAST, P(BTR_PT_TIP_PGD), .u.ip = { 0, 0, 0 } }, "0: suppressed" },
	{ "tip.pgd update32", { 0x41, 0x00, 0x00, 0x40, 0x00 }, 5, LAST, P(BTR_PT_TIP_PGD),
	  .u.ip = { 0x00007f1200400000ull, 0x400000, 2 } }, "2: 0x00007f1200400000" },
	{ "tip.pgd full", { 0xc1, 1, 0, 0, 0, 0, 0, 0, 0x80 }, 9, LAST, P(BTR_PT_TIP_PGD),
	  .u.ip = { 0x8000000000000001ull, 0x8000000000000001ull, 6 } }, "6: 0x8000000000000001" },
	{ "fup suppressed", { 0x1d }, 1, LAST, P(BTR_PT_FUP), .u.ip = { 0, 0, 0 } }, "0: suppressed" },
	{ "fup update16", { 0x3d, 0xff, 0xff }, 3, LAST, P(BTR_PT_FUP),
	  .u.ip = { 0x00007f123456ffffull, 0xffff, 1 } }, "1: 0x00007f123456ffff" },
	{ "fup update32", { 0x5d, 0x01, 0x00, 0x00, 0x00 }, 5, LAST, P(BTR_PT_FUP),
	  .u.ip = { 0x00007f1200000001ull, 1, 2 } }, "2: 0x00007f1200000001" },
	{ "fup sext48", { 0x7d, 0xef, 0xbe, 0xad, 0xde, 0xff, 0x7f }, 7, 0, P(BTR_PT_FUP),
	  .u.ip = { 0x00007fffdeadbeefull, 0x7fffdeadbeefull, 3 } }, "3: 0x00007fffdeadbeef" },
	{ "fup update48", { 0x9d, 0xef, 0xbe, 0xad, 0xde, 0xff, 0xff }, 7, LAST_HI, P(BTR_PT_FUP),
	  .u.ip = { 0xabcdffffdeadbeefull, 0xffffdeadbeefull, 4 } }, "4: 0xabcdffffdeadbeef" },
	{ "fup full", { 0xdd, 0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0 }, 9, LAST, P(BTR_PT_FUP),
	  .u.ip = { 0xdeadbeef, 0xdeadbeef, 6 } }, "6: 0x00000000deadbeef" },
	{ "pip nr", { 0x02, 0x43, 0x01, 0x56, 0x34, 0x12, 0x00, 0x00 }, 8, 0, P(BTR_PT_PIP),
	  .u.pip = { 0x123456000ull, 1 } }, "0x0000000123456000, nr" },
	{ "pip", { 0x02, 0x43, 0x02, 0x00, 0x00, 0x00, 0x00, 0x80 }, 8, 0, P(BTR_PT_PIP),
	  .u.pip = { 0x0008000000000020ull, 0 } }, "0x0008000000000020" },
	{ "mode.exec 64", { 0x99, 0x01 }, 2, 0, P(BTR_PT_MODE_EXEC), .u.mode_exec = { 1, 0, 0 } }, "64-bit" },
	{ "mode.exec 32", { 0x99, 0x02 }, 2, 0, P(BTR_PT_MODE_EXEC), .u.mode_exec = { 0, 1, 0 } }, "32-bit" },
	{ "mode.exec 16 if", { 0x99, 0x04 }, 2, 0, P(BTR_PT_MODE_EXEC), .u.mode_exec = { 0, 0, 1 } }, "16-bit, if" },
	{ "mode.tsx intx", { 0x99, 0x21 }, 2, 0, P(BTR_PT_MODE_TSX), .u.mode_tsx = { 1, 0 } }, "intx" },
	{ "mode.tsx abrt", { 0x99, 0x22 }, 2, 0, P(BTR_PT_MODE_TSX), .u.mode_tsx = { 0, 1 } }, "abrt" },
	{ "mode.tsx commit", { 0x99, 0x20 }, 2, 0, P(BTR_PT_MODE_TSX), .u.mode_tsx = { 0, 0 } }, "none" },
	{ "stop", { 0x02, 0x83 }, 2, 0, P(BTR_PT_TRACESTOP) }, "" },
	{ "cbr", { 0x02, 0x03, 0x1a, 0x00 }, 4, 0, P(BTR_PT_CBR), .u.cbr = { 0x1a } }, "0x1a" },
	{ "tsc", { 0x19, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01 }, 8, 0, P(BTR_PT_TSC),
	  .u.tsc = { 0x01020304050607ull } }, "0x1020304050607" },
	{ "mtc", { 0x59, 0xc3 }, 2, 0, P(BTR_PT_MTC), .u.mtc = { 0xc3 } }, "0xc3" },
	{ "tma", { 0x02, 0x73, 0x34, 0x12, 0x00, 0xff, 0x01 }, 7, 0, P(BTR_PT_TMA), .u.tma = { 0x1234, 0x1ff } },
	  "ctc 0x1234, fc 0x1ff" },
	{ "cyc 1 byte 0", { 0x03 }, 1, 0, P(BTR_PT_CYC), .u.cyc = { 0 } }, "0x0" },
	{ "cyc 1 byte", { 0xfb }, 1, 0, P(BTR_PT_CYC), .u.cyc = { 0x1f } }, "0x1f" },
	{ "cyc 2 bytes", { 0x07, 0x02 }, 2, 0, P(BTR_PT_CYC), .u.cyc = { 0x20 } }, "0x20" },
	{ "cyc 3 bytes", { 0xff, 0xff, 0x02 }, 3, 0, P(BTR_PT_CYC), .u.cyc = { 0x1fff } }, "0x1fff" },
	{ "cyc 9 bytes", { 0x07, 1, 1, 1, 1, 1, 1, 1, 0x02 }, 9, 0, P(BTR_PT_CYC),
	  .u.cyc = { 1ull << 54 } }, "0x40000000000000" },
	{ "vmcs", { 0x02, 0xc8, 0x01, 0x23, 0x45, 0x67, 0x89 }, 7, 0, P(BTR_PT_VMCS),
	  .u.vmcs = { 0x8967452301000ull } }, "0x8967452301000" },
	{ "ovf", { 0x02, 0xf3 }, 2, 0, P(BTR_PT_OVF) }, "" },
	{ "mnt", { 0x02, 0xc3, 0x88, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01 }, 11, 0, P(BTR_PT_MNT),
	  .u.mnt = { 0x0123456789abcdefull } }, "0x0123456789abcdef" },
	{ "ptw 4", { 0x02, 0x12, 0x78, 0x56, 0x34, 0x12 }, 6, 0, P(BTR_PT_PTW),
	  .u.ptw = { 0x12345678, 4, 0 } }, "4: 0x12345678" },
	{ "ptw 8 ip", { 0x02, 0xb2, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11 }, 10, 0, P(BTR_PT_PTW),
	  .u.ptw = { 0x1122334455667788ull, 8, 1 } }, "8: 0x1122334455667788, ip" },
	{ "ptw 4 ip", { 0x02, 0x92, 0x01, 0x00, 0x00, 0x00 }, 6, 0, P(BTR_PT_PTW),
	  .u.ptw = { 1, 4, 1 } }, "4: 0x1, ip" },
	{ "exstop", { 0x02, 0x62 }, 2, 0, P(BTR_PT_EXSTOP), .u.exstop = { 0 } }, "" },
	{ "exstop ip", { 0x02, 0xe2 }, 2, 0, P(BTR_PT_EXSTOP), .u.exstop = { 1 } }, "ip" },
	{ "mwait", { 0x02, 0xc2, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00 }, 10, 0, P(BTR_PT_MWAIT),
	  .u.mwait = { 1, 2 } }, "hints 0x1, ext 0x2" },
	{ "pwre hw", { 0x02, 0x22, 0x08, 0x21 }, 4, 0, P(BTR_PT_PWRE), .u.pwre = { 1, 2, 1 } }, "c2.1, hw" },
	{ "pwre", { 0x02, 0x22, 0x00, 0x60 }, 4, 0, P(BTR_PT_PWRE), .u.pwre = { 0, 6, 0 } }, "c6.0" },
	{ "pwrx", { 0x02, 0xa2, 0x61, 0x05, 0x00, 0x00, 0x00 }, 7, 0, P(BTR_PT_PWRX), .u.pwrx = { 6, 1, 5 } },
	  "last c6, deepest c1, int, store" },
	{ "pwrx hw", { 0x02, 0xa2, 0x22, 0x08, 0x00, 0x00, 0x00 }, 7, 0, P(BTR_PT_PWRX), .u.pwrx = { 2, 2, 8 } },
	  "last c2, deepest c2, hw" },
	{ "bbp 4", { 0x02, 0x63, 0x82 }, 3, 0, P(BTR_PT_BBP), .u.bbp = { 1, 2 } }, "type 0x02, 4 bytes" },
	{ "bbp 8", { 0x02, 0x63, 0x1f }, 3, 0, P(BTR_PT_BBP), .u.bbp = { 0, 0x1f } }, "type 0x1f, 8 bytes" },
	{ "bep", { 0x02, 0x33 }, 2, 0, P(BTR_PT_BEP), .u.bep = { 0 } }, "" },
	{ "bep ip", { 0x02, 0xb3 }, 2, 0, P(BTR_PT_BEP), .u.bep = { 1 } }, "ip" },
	{ "cfe ip", { 0x02, 0x13, 0x81, 0x0e }, 4, 0, P(BTR_PT_CFE), .u.cfe = { 1, 1, 0x0e } },
	  "type 0x01, vector 0x0e, ip" },
	{ "cfe", { 0x02, 0x13, 0x05, 0x00 }, 4, 0, P(BTR_PT_CFE), .u.cfe = { 0, 5, 0 } }, "type 0x05, vector 0x00" },
	{ "evd", { 0x02, 0x53, 0x02, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe }, 11, 0, P(BTR_PT_EVD),
	  .u.evd = { 0xfedcba9876543210ull, 2 } }, "type 0x02: 0xfedcba9876543210" },
	/* TRIG layouts as libipt's conformance suite writes them (dump-all-packets) */
	{ "trig mult", { 0xd9, 0x20, 0xa1 }, 3, 0, P(BTR_PT_TRIG), .u.trig = { 0, 0xa1, 0, 1, 0 } },
	  "trbv 0xa1, mult" },
	{ "trig icnt", { 0xd9, 0x40, 0xa1, 0x17, 0x00 }, 5, 0, P(BTR_PT_TRIG), .u.trig = { 23, 0xa1, 0, 0, 1 } },
	  "trbv 0xa1, icnt 23" },
	{ "trig ip mult icnt", { 0xd9, 0xe0, 0xa1, 0x17, 0x01 }, 5, 0, P(BTR_PT_TRIG),
	  .u.trig = { 0x117, 0xa1, 1, 1, 1 } }, "trbv 0xa1, ip, mult, icnt 279" },
};

/* Byte sequences that start no valid packet. */
static const struct {
	const char *what;
	uint8_t bytes[20];
	int len;
} bad_cases[] = {
	{ "opcode 0x05", { 0x05, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "opcode 0x09", { 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "opcode 0x15", { 0x15, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "opcode 0x39", { 0x39, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "opcode 0x05", { 0x05, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "tip ipc 5", { 0xad, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "fup ipc 7", { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "tip.pge ipc 5", { 0xb1, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "ext 0x04", { 0x02, 0x04, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "ext 0x02", { 0x02, 0x02, 0, 0, 0, 0, 0, 0, 0, 0 }, 10 },
	{ "ext2 not mnt", { 0x02, 0xc3, 0x89, 0, 0, 0, 0, 0, 0, 0, 0 }, 11 },
	{ "ptw plc 2", { 0x02, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 12 },
	{ "ptw plc 3", { 0x02, 0xf2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 12 },
	{ "mode leaf 2", { 0x99, 0x40 }, 2 },
	{ "mode leaf 7", { 0x99, 0xe1 }, 2 },
	{ "tma reserved byte", { 0x02, 0x73, 0x34, 0x12, 0x01, 0xff, 0x01 }, 7 },
	{ "tma fc bit 9", { 0x02, 0x73, 0x34, 0x12, 0x00, 0xff, 0x03 }, 7 },
	{ "tnt.64 without stop bit", { 0x02, 0xa3, 0, 0, 0, 0, 0, 0 }, 8 },
	{ "tnt.64 without branch", { 0x02, 0xa3, 1, 0, 0, 0, 0, 0 }, 8 },
	{ "psb broken", { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x83 }, 16 },
	{ "cyc 65 bits", { 0x07, 1, 1, 1, 1, 1, 1, 1, 1, 0x02 }, 10 },
};

/* Compares the fields that are meaningful for the packet's type. */
static int pkt_eq(const struct btr_pt_packet *a, const struct btr_pt_packet *b)
{
	if (a->type != b->type || a->size != b->size)
		return 0;
	switch (a->type) {
	case BTR_PT_TNT:
		return a->u.tnt.bits == b->u.tnt.bits && a->u.tnt.count == b->u.tnt.count;
	case BTR_PT_TIP: case BTR_PT_TIP_PGE: case BTR_PT_TIP_PGD: case BTR_PT_FUP:
		return a->u.ip.ipc == b->u.ip.ipc && a->u.ip.raw == b->u.ip.raw && a->u.ip.ip == b->u.ip.ip;
	case BTR_PT_PIP:
		return a->u.pip.cr3 == b->u.pip.cr3 && a->u.pip.nr == b->u.pip.nr;
	case BTR_PT_MODE_EXEC:
		return a->u.mode_exec.csl == b->u.mode_exec.csl && a->u.mode_exec.csd == b->u.mode_exec.csd &&
		       a->u.mode_exec.iflag == b->u.mode_exec.iflag;
	case BTR_PT_MODE_TSX:
		return a->u.mode_tsx.intx == b->u.mode_tsx.intx && a->u.mode_tsx.abrt == b->u.mode_tsx.abrt;
	case BTR_PT_CBR: return a->u.cbr.ratio == b->u.cbr.ratio;
	case BTR_PT_TSC: return a->u.tsc.tsc == b->u.tsc.tsc;
	case BTR_PT_MTC: return a->u.mtc.ctc == b->u.mtc.ctc;
	case BTR_PT_TMA: return a->u.tma.ctc == b->u.tma.ctc && a->u.tma.fc == b->u.tma.fc;
	case BTR_PT_CYC: return a->u.cyc.value == b->u.cyc.value;
	case BTR_PT_VMCS: return a->u.vmcs.base == b->u.vmcs.base;
	case BTR_PT_MNT: return a->u.mnt.payload == b->u.mnt.payload;
	case BTR_PT_PTW:
		return a->u.ptw.payload == b->u.ptw.payload && a->u.ptw.bytes == b->u.ptw.bytes &&
		       a->u.ptw.ip == b->u.ptw.ip;
	case BTR_PT_EXSTOP: return a->u.exstop.ip == b->u.exstop.ip;
	case BTR_PT_MWAIT: return a->u.mwait.hints == b->u.mwait.hints && a->u.mwait.ext == b->u.mwait.ext;
	case BTR_PT_PWRE:
		return a->u.pwre.hw == b->u.pwre.hw && a->u.pwre.state == b->u.pwre.state &&
		       a->u.pwre.substate == b->u.pwre.substate;
	case BTR_PT_PWRX:
		return a->u.pwrx.last == b->u.pwrx.last && a->u.pwrx.deepest == b->u.pwrx.deepest &&
		       a->u.pwrx.wake == b->u.pwrx.wake;
	case BTR_PT_BBP: return a->u.bbp.sz == b->u.bbp.sz && a->u.bbp.type == b->u.bbp.type;
	case BTR_PT_BIP: return a->u.bip.id == b->u.bip.id && a->u.bip.value == b->u.bip.value;
	case BTR_PT_BEP: return a->u.bep.ip == b->u.bep.ip;
	case BTR_PT_CFE:
		return a->u.cfe.ip == b->u.cfe.ip && a->u.cfe.type == b->u.cfe.type &&
		       a->u.cfe.vector == b->u.cfe.vector;
	case BTR_PT_EVD: return a->u.evd.type == b->u.evd.type && a->u.evd.payload == b->u.evd.payload;
	case BTR_PT_TRIG:
		return a->u.trig.trbv == b->u.trig.trbv && a->u.trig.ip == b->u.trig.ip &&
		       a->u.trig.mult == b->u.trig.mult && a->u.trig.icnt_valid == b->u.trig.icnt_valid &&
		       a->u.trig.icnt == b->u.trig.icnt;
	default: return 1;
	}
}

static void test_table(void)
{
	int covered[BTR_PT__COUNT] = { 0 };
	int ipc_covered[8] = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct tcase *c = &cases[i];
		struct btr_pt_pkt_decoder d;
		struct btr_pt_packet p, want = c->pkt;
		char text[128];
		uint8_t out[32];
		struct btr_pt_encoder e;
		int r;

		want.size = (uint8_t)c->len;
		btr_pt_pkt_init(&d, c->bytes, (size_t)c->len, 0x1000);
		d.last_ip = c->last_ip;
		r = btr_pt_pkt_next(&d, &p);
		if (r != c->len || !pkt_eq(&p, &want))
			fprintf(stderr, "case '%s': r=%d type=%s size=%u\n", c->what, r,
				btr_pt_type_name(p.type), p.size);
		CHECK_EQ(r, c->len);
		CHECK(pkt_eq(&p, &want));
		CHECK_EQ(p.offset, 0x1000);
		CHECK_EQ(btr_pt_pkt_offset(&d), 0x1000 + c->len);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_EOS);
		btr_pt_pkt_format(&want, text, sizeof(text));
		if (strcmp(text, c->text))
			fprintf(stderr, "case '%s': text '%s' != '%s'\n", c->what, text, c->text);
		CHECK_STR(text, c->text);
		covered[want.type]++;
		if (want.type == BTR_PT_TIP || want.type == BTR_PT_FUP)
			ipc_covered[want.u.ip.ipc] |= want.type == BTR_PT_TIP ? 1 : 2;

		/* The encoder writes exactly the same bytes. */
		btr_pt_enc_init(&e, out, sizeof(out));
		e.last_ip = c->last_ip;
		if (want.type == BTR_PT_BIP)
			continue;
		r = btr_pt_enc_packet(&e, &want);
		CHECK_EQ(r, c->len);
		if (r != c->len || memcmp(out, c->bytes, (size_t)c->len))
			fprintf(stderr, "case '%s': encoding differs\n", c->what);
		CHECK(r == c->len && !memcmp(out, c->bytes, (size_t)c->len));
		/* ... and tracks the last IP like the decoder. */
		CHECK_EQ(e.last_ip, d.last_ip);
	}
	/* Every packet type but BIP (needs a BBP first: test_bbp_block) and
	 * every IP compression on both TIP and FUP appear in the table. */
	for (int t = BTR_PT_PAD; t < BTR_PT__COUNT; t++)
		if (t != BTR_PT_BIP && !covered[t]) {
			fprintf(stderr, "packet type %s not covered\n", btr_pt_type_name(t));
			CHECK(covered[t]);
		}
	for (int ipc = 0; ipc <= 6; ipc++)
		if (ipc != 5)
			CHECK_EQ(ipc_covered[ipc], 3);
}

static void test_bad(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++) {
		struct btr_pt_pkt_decoder d;
		struct btr_pt_packet p;
		uint8_t buf[40];
		int r;

		/* A good packet first, so the bad one is at offset 1. */
		buf[0] = 0x00;
		memcpy(buf + 1, bad_cases[i].bytes, (size_t)bad_cases[i].len);
		btr_pt_pkt_init(&d, buf, 1 + (size_t)bad_cases[i].len, 0);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
		r = btr_pt_pkt_next(&d, &p);
		if (r != -BTR_ERR_BAD_PACKET)
			fprintf(stderr, "bad case '%s': r=%d\n", bad_cases[i].what, r);
		CHECK_EQ(r, -BTR_ERR_BAD_PACKET);
		/* The position stays on the bad byte. */
		CHECK_EQ(btr_pt_pkt_offset(&d), 1);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_BAD_PACKET);
		/* No PSB follows: the sync consumes everything. */
		CHECK_EQ(btr_pt_pkt_sync_forward(&d), -BTR_ERR_EOS);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_EOS);
	}
}

/* Every prefix of every packet: -BTR_ERR_AGAIN at the same offset, then
 * feeding the rest (in one piece, or byte by byte) completes it. */
static void test_truncated(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct tcase *c = &cases[i];
		struct btr_pt_packet want = c->pkt;

		want.size = (uint8_t)c->len;
		for (int k = 1; k < c->len; k++) {
			struct btr_pt_pkt_decoder d;
			struct btr_pt_packet p;
			/* exactly k bytes on the heap: under ASan a read past a
			 * cut packet's end is an error, not a look at stack */
			uint8_t *first = malloc((size_t)k);
			int r;

			if (!first)
				abort();
			memcpy(first, c->bytes, (size_t)k);
			btr_pt_pkt_init(&d, first, (size_t)k, 500);
			d.last_ip = c->last_ip;
			CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_AGAIN);
			CHECK_EQ(btr_pt_pkt_offset(&d), 500);
			CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_AGAIN);
			memset(first, 0xee, (size_t)k); /* the decoder must have copied it */
			free(first);
			if (k & 1) {
				CHECK_EQ(btr_pt_pkt_feed(&d, c->bytes + k, (size_t)(c->len - k)), 0);
				r = btr_pt_pkt_next(&d, &p);
			} else {
				r = -BTR_ERR_AGAIN;
				for (int j = k; j < c->len && r == -BTR_ERR_AGAIN; j++) {
					btr_pt_pkt_feed(&d, c->bytes + j, 1);
					r = btr_pt_pkt_next(&d, &p);
				}
			}
			CHECK_EQ(r, c->len);
			CHECK(pkt_eq(&p, &want));
			CHECK_EQ(p.offset, 500);
			CHECK_EQ(btr_pt_pkt_offset(&d), 500 + c->len);
			CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_EOS);
		}
	}
}

static void test_bbp_block(void)
{
	static const uint8_t s[] = {
		0x02, 0x63, 0x82,                     /* bbp: 4-byte items */
		0x0c, 0x78, 0x56, 0x34, 0x12,         /* bip id 1 */
		0x19, 1, 2, 3, 4, 5, 6, 7,            /* tsc inside the block */
		0x14, 0xff, 0xff, 0xff, 0xff,         /* bip id 2 */
		0x02, 0x33,                           /* bep */
		0x0c,                                 /* a tnt.8 again */
		0x02, 0x63, 0x02,                     /* bbp: 8-byte items */
		0xfc, 1, 2, 3, 4, 5, 6, 7, 8,         /* bip id 31 */
		0x06,                                 /* tnt ends the block */
		0x0c,                                 /* so this is a tnt */
	};
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;

	btr_pt_pkt_init(&d, s, sizeof(s), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 3);
	CHECK_EQ(p.type, BTR_PT_BBP);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 5);
	CHECK_EQ(p.type, BTR_PT_BIP);
	CHECK_EQ(p.u.bip.id, 1);
	CHECK_EQ(p.u.bip.value, 0x12345678);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 8);
	CHECK_EQ(p.type, BTR_PT_TSC);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 5);
	CHECK_EQ(p.type, BTR_PT_BIP);
	CHECK_EQ(p.u.bip.id, 2);
	CHECK_EQ(p.u.bip.value, 0xffffffff);
	char text[64];
	btr_pt_pkt_format(&p, text, sizeof(text));
	CHECK_STR(text, "id 0x02: 0xffffffff");
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 2);
	CHECK_EQ(p.type, BTR_PT_BEP);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	CHECK_EQ(p.type, BTR_PT_TNT);
	CHECK_EQ(p.u.tnt.count, 2);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 3);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 9);
	CHECK_EQ(p.type, BTR_PT_BIP);
	CHECK_EQ(p.u.bip.id, 31);
	CHECK_EQ(p.u.bip.value, 0x0807060504030201ull);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	CHECK_EQ(p.type, BTR_PT_TNT);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	CHECK_EQ(p.type, BTR_PT_TNT);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_EOS);

	/* Encoding a BIP takes its payload size from .size. */
	uint8_t out[16];
	struct btr_pt_encoder e;
	struct btr_pt_packet bip = { .type = BTR_PT_BIP, .size = 5, .u.bip = { 0x12345678, 1 } };
	btr_pt_enc_init(&e, out, sizeof(out));
	CHECK_EQ(btr_pt_enc_packet(&e, &bip), 5);
	CHECK(!memcmp(out, s + 3, 5));
	bip.size = 7;
	CHECK_EQ(btr_pt_enc_packet(&e, &bip), -BTR_ERR_INVAL);
}

/* ---- random streams ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Fills @p with a random valid packet (any type), as the decoder is
 * expected to return it once encoded. */
static void random_packet(struct btr_pt_packet *p, struct btr_pt_encoder *e, int *in_block)
{
	static const uint8_t ipcs[] = { 0, 1, 2, 3, 4, 6 };
	memset(p, 0, sizeof(*p));
	if (*in_block) {
		if (rnd() % 4) {
			p->type = BTR_PT_BIP;
			p->size = (uint8_t)(*in_block + 1);
			p->u.bip.id = rnd() & 0x1f;
			p->u.bip.value = *in_block == 4 ? (uint32_t)rnd() : rnd();
			return;
		}
		p->type = BTR_PT_BEP;
		p->u.bep.ip = rnd() & 1;
		*in_block = 0;
		return;
	}
	p->type = (uint8_t)(1 + rnd() % (BTR_PT__COUNT - 1));
	switch (p->type) {
	case BTR_PT_TNT:
		if (rnd() & 1) {
			p->size = 1;
			p->u.tnt.count = (uint8_t)(1 + rnd() % 6);
		} else {
			p->size = 8;
			p->u.tnt.count = (uint8_t)(1 + rnd() % 47);
		}
		p->u.tnt.bits = rnd() & ((1ull << p->u.tnt.count) - 1);
		break;
	case BTR_PT_TIP: case BTR_PT_TIP_PGE: case BTR_PT_TIP_PGD: case BTR_PT_FUP: {
		uint64_t ip = rnd();
		p->u.ip.ipc = ipcs[rnd() % 6];
		switch (rnd() % 3) {
		case 0: ip = e->last_ip ^ (ip & 0xffff); break;
		case 1: ip = (uint64_t)((int64_t)(ip << 16) >> 16); break;
		}
		p->u.ip.ip = ip;
		break;
	}
	case BTR_PT_PIP: p->u.pip.cr3 = rnd() & 0x0000ffffffffffe0ull; p->u.pip.nr = rnd() & 1; break;
	case BTR_PT_MODE_EXEC:
		p->u.mode_exec.csl = rnd() & 1, p->u.mode_exec.csd = rnd() & 1, p->u.mode_exec.iflag = rnd() & 1;
		break;
	case BTR_PT_MODE_TSX: p->u.mode_tsx.intx = rnd() & 1, p->u.mode_tsx.abrt = rnd() & 1; break;
	case BTR_PT_CBR: p->u.cbr.ratio = (uint8_t)rnd(); break;
	case BTR_PT_TSC: p->u.tsc.tsc = rnd() >> 8; break;
	case BTR_PT_MTC: p->u.mtc.ctc = (uint8_t)rnd(); break;
	case BTR_PT_TMA: p->u.tma.ctc = (uint16_t)rnd(); p->u.tma.fc = rnd() & 0x1ff; break;
	case BTR_PT_CYC: p->u.cyc.value = rnd() >> (3 + rnd() % 61); break;
	case BTR_PT_VMCS: p->u.vmcs.base = rnd() & 0x000ffffffffff000ull; break;
	case BTR_PT_MNT: p->u.mnt.payload = rnd(); break;
	case BTR_PT_PTW:
		p->u.ptw.bytes = rnd() & 1 ? 8 : 4;
		p->u.ptw.payload = p->u.ptw.bytes == 8 ? rnd() : (uint32_t)rnd();
		p->u.ptw.ip = rnd() & 1;
		break;
	case BTR_PT_EXSTOP: p->u.exstop.ip = rnd() & 1; break;
	case BTR_PT_MWAIT: p->u.mwait.hints = (uint32_t)rnd(); p->u.mwait.ext = (uint32_t)rnd(); break;
	case BTR_PT_PWRE: p->u.pwre.hw = rnd() & 1; p->u.pwre.state = rnd() & 15; p->u.pwre.substate = rnd() & 15; break;
	case BTR_PT_PWRX:
		p->u.pwrx.last = rnd() & 15; p->u.pwrx.deepest = rnd() & 15; p->u.pwrx.wake = rnd() & 0xd;
		break;
	case BTR_PT_BBP:
		p->u.bbp.sz = rnd() & 1; p->u.bbp.type = rnd() & 0x1f;
		*in_block = p->u.bbp.sz ? 4 : 8;
		break;
	case BTR_PT_BIP: /* only inside a block */
		p->type = BTR_PT_PAD;
		break;
	case BTR_PT_BEP: p->u.bep.ip = rnd() & 1; break;
	case BTR_PT_CFE: p->u.cfe.ip = rnd() & 1; p->u.cfe.type = rnd() & 0x1f; p->u.cfe.vector = (uint8_t)rnd(); break;
	case BTR_PT_EVD: p->u.evd.type = rnd() & 0x3f; p->u.evd.payload = rnd(); break;
	case BTR_PT_TRIG:
		p->u.trig.trbv = (uint8_t)rnd(); p->u.trig.ip = rnd() & 1; p->u.trig.mult = rnd() & 1;
		p->u.trig.icnt_valid = rnd() & 1; p->u.trig.icnt = p->u.trig.icnt_valid ? (uint16_t)rnd() : 0;
		break;
	default: break;
	}
}

/* Encodes @n random packets into @buf; @want receives the packets the
 * decoder should return (sizes, reconstructed IPs and offsets filled). */
static size_t make_stream(uint8_t *buf, size_t cap, struct btr_pt_packet *want, size_t n)
{
	struct btr_pt_encoder e;
	int in_block = 0;

	btr_pt_enc_init(&e, buf, cap);
	for (size_t i = 0; i < n; i++) {
		struct btr_pt_packet *p = &want[i];
		uint64_t off = btr_pt_enc_size(&e);
		int r;

		random_packet(p, &e, &in_block);
		r = btr_pt_enc_packet(&e, p);
		CHECK(r > 0);
		if (r <= 0)
			return 0;
		p->size = (uint8_t)r;
		p->offset = off;
		if (p->type >= BTR_PT_TIP && p->type <= BTR_PT_FUP) {
			unsigned nb = p->u.ip.ipc == 0 ? 0 : p->u.ip.ipc == 1 ? 2 : p->u.ip.ipc == 2 ? 4 :
				      p->u.ip.ipc == 6 ? 8 : 6;
			p->u.ip.raw = nb == 8 ? p->u.ip.ip : p->u.ip.ip & ((1ull << (8 * nb)) - 1);
			p->u.ip.ip = p->u.ip.ipc ? e.last_ip : 0;
		}
		if (p->type == BTR_PT_MODE_EXEC || p->type == BTR_PT_MODE_TSX || p->type == BTR_PT_TNT ||
		    p->type == BTR_PT_PIP || p->type == BTR_PT_OVF || p->type == BTR_PT_PSB ||
		    p->type == BTR_PT_PSBEND || p->type == BTR_PT_TRACESTOP || p->type == BTR_PT_VMCS ||
		    p->type == BTR_PT_PTW || p->type == BTR_PT_MWAIT || p->type == BTR_PT_CFE ||
		    p->type == BTR_PT_EVD || p->type == BTR_PT_TIP || p->type == BTR_PT_TIP_PGE ||
		    p->type == BTR_PT_TIP_PGD)
			in_block = 0;   /* these end a BBP block */
	}
	return btr_pt_enc_size(&e);
}

/* Decodes @buf fed in pieces cut at the sorted offsets @cuts; returns the
 * number of packets that matched @want in order (all of them on success). */
static size_t decode_split(const uint8_t *buf, size_t len, const size_t *cuts, size_t ncuts,
			   const struct btr_pt_packet *want, size_t n)
{
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;
	size_t got = 0, start = 0, ci = 0;
	size_t end = ncuts ? cuts[0] : len;

	btr_pt_pkt_init(&d, buf, end, 0);
	for (;;) {
		int r = btr_pt_pkt_next(&d, &p);
		if (r > 0) {
			if (got >= n || !pkt_eq(&p, &want[got]) || p.offset != want[got].offset)
				return got;
			got++;
			continue;
		}
		if (r != -BTR_ERR_EOS && r != -BTR_ERR_AGAIN)
			return got;
		if (end == len)
			return r == -BTR_ERR_EOS ? got : (size_t)-1;
		start = end;
		ci++;
		end = ci < ncuts ? cuts[ci] : len;
		btr_pt_pkt_feed(&d, buf + start, end - start);
	}
}

static void test_random_streams(void)
{
	enum { N = 20000 };
	static struct btr_pt_packet want[N];
	static uint8_t buf[N * 16];
	size_t len = make_stream(buf, sizeof(buf), want, N);
	size_t cuts[64];
	int covered[BTR_PT__COUNT] = { 0 };

	CHECK(len > N);
	for (size_t i = 0; i < N; i++)
		covered[want[i].type] = 1;
	for (int t = BTR_PT_PAD; t < BTR_PT__COUNT; t++)
		CHECK(covered[t]);
	/* whole buffer */
	CHECK_EQ(decode_split(buf, len, NULL, 0, want, N), N);
	/* two pieces, cut at many positions (every position in the first 4 KiB) */
	for (size_t c = 0; c <= 4096; c++) {
		size_t got;
		cuts[0] = c;
		got = decode_split(buf, len, cuts, 1, want, N);
		if (got != N) {
			fprintf(stderr, "split at %zu: %zu of %d packets\n", c, got, N);
			CHECK_EQ(got, N);
			break;
		}
	}
	/* many random pieces, including empty and 1-byte ones */
	for (int round = 0; round < 200; round++) {
		size_t nc = 1 + rnd() % 63, got;
		for (size_t i = 0; i < nc; i++)
			cuts[i] = rnd() % (len + 1);
		for (size_t i = 1; i < nc; i++)     /* insertion sort */
			for (size_t j = i; j && cuts[j - 1] > cuts[j]; j--) {
				size_t t = cuts[j]; cuts[j] = cuts[j - 1]; cuts[j - 1] = t;
			}
		if (round & 1)   /* clusters of tiny pieces (stays sorted) */
			for (size_t i = 1; i < nc; i++)
				if (rnd() & 1) {
					size_t step = rnd() % 3, gap = cuts[i] - cuts[i - 1];
					cuts[i] = cuts[i - 1] + (step < gap ? step : gap);
				}
		got = decode_split(buf, len, cuts, nc, want, N);
		if (got != N) {
			fprintf(stderr, "random split round %d: %zu of %d packets\n", round, got, N);
			CHECK_EQ(got, N);
			break;
		}
	}
	/* byte by byte over a region */
	{
		size_t n1 = 0;
		static size_t bcuts[2000];
		for (size_t i = 1; i <= 2000 && i < len; i++)
			bcuts[n1++] = i;
		CHECK_EQ(decode_split(buf, len, bcuts, n1, want, N), N);
	}
	/* A truncated stream ends in -BTR_ERR_AGAIN at the last packet. */
	{
		struct btr_pt_pkt_decoder d;
		struct btr_pt_packet p;
		size_t i = N - 1, cut;
		int r;

		while (want[i].size < 2)
			i--;
		cut = want[i].offset + want[i].size - 1;
		btr_pt_pkt_init(&d, buf, cut, 0);
		size_t cnt = 0;
		while ((r = btr_pt_pkt_next(&d, &p)) > 0)
			cnt++;
		CHECK_EQ(r, -BTR_ERR_AGAIN);
		CHECK_EQ(cnt, i);
		CHECK_EQ(btr_pt_pkt_offset(&d), want[i].offset);
		CHECK_EQ(btr_pt_pkt_end(&d), -BTR_ERR_TRUNCATED);
		/* the whole stream ends cleanly */
		btr_pt_pkt_init(&d, buf, len, 0);
		while ((r = btr_pt_pkt_next(&d, &p)) > 0)
			;
		CHECK_EQ(r, -BTR_ERR_EOS);
		CHECK_EQ(btr_pt_pkt_end(&d), 0);
	}
}

/* ---- sync ---- */

static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

static void test_sync(void)
{
	uint8_t buf[256];
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;

	/* garbage, PSB at 37, packets, PSB at 100, packets */
	memset(buf, 0x05, sizeof(buf));
	buf[36] = 0x02;   /* a stray ext byte right before the PSB */
	memcpy(buf + 37, psb, 16);
	memset(buf + 53, 0x00, 47);
	memcpy(buf + 100, psb, 16);
	memset(buf + 116, 0x06, 140);
	btr_pt_pkt_init(&d, buf, sizeof(buf), 1000);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_BAD_PACKET);
	CHECK_EQ(btr_pt_pkt_sync_forward(&d), 0);
	CHECK_EQ(btr_pt_pkt_offset(&d), 1037);
	CHECK_EQ(btr_pt_pkt_sync_forward(&d), 0);     /* at or after: stays */
	CHECK_EQ(btr_pt_pkt_offset(&d), 1037);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 16);
	CHECK_EQ(p.type, BTR_PT_PSB);
	CHECK_EQ(p.offset, 1037);
	CHECK_EQ(btr_pt_pkt_sync_forward(&d), 0);
	CHECK_EQ(btr_pt_pkt_offset(&d), 1100);
	/* backward from here finds the PSB at 1037 */
	CHECK_EQ(btr_pt_pkt_sync_backward(&d), 0);
	CHECK_EQ(btr_pt_pkt_offset(&d), 1037);
	CHECK_EQ(btr_pt_pkt_sync_backward(&d), -BTR_ERR_EOS);
	CHECK_EQ(btr_pt_pkt_offset(&d), 1037);
	/* from the end backward: the PSB at 1100 */
	CHECK_EQ(btr_pt_pkt_sync_set(&d, 1000 + sizeof(buf)), 0);
	CHECK_EQ(btr_pt_pkt_sync_backward(&d), 0);
	CHECK_EQ(btr_pt_pkt_offset(&d), 1100);
	CHECK_EQ(btr_pt_pkt_sync_set(&d, 999), -BTR_ERR_INVAL);
	CHECK_EQ(btr_pt_pkt_sync_set(&d, 1000 + sizeof(buf) + 1), -BTR_ERR_INVAL);
	CHECK_EQ(btr_pt_pkt_sync_set(&d, 1116), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	CHECK_EQ(p.type, BTR_PT_TNT);
	CHECK_EQ(p.offset, 1116);

	/* The last IP is reset by PSB and sync. */
	{
		static const uint8_t s[] = { 0xdd, 1, 2, 3, 4, 5, 6, 7, 8,   /* fup full */
					     2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
					     0x3d, 0x34, 0x12 };                 /* fup update16 */
		btr_pt_pkt_init(&d, s, sizeof(s), 0);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 9);
		CHECK_EQ(p.u.ip.ip, 0x0807060504030201ull);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 16);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 3);
		CHECK_EQ(p.u.ip.ip, 0x1234);
	}

	/* A PSB split across buffers is found by a streaming sync, at every
	 * cut position; the search continues by itself after the feed. */
	for (size_t cut = 1; cut < 60; cut++) {
		uint8_t s[64];
		memset(s, 0x05, sizeof(s));
		memcpy(s + 30, psb, 16);
		s[46] = 0x06;
		btr_pt_pkt_init(&d, s, cut, 0);
		int r = btr_pt_pkt_sync_forward(&d);
		/* at 46 the run of 02 82 pairs might go on in the next buffer */
		if (cut > 46) {
			CHECK_EQ(r, 0);
		} else {
			CHECK_EQ(r, -BTR_ERR_EOS);
			CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_EOS);
			btr_pt_pkt_feed(&d, s + cut, sizeof(s) - cut);
		}
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 16);
		CHECK_EQ(p.type, BTR_PT_PSB);
		CHECK_EQ(p.offset, 30);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
		CHECK_EQ(p.type, BTR_PT_TNT);
		CHECK_EQ(p.offset, 46);
	}
	/* The same, with the PSB arriving in 1-byte buffers. */
	{
		uint8_t s[64];
		size_t i;
		int r;
		memset(s, 0x05, sizeof(s));
		memcpy(s + 30, psb, 16);
		s[46] = 0x06;
		btr_pt_pkt_init(&d, s, 1, 0);
		CHECK_EQ(btr_pt_pkt_sync_forward(&d), -BTR_ERR_EOS);
		for (i = 1, r = -BTR_ERR_EOS; i < sizeof(s) && r < 0; i++) {
			btr_pt_pkt_feed(&d, s + i, 1);
			r = btr_pt_pkt_next(&d, &p);
		}
		CHECK_EQ(r, 16);
		CHECK_EQ(p.offset, 30);
		CHECK_EQ(i, 47);   /* known once byte 46 shows the run of 02 82 ended */
	}
	/* No PSB at all: -BTR_ERR_EOS and nothing decoded. */
	memset(buf, 0x02, sizeof(buf));
	btr_pt_pkt_init(&d, buf, sizeof(buf), 0);
	CHECK_EQ(btr_pt_pkt_sync_forward(&d), -BTR_ERR_EOS);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_EOS);
	/* A bad packet in carried bytes; the sync then finds a PSB whose
	 * start arrives in one buffer and whose rest arrives in the next. */
	{
		uint8_t s[40];
		memset(s, 0, sizeof(s));
		s[10] = 0x02; s[11] = 0xc3;  /* a 3-byte opcode cut after 2 bytes ... */
		s[12] = 0x00;                /* ... that is not MNT */
		memcpy(s + 13, psb, 16);
		btr_pt_pkt_init(&d, s, 12, 0);
		int n = 0, r;
		while ((r = btr_pt_pkt_next(&d, &p)) > 0)
			n++;
		CHECK_EQ(n, 10);
		CHECK_EQ(r, -BTR_ERR_AGAIN);
		CHECK_EQ(btr_pt_pkt_offset(&d), 10);
		btr_pt_pkt_feed(&d, s + 12, 4);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_BAD_PACKET);
		CHECK_EQ(btr_pt_pkt_offset(&d), 10);
		CHECK_EQ(btr_pt_pkt_sync_forward(&d), -BTR_ERR_EOS);
		CHECK_EQ(btr_pt_pkt_offset(&d), 13);   /* the kept PSB prefix */
		btr_pt_pkt_feed(&d, s + 16, sizeof(s) - 16);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 16);
		CHECK_EQ(p.type, BTR_PT_PSB);
		CHECK_EQ(p.offset, 13);
		CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
		CHECK_EQ(p.offset, 29);
	}
}

/* One damaged byte costs only the packets up to the next PSB. */
static void test_recovery(void)
{
	enum { SEGS = 40, PER = 60 };
	static uint8_t buf[SEGS * (PER * 16 + 64)];
	static struct btr_pt_packet want[SEGS * (PER + 3)];
	struct btr_pt_encoder e;
	size_t n = 0;
	int in_block = 0;

	btr_pt_enc_init(&e, buf, sizeof(buf));
	for (int s = 0; s < SEGS; s++) {
		want[n] = (struct btr_pt_packet){ .type = BTR_PT_PSB, .size = 16, .offset = btr_pt_enc_size(&e) };
		btr_pt_enc_packet(&e, &want[n++]);
		for (int i = 0; i < PER; i++) {
			struct btr_pt_packet *p = &want[n];
			p->offset = btr_pt_enc_size(&e);
			do {
				in_block = 0;
				random_packet(p, &e, &in_block);
			} while (p->type == BTR_PT_PSB || p->type == BTR_PT_BBP || p->type == BTR_PT_TIP ||
				 p->type == BTR_PT_TIP_PGE || p->type == BTR_PT_TIP_PGD || p->type == BTR_PT_FUP);
			p->offset = btr_pt_enc_size(&e);
			int r = btr_pt_enc_packet(&e, p);
			p->size = (uint8_t)r;
			n++;
		}
	}
	size_t len = btr_pt_enc_size(&e);
	/* Damage the opcode of packet 10 of segment 7 and of packet 59 of
	 * segment 20 (the last before a PSB). */
	size_t bad1 = 7 * (PER + 1) + 11, bad2 = 20 * (PER + 1) + 60;
	buf[want[bad1].offset] = 0x05;
	buf[want[bad2].offset] = 0x05;

	for (int split = 0; split < 2; split++) {
		struct btr_pt_pkt_decoder d;
		struct btr_pt_packet p;
		size_t i = 0, errors = 0, mismatch = 0, pos = split ? 1000 : len;
		btr_pt_pkt_init(&d, buf, pos, 0);
		for (;;) {
			int r = btr_pt_pkt_next(&d, &p);
			if (r > 0) {
				/* skip the packets lost to damage */
				while (i < n && want[i].offset < p.offset)
					i++;
				if (i >= n || !pkt_eq(&p, &want[i]) || p.offset != want[i].offset)
					mismatch++;
				i++;
				continue;
			}
			if (r == -BTR_ERR_BAD_PACKET) {
				uint64_t off = btr_pt_pkt_offset(&d);
				CHECK(off == want[bad1].offset || off == want[bad2].offset);
				errors++;
				r = btr_pt_pkt_sync_forward(&d);
				if (r == 0) {
					/* resumes exactly at the next segment's PSB */
					size_t seg = (off == want[bad1].offset ? 7 : 20) + 1;
					CHECK_EQ(btr_pt_pkt_offset(&d), want[seg * (PER + 1)].offset);
				}
				continue;
			}
			if (pos == len)
				break;
			size_t next = pos + 1000 < len ? pos + 1000 : len;
			btr_pt_pkt_feed(&d, buf + pos, next - pos);
			pos = next;
		}
		CHECK_EQ(errors, 2);
		CHECK_EQ(mismatch, 0);
		CHECK_EQ(i, n);
	}
}

static void test_encoder(void)
{
	uint8_t buf[64];
	struct btr_pt_encoder e;
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;

	/* btr_pt_enc_ip picks the smallest compression. */
	static const struct { uint64_t ip; int ipc; } seq[] = {
		{ 0x401000, 3 },                 /* no last IP: uncompressed */
		{ 0x401234, 1 },
		{ 0x7f0000401234ull, 3 },        /* canonical: sext48 beats update48 */
		{ 0x7f0012345678ull, 2 },
		{ 0x1234000100000000ull, 6 },    /* not canonical, upper 16 differ */
		{ 0x1234000200000000ull, 4 },    /* upper 16 bits equal */
		{ 0xffffffff81000000ull, 3 },
		{ 0xffffffff81000010ull, 1 },
	};
	btr_pt_enc_init(&e, buf, sizeof(buf));
	for (size_t i = 0; i < ARRAY_SIZE(seq); i++) {
		size_t before = btr_pt_enc_size(&e);
		int r = btr_pt_enc_ip(&e, i & 1 ? BTR_PT_FUP : BTR_PT_TIP, seq[i].ip);
		CHECK(r > 0);
		CHECK_EQ(buf[before] >> 5, seq[i].ipc);
	}
	btr_pt_pkt_init(&d, buf, btr_pt_enc_size(&e), 0);
	for (size_t i = 0; i < ARRAY_SIZE(seq); i++) {
		CHECK(btr_pt_pkt_next(&d, &p) > 0);
		CHECK_EQ(p.type, i & 1 ? BTR_PT_FUP : BTR_PT_TIP);
		CHECK_EQ(p.u.ip.ip, seq[i].ip);
		CHECK_EQ(p.u.ip.ipc, seq[i].ipc);
	}
	CHECK_EQ(btr_pt_enc_ip(&e, BTR_PT_PSB, 0), -BTR_ERR_INVAL);
	/* Buffer full: nothing written. */
	btr_pt_enc_init(&e, buf, 8);
	CHECK_EQ(btr_pt_enc_ip(&e, BTR_PT_TIP, 1), -BTR_ERR_NOMEM);
	CHECK_EQ(btr_pt_enc_size(&e), 0);
	p = (struct btr_pt_packet){ .type = BTR_PT_MNT };
	CHECK_EQ(btr_pt_enc_packet(&e, &p), -BTR_ERR_NOMEM);
	CHECK_EQ(btr_pt_enc_size(&e), 0);
	p = (struct btr_pt_packet){ .type = BTR_PT_TNT, .u.tnt = { 0, 0 } };
	CHECK_EQ(btr_pt_enc_packet(&e, &p), -BTR_ERR_INVAL);
	p = (struct btr_pt_packet){ .type = BTR_PT_TNT, .size = 1, .u.tnt = { 0, 7 } };
	CHECK_EQ(btr_pt_enc_packet(&e, &p), -BTR_ERR_INVAL);
	p = (struct btr_pt_packet){ .type = BTR_PT_TIP, .u.ip = { 0, 0, 5 } };
	CHECK_EQ(btr_pt_enc_packet(&e, &p), -BTR_ERR_INVAL);
	p = (struct btr_pt_packet){ .type = BTR_PT_PTW, .u.ptw = { 0, 2, 0 } };
	CHECK_EQ(btr_pt_enc_packet(&e, &p), -BTR_ERR_INVAL);
	p = (struct btr_pt_packet){ .type = BTR_PT__COUNT };
	CHECK_EQ(btr_pt_enc_packet(&e, &p), -BTR_ERR_INVAL);

	/* PSB+ group */
	btr_pt_enc_init(&e, buf, sizeof(buf));
	e.last_ip = 0xffffffff81000000ull;
	CHECK_EQ(btr_pt_enc_psb(&e, 0x401000), 16 + 7 + 2);
	btr_pt_pkt_init(&d, buf, btr_pt_enc_size(&e), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 16);
	CHECK_EQ(p.type, BTR_PT_PSB);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 7);
	CHECK_EQ(p.type, BTR_PT_FUP);
	CHECK_EQ(p.u.ip.ip, 0x401000);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 2);
	CHECK_EQ(p.type, BTR_PT_PSBEND);
}

static void test_tnt_acc(void)
{
	uint8_t buf[64];
	struct btr_pt_encoder e;
	struct btr_pt_tnt_acc t;
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;
	/* 13 outcomes: 1101001110010 */
	static const int outcome[13] = { 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0 };
	char text[80];

	btr_pt_enc_init(&e, buf, sizeof(buf));
	btr_pt_tnt_init(&t, 0);
	for (int i = 0; i < 13; i++)
		CHECK(btr_pt_tnt_add(&e, &t, outcome[i]) >= 0);
	CHECK_EQ(btr_pt_enc_size(&e), 2);           /* two full 6-bit TNTs */
	CHECK_EQ(btr_pt_tnt_flush(&e, &t), 1);
	CHECK_EQ(btr_pt_tnt_flush(&e, &t), 0);
	btr_pt_pkt_init(&d, buf, btr_pt_enc_size(&e), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	btr_pt_pkt_format(&p, text, sizeof(text));
	CHECK_STR(text, "!!.!..");
	CHECK_STR(btr_pt_pkt_name(&p), "tnt.8");
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	btr_pt_pkt_format(&p, text, sizeof(text));
	CHECK_STR(text, "!!!..!");
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	btr_pt_pkt_format(&p, text, sizeof(text));
	CHECK_STR(text, ".");

	/* long mode: 47 outcomes make one tnt.64; 10 pending make another */
	btr_pt_enc_init(&e, buf, sizeof(buf));
	btr_pt_tnt_init(&t, 1);
	for (int i = 0; i < 57; i++)
		btr_pt_tnt_add(&e, &t, outcome[i % 13]);
	CHECK_EQ(btr_pt_enc_size(&e), 8);
	CHECK_EQ(btr_pt_tnt_flush(&e, &t), 8);
	btr_pt_pkt_init(&d, buf, btr_pt_enc_size(&e), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 8);
	CHECK_EQ(p.u.tnt.count, 47);
	CHECK_STR(btr_pt_pkt_name(&p), "tnt.64");
	btr_pt_pkt_format(&p, text, sizeof(text));
	CHECK_STR(text, "!!.!..!!!..!.!!.!..!!!..!.!!.!..!!!..!.!!.!..!!");
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 8);
	CHECK_EQ(p.u.tnt.count, 10);
	btr_pt_pkt_format(&p, text, sizeof(text));
	CHECK_STR(text, "!..!.!!.!.");

	/* buffer full: the outcome is refused, pending bits are kept */
	btr_pt_enc_init(&e, buf, 1);
	btr_pt_tnt_init(&t, 0);
	for (int i = 0; i < 6; i++)
		btr_pt_tnt_add(&e, &t, 1);
	CHECK_EQ(btr_pt_enc_size(&e), 1);
	for (int i = 0; i < 6; i++)
		CHECK_EQ(btr_pt_tnt_add(&e, &t, 0), 0);
	CHECK_EQ(btr_pt_tnt_add(&e, &t, 0), -BTR_ERR_NOMEM);
	CHECK_EQ(t.count, 6);
}

static void test_names(void)
{
	CHECK_STR(btr_pt_type_name(BTR_PT_TIP_PGE), "tip.pge");
	CHECK_STR(btr_pt_type_name(BTR_PT_MODE_EXEC), "mode.exec");
	CHECK_STR(btr_pt_type_name(BTR_PT_TRACESTOP), "stop");
	CHECK_STR(btr_pt_type_name(BTR_PT__COUNT), "invalid");
	CHECK_STR(btr_pt_type_name((enum btr_pt_type)-1), "invalid");
	for (int t = 0; t < BTR_PT__COUNT; t++)
		CHECK(btr_pt_type_name(t) && *btr_pt_type_name(t));
	/* truncating format */
	struct btr_pt_packet p = { .type = BTR_PT_MWAIT, .size = 10, .u.mwait = { 0x11, 0x22 } };
	char small[6];
	CHECK_EQ(btr_pt_pkt_format(&p, small, sizeof(small)), 20);
	CHECK_STR(small, "hints");
}

/* SKD007: with the erratum a CYC cut by an OVF (f7 02 f3) is one OVF;
 * without, two CYCs and a bad byte... as the bytes say. */
static void test_errata_skd007(void)
{
	static const uint8_t buf[] = { 0xf7, 0x02, 0xf3, 0x00, 0x00 };
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;

	btr_pt_pkt_init(&d, buf, sizeof(buf), 0);
	CHECK_EQ(btr_pt_pkt_set_errata(&d, BTR_PT_ERRATA_SKD007), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 3);
	CHECK_EQ(p.type, BTR_PT_OVF);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	CHECK_EQ(p.type, BTR_PT_PAD);
	btr_pt_pkt_init(&d, buf, sizeof(buf), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 2);
	CHECK_EQ(p.type, BTR_PT_CYC);
	CHECK_EQ(btr_pt_pkt_set_errata(&d, 0x80), -BTR_ERR_INVAL);
}

/* SKZ84: with the erratum a TMA with reserved bits set and the byte after
 * it are one invalid packet, and decoding goes on; without, a bad packet;
 * a TMA without reserved bits is a TMA either way. */
static void test_errata_skz84(void)
{
	static const uint8_t bad[] = { 0x02, 0x73, 0x34, 0x12, 0x01, 0x56, 0x00, 0xc4, 0x00 };
	static const uint8_t good[] = { 0x02, 0x73, 0x34, 0x12, 0x00, 0x56, 0x01, 0x00 };
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;

	btr_pt_pkt_init(&d, bad, sizeof(bad), 0);
	CHECK_EQ(btr_pt_pkt_set_errata(&d, BTR_PT_ERRATA_SKZ84), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 8);
	CHECK_EQ(p.type, BTR_PT_INVALID);
	CHECK_EQ(p.size, 8);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 1);
	CHECK_EQ(p.type, BTR_PT_PAD);
	CHECK_EQ(p.offset, 8);
	/* cut before the bogus byte: incomplete, not invalid */
	btr_pt_pkt_init(&d, bad, 7, 0);
	CHECK_EQ(btr_pt_pkt_set_errata(&d, BTR_PT_ERRATA_SKZ84), 0);
	CHECK(btr_pt_pkt_next(&d, &p) < 0);
	btr_pt_pkt_init(&d, bad, sizeof(bad), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), -BTR_ERR_BAD_PACKET);
	btr_pt_pkt_init(&d, good, sizeof(good), 0);
	CHECK_EQ(btr_pt_pkt_set_errata(&d, BTR_PT_ERRATA_SKZ84 | BTR_PT_ERRATA_SKD007), 0);
	CHECK_EQ(btr_pt_pkt_next(&d, &p), 7);
	CHECK_EQ(p.type, BTR_PT_TMA);
	CHECK_EQ(p.u.tma.fc, 0x156);
}

int main(void)
{
	test_table();
	test_bad();
	test_truncated();
	test_bbp_block();
	test_random_streams();
	test_sync();
	test_recovery();
	test_encoder();
	test_tnt_acc();
	test_names();
	test_errata_skd007();
	test_errata_skz84();
	return check_done();
}
