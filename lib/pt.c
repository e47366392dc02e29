/* pt.c - Intel PT packet decoder and encoder.
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
 */
#include "btr/pt.h"
#include "internal.h"

#include <string.h>

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
};

/* A table entry packs class, packet type, fixed size and an auxiliary
 * value into one word: cls | type << 8 | size << 16 | aux << 24. */
#define PE(cls, type, size, aux) ((uint32_t)(cls) | (uint32_t)(type) << 8 | (uint32_t)(size) << 16 | (uint32_t)(aux) << 24)

/* Payload bytes per IP compression (0 for the reserved encodings 5 and
 * 7, which IPOK rejects). */
#define IPB(ipc) ((ipc) == 1 ? 2 : (ipc) == 2 ? 4 : (ipc) == 3 ? 6 : (ipc) == 4 ? 6 : (ipc) == 6 ? 8 : 0)
#define IPOK(ipc) ((ipc) != 5 && (ipc) != 7)
#define IPT(b) (((b) & 0x1f) == 0x0d ? BTR_PT_TIP : ((b) & 0x1f) == 0x11 ? BTR_PT_TIP_PGE : \
		((b) & 0x1f) == 0x01 ? BTR_PT_TIP_PGD : ((b) & 0x1f) == 0x1d ? BTR_PT_FUP : 0)
/* Index of the TNT stop bit (the highest set bit) minus one: the number
 * of branches in a 1-byte TNT. */
#define TNTN(b) ((b) & 0x80 ? 6 : (b) & 0x40 ? 5 : (b) & 0x20 ? 4 : (b) & 0x10 ? 3 : (b) & 0x08 ? 2 : 1)

#define ENT(b)                                                                   \
	((b) == 0x00 ? PE(C_PAD, BTR_PT_PAD, 1, 0) :                                \
	 (b) == 0x02 ? PE(C_EXT, 0, 0, 0) :                                         \
	 !((b) & 1) ? PE(C_TNT8, BTR_PT_TNT, 1, TNTN(b)) :                          \
	 ((b) & 3) == 3 ? PE(C_CYC, BTR_PT_CYC, 0, 0) :                             \
	 (IPT(b) && IPOK((b) >> 5)) ? PE(C_IP, IPT(b), 1 + IPB((b) >> 5), (b) >> 5) : \
	 (b) == 0x19 ? PE(C_TSC, BTR_PT_TSC, 8, 0) :                                \
	 (b) == 0x59 ? PE(C_MTC, BTR_PT_MTC, 2, 0) :                                \
	 (b) == 0x99 ? PE(C_MODE, 0, 2, 0) :                                        \
	 PE(C_BAD, 0, 0, 0))
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

#define F_ISTNT(b) (!((b) & 1) && (b) != 0 && (b) != 2)
#define F_ISCYC1(b) (((b) & 7) == 3)
#define F_ISIP(b) (IPT(b) && IPOK((b) >> 5))
#define F_ISFAST(b) ((b) == 0 || F_ISTNT(b) || F_ISCYC1(b) || F_ISIP(b) || (b) == 0x19 || (b) == 0x59)
#define F_BYTES(n) ((((1ull << (4 * (n))) << (4 * (n)))) - 1)   /* n = 8 gives ~0 */
#define F_KEEP(ipc) ((ipc) == 1 ? ~0xffffull : (ipc) == 2 ? ~0xffffffffull : (ipc) == 4 ? ~0xffffffffffffull : 0)
#define FENT(b) {                                                                              \
	.mask = F_ISIP(b) ? F_BYTES(IPB((b) >> 5)) : (b) == 0x19 ? F_BYTES(7) : (b) == 0x59 ? 0xff : 0, \
	.keep = F_ISIP(b) ? F_KEEP((b) >> 5) : 0,                                              \
	.c0 = F_ISTNT(b) ? (uint64_t)(((b) >> 1) & ((1u << TNTN(b)) - 1)) : F_ISCYC1(b) ? (uint64_t)((b) >> 3) : 0, \
	.m1 = F_ISIP(b) ? ~0ull : 0,                                                           \
	.c1 = F_ISTNT(b) ? TNTN(b) : 0,                                                        \
	.setip = F_ISIP(b) && ((b) >> 5) ? ~0ull : 0,                                          \
	.type = (b) == 0 ? BTR_PT_PAD : F_ISTNT(b) ? BTR_PT_TNT : F_ISCYC1(b) ? BTR_PT_CYC :        \
		F_ISIP(b) ? IPT(b) : (b) == 0x19 ? BTR_PT_TSC : (b) == 0x59 ? BTR_PT_MTC : 0,     \
	.size = F_ISIP(b) ? 1 + IPB((b) >> 5) : (b) == 0x19 ? 8 : (b) == 0x59 ? 2 : 1,          \
	.ipc = F_ISIP(b) ? (b) >> 5 : 0,                                                         \
	.sh = F_ISIP(b) && ((b) >> 5) == 3 ? 16 : 0,                                             \
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

