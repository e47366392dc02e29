/* ptsynth.h - test-side Intel PT synthesizer: turns an executed
 * instruction sequence (from stepper.h or a generated walk) and the code
 * image into the PT stream user-only hardware would write, with btr's
 * packet encoder:
 *   - PSB+ (TSC, MODE.Exec, FUP when enabled, PSBEND) every @psb_period
 *     bytes, at an instruction boundary after flushing TNT;
 *   - TNT for conditional branches (and compressed returns), TIP for
 *     indirect branches and uncompressed returns;
 *   - MODE.Exec + TIP.PGE when tracing starts, TIP.PGD at the end;
 *   - syscalls (and other far transfers) as TIP.PGD(suppressed) followed
 *     by TIP.PGE at the next user IP, which may be a signal handler;
 *   - a faulting instruction as FUP(its IP) + TIP.PGD + TIP.PGE(handler);
 *   - IP filtering: TIP.PGD(target) at a branch leaving [lo, hi],
 *     TIP.PGE at the first instruction back inside;
 *   - OVF injected after chosen trace-producing branches, dropping the
 *     next @ovf_drop instructions and resuming with FUP.
 * It also produces the instruction sequence a correct decoder must
 * report (@expect).  Return compression follows the SDM: a 64-entry
 * stack cleared at PSB, calls to the next instruction not pushed, a RET
 * compressed only when it returns to the top entry (then popped).
 */
#ifndef BTR_TEST_PTSYNTH_H
#define BTR_TEST_PTSYNTH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/image.h"
#include "btr/insn.h"
#include "btr/pt.h"

struct synth_opts {
	int no_retcomp;
	uint64_t filter_lo, filter_hi;   /* hi == 0: no filter */
	size_t psb_period;               /* 0: 4096 */
	const size_t *ovf_at;            /* ascending instruction indexes */
	size_t n_ovf;
	size_t ovf_drop;                 /* instructions lost at each OVF */
	int no_tsc;
};

struct synth_out {
	uint8_t *buf;
	size_t size, cap;
	uint64_t *expect;
	size_t nexpect, capexp;
	size_t n_tip, n_tnt_bits, n_pge, n_pgd, n_ovf, n_psb, n_fup;
};

struct synth_st {
	struct btr_pt_encoder enc;
	struct synth_out *o;
	uint64_t tnt_bits;
	unsigned tnt_n;
	uint64_t stk[64];
	unsigned stk_top, stk_n;
	size_t last_psb;
	int err;
	uint64_t tsc;
};

static inline void synth_grow(struct synth_st *s, size_t need)
{
	struct synth_out *o = s->o;
	size_t used = btr_pt_enc_size(&s->enc);
	if (used + need + 64 <= o->cap)
		return;
	size_t nc = o->cap ? o->cap * 2 : 1 << 20;
	while (nc < used + need + 64)
		nc *= 2;
	uint8_t *nb = realloc(o->buf, nc);
	if (!nb) {
		s->err = 1;
		return;
	}
	uint64_t last = s->enc.last_ip;
	o->buf = nb;
	o->cap = nc;
	s->enc.begin = nb;
	s->enc.pos = nb + used;
	s->enc.end = nb + nc;
	s->enc.last_ip = last;
}

static inline void synth_pkt(struct synth_st *s, const struct btr_pt_packet *p)
{
	synth_grow(s, 32);
	if (btr_pt_enc_packet(&s->enc, p) < 0)
		s->err = 1;
}

static inline void synth_ip(struct synth_st *s, enum btr_pt_type t, uint64_t ip, int suppressed)
{
	synth_grow(s, 16);
	if (suppressed) {
		struct btr_pt_packet p = { .type = (uint8_t)t };
		p.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
		synth_pkt(s, &p);
	} else if (btr_pt_enc_ip(&s->enc, t, ip) < 0) {
		s->err = 1;
	}
	switch (t) {
	case BTR_PT_TIP: s->o->n_tip++; break;
	case BTR_PT_TIP_PGE: s->o->n_pge++; break;
	case BTR_PT_TIP_PGD: s->o->n_pgd++; break;
	case BTR_PT_FUP: s->o->n_fup++; break;
	default: break;
	}
}

static inline void synth_flush(struct synth_st *s)
{
	if (!s->tnt_n)
		return;
	struct btr_pt_packet p = { .type = BTR_PT_TNT };
	p.size = s->tnt_n <= 6 ? 1 : 8;
	p.u.tnt.bits = s->tnt_bits;
	p.u.tnt.count = (uint8_t)s->tnt_n;
	synth_pkt(s, &p);
	s->tnt_bits = 0;
	s->tnt_n = 0;
}

