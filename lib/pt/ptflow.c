/* ptflow.c - Intel PT flow reconstruction.
 *
 * Design (see docs/pt-decode.md for the user-facing rules):
 *
 * - Packet driven.  Packets are parsed inline (the hot ones, TNT, TIP, PAD,
 *   MTC, CYC, first) and each packet moves the flow only as far as it
 *   proves execution went.  TNT bits go into a small FIFO and are consumed
 *   by walking blocks; a TIP resolves the indirect branch the walk stopped
 *   at (or walks to the next one); a FUP walks to its IP.  Because nothing
 *   is executed speculatively, the stream can arrive in pieces and no
 *   look-ahead is needed; a packet cut at a buffer end is carried over.
 *
 * - Block cache.  Each basic block is decoded once (Zydis, via btr_insn)
 *   into one cache line of a dense array (allocated in decode order; an
 *   index maps addresses to blocks): instruction count, the class of the
 *   ending instruction, its direct target and fall-through.  Every block
 *   also links to the blocks that followed it (taken and not taken), so
 *   the hot path is a pointer chase plus one compare, no hash.  The array
 *   never grows: when full it is dropped and refilled.
 *
 * - The hot loop (walk_fast) consumes TNT and TIP packets straight from
 *   the stream bytes while the flow is known, with its state in
 *   registers; the branch records go to the callback one by one or in
 *   batches (cb->branches).
 *
 * - Return compression keeps a 64-entry stack like the hardware's
 *   (SDM "Indirect Transfer Compression for Returns").  The hardware only
 *   compresses RETs whose CALL it saw since the last PSB, so the stack is
 *   cleared at every PSB; this is what makes parallel decoding from PSB
 *   boundaries exact.  Like libipt, an uncompressed RET does not pop.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <stdio.h>

#include "ptflow_int.h"

const char *btr_flow_event_name(enum btr_flow_event_type t)
{
	static const char *const names[] = {
		[BTR_FLOW_ENABLE] = "enable", [BTR_FLOW_DISABLE] = "disable",
		[BTR_FLOW_GAP] = "gap", [BTR_FLOW_OVERFLOW] = "overflow",
		[BTR_FLOW_ASYNC] = "async", [BTR_FLOW_PAGING] = "paging",
		[BTR_FLOW_MODE] = "mode", [BTR_FLOW_TSX_ABORT] = "tsx-abort",
		[BTR_FLOW_PTWRITE] = "ptwrite", [BTR_FLOW_STOP] = "tracestop",
		[BTR_FLOW_TSX] = "tsx", [BTR_FLOW_TRIG] = "trig", [BTR_FLOW_CFE] = "cfe",
		[BTR_FLOW_EVD] = "evd",
	};
	if ((unsigned)t < BTR_ARRAY_SIZE(names) && names[t])
		return names[t];
	return "?";
}

/* The errata libipt's pt_cpu_errata() enables (libipt as of its
 * conformance suite, commit 8978561f927d: the `; cpu` lines of each
 * erratum's test name the CPUs it applies to), by family/model. */
static void errata_for(const struct btr_ptflow_config *c, struct errata *e)
{
	memset(e, 0, sizeof(*e));
	if (!c || (c->flags & BTR_PTFLOW_NO_ERRATA))
		return;
	if (c->cpu_family == 0x12 || c->cpu_family == 0x13) {
		/* families 18 and 19 */
		e->bdm70 = e->skd022 = 1;
		e->apl11 = c->cpu_family == 0x12;
		e->skz84 = c->cpu_family == 0x13 && c->cpu_model == 1;
		return;
	}
	if (c->cpu_family != 6)
		return;
	switch (c->cpu_model) {
	case 0x3d: case 0x47: case 0x4f: case 0x56:   /* Broadwell */
		e->bdm70 = e->bdm64 = 1;
		break;
	case 0x4e: case 0x5e: case 0x8e: case 0x9e: case 0xa5: case 0xa6: /* Skylake .. Comet Lake */
		e->bdm70 = e->skd007 = e->skd022 = e->skd010 = e->skl014 = e->skl168 = 1;
		break;
	case 0x55: case 0x6a: case 0x6c:              /* SKX, ICX (libipt: also SKZ84) */
		e->bdm70 = e->skl014 = e->skd022 = e->skz84 = 1;
		break;
	case 0x66: case 0x7d: case 0x7e:              /* CNL, ICL */
	case 0x8c: case 0x8d: case 0xa7: case 0xa8:   /* TGL, RKL */
		e->bdm70 = e->skl014 = e->skd022 = 1;
		break;
	case 0x8f: case 0xad: case 0xae: case 0xcf:   /* SPR, GNR, EMR */
		e->bdm70 = e->skd022 = e->skz84 = 1;
		break;
	case 0x97: case 0x9a: case 0xaa: case 0xac: case 0xb5: case 0xb7: /* ADL, MTL, RPL, ... */
	case 0xba: case 0xbd: case 0xbf: case 0xc5: case 0xc6: case 0xcc: case 0xd5:
		e->bdm70 = e->skd022 = e->apl11 = 1;
		break;
	case 0x5c: case 0x5f:                         /* Goldmont */
		e->apl12 = e->apl11 = 1;
		break;
	case 0x7a: case 0x86: case 0x96: case 0x9c:   /* Goldmont Plus, Tremont */
	case 0xaf: case 0xb6: case 0xdd:              /* SRF, GRR, CWF */
		e->apl11 = 1;
		break;
	}
}

int btr_ptflow_errata_names(const struct btr_ptflow_config *cfg, char *buf, size_t size)
{
	struct errata e;
	errata_for(cfg, &e);
	if (!buf || !size)
		return -BTR_ERR_INVAL;
	int n = snprintf(buf, size, "%s%s%s%s%s%s%s%s%s%s", e.bdm70 ? "bdm70 " : "",
			 e.bdm64 ? "bdm64 " : "", e.skd007 ? "skd007 " : "", e.skd022 ? "skd022 " : "",
			 e.skd010 ? "skd010 " : "", e.skl014 ? "skl014 " : "", e.skl168 ? "skl168 " : "",
			 e.apl12 ? "apl12 " : "", e.apl11 ? "apl11 " : "", e.skz84 ? "skz84 " : "");
	if (n > 0 && (size_t)n <= size && buf[n - 1] == ' ')
		buf[--n] = 0;
	return n;
}


/* The block cache's tables (MiBs, zeroed) come straight from the system
 * and go back to it when the decoder is freed: through malloc, a stream
 * that creates and frees a decoder per short-lived thread fragments the
 * heap and grows by ~150 KiB per thread (glibc raises its mmap threshold
 * after the first free). */
