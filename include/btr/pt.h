/* btr/pt.h - Intel Processor Trace packets: decoder and encoder.
 *
 * Layout and semantics follow the Intel SDM Vol. 3C, chapter "Intel
 * Processor Trace", section "Trace Packets and Data Types".  The decoder
 * works on caller-owned buffers and a caller-owned state struct and never
 * allocates; so does the encoder.  Neither logs nor prints.
 *
 * Typical streaming use (see docs/pt-dump.md for the CLI built on it):
 *
 *	struct btr_pt_pkt_decoder d;
 *	struct btr_pt_packet p;
 *	btr_pt_pkt_init(&d, buf0, n0, 0);
 *	btr_pt_pkt_sync_forward(&d);          // skip to the first PSB
 *	for (;;) {
 *		int r = btr_pt_pkt_next(&d, &p);
 *		if (r > 0) { use p (p.offset is its stream offset); continue; }
 *		if (r == -BTR_ERR_EOS || r == -BTR_ERR_AGAIN) {
 *			if (no more input) break;     // AGAIN here = truncated packet
 *			btr_pt_pkt_feed(&d, next_buf, next_n);
 *			continue;
 *		}
 *		// -BTR_ERR_BAD_PACKET at btr_pt_pkt_offset(&d): report, then
 *		if (btr_pt_pkt_sync_forward(&d) < 0) feed more or stop;
 *	}
 */
#ifndef BTR_PT_H
#define BTR_PT_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "btr/error.h"

