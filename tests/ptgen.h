/* ptgen.h - a generated code image and a random walk over it, written
 * straight to an Intel PT stream (no single-stepping, so streams of many
 * megabytes are cheap).  Used by bench_ptflow, the CLI test and the fuzz
 * target.  The image has @nfunc functions of 256 bytes each at @base:
 *
 *   L0: add; add; jne L2            conditional (skips the calls)
 *   L1: add; call f[(i+1)%n]        direct call
 *       add; call [rip+0]           indirect call (random function)
 *   L2: add; mov; jne L0            conditional loop back
 *   L3: add; jmp [rip+0]            indirect jump (switch): L4 or L5
 *   L4: add; ret
 *   L5: add; mov; ret
 *
 * The walk emits what user-mode hardware would: TNT (short/long), TIP,
 * return compression (64-entry stack cleared at PSB), PSB+ with TSC,
 * MODE.Exec and FUP every @psb_period bytes.  A RET at the outermost
 * frame is uncompressed and goes to a random function.  The generator
 * counts instructions and branches by kind: a correct decoder reports
 * exactly these numbers. */
#ifndef BTR_TEST_PTGEN_H
#define BTR_TEST_PTGEN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/branch.h"
#include "btr/pt.h"

#define PTGEN_FSIZE 256

struct ptgen {
	uint64_t base;
	unsigned nfunc;
	uint8_t *code;       /* nfunc * 256 bytes */
	size_t code_size;
	/* label offsets inside a function */
	unsigned l0, l0_jcc, l1, l1_call, l1_icall, l2, l2_jcc, l3, l3_ijmp, l4, l4_ret, l5, l5_ret, end;
	/* output */
	uint8_t *pt;
	size_t pt_size, pt_cap;
	uint64_t insns, branches, by_kind[BTR_KIND__COUNT];
	/* walk state */
	uint64_t rng;
};

static inline uint64_t ptgen_rand(struct ptgen *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return g->rng;
}

static inline void ptgen_code(struct ptgen *g, uint64_t base, unsigned nfunc)
{
	g->base = base;
	g->nfunc = nfunc;
	g->code_size = (size_t)nfunc * PTGEN_FSIZE;
	g->code = malloc(g->code_size);
	memset(g->code, 0xcc, g->code_size);
	for (unsigned i = 0; i < nfunc; i++) {
		uint8_t *f = g->code + (size_t)i * PTGEN_FSIZE;
		uint64_t fa = base + (uint64_t)i * PTGEN_FSIZE;
		unsigned p = 0;
#define ADD() (f[p] = 0x48, f[p + 1] = 0x83, f[p + 2] = 0xc0, f[p + 3] = 0x01, p += 4)
#define MOV() (f[p] = 0x48, f[p + 1] = 0x89, f[p + 2] = 0xc3, p += 3)
#define REL32(at, tgt) do { int32_t d_ = (int32_t)((int64_t)(tgt) - (int64_t)(fa + (at) + 4)); memcpy(f + (at), &d_, 4); } while (0)
		g->l0 = p; ADD(); ADD();
		g->l0_jcc = p; f[p] = 0x0f; f[p + 1] = 0x85; p += 6;   /* jne L2 (patched) */
		g->l1 = p; ADD();
		g->l1_call = p; f[p] = 0xe8; p += 5;
		REL32(g->l1_call + 1, base + (uint64_t)((i + 1) % nfunc) * PTGEN_FSIZE);
		ADD();
		g->l1_icall = p; f[p] = 0xff; f[p + 1] = 0x15; memset(f + p + 2, 0, 4); p += 6;
		g->l2 = p; ADD(); MOV();
		g->l2_jcc = p; f[p] = 0x0f; f[p + 1] = 0x85; p += 6;
		REL32(g->l2_jcc + 2, fa + g->l0);
		REL32(g->l0_jcc + 2, fa + g->l2);
		g->l3 = p; ADD();
		g->l3_ijmp = p; f[p] = 0xff; f[p + 1] = 0x25; memset(f + p + 2, 0, 4); p += 6;
		g->l4 = p; ADD();
		g->l4_ret = p; f[p] = 0xc3; p += 1;
		g->l5 = p; ADD(); MOV();
		g->l5_ret = p; f[p] = 0xc3; p += 1;
		g->end = p;
#undef ADD
#undef MOV
#undef REL32
	}
}

