/* pt.c - Intel PT packet decoder (the encoder is in pt_enc.c).
 *
 * Reference: Intel SDM Vol. 3C, chapter "Intel Processor Trace", section
 * "Trace Packets and Data Types" (packet layouts), and Intel's libipt,
 * which serves as the oracle in tests/test_pt_libipt.c: where the SDM
 * leaves a reserved encoding open we reject what libipt rejects, so both
 * decoders see the same packet sequence.
 *
 * Design (see also docs/pt-dump.md):
 *  - One decode function, decode(), works on a pointer and the number of
 *    bytes available there.  It dispatches on a 256-entry first-byte table
 *    through one switch (a jump table, no function pointers) and checks
 *    the available length once per packet, so the common packets (TNT,
 *    TIP/FUP, PAD, MTC, CYC) cost a table load, a compare and a few
 *    stores.  It changes decoder state (last IP, BBP block) only on
 *    success, so a packet that does not fit can be retried later.
 *  - Streaming: a packet cut at the end of a buffer is moved into the
 *    small carry array and completed from the next buffer; only this
 *    boundary case copies bytes.
 *  - Throughput: btr_pt_pkt_next_batch and btr_pt_pkt_next_compact
 *    decode 64-byte blocks at a time ("the batch paths" below; with
 *    AVX-512 VBMI, detected at run time, the compact one without any
 *    serial walk), everything unusual falls back to btr_pt_pkt_next.
 */
#include "btr/pt.h"
#include "internal.h"
#include "pt_opcodes.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(BTR_PT_NO_AVX512)
#include <immintrin.h>
#define PT_AVX512 1
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pt.c assumes a little-endian host (x86-64)"
#endif

/* ---- first-byte dispatch table ---- */

enum pt_class {
	C_BAD = 0,
	C_PAD,
	C_TNT8,
	C_EXT,
	C_CYC,
	C_IP,
	C_TSC,
	C_MTC,
	C_MODE,
	C_TRIG,
};

/* A table entry packs class, packet type, fixed size and an auxiliary
 * value into one word: cls | type << 8 | size << 16 | aux << 24. */
#define PE(cls, type, size, aux) ((uint32_t)(cls) | (uint32_t)(type) << 8 | (uint32_t)(size) << 16 | (uint32_t)(aux) << 24)

/* Payload bytes per IP compression, the reserved ones, the type of an IP
 * packet (pt_opcodes.h). */
#define IPB(ipc) PT_IPC_BYTES(ipc)
#define IPOK(ipc) PT_IPC_OK(ipc)
#define IPT(b) PT_IP_TYPE(b)
/* Index of the TNT stop bit (the highest set bit) minus one: the number
 * of branches in a 1-byte TNT. */
#define TNTN(b) ((b) & 0x80 ? 6 : (b) & 0x40 ? 5 : (b) & 0x20 ? 4 : (b) & 0x10 ? 3 : (b) & 0x08 ? 2 : 1)

/* The class of a first byte follows its row in the packet table
 * (PT_FIRST_PK, pt_opcodes.h); the sizes are the table's. */
#define ENT(b) ENT_ROW(b, PT_FIRST_PK(b))
#define ENT_ROW(b, r)                                                                              \
	((b) == PT_OPC_EXT ? PE(C_EXT, 0, 0, 0) :                                                  \
	 (r) == PT_PK_PAD ? PE(C_PAD, BTR_PT_PAD, PT_SIZE_PAD, 0) :                                \
	 (r) == PT_PK_TNT8 ? PE(C_TNT8, BTR_PT_TNT, PT_SIZE_TNT8, TNTN(b)) :                       \
	 (r) == PT_PK_CYC ? PE(C_CYC, BTR_PT_CYC, 0, 0) :                                          \
	 ((r) >= PT_PK_TIP && (r) <= PT_PK_FUP && IPOK((b) >> PT_OPS_IPC)) ?                       \
		PE(C_IP, IPT(b), PT_SIZE_IP0 + IPB((b) >> PT_OPS_IPC), (b) >> PT_OPS_IPC) :        \
	 (r) == PT_PK_TSC ? PE(C_TSC, BTR_PT_TSC, PT_SIZE_TSC, 0) :                                \
	 (r) == PT_PK_MTC ? PE(C_MTC, BTR_PT_MTC, PT_SIZE_MTC, 0) :                                \
	 (r) == PT_PK_MODE ? PE(C_MODE, 0, PT_SIZE_MODE, 0) :                                      \
	 (r) == PT_PK_TRIG ? PE(C_TRIG, BTR_PT_TRIG, PT_SIZE_TRIG, 0) :                            \
	 PE(C_BAD, 0, 0, 0))
_Static_assert(PT_PK_TIP + 1 == PT_PK_TIP_PGE && PT_PK_TIP_PGE + 1 == PT_PK_TIP_PGD && PT_PK_TIP_PGD + 1 == PT_PK_FUP,
	       "the IP packets' rows are adjacent");
#define E4(b) ENT(b), ENT((b) + 1), ENT((b) + 2), ENT((b) + 3)
#define E16(b) E4(b), E4((b) + 4), E4((b) + 8), E4((b) + 12)
#define E64(b) E16(b), E16((b) + 16), E16((b) + 32), E16((b) + 48)

static const uint32_t pt_tab[256] = { E64(0), E64(64), E64(128), E64(192) };

/* ---- the fast path table ----
 *
 * For the packets whose size follows from the first byte and that need no
 * validation (PAD, 1-byte TNT, 1-byte CYC, TIP/TIP.PGE/TIP.PGD/FUP, TSC,
 * MTC: almost all packets of a real trace) the decoder takes no branch on
 * the packet type: on a mix of packet types a switch mispredicts on most
 * packets.  With raw = (the 8 bytes after the opcode) & mask, each entry
 * says how to compute the payload union with masks alone:
 *   ip     = sext(sh, (last IP & keep) | raw)  (= raw for non-IP packets)
 *   word 0 = ip | c0      ip.ip, tnt.bits, cyc.value, tsc.tsc, mtc.ctc
 *   word 1 = raw & m1 | c1  ip.raw, tnt.count
 *   byte 16 = ipc          ip.ipc
 *   last IP = setip ? ip : last IP
 * One entry is one 64-byte cache line.
 */
struct fast_ent {
	uint64_t mask;   /* payload bits after the opcode byte */
	uint64_t keep;   /* IP packets: bits of the last IP kept */
	uint64_t c0;     /* constant part of word 0 (TNT bits, CYC value) */
	uint64_t m1;     /* ~0 for IP packets: raw goes to word 1 */
	uint64_t c1;     /* constant word 1 (TNT count) */
	uint64_t setip;  /* ~0 if the packet sets the last IP */
	uint8_t type, size, ipc, sh; /* sh: 16 for sext48, else 0 */
	uint8_t fast, pad_[11];
};

#define F_ISTNT(b) (((b) & PT_OPM_TNT8) == PT_OPC_TNT8 && (b) != PT_OPC_PAD && (b) != PT_OPC_EXT)
#define F_ISCYC1(b) (((b) & PT_OPM_CYC1) == PT_OPC_CYC1)
#define F_ISIP(b) (IPT(b) && IPOK((b) >> PT_OPS_IPC))
#define F_ISFAST(b) ((b) == PT_OPC_PAD || F_ISTNT(b) || F_ISCYC1(b) || F_ISIP(b) || (b) == PT_OPC_TSC || (b) == PT_OPC_MTC)
/* The size of a fast packet by its first byte. */
#define FSIZEB(b) (F_ISIP(b) ? PT_SIZE_IP0 + IPB((b) >> PT_OPS_IPC) : (b) == PT_OPC_TSC ? PT_SIZE_TSC : \
		   (b) == PT_OPC_MTC ? PT_SIZE_MTC : 1)
#define F_BYTES(n) ((((1ull << (4 * (n))) << (4 * (n)))) - 1)   /* n = 8 gives ~0 */
#define F_KEEP(ipc) ((ipc) == 1 ? ~0xffffull : (ipc) == 2 ? ~0xffffffffull : (ipc) == 4 ? ~0xffffffffffffull : 0)
#define FENT_TYPE(b) ((b) == PT_OPC_PAD ? BTR_PT_PAD : F_ISTNT(b) ? BTR_PT_TNT : F_ISCYC1(b) ? BTR_PT_CYC : \
		      F_ISIP(b) ? IPT(b) : (b) == PT_OPC_TSC ? BTR_PT_TSC : (b) == PT_OPC_MTC ? BTR_PT_MTC : 0)
