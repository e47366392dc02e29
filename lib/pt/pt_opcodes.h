/* pt_opcodes.h - the one table of Intel PT packet opcodes and sizes.
 *
 * Every parser and writer of PT bytes names packets by these constants:
 * the packet decoder (pt.c), the flow decoder's packet parser and its hot
 * TNT/TIP walk (ptflow.c, ptflow_walk.c), the PSB+ sizing of parallel
 * decoding (ptflow_par.c, through pt.c), the encoder (pt_enc.c, which the
 * QEMU plugin writes its PT with).  No other file spells an opcode byte;
 * adding a packet starts here (docs/architecture.md, "How to add a PT
 * packet").  Layouts: Intel SDM Vol. 3C, "Trace Packets and Data Types";
 * organised like libipt's pt_opcodes.h: opcodes, the masks that select
 * them, then sizes.  The names of packets (what `btr pt dump` prints) are
 * keyed by enum btr_pt_type in pt_format.c.
 *
 * All values are integer constant expressions, so a switch on them or a
 * table built from them costs what the bare numbers did. */
#ifndef BTR_PT_OPCODES_H
#define BTR_PT_OPCODES_H

#include <stddef.h>
#include <stdint.h>

#include "btr/pt.h"

/* ---- first byte ---- */
enum pt_opcode {
	PT_OPC_PAD = 0x00,
	PT_OPC_EXT = 0x02,       /* extended: the second byte is an enum pt_ext_opcode */
	/* (b & PT_OPM_IP): bits 7:5 are the IP compression (enum btr_pt_ipc) */
	PT_OPC_TIP_PGD = 0x01,
	PT_OPC_TIP = 0x0d,
	PT_OPC_TIP_PGE = 0x11,
	PT_OPC_FUP = 0x1d,
	PT_OPC_TSC = 0x19,
	PT_OPC_MTC = 0x59,
	PT_OPC_MODE = 0x99,      /* byte 1 bits 7:5: enum pt_mode_leaf */
	PT_OPC_TRIG = 0xd9,
	PT_OPC_TNT8 = 0x00,      /* (b & PT_OPM_TNT8), b not PAD or EXT: stop bit, up to 6 TNT bits */
	PT_OPC_CYC = 0x03,       /* (b & PT_OPM_CYC) */
	PT_OPC_CYC1 = 0x03,      /* (b & PT_OPM_CYC1): a CYC of one byte (no PT_CYC_EXP) */
	PT_OPC_BIP = 0x04,       /* (b & PT_OPM_BIP), only inside a BBP block */
};

/* Masks selecting the opcode bits of a first byte. */
enum pt_opcode_mask {
	PT_OPM_TNT8 = 0x01,
	PT_OPM_IP = 0x1f,
	PT_OPM_CYC = 0x03,
	PT_OPM_CYC1 = 0x07,
	PT_OPM_BIP = 0x07,
};

enum {
	PT_OPS_IPC = 5,          /* shift of the IP compression in an IP packet's first byte */
	PT_OPS_BIP = 3,          /* shift of a BIP's register id */
	PT_CYC_EXP = 0x04,       /* CYC byte 0: more bytes follow */
	PT_CYC_MORE = 0x01,      /* CYC bytes 1..: more bytes follow */
};

/* ---- second byte after PT_OPC_EXT ---- */
enum pt_ext_opcode {
	PT_EXT_TNT64 = 0xa3,
	PT_EXT_PIP = 0x43,
	PT_EXT_TRACESTOP = 0x83,
	PT_EXT_CBR = 0x03,
	PT_EXT_VMCS = 0xc8,
	PT_EXT_OVF = 0xf3,
	PT_EXT_PSB = 0x82,
	PT_EXT_PSBEND = 0x23,
	PT_EXT_TMA = 0x73,
	PT_EXT_EXT2 = 0xc3,      /* 3-byte opcodes: the third byte is an enum pt_ext2_opcode */
	PT_EXT_EXSTOP = 0x62,
	PT_EXT_EXSTOP_IP = 0xe2, /* EXSTOP with its IP bit (a FUP follows) */
	PT_EXT_MWAIT = 0xc2,
	PT_EXT_PWRE = 0x22,
	PT_EXT_PWRX = 0xa2,
	PT_EXT_BBP = 0x63,
	PT_EXT_BEP = 0x33,
	PT_EXT_BEP_IP = 0xb3,    /* BEP with its IP bit */
	PT_EXT_CFE = 0x13,
	PT_EXT_EVD = 0x53,
	PT_EXT_PTW = 0x12,       /* (b & PT_OPM_PTW): bits 6:5 payload size, bit 7 IP */
};

