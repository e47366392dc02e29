/* stream_batch.c - btr/batch.h: the branch stream pulled in batches into the
 * caller's buffer, one record at a time (btr_stream_step). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "btr/batch.h"
#include "btr/error.h"
#include "btr/trace.h"
#include "internal.h"
#include "stream_par.h"

struct btr_batch {
	struct btr_stream *s;
	struct btr_trace_reader *r;   /* BTR_BATCH_NO_DATA: our own reader */
	/* the caller's buffer during btr_batch_read */
	struct btr_branch *out;
	size_t out_n, out_max;
	/* branches of the last record that did not fit: pend[pend_at..pend_n) */
	struct btr_branch *pend;
	size_t pend_at, pend_n, pend_cap;
	int nomem;
	int end;                      /* the stream is finished */
	int status;                   /* its final error, returned once drained */
	int (*event)(void *ctx, const struct btr_stream_event *ev);   /* the caller's */
	void *event_ctx;
};

static int take(void *ctx, const struct btr_branch *b, size_t n)
{
	struct btr_batch *bb = ctx;
	size_t room = bb->out_max - bb->out_n;
	if (room && bb->pend_at == bb->pend_n) {
		size_t k = n < room ? n : room;
		memcpy(bb->out + bb->out_n, b, k * sizeof(*b));
		bb->out_n += k;
		b += k;
		n -= k;
	}
	if (!n)
		return 0;
	if (bb->pend_at == bb->pend_n)
		bb->pend_at = bb->pend_n = 0;
	if (bb->pend_n + n > bb->pend_cap) {
		size_t nc = bb->pend_cap ? bb->pend_cap : 4096;
		while (nc < bb->pend_n + n)
			nc *= 2;
		struct btr_branch *np = realloc(bb->pend, nc * sizeof(*np));
		if (!np) {
			bb->nomem = 1;
			return 1;
		}
		bb->pend = np;
		bb->pend_cap = nc;
	}
	memcpy(bb->pend + bb->pend_n, b, n * sizeof(*b));
	bb->pend_n += n;
	return 0;
}

static int take_one(void *ctx, const struct btr_branch *b)
{
	return take(ctx, b, 1);
}

static int is_data(enum btr_rec_type t)
{
	return t == BTR_REC_PT || t == BTR_REC_BTS || t == BTR_REC_BTS_INSNS || t == BTR_REC_LBR ||
	       t == BTR_REC_BRANCHES;
}

/* BTR_BATCH_NO_DATA: feed the descriptive records only.  A skipped chunk
 * may have held some of them: -BTR_ERR_DATA_LOST at the end, as a full
 * pass says. */
static int scan(struct btr_batch *bb)
{
	struct btr_record rec;
	int rc, skipped = 0;
	while ((rc = btr_trace_read(bb->r, &rec)) != -BTR_ERR_EOS) {
		if (rc == -BTR_ERR_CHECKSUM) {
			skipped = 1;
			continue;
		}
		if (rc < 0)
			break;
		if (is_data(rec.type))
			continue;
		rc = btr_stream_record(bb->s, &rec);
		if (rc)
			break;
	}
	int frc = btr_stream_finish(bb->s);
	if (rc == -BTR_ERR_EOS)
		rc = frc ? frc : skipped || btr_stream_data_lost(bb->s) ? -BTR_ERR_DATA_LOST : 0;
	return rc < 0 ? rc : 0;
}

/* The caller's event callback with its own ctx (a stream has one ctx for
 * every callback). */
static int fwd_event(void *ctx, const struct btr_stream_event *ev)
{
	struct btr_batch *bb = ctx;
	return bb->event(bb->event_ctx, ev);
}

