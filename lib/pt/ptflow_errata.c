/* ptflow_errata.c - the overflow errata of Intel PT as rules over the
 * packets that follow an OVF.
 *
 * Three errata change what an OVF means; each is decided by what comes
 * after it, so the flow decoder (ptflow.c) asks this file, at each OVF,
 * with the bytes that follow it in the buffer:
 *
 *  - SKD010 "Intel PT FUP May be Dropped After OVF": an OVF whose
 *    overflow resolved with tracing enabled may lack its FUP.  If the
 *    packets after it say tracing is on (a FUP after other packets, a
 *    TIP, a PSB+ with a FUP), decoding resumes there; a TIP.PGD says it
 *    was on and went off.
 *  - APL11 "Intel PT OVF Packet May Be Followed by TIP.PGD Packet": a
 *    TIP.PGD right after an OVF (only timing between) is spurious.
 *  - APL12 "Intel PT OVF May Be Followed By An Unexpected FUP Packet":
 *    the FUP after an OVF may come although tracing is off (FilterEn
 *    cleared).  If the packets after that FUP say tracing is off (a
 *    TIP.PGE, a TraceStop, a PSB+ without FUP before any packet that
 *    needs tracing on), the FUP is dropped and tracing stays off.
 *
 * The rules are libipt's (pt_event_decoder.c: pt_evt_find_ovf_fup,
 * pt_evt_handle_skd010, pt_evt_handle_apl11, pt_evt_handle_apl12), packet
 * kind by packet kind, so that every sequence an erratum covers is
 * decided the same way, not only the ones of its conformance cases.
 * The end of the bytes seen counts as the end of the trace ("assume the
 * trace is correct", as libipt does at its end): an OVF whose deciding
 * packet lies in the next buffer handed to btr_ptflow_decode is decoded
 * as without the erratum.  Timing packets in the bytes skipped by a
 * decision are not applied (libipt applies them: only timestamps of the
 * events right after such an overflow can differ).
 *
 * Packets are read with the packet decoder of pt.c (dependency one way:
 * this file uses pt.c, never the reverse). */
#include <string.h>

#include "btr/pt.h"
#include "ptflow_int.h"

/* Next packet into @k; 0 at the end of the bytes (or a packet cut by
 * it), -1 for bytes that are no packet (libipt: invalid/unknown). */
static int next(struct btr_pt_pkt_decoder *d, struct btr_pt_packet *k)
{
	int r = btr_pt_pkt_next(d, k);
	if (r > 0)
		return 1;
	return r == -BTR_ERR_BAD_PACKET ? -1 : 0;
}

/* Bytes from the start of the scan to the end of @k. */
static size_t end_of(const struct btr_pt_packet *k, uint64_t base)
{
	return (size_t)(k->offset - base) + k->size;
}

static int is_timing(unsigned t)
{
	return t == BTR_PT_TSC || t == BTR_PT_MTC || t == BTR_PT_TMA || t == BTR_PT_CYC ||
	       t == BTR_PT_CBR;
}

/* Does the PSB+ that starts after @d's position (a PSB just read) hold a
 * FUP?  1 yes (its IP in *@ip), 0 no, -1 cannot tell (end of bytes, bad
 * packet, a packet that does not belong in PSB+).  libipt:
 * pt_evt_find_header_fup. */
static int psb_has_fup(struct btr_pt_pkt_decoder d, uint64_t *ip)
{
	struct btr_pt_packet k;
	for (;;) {
		int r = next(&d, &k);
		if (r == 0)
			return -1;
		if (r < 0 || k.type == BTR_PT_INVALID)
			continue;   /* libipt skips ppt_invalid here */
		switch (k.type) {
		case BTR_PT_FUP:
			*ip = k.u.ip.ip;
			return k.u.ip.ipc == BTR_PT_IPC_SUPPRESSED ? 0 : 1;
		case BTR_PT_PSBEND:
		case BTR_PT_OVF:
			return 0;
		case BTR_PT_MODE_EXEC: case BTR_PT_MODE_TSX: case BTR_PT_PIP: case BTR_PT_VMCS:
		case BTR_PT_MNT: case BTR_PT_PAD:
			continue;
		default:
			if (is_timing(k.type))
				continue;
			return -1;
		}
	}
}

/* After a FUP that followed an OVF (@d just past it): APL12 applies if
 * the packets after it say tracing is off.  libipt: pt_evt_handle_apl12. */
static int apl12_applies(struct btr_pt_pkt_decoder d)
{
	struct btr_pt_packet k;
	uint64_t ip;
	for (;;) {
		int r = next(&d, &k);
		if (r <= 0)
			return 0;   /* end: assume the trace is right; bad: normal decode */
		switch (k.type) {
		case BTR_PT_TNT: case BTR_PT_TIP: case BTR_PT_TIP_PGD:
			return 0;   /* only generated with tracing on */
		case BTR_PT_PSB:
			return psb_has_fup(d, &ip) == 0;
		case BTR_PT_TRACESTOP: case BTR_PT_TIP_PGE:
			return 1;   /* tracing was off */
		case BTR_PT_PSBEND: case BTR_PT_OVF: case BTR_PT_INVALID:
			return 0;
		default:
			continue;   /* PAD, FUP, timing, power, PTW, MNT, PIP, VMCS, MODE, CFE, EVD, TRIG, BBP.. */
		}
	}
}

