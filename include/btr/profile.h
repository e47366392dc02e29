/* btr/profile.h - profiles and exports of the branch stream: call graph,
 * flame graphs, timeline, BOLT profile, pprof, and merging profiles.
 *
 * Each is an analysis (btr/analysis.h) built on the call stacks of
 * btr/callstack.h (bolt on the branches themselves), so one pass over a
 * trace can feed several.  Memory grows with code size, call paths and
 * stack depth, not with the trace; the event-based outputs (speedscope,
 * timeline) stream their events into an unlinked temporary file while
 * the trace is read and copy them out in write().
 *
 * Weights: instructions where the trace counts them (.insns), otherwise
 * branches; with BTR_PROFILE_TIME, TSC ticks where the trace has
 * timestamps (the constructors accept it; write() fails with
 * -BTR_ERR_UNSUPPORTED if the trace had none).
 */
#ifndef BTR_PROFILE_H
#define BTR_PROFILE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

enum btr_profile_weight {
	BTR_PROFILE_INSNS = 0,   /* instructions (branches without .insns) */
	BTR_PROFILE_TIME,        /* TSC ticks */
};

struct btr_profile_opts {
	size_t sz;               /* sizeof(struct btr_profile_opts) */
	enum btr_profile_weight weight;
	/* flame: also keep per-thread enter/leave events (for "speedscope");
	 * timeline: always. */
	int events;
	/* timeline: only calls overlapping [from, to) in weight units (to 0:
	 * no end); calls shorter than min_dur are left out (their time shows
	 * in the caller). */
	uint64_t from, to, min_dur;
	/* bolt: the module whose profile to write: a path or a base name;
	 * NULL: the traced program (the first module loaded). */
	const char *module;
	/* bolt: write the pre-aggregated format (perf2bolt -pa) */
	int pre_aggregated;
};

/* Constructors: each returns 0 and the analysis in *@out, -BTR_ERR_INVAL
 * or -BTR_ERR_NOMEM.  @opts may be NULL (defaults).  Free with
 * btr_analysis_free.  Write formats (btr_analysis_write):
 *  - callgraph: "text" (default), "json", "dot"
 *  - flame: "folded" (default), "speedscope" (needs opts.events), "svg"
 *  - timeline: "json" (Chrome trace events, default), "pftrace" (Perfetto
 *    protobuf, binary)
 *  - bolt: "fdata" (default; pre-aggregated with opts.pre_aggregated)
 *  - pprof: "pb" (gzipped profile.proto, default), "pb-raw" (not gzipped) */
int btr_callgraph_new(const struct btr_profile_opts *opts, struct btr_analysis **out);
int btr_flame_new(const struct btr_profile_opts *opts, struct btr_analysis **out);
int btr_timeline_new(const struct btr_profile_opts *opts, struct btr_analysis **out);
int btr_bolt_new(const struct btr_profile_opts *opts, struct btr_analysis **out);
int btr_pprof_new(const struct btr_profile_opts *opts, struct btr_analysis **out);

/* An LLVM sample profile (AutoFDO text format: llvm-profdata merge
 * --sample, clang -fprofile-sample-use) of one module, from @blocks (a
 * blocks analysis, borrowed: in the same run before this one, and
 * outliving it).  @opts->module picks the module (path or base name;
 * NULL: the traced program); the module needs DWARF (line tables, and
 * inline info for inlined code).  Counts are exact executions, not
 * samples (docs/pgo.md).  Write format: "text" (default).  write()
 * returns -BTR_ERR_NOT_FOUND (no such module executed),
 * -BTR_ERR_NO_DEBUGINFO, -BTR_ERR_NOMEM, -BTR_ERR_IO. */
int btr_afdo_new(struct btr_analysis *blocks, const struct btr_profile_opts *opts, struct btr_analysis **out);

/* Title written into SVG / speedscope output (e.g. the trace's file name);
 * copied.  Returns 0 or -BTR_ERR_NOMEM. */
int btr_flame_set_title(struct btr_analysis *flame, const char *title);

/* ---- merging profiles of many runs (lib/analysis/merge.c) ---- */
enum btr_merge_kind {
	BTR_MERGE_UNKNOWN = 0,
	BTR_MERGE_FDATA,         /* BOLT fdata (perf2bolt's branch format) */
	BTR_MERGE_FDATA_PA,      /* BOLT pre-aggregated */
	BTR_MERGE_PPROF,         /* profile.proto, gzipped or not */
	BTR_MERGE_FOLDED,        /* folded stacks */
	BTR_MERGE_AFDO,          /* LLVM sample profile, text (btr afdo) */
};

/* Guesses the kind of the file @data (@size bytes). */
enum btr_merge_kind btr_merge_detect(const uint8_t *data, size_t size);

struct btr_merge;
/* Creates an empty merge of profiles of @kind.  Returns 0, -BTR_ERR_INVAL,
 * -BTR_ERR_NOMEM. */
int btr_merge_new(enum btr_merge_kind kind, struct btr_merge **out);
void btr_merge_free(struct btr_merge *m);
/* Adds one profile (@data, @size bytes, caller-owned; not kept).  Counts
 * of the same branch / stack / location add; pprof modules are matched
 * by build-id (by file name when a mapping has none).  An empty profile
 * (@size 0, or only newlines and spaces) adds nothing and is accepted
 * whatever the kind.  Returns 0,
 * -BTR_ERR_BAD_FORMAT (not a profile of the merge's kind, naming the
 * cause through the log), -BTR_ERR_COMPRESS (bad gzip data),
 * -BTR_ERR_NOMEM. */
int btr_merge_add(struct btr_merge *m, const uint8_t *data, size_t size);
/* Writes the merged profile (same format as the inputs; pprof gzipped).
 * The result does not depend on the order or grouping of the inputs
 * (merging is associative and commutative).  Returns 0 or -BTR_ERR_IO,
 * -BTR_ERR_NOMEM. */
int btr_merge_write(struct btr_merge *m, FILE *out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