static inline void synth_bit(struct synth_st *s, int taken)
{
	s->tnt_bits = (s->tnt_bits << 1) | (taken ? 1 : 0);
	s->o->n_tnt_bits++;
	if (++s->tnt_n == 47)
		synth_flush(s);
}

static inline void synth_mode(struct synth_st *s)
{
	struct btr_pt_packet p = { .type = BTR_PT_MODE_EXEC };
	p.u.mode_exec.csl = 1;
	synth_pkt(s, &p);
}

static inline void synth_psb(struct synth_st *s, int enabled, uint64_t ip)
{
	synth_flush(s);
	struct btr_pt_packet p = { .type = BTR_PT_PSB };
	synth_pkt(s, &p);
	/* TSC in every PSB+: a synthetic clock, 10 ticks per instruction */
	if (s->tsc) {
		struct btr_pt_packet t = { .type = BTR_PT_TSC };
		t.u.tsc.tsc = s->tsc;
		synth_pkt(s, &t);
	}
	if (enabled) {
		synth_mode(s);
		synth_ip(s, BTR_PT_FUP, ip, 0);
		s->o->n_fup--;  /* a status FUP, not counted as an event */
	}
	struct btr_pt_packet e = { .type = BTR_PT_PSBEND };
	synth_pkt(s, &e);
	s->o->n_psb++;
	s->stk_n = 0;
	s->last_psb = btr_pt_enc_size(&s->enc);
}

static inline void synth_expect(struct synth_out *o, uint64_t ip)
{
	if (o->nexpect == o->capexp) {
		size_t nc = o->capexp ? o->capexp * 2 : 65536;
		uint64_t *e = realloc(o->expect, nc * sizeof(*e));
		if (!e)
			return;
		o->expect = e;
		o->capexp = nc;
	}
	o->expect[o->nexpect++] = ip;
}

static inline int synth_decode(struct btr_image *img, uint64_t ip, struct btr_insn *in)
{
	uint8_t b[16];
	int n = btr_image_read(img, ip, b, sizeof(b));
	if (n <= 0)
		return -1;
	return btr_insn_decode(b, (size_t)n, ip, BTR_MODE_64, in) > 0 ? 0 : -1;
}

static inline int synth_in(const struct synth_opts *o, uint64_t ip)
{
	return !o->filter_hi || (ip >= o->filter_lo && ip <= o->filter_hi);
}

/* Synthesizes the stream for @ips[0..n) (@fault may be NULL), after which
 * execution continues at @end_ip (0: unknown).  Returns 0 or -1. */
static inline int synth_run(const uint64_t *ips, const uint8_t *fault, size_t n, uint64_t end_ip,
		     struct btr_image *img, const struct synth_opts *opt, struct synth_out *o)
{
	struct synth_st s;
	memset(&s, 0, sizeof(s));
	memset(o, 0, sizeof(*o));
	if (!end_ip && n > 1) {
		/* A cut-off recording (step limit): where the last instruction
		 * went is unknown, so end one earlier with a known successor. */
		end_ip = ips[n - 1];
		n--;
	}
	s.o = o;
	o->cap = 1 << 20;
	o->buf = malloc(o->cap);
	if (!o->buf)
		return -1;
	btr_pt_enc_init(&s.enc, o->buf, o->cap);
	size_t period = opt->psb_period ? opt->psb_period : 4096;
	int enabled = 0;
	size_t next_ovf = 0;
	int ovf_ok = 0;  /* the previous instruction produced trace */
	s.tsc = opt->no_tsc ? 0 : 1000;
	synth_psb(&s, 0, 0);