/* No FUP after the OVF: SKD010 (libipt: pt_evt_handle_skd010). */
static void skd010(struct btr_pt_pkt_decoder d, uint64_t base, struct ptf_ovf_fix *x)
{
	struct btr_pt_packet k;
	int tsx = 0;
	for (;;) {
		int r = next(&d, &k);
		if (r <= 0)
			return;
		switch (k.type) {
		case BTR_PT_TIP_PGE:
		case BTR_PT_TNT:    /* the erratum applies, but where to resume is unknown */
		case BTR_PT_OVF: case BTR_PT_TRACESTOP: case BTR_PT_PSBEND:
		case BTR_PT_MWAIT: case BTR_PT_INVALID:
			return;
		case BTR_PT_TIP_PGD:
			/* tracing was on and went off: resume after it, off */
			x->action = PTF_OVF_OFF;
			x->skip = end_of(&k, base);
			return;
		case BTR_PT_MODE_TSX:
			if (tsx)
				return;   /* a second MODE.TSX: tracing is off */
			tsx = 1;
			x->tsx = (uint8_t)(k.u.mode_tsx.intx | k.u.mode_tsx.abrt << 1);
			continue;
		case BTR_PT_FUP:
			/* resume at the FUP: it is decoded again, as an in-trace
			 * FUP (with the MODE.TSX before it, if any) */
			if (k.u.ip.ipc == BTR_PT_IPC_SUPPRESSED)
				return;
			x->action = PTF_OVF_AT_IP;
			x->ip = k.u.ip.ip;
			x->skip = (size_t)(k.offset - base);
			x->has_tsx = (uint8_t)tsx;
			return;
		case BTR_PT_TIP:
			if (k.u.ip.ipc == BTR_PT_IPC_SUPPRESSED)
				return;
			x->action = PTF_OVF_AT_IP;
			x->ip = x->last_ip = k.u.ip.ip;
			x->skip = end_of(&k, base);
			return;
		case BTR_PT_PSB: {
			uint64_t ip;
			if (psb_has_fup(d, &ip) != 1)
				return;
			x->action = PTF_OVF_AT_IP;   /* resume at the PSB+'s IP */
			x->ip = ip;
			x->skip = (size_t)(k.offset - base);
			return;
		}
		case BTR_PT_EXSTOP:
			if (k.u.exstop.ip)
				return;
			continue;
		case BTR_PT_PTW:
			if (k.u.ptw.ip)
				return;
			continue;
		case BTR_PT_CFE:
			if (k.u.cfe.ip)
				return;
			continue;
		default:
			continue;   /* PIP, VMCS, MODE.Exec (their changes are lost
				     * with the overflow), PAD, MNT, power, EVD,
				     * TRIG, timing */
		}
	}
}

/* The first packet after the OVF was one that needs tracing on: APL11
 * (libipt: pt_evt_handle_apl11). */
static void apl11(struct btr_pt_pkt_decoder d, uint64_t base, struct ptf_ovf_fix *x)
{
	struct btr_pt_packet k;
	for (;;) {
		if (next(&d, &k) <= 0)
			return;
		if (k.type == BTR_PT_TIP_PGD) {
			x->action = PTF_OVF_OFF;
			x->skip = end_of(&k, base);
			return;
		}
		if (is_timing(k.type) || k.type == BTR_PT_PAD || k.type == BTR_PT_MNT ||
		    k.type == BTR_PT_CFE || k.type == BTR_PT_EVD || k.type == BTR_PT_TRIG)
			continue;
		return;
	}
}

void ptf_ovf_errata(const struct errata *er, const uint8_t *p, size_t n, struct ptf_ovf_fix *x)
{
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet k;

	memset(x, 0, sizeof(*x));
	if (!er->skd010 && !er->apl11 && !er->apl12)
		return;
	/* The IP packets after an OVF are not compressed against anything
	 * before it: the scan starts with last IP 0, as ptflow does. */
	btr_pt_pkt_init(&d, p, n, 0);
	btr_pt_pkt_set_errata(&d, er->skz84 ? BTR_PT_ERRATA_SKZ84 : 0);
	/* libipt: pt_evt_find_ovf_fup - a FUP (only timing, PAD, MNT
	 * before it), no FUP, or a packet that needs tracing on. */
	int bad_context = 0;
	for (;;) {
		int r = next(&d, &k);
		if (r == 0)
			return;   /* the end: a standalone overflow */
		if (r < 0)
			break;
		if (k.type == BTR_PT_FUP) {
			if (er->apl12 && apl12_applies(d)) {
				x->action = PTF_OVF_OFF;
				x->skip = end_of(&k, 0);
			}
			return;
		}
		if (is_timing(k.type) || k.type == BTR_PT_PAD || k.type == BTR_PT_MNT ||
		    k.type == BTR_PT_INVALID)
			continue;
		bad_context = k.type == BTR_PT_PSBEND || k.type == BTR_PT_TIP ||
			      k.type == BTR_PT_TIP_PGD || k.type == BTR_PT_TNT;
		break;
	}
	struct btr_pt_pkt_decoder d0;
	btr_pt_pkt_init(&d0, p, n, 0);
	btr_pt_pkt_set_errata(&d0, er->skz84 ? BTR_PT_ERRATA_SKZ84 : 0);
	if (er->skd010) {
		skd010(d0, 0, x);
		if (x->action != PTF_OVF_NORMAL)
			return;
	}
	if (er->apl11 && bad_context)
		apl11(d0, 0, x);
}