struct ptgen_w {
	struct ptgen *g;
	struct btr_pt_encoder e;
	uint64_t tnt;
	unsigned ntnt;
	uint64_t stk[64];
	unsigned top, n;
	size_t last_psb;
	uint64_t tsc;
};

static inline void ptgen_reserve(struct ptgen_w *w, size_t need)
{
	struct ptgen *g = w->g;
	size_t used = btr_pt_enc_size(&w->e);
	if (used + need <= g->pt_cap)
		return;
	size_t nc = g->pt_cap ? g->pt_cap * 2 : 1 << 20;
	while (nc < used + need)
		nc *= 2;
	g->pt = realloc(g->pt, nc);
	g->pt_cap = nc;
	uint64_t last = w->e.last_ip;
	w->e.begin = g->pt;
	w->e.pos = g->pt + used;
	w->e.end = g->pt + nc;
	w->e.last_ip = last;
}

static inline void ptgen_flush(struct ptgen_w *w)
{
	if (!w->ntnt)
		return;
	ptgen_reserve(w, 16);
	struct btr_pt_packet p = { .type = BTR_PT_TNT };
	p.size = w->ntnt <= 6 ? 1 : 8;
	p.u.tnt.bits = w->tnt;
	p.u.tnt.count = (uint8_t)w->ntnt;
	btr_pt_enc_packet(&w->e, &p);
	w->tnt = 0;
	w->ntnt = 0;
}

static inline void ptgen_bit(struct ptgen_w *w, int t)
{
	w->tnt = (w->tnt << 1) | (unsigned)t;
	if (++w->ntnt == 47)
		ptgen_flush(w);
}

static inline void ptgen_tip(struct ptgen_w *w, uint64_t ip)
{
	ptgen_flush(w);
	ptgen_reserve(w, 16);
	btr_pt_enc_ip(&w->e, BTR_PT_TIP, ip);
}

static inline void ptgen_psb(struct ptgen_w *w, uint64_t ip)
{
	ptgen_flush(w);
	ptgen_reserve(w, 64);
	struct btr_pt_packet p = { .type = BTR_PT_PSB };
	btr_pt_enc_packet(&w->e, &p);
	struct btr_pt_packet t = { .type = BTR_PT_TSC };
	t.u.tsc.tsc = w->tsc;
	btr_pt_enc_packet(&w->e, &t);
	struct btr_pt_packet m = { .type = BTR_PT_MODE_EXEC };
	m.u.mode_exec.csl = 1;
	btr_pt_enc_packet(&w->e, &m);
	btr_pt_enc_ip(&w->e, BTR_PT_FUP, ip);
	struct btr_pt_packet e = { .type = BTR_PT_PSBEND };
	btr_pt_enc_packet(&w->e, &e);
	w->n = 0;
	w->last_psb = btr_pt_enc_size(&w->e);
}

static inline void ptgen_branch(struct ptgen *g, unsigned kind, uint64_t insns)
{
	g->insns += insns;
	g->branches++;
	g->by_kind[kind]++;
}

enum { PG_L0, PG_L1, PG_L1R, PG_L2, PG_L3, PG_L4, PG_L5 };

static inline uint64_t ptgen_addr(const struct ptgen *g, unsigned fn, unsigned lab)
{
	uint64_t fa = g->base + (uint64_t)fn * PTGEN_FSIZE;
	switch (lab) {
	case PG_L0: return fa + g->l0;
	case PG_L1: return fa + g->l1;
	case PG_L1R: return fa + g->l1_call + 5;
	case PG_L2: return fa + g->l2;
	case PG_L3: return fa + g->l3;
	case PG_L4: return fa + g->l4;
	default: return fa + g->l5;
	}
}