enum {
	PT_OPM_PTW = 0x1f,
	PT_OPS_PTW_PLC = 5,      /* shift of PTW's PayloadBytes field (2 bits: 0 4 bytes, 1 8, others reserved) */
	PT_EXT_IP_BIT = 0x80,    /* the IP bit of PTW, EXSTOP, BEP (their opcode byte) */
};

/* ---- third byte after PT_OPC_EXT PT_EXT_EXT2 ---- */
enum pt_ext2_opcode {
	PT_EXT2_MNT = 0x88,
};

/* ---- payload fields that decide a packet's size or kind ---- */
enum {
	PT_MODE_LEAF_MASK = 0xe0,
	PT_MODE_EXEC = 0x00,     /* MODE leaves (byte 1 & PT_MODE_LEAF_MASK) */
	PT_MODE_TSX = 0x20,
	PT_TRIG_IP = 0x80,       /* TRIG byte 1: a FUP follows */
	PT_TRIG_ICNT = 0x40,     /* TRIG byte 1: ICNT[15:0] follows (PT_SIZE_TRIG_ICNT) */
	PT_TRIG_MULT = 0x20,
	PT_TRIG_RSVD = 0x1f,     /* TRIG byte 1: reserved, must be 0 */
	PT_BBP_SZ = 0x80,        /* BBP byte 2: BIPs carry 4 bytes, else 8 */
};

/* IP payload bytes per compression (0 for suppressed and the reserved
 * encodings 5 and 7, which PT_IPC_OK rejects), and the same with 0xff
 * for the reserved ones (a table lookup decides both). */
#define PT_IPC_BYTES(ipc)                                                                              \
	((ipc) == BTR_PT_IPC_UPDATE16 ? 2 : (ipc) == BTR_PT_IPC_UPDATE32 ? 4 : (ipc) == BTR_PT_IPC_SEXT48 ? 6 \
	 : (ipc) == BTR_PT_IPC_UPDATE48 ? 6 : (ipc) == BTR_PT_IPC_FULL ? 8 : 0)
#define PT_IPC_OK(ipc) ((ipc) != 5 && (ipc) != 7)
#define PT_IPC_LEN(ipc) (PT_IPC_OK(ipc) ? PT_IPC_BYTES(ipc) : 0xff)

/* The type of an IP packet by its first byte, 0 if it is none. */
#define PT_IP_TYPE(b)                                                                                  \
	(((b) & PT_OPM_IP) == PT_OPC_TIP ? BTR_PT_TIP : ((b) & PT_OPM_IP) == PT_OPC_TIP_PGE ? BTR_PT_TIP_PGE \
	 : ((b) & PT_OPM_IP) == PT_OPC_TIP_PGD ? BTR_PT_TIP_PGD : ((b) & PT_OPM_IP) == PT_OPC_FUP ? BTR_PT_FUP : 0)

