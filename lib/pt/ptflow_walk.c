/* ptflow_walk.c - the flow decoder's block cache (basic blocks decoded
 * once into cache lines, linked to their successors) and the walks over
 * it: ptf_walk() for every goal, ptf_walk_fast() for the hot TNT/TIP path.  See
 * ptflow.c for the design and docs/pt-decode.md for the rules. */
#include <stdlib.h>
#include <string.h>

#include "ptflow_int.h"

/* Links start here: mode 0 never validates, so the hot loop needs no
 * NULL test. */
const struct blk btr_ptflow_blk_nil_;

/* Forgets every block (the array is full, or the image changed).  Links
 * into the old blocks stay harmless: they are validated by address and
 * mode, and a reused block is rebuilt with fresh links. */
void ptf_flush_blocks(struct btr_ptflow *f, int image_changed)
{
	size_t cap = (size_t)1 << f->cache_bits;
	/* The counters of cb->counts belong to the blocks: report them now. */
	if (f->nd) {
		if (f->cb && f->cb->counts) {
			ptf_flush_counts(f);
		} else {
			for (uint32_t k = 0; k < f->nd; k++)
				f->cnt[f->dirty[k]] = 0;
			f->nd = 0;
		}
	}
	if (image_changed && f->nblk_hi <= cap / 16) {
		/* A per-CPU trace changes image at every switch between
		 * processes: clearing the whole cache (5 MiB) each time
		 * would cost more than decoding.  Only the blocks written
		 * since the last full clear can be reached (by the index, a
		 * link or the return stack), and the index refers only to
		 * blocks below nblk: clear just those. */
		for (uint32_t i = 0; i < f->nblk; i++) {
			struct blk_ref *set = &f->idx[blk_set(f, f->blks[i].ip)];
			for (unsigned w = 0; w < WAYS; w++)
				if (set[w].ref == i + 1)
					memset(&set[w], 0, sizeof(set[w]));
		}
		memset(f->blks, 0, sizeof(*f->blks) * f->nblk_hi);
	} else {
		memset(f->idx, 0, sizeof(*f->idx) << f->cache_bits);
		/* A changed image also invalidates the blocks themselves (all
		 * of them: links and return-stack entries may still reach
		 * blocks left from before an earlier flush).  So do counters:
		 * a walk through such links would count on a block whose
		 * number a new block takes before the counters are reported. */
		if (image_changed)
			memset(f->blks, 0, sizeof(*f->blks) * f->nblk_hi);
		else if (f->cnt)
			for (uint32_t i = 0; i < f->nblk_hi; i++)
				f->blks[i].mode = 0;
	}
	if (image_changed) {
		f->nblk_hi = 0;
		/* The return stack's links pointed into those blocks and now
		 * read NULL (not NIL): detach them (the addresses stay). */
		for (unsigned i = 0; i < RETSTACK; i++)
			f->rsl[i] = &f->rs_nolink;
	}
	f->nblk = 0;
	f->cur = NIL;
}

static enum blk_class class_of(const struct btr_insn *in)
{
	switch (in->kind) {
	case BTR_KIND_JCC: case BTR_KIND_LOOP: case BTR_KIND_JRCXZ:
		return C_COND;
	case BTR_KIND_JMP:
		return C_JMP;
	case BTR_KIND_CALL:
		return C_CALL;
	case BTR_KIND_CALL_IND: case BTR_KIND_JMP_IND:
		return C_IND;
	case BTR_KIND_RET:
		return C_RET;
	case BTR_KIND_NONE:
		return C_NONE;
	default:
		return C_FAR;
	}
}

/* Decodes the block at @ip in the current mode into a new block and
 * indexes it.  Returns the block, or NULL with *@err set (-BTR_ERR_NOMAP,
 * -BTR_ERR_BAD_INSN) if not even the first instruction decodes. */