static void *big_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t size)
{
	if (p)
		munmap(p, size);
}

/* btr_ptflow_new, taking the block cache's tables from @spare when it
 * holds a set of the right size (btr__ptflow_free_keep). */
int btr__ptflow_new_reuse(struct btr_image *img, const struct btr_ptflow_config *cfg,
			  struct btr_ptflow_spare *spare, struct btr_ptflow **out)
{
	if (!img || !out)
		return -BTR_ERR_INVAL;
	if (!BTR_OPTS_VALID(cfg, offsetof(struct btr_ptflow_config, tid)))
		return -BTR_ERR_INVAL;
	/* aligned: struct blk (embedded as pend_copy) is cache-line aligned */
	struct btr_ptflow *f = aligned_alloc(64, (sizeof(*f) + 63) & ~(size_t)63);
	if (!f)
		return -BTR_ERR_NOMEM;
	memset(f, 0, sizeof(*f));
	BTR_OPTS_COPY(&f->cfg, cfg);
	if (f->cfg.n_ip_filter > 4)
		f->cfg.n_ip_filter = 4;
	if (!f->cfg.mtc_freq)
		f->cfg.mtc_freq = 3;   /* perf's default mtc_period */
	errata_for(&f->cfg, &f->er);
	f->cache_bits = f->cfg.cache_bits ? f->cfg.cache_bits : CACHE_BITS_DEFAULT;
	if (f->cache_bits < 8 || f->cache_bits > 22) {
		free(f);
		return -BTR_ERR_INVAL;
	}
	size_t n = (size_t)1 << f->cache_bits;
	if (spare && spare->blks && spare->cache_bits == f->cache_bits) {
		/* cleared as a changed image clears them: what a new
		 * decoder's tables read as (ptf_flush_blocks) */
		f->blks = spare->blks;
		f->idx = spare->idx;
		f->lens = spare->lens;
		f->cold = spare->cold;
		memset(spare, 0, sizeof(*spare));
	} else {
		f->blks = big_alloc(n * sizeof(*f->blks));
		f->idx = big_alloc(n * sizeof(*f->idx));
		f->lens = big_alloc(n * BLK_MAXI);
		f->cold = big_alloc(n * sizeof(*f->cold));
	}
	f->bbuf = calloc(BTR_PTFLOW_BATCH, sizeof(*f->bbuf));
	f->cur = NIL;
	f->rs_nolink = NIL;
	if (!f->blks || !f->idx || !f->lens || !f->cold || !f->bbuf) {
		btr_ptflow_free(f);
		return -BTR_ERR_NOMEM;
	}
	memset(f->bbuf, 0, BTR_PTFLOW_BATCH * sizeof(*f->bbuf));
	ptf_bbuf_fill(f, 0);
	f->img = img;
	f->img_gen = btr_image_generation(img);
	*out = f;
	return 0;
}

int btr_ptflow_new(struct btr_image *img, const struct btr_ptflow_config *cfg,
		   struct btr_ptflow **out)
{
	return btr__ptflow_new_reuse(img, cfg, NULL, out);
}

static void tables_free(unsigned cache_bits, struct blk *blks, struct blk_ref *idx, uint8_t *lens,
			struct blk_cold *cold)
{
	size_t n = (size_t)1 << cache_bits;
	big_free(blks, n * sizeof(*blks));
	big_free(idx, n * sizeof(*idx));
	big_free(lens, n * BLK_MAXI);
	big_free(cold, n * sizeof(*cold));
}

/* btr_ptflow_free, keeping the block cache's tables in @spare (if it is
 * empty) for the next btr__ptflow_new_reuse: a stream of many short
 * processes otherwise maps, faults in and unmaps 7.5 MiB per process (half
 * of its time went to the kernel). */
void btr__ptflow_free_keep(struct btr_ptflow *f, struct btr_ptflow_spare *spare)
{
	if (!f)
		return;
	ptf_counts_free(f);   /* nothing left to report: ptf_flush_blocks must not call back */
	f->nd = 0;
	if (spare && !spare->blks && f->blks && f->idx && f->lens && f->cold) {
		ptf_flush_blocks(f, 1);
		spare->blks = f->blks;
		spare->idx = f->idx;
		spare->lens = f->lens;
		spare->cold = f->cold;
		spare->cache_bits = f->cache_bits;
		f->blks = NULL;
		f->idx = NULL;
		f->lens = NULL;
		f->cold = NULL;
	}
	tables_free(f->cache_bits, f->blks, f->idx, f->lens, f->cold);
	free(f->bbuf);
	free(f);
}

void btr__ptflow_spare_free(struct btr_ptflow_spare *spare)
{
	if (spare && spare->blks)
		tables_free(spare->cache_bits, spare->blks, spare->idx, spare->lens, spare->cold);
	if (spare)
		memset(spare, 0, sizeof(*spare));
}

void btr_ptflow_free(struct btr_ptflow *f)
{
	btr__ptflow_free_keep(f, NULL);
}

uint64_t btr_ptflow_folded(const struct btr_ptflow *f)
{
	return f ? f->folded : 0;
}

/* 1 if the not-taken JCCs may be left out now (cb->fold_ok). */
static int fold_wanted(const struct btr_ptflow_callbacks *cb)
{
	return cb->fold_ok && cb->branches && !cb->counts && !cb->insn && cb->fold_ok(cb->ctx);
}

void btr_ptflow_stats(const struct btr_ptflow *f, struct btr_ptflow_stats *st)
{
	if (f && st)
		*st = f->st;
	else if (st)
		memset(st, 0, sizeof(*st));
}

/* cb->counts across a change of the TSX state from @was: the counted
 * branches go out before a transaction begins, and the first branch
 * after one ends goes out in order (btr/ptflow.h), so that a consumer
 * sees which branches a transaction held. */
static void tsx_counts(struct btr_ptflow *f, uint8_t was)
{
	if (!f->cb || !f->cb->counts || was == f->intx)
		return;
	if (f->intx)
		ptf_flush_counts(f);
	else
		f->run_ordered = 1;
}

/* The TSX state the events @t/@payload change (before any filtering of
 * events by the callbacks).  For an abort, returns the instructions the
 * transaction had executed (the event's payload, btr/ptflow.h). */
static uint64_t tsx_state(struct btr_ptflow *f, enum btr_flow_event_type t, uint64_t payload)
{
	uint64_t n = 0;
	uint8_t was = f->intx;
	if (t == BTR_FLOW_TSX && payload && !f->intx) {
		f->intx = 1;
		f->tx_insns = f->st.insns;
	} else if (t == BTR_FLOW_TSX && !payload) {
		f->intx = 0;
	} else if (t == BTR_FLOW_TSX_ABORT && f->intx) {
		n = f->st.insns - f->tx_insns;
		f->st.tsx_aborts++;
		f->st.tsx_aborted_insns += n;
		f->intx = 0;
	}
	tsx_counts(f, was);
	return n;
}

