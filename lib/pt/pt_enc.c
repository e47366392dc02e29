/* pt_enc.c - Intel PT packet encoder (btr_pt_enc_*): writes the packets
 * that lib/pt/pt.c decodes, for tests, fuzzers and the synthetic traces.
 * Layouts: Intel SDM Vol. 3C, "Trace Packets and Data Types". */
#include <string.h>

#include "btr/pt.h"
#include "internal.h"
#include "pt_opcodes.h"

/* Bits of the last IP that an IP packet with compression ipc keeps. */
static const uint64_t ip_keep[8] = {
	[1] = ~0xffffull, [2] = ~0xffffffffull, [4] = ~0xffffffffffffull,
};

static const uint8_t psb_bytes[BTR_PT_PSB_SIZE] = { PT_PSB_PAIRS };

/* Payload bytes of IP compression ipc (5 and 7 are reserved). */
#define IPB(ipc) PT_IPC_BYTES(ipc)
#define IPOK(ipc) PT_IPC_OK(ipc)

static inline uint64_t sext48(uint64_t v)
{
	return (uint64_t)((int64_t)(v << 16) >> 16);
}

/* ---- encoder ---- */

void btr_pt_enc_init(struct btr_pt_encoder *e, uint8_t *buf, size_t size)
{
	e->begin = e->pos = buf;
	e->end = buf + size;
	e->last_ip = 0;
}

/* The opcode byte of an IP packet type (the compression bits clear), 0
 * for other types. */