struct blk *ptf_build_blk(struct btr_ptflow *f, uint64_t ip, int *err)
{
	if (btr_unlikely(btr_image_generation(f->img) != f->img_gen)) {
		/* The image changed: every cached block may be stale. */
		ptf_flush_blocks(f, 1);
		f->img_gen = btr_image_generation(f->img);
	}
	if (btr_unlikely(f->nblk == (uint32_t)1 << f->cache_bits))
		ptf_flush_blocks(f, 0);
	uint32_t nb = f->nblk;
	struct blk *b = &f->blks[nb];
	struct blk_cold *cold = &f->cold[nb];
	uint8_t *lens = f->lens + (size_t)nb * BLK_MAXI;
	uint64_t cur = ip;
	unsigned n = 0;
	struct btr_insn in, last = { 0 };
	enum blk_class cls = C_NONE;
	b->mode = 0;  /* invalid while we fill it */
	for (;;) {
		const uint8_t *p;
		size_t avail;
		uint8_t tmp[16];
		int r = btr_image_map(f->img, cur, &p, &avail);
		if (r == 0 && avail < 15) {
			/* An instruction may straddle two adjacent sections. */
			memcpy(tmp, p, avail);
			int r2 = btr_image_read(f->img, cur + avail, tmp + avail, 15 - avail);
			if (r2 > 0)
				avail += (size_t)r2;
			p = tmp;
		}
		if (r == 0)
			r = btr_insn_decode(p, avail, cur, (enum btr_exec_mode)f->mode, &in);
		if (r < 0) {
			if (n == 0) {
				*err = r == -BTR_ERR_NOMAP ? r : -BTR_ERR_BAD_INSN;
				return NULL;
			}
			/* End the block before the bad instruction; the next
			 * lookup reports the error at the right place. */
			cls = C_NONE;
			break;
		}
		last = in;
		lens[n++] = in.len;
		cls = class_of(&in);
		cur += in.len;
		/* A block also ends after MOV CR3 (still C_NONE for the
		 * walks): a PIP, or a TIP.PGD without IP, binds to it. */
		if (cls != C_NONE || n == BLK_MAXI || (in.flags & BTR_INSN_MOV_CR3))
			break;
	}
	f->st.blocks_decoded++;
	b->ip = ip;
	b->ninsn = (uint8_t)n;
	b->len = (uint16_t)(cur - ip);
	b->kind = cls == C_NONE ? BTR_KIND_NONE : last.kind;
	cold->end_flags = last.flags;
	cold->end_imm = last.imm;
	b->to[0] = cur;
	b->to[1] = (last.flags & BTR_INSN_DIRECT) ? last.target : 0;
	b->end_ip = cur - lens[n - 1];
	/* The record tails of the direct branches (flags other than
	 * INSNS/TSC/CYCLES, which depend on the walk, and the kind). */
	b->tail[0] = (uint32_t)KFLAGS(b->end_ip, b->to[0]) | (uint32_t)b->kind << 16;
	b->tail[1] = (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, b->to[1])) | (uint32_t)b->kind << 16;
	b->cls = (uint8_t)cls;
	b->jcc = cls == C_COND && b->kind == BTR_KIND_JCC;
	/* What omode 4 may leave out: asked once here (a decode call with
	 * another cb->fold_block empties the cache first). */
	b->keep = KEEP_TK;
	if (f->ft_fn) {
		int r = f->ft_fn(f->ft_ctx, ip, b->end_ip, (b->jcc || cls == C_JMP) ? b->to[1] : 0);
		b->keep = !(r & BTR_FOLD_NOT_TAKEN) ? KEEP_NT | KEEP_TK : (r & BTR_FOLD_TAKEN) ? 0 : KEEP_TK;
		if (!b->jcc && cls != C_JMP)
			b->keep |= KEEP_TK;   /* (a CALL's record always goes out) */
	}
	b->next[0] = b->next[1] = NIL;
	b->mode = (uint8_t)(f->mode + 1);
	f->nblk = nb + 1;
	if (f->nblk > f->nblk_hi)
		f->nblk_hi = f->nblk;

	/* Index it: an empty way, else the oldest block (lowest number). */
	struct blk_ref *set = &f->idx[blk_set(f, ip)], *v = &set[0];
	for (unsigned w = 0; w < WAYS; w++) {
		if (!set[w].ref) {
			v = &set[w];
			break;
		}
		if (set[w].ref < v->ref)
			v = &set[w];
	}
	v->ip = ip;
	v->ref = nb + 1;
	v->mode = b->mode;
	return b;
}


/* ---- the walker ------------------------------------------------------- */


/* Does a TIP.PGD (target @x, or @suppressed) bind to the branch ending @b?
 * The rules of libipt's pt_insn_at_disabled_event: with an IP it binds to
 * any branch except a direct one going elsewhere; without an IP only to
 * far transfers and MOV CR3 - or, erratum SKL014 ("Intel PT TIP.PGD May
 * Not Have Target IP Payload": a direct unconditional branch that clears
 * FilterEn), to the first direct JMP/CALL whose target lies outside the
 * IP filter ranges; one whose target is inside them did not disable
 * tracing and the walk follows it (libipt's block decoder,
 * pt_blk_proceed_skl014).  Without filter ranges nothing leaves them. */
static int outside_filter(const struct btr_ptflow *f, uint64_t ip)
{
	for (unsigned i = 0; i < f->cfg.n_ip_filter; i++)
		if (ip >= f->cfg.ip_filter[i][0] && ip <= f->cfg.ip_filter[i][1])
			return 0;
	return f->cfg.n_ip_filter > 0;
}

static inline int ends_mov_cr3(const struct btr_ptflow *f, const struct blk *b)
{
	return b->cls == C_NONE && b->ninsn && (f->cold[b - f->blks].end_flags & BTR_INSN_MOV_CR3);
}

static int pgd_binds(const struct btr_ptflow *f, const struct blk *b, uint64_t x, int suppressed)
{
	if (b->cls == C_NONE)
		return suppressed && ends_mov_cr3(f, b);  /* CR3 filtering: context switch */
	if (suppressed) {
		if (b->cls == C_FAR)
			return 1;
		return f->er.skl014 && (b->cls == C_JMP || b->cls == C_CALL) && outside_filter(f, b->to[1]);
	}
	if ((b->cls == C_JMP || b->cls == C_CALL) && b->to[1] != x)
		return 0;
	return 1;
}

/* Walks from f->ip towards @goal.  Returns 1 when the goal was reached
 * (for G_TIP/G_PGD: the block ending in the bound branch is in *@endp,
 * executed), 0 when G_TNT ran out of bits (or stopped at a branch that
 * needs a TIP: f->pend), or a negative error (caller reports the gap). */