void ptf_emit_event(struct btr_ptflow *f, enum btr_flow_event_type t, int reason,
		       uint64_t ip, uint64_t payload)
{
	if (btr_unlikely(t == BTR_FLOW_TSX || t == BTR_FLOW_TSX_ABORT)) {
		uint64_t n = tsx_state(f, t, payload);
		if (t == BTR_FLOW_TSX_ABORT)
			payload = n;
	}
	/* cb->counts: where the next straight-line run starts */
	if (t == BTR_FLOW_ENABLE)
		f->rstart = ip;
	else if (t == BTR_FLOW_GAP || t == BTR_FLOW_OVERFLOW || t == BTR_FLOW_DISABLE)
		f->rstart = 0;
	if (t == BTR_FLOW_GAP)
		f->st.gaps++;
	if (t == BTR_FLOW_OVERFLOW)
		f->st.overflows++;
	if (!f->cb || !f->cb->event)
		return;
	/* Branches before the event first. */
	ptf_flush_branches(f);
	if (f->stopped)
		return;
	struct btr_flow_event ev = {
		.type = t, .reason = reason, .offset = f->pkt_off, .ip = ip,
		.tsc = f->tsc, .payload = payload,
	};
	if (f->cb->event(f->cb->ctx, &ev))
		f->stopped = 1;
	if (f->cb->fold_ok)   /* the event may have changed the consumer's mind */
		f->fold = fold_wanted(f->cb);
}

void ptf_tnt_clear(struct btr_ptflow *f)
{
	f->tq_head = f->tq_cnt = f->tnt_total = 0;
}

/* Flow lost: report a gap and wait for the next IP. */
static void ptf_gap(struct btr_ptflow *f, int reason, uint64_t ip)
{
	/* After a gap the flow resumes at the next IP packet, not at a PSB
	 * (as libipt would): TNT bits of a deferred TIP dropped with the
	 * gap, or returns compressed against calls made before it, can make
	 * the trace seem to contradict the code until the next PSB.  That is
	 * this decoder losing the flow again, not evidence about the code. */
	if (reason == -BTR_ERR_BAD_CONTEXT && f->unsure)
		reason = -BTR_ERR_NOSYNC;
	f->unsure = 1;
	ptf_emit_event(f, BTR_FLOW_GAP, reason, ip, 0);
	ptf_tnt_clear(f);
	f->pend = NULL;
	f->async_pending = 0;
	f->rs_n = 0;
	if (f->en == EN_ON)
		f->en = EN_LOST;
}

void ptf_apply_next_mode(struct btr_ptflow *f)
{
	if (f->have_next_mode) {
		f->have_next_mode = 0;
		if (f->mode != f->next_mode) {
			f->mode = f->next_mode;
			ptf_emit_event(f, BTR_FLOW_MODE, 0, f->ip, f->mode);
		}
	}
}

/* ---- packet handlers -------------------------------------------------- */

static void do_enable(struct btr_ptflow *f, uint64_t ip)
{
	f->ip = ip;
	f->en = EN_ON;
	f->pend = NULL;
	f->async_pending = 0;
	ptf_apply_next_mode(f);
	ptf_emit_event(f, BTR_FLOW_ENABLE, 0, ip, 0);
	ptf_take_image(f);
}

static void on_tnt(struct btr_ptflow *f, uint64_t bits, unsigned n)
{
	if (f->en != EN_ON || !n)
		return;
	if (f->tq_cnt == TNTQ) {
		ptf_gap(f, -BTR_ERR_BAD_CONTEXT, f->ip);
		return;
	}
	unsigned t = (f->tq_head + f->tq_cnt) % TNTQ;
	f->tq_bits[t] = bits;
	f->tq_n[t] = (uint8_t)n;
	f->tq_cnt++;
	f->tnt_total += n;
	if (f->pend)
		return;  /* waiting for the deferred TIP */
	size_t used = 0;
	int r = f->cb->insn || f->intx || f->run_ordered ? ptf_walk(f, G_TNT, 0, 0, NULL)
							       : ptf_walk_fast(f, NULL, 0, 0, 0, &used);
	if (r < 0)
		ptf_gap(f, r, f->ip);
}

/* The branch that a TIP resolves: from the pending/bound block to @to. */
static void resolve_tip(struct btr_ptflow *f, const struct blk *b, uint64_t to, int suppressed)
{
	unsigned kind = b->kind;
	emit_branch(f, END_IP(b), suppressed ? 0 : to, kind, BTR_BF_TAKEN);
	f->pend = NULL;
	if (suppressed) {
		/* Target out of context (e.g. user-only tracing of a far
		 * transfer into the kernel): we lose the IP until the next
		 * IP packet. */
		f->en = EN_LOST;
		return;
	}
	f->ip = to;
	ptf_apply_next_mode(f);
}

/* Reports a MODE.TSX begin/commit still waiting for its FUP, at @ip. */
static void tsx_flush(struct btr_ptflow *f, uint64_t ip)
{
	if (btr_unlikely(f->tsx_pend)) {
		ptf_emit_event(f, BTR_FLOW_TSX, 0, ip, f->tsx_pend - 1u);
		f->tsx_pend = 0;
	}
}

void ptf_on_tip(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	tsx_flush(f, f->ip);
	f->fup_status = 0;
	if (f->en == EN_OFF)
		return;
	if (f->en == EN_LOST) {
		f->after_ovf = 0;
		if (!suppressed) {
			/* Resynchronize at the target (also SKD010: "Intel PT
			 * FUP May be Dropped After OVF" - the TIP then gives the
			 * resume IP). */
			f->async_pending = 0;
			do_enable(f, ip);
		}
		return;
	}
	if (f->async_pending) {
		/* FUP + TIP: interrupt, exception, TSX abort. */
		f->async_pending = 0;
		unsigned fl = BTR_BF_TAKEN | (f->tsx_abort ? BTR_BF_TSX_ABORT : 0);
		if (f->tsx_abort)
			ptf_emit_event(f, BTR_FLOW_TSX_ABORT, 0, f->async_ip, 0);
		f->tsx_abort = 0;
		ptf_emit_event(f, BTR_FLOW_ASYNC, 0, f->async_ip, suppressed ? 0 : ip);
		emit_branch(f, f->async_ip, suppressed ? 0 : ip, BTR_KIND_ASYNC, fl);
		if (suppressed) {
			f->en = EN_LOST;
			return;
		}
		f->ip = ip;
		ptf_apply_next_mode(f);
		ptf_tnt_clear(f);
		return;
	}
	if (f->pend) {
		resolve_tip(f, f->pend, ip, suppressed);
		/* Bits queued behind a deferred TIP. */
		if (f->en == EN_ON && f->tnt_total) {
			size_t used = 0;
			int r = f->cb->insn || f->intx || f->run_ordered ? ptf_walk(f, G_TNT, 0, 0, NULL)
					    : ptf_walk_fast(f, NULL, 0, 0, 0, &used);
			if (r < 0)
				ptf_gap(f, r, f->ip);
		}
		return;
	}
	struct blk *end = NULL;
	int r = ptf_walk(f, G_TIP, ip, suppressed, &end);
	if (r < 0) {
		ptf_gap(f, r, f->ip);
		if (!suppressed)
			do_enable(f, ip);
		return;
	}
	if (r == 1)
		resolve_tip(f, end, ip, suppressed);
}

