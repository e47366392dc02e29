/* analysis.c - the analysis interface and the one-pass driver that feeds
 * several analyses from one stream (btr/analysis.h).
 *
 * Why a batch buffer: the stream delivers branches one at a time; handing
 * each analysis a few hundred at once amortizes the indirect call per
 * consumer, so N analyses cost about N loops over a small hot array rather
 * than N indirect calls per branch.  The buffer is flushed before every
 * event so that analyses see branches and events in stream order.
 */
#include "btr/analysis.h"
#include "btr/error.h"
#include "internal.h"
#include "registry.h"
#include "analysis_mux.h"

#include <stdlib.h>
#include <string.h>

#define MUX_BATCH 512

/* Where an analysis is in its one run: its state accumulates, so a second
 * run would add to the first (counts doubled), and a result written before
 * the run's end is empty or half made. */
enum phase { PHASE_NEW, PHASE_RUNNING, PHASE_DONE };

struct btr_analysis {
	const struct btr_analysis_ops *ops;
	void *state;
	enum phase phase;
	const struct btr_analysis *source;   /* a view's: whose run it shows */
};

/* Takes part in a run (a view takes nothing from the stream). */
static int fed(const struct btr_analysis *a)
{
	const struct btr_analysis_ops *o = a->ops;
	return o->begin || o->branches || o->counts || o->event || o->end;
}

struct btr__analysis_mux {
	struct btr_analysis *const *list;
	size_t n;
	int error;          /* first negative analysis error */
	int stopped;        /* positive: an analysis asked to stop */
	size_t nb;
	struct btr_branch buf[MUX_BATCH];
};

int btr_analysis_new(const struct btr_analysis_ops *ops, void *state, struct btr_analysis **out)
{
	if (!ops || !out) {
		if (ops && ops->destroy && state)
			ops->destroy(state);
		return -BTR_ERR_INVAL;
	}
	struct btr_analysis *a = calloc(1, sizeof(*a));
	if (!a) {
		if (ops->destroy && state)
			ops->destroy(state);
		*out = NULL;
		return -BTR_ERR_NOMEM;
	}
	a->ops = ops;
	a->state = state;
	*out = a;
	return 0;
}

int btr__analysis_new_view(const struct btr_analysis_ops *ops, void *state, struct btr_analysis *source,
			   struct btr_analysis **out)
{
	int rc = btr_analysis_new(ops, state, out);
	if (rc == 0)
		(*out)->source = source;
	return rc;
}

void btr_analysis_free(struct btr_analysis *a)
{
	if (!a)
		return;
	if (a->ops->destroy)
		a->ops->destroy(a->state);
	free(a);
}

void *btr_analysis_state(const struct btr_analysis *a)
{
	return a ? a->state : NULL;
}

const struct btr_analysis_ops *btr_analysis_ops(const struct btr_analysis *a)
{
	return a ? a->ops : NULL;
}

int btr_analysis_write(struct btr_analysis *a, FILE *out, const char *format)
{
	if (!a || !out)
		return -BTR_ERR_INVAL;
	if (!a->ops->write)
		return -BTR_ERR_UNSUPPORTED;
	/* no result yet (not run, or still running): an error, not an empty
	 * result */
	const struct btr_analysis *by = a->source ? a->source : a;
	if ((fed(by) || by != a) && by->phase != PHASE_DONE)
		return -BTR_ERR_INVAL;
	return a->ops->write(a->state, out, format);
}

/* ---- the multiplexer ---- */

int btr__analysis_mux_new(struct btr_analysis *const *list, size_t n, struct btr__analysis_mux **out)
{
	if (!out || (n && !list))
		return -BTR_ERR_INVAL;
	for (size_t i = 0; i < n; i++) {
		/* one run per analysis object; the same one twice in a list
		 * would be fed every branch twice */
		if (!list[i] || (fed(list[i]) && list[i]->phase != PHASE_NEW))
			return -BTR_ERR_INVAL;
		for (size_t j = 0; j < i; j++)
			if (list[j] == list[i])
				return -BTR_ERR_INVAL;
	}
	struct btr__analysis_mux *m = calloc(1, sizeof(*m));
	if (!m)
		return -BTR_ERR_NOMEM;
	m->list = list;
	m->n = n;
	*out = m;
	return 0;
}