int ptf_walk(struct btr_ptflow *f, enum goal goal, uint64_t x, int suppressed, struct blk **endp)
{
	int err = 0;
	unsigned guard = 0;
	struct blk *b = lookup(f, f->ip, &err);
	const int retcomp = !f->cfg.no_retcomp;

	for (;;) {
		if (btr_unlikely(!b)) {
			/* no code with no bit left: see NOMAP_LATER; an
			 * event bound where the flow is (its FUP's IP)
			 * needs no code there: no instruction of it ran */
			if (err == -BTR_ERR_NOMAP && goal == G_FUP && x == f->ip)
				return 1;
			return err == -BTR_ERR_NOMAP && goal == G_TNT && !f->tnt_total ? 0 : err;
		}
		if (btr_unlikely(f->stopped))
			return 0;
		if (goal == G_TNT) {
			if (!f->tnt_total)
				return 0;
		} else if (goal == G_FUP && x >= b->ip && x <= END_IP(b)) {
			/* Stop before @x inside this block. */
			const uint8_t *lens = f->lens + (size_t)(b - f->blks) * BLK_MAXI;
			uint64_t a = b->ip;
			unsigned i = 0;
			while (a < x && i < b->ninsn)
				a += lens[i++];
			if (a != x)
				return -BTR_ERR_BAD_CONTEXT;
			f->st.insns += i;
			f->since += i;
			if (f->cb && f->cb->insn)
				ptf_emit_insns(f, b, i);
			f->ip = x;
			return 1;
		}
		if (btr_unlikely(++guard > WALK_LIMIT))
			return -BTR_ERR_BAD_CONTEXT;

		switch (b->cls) {
		case C_NONE:
			if (btr_unlikely(goal >= G_PGD) && ends_mov_cr3(f, b)) {
				if (goal == G_PGD && pgd_binds(f, b, x, suppressed))
					goto bind;
				if (goal == G_PIP) {
					exec_blk(f, b);
					f->ip = NEXT(b);
					return 1;
				}
			}
			exec_blk(f, b);
			f->ip = NEXT(b);
			/* KEEP_TAINT: a block without a branch that
			 * cb->fold_block lets nothing go of (it crosses into
			 * another function, say) passes that on to the block
			 * after it: no record shows the crossing, so the next
			 * branch must go out */
			unsigned taint = b->keep & KEEP_NT;
			b = succ(f, b, 0, NEXT(b), &err);
			if (taint && b)
				b->keep = KEEP_NT | KEEP_TK;
			continue;
		case C_COND:
			if (!f->tnt_total) {
				if (goal == G_PGD && pgd_binds(f, b, x, suppressed))
					goto bind;
				if (goal == G_PIP)
					return 0;   /* unbound: stop before the branch */
				goto contra;
			}
			guard = 0;
			exec_blk(f, b);
			if (tnt_pop(f)) {
				emit_branch(f, END_IP(b), b->to[1], b->kind, BTR_BF_TAKEN);
				f->ip = b->to[1];
				b = succ(f, b, 1, b->to[1], &err);
			} else {
				emit_branch(f, END_IP(b), NEXT(b), b->kind, 0);
				f->ip = NEXT(b);
				b = succ(f, b, 0, NEXT(b), &err);
			}
			continue;
		case C_JMP:
		case C_CALL:
			if (goal == G_PGD && pgd_binds(f, b, x, suppressed))
				goto bind;
			exec_blk(f, b);
			/* A call to the next instruction (PIC "call; pop") is not
			 * pushed: the hardware does not expect its RET either. */
			if (b->cls == C_CALL && b->to[1] != NEXT(b))
				rs_push(f, NEXT(b), &b->next[0]);
			emit_branch(f, END_IP(b), b->to[1], b->kind, BTR_BF_TAKEN);
			f->ip = b->to[1];
			b = succ(f, b, 1, b->to[1], &err);
			continue;
		case C_RET:
			if (retcomp && f->rs_n && f->tnt_total) {
				/* Compressed return: a taken bit. */
				guard = 0;
				exec_blk(f, b);
				if (!tnt_pop(f))
					return -BTR_ERR_BAD_CONTEXT;
				uint64_t to = rs_pop(f);
				emit_branch(f, END_IP(b), to, b->kind, BTR_BF_TAKEN);
				f->ip = to;
				b = lookup(f, to, &err);
				continue;
			}
			if (retcomp && f->tnt_total) {
				/* A bit for a RET whose CALL the decoder did not
				 * see (made before a gap; the hardware's stack
				 * lives until the next PSB): a compressed return
				 * to an unknown address.  libipt stops there too
				 * (pte_retstack_empty); taking the bit for a
				 * deferred TIP would bind the return to a later
				 * branch's target. */
				exec_blk(f, b);
				f->ip = END_IP(b);
				return -BTR_ERR_NOSYNC;
			}
			/* needs a TIP */
			__attribute__((fallthrough));
		case C_IND:
		case C_FAR:
			if (goal == G_TIP)
				goto bind;
			if (goal == G_PIP)
				return 0;   /* the PIP is the far transfer's (its TIP follows) */
			if (goal == G_PGD) {
				if (pgd_binds(f, b, x, suppressed))
					goto bind;
				goto contra;
			}
			if (goal == G_TNT) {
				/* Bits left after an indirect branch: the hardware
				 * deferred its TIP (SDM "Deferred TIPs"). */
				exec_blk(f, b);
				if (b->cls == C_IND && b->kind == BTR_KIND_CALL_IND)
					rs_push(f, NEXT(b), &b->next[0]);
				ptf_set_pend(f, b);
				return 0;
			}
			goto contra;
		}
	}
contra:
	/* The trace contradicts the outcome of the branch ending @b, not
	 * that execution reached it: its block did execute (report it, as
	 * libipt reports the instruction its query failed at). */
	exec_blk(f, b);
	f->ip = END_IP(b);
	return -BTR_ERR_BAD_CONTEXT;
bind:
	exec_blk(f, b);
	if (b->kind == BTR_KIND_CALL_IND || (b->cls == C_CALL && b->to[1] != NEXT(b)))
		rs_push(f, NEXT(b), &b->next[0]);
	*endp = b;
	return 1;
}