static void on_pge(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	tsx_flush(f, f->ip);
	f->fup_status = 0;
	f->after_ovf = 0;
	if (suppressed) {
		f->en = EN_LOST;
		return;
	}
	ptf_tnt_clear(f);
	do_enable(f, ip);
}

static void on_pgd(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	tsx_flush(f, f->ip);
	f->fup_status = 0;
	int ovf = f->after_ovf;
	f->after_ovf = 0;
	if (f->en == EN_ON) {
		if (f->async_pending) {
			/* FUP + TIP.PGD: disabled asynchronously at the FUP IP,
			 * whose instruction did not execute - except for SKD022
			 * ("VM Entry That Clears TraceEn May Generate a FUP"):
			 * a FUP at VMLAUNCH/VMRESUME means it did execute. */
			f->async_pending = 0;
			uint64_t at = f->async_ip;
			if (f->er.skd022) {
				int err;
				struct blk *b = lookup(f, at, &err);
				if (b && b->ninsn && END_IP(b) == at && b->kind == BTR_KIND_FAR_JMP &&
				    (f->cold[b - f->blks].end_flags & BTR_INSN_VMENTRY))
					exec_blk(f, b);
			}
			f->en = EN_OFF;
			if (f->tsx_abort) {
				/* MODE.TSX(abort) + FUP + TIP.PGD: the transaction
				 * aborted as tracing stopped */
				ptf_emit_event(f, BTR_FLOW_TSX_ABORT, 0, at, 0);
				f->tsx_abort = 0;
			}
			ptf_emit_event(f, BTR_FLOW_DISABLE, 0, at, 0);
		} else if (f->pend) {
			resolve_tip(f, f->pend, ip, suppressed);
			f->en = EN_OFF;
			ptf_emit_event(f, BTR_FLOW_DISABLE, 0, END_IP(&f->pend_copy), 0);
		} else {
			struct blk *end = NULL;
			int r = ptf_walk(f, G_PGD, ip, suppressed, &end);
			if (r < 0) {
				ptf_gap(f, r, f->ip);
			} else if (r == 1) {
				unsigned kind = end->kind;
				uint64_t to = suppressed ? 0 : ip;
				if (end->cls == C_NONE)
					;   /* MOV CR3: no branch */
				else if (end->cls == C_COND && !suppressed && ip == NEXT(end))
					emit_branch(f, END_IP(end), to, kind, 0);
				else
					emit_branch(f, END_IP(end), to, kind, BTR_BF_TAKEN);
				ptf_emit_event(f, BTR_FLOW_DISABLE, 0, END_IP(end), 0);
			}
		}
	} else if (f->en == EN_LOST && !ovf) {
		/* Right after an OVF the flow was never resumed (the OVF's gap
		 * said so): TIP.PGD there only says tracing stayed off, no
		 * disable (as libipt: conformance case skd010-tip_pgd). */
		ptf_emit_event(f, BTR_FLOW_DISABLE, 0, 0, 0);
	}
	f->en = EN_OFF;
	f->pend = NULL;
	f->async_pending = 0;
	ptf_tnt_clear(f);
}

/* Can straight-line code from @from reach @x (no branch between)?
 * Bounded like libipt's check for BDM64. */
static int contiguous(struct btr_ptflow *f, uint64_t from, uint64_t x)
{
	uint64_t ip = from;
	for (unsigned k = 0; k < 8; k++) {
		int err = 0;
		struct blk *b = lookup(f, ip, &err);
		if (!b)
			return 0;
		if (x >= b->ip && x <= END_IP(b))
			return 1;
		if (b->cls != C_NONE)
			return 0;
		ip = NEXT(b);
	}
	return 0;
}

static void on_fup(struct btr_ptflow *f, uint64_t ip, int suppressed)
{
	int status = f->fup_status;
	f->fup_status = 0;
	if (suppressed || f->in_psb || f->after_ovf || f->en != EN_ON || f->pend)
		tsx_flush(f, f->ip);   /* no walk to the FUP: where it was seen */
	if (suppressed)
		return;
	if (f->in_psb) {
		f->psb_fup = 1;
		if (f->en == EN_ON && !f->pend) {
			/* A status FUP: where execution is at the PSB.  Walk to
			 * it so nothing before the PSB is lost. */
			int r = ptf_walk(f, G_FUP, ip, 0, NULL);
			if (r < 0) {
				ptf_gap(f, r, f->ip);
				do_enable(f, ip);
			}
		} else if (f->en != EN_ON || f->pend) {
			f->after_ovf = 0;
			f->pend = NULL;
			do_enable(f, ip);
		}
		return;
	}
	if (f->after_ovf) {
		f->after_ovf = 0;
		do_enable(f, ip);
		return;
	}
	if (f->en == EN_OFF)
		return;
	if (f->en == EN_LOST) {
		f->ip = ip;
		f->en = EN_ON;
		ptf_emit_event(f, BTR_FLOW_ENABLE, 0, ip, 0);
		ptf_take_image(f);
		if (!status) {
			f->async_pending = 1;
			f->async_ip = ip;
		}
		return;
	}
	if (f->pend) {
		/* An async event right after an indirect branch whose TIP
		 * never came: the trace contradicts the code. */
		ptf_gap(f, -BTR_ERR_BAD_CONTEXT, f->ip);
		do_enable(f, ip);
		return;
	}
	int r = 1;
	if (f->tsx_abort && f->er.bdm64 && !contiguous(f, f->ip, ip)) {
		/* BDM64 ("An Incorrect LBR or Intel PT Packet May Be
		 * Recorded Following a Transactional Abort"): the branch
		 * before the abort may be recorded wrongly.  If straight-line
		 * code from here cannot reach the abort IP, assume (as
		 * libipt) that the last branch went there. */
		f->ip = ip;
	} else {
		r = ptf_walk(f, G_FUP, ip, 0, NULL);
	}
	if (r < 0) {
		ptf_gap(f, r, f->ip);
		f->ip = ip;
		f->en = EN_ON;
	}
	tsx_flush(f, ip);
	if (!status || f->tsx_abort) {
		f->async_pending = 1;
		f->async_ip = ip;
	}
}

