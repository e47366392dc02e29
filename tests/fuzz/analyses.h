/* analyses.h - the analyses the fuzz targets feed (fuzz_analysis: a
 * fuzzed record sequence; fuzz_stream: a fuzzed trace file), and the
 * output formats each is written in afterwards.
 *
 * TO ADD AN ANALYSIS: write a constructor below (options from the input
 * bytes if it has any) and add one line to FUZZ_ANALYSES; its formats
 * come from its ops (btr_analysis_ops.formats).  Both targets
 * and their regression inputs (tests/fuzz/regress/) pick it up.
 */
#ifndef FUZZ_ANALYSES_H
#define FUZZ_ANALYSES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/analysis.h"
#include "btr/error.h"
#include "btr/report.h"

/* ---- the report (lib/analysis/report.c) ---- */

static int fz_new_report(const uint8_t *data, size_t size, struct btr_analysis **out)
{
	struct btr_report_opts o = { .sz = sizeof(o), .top = size ? data[0] % 5 : 0, .max_gaps = 3 };
	int rc = btr_report_analysis_new(&o, out);
	if (rc == 0 && (rc = btr_report_analysis_set_name(*out, "fuzz")) < 0)
		btr_analysis_free(*out);
	return rc;
}

/* ---- the interface's own promises (btr/analysis.h), checked ---- */

struct fz_order {
	int begun, ended;
};

static int fz_order_begin(void *st, struct btr_stream *s)
{
	struct fz_order *o = st;
	if (o->begun++ || !s)
		abort();
	return 0;
}