/* The hot path: G_TNT without an instruction callback.  The same rules
 * as ptf_walk(), with the TNT word, the counters and the output in
 * registers (a callback is opaque, so through @f every field would be
 * reloaded after each call).  The bits come from the TNT queue first,
 * then, if @p is not NULL, straight from the TNT packets (and PADs)
 * that start at @p[*pos..limit) (they may extend to @p[n]), so a run of
 * TNT packets is one walk.  *@pos advances past the packets consumed
 * (whole packets: bits left when the walk stops at an indirect branch
 * are queued), f->pkt_off becomes the stream offset (@off + index) of
 * the last one.  Returns like ptf_walk(). */
static inline __attribute__((always_inline)) int
walk_fast_t(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off, size_t *pos,
	    const int omode)
{
	int err = 0, ret = 0;
	const uint8_t m1 = (uint8_t)(f->mode + 1);
	const int retcomp = !f->cfg.no_retcomp;
	/* Counters live in registers: an increment through memory on every
	 * edge would be a loop-carried store-to-load chain.  Only JCC (the
	 * common kind) is counted here, rarer kinds go to f->st directly;
	 * the instruction count since the last branch is insns - mark. */
	uint64_t insns = f->st.insns, mark = f->st.insns - f->since;
	/* JCC branches are not counted one by one either: each consumes one
	 * TNT bit, so they are the bits consumed (loaded - nb) minus the
	 * other bit consumers, counted in f->fw_nonjcc. */
	uint64_t loaded = 0, gmark = 0;
	f->fw_nonjcc = 0;
	unsigned h = f->tq_head, qn = f->tq_cnt;
	uint64_t bits = 0;
	unsigned nb = 0, guard = 0;
	size_t i = *pos, pkt = *pos;
	struct blk *b = NULL;
	uint64_t ip = f->ip;

	int (*const bcb)(void *, const struct btr_branch *) = f->cb->branch;
	void *const bctx = f->cb->ctx;
	struct btr_branch *const ob = f->bbuf;
	unsigned on = f->bn;
	/* Timing packets are not processed during a walk: the timestamp is
	 * the same for every branch of this call.  A CYC count goes to the
	 * first branch. */
	const uint64_t tsc = f->tsc;
	const uint32_t tid = f->cfg.tid;
	/* The flags every record of this walk has, and BTR_BF_CYCLES for the
	 * first one.  The callback mode keeps them as one value (registers
	 * are scarce around a call: 8% faster there); the batch mode keeps
	 * them apart (GCC then knows cycfl is 0 after the first record: 20%
	 * faster there). */
	const uint32_t tscfl = BTR_BF_INSNS | (tsc ? BTR_BF_TSC : 0);
	uint32_t fl = tscfl, cycfl = 0;
	uint32_t cyc = 0;
	uint64_t cyc_saved = f->cyc_acc;
	if (f->have_cyc && omode) {
		cyc = f->cyc_acc > UINT32_MAX ? UINT32_MAX : (uint32_t)f->cyc_acc;
		fl |= BTR_BF_CYCLES;
		cycfl = BTR_BF_CYCLES;
		f->have_cyc = 0;
		f->cyc_acc = 0;
	}
	struct btr_branch br;
	br.tid = tid;
	br.tsc = tsc;
	br.reserved = 0;
	br.pid = f->cfg.pid;
	br.cycles = cyc;
	/* omode 3 (cb->counts): the start of the current straight-line run,
	 * and the blocks' counters */
	uint64_t rstart = f->rstart;
	uint64_t *const cnt = f->cnt, *const xt = f->xt;
	const struct blk *const blks = f->blks;
	/* omode 4 (batches, cb->fold_ok said yes, no timing, no TSX): a
	 * not-taken JCC is written to the batch but the slot is not kept
	 * (branch-free: the next record overwrites it and its instructions
	 * go to that record); the last one left out of a walk (fpend) is
	 * kept at its end */
	const int batch = omode == 2 || omode == 4;
	unsigned fpend = 0;
	uint64_t nfold = 0;
	if (batch && btr_unlikely(f->bbuf_tsc != tsc)) {
		/* The records still buffered keep their time. */
		f->bbuf_tsc = tsc;
		ptf_bbuf_fill(f, on);
		f->bbuf_dirty = 1;
	}

	/* Counts a branch that consumed no TNT bit (@bit 0) or one that is
	 * not a JCC (@bit 1). */
#define FAST_COUNT(kind_, bit_)                                                  \
	do {                                                                     \
		f->st.by_kind[kind_]++;                                          \
		f->st.branches++;                                                \
		f->fw_nonjcc += (bit_);                                          \
	} while (0)
#define FAST_EMIT(from_, to_, kind_, tail_)                                      \
	do {                                                                     \
		if (batch) {                                                     \
			struct btr_branch *o_ = &ob[on];                         \
			uint32_t t_ = (tail_) | tscfl | cycfl;                   \
			o_->from = (from_);                                      \
			o_->to = (to_);                                          \
			o_->insns = insns - mark;                                \
			memcpy(&o_->flags, &t_, 4);                              \
			if (btr_unlikely(cycfl)) {                               \
				o_->cycles = cyc;                                \
				f->bbuf_dirty = 1;                               \
			}                                                        \
			cyc = cycfl = 0;                                         \
			fpend = 0;                                               \
			if (btr_unlikely(++on == BTR_PTFLOW_BATCH)) {            \
				f->bn = on;                                      \
				ptf_flush_branches(f);                               \
				on = 0;                                          \
				if (f->stopped) {                                \
					mark = insns;                            \
					goto out;                                \
				}                                                \
			}                                                        \
		} else if (omode == 3) {                                         \
			uint32_t t_ = (tail_) | fl;                              \
			br.from = (from_);                                       \
			br.to = (to_);                                           \
			br.insns = insns - mark;                                 \
			memcpy(&br.flags, &t_, 4);                               \
			fl &= ~(uint32_t)BTR_BF_CYCLES;                          \
			int r_ = ptf_count_one(f, rstart, &br);                  \
			br.cycles = 0;                                           \
			rstart = (to_);                                          \
			if (btr_unlikely(r_)) {                                  \
				mark = insns;                                    \
				goto out;                                        \
			}                                                        \
		} else if (omode == 1) {                                         \
			uint32_t t_ = (tail_) | fl;                              \
			br.from = (from_);                                       \
			br.to = (to_);                                           \
			br.insns = insns - mark;                                 \
			memcpy(&br.flags, &t_, 4); /* flags, kind, reserved */   \
			fl &= ~(uint32_t)BTR_BF_CYCLES;                          \
			int r_ = bcb(bctx, &br);                                 \
			br.cycles = 0;                                           \
			if (btr_unlikely(r_)) {                                  \
				f->stopped = 1;                                  \
				mark = insns;                                    \
				goto out;                                        \
			}                                                        \
		}                                                                \
		mark = insns;                                                    \
	} while (0)
	/* The branch of @b to its link @which (target @to_): with omode 3,
	 * when the run started at @b, one more on the block's counter;
	 * otherwise a record. */
#define FAST_AGG(which_, to_, kind_, tail_)                                      \
	do {                                                                     \
		if (omode == 3 && btr_likely(rstart == b->ip && insns - mark == b->ninsn)) { \
			size_t k_ = (size_t)(b - blks) * 2 + (which_);           \
			if (!cnt[k_]++)                                          \
				f->dirty[f->nd++] = (uint32_t)k_;                \
			rstart = (to_);                                          \
			mark = insns;                                            \
		} else {                                                         \
			FAST_EMIT(b->end_ip, (to_), (kind_), (tail_));           \
		}                                                                \
	} while (0)
	/* The indirect branch (C_IND, C_RET) ending @b to @to_: with omode 3,
	 * when the run started at @b and the block's second counter is free
	 * or counts this target (f->xt), one more on it; otherwise a record.
	 * (A return mostly goes back to one call site, an indirect call
	 * mostly to one function.) */
#define FAST_AGGX(to_, tail_)                                                    \
	do {                                                                     \
		uint64_t x_ = (to_);                                             \
		size_t i_ = (size_t)(b - blks);                                  \
		if (omode == 3 && btr_likely(rstart == b->ip && insns - mark == b->ninsn) && \
		    (cnt[2 * i_ + 1] ? xt[i_] == x_ : (xt[i_] = x_, f->dirty[f->nd++] = (uint32_t)(2 * i_ + 1), 1))) { \
			cnt[2 * i_ + 1]++;                                       \
			rstart = x_;                                             \
			mark = insns;                                            \
		} else {                                                         \
			FAST_EMIT(b->end_ip, x_, b->kind, (tail_));              \
		}                                                                \
	} while (0)
	/* The direct JMP or CALL ending @b (to b->to[1]): with omode 4 and
	 * no KEEP_TK (a JMP cb->fold_block lets go), written to the
	 * batch but not kept, as a not-taken JCC; otherwise FAST_AGG. */
#define FAST_AGGJ()                                                              \
	do {                                                                     \
		if (omode == 4 && !(b->keep & KEEP_TK) && btr_likely(!cycfl)) {  \
			struct btr_branch *o_ = &ob[on];                         \
			uint32_t t_ = b->tail[1] | tscfl;                        \
			o_->from = b->end_ip;                                    \
			o_->to = b->to[1];                                       \
			o_->insns = insns - mark;                                \
			memcpy(&o_->flags, &t_, 4);                              \
			fpend = 1;                                               \
			nfold++;                                                 \
		} else {                                                         \
			FAST_AGG(1, b->to[1], b->kind, b->tail[1]);              \
		}                                                                \
	} while (0)
	/* Follows link @which of @b to @to (lookup on a miss).  In TIP mode
	 * (walking to the branch a TIP resolves, packet not yet consumed) a
	 * failure leaves the TIP to on_tip, which reports it. */
#define FAST_NEXT(which, to_)                                                    \
	do {                                                                     \
		struct blk *s_ = b->next[which];                                 \
		uint64_t t_ = (to_);                                             \
		if (btr_likely(s_->ip == t_ && s_->mode == m1)) {                \
			b = s_;                                                  \
		} else {                                                         \
			ip = t_;                                                 \
			s_ = lookup(f, ip, &err);                                \
			if (!s_) {                                               \
				b = NULL;                                        \
				ret = tipmode || NOMAP_LATER(err) ? 0 : err;     \
				goto out;                                        \
			}                                                        \
			b->next[which] = s_;                                     \
			b = s_;                                                  \
		}                                                                \
	} while (0)
	/* No code at the next block, and no bit left to take there: stop
	 * before it rather than fail.  Code without a file is added to the
	 * image when it first runs (a CODE record between two data records:
	 * docs/format.md), so the next packet's walk may find it; if not,
	 * that walk reports the gap. */
#define NOMAP_LATER(err_) ((err_) == -BTR_ERR_NOMAP && !nb && !qn)
	/* The block at ip when none is at hand: the candidate (the walk's
	 * last stop, or the last target of the indirect branch just
	 * resolved), else a lookup. */
	/* Direct blocks walked since the last TNT bit (a loop without trace
	 * is an error). */
#define FAST_GUARD(fail_)                                                        \
	do {                                                                     \
		if (loaded - nb != gmark) {                                      \
			gmark = loaded - nb;                                     \
			guard = 0;                                               \
		}                                                                \
		if (btr_unlikely(++guard > WALK_LIMIT)) {                        \
			fail_;                                                   \
			goto out;                                                \
		}                                                                \
	} while (0)
#define FAST_ACQUIRE()                                                           \
	do {                                                                     \
		b = cand;                                                        \
		if (btr_unlikely(b->ip != ip || b->mode != m1)) {                \
			b = lookup(f, ip, &err);                                 \
			if (!b) {                                                \
				ret = tipmode ? 0 : err;                         \
				goto out;                                        \
			}                                                        \
			if (lk)                                                  \
				*lk = b;                                         \
		}                                                                \
		lk = NULL;                                                       \
	} while (0)

	struct blk *cand = f->cur, **lk = NULL;
	int tipmode = 0;
	for (;;) {
		if (!nb) {
			/* Next TNT word: the queue, then the stream. */
			if (qn) {
				bits = f->tq_bits[h];
				nb = f->tq_n[h];
				loaded += nb;
				h = (h + 1) % TNTQ;
				qn--;
			} else if (p) {
				for (;;) {
					if (i >= limit)
						goto out;
					uint8_t c = p[i];
					if (c == PT_OPC_PAD) {
						i += PT_SIZE_PAD;
						continue;
					}
					if ((c & PT_OPM_TNT8) == PT_OPC_TNT8 && c != PT_OPC_EXT) {
						/* short TNT: stop bit, up to 6 bits, oldest highest */
						unsigned hi = 31u - (unsigned)__builtin_clz(c);
						bits = (uint64_t)(c >> 1) & ((1u << (hi - 1)) - 1);
						nb = hi - 1;
						loaded += nb;
						pkt = i;
						i += PT_SIZE_TNT8;
						break;
					}
					if (c == PT_OPC_EXT && i + PT_SIZE_TNT64 <= n && p[i + 1] == PT_EXT_TNT64) {
						/* long TNT: 48-bit payload with stop bit */
						uint64_t v = rd_le(p + i + 2, 6);
						pkt = i;
						i += PT_SIZE_TNT64;
						if (!v)
							continue;
						unsigned hi = 63u - (unsigned)__builtin_clzll(v);
						bits = v & ((1ull << hi) - 1);
						nb = hi;
						loaded += nb;
						if (nb)
							break;
						continue;
					}
					if ((c & PT_OPM_IP) == PT_OPC_TIP && (c >> PT_OPS_IPC) && ipc_len[c >> PT_OPS_IPC] != 0xff &&
					    i + PT_SIZE_IP0 + ipc_len[c >> PT_OPS_IPC] <= n && !f->async_pending &&
					    !f->have_next_mode) {
						/* TIP (not suppressed, not part of an
						 * asynchronous transfer, no mode change):
						 * walk to the indirect branch it resolves,
						 * as ptf_on_tip() would. */
						unsigned ipc = c >> PT_OPS_IPC;
						uint64_t tip = ip_of(f->last_ip, ipc, p + i + 1);
						tipmode = 1;
						guard = 0;   /* on_tip's walk would start afresh */
						gmark = loaded - nb;
						if (!b)
							FAST_ACQUIRE();
						for (;;) {
							unsigned cls = b->cls;
							if (cls == C_NONE) {
								FAST_GUARD((void)0);
								insns += b->ninsn;
								unsigned nt_ = b->keep & KEEP_NT;
								FAST_NEXT(0, b->to[0]);
								if (omode == 4 && btr_unlikely(nt_))
									b->keep = KEEP_NT | KEEP_TK;   /* see KEEP_TAINT */
							} else if (cls == C_JMP || cls == C_CALL) {
								FAST_GUARD((void)0);
								insns += b->ninsn;
								if (cls == C_CALL && b->to[1] != b->to[0])
									rs_push(f, b->to[0], &b->next[0]);
								FAST_COUNT(b->kind, 0);
								FAST_AGGJ();
								FAST_NEXT(1, b->to[1]);
							} else if (cls == C_COND) {
								goto out;   /* on_tip reports it */
							} else {
								break;
							}
						}
						/* bound: IND, RET or FAR */
						tipmode = 0;
						guard = 0;
						gmark = loaded - nb;
						insns += b->ninsn;
						if (b->kind == BTR_KIND_CALL_IND)
							rs_push(f, b->to[0], &b->next[0]);
						f->last_ip = tip;
						pkt = i;
						i += PT_SIZE_IP0 + ipc_len[ipc];
						FAST_COUNT(b->kind, 0);
						if (b->cls == C_FAR)
							FAST_EMIT(b->end_ip, tip, b->kind,
								  (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, tip)) |
									  (uint32_t)b->kind << 16);
						else
							FAST_AGGX(tip, (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, tip)) |
									       (uint32_t)b->kind << 16);
						/* The target block is looked up when it
						 * is needed (a failure belongs to that
						 * packet); next[1] of an indirect branch
						 * remembers its last target. */
						ip = tip;
						cand = b->next[1];
						lk = &b->next[1];
						if (b->kind == BTR_KIND_RET && f->rs_n && f->rs[f->rs_top] == tip) {
							/* A return to its call: the block
							 * after the call is remembered there
							 * (the last target of the RET is a
							 * poor guess for a function called
							 * from many places).  Without return
							 * compression the stack has no other
							 * use and is popped, else (libipt:
							 * an uncompressed RET leaves it) only
							 * read. */
							lk = f->rsl[f->rs_top];
							cand = *lk;
							if (!retcomp)
								(void)rs_pop(f);
						}
						b = NULL;
						continue;
					}
					goto out;
				}
			} else {
				goto out;
			}
		}
		if (btr_unlikely(!b))
			FAST_ACQUIRE();
		/* JCCs dominate: an inner loop for them, tested before the
		 * switch (one well-predicted compare instead of a jump table). */
		if (btr_likely(b->jcc)) {
			do {
				/* Branch-free on the bit: the TNT word is in a
				 * register long before the walk needs it, while a
				 * branch on it mispredicts as often as the traced
				 * program's did.  (Loading both links and selecting
				 * one with a cmov shortens the dependency chain but
				 * measured slower: the loop is bound by its
				 * instruction count.) */
				unsigned t = (unsigned)(bits >> --nb) & 1;
				insns += b->ninsn;
				uint64_t to = b->to[t];
				struct blk *s = b->next[t];
				/* The link is checked before the record goes out,
				 * so that with a callback only the successor has
				 * to survive the call. */
				if (omode == 4 && btr_likely(!cycfl)) {
					struct btr_branch *o_ = &ob[on];
					uint32_t t_ = b->tail[t] | tscfl;
					o_->from = b->end_ip;
					o_->to = to;
					o_->insns = insns - mark;
					memcpy(&o_->flags, &t_, 4);
					unsigned k = (b->keep >> t) & 1u;   /* KEEP_* */
					mark += (insns - mark) & (0 - (uint64_t)k);
					on += k;
					fpend = k ^ 1;
					nfold += k ^ 1;
					if (btr_unlikely(on == BTR_PTFLOW_BATCH)) {
						f->bn = on;
						ptf_flush_branches(f);
						on = 0;
						if (f->stopped) {
							mark = insns;
							goto out;
						}
					}
					if (btr_likely(s->ip == to && s->mode == m1))
						b = s;
					else
						FAST_NEXT(t, to);
				} else if (btr_likely(s->ip == to && s->mode == m1)) {
					FAST_AGG(t, to, BTR_KIND_JCC, b->tail[t]);
					b = s;
				} else {
					FAST_AGG(t, to, BTR_KIND_JCC, b->tail[t]);
					FAST_NEXT(t, to);
				}
			} while (nb && b->jcc);
			continue;
		}
		switch (b->cls) {
		case C_COND: {
			/* LOOP, JRCXZ */
			unsigned t = (unsigned)(bits >> --nb) & 1;
			insns += b->ninsn;
			uint64_t to = b->to[t];
			FAST_COUNT(b->kind, 1);
			FAST_AGG(t, to, b->kind, b->tail[t]);
			FAST_NEXT(t, to);
			continue;
		}
		case C_NONE:
			FAST_GUARD(ret = -BTR_ERR_BAD_CONTEXT);
			insns += b->ninsn;
			if (omode == 4 && btr_unlikely(b->keep & KEEP_NT)) {
				FAST_NEXT(0, b->to[0]);
				b->keep = KEEP_NT | KEEP_TK;   /* see KEEP_TAINT */
				continue;
			}
			FAST_NEXT(0, b->to[0]);
			continue;
		case C_JMP:
		case C_CALL:
			FAST_GUARD(ret = -BTR_ERR_BAD_CONTEXT);
			insns += b->ninsn;
			/* A call to the next instruction (PIC "call; pop") is not
			 * pushed: the hardware does not expect its RET either. */
			if (b->cls == C_CALL && b->to[1] != b->to[0])
				rs_push(f, b->to[0], &b->next[0]);
			FAST_COUNT(b->kind, 0);
			FAST_AGGJ();
			FAST_NEXT(1, b->to[1]);
			continue;
		case C_RET:
			if (retcomp && f->rs_n) {
				/* Compressed return: a taken bit. */
				insns += b->ninsn;
				f->fw_nonjcc++;   /* the bit, JCC or not */
				if (!((bits >> --nb) & 1)) {
					ret = -BTR_ERR_BAD_CONTEXT;
					goto out;
				}
				struct blk **lnk = f->rsl[f->rs_top];
				uint64_t to = rs_pop(f);
				FAST_COUNT(b->kind, 0);
				FAST_AGGX(to, (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, to)) | (uint32_t)b->kind << 16);
				b = *lnk;
				if (btr_unlikely(b->ip != to || b->mode != m1)) {
					ip = to;
					b = lookup(f, to, &err);
					if (!b) {
						ret = NOMAP_LATER(err) ? 0 : err;
						goto out;
					}
					*lnk = b;
				}
				continue;
			}
			if (retcomp) {
				/* a compressed return with an empty stack (see
				 * ptf_walk): its block ran, the flow ends at the RET */
				insns += b->ninsn;
				ip = b->end_ip;
				b = NULL;
				ret = -BTR_ERR_NOSYNC;
				goto out;
			}
			__attribute__((fallthrough));
		default:
			/* An indirect branch with bits left: the hardware
			 * deferred its TIP (SDM "Deferred TIPs"). */
			insns += b->ninsn;
			if (b->kind == BTR_KIND_CALL_IND)
				rs_push(f, b->to[0], &b->next[0]);
			ptf_set_pend(f, b);
			ip = b->ip;
			b = NULL;
			goto out;
		}
	}