#ifdef __cplusplus
extern "C" {
#endif

enum btr_pt_type {
	BTR_PT_INVALID = 0,
	BTR_PT_PAD,
	BTR_PT_PSB,
	BTR_PT_PSBEND,
	BTR_PT_TNT,        /* short (1 byte) or long (8 byte) TNT: see .size */
	BTR_PT_TIP,
	BTR_PT_TIP_PGE,
	BTR_PT_TIP_PGD,
	BTR_PT_FUP,
	BTR_PT_PIP,
	BTR_PT_MODE_EXEC,
	BTR_PT_MODE_TSX,
	BTR_PT_TRACESTOP,
	BTR_PT_CBR,
	BTR_PT_TSC,
	BTR_PT_MTC,
	BTR_PT_TMA,
	BTR_PT_CYC,
	BTR_PT_VMCS,
	BTR_PT_OVF,
	BTR_PT_MNT,
	BTR_PT_PTW,
	BTR_PT_EXSTOP,
	BTR_PT_MWAIT,
	BTR_PT_PWRE,
	BTR_PT_PWRX,
	BTR_PT_BBP,
	BTR_PT_BIP,
	BTR_PT_BEP,
	BTR_PT_CFE,
	BTR_PT_EVD,
	BTR_PT_TRIG,       /* trigger (0xD9): appended, the values above are stable */
	BTR_PT__COUNT
};

/* IP compression (the IPBytes field of TIP/TIP.PGE/TIP.PGD/FUP). */
enum btr_pt_ipc {
	BTR_PT_IPC_SUPPRESSED = 0, /* no IP payload */
	BTR_PT_IPC_UPDATE16 = 1,   /* bits 15:0 replace last IP's */
	BTR_PT_IPC_UPDATE32 = 2,   /* bits 31:0 replace last IP's */
	BTR_PT_IPC_SEXT48 = 3,     /* bits 47:0, sign-extended */
	BTR_PT_IPC_UPDATE48 = 4,   /* bits 47:0 replace last IP's */
	BTR_PT_IPC_FULL = 6,       /* 64-bit IP */
};

/* Largest encoded packet (PSB), the size of a PSB and its bytes (e.g. for
 * memmem; the string's terminating NUL is not part of it). */
#define BTR_PT_MAX_PACKET 16
#define BTR_PT_PSB_SIZE 16
#define BTR_PT_PSB_PATTERN "\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82"

/* PWRX wake reasons (btr_pt_packet.u.pwrx.wake bits). */
#define BTR_PT_PWRX_INT 0x1    /* external interrupt */
#define BTR_PT_PWRX_STORE 0x4  /* store to monitored address */
#define BTR_PT_PWRX_HW 0x8     /* autonomous hardware condition (HDC) */

/* One decoded packet.  Only the member for .type is meaningful. */
struct btr_pt_packet {
	uint8_t type;   /* enum btr_pt_type */
	uint8_t size;   /* encoded size in bytes */
	uint16_t reserved;
	uint64_t offset; /* decoder: stream offset of the packet's first byte
			  * (encoder: ignored) */
	union {
		/* TNT: @count (1..6 short, 1..47 long) bits in @bits; the first
		 * (oldest) branch is bit @count-1, the newest bit 0; 1 = taken.
		 * Encoder: a long TNT is written if @count > 6 or .size is 8. */
		struct { uint64_t bits; uint8_t count; } tnt;
		/* TIP, TIP.PGE, TIP.PGD, FUP: @raw is the payload as encoded
		 * (zero-extended), @ip the IP reconstructed with the decoder's
		 * last IP (valid unless @ipc is SUPPRESSED). */
		struct { uint64_t ip; uint64_t raw; uint8_t ipc; } ip;
		/* PIP: @cr3 with bits 4:0 zero; @nr the non-root (NR) bit. */
		struct { uint64_t cr3; uint8_t nr; } pip;
		/* MODE.Exec: @csl (CS.L), @csd (CS.D); @iflag (IF, newer CPUs). */
		struct { uint8_t csl, csd, iflag; } mode_exec;
		/* MODE.TSX: in transaction, aborted. */
		struct { uint8_t intx, abrt; } mode_tsx;
		struct { uint8_t ratio; } cbr;
		struct { uint64_t tsc; } tsc;           /* 56-bit value */
		struct { uint8_t ctc; } mtc;            /* 8-bit CTC */
		struct { uint16_t ctc; uint16_t fc; } tma; /* CTC[15:0], FastCounter[8:0] */
		struct { uint64_t value; } cyc;         /* cycle count (up to 61 bits) */
		struct { uint64_t base; } vmcs;         /* bits 11:0 zero */
		struct { uint64_t payload; } mnt;
		/* PTW: @payload of @bytes (4 or 8); @ip set if FUP follows. */
		struct { uint64_t payload; uint8_t bytes; uint8_t ip; } ptw;
		struct { uint8_t ip; } exstop;          /* @ip: FUP follows */
		struct { uint32_t hints; uint32_t ext; } mwait;
		/* PWRE: @hw (C-state entry initiated by hardware), resolved
		 * thread C-state @state and sub-C-state @substate (4 bits each). */
		struct { uint8_t hw; uint8_t state, substate; } pwre;
		/* PWRX: last and deepest core C-state (4 bits), @wake reason
		 * bits BTR_PT_PWRX_*. */
		struct { uint8_t last, deepest, wake; } pwrx;
		/* BBP: @sz 0 = 8-byte BIP payloads follow, 1 = 4-byte; @type
		 * (5 bits) the block type (e.g. 0x2 GPRs).  Until the next BEP,
		 * TNT, TIP* or MODE packet, bytes xxxxx100b are BIPs. */
		struct { uint8_t sz; uint8_t type; } bbp;
		/* BIP: @id (5 bits) the item in the block, @value its payload
		 * (4 or 8 bytes per the BBP's @sz; the encoder takes it from
		 * .size, 5 or 9). */
		struct { uint64_t value; uint8_t id; } bip;
		struct { uint8_t ip; } bep;             /* @ip: FUP follows */
		/* CFE (control flow event): @ip FUP follows, @type (5 bits),
		 * @vector (interrupt vector, if the type has one). */
		struct { uint8_t ip; uint8_t type; uint8_t vector; } cfe;
		/* EVD (event data): @type (6 bits) and 64-bit @payload. */
		struct { uint64_t payload; uint8_t type; } evd;
		/* TRIG (trigger): @trbv the trigger bits that fired; @ip a FUP
		 * follows (the IP the trigger binds to); @mult more than one
		 * trigger event was merged; @icnt_valid: @icnt is the number of
		 * instructions retired since the last IP-carrying packet. */
		struct { uint16_t icnt; uint8_t trbv, ip, mult, icnt_valid; } trig;
	} u;
};

/* Packet decoder state.  Caller-owned; initialize with btr_pt_pkt_init.
 * Fields are private to pt.c but public so the struct can live on the
 * stack or be embedded without allocation.  It holds no pointers to
 * memory it owns; @begin..@end is the caller's current buffer. */
struct btr_pt_pkt_decoder {
	const uint8_t *begin;   /* current buffer */
	const uint8_t *end;
	const uint8_t *pos;     /* next packet (unless @carry_len) */
	uint64_t base_offset;   /* stream offset of @begin */
	uint64_t last_ip;       /* for IP reconstruction */
	uintptr_t fast_lim;     /* the fast path may decode at pos < fast_lim */
	uint64_t off_bias;      /* base_offset - (uintptr_t)begin */
	uint8_t bbp_sz;         /* inside a BBP block: 4 or 8 (BIP payload size), else 0 */
	uint8_t syncing;        /* a sync_forward ran out of data: continue it */
	uint8_t carry_len;      /* stream bytes before @begin not yet decoded */
	uint8_t errata;         /* BTR_PT_ERRATA_* (btr_pt_pkt_set_errata) */
	uint8_t carry[2 * BTR_PT_MAX_PACKET];
};

/* Packet-level errata workarounds (btr_pt_pkt_set_errata). */
enum {
	/* SKD007 "Intel PT Buffer Overflow May Result in Incorrect Packets":
	 * an OVF may replace the rest of a multi-byte CYC; a CYC with its
	 * extension bit followed by 02 F3 is then one OVF (3 bytes), as
	 * libipt decodes it.  btr_ptflow applies it by itself (cpu config);
	 * which CPUs have it: btr_ptflow_errata_names. */
	BTR_PT_ERRATA_SKD007 = 1u << 0,
	/* SKZ84 "Use of VMX TSC Scaling or TSC Offsetting Will Result in
	 * Corrupted Intel PT Packets": a TMA with corrupted CTC/FastCounter
	 * fields is followed by a bogus byte.  A TMA whose reserved bits are
	 * set (the corruption that can be seen) is then, as libipt decodes
	 * it, one BTR_PT_INVALID packet of 8 bytes (TMA + the bogus byte),
	 * and decoding goes on after it. */
	BTR_PT_ERRATA_SKZ84 = 1u << 1,
};

/* Starts decoding the first @size bytes of @buf (caller-owned, must stay
 * valid while decoding it), whose first byte is at @offset in the whole
 * stream.  Decoding starts at @buf's first byte; call
 * btr_pt_pkt_sync_forward first unless @buf starts at a packet boundary
 * (e.g. a PSB).  Returns 0 or -BTR_ERR_INVAL (NULL @d, or NULL @buf with
 * nonzero @size). */
int btr_pt_pkt_init(struct btr_pt_pkt_decoder *d, const uint8_t *buf, size_t size, uint64_t offset);

/* Enables the packet-level errata workarounds @flags (BTR_PT_ERRATA_*)
 * on @d, after btr_pt_pkt_init (which clears them).  With any set, the
 * batch and fast paths fall back to the general decoder.  Returns 0 or
 * -BTR_ERR_INVAL (NULL @d, unknown flag). */
int btr_pt_pkt_set_errata(struct btr_pt_pkt_decoder *d, unsigned flags);

/* Continues with the next buffer of the same stream (its first byte
 * follows the previous buffer's last byte).  A packet cut at the end of
 * the previous buffer is completed from @buf; bytes of the previous
 * buffer not yet decoded (at most 2 * BTR_PT_MAX_PACKET) are kept, so the
 * previous buffer may be freed after this call.  Returns 0, or
 * -BTR_ERR_INVAL if more undecoded bytes remain than can be kept (the
 * decoder is unchanged then). */
int btr_pt_pkt_feed(struct btr_pt_pkt_decoder *d, const uint8_t *buf, size_t size);

/* Moves to the next PSB at or after the current position, resets the
 * last IP and the BBP block state.  As in libipt, the PSB is the last 16
 * bytes of a run of 02 82 pairs (so back-to-back PSBs sync to the second,
 * and a run that reaches the end of the data waits for the next buffer).
 * Returns 0, or -BTR_ERR_EOS if the data holds no (complete) PSB there:
 * the buffer is consumed, a trailing PSB prefix is kept, and the search
 * continues automatically at the next btr_pt_pkt_next (or sync_forward)
 * after btr_pt_pkt_feed. */
int btr_pt_pkt_sync_forward(struct btr_pt_pkt_decoder *d);

/* Moves to the last PSB that starts before the current position within
 * the current buffer (bytes kept from earlier buffers are dropped), and
 * resets the last IP.  Returns 0 or -BTR_ERR_EOS (none; position kept). */
int btr_pt_pkt_sync_backward(struct btr_pt_pkt_decoder *d);

/* Moves to stream offset @offset (must be inside the current buffer, or
 * its end), resetting the last IP and block state and dropping kept bytes.
 * Returns 0 or -BTR_ERR_INVAL. */
int btr_pt_pkt_sync_set(struct btr_pt_pkt_decoder *d, uint64_t offset);

/* Decodes the packet at the current position into @pkt and advances.
 * Returns its size (> 0) and sets @pkt->offset.  Errors (the position
 * does not move):
 *  -BTR_ERR_EOS: no more bytes in this buffer (feed the next one);
 *  -BTR_ERR_AGAIN: the buffer ends inside a packet (its bytes are kept:
 *   feed the next buffer; at the true end of the stream this means a
 *   truncated packet at btr_pt_pkt_offset());
 *  -BTR_ERR_BAD_PACKET: the bytes at btr_pt_pkt_offset() are no valid
 *   packet (unknown opcode or reserved encoding); call
 *   btr_pt_pkt_sync_forward to resume at the next PSB. */
int btr_pt_pkt_next(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkt);

/* Decodes up to @n packets into @pkts (caller-owned) like repeated
 * btr_pt_pkt_next calls, but faster (decoder state stays in registers).
 * Returns the number decoded (> 0), stopping early before an error or
 * the end of the buffer (the next call then returns that error), or, if
 * the first packet fails, that error (see btr_pt_pkt_next). */
int btr_pt_pkt_next_batch(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkts, int n);

/* Compact packet, 16 bytes, for btr_pt_pkt_next_compact.  The same
 * information as struct btr_pt_packet (btr_pt_cpkt_expand converts):
 * the stream offset is @base (returned by the call) + @off; @payload and
 * @aux/@aux2 hold, per @type:
 *   TNT: bits, aux = count (as u.tnt)
 *   TIP, TIP.PGE, TIP.PGD, FUP: the reconstructed IP (u.ip.ip), aux =
 *     ipc; the raw payload is the low 2/4/6/6/8 bytes of the IP for ipc
 *     1/2/3/4/6 (0 if suppressed)
 *   PIP: cr3, aux = nr         MODE.Exec: csl | csd << 1 | iflag << 2
 *   MODE.TSX: intx | abrt << 1 CBR: ratio     TSC: tsc    MTC: ctc
 *   TMA: ctc | fc << 16        CYC: value     VMCS: base  MNT: payload
 *   PTW: payload, aux = bytes, aux2 = ip      EXSTOP, BEP: aux = ip
 *   MWAIT: hints | ext << 32   PWRE: hw, aux = state, aux2 = substate
 *   PWRX: wake, aux = last, aux2 = deepest    BBP: aux = sz, aux2 = type
 *   BIP: value, aux = id       CFE: vector, aux = ip, aux2 = type
 *   EVD: payload, aux = type
 *   TRIG: trbv | icnt << 8, aux = ip | mult << 1 | icnt_valid << 2
 *   all other fields 0. */
struct btr_pt_cpkt {
	uint32_t off;      /* stream offset - base */
	uint8_t type;      /* enum btr_pt_type */
	uint8_t size;      /* encoded size in bytes */
	uint8_t aux, aux2;
	uint64_t payload;
};

/* Like btr_pt_pkt_next_batch (same packets, errors and decoder state
 * afterwards), but writes compact packets: 16 instead of 40 bytes, and on
 * CPUs with AVX-512 VBMI (checked at run time) it finds the packets of 64
 * bytes at a time with vector permutes: the fastest way to decode (see
 * docs/pt-dump.md, "Performance").  @n must be
 * at most 1 << 24 (larger values are treated as 1 << 24).  On success
 * sets *@base to the stream offset of the first packet (the offsets of
 * the others follow from @off).  Entries of @pkts past the returned
 * count may have been overwritten. */
int btr_pt_pkt_next_compact(struct btr_pt_pkt_decoder *d, struct btr_pt_cpkt *pkts, int n, uint64_t *base);

/* Converts compact packet @c (from a call that returned @base) into the
 * struct btr_pt_packet btr_pt_pkt_next gives for it (@out is cleared
 * first, then written).  Returns 0, or -BTR_ERR_INVAL for an unknown
 * type. */
int btr_pt_cpkt_expand(const struct btr_pt_cpkt *c, uint64_t base, struct btr_pt_packet *out);

/* Declares the end of the stream (no more btr_pt_pkt_feed) after
 * btr_pt_pkt_next returned -BTR_ERR_EOS or -BTR_ERR_AGAIN.  Returns
 * -BTR_ERR_TRUNCATED if the stream ends inside a packet (which starts at
 * btr_pt_pkt_offset()), else 0 (also while a sync search ran out of data:
 * then there was no PSB). */
int btr_pt_pkt_end(const struct btr_pt_pkt_decoder *d);

/* Stream offset of the next packet (or of the failing bytes after an
 * error). */
uint64_t btr_pt_pkt_offset(const struct btr_pt_pkt_decoder *d);

/* Returns the name of a packet type as printed by `btr pt dump` ("tip.pge",
 * "mode.exec", "tnt" for both TNT sizes, ...), "invalid" if out of range. */
const char *btr_pt_type_name(enum btr_pt_type type);

/* Returns the name `btr pt dump` prints for @pkt: like btr_pt_type_name,
 * but "tnt.8" or "tnt.64" for TNT packets by their size. */
const char *btr_pt_pkt_name(const struct btr_pt_packet *pkt);

/* Formats @pkt's payload (without offset and name) into @buf (@size bytes,
 * caller-owned, always NUL-terminated if @size > 0) as documented in
 * docs/pt-dump.md; packets without payload give "".  Returns the length
 * the full text has (like snprintf; at most 96). */
int btr_pt_pkt_format(const struct btr_pt_packet *pkt, char *buf, size_t size);

/* Encoder: writes packets into a caller-owned buffer, tracking the last
 * IP so that btr_pt_enc_ip can choose the smallest IP compression. */
struct btr_pt_encoder {
	uint8_t *begin, *end, *pos;
	uint64_t last_ip;
};

/* Initializes @e to write into @buf of @size bytes (caller-owned). */
void btr_pt_enc_init(struct btr_pt_encoder *e, uint8_t *buf, size_t size);

/* Writes @pkt exactly as given (for IP packets: @pkt->u.ip.ipc and the
 * bytes of @pkt->u.ip.ip it implies; updates last IP; a PSB resets it).
 * Returns the bytes written, or -BTR_ERR_INVAL for an unencodable packet
 * (unknown type or ipc, TNT count 0 or > 47 (> 6 in a 1-byte TNT), PTW
 * bytes not 4 or 8), -BTR_ERR_NOMEM (buffer full; nothing written). */
int btr_pt_enc_packet(struct btr_pt_encoder *e, const struct btr_pt_packet *pkt);

/* Writes an IP packet of @type (TIP, TIP_PGE, TIP_PGD, FUP) for @ip with
 * the smallest compression the hardware would also accept (update16,
 * update32, sext48, update48 or full) and makes @ip the last IP.  Returns
 * the bytes written (3..9), -BTR_ERR_INVAL (other @type), -BTR_ERR_NOMEM
 * (fewer than 9 bytes left; nothing written). */
int btr_pt_enc_ip(struct btr_pt_encoder *e, enum btr_pt_type type, uint64_t ip);

/* Writes a PSB+ header group: PSB, then a FUP for @ip with sext48/full
 * compression if @ip is nonzero (0: no FUP), then PSBEND; resets the last
 * IP first as the hardware does.  Returns bytes written or -BTR_ERR_NOMEM. */
int btr_pt_enc_psb(struct btr_pt_encoder *e, uint64_t ip);

/* Number of bytes written so far. */
static inline size_t btr_pt_enc_size(const struct btr_pt_encoder *e) { return (size_t)(e->pos - e->begin); }

/* ---- TNT accumulation for software trace generators (hot path) ----
 *
 * Collects conditional-branch outcomes and writes them as TNT packets:
 *
 *	struct btr_pt_tnt_acc t;
 *	btr_pt_tnt_init(&t, 0);                  // 1-byte TNTs (6 bits)
 *	btr_pt_tnt_add(&e, &t, taken);           // per conditional branch
 *	btr_pt_tnt_flush(&e, &t);                // before any TIP/FUP/...
 *
 * The order matters to decoders: pending TNT bits must be flushed before
 * writing any other packet that refers to later control flow. */
struct btr_pt_tnt_acc {
	uint64_t bits;   /* oldest outcome in the highest of @count bits */
	uint8_t count;
	uint8_t max;     /* 6 (short TNT) or 47 (long TNT) */
};

static inline void btr_pt_tnt_init(struct btr_pt_tnt_acc *t, int use_long)
{
	t->bits = 0;
	t->count = 0;
	t->max = use_long ? 47 : 6;
}

/* Writes the pending bits as one TNT packet (1-byte if at most 6 bits).
 * Returns the bytes written (0 if none pending) or -BTR_ERR_NOMEM (the
 * bits stay pending). */
static inline int btr_pt_tnt_flush(struct btr_pt_encoder *e, struct btr_pt_tnt_acc *t)
{
	uint64_t pl;

	if (!t->count)
		return 0;
	pl = (1ull << t->count) | t->bits;      /* stop bit above the payload */
	if (t->count <= 6) {
		if (e->pos >= e->end)
			return -BTR_ERR_NOMEM;
		*e->pos++ = (uint8_t)(pl << 1);
		t->bits = 0;
		t->count = 0;
		return 1;
	}
	if (e->end - e->pos < 8)
		return -BTR_ERR_NOMEM;
	e->pos[0] = 0x02;
	e->pos[1] = 0xa3;
	for (int i = 0; i < 6; i++)
		e->pos[2 + i] = (uint8_t)(pl >> (8 * i));
	e->pos += 8;
	t->bits = 0;
	t->count = 0;
	return 8;
}

/* Records one conditional branch outcome (@taken nonzero = taken) and
 * writes a TNT packet when @t is full.  Returns 0 or the bytes written,
 * or -BTR_ERR_NOMEM (the outcome was not recorded). */
static inline int btr_pt_tnt_add(struct btr_pt_encoder *e, struct btr_pt_tnt_acc *t, int taken)
{
	if (t->count >= t->max) {
		int r = btr_pt_tnt_flush(e, t);
		if (r < 0)
			return r;
	}
	t->bits = (t->bits << 1) | (taken != 0);
	if (++t->count == t->max) {
		int r = btr_pt_tnt_flush(e, t);
		return r < 0 ? 0 : r;   /* stays full: retried at the next add */
	}
	return 0;
}

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