void btr__analysis_mux_free(struct btr__analysis_mux *m)
{
	free(m);
}

/* Records an analysis' answer; returns nonzero when the run must stop. */
static int note(struct btr__analysis_mux *m, int rc)
{
	if (rc < 0) {
		if (!m->error)
			m->error = rc;
		return 1;
	}
	if (rc > 0 && !m->stopped)
		m->stopped = rc;
	return rc != 0;
}

static int flush(struct btr__analysis_mux *m)
{
	size_t nb = m->nb;
	m->nb = 0;
	if (!nb)
		return 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (a->ops->branches && note(m, a->ops->branches(a->state, m->buf, nb)))
			return 1;
	}
	return 0;
}

int btr__analysis_mux_branch(void *mux, const struct btr_branch *b)
{
	struct btr__analysis_mux *m = mux;
	m->buf[m->nb++] = *b;
	if (m->nb == MUX_BATCH)
		return flush(m);
	return 0;
}

int btr__analysis_mux_branches(void *mux, const struct btr_branch *b, size_t n)
{
	struct btr__analysis_mux *m = mux;
	if (n < 64) {
		/* small batches (LBR, BTS: one at a time) are gathered */
		for (size_t i = 0; i < n; i++)
			if (btr__analysis_mux_branch(mux, &b[i]))
				return 1;
		return 0;
	}
	if (flush(m))
		return 1;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (a->ops->branches && note(m, a->ops->branches(a->state, b, n)))
			return 1;
	}
	return 0;
}

int btr__analysis_mux_event(void *mux, const struct btr_stream_event *ev)
{
	struct btr__analysis_mux *m = mux;
	if (flush(m))
		return 1;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (a->ops->event && note(m, a->ops->event(a->state, ev)))
			return 1;
	}
	return 0;
}

int btr__analysis_mux_counts(void *mux, const struct btr_branch_count *c, size_t n)
{
	struct btr__analysis_mux *m = mux;
	if (flush(m))
		return 1;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (a->ops->counts && note(m, a->ops->counts(a->state, c, n)))
			return 1;
	}
	return 0;
}

int btr__analysis_mux_counts_ok(const struct btr__analysis_mux *m)
{
	if (!m || !m->n)
		return 0;
	int any = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis_ops *o = m->list[i]->ops;
		if (o->branches && !o->counts)
			return 0;
		any |= o->counts != NULL;
	}
	return any;
}

int btr__analysis_mux_fold_ok(void *mux, uint32_t tid)
{
	struct btr__analysis_mux *m = mux;
	if (flush(m))   /* (answers about the branches given so far) */
		return 0;
	int any = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (!a->ops->branches)
			continue;
		if (!a->ops->fold_ok || !a->ops->fold_ok(a->state, tid))
			return 0;
		any = 1;
	}
	return any;
}

int btr__analysis_mux_fold_block(void *mux, uint32_t pid, uint64_t start, uint64_t from, uint64_t to)
{
	struct btr__analysis_mux *m = mux;
	int bits = BTR_FOLD_NOT_TAKEN | BTR_FOLD_TAKEN;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (!a->ops->branches)
			continue;
		bits &= a->ops->fold_block ? a->ops->fold_block(a->state, pid, start, from, to) : BTR_FOLD_NOT_TAKEN;
	}
	return bits;
}

int btr__analysis_mux_fold_any(const struct btr__analysis_mux *m)
{
	if (!m)
		return 0;
	int any = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis_ops *o = m->list[i]->ops;
		if (o->branches && !o->fold_ok)
			return 0;
		any |= o->branches != NULL;
	}
	return any;
}

int btr__analysis_mux_begin(struct btr__analysis_mux *m, struct btr_stream *s)
{
	if (!m)
		return -BTR_ERR_INVAL;
	for (size_t i = 0; i < m->n; i++)
		if (fed(m->list[i]) && m->list[i]->phase != PHASE_NEW)
			return -BTR_ERR_INVAL;   /* run already (since the mux was made) */
	for (size_t i = 0; i < m->n; i++)
		if (fed(m->list[i]))
			m->list[i]->phase = PHASE_RUNNING;
	for (size_t i = 0; i < m->n; i++) {
		const struct btr_analysis *a = m->list[i];
		if (a->ops->begin && note(m, a->ops->begin(a->state, s)))
			break;
	}
	return m->error;
}