static const uint8_t psb_bytes[BTR_PT_PSB_SIZE] = {
	0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
};

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

/* Extended (0x02-prefixed) packets. */
static int decode_ext(struct btr_pt_pkt_decoder *d, const uint8_t *p, size_t avail,
		      struct btr_pt_packet *pkt)
{
	uint8_t b1;
	uint64_t v;

	NEED(2);
	b1 = p[1];
	if ((b1 & 0x1f) == 0x12) {
		/* PTW: bits 6:5 PayloadBytes (0: 4, 1: 8, others reserved), bit 7 IP. */
		unsigned plc = (b1 >> 5) & 3, n = plc == 0 ? 4 : 8;
		if (plc > 1)
			return -BTR_ERR_BAD_PACKET;
		NEED(2 + n);
		pkt->type = BTR_PT_PTW;
		pkt->size = (uint8_t)(2 + n);
		pkt->u.ptw.payload = rd_le(p + 2, n, avail - 2);
		pkt->u.ptw.bytes = (uint8_t)n;
		pkt->u.ptw.ip = b1 >> 7;
		d->bbp_sz = 0;
		return 2 + (int)n;
	}
	switch (b1) {
	case 0xa3: /* long TNT: 6 payload bytes, stop bit above the last branch */
		NEED(8);
		v = rd_le(p + 2, 6, avail - 2);
		if (v < 2)   /* no stop bit, or no branch: libipt rejects both */
			return -BTR_ERR_BAD_PACKET;
		{
			unsigned n = 63 - (unsigned)__builtin_clzll(v);
			pkt->u.tnt.count = (uint8_t)n;
			pkt->u.tnt.bits = v & ~(1ull << n);
		}
		pkt->type = BTR_PT_TNT;
		pkt->size = 8;
		d->bbp_sz = 0;
		return 8;
	case 0x43: /* PIP: bit 0 NR, bits 47:1 = CR3[51:5] */
		NEED(8);
		v = rd_le(p + 2, 6, avail - 2);
		pkt->type = BTR_PT_PIP;
		pkt->size = 8;
		pkt->u.pip.nr = v & 1;
		pkt->u.pip.cr3 = (v >> 1) << 5;
		d->bbp_sz = 0;
		return 8;
	case 0x83:
		pkt->type = BTR_PT_TRACESTOP;
		pkt->size = 2;
		d->bbp_sz = 0;
		return 2;
	case 0x03: /* CBR: ratio, reserved byte */
		NEED(4);
		pkt->type = BTR_PT_CBR;
		pkt->size = 4;
		pkt->u.cbr.ratio = p[2];
		return 4;
	case 0xc8: /* VMCS: 5 bytes = base address bits 51:12 */
		NEED(7);
		pkt->type = BTR_PT_VMCS;
		pkt->size = 7;
		pkt->u.vmcs.base = rd_le(p + 2, 5, avail - 2) << 12;
		d->bbp_sz = 0;
		return 7;
	case 0xf3:
		pkt->type = BTR_PT_OVF;
		pkt->size = 2;
		d->bbp_sz = 0;
		return 2;
	case 0x82:
		NEED(BTR_PT_PSB_SIZE);
		if (memcmp(p, psb_bytes, BTR_PT_PSB_SIZE))
			return -BTR_ERR_BAD_PACKET;
		pkt->type = BTR_PT_PSB;
		pkt->size = BTR_PT_PSB_SIZE;
		/* The last IP is reset at PSB: the IP packets of PSB+ carry
		 * uncompressed IPs, and decoding may have started here. */
		d->last_ip = 0;
		d->bbp_sz = 0;
		return BTR_PT_PSB_SIZE;
	case 0x23:
		pkt->type = BTR_PT_PSBEND;
		pkt->size = 2;
		d->bbp_sz = 0;
		return 2;
	case 0x73: /* TMA: CTC[15:0], reserved 0, FC[7:0], FC[8] (bits 7:1 reserved) */
		NEED(7);
		if (p[4] || (p[6] & 0xfe))
			return -BTR_ERR_BAD_PACKET;
		pkt->type = BTR_PT_TMA;
		pkt->size = 7;
		pkt->u.tma.ctc = (uint16_t)(p[2] | p[3] << 8);
		pkt->u.tma.fc = (uint16_t)(p[5] | (p[6] & 1) << 8);
		return 7;
	case 0xc3: /* 3-byte opcodes: only MNT (0x88) is defined */
		NEED(3);
		if (p[2] != 0x88)
			return -BTR_ERR_BAD_PACKET;
		NEED(11);
		pkt->type = BTR_PT_MNT;
		pkt->size = 11;
		pkt->u.mnt.payload = rd_le(p + 3, 8, avail - 3);
		return 11;
	case 0x62:
	case 0xe2:
		pkt->type = BTR_PT_EXSTOP;
		pkt->size = 2;
		pkt->u.exstop.ip = b1 >> 7;
		return 2;
	case 0xc2: /* MWAIT: EAX hints, ECX extensions (4 bytes each) */
		NEED(10);
		v = rd_le(p + 2, 8, avail - 2);
		pkt->type = BTR_PT_MWAIT;
		pkt->size = 10;
		pkt->u.mwait.hints = (uint32_t)v;
		pkt->u.mwait.ext = (uint32_t)(v >> 32);
		d->bbp_sz = 0;
		return 10;
	case 0x22: /* PWRE: byte 2 bit 3 HW; byte 3: state 7:4, sub-state 3:0 */
		NEED(4);
		pkt->type = BTR_PT_PWRE;
		pkt->size = 4;
		pkt->u.pwre.hw = (p[2] >> 3) & 1;
		pkt->u.pwre.state = p[3] >> 4;
		pkt->u.pwre.substate = p[3] & 0xf;
		return 4;
	case 0xa2: /* PWRX: byte 2: last 7:4, deepest 3:0; byte 3: wake reason 3:0 */
		NEED(7);
		pkt->type = BTR_PT_PWRX;
		pkt->size = 7;
		pkt->u.pwrx.last = p[2] >> 4;
		pkt->u.pwrx.deepest = p[2] & 0xf;
		pkt->u.pwrx.wake = p[3] & 0xf;
		return 7;
	case 0x63: /* BBP: byte 2 bit 7 SZ, bits 4:0 type */
		NEED(3);
		pkt->type = BTR_PT_BBP;
		pkt->size = 3;
		pkt->u.bbp.sz = p[2] >> 7;
		pkt->u.bbp.type = p[2] & 0x1f;
		d->bbp_sz = pkt->u.bbp.sz ? 4 : 8;
		return 3;
	case 0x33:
	case 0xb3:
		pkt->type = BTR_PT_BEP;
		pkt->size = 2;
		pkt->u.bep.ip = b1 >> 7;
		d->bbp_sz = 0;
		return 2;
	case 0x13: /* CFE: byte 2: IP bit 7, type 4:0; byte 3 vector */
		NEED(4);
		pkt->type = BTR_PT_CFE;
		pkt->size = 4;
		pkt->u.cfe.ip = p[2] >> 7;
		pkt->u.cfe.type = p[2] & 0x1f;
		pkt->u.cfe.vector = p[3];
		d->bbp_sz = 0;
		return 4;
	case 0x53: /* EVD: byte 2 type 5:0, 8 payload bytes */
		NEED(11);
		pkt->type = BTR_PT_EVD;
		pkt->size = 11;
		pkt->u.evd.type = p[2] & 0x3f;
		pkt->u.evd.payload = rd_le(p + 3, 8, avail - 3);
		d->bbp_sz = 0;
		return 11;
	default:
		return -BTR_ERR_BAD_PACKET;
	}
}

