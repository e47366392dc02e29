/* ptflow_out.c - the flow decoder's output of the walks: batched branch
 * records and reported instructions, delivered to the callbacks.  The
 * lowest of the ptflow files: ptflow.c (packets, events) and
 * ptflow_walk.c (blocks and walks) call it, it calls neither. */
#include "ptflow_int.h"

/* Restores the constant fields of the batch records from @from on. */
void ptf_bbuf_fill(struct btr_ptflow *f, unsigned from)
{
	for (unsigned k = from; k < BTR_PTFLOW_BATCH; k++) {
		f->bbuf[k].tsc = f->bbuf_tsc;
		f->bbuf[k].tid = f->cfg.tid;
		f->bbuf[k].pid = f->cfg.pid;
		f->bbuf[k].cycles = 0;
	}
	if (!from)
		f->bbuf_dirty = 0;
}

/* Delivers the batched branch records (cb->branches). */
void ptf_flush_branches(struct btr_ptflow *f)
{
	unsigned n = f->bn;
	if (!n)
		return;
	f->bn = 0;
	if (!f->stopped && f->cb->branches(f->cb->ctx, f->bbuf, n))
		f->stopped = 1;
	if (f->bbuf_dirty)
		ptf_bbuf_fill(f, 0);
}

/* Reports the first @n instructions of @b. */
void ptf_emit_insns(struct btr_ptflow *f, const struct blk *b, unsigned n)
{
	const uint8_t *lens = f->lens + (size_t)(b - f->blks) * BLK_MAXI;
	uint64_t ip = b->ip;
	ptf_flush_branches(f);
	for (unsigned i = 0; i < n && !f->stopped; i++) {
		struct btr_insn in = { .ip = ip, .len = lens[i] };
		if (i + 1 == b->ninsn) {
			in.kind = b->kind;
			const struct blk_cold *c = &f->cold[b - f->blks];
			in.flags = c->end_flags;
			in.imm = c->end_imm;
			in.target = (c->end_flags & BTR_INSN_DIRECT) ? b->to[1] : 0;
		}
		if (f->intx)
			in.flags |= BTR_INSN_IN_TX;
		if (f->cb->insn(f->cb->ctx, ip, &in))
			f->stopped = 1;
		ip += lens[i];
	}
}

