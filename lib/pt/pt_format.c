/* pt_format.c - packet names and payload text for `btr pt dump`, and the
 * expansion of the compact packet form (btr_pt_cpkt_expand).
 *
 * Kept apart from pt.c so that the decoder's hot path carries no
 * formatting code.  The text format is specified in docs/pt-dump.md and
 * modelled on libipt's ptdump: names are the same ("tnt.8", "tip.pge",
 * "mode.exec", "stop", ...), numbers are 0x-prefixed hex.
 */
#include "btr/pt.h"
#include "internal.h"
#include "pt_opcodes.h"

#include <inttypes.h>
#include <stdio.h>

/* Names come from the packet table (pt_opcodes.h): a type's row, MODE's
 * leaves; a TNT is "tnt.8" or "tnt.64" by its size, "tnt" as a type. */
const char *btr_pt_type_name(enum btr_pt_type type)
{
	static const struct { uint8_t type; const char *name; } leaves[] = {
#define PT_X_LEAF(leaf, ty, nm) { (ty), (nm) },
		PT_MODE_LEAVES(PT_X_LEAF)
#undef PT_X_LEAF
	};

	if (type == BTR_PT_TNT)
		return "tnt";
	for (size_t i = 0; i < BTR_ARRAY_SIZE(leaves); i++)
		if (leaves[i].type == type)
			return leaves[i].name;
	for (int id = PT_PK_NONE + 1; id < PT_PK__COUNT; id++)
		if (btr__pt_pkts[id].type == type)
			return btr__pt_pkts[id].name;
	return "invalid";
}

const char *btr_pt_pkt_name(const struct btr_pt_packet *pkt)
{
	if (pkt->type == BTR_PT_TNT)
		return btr__pt_pkts[pkt->size == PT_SIZE_TNT8 ? PT_PK_TNT8 : PT_PK_TNT64].name;
	return btr_pt_type_name((enum btr_pt_type)pkt->type);
}

static const char *exec_mode(unsigned csl, unsigned csd)
{
	/* SDM: CS.L=1 with CS.D=1 is reserved. */
	return csl ? (csd ? "invalid" : "64-bit") : (csd ? "32-bit" : "16-bit");
}