/* Decodes the packet at @p (@avail > 0 bytes readable).  Returns its
 * size, -BTR_ERR_AGAIN if it needs more than @avail bytes, or
 * -BTR_ERR_BAD_PACKET.  Decoder state changes only on success. */
static inline int decode(struct btr_pt_pkt_decoder *d, const uint8_t *p, size_t avail,
			 struct btr_pt_packet *pkt)
{
	const uint8_t b = p[0];
	const uint32_t e = pt_tab[b];
	const unsigned e_type = (e >> 8) & 0xff, e_size = (e >> 16) & 0xff, e_aux = e >> 24;

	switch (e & 0xff) {
	case C_TNT8:
		if (btr_unlikely(d->bbp_sz) && (b & 7) == 4)
			goto bip;
		pkt->type = BTR_PT_TNT;
		pkt->size = 1;
		pkt->u.tnt.count = e_aux;
		pkt->u.tnt.bits = (b >> 1) & ((1u << e_aux) - 1);
		d->bbp_sz = 0;
		return 1;
	case C_IP: {
		uint64_t raw, ip;
		unsigned ipc = e_aux;

		NEED(e_size);
		raw = e_size > 1 ? rd_le(p + 1, e_size - 1u, avail - 1) : 0;
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
		if (e_type != BTR_PT_FUP)
			d->bbp_sz = 0;
		return e_size;
	}
	case C_PAD:
		pkt->type = BTR_PT_PAD;
		pkt->size = 1;
		return 1;
	case C_MTC:
		NEED(2);
		pkt->type = BTR_PT_MTC;
		pkt->size = 2;
		pkt->u.mtc.ctc = p[1];
		return 2;
	case C_CYC: {
		/* Byte 0: bit 2 Exp, bits 7:3 value[4:0]; each further byte:
		 * bit 0 Exp, bits 7:1 the next 7 value bits.  Like libipt we
		 * reject a value that needs more than 64 bits. */
		uint64_t v = b >> 3;
		size_t n = 1;
		unsigned shl = 5;
		uint8_t x = b >> 2;

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
		NEED(8);
		pkt->type = BTR_PT_TSC;
		pkt->size = 8;
		pkt->u.tsc.tsc = rd_le(p + 1, 7, avail - 1);
		return 8;
	case C_MODE: {
		uint8_t m;

		NEED(2);
		m = p[1];
		if ((m & 0xe0) == 0x00) {
			pkt->type = BTR_PT_MODE_EXEC;
			pkt->u.mode_exec.csl = m & 1;
			pkt->u.mode_exec.csd = (m >> 1) & 1;
			pkt->u.mode_exec.iflag = (m >> 2) & 1;
		} else if ((m & 0xe0) == 0x20) {
			pkt->type = BTR_PT_MODE_TSX;
			pkt->u.mode_tsx.intx = m & 1;
			pkt->u.mode_tsx.abrt = (m >> 1) & 1;
		} else {
			return -BTR_ERR_BAD_PACKET;
		}
		pkt->size = 2;
		d->bbp_sz = 0;
		return 2;
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
	pkt->u.bip.id = b >> 3;
	pkt->u.bip.value = rd_le(p + 1, n, avail - 1);
	return 1 + (int)n;
}
}

/* ---- decoder API ---- */

/* Recomputes the fast path's limit: packets at pos < fast_lim have 16
 * readable bytes and need none of the slow cases (carried bytes, a sync
 * search to continue, a BBP block); 0 disables the fast path.  Called
 * wherever those change, so the hot path tests one word. */
static inline void update_fast(struct btr_pt_pkt_decoder *d)
{
	d->fast_lim = (d->carry_len | d->syncing | d->bbp_sz) || d->end - d->begin < BTR_PT_MAX_PACKET
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
 * memchr for the 0x82 byte is as fast, 0x02 being common in PT.) */
static const uint8_t *find_psb(const uint8_t *p, size_t n)
{
	const uint8_t *q = p + 1, *end = p + n;

	while (n >= BTR_PT_PSB_SIZE && q < end) {
		q = memchr(q, 0x82, (size_t)(end - q));
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
	for (j = i + BTR_PT_PSB_SIZE; j + 1 < total && seq_at(d, j) == 0x02 && seq_at(d, j + 1) == 0x82; j += 2)
		;
	if (j == total || (j + 1 == total && seq_at(d, j) == 0x02))
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
		if (p[0] == 0x02 && p[1] == 0x82 && !memcmp(p, psb_bytes, BTR_PT_PSB_SIZE) &&
		    !(i + BTR_PT_PSB_SIZE + 1 < len && p[16] == 0x02 && p[17] == 0x82)) {
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

int btr_pt_pkt_next_batch(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkts, int n)
{
	int i = 0;

	while (i < n) {
		/* Run the fast path with the position and last IP in registers;
		 * everything else goes through btr_pt_pkt_next. */
		const uint8_t *p = d->pos;
		const uintptr_t lim = d->fast_lim;
		const uint64_t bias = d->off_bias;
		uint64_t last = d->last_ip;

		while (i < n && (uintptr_t)p < lim) {
			const struct fast_ent *f = &fast_tab[p[0]];
			if (!f->fast)
				break;
			unsigned sz = fast_decode(f, p, &last, &pkts[i]);
			pkts[i].offset = bias + (uint64_t)(uintptr_t)p;
			/* Most packets are 1 byte (TNT, PAD): with a predicted
			 * branch the next position does not wait for the table
			 * load (variable-length decoding is a serial chain). */
			if (btr_likely(sz == 1)) {
				p++;
			} else {
				p += sz;
				__asm__("" : "+r"(p)); /* keep a branch, not a cmov */
			}
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

/* ---- encoder ---- */

void btr_pt_enc_init(struct btr_pt_encoder *e, uint8_t *buf, size_t size)
{
	e->begin = e->pos = buf;
	e->end = buf + size;
	e->last_ip = 0;
}

static uint8_t ip_opcode(unsigned type)
{
	switch (type) {
	case BTR_PT_TIP: return 0x0d;
	case BTR_PT_TIP_PGE: return 0x11;
	case BTR_PT_TIP_PGD: return 0x01;
	case BTR_PT_FUP: return 0x1d;
	default: return 0;
	}
}

static inline void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int btr_pt_enc_ip(struct btr_pt_encoder *e, enum btr_pt_type type, uint64_t ip)
{
	uint64_t diff = ip ^ e->last_ip;
	unsigned ipc, n;
	uint8_t opc = ip_opcode(type);

	if (!opc)
		return -BTR_ERR_INVAL;
	if (btr_unlikely(e->end - e->pos < 9))
		return -BTR_ERR_NOMEM;
	/* last_ip == 0 means "none since PSB": decoders such as libipt then
	 * need an uncompressed IP. */
	if (!(diff >> 16) && e->last_ip)
		ipc = BTR_PT_IPC_UPDATE16, n = 2;
	else if (!(diff >> 32) && e->last_ip)
		ipc = BTR_PT_IPC_UPDATE32, n = 4;
	else if (sext48(ip) == ip)
		ipc = BTR_PT_IPC_SEXT48, n = 6;
	else if (!(diff >> 48) && e->last_ip)
		ipc = BTR_PT_IPC_UPDATE48, n = 6;
	else
		ipc = BTR_PT_IPC_FULL, n = 8;
	e->pos[0] = (uint8_t)(ipc << 5 | opc);
	memcpy(e->pos + 1, &ip, 8);   /* little-endian; room checked above */
	e->pos += 1 + n;
	e->last_ip = ip;
	return (int)(1 + n);
}

int btr_pt_enc_psb(struct btr_pt_encoder *e, uint64_t ip)
{
	size_t need = BTR_PT_PSB_SIZE + 2 + (ip ? 9 : 0);
	uint8_t *start = e->pos;

	if ((size_t)(e->end - e->pos) < need)
		return -BTR_ERR_NOMEM;
	memcpy(e->pos, psb_bytes, BTR_PT_PSB_SIZE);
	e->pos += BTR_PT_PSB_SIZE;
	e->last_ip = 0;
	if (ip)
		btr_pt_enc_ip(e, BTR_PT_FUP, ip);
	e->pos[0] = 0x02;
	e->pos[1] = 0x23;
	e->pos += 2;
	return (int)(e->pos - start);
}

int btr_pt_enc_packet(struct btr_pt_encoder *e, const struct btr_pt_packet *pkt)
{
	uint8_t b[BTR_PT_MAX_PACKET];
	unsigned n = 0;
	uint64_t new_ip = e->last_ip;

	switch (pkt->type) {
	case BTR_PT_PAD:
		b[n++] = 0x00;
		break;
	case BTR_PT_PSB:
		memcpy(b, psb_bytes, BTR_PT_PSB_SIZE);
		n = BTR_PT_PSB_SIZE;
		new_ip = 0;
		break;
	case BTR_PT_PSBEND:
		b[n++] = 0x02, b[n++] = 0x23;
		break;
	case BTR_PT_TNT: {
		unsigned c = pkt->u.tnt.count;
		uint64_t pl;
		if (!c || c > 47 || (c > 6 && pkt->size == 1))
			return -BTR_ERR_INVAL;
		pl = (1ull << c) | (pkt->u.tnt.bits & ((1ull << c) - 1));
		if (c <= 6 && pkt->size != 8) {
			b[n++] = (uint8_t)(pl << 1);
		} else {
			b[n++] = 0x02, b[n++] = 0xa3;
			put_le(b + n, pl, 6);
			n += 6;
		}
		break;
	}
	case BTR_PT_TIP:
	case BTR_PT_TIP_PGE:
	case BTR_PT_TIP_PGD:
	case BTR_PT_FUP: {
		unsigned ipc = pkt->u.ip.ipc, nb;
		uint64_t ip = pkt->u.ip.ip;
		if (ipc > 7 || !IPOK(ipc))
			return -BTR_ERR_INVAL;
		nb = IPB(ipc);
		b[n++] = (uint8_t)(ipc << 5 | ip_opcode(pkt->type));
		put_le(b + n, ip, nb);
		n += nb;
		if (ipc) {
			uint64_t raw = nb == 8 ? ip : ip & ((1ull << (8 * nb)) - 1);
			new_ip = ipc == BTR_PT_IPC_SEXT48 ? sext48(raw) : (e->last_ip & ip_keep[ipc]) | raw;
		}
		break;
	}
	case BTR_PT_PIP:
		b[n++] = 0x02, b[n++] = 0x43;
		put_le(b + n, (pkt->u.pip.cr3 >> 5) << 1 | (pkt->u.pip.nr & 1), 6);
		n += 6;
		break;
	case BTR_PT_MODE_EXEC:
		b[n++] = 0x99;
		b[n++] = (uint8_t)((pkt->u.mode_exec.csl & 1) | (pkt->u.mode_exec.csd & 1) << 1 |
				   (pkt->u.mode_exec.iflag & 1) << 2);
		break;
	case BTR_PT_MODE_TSX:
		b[n++] = 0x99;
		b[n++] = (uint8_t)(0x20 | (pkt->u.mode_tsx.intx & 1) | (pkt->u.mode_tsx.abrt & 1) << 1);
		break;
	case BTR_PT_TRACESTOP:
		b[n++] = 0x02, b[n++] = 0x83;
		break;
	case BTR_PT_CBR:
		b[n++] = 0x02, b[n++] = 0x03, b[n++] = pkt->u.cbr.ratio, b[n++] = 0;
		break;
	case BTR_PT_TSC:
		b[n++] = 0x19;
		put_le(b + n, pkt->u.tsc.tsc, 7);
		n += 7;
		break;
	case BTR_PT_MTC:
		b[n++] = 0x59, b[n++] = pkt->u.mtc.ctc;
		break;
	case BTR_PT_TMA:
		b[n++] = 0x02, b[n++] = 0x73;
		b[n++] = (uint8_t)pkt->u.tma.ctc, b[n++] = (uint8_t)(pkt->u.tma.ctc >> 8);
		b[n++] = 0;
		b[n++] = (uint8_t)pkt->u.tma.fc, b[n++] = (pkt->u.tma.fc >> 8) & 1;
		break;
	case BTR_PT_CYC: {
		uint64_t v = pkt->u.cyc.value;
		if (v >> 61)   /* 5 + 8 * 7 bits is the most libipt accepts */
			return -BTR_ERR_INVAL;
		b[n++] = (uint8_t)(0x03 | (v & 0x1f) << 3 | (v >> 5 ? 4 : 0));
		v >>= 5;
		while (v) {
			b[n++] = (uint8_t)((v & 0x7f) << 1 | (v >> 7 ? 1 : 0));
			v >>= 7;
		}
		break;
	}
	case BTR_PT_VMCS:
		b[n++] = 0x02, b[n++] = 0xc8;
		put_le(b + n, pkt->u.vmcs.base >> 12, 5);
		n += 5;
		break;
	case BTR_PT_OVF:
		b[n++] = 0x02, b[n++] = 0xf3;
		break;
	case BTR_PT_MNT:
		b[n++] = 0x02, b[n++] = 0xc3, b[n++] = 0x88;
		put_le(b + n, pkt->u.mnt.payload, 8);
		n += 8;
		break;
	case BTR_PT_PTW:
		if (pkt->u.ptw.bytes != 4 && pkt->u.ptw.bytes != 8)
			return -BTR_ERR_INVAL;
		b[n++] = 0x02;
		b[n++] = (uint8_t)(0x12 | (pkt->u.ptw.bytes == 8 ? 0x20 : 0) | (pkt->u.ptw.ip ? 0x80 : 0));
		put_le(b + n, pkt->u.ptw.payload, pkt->u.ptw.bytes);
		n += pkt->u.ptw.bytes;
		break;
	case BTR_PT_EXSTOP:
		b[n++] = 0x02, b[n++] = pkt->u.exstop.ip ? 0xe2 : 0x62;
		break;
	case BTR_PT_MWAIT:
		b[n++] = 0x02, b[n++] = 0xc2;
		put_le(b + n, pkt->u.mwait.hints, 4);
		put_le(b + n + 4, pkt->u.mwait.ext, 4);
		n += 8;
		break;
	case BTR_PT_PWRE:
		b[n++] = 0x02, b[n++] = 0x22;
		b[n++] = (uint8_t)((pkt->u.pwre.hw & 1) << 3);
		b[n++] = (uint8_t)((pkt->u.pwre.state & 0xf) << 4 | (pkt->u.pwre.substate & 0xf));
		break;
	case BTR_PT_PWRX:
		b[n++] = 0x02, b[n++] = 0xa2;
		b[n++] = (uint8_t)((pkt->u.pwrx.last & 0xf) << 4 | (pkt->u.pwrx.deepest & 0xf));
		b[n++] = pkt->u.pwrx.wake & 0xf;
		b[n++] = 0, b[n++] = 0, b[n++] = 0;
		break;
	case BTR_PT_BBP:
		b[n++] = 0x02, b[n++] = 0x63;
		b[n++] = (uint8_t)((pkt->u.bbp.sz ? 0x80 : 0) | (pkt->u.bbp.type & 0x1f));
		break;
	case BTR_PT_BIP: {
		/* The payload size comes from the preceding BBP, which the
		 * encoder does not track: .size says it (5 or 9). */
		unsigned nb = pkt->size == 5 ? 4 : pkt->size == 9 ? 8 : 0;
		if (!nb)
			return -BTR_ERR_INVAL;
		b[n++] = (uint8_t)((pkt->u.bip.id & 0x1f) << 3 | 4);
		put_le(b + n, pkt->u.bip.value, nb);
		n += nb;
		break;
	}
	case BTR_PT_BEP:
		b[n++] = 0x02, b[n++] = pkt->u.bep.ip ? 0xb3 : 0x33;
		break;
	case BTR_PT_CFE:
		b[n++] = 0x02, b[n++] = 0x13;
		b[n++] = (uint8_t)((pkt->u.cfe.ip ? 0x80 : 0) | (pkt->u.cfe.type & 0x1f));
		b[n++] = pkt->u.cfe.vector;
		break;
	case BTR_PT_EVD:
		b[n++] = 0x02, b[n++] = 0x53, b[n++] = pkt->u.evd.type & 0x3f;
		put_le(b + n, pkt->u.evd.payload, 8);
		n += 8;
		break;
	default:
		return -BTR_ERR_INVAL;
	}
	if ((size_t)(e->end - e->pos) < n)
		return -BTR_ERR_NOMEM;
	memcpy(e->pos, b, n);
	e->pos += n;
	e->last_ip = new_ip;
	return (int)n;
}