/* ---- the table: one record per packet opcode ----
 *
 * Like libipt's packet table: each row is one opcode (a first byte, or
 * PT_OPC_EXT and a second byte, or PT_OPC_EXT PT_EXT_EXT2 and a third),
 * the mask of its last opcode byte (the bits not in the mask are payload:
 * an IP packet's compression, a PTW's size and IP bits, EXSTOP's and
 * BEP's IP bit, a short TNT's bits), its size, how the size follows from
 * the payload where it is not fixed (the size function, enum pt_size_fn),
 * flags, and its name (libipt ptdump's, what `btr pt dump` prints).
 * Everything that reads or writes PT bytes reads it:
 *  - the sizes below (PT_SIZE_<ID>) are this table's SIZE column, so the
 *    hand-written switches of the packet decoder's and the flow decoder's
 *    fast paths (pt.c, ptflow.c, ptflow_walk.c) compile to the numbers;
 *  - pt_pkt_len() (the one size function, below) gives every other packet
 *    its size from the row: the packet decoder's extended packets
 *    (pt.c decode_ext), the flow decoder's extended packets (ptflow.c
 *    packet()), PSB+ sizing (pt_psb_plus_len(), pt_packets.c) and the
 *    BBP rule (pt_bbp_keeps());
 *  - the encoder (pt_enc.c) writes a packet's opcode bytes from its row
 *    (pt_put_opc()), the formatter (pt_format.c) takes its names from it.
 * Rows are tried in order: a first byte is PT_OPC_EXT's before TNT8's
 * (both have bit 0 clear), PAD's before TNT8's.  BIP (PT_F_BBP_ONLY)
 * reads as a TNT8 outside a BBP block and is never found by its first
 * byte; the decoders check for it inside a block.  MODE is one opcode
 * whose leaf (byte 1 & PT_MODE_LEAF_MASK) is payload: PT_MODE_LEAVES.
 *
 * X(A, ID, TYPE, NB, B0, B1, B2, MASK, SIZE, SZFN, FLAGS, NAME), A being
 * PT_PACKETS's second argument, passed through:
 *   NB opcode bytes B0[, B1[, B2]]; MASK: bits of the last opcode byte
 *   that select it; SIZE: bytes with the opcode, the least size for a
 *   size function. */
enum pt_size_fn {
	PT_SZ_FIXED = 0,
	PT_SZ_IP,    /* 1 + PT_IPC_BYTES(b >> PT_OPS_IPC); the reserved compressions start no packet */
	PT_SZ_CYC,   /* 1, and while PT_CYC_EXP (byte 0) / PT_CYC_MORE (bytes 1..) one more byte */
	PT_SZ_TRIG,  /* 3, or 5 with PT_TRIG_ICNT in byte 1 */
	PT_SZ_PTW,   /* 2 + 4 or 8 payload bytes by byte 1's PayloadBytes; the reserved ones start no packet */
	PT_SZ_TMA,   /* 7; under erratum SKZ84 a TMA with reserved bits set carries one bogus byte more */
	PT_SZ_BIP,   /* 1 + 4 or 8 bytes, as the BBP that opened the block said */
};

enum pt_pkt_flag {
	PT_F_PSBPLUS = 1,   /* may stand between a PSB and its PSBEND (pt_psb_plus_len()) */
	PT_F_BBP_KEEP = 2,  /* leaves an open BBP block open (pt_bbp_keeps()) */
	PT_F_BBP_ONLY = 4,  /* only inside a BBP block (BIP) */
};