static void on_ovf(struct btr_ptflow *f)
{
	ptf_emit_event(f, BTR_FLOW_OVERFLOW, 0, f->ip, 0);
	ptf_gap(f, -BTR_ERR_OVERFLOW, f->ip);
	f->in_psb = 0;   /* an OVF also terminates PSB+ (SDM) */
	f->in_bbp = 0;   /* and a BBP block (pt.c; also an OVF cutting a CYC) */
	/* Like libipt, forget the last IP: the IP packet after an overflow
	 * cannot be compressed against anything the decoder saw. */
	f->last_ip = 0;
	f->after_ovf = 1;
	if (f->en == EN_ON)
		f->en = EN_LOST;
}

static void on_psb(struct btr_ptflow *f)
{
	f->in_psb = 1;
	f->psb_fup = 0;
	f->psb_on = f->en == EN_ON;
	f->last_ip = 0;
	/* Only RETs whose CALL came after the last PSB are compressed. */
	f->rs_n = 0;
	f->unsure = 0;
}

static void on_psbend(struct btr_ptflow *f)
{
	f->in_psb = 0;
	if (!f->psb_fup && f->en != EN_OFF) {
		/* No FUP in PSB+: PacketEn is 0, tracing is off. */
		f->en = EN_OFF;
		f->pend = NULL;
		ptf_tnt_clear(f);
	}
}

static void on_mode_exec(struct btr_ptflow *f, uint8_t b)
{
	uint8_t m = (b & 1) ? BTR_MODE_64 : (b & 2) ? BTR_MODE_32 : BTR_MODE_16;
	if (f->in_psb && f->psb_on && f->en == EN_ON && f->mode != m &&
	    !(f->have_next_mode && f->next_mode == m)) {
		/* PSB+ restates the current mode: a different one contradicts
		 * the decoder's state (libipt: "bad status update").  The
		 * flow up to here stands; skip to the next PSB. */
		ptf_gap(f, -BTR_ERR_BAD_CONTEXT, f->ip);
		f->synced = 0;
		f->in_psb = 0;
		return;
	}
	if (f->in_psb || f->en != EN_ON) {
		if (f->mode != m) {
			f->mode = m;
			ptf_emit_event(f, BTR_FLOW_MODE, 0, f->ip, m);
		}
		f->have_next_mode = 0;
	} else {
		/* MODE.Exec precedes the TIP/TIP.PGE of the far transfer that
		 * changes the mode; the code before it still runs in the old.
		 * With event tracing a MODE.Exec also reports a change of
		 * RFLAGS.IF (STI, CLI, POPF): then a FUP follows with the IP
		 * where the change took effect - a status FUP, not the source
		 * of an asynchronous transfer (an interrupt's MODE.Exec comes
		 * after its FUP). */
		f->next_mode = m;
		f->have_next_mode = 1;
		f->fup_status = 1;
	}
}

/* MODE.TSX in PSB+ is state only; elsewhere a FUP follows with the IP of
 * the XBEGIN/XEND (a status FUP) or, with the abort bit, the source of
 * the abort, then a TIP. */
static void on_mode_tsx(struct btr_ptflow *f, uint8_t b)
{
	if (f->in_psb) {
		/* the state at the PSB: in a transaction or not */
		if ((b & 1) && !f->intx)
			f->tx_insns = f->st.insns;
		uint8_t was = f->intx;
		f->intx = b & 1;
		tsx_counts(f, was);
		return;
	}
	if (b & 2) {
		f->tsx_abort = 1;
	} else {
		/* reported where it took effect: at the FUP's IP, after the
		 * instructions before it (as libipt) */
		tsx_flush(f, f->ip);
		f->tsx_pend = (uint8_t)(1 + (b & 1));
	}
	f->fup_status = 1;
}

/* An OVF's errata (ptflow_errata.c) decided by the @n bytes @p after it.
 * Returns how many of them to skip. */
static size_t ovf_errata(struct btr_ptflow *f, const uint8_t *p, size_t n)
{
	struct ptf_ovf_fix x;
	ptf_ovf_errata(&f->er, p, n, &x);
	if (x.action == PTF_OVF_NORMAL)
		return 0;
	f->after_ovf = 0;
	f->last_ip = x.last_ip;
	f->pend = NULL;
	f->async_pending = 0;
	ptf_tnt_clear(f);
	if (x.action == PTF_OVF_OFF) {
		f->en = EN_OFF;   /* tracing was off when the overflow resolved */
	} else {
		do_enable(f, x.ip);
		if (x.has_tsx)
			on_mode_tsx(f, (uint8_t)(PT_MODE_TSX | x.tsx));
	}
	return x.skip;
}

/* Event trace (SDM "Event Trace"): a CFE names a control-flow event;
 * with its IP bit a FUP follows.  For the events that are instructions
 * completing (IRET, RSM, VM entry, UIRET; ERETU/ERETS report as IRET)
 * that FUP is the instruction's own IP: a status FUP, and the TIP or
 * TIP.PGD that follows is the instruction's own (it executes).  For
 * asynchronous events (interrupt, software interrupt, SMI, INIT, VM
 * exit, user interrupt, ...) the FUP is the source of the transfer, as
 * without event trace. */
static void on_cfe(struct btr_ptflow *f, unsigned type, unsigned vector, unsigned ipbit)
{
	ptf_emit_event(f, BTR_FLOW_CFE, 0, f->ip, type | vector << 8 | ipbit << 16);
	if (ipbit && (type == 2 || type == 4 || type == 7 || type == 13))
		f->fup_status = 1;
}

/* ---- timing ----------------------------------------------------------- */

static void on_tsc(struct btr_ptflow *f, uint64_t v)
{
	/* 56-bit payload; keep the upper byte of what we had. */
	uint64_t t = (f->tsc_pkt & ~((1ull << 56) - 1)) | v;
	if (f->tsc_pkt && t < f->tsc_pkt)
		t += 1ull << 56;
	f->tsc_pkt = t;
	f->tsc = t;
	f->tma_ok = 0;
}

static void on_tma(struct btr_ptflow *f, uint16_t ctc, uint16_t fc)
{
	(void)fc;
	f->art_base = ctc;
	f->art_now = ctc;
	f->tma_ok = 1;
}

