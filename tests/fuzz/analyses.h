/* analyses.h - the analyses the fuzz targets feed (fuzz_analysis: a
 * fuzzed record sequence; fuzz_stream: a fuzzed trace file), and the
 * output formats each is written in afterwards.
 *
 * The list is the library's (btr_analysis_name: lib/analysis/registry.h):
 * every analysis there is created by name (btr_analysis_create, over the
 * blocks analysis of the same run, function "main") and written in every
 * format its ops list, with nothing to add here.  FUZZ_OPTIONS below gives
 * some of them other options than the defaults (from the input bytes),
 * FUZZ_EXTRA adds analyses that are not in the library's list.
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

#include "btr/cfg.h"
#include "btr/check.h"
#include "btr/profile.h"

/* The views read the block table of a blocks analysis earlier in the
 * same run (the library's list has it first): kept here. */
static struct btr_analysis *fz_blocks;

static int fz_new_cfg(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_cfg_opts o = { .sz = sizeof(o), .function = "main", .max_blocks = 20 };
	return btr_cfg_new(fz_blocks, &o, out);
}

static int fz_new_check(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_check_opts o = { .sz = sizeof(o), .allow = "rop-chain 0x1000-0x2000\n* libc\n" };
	return btr_check_new(&o, out);
}

static int fz_new_flame(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_profile_opts o = { .sz = sizeof(o), .events = 1 };
	return btr_flame_new(&o, out);
}

static int fz_new_timeline(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_profile_opts o = { .sz = sizeof(o), .events = 1 };
	return btr_timeline_new(&o, out);
}

static int fz_new_bolt_pa(const uint8_t *d, size_t n, struct btr_analysis **out)
{
	(void)d, (void)n;
	struct btr_profile_opts o = { .sz = sizeof(o), .pre_aggregated = 1 };
	return btr_bolt_new(&o, out);
}

/* ---- the table ----
 * constructor(data, size, &out) returns 0 or a negative error.
 * FUZZ_OPTIONS(X): X(name, constructor) for an analysis of the library's
 * list created with other options than btr_analysis_create's defaults.
 * FUZZ_EXTRA(X): analyses not in the library's list, run after it. */
#define FUZZ_OPTIONS(X)                                                         \
	X(report, fz_new_report)                                                \
	X(cfg, fz_new_cfg)                                                      \
	X(check, fz_new_check)                                                  \
	X(flame, fz_new_flame)                                                  \
	X(timeline, fz_new_timeline)
#define FUZZ_EXTRA(X)                                                           \
	X(order, fz_new_order)                                                  \
	X(bolt_pa, fz_new_bolt_pa)

struct fuzz_analysis {
	const char *name;
	int (*make)(const uint8_t *data, size_t size, struct btr_analysis **out);
};

static const struct fuzz_analysis fuzz_options[] = {
#define FZ_ENTRY(n, ctor) { #n, ctor },
	FUZZ_OPTIONS(FZ_ENTRY)
#undef FZ_ENTRY
};
static const struct fuzz_analysis fuzz_extra[] = {
#define FZ_ENTRY(n, ctor) { #n, ctor },
	FUZZ_EXTRA(FZ_ENTRY)
#undef FZ_ENTRY
};
/* Room for every analysis of a run (the library's and FUZZ_EXTRA). */
enum { FUZZ_N_ANALYSES = 64 };

/* Creates analysis @name of the library's list. */
static int fuzz_make(const char *name, const uint8_t *data, size_t size, struct btr_analysis **out)
{
	for (size_t k = 0; k < sizeof(fuzz_options) / sizeof(fuzz_options[0]); k++)
		if (!strcmp(fuzz_options[k].name, name))
			return fuzz_options[k].make(data, size, out);
	struct btr_analysis_args a = { .sz = sizeof(a), .blocks = fz_blocks, .function = "main" };
	return btr_analysis_create(name, &a, out);
}

/* Creates every analysis into @a (FUZZ_N_ANALYSES slots); returns how
 * many were created (all or none). */
static inline size_t fuzz_analyses_new(const uint8_t *data, size_t size, struct btr_analysis **a)
{
	size_t n = 0, n_lib = 0;
	const char *name;
	fz_blocks = NULL;
	while ((name = btr_analysis_name(n_lib)) != NULL && n < FUZZ_N_ANALYSES) {
		if (fuzz_make(name, data, size, &a[n]) != 0)
			goto fail;
		if (!strcmp(name, "blocks"))
			fz_blocks = a[n];
		n++, n_lib++;
	}
	if (n_lib == 0 || name)   /* an empty list, or more than FUZZ_N_ANALYSES */
		abort();
	for (size_t k = 0; k < sizeof(fuzz_extra) / sizeof(fuzz_extra[0]); k++, n++)
		if (n == FUZZ_N_ANALYSES || fuzz_extra[k].make(data, size, &a[n]) != 0)
			goto fail;
	return n;
fail:
	while (n)
		btr_analysis_free(a[--n]);
	return 0;
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