/* Walks until the stream has at least @bytes bytes. */
static inline void ptgen_walk(struct ptgen *g, size_t bytes, uint64_t seed, size_t psb_period)
{
	struct ptgen_w w;
	memset(&w, 0, sizeof(w));
	w.g = g;
	g->rng = seed | 1;
	g->pt_cap = bytes + 4096;
	g->pt = malloc(g->pt_cap);
	btr_pt_enc_init(&w.e, g->pt, g->pt_cap);
	w.tsc = 100000;
	/* start: PSB without FUP, then MODE.Exec + TIP.PGE */
	{
		struct btr_pt_packet p = { .type = BTR_PT_PSB };
		btr_pt_enc_packet(&w.e, &p);
		struct btr_pt_packet e = { .type = BTR_PT_PSBEND };
		btr_pt_enc_packet(&w.e, &e);
		struct btr_pt_packet m = { .type = BTR_PT_MODE_EXEC };
		m.u.mode_exec.csl = 1;
		btr_pt_enc_packet(&w.e, &m);
		btr_pt_enc_ip(&w.e, BTR_PT_TIP_PGE, g->base);
		w.last_psb = btr_pt_enc_size(&w.e);
	}
	struct { unsigned fn, lab; } stack[32];
	unsigned depth = 0, fn = 0, lab = PG_L0;
	int traced = 1;  /* the last branch produced trace (end there: exact counts) */
	while (btr_pt_enc_size(&w.e) < bytes || !traced) {
		traced = lab != PG_L1;
		w.tsc += 37;
		if (btr_pt_enc_size(&w.e) - w.last_psb >= psb_period)
			ptgen_psb(&w, ptgen_addr(g, fn, lab));
		uint64_t r = ptgen_rand(g);
		switch (lab) {
		case PG_L0: {   /* add; add; jne L2 */
			/* biased like real code: calls taken 1/4 of the time */
			int skip = depth >= 24 || (r & 3) != 0;
			ptgen_bit(&w, skip);
			ptgen_branch(g, BTR_KIND_JCC, 3);
			lab = skip ? PG_L2 : PG_L1;
			break;
		}
		case PG_L1: {   /* add; call f[fn+1] */
			ptgen_branch(g, BTR_KIND_CALL, 2);
			stack[depth].fn = fn;
			stack[depth++].lab = PG_L1R;
			w.top = (w.top + 1) % 64; w.stk[w.top] = ptgen_addr(g, fn, PG_L1R); if (w.n < 64) w.n++;
			fn = (fn + 1) % g->nfunc;
			lab = PG_L0;
			break;
		}
		case PG_L1R: {  /* add; call [rip] */
			unsigned callee = (unsigned)((r >> 12) % g->nfunc);
			ptgen_tip(&w, ptgen_addr(g, callee, PG_L0));
			ptgen_branch(g, BTR_KIND_CALL_IND, 2);
			stack[depth].fn = fn;
			stack[depth++].lab = PG_L2;
			w.top = (w.top + 1) % 64; w.stk[w.top] = ptgen_addr(g, fn, PG_L2); if (w.n < 64) w.n++;
			fn = callee;
			lab = PG_L0;
			break;
		}
		case PG_L2: {   /* add; mov; jne L0 */
			/* a loop: back edge taken 15/16 */
			int back = ((r >> 4) & 15) != 0;
			ptgen_bit(&w, back);
			ptgen_branch(g, BTR_KIND_JCC, 3);
			lab = back ? PG_L0 : PG_L3;
			break;
		}
		case PG_L3: {   /* add; jmp [rip] -> L4 / L5 */
			lab = ((r >> 8) & 7) == 0 ? PG_L5 : PG_L4;
			ptgen_tip(&w, ptgen_addr(g, fn, lab));
			ptgen_branch(g, BTR_KIND_JMP_IND, 2);
			break;
		}
		default: {      /* L4: add; ret   L5: add; mov; ret */
			ptgen_branch(g, BTR_KIND_RET, lab == PG_L5 ? 3 : 2);
			if (depth) {
				depth--;
				uint64_t to = ptgen_addr(g, stack[depth].fn, stack[depth].lab);
				if (w.n && w.stk[w.top] == to) {
					w.top = (w.top + 63) % 64;
					w.n--;
					ptgen_bit(&w, 1);
				} else {
					ptgen_tip(&w, to);
				}
				fn = stack[depth].fn;
				lab = stack[depth].lab;
			} else {
				/* the outermost frame: an uncompressed RET anywhere */
				fn = (unsigned)((r >> 16) % g->nfunc);
				lab = PG_L0;
				ptgen_tip(&w, ptgen_addr(g, fn, lab));
			}
			break;
		}
		}
	}
	ptgen_flush(&w);
	g->pt_size = btr_pt_enc_size(&w.e);
}

static inline void ptgen_free(struct ptgen *g)
{
	free(g->code);
	free(g->pt);
	memset(g, 0, sizeof(*g));
}

#endif