#define PT_PSB_KEEP (PT_F_PSBPLUS | PT_F_BBP_KEEP)
/* clang-format off */
#define PT_PACKETS(X, A) \
	/*  A, ID      TYPE               NB  B0              B1                B2           MASK         SIZE              SZFN         FLAGS          NAME      */ \
	X(A, PAD,       BTR_PT_PAD,        1, PT_OPC_PAD,     0,                0,            0xff,        1,                PT_SZ_FIXED, PT_PSB_KEEP,   "pad") \
	X(A, TNT8,      BTR_PT_TNT,        1, PT_OPC_TNT8,    0,                0,            PT_OPM_TNT8, 1,                PT_SZ_FIXED, 0,             "tnt.8") \
	X(A, CYC,       BTR_PT_CYC,        1, PT_OPC_CYC,     0,                0,            PT_OPM_CYC,  1,                PT_SZ_CYC,   PT_PSB_KEEP,   "cyc") \
	X(A, TIP,       BTR_PT_TIP,        1, PT_OPC_TIP,     0,                0,            PT_OPM_IP,   1,                PT_SZ_IP,    0,             "tip") \
	X(A, TIP_PGE,   BTR_PT_TIP_PGE,    1, PT_OPC_TIP_PGE, 0,                0,            PT_OPM_IP,   1,                PT_SZ_IP,    0,             "tip.pge") \
	X(A, TIP_PGD,   BTR_PT_TIP_PGD,    1, PT_OPC_TIP_PGD, 0,                0,            PT_OPM_IP,   1,                PT_SZ_IP,    0,             "tip.pgd") \
	X(A, FUP,       BTR_PT_FUP,        1, PT_OPC_FUP,     0,                0,            PT_OPM_IP,   1,                PT_SZ_IP,    PT_PSB_KEEP,   "fup") \
	X(A, TSC,       BTR_PT_TSC,        1, PT_OPC_TSC,     0,                0,            0xff,        8,                PT_SZ_FIXED, PT_PSB_KEEP,   "tsc") \
	X(A, MTC,       BTR_PT_MTC,        1, PT_OPC_MTC,     0,                0,            0xff,        2,                PT_SZ_FIXED, PT_PSB_KEEP,   "mtc") \
	X(A, MODE,      BTR_PT_MODE_EXEC,  1, PT_OPC_MODE,    0,                0,            0xff,        2,                PT_SZ_FIXED, PT_F_PSBPLUS,  "mode") \
	X(A, TRIG,      BTR_PT_TRIG,       1, PT_OPC_TRIG,    0,                0,            0xff,        3,                PT_SZ_TRIG,  PT_F_BBP_KEEP, "trig") \
	X(A, BIP,       BTR_PT_BIP,        1, PT_OPC_BIP,     0,                0,            PT_OPM_BIP,  5,                PT_SZ_BIP,   PT_F_BBP_ONLY, "bip") \
	X(A, TNT64,     BTR_PT_TNT,        2, PT_OPC_EXT,     PT_EXT_TNT64,     0,            0xff,        8,                PT_SZ_FIXED, 0,             "tnt.64") \
	X(A, PIP,       BTR_PT_PIP,        2, PT_OPC_EXT,     PT_EXT_PIP,       0,            0xff,        8,                PT_SZ_FIXED, PT_F_PSBPLUS,  "pip") \
	X(A, TRACESTOP, BTR_PT_TRACESTOP,  2, PT_OPC_EXT,     PT_EXT_TRACESTOP, 0,            0xff,        2,                PT_SZ_FIXED, 0,             "stop") \
	X(A, CBR,       BTR_PT_CBR,        2, PT_OPC_EXT,     PT_EXT_CBR,       0,            0xff,        4,                PT_SZ_FIXED, PT_PSB_KEEP,   "cbr") \
	X(A, VMCS,      BTR_PT_VMCS,       2, PT_OPC_EXT,     PT_EXT_VMCS,      0,            0xff,        7,                PT_SZ_FIXED, PT_F_PSBPLUS,  "vmcs") \
	X(A, OVF,       BTR_PT_OVF,        2, PT_OPC_EXT,     PT_EXT_OVF,       0,            0xff,        2,                PT_SZ_FIXED, 0,             "ovf") \
	X(A, PSB,       BTR_PT_PSB,        2, PT_OPC_EXT,     PT_EXT_PSB,       0,            0xff,        BTR_PT_PSB_SIZE,  PT_SZ_FIXED, PT_F_PSBPLUS,  "psb") \
	X(A, PSBEND,    BTR_PT_PSBEND,     2, PT_OPC_EXT,     PT_EXT_PSBEND,    0,            0xff,        2,                PT_SZ_FIXED, 0,             "psbend") \
	X(A, TMA,       BTR_PT_TMA,        2, PT_OPC_EXT,     PT_EXT_TMA,       0,            0xff,        7,                PT_SZ_TMA,   PT_PSB_KEEP,   "tma") \
	X(A, MNT,       BTR_PT_MNT,        3, PT_OPC_EXT,     PT_EXT_EXT2,      PT_EXT2_MNT,  0xff,        11,               PT_SZ_FIXED, PT_F_BBP_KEEP, "mnt") \
	X(A, EXSTOP,    BTR_PT_EXSTOP,     2, PT_OPC_EXT,     PT_EXT_EXSTOP,    0,            0x7f,        2,                PT_SZ_FIXED, PT_F_BBP_KEEP, "exstop") \
	X(A, MWAIT,     BTR_PT_MWAIT,      2, PT_OPC_EXT,     PT_EXT_MWAIT,     0,            0xff,        10,               PT_SZ_FIXED, 0,             "mwait") \
	X(A, PWRE,      BTR_PT_PWRE,       2, PT_OPC_EXT,     PT_EXT_PWRE,      0,            0xff,        4,                PT_SZ_FIXED, PT_F_BBP_KEEP, "pwre") \
	X(A, PWRX,      BTR_PT_PWRX,       2, PT_OPC_EXT,     PT_EXT_PWRX,      0,            0xff,        7,                PT_SZ_FIXED, PT_F_BBP_KEEP, "pwrx") \
	X(A, BBP,       BTR_PT_BBP,        2, PT_OPC_EXT,     PT_EXT_BBP,       0,            0xff,        3,                PT_SZ_FIXED, 0,             "bbp") \
	X(A, BEP,       BTR_PT_BEP,        2, PT_OPC_EXT,     PT_EXT_BEP,       0,            0x7f,        2,                PT_SZ_FIXED, 0,             "bep") \
	X(A, CFE,       BTR_PT_CFE,        2, PT_OPC_EXT,     PT_EXT_CFE,       0,            0xff,        4,                PT_SZ_FIXED, 0,             "cfe") \
	X(A, EVD,       BTR_PT_EVD,        2, PT_OPC_EXT,     PT_EXT_EVD,       0,            0xff,        11,               PT_SZ_FIXED, 0,             "evd") \
	X(A, PTW,       BTR_PT_PTW,        2, PT_OPC_EXT,     PT_EXT_PTW,       0,            PT_OPM_PTW,  6,                PT_SZ_PTW,   0,             "ptw")