#define FENT(b) {                                                                              \
	.mask = F_ISIP(b) ? F_BYTES(IPB((b) >> PT_OPS_IPC)) : (b) == PT_OPC_TSC ? F_BYTES(PT_SIZE_TSC - 1) : \
		(b) == PT_OPC_MTC ? F_BYTES(PT_SIZE_MTC - 1) : 0,                                \
	.keep = F_ISIP(b) ? F_KEEP((b) >> PT_OPS_IPC) : 0,                                     \
	.c0 = F_ISTNT(b) ? (uint64_t)(((b) >> 1) & ((1u << TNTN(b)) - 1)) : F_ISCYC1(b) ? (uint64_t)((b) >> 3) : 0, \
	.m1 = F_ISIP(b) ? ~0ull : 0,                                                           \
	.c1 = F_ISTNT(b) ? TNTN(b) : 0,                                                        \
	.setip = F_ISIP(b) && ((b) >> PT_OPS_IPC) ? ~0ull : 0,                                 \
	.type = FENT_TYPE(b),                                                                    \
	.size = FSIZEB(b),                                                                       \
	.ipc = F_ISIP(b) ? (b) >> PT_OPS_IPC : 0,                                                \
	.sh = F_ISIP(b) && ((b) >> PT_OPS_IPC) == BTR_PT_IPC_SEXT48 ? 16 : 0,                  \
	.fast = F_ISFAST(b) }
#define F4(b) FENT(b), FENT((b) + 1), FENT((b) + 2), FENT((b) + 3)
#define F16(b) F4(b), F4((b) + 4), F4((b) + 8), F4((b) + 12)
#define F64(b) F16(b), F16((b) + 16), F16((b) + 32), F16((b) + 48)

static const struct fast_ent fast_tab[256] __attribute__((aligned(64))) = {
	F64(0), F64(64), F64(128), F64(192)
};

/* The layout fast_decode writes. */
#include <stddef.h>
#define U_OFF(m) (offsetof(struct btr_pt_packet, u.m) - offsetof(struct btr_pt_packet, u))
_Static_assert(offsetof(struct btr_pt_packet, size) == offsetof(struct btr_pt_packet, type) + 1, "type, size");
_Static_assert(U_OFF(ip.ip) == 0 && U_OFF(ip.raw) == 8 && U_OFF(ip.ipc) == 16, "ip layout");
_Static_assert(U_OFF(tnt.bits) == 0 && U_OFF(tnt.count) == 8, "tnt layout");
_Static_assert(U_OFF(cyc.value) == 0 && U_OFF(tsc.tsc) == 0 && U_OFF(mtc.ctc) == 0, "word 0");
_Static_assert(sizeof(struct fast_ent) == 64, "one cache line per entry");

/* Bits of the last IP that an IP packet with compression ipc keeps. */
static const uint64_t ip_keep[8] = {
	[1] = ~0xffffull, [2] = ~0xffffffffull, [4] = ~0xffffffffffffull,
};

static const uint8_t psb_bytes[BTR_PT_PSB_SIZE] = { PT_PSB_PAIRS };

/* Reads @n (1..8) little-endian bytes at @p, where @room bytes are
 * readable.  With 8 readable bytes one unaligned load plus a mask is
 * cheaper than a byte loop. */