out:
	if (omode == 4 && fpend) {
		/* the last not-taken JCC left out goes out after all (what
		 * follows it may be an event): it is in its slot */
		mark += ob[on].insns;
		nfold--;
		if (++on == BTR_PTFLOW_BATCH) {
			f->bn = on;
			ptf_flush_branches(f);
			on = 0;
		}
	}
	if (omode == 4)
		f->folded += nfold;
	/* write the registers back */
	f->ip = b ? b->ip : ip;
	f->cur = b ? b : cand;
	f->since = insns - mark;
	f->st.insns = insns;
	uint64_t njcc = loaded - nb - f->fw_nonjcc;
	f->st.branches += njcc;
	f->st.by_kind[BTR_KIND_JCC] += njcc;
	if (batch)
		f->bn = on;
	if (omode == 3)
		f->rstart = rstart;
	if (omode == 1 ? (fl & BTR_BF_CYCLES) : cycfl) {
		/* no branch took the CYC count */
		f->have_cyc = 1;
		f->cyc_acc = cyc_saved;
	}
	/* Bits left (a deferred TIP, an error, a stop): the current word
	 * goes back to the head of the queue. */
	if (nb) {
		h = (h + TNTQ - 1) % TNTQ;
		f->tq_bits[h] = bits & ((1ull << nb) - 1);
		f->tq_n[h] = (uint8_t)nb;
		qn++;
	}
	f->tq_head = qn ? h : 0;
	f->tq_cnt = qn;
	unsigned total = 0;
	for (unsigned k = 0; k < qn; k++)
		total += f->tq_n[(h + k) % TNTQ];
	f->tnt_total = total;
	if (p)
		f->pkt_off = off + pkt;
	*pos = i;
	return ret;
#undef FAST_EMIT
#undef FAST_AGG
#undef FAST_AGGX
#undef FAST_AGGJ
#undef FAST_NEXT
#undef FAST_ACQUIRE
#undef FAST_GUARD
#undef FAST_COUNT
#undef NOMAP_LATER
}

/* walk_fast_t specialized by output (0 counts only, 1 per-branch
 * callback, 2 batches, 3 counts, 4 batches leaving out not-taken JCCs):
 * fewer live values in the hot loop. */
int ptf_walk_fast(struct btr_ptflow *f, const uint8_t *p, size_t n, size_t limit, uint64_t off,
		     size_t *pos)
{
	if (f->cb->counts)
		return walk_fast_t(f, p, n, limit, off, pos, 3);
	if (f->cb->branches && f->fold && !f->tsc && !f->intx)
		return walk_fast_t(f, p, n, limit, off, pos, 4);
	if (f->cb->branches)
		return walk_fast_t(f, p, n, limit, off, pos, 2);
	if (f->cb->branch)
		return walk_fast_t(f, p, n, limit, off, pos, 1);
	return walk_fast_t(f, p, n, limit, off, pos, 0);
}