int btr__analysis_mux_end(struct btr__analysis_mux *m, int status)
{
	if (!m)
		return -BTR_ERR_INVAL;
	if (!m->error)
		flush(m);
	/* Every analysis is ended, even after another one failed, so each
	 * can release what it holds and show partial results. */
	for (size_t i = 0; i < m->n; i++) {
		struct btr_analysis *a = m->list[i];
		if (a->phase != PHASE_RUNNING)
			continue;   /* never begun, or ended already */
		a->phase = PHASE_DONE;
		if (a->ops->end) {
			int rc = a->ops->end(a->state, m->error ? m->error : status);
			if (rc < 0 && !m->error)
				m->error = rc;
		}
	}
	return m->error;
}

/* ---- one pass over a trace file ---- */

int btr_analysis_run(const char *path, const struct btr_stream_opts *sopts,
		     struct btr_analysis *const *list, size_t n,
		     struct btr_analysis_run_info *info)
{
	if (!path || (n && !list))
		return -BTR_ERR_INVAL;
	if (!BTR_OPTS_VALID(info, sizeof(*info)) ||
	    !BTR_OPTS_VALID(sopts, BTR_OFFSETOFEND(struct btr_stream_opts, ctx)))
		return -BTR_ERR_INVAL;
	struct btr__analysis_mux *m;
	int rc = btr__analysis_mux_new(list, n, &m);
	if (rc < 0)
		return rc;
	struct btr_stream_opts o;
	BTR_OPTS_COPY(&o, sopts);
	o.branch = NULL;
	o.branches = btr__analysis_mux_branches;
	o.event = btr__analysis_mux_event;
	o.insn = NULL;
	o.ctx = m;
	/* Counts instead of one record per branch when every analysis takes
	 * them (BTR_ORDERED=1: in order, to compare). */
	const char *ord = getenv("BTR_ORDERED");
	o.counts = btr__analysis_mux_counts_ok(m) && !(ord && *ord && strcmp(ord, "0"))
			   ? btr__analysis_mux_counts : NULL;
	/* Not-taken conditionals left out where every analysis says they
	 * change nothing for it (the call stack views; BTR_ORDERED=1: all). */
	o.fold_ok = !o.counts && btr__analysis_mux_fold_any(m) && !(ord && *ord && strcmp(ord, "0"))
			    ? btr__analysis_mux_fold_ok : NULL;
	o.fold_block = o.fold_ok ? btr__analysis_mux_fold_block : NULL;
	struct btr_stream *s;
	rc = btr_stream_open(path, &o, &s);
	if (rc < 0) {
		btr__analysis_mux_free(m);
		return rc;
	}
	rc = btr__analysis_mux_begin(m, s);
	int status = 0;
	if (rc >= 0) {
		rc = btr_stream_run(s);
		if (rc < 0 && !m->error)
			status = rc;       /* a read error or lost data: partial results */
		int erc = btr__analysis_mux_end(m, status);
		if (m->error)
			rc = m->error;
		else if (erc < 0)
			rc = erc;
		else if (m->stopped)
			rc = m->stopped;
	} else {
		btr__analysis_mux_end(m, rc);
	}
	if (info) {
		struct btr_stream_loss *losses = info->losses;
		size_t max_losses = info->max_losses;
		memset(info, 0, sizeof(*info));
		info->sz = sizeof(*info);
		info->losses = losses;
		info->max_losses = max_losses;
		info->n_losses = btr_stream_losses(s, losses, losses ? max_losses : 0);
		info->lost = btr_stream_data_lost(s);
		info->status = status;
		snprintf(info->backend, sizeof(info->backend), "%s", btr_stream_backend(s));
		btr_stream_get_stats(s, &info->stats);
	}
	btr_stream_free(s);
	btr__analysis_mux_free(m);
	return rc;
}