static inline uint64_t rd_le(const uint8_t *p, unsigned n, size_t room)
{
	uint64_t v = 0;

	if (btr_likely(room >= 8)) {
		memcpy(&v, p, 8);   /* little-endian host (checked at the top) */
		return n >= 8 ? v : v & ((1ull << (8 * n)) - 1);
	}
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t sext48(uint64_t v)
{
	return (uint64_t)((int64_t)(v << 16) >> 16);
}

#define NEED(n)                                  \
	do {                                     \
		if (btr_unlikely(avail < (n)))   \
			return -BTR_ERR_AGAIN;   \
	} while (0)

/* Extended (PT_OPC_EXT-prefixed) packets: the row and the size from the
 * packet table (pt_opcodes.h), then the payload. */
static int decode_ext(struct btr_pt_pkt_decoder *d, const uint8_t *p, size_t avail,
		      struct btr_pt_packet *pkt)
{
	uint64_t v;
	int id, sz;

	NEED(PT_SIZE_EXT);
	const uint8_t b1 = p[1];   /* (after NEED: a lone 0x02 may end the buffer) */
	id = pt_pkt_find(p, avail);
	if (id < 0)
		return -BTR_ERR_AGAIN;
	sz = pt_pkt_len(id, p, avail, d->errata & BTR_PT_ERRATA_SKZ84 ? PT_LEN_SKZ84 : 0);
	if (sz < 0)
		return -BTR_ERR_BAD_PACKET;
	if (sz == 0)
		return -BTR_ERR_AGAIN;
	pkt->type = btr__pt_pkts[id].type;
	pkt->size = (uint8_t)sz;
	switch (id) {
	case PT_PK_PTW: /* bits 6:5 PayloadBytes (0: 4, 1: 8), bit 7 IP */
		pkt->u.ptw.bytes = (uint8_t)(sz - PT_SIZE_EXT);
		pkt->u.ptw.payload = rd_le(p + 2, pkt->u.ptw.bytes, avail - 2);
		pkt->u.ptw.ip = b1 >> 7;
		break;
	case PT_PK_TNT64: /* long TNT: 6 payload bytes, stop bit above the last branch */
		v = rd_le(p + 2, 6, avail - 2);
		if (v < 2)   /* no stop bit, or no branch: libipt rejects both */
			return -BTR_ERR_BAD_PACKET;
		{
			unsigned n = 63 - (unsigned)__builtin_clzll(v);
			pkt->u.tnt.count = (uint8_t)n;
			pkt->u.tnt.bits = v & ~(1ull << n);
		}
		break;
	case PT_PK_PIP: /* PIP: bit 0 NR, bits 47:1 = CR3[51:5] */
		v = rd_le(p + 2, 6, avail - 2);
		pkt->u.pip.nr = v & 1;
		pkt->u.pip.cr3 = (v >> 1) << 5;
		break;
	case PT_PK_CBR: /* CBR: ratio, reserved byte */
		pkt->u.cbr.ratio = p[2];
		break;
	case PT_PK_VMCS: /* VMCS: 5 bytes = base address bits 51:12 */
		pkt->u.vmcs.base = rd_le(p + 2, 5, avail - 2) << 12;
		break;
	case PT_PK_PSB:
		if (memcmp(p, psb_bytes, BTR_PT_PSB_SIZE))
			return -BTR_ERR_BAD_PACKET;
		/* The last IP is reset at PSB: the IP packets of PSB+ carry
		 * uncompressed IPs, and decoding may have started here. */
		d->last_ip = 0;
		break;
	case PT_PK_TMA: /* TMA: CTC[15:0], reserved 0, FC[7:0], FC[8] (bits 7:1 reserved) */
		if (sz > PT_SIZE_TMA) {   /* SKZ84 (pt.h): TMA + its bogus byte */
			pkt->type = BTR_PT_INVALID;
			break;
		}
		if (p[4] || (p[6] & 0xfe))
			return -BTR_ERR_BAD_PACKET;
		pkt->u.tma.ctc = (uint16_t)(p[2] | p[3] << 8);
		pkt->u.tma.fc = (uint16_t)(p[5] | (p[6] & 1) << 8);
		break;
	case PT_PK_MNT:
		pkt->u.mnt.payload = rd_le(p + 3, 8, avail - 3);
		break;
	case PT_PK_EXSTOP:
		pkt->u.exstop.ip = b1 >> 7;
		break;
	case PT_PK_MWAIT: /* MWAIT: EAX hints, ECX extensions (4 bytes each) */
		v = rd_le(p + 2, 8, avail - 2);
		pkt->u.mwait.hints = (uint32_t)v;
		pkt->u.mwait.ext = (uint32_t)(v >> 32);
		break;
	case PT_PK_PWRE: /* PWRE: byte 2 bit 3 HW; byte 3: state 7:4, sub-state 3:0 */
		pkt->u.pwre.hw = (p[2] >> 3) & 1;
		pkt->u.pwre.state = p[3] >> 4;
		pkt->u.pwre.substate = p[3] & 0xf;
		break;
	case PT_PK_PWRX: /* PWRX: byte 2: last 7:4, deepest 3:0; byte 3: wake reason 3:0 */
		pkt->u.pwrx.last = p[2] >> 4;
		pkt->u.pwrx.deepest = p[2] & 0xf;
		pkt->u.pwrx.wake = p[3] & 0xf;
		break;
	case PT_PK_BBP: /* BBP: byte 2 bit 7 SZ, bits 4:0 type */
		pkt->u.bbp.sz = p[2] >> 7;
		pkt->u.bbp.type = p[2] & 0x1f;
		d->bbp_sz = pkt->u.bbp.sz ? PT_SIZE_BIP4 - 1 : PT_SIZE_BIP8 - 1;
		break;
	case PT_PK_BEP:
		pkt->u.bep.ip = b1 >> 7;
		break;
	case PT_PK_CFE: /* CFE: byte 2: IP bit 7, type 4:0; byte 3 vector */
		pkt->u.cfe.ip = p[2] >> 7;
		pkt->u.cfe.type = p[2] & 0x1f;
		pkt->u.cfe.vector = p[3];
		break;
	case PT_PK_EVD: /* EVD: byte 2 type 5:0, 8 payload bytes */
		pkt->u.evd.type = p[2] & 0x3f;
		pkt->u.evd.payload = rd_le(p + 3, 8, avail - 3);
		break;
	default: /* TRACESTOP, OVF, PSBEND: no payload */
		break;
	}
	return sz;
}

/* Decodes the packet at @p (@avail > 0 bytes readable).  Returns its
 * size, -BTR_ERR_AGAIN if it needs more than @avail bytes, or
 * -BTR_ERR_BAD_PACKET.  Decoder state changes only on success. */
static inline int decode_pkt(struct btr_pt_pkt_decoder *d, const uint8_t *p, size_t avail,
			     struct btr_pt_packet *pkt)
{
	const uint8_t b = p[0];
	const uint32_t e = pt_tab[b];
	const unsigned e_type = (e >> 8) & 0xff, e_size = (e >> 16) & 0xff, e_aux = e >> 24;

	switch (e & 0xff) {
	case C_TNT8:
		if (btr_unlikely(d->bbp_sz) && (b & PT_OPM_BIP) == PT_OPC_BIP)
			goto bip;
		pkt->type = BTR_PT_TNT;
		pkt->size = PT_SIZE_TNT8;
		pkt->u.tnt.count = e_aux;
		pkt->u.tnt.bits = (b >> 1) & ((1u << e_aux) - 1);
		return PT_SIZE_TNT8;
	case C_IP: {
		uint64_t raw, ip;
		unsigned ipc = e_aux;

		NEED(e_size);
		raw = e_size > PT_SIZE_IP0 ? rd_le(p + 1, e_size - 1u, avail - 1) : 0;
		ip = (d->last_ip & ip_keep[ipc]) | raw;
		if (ipc == BTR_PT_IPC_SEXT48)
			ip = sext48(raw);
		if (ipc)
			d->last_ip = ip;
		else
			ip = 0;
		pkt->type = e_type;
		pkt->size = e_size;
		pkt->u.ip.ip = ip;
		pkt->u.ip.raw = raw;
		pkt->u.ip.ipc = (uint8_t)ipc;
		return e_size;
	}
	case C_PAD:
		pkt->type = BTR_PT_PAD;
		pkt->size = PT_SIZE_PAD;
		return PT_SIZE_PAD;
	case C_MTC:
		NEED(PT_SIZE_MTC);
		pkt->type = BTR_PT_MTC;
		pkt->size = PT_SIZE_MTC;
		pkt->u.mtc.ctc = p[1];
		return PT_SIZE_MTC;
	case C_CYC: {
		/* Byte 0: bit 2 Exp, bits 7:3 value[4:0]; each further byte:
		 * bit 0 Exp, bits 7:1 the next 7 value bits.  Like libipt we
		 * reject a value that needs more than 64 bits. */
		uint64_t v = b >> 3;
		size_t n = 1;
		unsigned shl = 5;
		uint8_t x = b >> 2;

		if (btr_unlikely(d->errata & BTR_PT_ERRATA_SKD007) && (x & 1)) {
			/* SKD007: CYC cut by an OVF (see pt.h) */
			NEED(2);
			if (p[1] == PT_OPC_EXT) {
				NEED(1 + PT_SIZE_OVF);
				if (p[2] == PT_EXT_OVF) {
					pkt->type = BTR_PT_OVF;
					pkt->size = 1 + PT_SIZE_OVF;
					return 1 + PT_SIZE_OVF;
				}
			}
		}

		while (x & 1) {
			NEED(n + 1);
			x = p[n++];
			v |= (uint64_t)(x >> 1) << shl;
			shl += 7;
			if (shl > 64)
				return -BTR_ERR_BAD_PACKET;
		}
		pkt->type = BTR_PT_CYC;
		pkt->size = (uint8_t)n;
		pkt->u.cyc.value = v;
		return (int)n;
	}
	case C_EXT:
		return decode_ext(d, p, avail, pkt);
	case C_TSC:
		NEED(PT_SIZE_TSC);
		pkt->type = BTR_PT_TSC;
		pkt->size = PT_SIZE_TSC;
		pkt->u.tsc.tsc = rd_le(p + 1, PT_SIZE_TSC - 1, avail - 1);
		return PT_SIZE_TSC;
	case C_MODE: {
		uint8_t m;

		NEED(PT_SIZE_MODE);
		m = p[1];
		if ((m & PT_MODE_LEAF_MASK) == PT_MODE_EXEC) {
			pkt->type = BTR_PT_MODE_EXEC;
			pkt->u.mode_exec.csl = m & 1;
			pkt->u.mode_exec.csd = (m >> 1) & 1;
			pkt->u.mode_exec.iflag = (m >> 2) & 1;
		} else if ((m & PT_MODE_LEAF_MASK) == PT_MODE_TSX) {
			pkt->type = BTR_PT_MODE_TSX;
			pkt->u.mode_tsx.intx = m & 1;
			pkt->u.mode_tsx.abrt = (m >> 1) & 1;
		} else {
			return -BTR_ERR_BAD_PACKET;
		}
		pkt->size = PT_SIZE_MODE;
		return PT_SIZE_MODE;
	}
	case C_TRIG: {
		/* TRIG: byte 1 bit 7 IP, bit 6 ICNT present, bit 5 MULT (bits
		 * 4:0 reserved); byte 2 TRBV; then ICNT[15:0] if present. */
		uint8_t f;

		NEED(PT_SIZE_TRIG);
		f = p[1];
		if (f & PT_TRIG_RSVD)
			return -BTR_ERR_BAD_PACKET;
		unsigned n = f & PT_TRIG_ICNT ? PT_SIZE_TRIG_ICNT : PT_SIZE_TRIG;
		NEED(n);
		pkt->type = BTR_PT_TRIG;
		pkt->size = (uint8_t)n;
		pkt->u.trig.trbv = p[2];
		pkt->u.trig.ip = f >> 7;
		pkt->u.trig.mult = (f >> 5) & 1;
		pkt->u.trig.icnt_valid = (f >> 6) & 1;
		pkt->u.trig.icnt = n == PT_SIZE_TRIG_ICNT ? (uint16_t)(p[3] | p[4] << 8) : 0;
		return (int)n;
	}
	default:
		return -BTR_ERR_BAD_PACKET;
	}

bip: {
	/* BIP inside a BBP block: byte 0 bits 7:3 ID, bits 2:0 = 100b. */
	unsigned n = d->bbp_sz;
	NEED(1 + n);
	pkt->type = BTR_PT_BIP;
	pkt->size = (uint8_t)(1 + n);
	pkt->u.bip.id = b >> PT_OPS_BIP;
	pkt->u.bip.value = rd_le(p + 1, n, avail - 1);
	return 1 + (int)n;
}
}

/* decode_pkt, and the end of a BBP block: one rule, pt_bbp_keeps()
 * (shared with the flow decoder), says which packets keep it open; the
 * BBP and its BIPs do, and an OVF that SKD007 cut into a CYC's bytes
 * does not, though its first byte is a CYC's. */
static inline int decode(struct btr_pt_pkt_decoder *d, const uint8_t *p, size_t avail,
			 struct btr_pt_packet *pkt)
{
	int r = decode_pkt(d, p, avail, pkt);

	if (btr_unlikely(d->bbp_sz) && r > 0 && pkt->type != BTR_PT_BBP && pkt->type != BTR_PT_BIP &&
	    (pkt->type == BTR_PT_OVF || !pt_bbp_keeps(p)))
		d->bbp_sz = 0;
	return r;
}

/* ---- decoder API ---- */

/* Recomputes the fast path's limit: packets at pos < fast_lim have 16
 * readable bytes and need none of the slow cases (carried bytes, a sync
 * search to continue, a BBP block); 0 disables the fast path.  Called
 * wherever those change, so the hot path tests one word. */
static inline void update_fast(struct btr_pt_pkt_decoder *d)
{
	d->fast_lim = (d->carry_len | d->syncing | d->bbp_sz | d->errata) || d->end - d->begin < BTR_PT_MAX_PACKET
			      ? 0 : (uintptr_t)(d->end - BTR_PT_MAX_PACKET) + 1;
	d->off_bias = d->base_offset - (uint64_t)(uintptr_t)d->begin;
}

int btr_pt_pkt_init(struct btr_pt_pkt_decoder *d, const uint8_t *buf, size_t size, uint64_t offset)
{
	if (!d || (!buf && size))
		return -BTR_ERR_INVAL;
	memset(d, 0, sizeof(*d));
	d->begin = d->pos = buf;
	d->end = buf + size;
	d->base_offset = offset;
	update_fast(d);
	return 0;
}

int btr_pt_pkt_set_errata(struct btr_pt_pkt_decoder *d, unsigned flags)
{
	if (!d || (flags & ~(unsigned)(BTR_PT_ERRATA_SKD007 | BTR_PT_ERRATA_SKZ84)))
		return -BTR_ERR_INVAL;
	d->errata = (uint8_t)flags;
	update_fast(d);
	return 0;
}

int btr_pt_pkt_feed(struct btr_pt_pkt_decoder *d, const uint8_t *buf, size_t size)
{
	size_t rest;

	if (!d || (!buf && size))
		return -BTR_ERR_INVAL;
	/* Undecoded bytes of the old buffer become part of the carry: the
	 * caller may free that buffer now. */
	rest = (size_t)(d->end - d->pos);
	if (rest) {
		if (d->carry_len + rest > sizeof(d->carry))
			return -BTR_ERR_INVAL;
		memcpy(d->carry + d->carry_len, d->pos, rest);
		d->carry_len = (uint8_t)(d->carry_len + rest);
	}
	d->base_offset += (uint64_t)(d->end - d->begin);
	d->begin = d->pos = buf;
	d->end = buf + size;
	update_fast(d);
	return 0;
}

int btr_pt_pkt_end(const struct btr_pt_pkt_decoder *d)
{
	/* Kept bytes outside a sync search are the start of a cut packet. */
	return d->carry_len && !d->syncing ? -BTR_ERR_TRUNCATED : 0;
}

uint64_t btr_pt_pkt_offset(const struct btr_pt_pkt_decoder *d)
{
	return d->base_offset + (uint64_t)(d->pos - d->begin) - d->carry_len;
}

static void reset_state(struct btr_pt_pkt_decoder *d)
{
	d->last_ip = 0;
	d->bbp_sz = 0;
	d->syncing = 0;
}

/* Byte @k of the virtual sequence carry ++ [pos, end). */
static inline uint8_t seq_at(const struct btr_pt_pkt_decoder *d, size_t k)
{
	return k < d->carry_len ? d->carry[k] : d->pos[k - d->carry_len];
}

static int seq_psb_at(const struct btr_pt_pkt_decoder *d, size_t k)
{
	for (size_t i = 0; i < BTR_PT_PSB_SIZE; i++)
		if (seq_at(d, k + i) != psb_bytes[i])
			return 0;
	return 1;
}

/* First complete PSB in @p[0..n), or NULL.  (memmem is a GNU extension;
 * memchr for the PT_EXT_PSB byte is as fast, PT_OPC_EXT being common in PT.) */
static const uint8_t *find_psb(const uint8_t *p, size_t n)
{
	const uint8_t *q = p + 1, *end = p + n;

	while (n >= BTR_PT_PSB_SIZE && q < end) {
		q = memchr(q, PT_EXT_PSB, (size_t)(end - q));
		if (!q)
			return NULL;
		if ((size_t)(end - q) < BTR_PT_PSB_SIZE - 1)
			return NULL;
		if (!memcmp(q - 1, psb_bytes, BTR_PT_PSB_SIZE))
			return q - 1;
		q++;
	}
	return NULL;
}

/* Replaces the carry by bytes [from, total) of the virtual sequence (at
 * most sizeof(carry)) and consumes the buffer: the search continues after
 * the next feed. */
static int keep_tail(struct btr_pt_pkt_decoder *d, size_t from, size_t total)
{
	uint8_t tmp[sizeof(d->carry)];
	size_t n = total - from;

	for (size_t i = 0; i < n; i++)
		tmp[i] = seq_at(d, from + i);
	memcpy(d->carry, tmp, n);
	d->carry_len = (uint8_t)n;
	d->pos = d->end;
	d->syncing = 1;
	return -BTR_ERR_EOS;
}

/* Searches the virtual byte sequence carry ++ [pos, end) for the first
 * complete PSB.  Like libipt, the sync point is the *last* 16 bytes of a
 * run of 02 82 pairs: what follows a PSB is never 02 82 (PSBEND is 02 23),
 * while the bytes before it may end in 02 82 by chance (an IP payload,
 * say), and two back-to-back PSBs form one run.  If the run reaches the
 * end of the data, or there is no PSB, the tail that matters is kept for
 * the next buffer. */
static int sync_forward_impl(struct btr_pt_pkt_decoder *d)
{
	size_t bl, cl, total, i, j, k;

	if (!d)
		return -BTR_ERR_INVAL;
	reset_state(d);
	bl = (size_t)(d->end - d->pos);
	cl = d->carry_len;
	total = cl + bl;
	for (i = 0; i < cl && i + BTR_PT_PSB_SIZE <= total; i++)
		if (seq_psb_at(d, i))
			break;
	if (i >= cl || i + BTR_PT_PSB_SIZE > total) {
		const uint8_t *hit = find_psb(d->pos, bl);
		if (!hit) {
			for (k = total < BTR_PT_PSB_SIZE - 1 ? total : BTR_PT_PSB_SIZE - 1; k; k--) {
				size_t m;
				for (m = 0; m < k && seq_at(d, total - k + m) == psb_bytes[m]; m++)
					;
				if (m == k)
					break;
			}
			return keep_tail(d, total - k, total);
		}
		i = cl + (size_t)(hit - d->pos);
	}
	/* Navigate to the end of the run of 02 82 pairs. */
	for (j = i + BTR_PT_PSB_SIZE; j + 1 < total && seq_at(d, j) == PT_OPC_EXT && seq_at(d, j + 1) == PT_EXT_PSB;
	     j += 2)
		;
	if (j == total || (j + 1 == total && seq_at(d, j) == PT_OPC_EXT))
		return keep_tail(d, j - BTR_PT_PSB_SIZE, total);  /* the run may go on */
	i = j - BTR_PT_PSB_SIZE;
	if (i < cl) {
		memmove(d->carry, d->carry + i, cl - i);
		d->carry_len = (uint8_t)(cl - i);
	} else {
		d->carry_len = 0;
		d->pos += i - cl;
	}
	return 0;
}

static int sync_backward_impl(struct btr_pt_pkt_decoder *d)
{
	size_t len, lim, i;

	if (!d)
		return -BTR_ERR_INVAL;
	len = (size_t)(d->end - d->begin);
	/* With kept bytes the position lies before @begin: nothing in this
	 * buffer is before it. */
	lim = d->carry_len ? 0 : (size_t)(d->pos - d->begin);
	if (len < BTR_PT_PSB_SIZE || !lim)
		return -BTR_ERR_EOS;
	i = len - BTR_PT_PSB_SIZE;
	if (i > lim - 1)
		i = lim - 1;
	for (;; i--) {
		const uint8_t *p = d->begin + i;
		/* a PSB at the end of its run of 02 82 pairs (see sync_forward) */
		if (p[0] == PT_OPC_EXT && p[1] == PT_EXT_PSB && !memcmp(p, psb_bytes, BTR_PT_PSB_SIZE) &&
		    !(i + BTR_PT_PSB_SIZE + 1 < len && p[16] == PT_OPC_EXT && p[17] == PT_EXT_PSB)) {
			d->pos = p;
			d->carry_len = 0;
			reset_state(d);
			return 0;
		}
		if (!i)
			break;
	}
	return -BTR_ERR_EOS;
}

static int sync_set_impl(struct btr_pt_pkt_decoder *d, uint64_t offset)
{
	if (!d || offset < d->base_offset || offset - d->base_offset > (uint64_t)(d->end - d->begin))
		return -BTR_ERR_INVAL;
	d->pos = d->begin + (offset - d->base_offset);
	d->carry_len = 0;
	reset_state(d);
	return 0;
}

int btr_pt_pkt_sync_forward(struct btr_pt_pkt_decoder *d)
{
	int r = sync_forward_impl(d);
	if (d)
		update_fast(d);
	return r;
}

int btr_pt_pkt_sync_backward(struct btr_pt_pkt_decoder *d)
{
	int r = sync_backward_impl(d);
	if (d)
		update_fast(d);
	return r;
}

int btr_pt_pkt_sync_set(struct btr_pt_pkt_decoder *d, uint64_t offset)
{
	int r = sync_set_impl(d, offset);
	if (d)
		update_fast(d);
	return r;
}

/* The boundary case: a sync search to continue, or a packet that starts
 * in the carry.  Decodes from a small stack copy of carry ++ buffer. */
static int __attribute__((noinline)) next_slow(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkt)
{
	uint8_t tmp[2 * sizeof(d->carry)];
	size_t n, take, bl;
	uint64_t off;
	int r;

	if (d->syncing) {
		r = btr_pt_pkt_sync_forward(d);
		if (r < 0)
			return r;
	}
	off = btr_pt_pkt_offset(d);
	bl = (size_t)(d->end - d->pos);
	n = d->carry_len;
	if (!n) {
		if (!bl)
			return -BTR_ERR_EOS;
		r = decode(d, d->pos, bl, pkt);
		if (r > 0) {
			pkt->offset = off;
			d->pos += r;
		} else if (r == -BTR_ERR_AGAIN) {
			memcpy(d->carry, d->pos, bl);
			d->carry_len = (uint8_t)bl;
			d->pos = d->end;
		}
		return r;
	}
	take = bl < sizeof(tmp) - n ? bl : sizeof(tmp) - n;
	memcpy(tmp, d->carry, n);
	memcpy(tmp + n, d->pos, take);
	r = decode(d, tmp, n + take, pkt);
	if (r > 0) {
		pkt->offset = off;
		if ((size_t)r >= n) {
			d->pos += (size_t)r - n;
			d->carry_len = 0;
		} else {
			memmove(d->carry, d->carry + r, n - (size_t)r);
			d->carry_len = (uint8_t)(n - (size_t)r);
		}
	} else if (r == -BTR_ERR_AGAIN) {
		/* Needs more than n + take (< BTR_PT_MAX_PACKET) bytes, so
		 * take == bl: keep the whole rest. */
		memcpy(d->carry + n, d->pos, take);
		d->carry_len = (uint8_t)(n + take);
		d->pos += take;
	}
	return r;
}

/* Everything but the fast path: packets that need validation or more
 * than a table lookup, buffer ends, carried bytes, BBP blocks. */
static inline int next_general_impl(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkt)
{
	const uint8_t *p = d->pos;
	size_t avail = (size_t)(d->end - p);
	int r;

	if (btr_unlikely(d->carry_len | d->syncing) || btr_unlikely(!avail))
		return next_slow(d, pkt);
	r = decode(d, p, avail, pkt);
	if (btr_likely(r > 0)) {
		pkt->offset = d->base_offset + (uint64_t)(p - d->begin);
		d->pos = p + r;
		return r;
	}
	if (r == -BTR_ERR_AGAIN) {
		memcpy(d->carry, p, avail);
		d->carry_len = (uint8_t)avail;
		d->pos = d->end;
	}
	return r;
}

static int __attribute__((noinline)) next_general(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkt)
{
	int r = next_general_impl(d, pkt);
	update_fast(d);
	return r;
}

/* The fast path (see fast_tab): no branch on the packet type.  @f is
 * fast_tab[p[0]] and a fast entry; needs 16 readable bytes at @p so the
 * 8-byte payload load stays in bounds.  Returns the packet size. */
static inline __attribute__((always_inline)) unsigned fast_decode(const struct fast_ent *f, const uint8_t *p,
								   uint64_t *last_ip, struct btr_pt_packet *pkt)
{
	uint64_t w, raw, ip, last, v1;

	last = *last_ip;
	memcpy(&w, p + 1, 8);
	raw = w & f->mask;
	ip = (last & f->keep) | raw;
	ip = (uint64_t)((int64_t)(ip << f->sh) >> f->sh);
	/* A (predicted) branch, not a select: with a select every packet
	 * would extend a dependency chain through the last IP. */
	if (f->setip) {
		__asm__("" : "+r"(ip));
		*last_ip = ip;
	}
	ip |= f->c0;
	v1 = (raw & f->m1) | f->c1;
	memcpy(&pkt->type, &f->type, 2);   /* type and size */
	memcpy((char *)&pkt->u, &ip, 8);
	memcpy((char *)&pkt->u + 8, &v1, 8);
	((uint8_t *)&pkt->u)[16] = f->ipc;
	return f->size;
}

int btr_pt_pkt_next(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkt)
{
	const uint8_t *p = d->pos;

	if (btr_likely((uintptr_t)p < d->fast_lim)) {
		const struct fast_ent *f = &fast_tab[p[0]];
		if (btr_likely(f->fast)) {
			unsigned n = fast_decode(f, p, &d->last_ip, pkt);
			pkt->offset = d->off_bias + (uint64_t)(uintptr_t)p;
			if (btr_likely(n == 1)) {
				d->pos = p + 1;
			} else {
				p += n;
				__asm__("" : "+r"(p)); /* keep a branch, not a cmov */
				d->pos = p;
			}
			return (int)n;
		}
	}
	return next_general(d, pkt);
}

/* ---- the batch paths: 64-byte blocks in two passes ----
 *
 * Decoding is serial (a packet's size says where the next one starts),
 * and in real PT ~85% of the packets are 1-byte PAD, TNT or CYC, in runs
 * of ~5.  A per-packet loop pays the chain "load byte -> table -> size ->
 * next position" (~12 cycles) per packet, plus a mispredicted branch
 * whenever the size changes.  The batch paths instead take 64 bytes at a
 * time:
 *  1. SSE2 compares classify all 64 bytes at once: bit i of @one is set
 *     if byte i is a 1-byte PAD/TNT/CYC packet should a packet start
 *     there.
 *  2. The walk hops from one multi-byte packet to the next with a
 *     count-trailing-zeros over ~@one: every byte in between starts a
 *     1-byte packet.  It decodes the multi-byte packets (TIP/FUP with the
 *     last-IP chain, MTC, TSC) into the small array @mp and collects all
 *     packet starts in the bitmask @starts.  So the serial chain is paid
 *     once per multi-byte packet, not once per packet.
 *  3. The emission loop writes one packet per bit of @starts from a
 *     template indexed by the byte (one_tab, cone_tab): its iterations
 *     are independent and it has no data-dependent branch.  Then the
 *     multi-byte packets are copied over their (wrong) template copies.
 * The packets written are byte for byte those btr_pt_pkt_next writes
 * (fuzz_pt checks this for btr_pt_pkt_next_batch; bench_pt checks the
 * compact form against btr_pt_pkt_next on its streams).  Anything else
 * (extended packets, CYC longer than a byte, MODE, bad bytes, BBP
 * blocks, buffer ends) stops the block and goes through
 * btr_pt_pkt_next. */

/* A 1-byte packet as struct btr_pt_packet writes it, without its offset:
 * bytes 0..7 (@hdr: type, size, reserved and padding) and 16..31 (the
 * first two words of the union; btr_pt_pkt_next writes 0 to ip.ipc at
 * byte 32, which is not a field of these packets: not written). */
struct pkt_tmpl {
	uint64_t hdr, w0, w1, pad_;
};

/* The same as struct btr_pt_cpkt: word 0 without the offset, payload. */
struct cpkt_tmpl {
	uint64_t w0, payload;
};

_Static_assert(offsetof(struct btr_pt_packet, offset) == 8 && offsetof(struct btr_pt_packet, u) == 16 &&
		       sizeof(struct btr_pt_packet) == 40, "packet layout the emission writes");
_Static_assert(offsetof(struct btr_pt_cpkt, type) == 4 && offsetof(struct btr_pt_cpkt, size) == 5 &&
		       offsetof(struct btr_pt_cpkt, aux) == 6 && offsetof(struct btr_pt_cpkt, payload) == 8 &&
		       sizeof(struct btr_pt_cpkt) == 16, "compact layout the emission writes");

#define ONE_TYPE(b) ((b) == 0 ? BTR_PT_PAD : F_ISTNT(b) ? BTR_PT_TNT : F_ISCYC1(b) ? BTR_PT_CYC : 0)
#define ONE_W0(b) (F_ISTNT(b) ? (uint64_t)(((b) >> 1) & ((1u << TNTN(b)) - 1)) : F_ISCYC1(b) ? (uint64_t)((b) >> 3) : 0)
#define ONE_W1(b) ((uint64_t)(F_ISTNT(b) ? TNTN(b) : 0))
#define OENT(b) { .hdr = (uint64_t)ONE_TYPE(b) | 1u << 8, .w0 = ONE_W0(b), .w1 = ONE_W1(b) }
#define O4(b) OENT(b), OENT((b) + 1), OENT((b) + 2), OENT((b) + 3)
#define O16(b) O4(b), O4((b) + 4), O4((b) + 8), O4((b) + 12)
#define O64(b) O16(b), O16((b) + 16), O16((b) + 32), O16((b) + 48)
#define CENT(b) { .w0 = (uint64_t)ONE_TYPE(b) << 32 | 1ull << 40 | ONE_W1(b) << 48, .payload = ONE_W0(b) }
#define C4(b) CENT(b), CENT((b) + 1), CENT((b) + 2), CENT((b) + 3)
#define C16(b) C4(b), C4((b) + 4), C4((b) + 8), C4((b) + 12)
#define C64(b) C16(b), C16((b) + 16), C16((b) + 32), C16((b) + 48)

/* Templates of the 1-byte packets (other entries unused). */
static const struct pkt_tmpl one_tab[256] __attribute__((aligned(64))) = {
	O64(0), O64(64), O64(128), O64(192)
};
static const struct cpkt_tmpl cone_tab[256] __attribute__((aligned(64))) = {
	C64(0), C64(64), C64(128), C64(192)
};

/* Readable bytes a block needs: 64 classified, and a packet starting at
 * byte 62 may read 8 payload bytes up to byte 71. */
#define BLOCK_NEED 80

/* Bit i set: byte @p[i] is a 1-byte packet (PAD, TNT, 1-byte CYC) if a
 * packet starts there.  Reads 64 bytes. */
static inline uint64_t one_mask(const uint8_t *p)
{
#ifdef __SSE2__
	const __m128i k1 = _mm_set1_epi8(PT_OPM_TNT8), k2 = _mm_set1_epi8(PT_OPC_EXT), k3 = _mm_set1_epi8(PT_OPC_CYC1),
		      k7 = _mm_set1_epi8(PT_OPM_CYC1), k0 = _mm_setzero_si128();
	uint64_t m = 0;

	for (int k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
		__m128i even = _mm_cmpeq_epi8(_mm_and_si128(v, k1), k0);   /* PAD, TNT, EXT */
		__m128i ext = _mm_cmpeq_epi8(v, k2);
		__m128i cyc = _mm_cmpeq_epi8(_mm_and_si128(v, k7), k3);    /* 1-byte CYC */
		__m128i x = _mm_or_si128(_mm_andnot_si128(ext, even), cyc);
		m |= (uint64_t)(unsigned)_mm_movemask_epi8(x) << (16 * k);
	}
	return m;
#else
	uint64_t m = 0;

	for (int k = 0; k < 64; k++)
		m |= (uint64_t)((one_tab[p[k]].hdr & 0xff) != 0) << k;   /* a 1-byte type */
	return m;
#endif
}

#ifdef PT_AVX512
/* The 1-byte templates of cone_tab as byte tables: type, aux (TNT count)
 * and payload (TNT bits, CYC value: at most 6 bits). */
#define BT4(m, b) m(b), m((b) + 1), m((b) + 2), m((b) + 3)
#define BT16(m, b) BT4(m, b), BT4(m, (b) + 4), BT4(m, (b) + 8), BT4(m, (b) + 12)
#define BT64(m, b) BT16(m, b), BT16(m, (b) + 16), BT16(m, (b) + 32), BT16(m, (b) + 48)
#define BT256(m) BT64(m, 0), BT64(m, 64), BT64(m, 128), BT64(m, 192)
#define ONE_W1B(b) ((uint8_t)ONE_W1(b))
#define ONE_W0B(b) ((uint8_t)ONE_W0(b))
#define ONE_TYPEB(b) ((uint8_t)ONE_TYPE(b))
static const uint8_t one_type_b[256] __attribute__((aligned(64))) = { BT256(ONE_TYPEB) };
static const uint8_t one_aux_b[256] __attribute__((aligned(64))) = { BT256(ONE_W1B) };
static const uint8_t one_pay_b[256] __attribute__((aligned(64))) = { BT256(ONE_W0B) };

#define PT_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* 256-entry byte table lookup of the 64 bytes in @v. */
static inline PT_AVX512_TARGET __m512i lut256(const uint8_t *tab, __m512i v)
{
	__m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(tab), v, _mm512_load_si512(tab + 64));
	__m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(tab + 128), v, _mm512_load_si512(tab + 192));
	return _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
}