	for (size_t i = 0; i < n && !s.err; i++) {
		uint64_t ip = ips[i];
		if (!opt->no_tsc)
			s.tsc += 10;
		if (btr_pt_enc_size(&s.enc) - s.last_psb >= period)
			synth_psb(&s, enabled, ip);
		if (next_ovf < opt->n_ovf && i >= opt->ovf_at[next_ovf] && enabled && ovf_ok) {
			/* Overflow: packets for the next instructions are lost. */
			synth_flush(&s);
			struct btr_pt_packet p = { .type = BTR_PT_OVF };
			synth_pkt(&s, &p);
			o->n_ovf++;
			next_ovf++;
			s.stk_n = 0;
			size_t j = i + opt->ovf_drop;
			if (j >= n)
				break;
			/* resume where a branch has just completed is not needed:
			 * the FUP gives the exact IP */
			i = j;
			ip = ips[i];
			if (synth_in(opt, ip)) {
				/* decoders (libipt too) reset the last IP at OVF */
				s.enc.last_ip = 0;
				synth_ip(&s, BTR_PT_FUP, ip, 0);
				o->n_fup--;
			} else {
				enabled = 0;
			}
		}
		ovf_ok = 0;
		if (!enabled) {
			if (!synth_in(opt, ip))
				continue;
			synth_mode(&s);
			synth_ip(&s, BTR_PT_TIP_PGE, ip, 0);
			enabled = 1;
		}
		uint64_t next = i + 1 < n ? ips[i + 1] : end_ip;
		if (fault && fault[i]) {
			/* The instruction faulted: FUP at it, then the kernel. */
			synth_flush(&s);
			synth_ip(&s, BTR_PT_FUP, ip, 0);
			synth_ip(&s, BTR_PT_TIP_PGD, 0, 1);
			enabled = 0;
			continue;
		}
		struct btr_insn in;
		if (synth_decode(img, ip, &in)) {
			s.err = 1;
			break;
		}
		synth_expect(o, ip);
		uint64_t ft = ip + in.len;
		int last = i + 1 == n;
		int leaves = last ? 1 : !synth_in(opt, next);
		switch (in.kind) {
		case BTR_KIND_NONE:
			if (next != ft && !last) {
				/* Asynchronous transfer after a completed instruction
				 * (a signal delivered on return from the kernel). */
				synth_flush(&s);
				synth_ip(&s, BTR_PT_FUP, ft, 0);
				synth_ip(&s, BTR_PT_TIP_PGD, 0, 1);
				enabled = 0;
			} else if (leaves) {
				/* leaving the filter without a branch: treat as the end */
				synth_flush(&s);
				synth_ip(&s, BTR_PT_FUP, ft, 0);
				synth_ip(&s, BTR_PT_TIP_PGD, 0, 1);
				enabled = 0;
			}
			break;
		case BTR_KIND_JCC:
		case BTR_KIND_LOOP:
		case BTR_KIND_JRCXZ:
			if (leaves && next) {
				synth_flush(&s);
				synth_ip(&s, BTR_PT_TIP_PGD, next, 0);
				enabled = 0;
			} else {
				synth_bit(&s, next != ft);
				ovf_ok = 1;
			}
			break;
		case BTR_KIND_CALL:
		case BTR_KIND_JMP:
			if (leaves && next) {
				synth_flush(&s);
				synth_ip(&s, BTR_PT_TIP_PGD, next, 0);
				enabled = 0;
				break;
			}
			if (in.kind == BTR_KIND_CALL && in.target != ft) {
				s.stk_top = (s.stk_top + 1) % 64;
				s.stk[s.stk_top] = ft;
				if (s.stk_n < 64)
					s.stk_n++;
			}
			break;
		case BTR_KIND_CALL_IND:
		case BTR_KIND_JMP_IND:
		case BTR_KIND_RET:
			if (leaves) {
				synth_flush(&s);
				synth_ip(&s, BTR_PT_TIP_PGD, next, next == 0);
				enabled = 0;
				break;
			}
			if (in.kind == BTR_KIND_RET && !opt->no_retcomp && s.stk_n &&
			    s.stk[s.stk_top] == next) {
				s.stk_top = (s.stk_top + 63) % 64;
				s.stk_n--;
				synth_bit(&s, 1);
				ovf_ok = 1;
				break;
			}
			if (in.kind == BTR_KIND_CALL_IND) {
				s.stk_top = (s.stk_top + 1) % 64;
				s.stk[s.stk_top] = ft;
				if (s.stk_n < 64)
					s.stk_n++;
			}
			synth_flush(&s);
			synth_ip(&s, BTR_PT_TIP, next, 0);
			ovf_ok = 1;
			break;
		default:
			/* syscall and other far transfers: user-only tracing
			 * loses the kernel part. */
			synth_flush(&s);
			synth_ip(&s, BTR_PT_TIP_PGD, 0, 1);
			enabled = 0;
			break;
		}
	}
	synth_flush(&s);
	if (enabled)
		synth_ip(&s, BTR_PT_TIP_PGD, 0, 1);
	o->size = btr_pt_enc_size(&s.enc);
	return s.err ? -1 : 0;
}

static inline void synth_free(struct synth_out *o)
{
	free(o->buf);
	free(o->expect);
	memset(o, 0, sizeof(*o));
}

#endif