/* clang-format on */

/* Row ids (0: no packet) and the sizes, from the table. */
enum pt_pk {
	PT_PK_NONE = 0,
#define PT_X_ID(a, id, ty, nb, b0, b1, b2, m, sz, fn, fl, nm) PT_PK_##id,
	PT_PACKETS(PT_X_ID, 0)
#undef PT_X_ID
	PT_PK__COUNT
};

enum pt_packet_size {
#define PT_X_SIZE(a, id, ty, nb, b0, b1, b2, m, sz, fn, fl, nm) PT_SIZE_##id = (sz),
	PT_PACKETS(PT_X_SIZE, 0)
#undef PT_X_SIZE
	/* the sizes the size functions compute */
	PT_SIZE_EXT = 2,                       /* an extended opcode; the least extended packet */
	PT_SIZE_IP0 = PT_SIZE_TIP,             /* IP packets: + PT_IPC_BYTES(ipc) */
	PT_SIZE_CYC1 = PT_SIZE_CYC,            /* a CYC without PT_CYC_EXP */
	PT_SIZE_CYC_MAX = 15,                  /* longer CYCs start no packet (the packet decoder takes 10 at most: 64 bits) */
	PT_SIZE_TRIG_ICNT = PT_SIZE_TRIG + 2,  /* with ICNT[15:0] */
	PT_SIZE_PTW4 = PT_SIZE_PTW,
	PT_SIZE_PTW8 = PT_SIZE_PTW + 4,
	PT_SIZE_BIP4 = PT_SIZE_BIP,
	PT_SIZE_BIP8 = PT_SIZE_BIP + 4,
};

/* MODE's leaves: X(LEAF, TYPE, NAME). */
#define PT_MODE_LEAVES(X)                            \
	X(PT_MODE_EXEC, BTR_PT_MODE_EXEC, "mode.exec") \
	X(PT_MODE_TSX, BTR_PT_MODE_TSX, "mode.tsx")