/* The size of a packet by its first byte (as fast_tab[b].size), 0 for
 * the bytes the block paths do not decode (extended packets, MODE,
 * CYC longer than a byte, bad bytes). */
#define FSIZE2B(b) ((uint8_t)(F_ISFAST(b) ? FSIZEB(b) : 0))
static const uint8_t fast_size2_b[256] __attribute__((aligned(64))) = { BT256(FSIZE2B) };

/* Word 0 of a compact packet of the fast types, without the offset. */
#define CW0(b) ((uint64_t)FENT_TYPE(b) << 32 | (uint64_t)FSIZEB(b) << 40 | (uint64_t)(F_ISIP(b) ? (b) >> PT_OPS_IPC : 0) << 48)
#define CW4(b) CW0(b), CW0((b) + 1), CW0((b) + 2), CW0((b) + 3)
#define CW16(b) CW4(b), CW4((b) + 4), CW4((b) + 8), CW4((b) + 12)
#define CW64(b) CW16(b), CW16((b) + 16), CW16((b) + 32), CW16((b) + 48)
static const uint64_t cw0_tab[256] __attribute__((aligned(64))) = { CW64(0), CW64(64), CW64(128), CW64(192) };

/* Room block_compact_avx512 needs in the output: it writes 64 records. */
#define AVX_ROOM 64