static void on_mtc(struct btr_ptflow *f, uint8_t v)
{
	if (!f->tma_ok || !f->cfg.cpuid15_eax || !f->cfg.cpuid15_ebx)
		return;
	unsigned sh = f->cfg.mtc_freq;
	uint64_t cur = (f->art_now >> sh) & 0xff;
	uint64_t d = (uint64_t)((v - cur) & 0xff);
	f->art_now = ((f->art_now >> sh) + d) << sh;
	/* ART ticks -> TSC ticks through CPUID.15H (EBX/EAX). */
	uint64_t est = f->tsc_pkt + (f->art_now - f->art_base) * f->cfg.cpuid15_ebx / f->cfg.cpuid15_eax;
	if (est > f->tsc)
		f->tsc = est;
}

/* ---- packet parser ---------------------------------------------------- */

static const uint8_t psb_pattern[PT_SIZE_PSB] = { PT_PSB_PAIRS };



/* Parses and handles one packet at @p (@n bytes available), outside a
 * BBP block (inside one, packet_in_bbp() comes first).  Returns its
 * size, 0 if it is incomplete, or -1 for a byte that starts no packet. */
static inline __attribute__((always_inline)) int packet(struct btr_ptflow *f, const uint8_t *p, size_t n)
{
	uint8_t b = p[0];

	if (b == PT_OPC_PAD)
		return PT_SIZE_PAD;
	if ((b & PT_OPM_TNT8) == PT_OPC_TNT8 && b != PT_OPC_EXT) {
		/* short TNT: stop bit, then up to 6 bits, oldest highest */
		unsigned hi = 31u - (unsigned)__builtin_clz(b);
		on_tnt(f, (uint64_t)(b >> 1) & ((1u << (hi - 1)) - 1), hi - 1);
		return PT_SIZE_TNT8;
	}
	if ((b & PT_OPM_CYC) == PT_OPC_CYC) {
		/* CYC: 5 bits, then 7 per extension byte while bit 0 is set */
		uint64_t v = b >> 3;
		size_t i = 1;
		unsigned sh = 5;
		if ((b & PT_CYC_EXP) && f->er.skd007) {
			/* SKD007 ("Intel PT Buffer Overflow May Result in
			 * Incorrect Packets"): an OVF may replace the rest of a
			 * multi-byte CYC.  Like libipt, CYC + OVF is one OVF. */
			if (n < 2 || (p[1] == PT_OPC_EXT && n < 1 + PT_SIZE_OVF))
				return 0;
			if (p[1] == PT_OPC_EXT && p[2] == PT_EXT_OVF) {
				on_ovf(f);
				return 1 + PT_SIZE_OVF + (int)ovf_errata(f, p + 1 + PT_SIZE_OVF, n - 1 - PT_SIZE_OVF);
			}
		}
		if (b & PT_CYC_EXP) {
			for (;;) {
				if (i >= n)
					return 0;
				uint8_t c = p[i++];
				if (sh < 64)
					v |= (uint64_t)(c >> 1) << sh;
				sh += 7;
				if (!(c & PT_CYC_MORE))
					break;
				if (i > 15)
					return -1;
			}
		}
		f->cyc_acc += v;
		f->have_cyc = 1;
		return (int)i;
	}
	switch (b & PT_OPM_IP) {
	case PT_OPC_TIP: case PT_OPC_TIP_PGE: case PT_OPC_TIP_PGD: case PT_OPC_FUP: {
		unsigned ipc = b >> PT_OPS_IPC;
		unsigned len = ipc_len[ipc];
		if (len == 0xff)
			return -1;
		if (n < PT_SIZE_IP0 + (size_t)len)
			return 0;
		int supp = ipc == 0;
		uint64_t ip = ip_reconstruct(f, ipc, p + 1);
		switch (b & PT_OPM_IP) {
		case PT_OPC_TIP: ptf_on_tip(f, ip, supp); break;
		case PT_OPC_TIP_PGE: on_pge(f, ip, supp); break;
		case PT_OPC_TIP_PGD: on_pgd(f, ip, supp); break;
		default: on_fup(f, ip, supp); break;
		}
		return PT_SIZE_IP0 + (int)len;
	}
	}
	switch (b) {
	case PT_OPC_TSC:
		if (n < PT_SIZE_TSC)
			return 0;
		on_tsc(f, rd_le(p + 1, PT_SIZE_TSC - 1));
		return PT_SIZE_TSC;
	case PT_OPC_MTC:
		if (n < PT_SIZE_MTC)
			return 0;
		on_mtc(f, p[1]);
		return PT_SIZE_MTC;
	case PT_OPC_MODE:
		if (n < PT_SIZE_MODE)
			return 0;
		switch (p[1] & PT_MODE_LEAF_MASK) {
		case PT_MODE_EXEC:
			on_mode_exec(f, p[1]);
			break;
		case PT_MODE_TSX:
			on_mode_tsx(f, p[1]);
			break;
		}
		return PT_SIZE_MODE;
	case PT_OPC_EXT:
		break;
	case PT_OPC_TRIG: /* byte 1 bit 7 IP (a FUP follows), bit 6 ICNT present */
		if (n < PT_SIZE_TRIG)
			return 0;
		if (p[1] & PT_TRIG_RSVD)
			return -1;
		if ((p[1] & PT_TRIG_ICNT) && n < PT_SIZE_TRIG_ICNT)
			return 0;
		if (p[1] & PT_TRIG_IP)
			f->fup_status = 1;
		ptf_emit_event(f, BTR_FLOW_TRIG, 0, f->ip,
			       p[2] | (uint64_t)((p[1] >> 5) & 1) << 8 | (uint64_t)((p[1] >> 6) & 1) << 9 |
				       (p[1] & PT_TRIG_ICNT ? (uint64_t)(p[3] | p[4] << 8) << 16 : 0));
		return p[1] & PT_TRIG_ICNT ? PT_SIZE_TRIG_ICNT : PT_SIZE_TRIG;
	default:
		return -1;
	}
	/* Extended packets: the size from the packet table (pt_opcodes.h),
	 * then what the packet means for the flow. */
	if (n < PT_SIZE_EXT)
		return 0;
	const int id = pt_pkt_find(p, n);
	if (id < 0)
		return 0;
	const int sz = pt_pkt_len(id, p, n, f->er.skz84 ? PT_LEN_SKZ84 : 0);
	if (sz <= 0)
		return sz;
	switch (id) {
	case PT_PK_TNT64: { /* long TNT: 48-bit payload with stop bit */
		uint64_t v = rd_le(p + 2, 6);
		if (v) {
			unsigned hi = 63u - (unsigned)__builtin_clzll(v);
			on_tnt(f, v & ((1ull << hi) - 1), hi);
		}
		break;
	}
	case PT_PK_PSB:
		if (memcmp(p, psb_pattern, PT_SIZE_PSB))
			return -1;
		on_psb(f);
		break;
	case PT_PK_PSBEND:
		on_psbend(f);
		break;
	case PT_PK_OVF:
		on_ovf(f);
		return sz + (int)ovf_errata(f, p + sz, n - (size_t)sz);
	case PT_PK_PIP: {
		uint64_t v = rd_le(p + 2, 6);
		/* Outside PSB+ and an asynchronous transfer, a PIP binds to a
		 * MOV CR3 (which executed) or to the far transfer whose TIP
		 * follows: walk to whichever comes first. */
		if (!f->in_psb && f->en == EN_ON && !f->pend && !f->async_pending) {
			int r = ptf_walk(f, G_PIP, 0, 0, NULL);
			if (r < 0)
				ptf_gap(f, r, f->ip);
		}
		ptf_emit_event(f, BTR_FLOW_PAGING, 0, f->ip, (v >> 1) << 5);
		ptf_take_image(f);
		break;
	}
	case PT_PK_TRACESTOP:
		ptf_emit_event(f, BTR_FLOW_STOP, 0, f->ip, 0);
		f->en = EN_OFF;
		f->pend = NULL;
		ptf_tnt_clear(f);
		break;
	case PT_PK_TMA:
		if (sz == PT_SIZE_TMA)   /* (SKZ84's TMA with a bogus byte means nothing) */
			on_tma(f, (uint16_t)rd_le(p + 2, 2), (uint16_t)(p[5] | ((p[6] & 1) << 8)));
		break;
	case PT_PK_EXSTOP: /* IP bit: a FUP follows */
		if (p[1] & PT_EXT_IP_BIT)
			f->fup_status = 1;
		break;
	case PT_PK_BBP:
		f->in_bbp = 1;
		f->bbp_sz = p[2] >> 7;
		break;
	case PT_PK_BEP: /* IP bit: a FUP follows */
		f->in_bbp = 0;
		if (p[1] & PT_EXT_IP_BIT)
			f->fup_status = 1;
		break;
	case PT_PK_CFE:
		on_cfe(f, p[2] & 0x1f, p[3], p[2] >> 7);
		break;
	case PT_PK_EVD:
		ptf_emit_event(f, BTR_FLOW_EVD, p[2] & 0x3f, f->ip, rd_le(p + 3, 8));
		break;
	case PT_PK_PTW: /* payload 4 or 8 bytes, IP bit: a FUP follows */
		if (p[1] & PT_EXT_IP_BIT)
			f->fup_status = 1;
		ptf_emit_event(f, BTR_FLOW_PTWRITE, 0, f->ip, rd_le(p + PT_SIZE_EXT, (unsigned)sz - PT_SIZE_EXT));
		break;
	default: /* CBR, VMCS, MNT, MWAIT, PWRE, PWRX: stepped over */
		break;
	}
	return sz;
}

