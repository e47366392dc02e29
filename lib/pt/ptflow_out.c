/* ptflow_out.c - the flow decoder's output of the walks: batched branch
 * records and reported instructions, delivered to the callbacks.  The
 * lowest of the ptflow files: ptflow.c (packets, events) and
 * ptflow_walk.c (blocks and walks) call it, it calls neither. */
#include <stdlib.h>

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

/* Delivers the ordered records of the counts (cb->counts). */
static void flush_cbuf(struct btr_ptflow *f)
{
	unsigned n = f->cn;
	f->cn = 0;
	if (!f->stopped && f->cb->counts(f->cb->ctx, f->cbuf, n))
		f->stopped = 1;
}

/* Delivers the batched branch records (cb->branches), or the ordered
 * records of the counts. */
void ptf_flush_branches(struct btr_ptflow *f)
{
	if (f->cn)
		flush_cbuf(f);
	unsigned n = f->bn;
	if (!n)
		return;
	f->bn = 0;
	if (!f->stopped && f->cb->branches(f->cb->ctx, f->bbuf, n))
		f->stopped = 1;
	if (f->bbuf_dirty)
		ptf_bbuf_fill(f, 0);
}

/* ---- counts (cb->counts) ---- */

int ptf_counts_alloc(struct btr_ptflow *f)
{
	if (f->cnt)
		return 0;
	size_t n = (size_t)2 << f->cache_bits;
	f->cnt = calloc(n, sizeof(*f->cnt));
	f->xt = malloc(n / 2 * sizeof(*f->xt));
	f->dirty = malloc(n * sizeof(*f->dirty));
	f->cbuf = calloc(BTR_PTFLOW_BATCH, sizeof(*f->cbuf));
	if (!f->cnt || !f->xt || !f->dirty || !f->cbuf) {
		ptf_counts_free(f);
		return -BTR_ERR_NOMEM;
	}
	f->nd = 0;
	f->cn = 0;
	return 0;
}

void ptf_counts_free(struct btr_ptflow *f)
{
	free(f->cnt);
	free(f->xt);
	free(f->dirty);
	free(f->cbuf);
	f->cnt = NULL;
	f->xt = NULL;
	f->dirty = NULL;
	f->cbuf = NULL;
}

/* Queues one ordered record (count 1) of the run from @start ending in
 * @b.  Returns nonzero if a callback stopped decoding. */
int ptf_count_one(struct btr_ptflow *f, uint64_t start, const struct btr_branch *b)
{
	struct btr_branch_count *c = &f->cbuf[f->cn++];
	c->b = *b;
	c->start = start;
	c->count = 1;
	if (f->cn == BTR_PTFLOW_BATCH)
		flush_cbuf(f);
	return f->stopped;
}

/* Reports the ordered records, then every nonzero block counter as one
 * record (the second counter of an indirect branch counts its target
 * f->xt), and clears the counters. */
void ptf_flush_counts(struct btr_ptflow *f)
{
	if (!f->cnt)
		return;
	if (f->cn)
		flush_cbuf(f);
	for (uint32_t k = 0; k < f->nd; k++) {
		uint32_t i = f->dirty[k];
		const struct blk *b = &f->blks[i >> 1];
		unsigned t = i & 1;
		struct btr_branch_count *c = &f->cbuf[f->cn++];
		uint32_t tail = b->tail[t];
		uint64_t to = b->to[t];
		if (t && (b->cls == C_IND || b->cls == C_RET)) {
			/* the indirect branch's counted target */
			to = f->xt[i >> 1];
			tail = (uint32_t)(BTR_BF_TAKEN | KFLAGS(b->end_ip, to)) | (uint32_t)b->kind << 16;
		}
		c->b = (struct btr_branch){
			.from = b->end_ip, .to = to, .insns = b->ninsn, .tid = f->cfg.tid,
			.flags = (uint16_t)((tail & 0xffff) | BTR_BF_INSNS), .kind = (uint8_t)(tail >> 16),
			.pid = f->cfg.pid,
		};
		c->start = b->ip;
		c->count = f->cnt[i];
		f->cnt[i] = 0;
		if (f->cn == BTR_PTFLOW_BATCH)
			flush_cbuf(f);
	}
	f->nd = 0;
	if (f->cn)
		flush_cbuf(f);
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