/* A whole block for btr_pt_pkt_next_compact without the serial walk
 * (AVX-512 VBMI, checked at run time): with nxt[i] = i + size of a
 * packet at i (capped at 63, the block end; = i for a byte the block
 * path does not decode), the k-th packet starts at nxt^k(s).  Pointer
 * jumping computes nxt^1, nxt^2, nxt^4, ..., nxt^32 with 5 byte permutes,
 * and from them the start of every k = 0..63 at once with 6 more: no
 * chain of loads per packet, no walk.  Then the records of all packets
 * are built as 1-byte packets from byte tables (type, aux, payload),
 * 4 records per permute (64 records, junk past the count), and only the
 * multi-byte packets are decoded one by one (they carry the last-IP
 * chain) over their junk records.  Packets beyond @room are left for
 * the next call.  Same results, @adv and @stop as decode_block. */
static inline PT_AVX512_TARGET __attribute__((always_inline)) int block_compact_avx512(const uint8_t *p, unsigned s,
									  uint64_t *lastp, uint64_t bias,
									  struct btr_pt_cpkt *out, int room,
									  unsigned *adv, int *stop)
{
	static const uint8_t iota[64] __attribute__((aligned(64))) = {
		0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
		22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42,
		43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
	};
	/* dword k: bytes 0, 2 <- lane k of the first table, 1, 3 <- lane k
	 * of the second (index + 64) */
	static const uint8_t idxu[64] __attribute__((aligned(64))) = {
		0, 64, 0, 64, 1, 65, 1, 65, 2, 66, 2, 66, 3, 67, 3, 67,
		4, 68, 4, 68, 5, 69, 5, 69, 6, 70, 6, 70, 7, 71, 7, 71,
		8, 72, 8, 72, 9, 73, 9, 73, 10, 74, 10, 74, 11, 75, 11, 75,
		12, 76, 12, 76, 13, 77, 13, 77, 14, 78, 14, 78, 15, 79, 15, 79,
	};
	/* record r: bytes 0, 4, 6, 8 <- bytes 0..3 of dword r */
	static const uint8_t idxo[64] __attribute__((aligned(64))) = {
		0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0,
		4, 0, 0, 0, 5, 0, 6, 0, 7, 0, 0, 0, 0, 0, 0, 0,
		8, 0, 0, 0, 9, 0, 10, 0, 11, 0, 0, 0, 0, 0, 0, 0,
		12, 0, 0, 0, 13, 0, 14, 0, 15, 0, 0, 0, 0, 0, 0, 0,
	};
	uint8_t pst[64] __attribute__((aligned(64)));
	const __m512i v = _mm512_loadu_si512(p);
	const __m512i io = _mm512_load_si512(iota);
	const __m512i sz = lut256(fast_size2_b, v);
	const __m512i j1 = _mm512_min_epu8(_mm512_adds_epu8(io, sz), _mm512_set1_epi8(63));
	const __m512i j2 = _mm512_permutexvar_epi8(j1, j1);
	const __m512i j4 = _mm512_permutexvar_epi8(j2, j2);
	const __m512i j8 = _mm512_permutexvar_epi8(j4, j4);
	const __m512i j16 = _mm512_permutexvar_epi8(j8, j8);
	const __m512i j32 = _mm512_permutexvar_epi8(j16, j16);
	/* lanes k with bit b of k set */
	const __mmask64 kb0 = 0xaaaaaaaaaaaaaaaaull, kb1 = 0xccccccccccccccccull, kb2 = 0xf0f0f0f0f0f0f0f0ull,
			kb3 = 0xff00ff00ff00ff00ull, kb4 = 0xffff0000ffff0000ull, kb5 = 0xffffffff00000000ull;
	__m512i ps = _mm512_set1_epi8((char)s);   /* the first packet starts at s (< 63) */

	ps = _mm512_mask_permutexvar_epi8(ps, kb0, ps, j1);
	ps = _mm512_mask_permutexvar_epi8(ps, kb1, ps, j2);
	ps = _mm512_mask_permutexvar_epi8(ps, kb2, ps, j4);
	ps = _mm512_mask_permutexvar_epi8(ps, kb3, ps, j8);
	ps = _mm512_mask_permutexvar_epi8(ps, kb4, ps, j16);
	ps = _mm512_mask_permutexvar_epi8(ps, kb5, ps, j32);
	/* ps[k]: start of packet k, or the fixed point (63, or a byte not
	 * decoded here) once the packets run out */
	const __m512i szp = _mm512_permutexvar_epi8(ps, sz);
	const __mmask64 all = _mm512_cmplt_epu8_mask(ps, _mm512_set1_epi8(63)) & _mm512_test_epi8_mask(szp, szp);
	/* the packets that fit in @room (a prefix: the orbit only grows) */
	const __mmask64 real = room >= 64 ? all : all & ((1ull << room) - 1);
	const int cnt = __builtin_ctzll(~real);
	const __m512i t = _mm512_permutexvar_epi8(ps, lut256(one_type_b, v));
	const __m512i a = _mm512_permutexvar_epi8(ps, lut256(one_aux_b, v));
	const __m512i y = _mm512_permutexvar_epi8(ps, lut256(one_pay_b, v));
	const uint64_t ob = bias + (uint64_t)(uintptr_t)p;
	/* record: dword 0 = offset (base + position), byte 5 = size 1 */
	const __m512i basev = _mm512_set4_epi32(0, 0, 1 << 8, (int)(uint32_t)ob);
	const __m512i sixteen = _mm512_set1_epi8(16);
	__m512i iu = _mm512_load_si512(idxu);

	_mm512_store_si512(pst, ps);
	/* 16 packets at a time: first their 4 bytes (position, type, aux,
	 * payload) as one dword each, then 4 records per permute. */
	for (int m = 0; m < 64; m += 16) {
		__m512i u = _mm512_or_si512(_mm512_maskz_permutex2var_epi8(0x3333333333333333ull, ps, iu, t),
					    _mm512_maskz_permutex2var_epi8(0xccccccccccccccccull, a, iu, y));
		__m512i io4 = _mm512_load_si512(idxo);
		for (int j = 0; j < 16; j += 4) {
			__m512i r = _mm512_maskz_permutexvar_epi8(0x0151015101510151ull, io4, u);
			_mm512_storeu_si512(out + m + j, _mm512_add_epi32(r, basev));
			io4 = _mm512_add_epi8(io4, sixteen);
		}
		iu = _mm512_add_epi8(iu, sixteen);
	}
	/* the multi-byte packets (type 0 in one_type_b), in order */
	uint64_t multi = real & _mm512_testn_epi8_mask(t, t), last = *lastp;
	for (; multi; multi &= multi - 1) {
		const unsigned k = (unsigned)__builtin_ctzll(multi), q = pst[k];
		const struct fast_ent *f = &fast_tab[p[q]];
		uint64_t w, raw, ip, w0;
		memcpy(&w, p + q + 1, 8);
		raw = w & f->mask;
		ip = (last & f->keep) | raw;
		ip = (uint64_t)((int64_t)(ip << f->sh) >> f->sh);
		last = (ip & f->setip) | (last & ~f->setip);
		w0 = cw0_tab[p[q]] + (uint32_t)(ob + q);
		memcpy(&out[k], &w0, 8);
		out[k].payload = ip | f->c0;
	}
	*lastp = last;
	if (real != all) {         /* out of room: stop before packet cnt */
		*stop = 0;
		*adv = pst[cnt];
	} else if (pst[63] < 63) {
		*stop = 1;
		*adv = pst[63];
	} else {
		*stop = 0;
		*adv = cnt ? pst[cnt - 1] + fast_size2_b[p[pst[cnt - 1]]] : 63;
	}
	return cnt;
}