/* The packet at @p inside a BBP block: a byte xxxxx100b is a BIP (whose
 * first byte reads as a short TNT outside the block); any other packet is
 * handled by packet() and ends the block unless pt_bbp_keeps() says it
 * stays open (the rule of the packet decoder, pt.c).  BBP and BEP set the
 * block state themselves, an OVF (also one that cuts a CYC) ends it in
 * on_ovf().  Blocks are rare: the fast walk is not entered inside one
 * (run()). */
static __attribute__((noinline)) int packet_in_bbp(struct btr_ptflow *f, const uint8_t *p, size_t n)
{
	if ((p[0] & PT_OPM_BIP) == PT_OPC_BIP) {
		int sz = f->bbp_sz ? PT_SIZE_BIP4 : PT_SIZE_BIP8;
		return n < (size_t)sz ? 0 : sz;
	}
	int r = packet(f, p, n);
	if (r > 0 && !pt_bbp_keeps(p) && !(p[0] == PT_OPC_EXT && p[1] == PT_EXT_BBP))
		f->in_bbp = 0;
	return r;
}

/* Finds the next PSB in @p[0..n).  Returns its index or n. */
size_t ptf_find_psb(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i + PT_SIZE_PSB <= n; i++) {
		const uint8_t *q = memchr(p + i, PT_OPC_EXT, n - i - (PT_SIZE_PSB - 1));
		if (!q)
			return n;
		i = (size_t)(q - p);
		if (!memcmp(q, psb_pattern, PT_SIZE_PSB))
			return i;
	}
	return n;
}

/* Runs the packets that start in @p[0..limit) (they may extend up to
 * @p[n]).  Returns the number of bytes consumed: less than @limit if a
 * packet is incomplete. */
static size_t run(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off)
{
	size_t i = 0;
	while (i < limit && !f->stopped) {
		if (btr_unlikely(!f->synced)) {
			size_t j = ptf_find_psb(p + i, n - i);
			if (j == n - i) {
				/* Keep up to 15 bytes: a PSB may straddle buffers. */
				size_t keep = n - i < 15 ? n - i : 15;
				return n - keep > i ? n - keep : i;
			}
			i += j;
			f->synced = 1;
		}
		f->pkt_off = off + i;
		uint8_t c = p[i];
		if (c == PT_OPC_PAD && btr_likely(!f->in_bbp)) {
			/* A run of PADs (hardware pads around PSB+ and at
			 * buffer ends: a third of the bytes of some traces) in
			 * one loop, not one packet() each.  (In a BBP block a
			 * PAD ends the block: packet_in_bbp.) */
			do
				i++;
			while (i < limit && p[i] == PT_OPC_PAD);
			continue;
		}
		if ((((c & PT_OPM_TNT8) == PT_OPC_TNT8 && c > PT_OPC_EXT) ||
		     (c == PT_OPC_EXT && i + PT_SIZE_TNT64 <= n && p[i + 1] == PT_EXT_TNT64) ||
		     ((c & PT_OPM_IP) == PT_OPC_TIP && (c >> PT_OPS_IPC) && !f->async_pending && !f->fup_status)) &&
		    f->en == EN_ON && !f->pend && !f->tq_cnt && !f->cb->insn && !f->intx &&
		    !f->run_ordered && !f->in_bbp) {
			/* TNT and TIP packets while the flow is known: walk
			 * straight from the packet bytes. */
			size_t used = i;
			int wr = ptf_walk_fast(f, p, n, limit, off, &used);
			if (btr_likely(used > i)) {
				i = used;
				if (wr < 0)
					ptf_gap(f, wr, f->ip);
				continue;
			}
		}
		int r = btr_unlikely(f->in_bbp) ? packet_in_bbp(f, p + i, n - i) : packet(f, p + i, n - i);
		if (btr_likely(r > 0)) {
			i += (size_t)r;
			continue;
		}
		if (r == 0)
			return i;
		/* Undecodable byte: a gap, then resync at the next PSB. */
		ptf_gap(f, -BTR_ERR_BAD_PACKET, f->ip);
		f->en = f->en == EN_OFF ? EN_OFF : EN_LOST;
		f->synced = 0;
		f->in_psb = 0;
		i++;
	}
	return i;
}

