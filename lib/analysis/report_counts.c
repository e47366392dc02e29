/* report_counts.c - btr report's counting as an analysis (btr/report.h:
 * btr_report_analysis_new), so that a command runs the report together
 * with other views in one pass.  An adapter over lib/report.c: the
 * report keeps its public API and output; this only routes the analysis
 * callbacks to it and finishes it in end(), while the stream's image is
 * still alive. */
#include "btr/report.h"
#include "btr/analysis.h"
#include "btr/error.h"

#include <stdlib.h>

struct rep {
	struct btr_report *r;
	struct btr_stream *s;
	int finished;
};

static int rep_begin(void *state, struct btr_stream *s)
{
	((struct rep *)state)->s = s;
	return 0;
}

static int rep_branches(void *state, const struct btr_branch *b, size_t n)
{
	struct rep *x = state;
	return btr_report_branches(x->r, b, n) ? -BTR_ERR_NOMEM : 0;
}

static int rep_event(void *state, const struct btr_stream_event *ev)
{
	struct rep *x = state;
	return btr_report_event(x->r, ev) ? -BTR_ERR_NOMEM : 0;
}

static int rep_end(void *state, int status)
{
	struct rep *x = state;
	(void)status;
	int rc = btr_report_finish(x->r, x->s ? btr_stream_image(x->s) : NULL,
				   x->s ? btr_stream_backend(x->s) : NULL);
	x->finished = rc == 0;
	return rc;
}

static void rep_destroy(void *state)
{
	struct rep *x = state;
	if (x)
		btr_report_free(x->r);
	free(x);
}

static const struct btr_analysis_ops rep_ops = {
	.name = "report",
	.begin = rep_begin,
	.branches = rep_branches,
	.event = rep_event,
	.end = rep_end,
	.destroy = rep_destroy,
};

int btr_report_analysis_new(const struct btr_report_opts *opts, struct btr_analysis **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	struct rep *x = calloc(1, sizeof(*x));
	if (!x)
		return -BTR_ERR_NOMEM;
	int rc = btr_report_new(opts, &x->r);
	if (rc < 0) {
		free(x);
		return rc;
	}
	return btr_analysis_new(&rep_ops, x, out);
}

const struct btr_report *btr_report_analysis_get(const struct btr_analysis *a)
{
	if (btr_analysis_ops(a) != &rep_ops)
		return NULL;
	const struct rep *x = btr_analysis_state(a);
	return x->finished ? x->r : NULL;
}