/* Runs block_compact_avx512 over the blocks at *@pp while @room - i >=
 * AVX_ROOM and the buffer (ending at @end) has BLOCK_NEED bytes.  The
 * blocks lie on a fixed 63-byte grid and only the start offset inside
 * the block (0..8) carries over from one to the next, so the CPU can
 * load and classify the next block and do its pointer jumping before
 * the current one is done: the chain between blocks is the 6 permutes
 * of the orbit.  Returns the packets written; *@pp is the next packet,
 * *@stop set if it is one this path does not decode. */
static PT_AVX512_TARGET __attribute__((noinline)) int compact_run_avx512(const uint8_t **pp, const uint8_t *end,
									 uint64_t *lastp, uint64_t bias,
									 struct btr_pt_cpkt *out, int room, int *stop)
{
	const uint8_t *blk = *pp;
	unsigned s = 0, adv;
	int i = 0;

	*stop = 0;
	while (room - i >= AVX_ROOM && end - blk >= BLOCK_NEED) {
		i += block_compact_avx512(blk, s, lastp, bias, out + i, AVX_ROOM, &adv, stop);
		if (*stop) {
			*pp = blk + adv;
			return i;
		}
		blk += 63;
		s = adv - 63;
	}
	*pp = blk + s;
	return i;
}