int btr_pt_pkt_format(const struct btr_pt_packet *pkt, char *buf, size_t size)
{
	char tmp[128];
	int n = 0;

	tmp[0] = 0;
	switch (pkt->type) {
	case BTR_PT_TNT: {
		/* Oldest branch first, like ptdump: '!' taken, '.' not taken. */
		unsigned c = pkt->u.tnt.count > 64 ? 64 : pkt->u.tnt.count;
		for (unsigned i = 0; i < c; i++)
			tmp[n++] = (pkt->u.tnt.bits >> (c - 1 - i)) & 1 ? '!' : '.';
		tmp[n] = 0;
		break;
	}
	case BTR_PT_TIP:
	case BTR_PT_TIP_PGE:
	case BTR_PT_TIP_PGD:
	case BTR_PT_FUP:
		if (pkt->u.ip.ipc == BTR_PT_IPC_SUPPRESSED)
			n = snprintf(tmp, sizeof(tmp), "0: suppressed");
		else
			n = snprintf(tmp, sizeof(tmp), "%u: 0x%016" PRIx64, pkt->u.ip.ipc, pkt->u.ip.ip);
		break;
	case BTR_PT_PIP:
		n = snprintf(tmp, sizeof(tmp), "0x%016" PRIx64 "%s", pkt->u.pip.cr3, pkt->u.pip.nr ? ", nr" : "");
		break;
	case BTR_PT_MODE_EXEC:
		n = snprintf(tmp, sizeof(tmp), "%s%s", exec_mode(pkt->u.mode_exec.csl, pkt->u.mode_exec.csd),
			     pkt->u.mode_exec.iflag ? ", if" : "");
		break;
	case BTR_PT_MODE_TSX:
		n = snprintf(tmp, sizeof(tmp), "%s",
			     pkt->u.mode_tsx.intx ? (pkt->u.mode_tsx.abrt ? "intx, abrt" : "intx")
						  : (pkt->u.mode_tsx.abrt ? "abrt" : "none"));
		break;
	case BTR_PT_CBR:
		n = snprintf(tmp, sizeof(tmp), "0x%02x", pkt->u.cbr.ratio);
		break;
	case BTR_PT_TSC:
		n = snprintf(tmp, sizeof(tmp), "0x%" PRIx64, pkt->u.tsc.tsc);
		break;
	case BTR_PT_MTC:
		n = snprintf(tmp, sizeof(tmp), "0x%02x", pkt->u.mtc.ctc);
		break;
	case BTR_PT_TMA:
		n = snprintf(tmp, sizeof(tmp), "ctc 0x%04x, fc 0x%03x", pkt->u.tma.ctc, pkt->u.tma.fc);
		break;
	case BTR_PT_CYC:
		n = snprintf(tmp, sizeof(tmp), "0x%" PRIx64, pkt->u.cyc.value);
		break;
	case BTR_PT_VMCS:
		n = snprintf(tmp, sizeof(tmp), "0x%" PRIx64, pkt->u.vmcs.base);
		break;
	case BTR_PT_MNT:
		n = snprintf(tmp, sizeof(tmp), "0x%016" PRIx64, pkt->u.mnt.payload);
		break;
	case BTR_PT_PTW:
		n = snprintf(tmp, sizeof(tmp), "%u: 0x%" PRIx64 "%s", pkt->u.ptw.bytes, pkt->u.ptw.payload,
			     pkt->u.ptw.ip ? ", ip" : "");
		break;
	case BTR_PT_EXSTOP:
		n = snprintf(tmp, sizeof(tmp), "%s", pkt->u.exstop.ip ? "ip" : "");
		break;
	case BTR_PT_MWAIT:
		n = snprintf(tmp, sizeof(tmp), "hints 0x%x, ext 0x%x", pkt->u.mwait.hints, pkt->u.mwait.ext);
		break;
	case BTR_PT_PWRE:
		n = snprintf(tmp, sizeof(tmp), "c%u.%u%s", pkt->u.pwre.state, pkt->u.pwre.substate,
			     pkt->u.pwre.hw ? ", hw" : "");
		break;
	case BTR_PT_PWRX:
		n = snprintf(tmp, sizeof(tmp), "last c%u, deepest c%u%s%s%s", pkt->u.pwrx.last, pkt->u.pwrx.deepest,
			     pkt->u.pwrx.wake & BTR_PT_PWRX_INT ? ", int" : "",
			     pkt->u.pwrx.wake & BTR_PT_PWRX_STORE ? ", store" : "",
			     pkt->u.pwrx.wake & BTR_PT_PWRX_HW ? ", hw" : "");
		break;
	case BTR_PT_BBP:
		n = snprintf(tmp, sizeof(tmp), "type 0x%02x, %u bytes", pkt->u.bbp.type, pkt->u.bbp.sz ? 4 : 8);
		break;
	case BTR_PT_BIP:
		n = snprintf(tmp, sizeof(tmp), "id 0x%02x: 0x%" PRIx64, pkt->u.bip.id, pkt->u.bip.value);
		break;
	case BTR_PT_BEP:
		n = snprintf(tmp, sizeof(tmp), "%s", pkt->u.bep.ip ? "ip" : "");
		break;
	case BTR_PT_CFE:
		n = snprintf(tmp, sizeof(tmp), "type 0x%02x, vector 0x%02x%s", pkt->u.cfe.type, pkt->u.cfe.vector,
			     pkt->u.cfe.ip ? ", ip" : "");
		break;
	case BTR_PT_EVD:
		n = snprintf(tmp, sizeof(tmp), "type 0x%02x: 0x%016" PRIx64, pkt->u.evd.type, pkt->u.evd.payload);
		break;
	case BTR_PT_TRIG:
		n = snprintf(tmp, sizeof(tmp), "trbv 0x%02x%s%s", pkt->u.trig.trbv, pkt->u.trig.ip ? ", ip" : "",
			     pkt->u.trig.mult ? ", mult" : "");
		if (pkt->u.trig.icnt_valid && n > 0 && (size_t)n < sizeof(tmp))
			n += snprintf(tmp + n, sizeof(tmp) - (size_t)n, ", icnt %u", pkt->u.trig.icnt);
		break;
	default: /* pad, psb, psbend, stop, ovf: no payload */
		break;
	}
	if (n < 0)
		n = 0;
	if (size) {
		size_t c = (size_t)n < size - 1 ? (size_t)n : size - 1;
		memcpy(buf, tmp, c);
		buf[c] = 0;
	}
	return n;
}