int btr_batch_open(const char *path, const struct btr_stream_opts *opts, unsigned flags, struct btr_batch **out)
{
	if (!path || !out || (flags & ~(unsigned)BTR_BATCH_NO_DATA))
		return -BTR_ERR_INVAL;
	*out = NULL;
	/* as btr_stream_new: older, shorter option structs are fine */
	if (!BTR_OPTS_VALID(opts, BTR_OFFSETOFEND(struct btr_stream_opts, ctx)))
		return -BTR_ERR_INVAL;
	struct btr_stream_opts o;
	BTR_OPTS_COPY(&o, opts);
	struct btr_batch *bb = calloc(1, sizeof(*bb));
	if (!bb)
		return -BTR_ERR_NOMEM;
	bb->event = o.event;
	bb->event_ctx = o.ctx;
	o.ctx = bb;
	o.event = bb->event ? fwd_event : NULL;
	o.insn = NULL;
	o.progress = NULL;
	int rc;
	if (flags & BTR_BATCH_NO_DATA) {
		o.branch = NULL;
		o.branches = NULL;
		rc = btr_trace_reader_new(path, &bb->r);
		if (!rc)
			rc = btr_stream_new(&o, &bb->s);
		if (!rc) {
			struct btr_trace_info ti;
			btr_trace_reader_info(bb->r, &ti);
			btr__stream_input_size(bb->s, ti.size);
			bb->status = scan(bb);
			bb->end = 1;
		}
	} else {
		o.branch = take_one;
		o.branches = take;
		rc = btr_stream_open(path, &o, &bb->s);
		if (!rc)
			rc = btr__stream_shard_start(bb->s);
	}
	if (rc < 0) {
		btr_batch_free(bb);
		return rc;
	}
	*out = bb;
	return 0;
}

/* Copies pending branches into the caller's buffer. */
static void drain(struct btr_batch *bb)
{
	size_t k = bb->pend_n - bb->pend_at, room = bb->out_max - bb->out_n;
	if (k > room)
		k = room;
	if (!k)
		return;
	memcpy(bb->out + bb->out_n, bb->pend + bb->pend_at, k * sizeof(*bb->pend));
	bb->out_n += k;
	bb->pend_at += k;
}

long btr_batch_read(struct btr_batch *b, struct btr_branch *buf, size_t max)
{
	if (!b || !buf || !max)
		return -BTR_ERR_INVAL;
	b->out = buf;
	b->out_n = 0;
	b->out_max = max;
	drain(b);
	while (b->out_n < max && !b->end) {
		int end = 0;
		int rc = btr_stream_step(b->s, &end);
		if (b->nomem)
			rc = -BTR_ERR_NOMEM;
		if (rc) {
			/* a stop (positive) ends the stream like its end */
			b->end = 1;
			b->status = rc < 0 ? rc : 0;
		} else if (end) {
			b->end = 1;
		}
		drain(b);
	}
	b->out = NULL;
	if (b->out_n)
		return (long)b->out_n;
	if (b->status) {
		int st = b->status;
		b->status = 0;   /* said once */
		return st;
	}
	return 0;
}

int btr_batch_finish(struct btr_batch *b)
{
	if (!b)
		return -BTR_ERR_INVAL;
	b->pend_at = b->pend_n = 0;
	while (!b->end) {
		int end = 0;
		/* no room: everything goes to pend, which is emptied each turn */
		b->out_max = b->out_n = 0;
		int rc = btr_stream_step(b->s, &end);
		b->pend_at = b->pend_n = 0;
		if (b->nomem)
			rc = -BTR_ERR_NOMEM;
		if (rc || end) {
			b->end = 1;
			b->status = rc < 0 ? rc : 0;
		}
	}
	int st = b->status;
	b->status = 0;
	return st;
}

struct btr_stream *btr_batch_stream(struct btr_batch *b)
{
	return b ? b->s : NULL;
}

void btr_batch_free(struct btr_batch *b)
{
	if (!b)
		return;
	btr_stream_free(b->s);
	if (b->r)
		btr_trace_reader_free(b->r);
	free(b->pend);
	free(b);
}