struct pt_pkt_desc {
	uint8_t type;        /* enum btr_pt_type */
	uint8_t nb;          /* opcode bytes */
	uint8_t opc[3];      /* the opcode bytes */
	uint8_t mask;        /* the bits of opc[nb - 1] that select the packet */
	uint8_t size;        /* bytes with the opcode; the least for a size function */
	uint8_t szfn;        /* enum pt_size_fn */
	uint8_t flags;       /* enum pt_pkt_flag */
	const char *name;    /* libipt ptdump's name */
};

/* The row of a first byte @b (PT_PK_NONE for PT_OPC_EXT, whose second
 * byte selects, and for bytes that start no packet), and of a second byte
 * @b after PT_OPC_EXT, as constant expressions: the first row in table
 * order whose opcode byte the byte is under its mask (the mask applies to
 * the last opcode byte).  The dispatch tables are built from these. */
#define PT_X_FIRST(a, id, ty, nb, b0, b1, b2, m, sz, fn, fl, nm)                                   \
	((b0) != PT_OPC_EXT && !((fl) & PT_F_BBP_ONLY) && ((a) & ((nb) == 1 ? (m) : 0xff)) == (b0)) ? PT_PK_##id :
#define PT_X_EXT(a, id, ty, nb, b0, b1, b2, m, sz, fn, fl, nm)                                     \
	((b0) == PT_OPC_EXT && ((a) & ((nb) == 2 ? (m) : 0xff)) == (b1)) ? PT_PK_##id :
#define PT_FIRST_PK(b) ((b) == PT_OPC_EXT ? PT_PK_NONE : PT_PACKETS(PT_X_FIRST, (b)) PT_PK_NONE)
#define PT_EXT_PK(b) (PT_PACKETS(PT_X_EXT, (b)) PT_PK_NONE)

/* The table (pt_packets.c), indexed by enum pt_pk, and its two dispatch
 * indexes: the row of a first byte (0 for PT_OPC_EXT and unknown bytes),
 * the row of a second byte after PT_OPC_EXT. */
extern const struct pt_pkt_desc btr__pt_pkts[PT_PK__COUNT];
extern const uint8_t btr__pt_by_first[256];
extern const uint8_t btr__pt_by_ext[256];

/* The row of the packet starting at @p (@n > 0 bytes): PT_PK_NONE if the
 * bytes start no packet, -1 if @n bytes cannot tell.  Outside a BBP block
 * (a BIP's first byte finds TNT8). */
static inline int pt_pkt_find(const uint8_t *p, size_t n)
{
	if (p[0] != PT_OPC_EXT)
		return btr__pt_by_first[p[0]];
	if (n < 2)
		return -1;
	const int id = btr__pt_by_ext[p[1]];
	if (btr__pt_pkts[id].nb == 3) {
		if (n < 3)
			return -1;
		if (p[2] != btr__pt_pkts[id].opc[2])
			return PT_PK_NONE;
	}
	return id;
}

/* Options of pt_pkt_len(). */
enum {
	PT_LEN_SKZ84 = 1,   /* erratum SKZ84: a TMA with reserved bits set is one byte longer */
	PT_LEN_BIP4 = 2,    /* a BIP carries 4 bytes (its BBP's PT_BBP_SZ), else 8 */
};

/* The one size function: the size of the packet of row @id starting at
 * @p (@n bytes available), 0 if @n bytes do not hold it, -1 if the bytes
 * start no packet (a reserved IP compression or PTW size).  Reserved bits
 * elsewhere do not change a size and are the decoders' to check. */
