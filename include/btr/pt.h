/* btr/pt.h - Intel Processor Trace packets: decoder and encoder.
 *
 * Layout and semantics follow the Intel SDM Vol. 3C, chapter "Intel
 * Processor Trace", section "Trace Packets and Data Types".  The decoder
 * works on caller-owned buffers and a caller-owned state struct and never
 * allocates.
 */
#ifndef BTR_PT_H
#define BTR_PT_H

#include <stddef.h>
#include <stdint.h>

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

/* One decoded packet.  Only the member for .type is meaningful. */
struct btr_pt_packet {
	uint8_t type;   /* enum btr_pt_type */
	uint8_t size;   /* encoded size in bytes */
	uint16_t reserved;
	union {
		/* TNT: @count (1..6 short, 1..47 long) bits in @bits; the first
		 * (oldest) branch is bit @count-1, the newest bit 0; 1 = taken. */
		struct { uint64_t bits; uint8_t count; } tnt;
		/* TIP, TIP.PGE, TIP.PGD, FUP: @raw is the payload as encoded,
		 * @ip the IP reconstructed with the decoder's last IP (valid
		 * unless @ipc is SUPPRESSED). */
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
		struct { uint64_t value; } cyc;
		struct { uint64_t base; } vmcs;         /* bits 11:0 zero */
		struct { uint64_t payload; } mnt;
		/* PTW: @payload of @bytes (4 or 8); @ip set if FUP follows. */
		struct { uint64_t payload; uint8_t bytes; uint8_t ip; } ptw;
		struct { uint8_t ip; } exstop;
		struct { uint32_t hints; uint32_t ext; } mwait;
		struct { uint8_t hw; uint8_t state, substate; } pwre;
		struct { uint8_t last, deepest, wake; } pwrx;
		struct { uint8_t sz; uint8_t type; } bbp;  /* sz: 0 = 8-byte BIP, 1 = 4-byte */
		struct { uint64_t value; uint8_t id; } bip;
		struct { uint8_t ip; } bep;
		struct { uint8_t ip; uint8_t type; uint8_t vector; } cfe;
		struct { uint64_t payload; uint8_t type; } evd;
	} u;
};

/* Packet decoder state.  Caller-owned; initialize with btr_pt_pkt_init.
 * Fields are private to pt.c but public so the struct can live on the
 * stack or be embedded without allocation. */
struct btr_pt_pkt_decoder {
	const uint8_t *begin;   /* current buffer */
	const uint8_t *end;
	const uint8_t *pos;     /* next packet */
	uint64_t base_offset;   /* stream offset of @begin */
	uint64_t last_ip;       /* for IP reconstruction */
	uint8_t bbp_sz;         /* size of BIP payloads from the last BBP */
	uint8_t carry_len;      /* bytes of a packet cut at the previous buffer's end */
	uint8_t carry[32];
};

/* Starts decoding the first @size bytes of @buf (caller-owned, must stay
 * valid while decoding it), whose first byte is at @offset in the whole
 * stream.  Not synchronized: call btr_pt_pkt_sync_forward first unless
 * @buf starts at a PSB.  Returns 0 or -BTR_ERR_INVAL. */
int btr_pt_pkt_init(struct btr_pt_pkt_decoder *d, const uint8_t *buf, size_t size, uint64_t offset);

/* Continues with the next buffer of the same stream; a packet cut at the
 * end of the previous buffer is completed from @buf.  Returns 0. */
int btr_pt_pkt_feed(struct btr_pt_pkt_decoder *d, const uint8_t *buf, size_t size);

/* Moves to the next PSB at or after the current position (and resets
 * the last IP).  Returns 0, or -BTR_ERR_EOS if there is none. */
int btr_pt_pkt_sync_forward(struct btr_pt_pkt_decoder *d);

/* Moves to the last PSB before the current position.  Returns 0 or
 * -BTR_ERR_EOS. */
int btr_pt_pkt_sync_backward(struct btr_pt_pkt_decoder *d);

/* Moves to stream offset @offset (must be inside the current buffer),
 * resetting the last IP.  Returns 0 or -BTR_ERR_INVAL. */
int btr_pt_pkt_sync_set(struct btr_pt_pkt_decoder *d, uint64_t offset);

/* Decodes the packet at the current position into @pkt and advances.
 * Returns its size (> 0); -BTR_ERR_EOS at the end of the buffer; -BTR_ERR_AGAIN
 * if the buffer ends inside a packet (feed the next buffer, or treat as
 * -BTR_ERR_TRUNCATED at the true end); -BTR_ERR_BAD_PACKET on a byte
 * that starts no packet (the position stays on it: resync).  The stream
 * offset of the packet is btr_pt_pkt_offset() before the call. */
int btr_pt_pkt_next(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *pkt);

/* Stream offset of the next packet. */
uint64_t btr_pt_pkt_offset(const struct btr_pt_pkt_decoder *d);

/* Returns the packet name as printed by `btr pt dump` ("tnt.8", "tip.pge", ...). */
const char *btr_pt_type_name(enum btr_pt_type type);

/* Formats @pkt's payload (without offset and name) into @buf as documented
 * in docs/pt-dump.md.  Returns the length. */
int btr_pt_pkt_format(const struct btr_pt_packet *pkt, char *buf, size_t size);

/* Encoder: writes packets into a caller-owned buffer, tracking the last
 * IP so that btr_pt_enc_ip can choose the smallest IP compression. */
struct btr_pt_encoder {
	uint8_t *begin, *end, *pos;
	uint64_t last_ip;
};

/* Initializes @e to write into @buf of @size bytes. */
void btr_pt_enc_init(struct btr_pt_encoder *e, uint8_t *buf, size_t size);

/* Writes @pkt exactly as given (for IP packets: @pkt->u.ip.ipc and the
 * bytes of @pkt->u.ip.ip it implies; updates last IP).  Returns the bytes
 * written, or -BTR_ERR_INVAL for an unencodable packet, -BTR_ERR_NOMEM
 * (buffer full; nothing written). */
int btr_pt_enc_packet(struct btr_pt_encoder *e, const struct btr_pt_packet *pkt);

/* Writes an IP packet of @type (TIP, TIP_PGE, TIP_PGD, FUP) for @ip with
 * the smallest compression the hardware would also accept. */
int btr_pt_enc_ip(struct btr_pt_encoder *e, enum btr_pt_type type, uint64_t ip);

/* Number of bytes written so far. */
static inline size_t btr_pt_enc_size(const struct btr_pt_encoder *e) { return (size_t)(e->pos - e->begin); }

#ifdef __cplusplus
}
#endif
#endif