static int fz_order_branches(void *st, const struct btr_branch *b, size_t n)
{
	struct fz_order *o = st;
	if (!o->begun || o->ended || n == 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (b[i].kind >= BTR_KIND__COUNT)
			abort();
	return 0;
}

static int fz_order_event(void *st, const struct btr_stream_event *ev)
{
	struct fz_order *o = st;
	if (!o->begun || o->ended)
		abort();
	if (ev->type == BTR_SEV_FLOW && !ev->flow)
		abort();
	return 0;
}

static int fz_order_end(void *st, int status)
{
	struct fz_order *o = st;
	if (!o->begun || o->ended++ || status > 0)
		abort();
	return 0;
}

static const struct btr_analysis_ops fz_order_ops = {
	.name = "order", .begin = fz_order_begin, .branches = fz_order_branches,
	.event = fz_order_event, .end = fz_order_end, .destroy = free,
};

static int fz_new_order(const uint8_t *data, size_t size, struct btr_analysis **out)
{
	(void)data, (void)size;
	struct fz_order *o = calloc(1, sizeof(*o));
	if (!o)
		return -BTR_ERR_NOMEM;
	return btr_analysis_new(&fz_order_ops, o, out);
}


/* ---- the analyses of lib/analysis/ ---- */

#include "btr/annotate.h"
#include "btr/blocks.h"
#include "btr/cfg.h"
#include "btr/check.h"
#include "btr/cov.h"
#include "btr/profile.h"

/* The views read the block table of a blocks analysis earlier in the
 * same run: the table below creates blocks first and keeps it here. */
static struct btr_analysis *fz_blocks;

static int fz_new_blocks(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	int rc = btr_blocks_new(out);
	fz_blocks = rc == 0 ? *out : NULL;
	return rc;
}

static int fz_new_afdo(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d;
	(void)n;
	return btr_afdo_new(fz_blocks, NULL, out);
}

static int fz_new_cov(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	return btr_cov_new(fz_blocks, out);
}

static int fz_new_cfg(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_cfg_opts o = { .sz = sizeof(o), .function = "main", .max_blocks = 20 };
	return btr_cfg_new(fz_blocks, &o, out);
}

static int fz_new_annotate(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	return btr_annotate_new(fz_blocks, "main", out);
}

static int fz_new_check(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_check_opts o = { .sz = sizeof(o), .allow = "rop-chain 0x1000-0x2000\n* libc\n" };
	return btr_check_new(&o, out);
}

#define FZ_PROFILE(name, ctor, ev, pa)                                           \
	static int fz_new_##name(const uint8_t *d, size_t n, struct btr_analysis **out) \
	{                                                                       \
		(void)d, (void)n;                                               \
		struct btr_profile_opts o = { .sz = sizeof(o), .events = ev, .pre_aggregated = pa }; \
		return ctor(&o, out);                                           \
	}
FZ_PROFILE(callgraph, btr_callgraph_new, 0, 0)
FZ_PROFILE(flame, btr_flame_new, 1, 0)
FZ_PROFILE(timeline, btr_timeline_new, 1, 0)
FZ_PROFILE(bolt, btr_bolt_new, 0, 0)
FZ_PROFILE(bolt_pa, btr_bolt_new, 0, 1)
FZ_PROFILE(pprof, btr_pprof_new, 0, 0)
#undef FZ_PROFILE

/* ---- the table ----
 * X(name, constructor): constructor(data, size, &out) returns 0 or a
 * negative error.  After the run each analysis is written in its default
 * format (NULL) and in every format its ops list (btr_analysis_ops.formats,
 * the list the CLI and the docs use too). */
#define FUZZ_ANALYSES(X)                                                        \
	X(report, fz_new_report)                                                \
	X(order, fz_new_order)                                                  \
	X(blocks, fz_new_blocks)                                                \
	X(cov, fz_new_cov)                                                      \
	X(cfg, fz_new_cfg)                                                      \
	X(annotate, fz_new_annotate)                                            \
	X(check, fz_new_check)                                                  \
	X(callgraph, fz_new_callgraph)                                          \
	X(flame, fz_new_flame)                                                  \
	X(timeline, fz_new_timeline)                                            \
	X(bolt, fz_new_bolt)                                                    \
	X(bolt_pa, fz_new_bolt_pa)                                              \
	X(pprof, fz_new_pprof)                                                  \
	X(afdo, fz_new_afdo)
	/* new analyses: one X line each, in dependency order (blocks before
	 * the views that read it) */

struct fuzz_analysis {
	const char *name;
	int (*make)(const uint8_t *data, size_t size, struct btr_analysis **out);
};

static const struct fuzz_analysis fuzz_analyses[] = {
#define FZ_ENTRY(n, ctor) { #n, ctor },
	FUZZ_ANALYSES(FZ_ENTRY)
#undef FZ_ENTRY
};
enum { FUZZ_N_ANALYSES = sizeof(fuzz_analyses) / sizeof(fuzz_analyses[0]) };

/* Creates every analysis into @a (FUZZ_N_ANALYSES slots); returns how
 * many were created (all or none). */
static inline size_t fuzz_analyses_new(const uint8_t *data, size_t size, struct btr_analysis **a)
{
	for (size_t i = 0; i < FUZZ_N_ANALYSES; i++) {
		if (fuzz_analyses[i].make(data, size, &a[i]) != 0) {
			while (i)
				btr_analysis_free(a[--i]);
			return 0;
		}
	}
	return FUZZ_N_ANALYSES;
}

/* Writes every analysis in every format (to memory, so ASan checks it),
 * then frees it. */
static inline void fuzz_analyses_write_free(struct btr_analysis **a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *const *list = btr_analysis_ops(a[i])->formats;
		for (size_t k = 0; k == 0 || (list && list[k - 1]); k++) {
			/* k 0: the default (NULL), then list[0], list[1], ... */
			char *buf = NULL;
			size_t len = 0;
			FILE *m = open_memstream(&buf, &len);
			if (m) {
				btr_analysis_write(a[i], m, k ? list[k - 1] : NULL);
				fclose(m);
				free(buf);
			}
		}
	}
	/* Freed after every write: the views read the blocks analysis. */
	for (size_t i = n; i-- > 0;)
		btr_analysis_free(a[i]);
}

#endif