/* One block for the end of the output array (@room < AVX_ROOM): through
 * a scratch array, as the block writes 64 records.  As decode_block. */
static PT_AVX512_TARGET __attribute__((noinline)) int compact_tail_avx512(const uint8_t *p, uint64_t *lastp,
									  uint64_t bias, struct btr_pt_cpkt *out,
									  int room, unsigned *adv, int *stop)
{
	struct btr_pt_cpkt tmp[AVX_ROOM];
	int cnt = block_compact_avx512(p, 0, lastp, bias, tmp, room, adv, stop);

	memcpy(out, tmp, (size_t)cnt * sizeof(*tmp));
	return cnt;
}

/* -1 unknown, 0 no, 1 yes: AVX-512 F, BW, VBMI (Ice Lake, Zen 4 and
 * later).  The library is built for the x86-64 baseline; only these
 * functions use AVX-512, and only if the CPU has it.  (A race between
 * threads on the first call only computes the same value twice.) */
static int pt_avx512 = -1;

static int have_avx512(void)
{
	if (btr_unlikely(pt_avx512 < 0)) {
		__builtin_cpu_init();
		pt_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
			    __builtin_cpu_supports("avx512vbmi");
	}
	return pt_avx512;
}
#endif

/* Decodes packets at @p (with BLOCK_NEED readable bytes, no carry, no
 * sync or BBP state) from at most one 64-byte block into @outv (room for
 * @room > 0 packets): struct btr_pt_packet, or if @compact struct
 * btr_pt_cpkt with offsets relative to -@bias (truncated to 32 bits).
 * @bias + (uintptr_t)p is the stream offset of @p.  Returns the number
 * of packets written (@*adv bytes consumed); @*stop is set if the block
 * ended at a packet this path does not handle. */
static inline __attribute__((always_inline)) int decode_block(const uint8_t *p, uint64_t *lastp, uint64_t bias,
							      void *outv, int room, unsigned *adv, int *stop,
							      const int compact)
{
	union {
		struct btr_pt_packet s[32];
		struct btr_pt_cpkt c[32];
	} mp;                           /* the multi-byte packets */
	uint8_t mslot[32];              /* their indexes in the output */
	unsigned nm = 0;
	const uint64_t one = one_mask(p);
	/* Byte 63 acts as a multi-byte packet: it ends every block. */
	const uint64_t multi = ~one | 1ull << 63;
	const uint64_t ob = bias + (uint64_t)(uintptr_t)p;   /* offset of p[0] */
	uint64_t starts = 0, last = *lastp;
	unsigned pos = 0;
	int cnt = 0;
	*stop = 0;
	for (;;) {
		unsigned q = pos + (unsigned)__builtin_ctzll(multi >> pos);
		int k = (int)(q - pos);

		/* bytes pos..q-1 are 1-byte packets */
		if (btr_unlikely(cnt + k >= room)) {
			unsigned r = (unsigned)(room - cnt);
			starts |= (1ull << (pos + r)) - (1ull << pos);
			pos += r;
			cnt = room;
			break;
		}
		starts |= (1ull << q) - (1ull << pos);
		cnt += k;
		if (q == 63) {
			pos = 63;
			break;
		}
		const struct fast_ent *f = &fast_tab[p[q]];
		/* (nm == 32 only after 32 1-byte IP packets: suppressed TIPs) */
		if (btr_unlikely(!f->fast) || btr_unlikely(nm == 32)) {
			pos = q;
			*stop = !f->fast;
			break;
		}
		/* As fast_decode, but the last IP update is a select, so the
		 * chain through it only links the IP arithmetic. */
		uint64_t w, raw, ip, v1, w2 = f->ipc, off = ob + q;
		memcpy(&w, p + q + 1, 8);
		raw = w & f->mask;
		ip = (last & f->keep) | raw;
		ip = (uint64_t)((int64_t)(ip << f->sh) >> f->sh);
		last = (ip & f->setip) | (last & ~f->setip);
		ip |= f->c0;
		if (compact) {
			uint64_t w0 = (uint32_t)off | (uint64_t)f->type << 32 | (uint64_t)f->size << 40 |
				      (uint64_t)f->ipc << 48;
			memcpy(&mp.c[nm], &w0, 8);
			mp.c[nm].payload = ip;
		} else {
			struct btr_pt_packet *o = &mp.s[nm];
			v1 = (raw & f->m1) | f->c1;
			memcpy(o, &f->type, 2);
			memset((char *)o + 2, 0, 6);
			memcpy((char *)o + 8, &off, 8);
			memcpy((char *)o + 16, &ip, 8);
			memcpy((char *)o + 24, &v1, 8);
			memcpy((char *)o + 32, &w2, 8);
		}
		mslot[nm++] = (uint8_t)cnt;
		starts |= 1ull << q;
		cnt++;
		pos = q + f->size;
		if (pos >= 63)
			break;
	}
	*lastp = last;
	*adv = pos;
	/* Emission, by byte position up to the last start: each position
	 * writes the 1-byte template of its byte to the slot of the next
	 * packet, and only a start moves to the next slot.  So a position
	 * inside a multi-byte packet writes junk that the next start
	 * overwrites, and the multi-byte packets' slots get junk that the
	 * copy below overwrites; no slot at or past @cnt is written.  This
	 * way the loop has a fixed course (no branch on the data, nothing
	 * to mispredict but its end) and its only chain is the slot count:
	 * one cycle per byte, where a loop over the set bits of @starts
	 * would chain through starts &= starts - 1. */
	if (starts) {
		const unsigned end = 64 - (unsigned)__builtin_clzll(starts);
		uint64_t slot = 0;
		if (compact) {
			char *o = outv;
			uint64_t st = starts, off = (uint32_t)ob;
			for (unsigned i = 0; i < end; i++, off++) {
				const struct cpkt_tmpl *t = &cone_tab[p[i]];
				uint64_t w0 = t->w0 + (uint32_t)off;
				memcpy(o, &w0, 8);
				memcpy(o + 8, &t->payload, 8);
				o += (st & 1) * sizeof(struct btr_pt_cpkt);
				st >>= 1;
			}
		} else {
			struct btr_pt_packet *o = outv;
			for (unsigned i = 0; i < end; i++) {
				const struct pkt_tmpl *t = &one_tab[p[i]];
				uint64_t off = ob + i;
				memcpy(&o[slot], &t->hdr, 8);
				memcpy((char *)&o[slot] + 8, &off, 8);
				memcpy((char *)&o[slot] + 16, &t->w0, 16);
				slot += (starts >> i) & 1;
			}
		}
	}
	if (compact) {
		for (unsigned j = 0; j < nm; j++)
			((struct btr_pt_cpkt *)outv)[mslot[j]] = mp.c[j];
	} else {
		for (unsigned j = 0; j < nm; j++)
			((struct btr_pt_packet *)outv)[mslot[j]] = mp.s[j];
	}
	return cnt;
}