static uint8_t ip_opcode(unsigned type)
{
	switch (type) {
	case BTR_PT_TIP: return btr__pt_pkts[PT_PK_TIP].opc[0];
	case BTR_PT_TIP_PGE: return btr__pt_pkts[PT_PK_TIP_PGE].opc[0];
	case BTR_PT_TIP_PGD: return btr__pt_pkts[PT_PK_TIP_PGD].opc[0];
	case BTR_PT_FUP: return btr__pt_pkts[PT_PK_FUP].opc[0];
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
	if (btr_unlikely(e->end - e->pos < PT_SIZE_IP0 + 8))
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
	e->pos[0] = (uint8_t)(ipc << PT_OPS_IPC | opc);
	memcpy(e->pos + 1, &ip, 8);   /* little-endian; room checked above */
	e->pos += PT_SIZE_IP0 + n;
	e->last_ip = ip;
	return (int)(PT_SIZE_IP0 + n);
}

int btr_pt_enc_psb(struct btr_pt_encoder *e, uint64_t ip)
{
	size_t need = PT_SIZE_PSB + PT_SIZE_PSBEND + (ip ? PT_SIZE_IP0 + 8 : 0);
	uint8_t *start = e->pos;

	if ((size_t)(e->end - e->pos) < need)
		return -BTR_ERR_NOMEM;
	memcpy(e->pos, psb_bytes, BTR_PT_PSB_SIZE);
	e->pos += BTR_PT_PSB_SIZE;
	e->last_ip = 0;
	if (ip)
		btr_pt_enc_ip(e, BTR_PT_FUP, ip);
	e->pos += pt_put_opc(e->pos, PT_PK_PSBEND);
	return (int)(e->pos - start);
}

int btr_pt_enc_packet(struct btr_pt_encoder *e, const struct btr_pt_packet *pkt)
{
	uint8_t b[BTR_PT_MAX_PACKET];
	unsigned n = 0;
	uint64_t new_ip = e->last_ip;

	switch (pkt->type) {
	case BTR_PT_PAD:
		n += pt_put_opc(b + n, PT_PK_PAD);
		break;
	case BTR_PT_PSB:
		memcpy(b, psb_bytes, BTR_PT_PSB_SIZE);
		n = BTR_PT_PSB_SIZE;
		new_ip = 0;
		break;
	case BTR_PT_PSBEND:
		n += pt_put_opc(b + n, PT_PK_PSBEND);
		break;
	case BTR_PT_TNT: {
		unsigned c = pkt->u.tnt.count;
		uint64_t pl;
		if (!c || c > 47 || (c > 6 && pkt->size == 1))
			return -BTR_ERR_INVAL;
		pl = (1ull << c) | (pkt->u.tnt.bits & ((1ull << c) - 1));
		if (c <= 6 && pkt->size != PT_SIZE_TNT64) {
			b[n++] = (uint8_t)(pl << 1);
		} else {
			n += pt_put_opc(b + n, PT_PK_TNT64);
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
		b[n++] = (uint8_t)(ipc << PT_OPS_IPC | ip_opcode(pkt->type));
		put_le(b + n, ip, nb);
		n += nb;
		if (ipc) {
			uint64_t raw = nb == 8 ? ip : ip & ((1ull << (8 * nb)) - 1);
			new_ip = ipc == BTR_PT_IPC_SEXT48 ? sext48(raw) : (e->last_ip & ip_keep[ipc]) | raw;
		}
		break;
	}
	case BTR_PT_PIP:
		n += pt_put_opc(b + n, PT_PK_PIP);
		put_le(b + n, (pkt->u.pip.cr3 >> 5) << 1 | (pkt->u.pip.nr & 1), 6);
		n += 6;
		break;
	case BTR_PT_MODE_EXEC:
		n += pt_put_opc(b + n, PT_PK_MODE);
		b[n++] = (uint8_t)(PT_MODE_EXEC | (pkt->u.mode_exec.csl & 1) | (pkt->u.mode_exec.csd & 1) << 1 |
				   (pkt->u.mode_exec.iflag & 1) << 2);
		break;
	case BTR_PT_MODE_TSX:
		n += pt_put_opc(b + n, PT_PK_MODE);
		b[n++] = (uint8_t)(PT_MODE_TSX | (pkt->u.mode_tsx.intx & 1) | (pkt->u.mode_tsx.abrt & 1) << 1);
		break;
	case BTR_PT_TRACESTOP:
		n += pt_put_opc(b + n, PT_PK_TRACESTOP);
		break;
	case BTR_PT_CBR:
		n += pt_put_opc(b + n, PT_PK_CBR), b[n++] = pkt->u.cbr.ratio, b[n++] = 0;
		break;
	case BTR_PT_TSC:
		n += pt_put_opc(b + n, PT_PK_TSC);
		put_le(b + n, pkt->u.tsc.tsc, PT_SIZE_TSC - 1);
		n += PT_SIZE_TSC - 1;
		break;
	case BTR_PT_MTC:
		n += pt_put_opc(b + n, PT_PK_MTC), b[n++] = pkt->u.mtc.ctc;
		break;
	case BTR_PT_TMA:
		n += pt_put_opc(b + n, PT_PK_TMA);
		b[n++] = (uint8_t)pkt->u.tma.ctc, b[n++] = (uint8_t)(pkt->u.tma.ctc >> 8);
		b[n++] = 0;
		b[n++] = (uint8_t)pkt->u.tma.fc, b[n++] = (pkt->u.tma.fc >> 8) & 1;
		break;
	case BTR_PT_CYC: {
		uint64_t v = pkt->u.cyc.value;
		if (v >> 61)   /* 5 + 8 * 7 bits is the most libipt accepts */
			return -BTR_ERR_INVAL;
		n += pt_put_opc(b + n, PT_PK_CYC);
		b[n - 1] |= (uint8_t)((v & 0x1f) << 3 | (v >> 5 ? PT_CYC_EXP : 0));
		v >>= 5;
		while (v) {
			b[n++] = (uint8_t)((v & 0x7f) << 1 | (v >> 7 ? PT_CYC_MORE : 0));
			v >>= 7;
		}
		break;
	}
	case BTR_PT_VMCS:
		n += pt_put_opc(b + n, PT_PK_VMCS);
		put_le(b + n, pkt->u.vmcs.base >> 12, 5);
		n += 5;
		break;
	case BTR_PT_OVF:
		n += pt_put_opc(b + n, PT_PK_OVF);
		break;
	case BTR_PT_MNT:
		n += pt_put_opc(b + n, PT_PK_MNT);
		put_le(b + n, pkt->u.mnt.payload, 8);
		n += 8;
		break;
	case BTR_PT_PTW:
		if (pkt->u.ptw.bytes != 4 && pkt->u.ptw.bytes != 8)
			return -BTR_ERR_INVAL;
		n += pt_put_opc(b + n, PT_PK_PTW);
		b[n - 1] |= (uint8_t)((pkt->u.ptw.bytes == 8 ? 1 << PT_OPS_PTW_PLC : 0) | (pkt->u.ptw.ip ? PT_EXT_IP_BIT : 0));
		put_le(b + n, pkt->u.ptw.payload, pkt->u.ptw.bytes);
		n += pkt->u.ptw.bytes;
		break;
	case BTR_PT_EXSTOP:
		n += pt_put_opc(b + n, PT_PK_EXSTOP);
		b[n - 1] |= pkt->u.exstop.ip ? PT_EXT_IP_BIT : 0;
		break;
	case BTR_PT_MWAIT:
		n += pt_put_opc(b + n, PT_PK_MWAIT);
		put_le(b + n, pkt->u.mwait.hints, 4);
		put_le(b + n + 4, pkt->u.mwait.ext, 4);
		n += 8;
		break;
	case BTR_PT_PWRE:
		n += pt_put_opc(b + n, PT_PK_PWRE);
		b[n++] = (uint8_t)((pkt->u.pwre.hw & 1) << 3);
		b[n++] = (uint8_t)((pkt->u.pwre.state & 0xf) << 4 | (pkt->u.pwre.substate & 0xf));
		break;
	case BTR_PT_PWRX:
		n += pt_put_opc(b + n, PT_PK_PWRX);
		b[n++] = (uint8_t)((pkt->u.pwrx.last & 0xf) << 4 | (pkt->u.pwrx.deepest & 0xf));
		b[n++] = pkt->u.pwrx.wake & 0xf;
		b[n++] = 0, b[n++] = 0, b[n++] = 0;
		break;
	case BTR_PT_BBP:
		n += pt_put_opc(b + n, PT_PK_BBP);
		b[n++] = (uint8_t)((pkt->u.bbp.sz ? PT_BBP_SZ : 0) | (pkt->u.bbp.type & 0x1f));
		break;
	case BTR_PT_BIP: {
		/* The payload size comes from the preceding BBP, which the
		 * encoder does not track: .size says it (5 or 9). */
		unsigned nb = pkt->size == PT_SIZE_BIP4 ? 4 : pkt->size == PT_SIZE_BIP8 ? 8 : 0;
		if (!nb)
			return -BTR_ERR_INVAL;
		n += pt_put_opc(b + n, PT_PK_BIP);
		b[n - 1] |= (uint8_t)((pkt->u.bip.id & 0x1f) << PT_OPS_BIP);
		put_le(b + n, pkt->u.bip.value, nb);
		n += nb;
		break;
	}
	case BTR_PT_BEP:
		n += pt_put_opc(b + n, PT_PK_BEP);
		b[n - 1] |= pkt->u.bep.ip ? PT_EXT_IP_BIT : 0;
		break;
	case BTR_PT_CFE:
		n += pt_put_opc(b + n, PT_PK_CFE);
		b[n++] = (uint8_t)((pkt->u.cfe.ip ? 0x80 : 0) | (pkt->u.cfe.type & 0x1f));
		b[n++] = pkt->u.cfe.vector;
		break;
	case BTR_PT_EVD:
		n += pt_put_opc(b + n, PT_PK_EVD), b[n++] = pkt->u.evd.type & 0x3f;
		put_le(b + n, pkt->u.evd.payload, 8);
		n += 8;
		break;
	case BTR_PT_TRIG:
		n += pt_put_opc(b + n, PT_PK_TRIG);
		b[n++] = (uint8_t)((pkt->u.trig.ip ? PT_TRIG_IP : 0) | (pkt->u.trig.icnt_valid ? PT_TRIG_ICNT : 0) |
				   (pkt->u.trig.mult ? PT_TRIG_MULT : 0));
		b[n++] = pkt->u.trig.trbv;
		if (pkt->u.trig.icnt_valid) {
			put_le(b + n, pkt->u.trig.icnt, 2);
			n += 2;
		}
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