/* Compact form -> struct btr_pt_packet (the mapping in pt.h; lib/pt/pt.c
 * makes the compact records). */
#define IPB(ipc) ((ipc) == 1 ? 2 : (ipc) == 2 ? 4 : (ipc) == 3 ? 6 : (ipc) == 4 ? 6 : (ipc) == 6 ? 8 : 0)

int btr_pt_cpkt_expand(const struct btr_pt_cpkt *c, uint64_t base, struct btr_pt_packet *out)
{
	const uint64_t pl = c->payload;

	memset(out, 0, sizeof(*out));
	out->type = c->type;
	out->size = c->size;
	out->offset = base + c->off;
	switch (c->type) {
	case BTR_PT_PAD:
	case BTR_PT_PSB:
	case BTR_PT_PSBEND:
	case BTR_PT_TRACESTOP:
	case BTR_PT_OVF:
		break;
	case BTR_PT_TNT: out->u.tnt.bits = pl; out->u.tnt.count = c->aux; break;
	case BTR_PT_TIP:
	case BTR_PT_TIP_PGE:
	case BTR_PT_TIP_PGD:
	case BTR_PT_FUP: {
		unsigned nb = IPB(c->aux & 7);
		out->u.ip.ip = pl;
		out->u.ip.ipc = c->aux;
		out->u.ip.raw = nb >= 8 ? pl : pl & ((1ull << (8 * nb)) - 1);
		break;
	}
	case BTR_PT_PIP: out->u.pip.cr3 = pl; out->u.pip.nr = c->aux; break;
	case BTR_PT_MODE_EXEC:
		out->u.mode_exec.csl = pl & 1;
		out->u.mode_exec.csd = (pl >> 1) & 1;
		out->u.mode_exec.iflag = (pl >> 2) & 1;
		break;
	case BTR_PT_MODE_TSX: out->u.mode_tsx.intx = pl & 1; out->u.mode_tsx.abrt = (pl >> 1) & 1; break;
	case BTR_PT_CBR: out->u.cbr.ratio = (uint8_t)pl; break;
	case BTR_PT_TSC: out->u.tsc.tsc = pl; break;
	case BTR_PT_MTC: out->u.mtc.ctc = (uint8_t)pl; break;
	case BTR_PT_TMA: out->u.tma.ctc = (uint16_t)pl; out->u.tma.fc = (uint16_t)(pl >> 16); break;
	case BTR_PT_CYC: out->u.cyc.value = pl; break;
	case BTR_PT_VMCS: out->u.vmcs.base = pl; break;
	case BTR_PT_MNT: out->u.mnt.payload = pl; break;
	case BTR_PT_PTW: out->u.ptw.payload = pl; out->u.ptw.bytes = c->aux; out->u.ptw.ip = c->aux2; break;
	case BTR_PT_EXSTOP: out->u.exstop.ip = c->aux; break;
	case BTR_PT_MWAIT: out->u.mwait.hints = (uint32_t)pl; out->u.mwait.ext = (uint32_t)(pl >> 32); break;
	case BTR_PT_PWRE: out->u.pwre.hw = (uint8_t)pl; out->u.pwre.state = c->aux; out->u.pwre.substate = c->aux2; break;
	case BTR_PT_PWRX: out->u.pwrx.wake = (uint8_t)pl; out->u.pwrx.last = c->aux; out->u.pwrx.deepest = c->aux2; break;
	case BTR_PT_BBP: out->u.bbp.sz = c->aux; out->u.bbp.type = c->aux2; break;
	case BTR_PT_BIP: out->u.bip.value = pl; out->u.bip.id = c->aux; break;
	case BTR_PT_BEP: out->u.bep.ip = c->aux; break;
	case BTR_PT_CFE: out->u.cfe.vector = (uint8_t)pl; out->u.cfe.ip = c->aux; out->u.cfe.type = c->aux2; break;
	case BTR_PT_EVD: out->u.evd.payload = pl; out->u.evd.type = c->aux; break;
	case BTR_PT_TRIG:
		out->u.trig.trbv = (uint8_t)pl;
		out->u.trig.icnt = (uint16_t)(pl >> 8);
		out->u.trig.ip = c->aux & 1;
		out->u.trig.mult = (c->aux >> 1) & 1;
		out->u.trig.icnt_valid = (c->aux >> 2) & 1;
		break;
	default:
		return -BTR_ERR_INVAL;
	}
	return 0;
}
