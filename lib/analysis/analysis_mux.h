/* analysis_mux.h - the multiplexer under btr_analysis_run (analysis.c):
 * feeds the analyses of a list from one stream.  Internal (not exported:
 * the public way to run analyses is btr_analysis_run); the tests and the
 * fuzz targets use it to feed analyses from records built in memory. */
#ifndef BTR_ANALYSIS_MUX_H
#define BTR_ANALYSIS_MUX_H

#include "btr/analysis.h"

/* btr_analysis_run over a stream the caller feeds itself: btr__analysis_mux_new
 * returns callbacks to put into struct btr_stream_opts (branch, event,
 * ctx = the mux) before btr_stream_new; call btr__analysis_mux_begin after
 * creating the stream, feed it, then btr__analysis_mux_end.  For tests and
 * for commands that build streams from records in memory. */
struct btr__analysis_mux;
/* -BTR_ERR_INVAL, as btr_analysis_run, for an analysis that has run. */
int btr__analysis_mux_new(struct btr_analysis *const *list, size_t n, struct btr__analysis_mux **out);
void btr__analysis_mux_free(struct btr__analysis_mux *m);
/* Stream callbacks (ctx = the mux). */
int btr__analysis_mux_branch(void *mux, const struct btr_branch *b);
/* The batched form (btr_stream_opts.branches): @n branches at @b.  A
 * large batch goes to the analyses as it is, without a copy. */
int btr__analysis_mux_branches(void *mux, const struct btr_branch *b, size_t n);
int btr__analysis_mux_event(void *mux, const struct btr_stream_event *ev);
/* The counted form (btr_stream_opts.counts): passes @c to every
 * analysis' ops->counts (only put it into the stream options when every
 * analysis has one: btr__analysis_mux_counts_ok). */
int btr__analysis_mux_counts(void *mux, const struct btr_branch_count *c, size_t n);
/* 1 if every analysis of @m that takes branches takes counts too
 * (ops->counts; those that take neither do not matter), else 0. */
int btr__analysis_mux_counts_ok(const struct btr__analysis_mux *m);
/* btr_stream_opts.fold_ok over a mux: nonzero if every analysis of @mux
 * that takes branches has ops->fold_ok and it says yes for @tid (buffered
 * branches are delivered first). */
int btr__analysis_mux_fold_ok(void *mux, uint32_t tid);
/* 1 if every analysis of @m that takes branches has ops->fold_ok (and one
 * does), else 0. */
int btr__analysis_mux_fold_any(const struct btr__analysis_mux *m);
/* btr_stream_opts.fold_block over a mux: the BTR_FOLD_* bits every
 * analysis of @mux that takes branches lets go (BTR_FOLD_NOT_TAKEN for
 * one without ops->fold_block). */
int btr__analysis_mux_fold_block(void *mux, uint32_t pid, uint64_t start, uint64_t from, uint64_t to);
int btr__analysis_mux_begin(struct btr__analysis_mux *m, struct btr_stream *s);
/* Flushes buffered branches and calls every end with @status.  Returns 0
 * or the first analysis error. */
int btr__analysis_mux_end(struct btr__analysis_mux *m, int status);

#endif