static int note_bad_packet(void *ctx, const struct btr_flow_event *e)
{
	if (e->type == BTR_FLOW_GAP && e->reason == -BTR_ERR_BAD_PACKET)
		*(int *)ctx = 1;
	return 0;
}

/* One packet through run() for tests/test_pt_lengths.c: handles the
 * packet at @p (@n bytes) as the decoder does, by packet() or the fast
 * walk, and returns its size, 0 if it is incomplete, -1 if it is bad. */
int ptf_packet(struct btr_ptflow *f, const uint8_t *p, size_t n)
{
	int bad = 0;
	const struct btr_ptflow_callbacks cb = { .event = note_bad_packet, .ctx = &bad };

	f->cb = &cb;
	f->synced = 1;
	f->stopped = 0;
	size_t used = run(f, p, n, 1, f->off);
	f->cb = NULL;
	return bad ? -1 : (int)used;
}

int btr_ptflow_decode(struct btr_ptflow *f, const uint8_t *buf, size_t size,
		      const struct btr_ptflow_callbacks *cb)
{
	if (!f || (!buf && size))
		return -BTR_ERR_INVAL;
	static const struct btr_ptflow_callbacks none;
	if (cb && cb->counts && ptf_counts_alloc(f) < 0)
		return -BTR_ERR_NOMEM;
	f->cb = cb ? cb : &none;
	f->stopped = 0;
	f->fold = cb && fold_wanted(cb);
	int (*ft)(void *, uint64_t, uint64_t, uint64_t) = cb && cb->fold_ok ? cb->fold_block : NULL;
	void *ftc = ft ? cb->ctx : NULL;
	if (btr_unlikely(ft != f->ft_fn || ftc != f->ft_ctx)) {
		/* The cached blocks' keep answers another predicate. */
		if (f->nblk)
			ptf_flush_blocks(f, 1);
		f->ft_fn = ft;
		f->ft_ctx = ftc;
	}
	ptf_take_image(f);
	if (btr_image_generation(f->img) != f->img_gen) {
		/* The image changed since the last call: links would
		 * otherwise still lead to blocks of the old code. */
		ptf_flush_blocks(f, 1);
		f->img_gen = btr_image_generation(f->img);
	}
	if (f->pending_trunc_gap) {
		f->pending_trunc_gap = 0;
		f->pkt_off = f->off;
		ptf_emit_event(f, BTR_FLOW_GAP, -BTR_ERR_TRUNCATED, 0, 0);
	}
	f->st.bytes += size;
	f->in_decode = 1;
	size_t i = 0;
	if (f->carry_len) {
		/* Complete the packet cut at the previous buffer's end: run
		 * the carried bytes plus the start of @buf until a packet
		 * boundary lies inside @buf. */
		uint8_t tmp[sizeof(f->carry) + 32];
		size_t take = size < 32 ? size : 32;
		memcpy(tmp, f->carry, f->carry_len);
		memcpy(tmp + f->carry_len, buf, take);
		size_t tn = f->carry_len + take;
		size_t used = run(f, tmp, tn, f->carry_len, f->off - f->carry_len);
		if (used < f->carry_len) {
			/* Still incomplete (a tiny buffer): keep collecting. */
			size_t rest = tn - used;
			if (rest <= sizeof(f->carry)) {
				memmove(f->carry, tmp + used, rest);
				f->carry_len = (unsigned)rest;
				f->off += size;
				ptf_flush_branches(f);
				if (f->cb->counts)
					ptf_flush_counts(f);
				f->in_decode = 0;
				return f->stopped ? 1 : 0;
			}
			ptf_gap(f, -BTR_ERR_TRUNCATED, f->ip);
			f->synced = 0;
			used = tn;
		}
		i = used - f->carry_len;
		f->carry_len = 0;
	}
	if (!f->stopped && i < size) {
		size_t u = run(f, buf + i, size - i, size - i, f->off + i);
		i += u;
		if (i < size && !f->stopped) {
			size_t rest = size - i;
			if (rest <= sizeof(f->carry)) {
				memcpy(f->carry, buf + i, rest);
				f->carry_len = (unsigned)rest;
			}
		}
	}
	f->off += size;
	/* Nothing stays buffered between calls, nor counted. */
	ptf_flush_branches(f);
	if (f->cb->counts)
		ptf_flush_counts(f);
	f->in_decode = 0;
	return f->stopped ? 1 : 0;
}

/* Resets decoder @f to a fresh state for a piece starting at stream
 * offset @pos: clears the part of the state a reset does not keep
 * (struct btr_ptflow, from reset_from on); the block cache, the image and
 * the configuration stay. */
void ptf_reset_for_piece(struct btr_ptflow *f, uint64_t pos)
{
	memset(f->reset_from, 0, sizeof(*f) - offsetof(struct btr_ptflow, reset_from));
	f->rs_nolink = NIL;
	f->off = pos;
}

/* Takes the image given by btr_ptflow_set_image.  Called only where no
 * walk holds a block: before a decode, and right after the ENABLE and
 * PAGING events (whose callbacks are where a per-CPU reader learns that
 * another process runs). */
void ptf_take_image(struct btr_ptflow *f)
{
	if (btr_likely(!f->next_img))
		return;
	if (f->next_img != f->img) {
		f->img = f->next_img;
		ptf_flush_blocks(f, 1);
		f->img_gen = btr_image_generation(f->img);
	}
	f->next_img = NULL;
}

int btr_ptflow_set_image(struct btr_ptflow *f, struct btr_image *img)
{
	if (!f || !img)
		return -BTR_ERR_INVAL;
	f->next_img = img;
	if (!f->in_decode)
		ptf_take_image(f);
	return 0;
}

void btr__ptflow_restart(struct btr_ptflow *f, uint64_t offset)
{
	struct btr_ptflow_stats st = f->st;
	uint64_t folded = f->folded;
	ptf_reset_for_piece(f, offset);
	f->st = st;
	f->folded = folded;
}

void btr_ptflow_reset(struct btr_ptflow *f, uint64_t offset)
{
	if (!f)
		return;
	int was_on = f->en != EN_OFF;
	struct btr_ptflow_stats st = f->st;
	ptf_reset_for_piece(f, offset);
	f->st = st;
	f->pending_trunc_gap = (uint8_t)was_on;
}