static inline int pt_pkt_len(int id, const uint8_t *p, size_t n, unsigned opts)
{
	if (id <= PT_PK_NONE)
		return -1;
	const struct pt_pkt_desc *r = &btr__pt_pkts[id];
	size_t sz = r->size;

	switch ((enum pt_size_fn)r->szfn) {
	case PT_SZ_FIXED:
		break;
	case PT_SZ_IP: {
		const unsigned ipc = p[0] >> PT_OPS_IPC;
		if (!PT_IPC_OK(ipc))
			return -1;
		sz += PT_IPC_BYTES(ipc);
		break;
	}
	case PT_SZ_CYC:
		if (p[0] & PT_CYC_EXP)
			do {
				if (sz >= n)
					return 0;
				if (sz >= PT_SIZE_CYC_MAX)
					return -1;
			} while (p[sz++] & PT_CYC_MORE);
		break;
	case PT_SZ_TRIG:
		if (n < 2)
			return 0;
		if (p[1] & PT_TRIG_ICNT)
			sz = PT_SIZE_TRIG_ICNT;
		break;
	case PT_SZ_PTW: {
		const unsigned plc = (p[1] >> PT_OPS_PTW_PLC) & 3;
		if (plc > 1)
			return -1;
		sz = plc ? PT_SIZE_PTW8 : PT_SIZE_PTW4;
		break;
	}
	case PT_SZ_TMA:
		if ((opts & PT_LEN_SKZ84) && n >= sz && (p[4] || (p[6] & 0xfe)))
			sz++;
		break;
	case PT_SZ_BIP:
		sz = opts & PT_LEN_BIP4 ? PT_SIZE_BIP4 : PT_SIZE_BIP8;
		break;
	}
	return n < sz ? 0 : (int)sz;
}

/* Writes the opcode bytes of row @id to @b; returns their number.  The
 * payload bits of the last byte are the caller's to OR in. */
static inline unsigned pt_put_opc(uint8_t *b, int id)
{
	const struct pt_pkt_desc *r = &btr__pt_pkts[id];

	for (unsigned i = 0; i < r->nb; i++)
		b[i] = r->opc[i];
	return r->nb;
}

/* PSB+: the bytes from a PSB (at @p, @n bytes) to the end of its PSBEND,
 * 0 if they are no PSB+ or are cut; pt_packets.c says which packets may
 * stand in it. */
size_t btr__pt_psb_plus_len(const uint8_t *p, size_t n);

/* BBP blocks (PEBS via PT, SDM Vol. 3B "PEBS output to Intel Processor
 * Trace"): after a BBP, a byte xxxxx100b (PT_OPC_BIP) starts a BIP, not
 * a short TNT, until the block ends.  Whether the packet at @p (not a
 * BIP; p[1] is read after PT_OPC_EXT only) leaves an open block open:
 * timing and power packets (PAD, MTC, CYC, TSC, TMA, CBR, MNT, EXSTOP,
 * PWRE, PWRX, TRIG) and FUP do, BBP starts a new block, BEP ends it, any
 * other packet ends it (perf's intel_pt_upd_pkt_ctx).  Both decoders
 * apply it: pt.c's decode() and the flow parser (ptflow.c). */
static inline int pt_bbp_keeps(const uint8_t *p)
{
	/* p[1] is read only after PT_OPC_EXT: an EXT2 row (MNT) keeps a
	 * block open by its second byte. */
	const int id = p[0] == PT_OPC_EXT ? btr__pt_by_ext[p[1]] : btr__pt_by_first[p[0]];
	return (btr__pt_pkts[id].flags & PT_F_BBP_KEEP) != 0;
}

/* PSB: PT_SIZE_PSB bytes of PT_OPC_EXT PT_EXT_PSB pairs. */
#define PT_PSB_PAIRS                                                                                   \
	PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB,  \
		PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB
_Static_assert(PT_SIZE_PSB == 16, "PT_PSB_PAIRS spells 16 bytes");
/* (include/btr/pt.h spells the same bytes as the string BTR_PT_PSB_PATTERN
 * for the CLI; tests/test_pt_lengths.c checks they agree.) */
_Static_assert(sizeof(BTR_PT_PSB_PATTERN) == PT_SIZE_PSB + 1, "BTR_PT_PSB_PATTERN is one PSB");

#endif