int btr_pt_pkt_next_batch(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkts, int n)
{
	int i = 0;

	while (i < n) {
		/* Blocks, then the per-packet fast path near the buffer end,
		 * with the position and last IP in registers; everything else
		 * goes through btr_pt_pkt_next. */
		const uint8_t *p = d->pos;
		const uintptr_t lim = d->fast_lim;
		const uint64_t bias = d->off_bias;
		uint64_t last = d->last_ip;

		if (lim) {
			const uint8_t *const end = d->end;
			while (i < n && (size_t)(end - p) >= BLOCK_NEED) {
				unsigned adv;
				int stop;
				i += decode_block(p, &last, bias, pkts + i, n - i, &adv, &stop, 0);
				p += adv;
				if (stop)
					break;
			}
		}
		while (i < n && (uintptr_t)p < lim) {
			const struct fast_ent *f = &fast_tab[p[0]];
			if (!f->fast)
				break;
			unsigned sz = fast_decode(f, p, &last, &pkts[i]);
			pkts[i].offset = bias + (uint64_t)(uintptr_t)p;
			p += sz;
			i++;
		}
		d->pos = p;
		d->last_ip = last;
		if (i == n)
			break;
		int r = btr_pt_pkt_next(d, &pkts[i]);
		if (r < 0)
			return i ? i : r;
		i++;
	}
	return i;
}

/* struct btr_pt_packet -> compact (the mapping in pt.h). */
static void to_cpkt(const struct btr_pt_packet *p, uint64_t base, struct btr_pt_cpkt *c)
{
	uint64_t pl = 0;
	uint8_t a = 0, a2 = 0;

	switch (p->type) {
	case BTR_PT_TNT: pl = p->u.tnt.bits; a = p->u.tnt.count; break;
	case BTR_PT_TIP:
	case BTR_PT_TIP_PGE:
	case BTR_PT_TIP_PGD:
	case BTR_PT_FUP: pl = p->u.ip.ip; a = p->u.ip.ipc; break;
	case BTR_PT_PIP: pl = p->u.pip.cr3; a = p->u.pip.nr; break;
	case BTR_PT_MODE_EXEC:
		pl = (uint64_t)(p->u.mode_exec.csl | p->u.mode_exec.csd << 1 | p->u.mode_exec.iflag << 2);
		break;
	case BTR_PT_MODE_TSX: pl = (uint64_t)(p->u.mode_tsx.intx | p->u.mode_tsx.abrt << 1); break;
	case BTR_PT_CBR: pl = p->u.cbr.ratio; break;
	case BTR_PT_TSC: pl = p->u.tsc.tsc; break;
	case BTR_PT_MTC: pl = p->u.mtc.ctc; break;
	case BTR_PT_TMA: pl = p->u.tma.ctc | (uint64_t)p->u.tma.fc << 16; break;
	case BTR_PT_CYC: pl = p->u.cyc.value; break;
	case BTR_PT_VMCS: pl = p->u.vmcs.base; break;
	case BTR_PT_MNT: pl = p->u.mnt.payload; break;
	case BTR_PT_PTW: pl = p->u.ptw.payload; a = p->u.ptw.bytes; a2 = p->u.ptw.ip; break;
	case BTR_PT_EXSTOP: a = p->u.exstop.ip; break;
	case BTR_PT_MWAIT: pl = p->u.mwait.hints | (uint64_t)p->u.mwait.ext << 32; break;
	case BTR_PT_PWRE: pl = p->u.pwre.hw; a = p->u.pwre.state; a2 = p->u.pwre.substate; break;
	case BTR_PT_PWRX: pl = p->u.pwrx.wake; a = p->u.pwrx.last; a2 = p->u.pwrx.deepest; break;
	case BTR_PT_BBP: a = p->u.bbp.sz; a2 = p->u.bbp.type; break;
	case BTR_PT_BIP: pl = p->u.bip.value; a = p->u.bip.id; break;
	case BTR_PT_BEP: a = p->u.bep.ip; break;
	case BTR_PT_CFE: pl = p->u.cfe.vector; a = p->u.cfe.ip; a2 = p->u.cfe.type; break;
	case BTR_PT_EVD: pl = p->u.evd.payload; a = p->u.evd.type; break;
	case BTR_PT_TRIG:
		pl = p->u.trig.trbv | (uint64_t)p->u.trig.icnt << 8;
		a = (uint8_t)(p->u.trig.ip | p->u.trig.mult << 1 | p->u.trig.icnt_valid << 2);
		break;
	default: break;
	}
	c->off = (uint32_t)(p->offset - base);
	c->type = p->type;
	c->size = p->size;
	c->aux = a;
	c->aux2 = a2;
	c->payload = pl;
}

#define CPKT_MAX (1 << 24)

int btr_pt_pkt_next_compact(struct btr_pt_pkt_decoder *d, struct btr_pt_cpkt *pkts, int n, uint64_t *base)
{
	uint64_t b = 0;
	int i = 0;
#ifdef PT_AVX512
	const int avx = have_avx512();
#endif

	if (n > CPKT_MAX)
		n = CPKT_MAX;
	/* Within one call the packets are contiguous (a sync search or an
	 * error ends the call), so offsets from the first one fit 32 bits. */
	while (i < n) {
		const uint8_t *p = d->pos;
		uint64_t last = d->last_ip;

		if (d->fast_lim) {
			const uint8_t *const end = d->end;
			if (!i)
				b = d->off_bias + (uint64_t)(uintptr_t)p;
			const uint64_t rbias = d->off_bias - b;
			while (i < n && (size_t)(end - p) >= BLOCK_NEED) {
				unsigned adv;
				int stop;
#ifdef PT_AVX512
				if (avx && n - i >= AVX_ROOM) {
					i += compact_run_avx512(&p, end, &last, rbias, pkts + i, n - i, &stop);
					if (stop)
						break;
					continue;
				}
				if (avx)
					i += compact_tail_avx512(p, &last, rbias, pkts + i, n - i, &adv, &stop);
				else
#endif
					i += decode_block(p, &last, rbias, pkts + i, n - i, &adv, &stop, 1);
				p += adv;
				if (stop)
					break;
			}
			d->pos = p;
			d->last_ip = last;
			if (i == n)
				break;
		}
		struct btr_pt_packet tmp;
		int r = btr_pt_pkt_next(d, &tmp);
		if (r < 0) {
			if (!i)
				return r;
			break;
		}
		if (!i)
			b = tmp.offset;
		to_cpkt(&tmp, b, &pkts[i++]);
	}
	*base = b;
	return i;
}
