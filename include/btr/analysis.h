/* btr/analysis.h - analyses: consumers of the common branch stream.
 *
 * Every view, profile and check (report, coverage, CFG, call graph, flame
 * graph, check, ...) is an analysis: a small object that is fed the
 * branches and events of one btr_stream in order and then writes its
 * result.  Because they share one interface, one pass over a trace (one
 * decode) can feed any number of them:
 *
 *     struct btr_analysis *a[2];
 *     btr_cov_new(&copts, &a[0]);            (an analysis module's constructor)
 *     btr_callgraph_new(&gopts, &a[1]);
 *     btr_analysis_run(path, &sopts, a, 2, &info);
 *     btr_analysis_write(a[0], out, "lcov");
 *
 * An analysis module (lib/analysis/NAME.c, header btr/NAME.h) fills a
 * struct btr_analysis_ops and creates its handle with btr_analysis_new();
 * its own typed result accessors get their state back with
 * btr_analysis_state().  Analyses keep tables that grow with the code
 * seen (blocks, functions, call stacks), never with the trace's length.
 *
 * Order guarantee: branches and events reach an analysis exactly in
 * stream order; a batch passed to ops->branches holds consecutive
 * branches with no event between them (threads may interleave, as in the
 * trace).  Symbolize with the process's image: btr_stream_image_pid(s,
 * b->pid); on BTR_SEV_EXEC that image is about to be replaced, so
 * symbolize what you hold for that process then (or key results by
 * module-relative address, which survives exec and ASLR).
 */
#ifndef BTR_ANALYSIS_H
#define BTR_ANALYSIS_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "btr/branch.h"
#include "btr/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an analysis implements.  Every callback may be NULL.  Callbacks
 * that return int return 0 to go on, a negative enum btr_error to fail
 * (the run stops and returns it), or a positive value to stop the run
 * early without error (e.g. "found what I was looking for"). */
struct btr_analysis_ops {
	const char *name;   /* short name ("report", "cov", ...) for messages */
	/* Once, before the first branch; @s is the stream (borrowed for the
	 * run: images, pid lookups, backend). */
	int (*begin)(void *state, struct btr_stream *s);
	/* @n >= 1 consecutive branches (borrowed for the call). */
	int (*branches)(void *state, const struct btr_branch *b, size_t n);
	/* One stream event; every branch before it has been delivered. */
	int (*event)(void *state, const struct btr_stream_event *ev);
	/* Once, after the last branch and event, while the stream (and so its
	 * images) still lives: symbolize and finish here.  @status is 0 for a
	 * clean end or the stream's negative error (-BTR_ERR_TRUNCATED, ...,
	 * -BTR_ERR_DATA_LOST): results then cover what was read. */
	int (*end)(void *state, int status);
	/* Writes the result to @out in @format (NULL: the analysis' default;
	 * names are the analysis' own, e.g. "text", "json", "lcov").  Returns
	 * 0, -BTR_ERR_INVAL for a format it does not know, -BTR_ERR_IO. */
	int (*write)(void *state, FILE *out, const char *format);
	/* Frees @state (called by btr_analysis_free). */
	void (*destroy)(void *state);
	/* The names @write knows, NULL-terminated, the default first (NULL:
	 * none listed).  The CLI's --format checks, the fuzz targets and the
	 * docs take the list from here. */
	const char *const *formats;
	/* appended: Optional: the counted form of @branches (btr/branch.h
	 * struct btr_branch_count; @n >= 1 records, borrowed for the call).
	 * An analysis that only needs counts (blocks, edges, instructions)
	 * implements it; when every analysis of a run does,
	 * btr_analysis_run lets the PT decoder count conditional and direct
	 * branches on its cached blocks instead of writing a record per
	 * execution (btr/stream.h @counts), which is most of the cost of a
	 * count view.  Such an analysis still gets @branches for data that
	 * is not aggregated (BTS, LBR, per-CPU PT) and may get both kinds in
	 * one run; records with counts come in order relative to events but
	 * not to each other within one data record.  Set BTR_ORDERED=1 in
	 * the environment to make btr_analysis_run deliver every branch in
	 * order through @branches instead (to compare). */
	int (*counts)(void *state, const struct btr_branch_count *c, size_t n);
	/* appended: Optional: nonzero if a not-taken conditional branch of
	 * thread @tid would now change nothing for the analysis but the
	 * instruction count (its .insns could as well go to the thread's
	 * next branch).  When every analysis of a run that takes branches
	 * says so, btr_analysis_run lets the PT decoder leave such branches
	 * out (btr/stream.h @fold_ok); asked before each data record and
	 * after each event of the thread.  BTR_ORDERED=1: never. */
	int (*fold_ok)(void *state, uint32_t tid);
	/* appended: Optional, with @fold_ok: what of the block of code
	 * @start..@from of process @pid (ending in a direct jump or
	 * conditional branch to @to, else @to 0) changes nothing for the
	 * analysis but the instruction count, as BTR_FOLD_* bits
	 * (btr/ptflow.h fold_block): BTR_FOLD_NOT_TAKEN its JCC when not
	 * taken, BTR_FOLD_TAKEN also when taken (a jump inside one function,
	 * for a call stack).  It must depend on nothing but its arguments and
	 * the process's code: the decoder keeps the answer.  A run leaves out
	 * what every analysis that takes branches lets go (without
	 * @fold_block: not-taken JCCs). */
	int (*fold_block)(void *state, uint32_t pid, uint64_t start, uint64_t from, uint64_t to);
};

struct btr_analysis;

/* Wraps @state (ownership passes to the analysis: ops->destroy frees it)
 * with @ops (borrowed; normally a static table).  Returns 0, -BTR_ERR_INVAL
 * or -BTR_ERR_NOMEM (then ops->destroy(state) has been called). */
int btr_analysis_new(const struct btr_analysis_ops *ops, void *state, struct btr_analysis **out);

/* Frees @a and its state; NULL is fine. */
void btr_analysis_free(struct btr_analysis *a);

/* The state given to btr_analysis_new (for the module's typed accessors). */
void *btr_analysis_state(const struct btr_analysis *a);
const struct btr_analysis_ops *btr_analysis_ops(const struct btr_analysis *a);

/* The output formats of the library's analysis named @name (its ops'
 * name: "report", "cov", "callgraph", ...): NULL-terminated, the default
 * first, static; NULL for an unknown name or one that writes nothing
 * ("blocks").  What `btr CMD --format` accepts comes from here. */
const char *const *btr_analysis_formats(const char *name);

/* The library's analyses by name (lib/analysis/registry.h, the one list):
 * btr_analysis_name(i) is the i-th name (i = 0, 1, ...; NULL past the
 * last), in an order where an analysis that reads another's results comes
 * after it ("blocks" before "cov").  The Python package and the fuzz
 * targets take their list of analyses from here. */
const char *btr_analysis_name(size_t i);

/* What btr_analysis_create needs for analysis @name (BTR_ANALYSIS_NEEDS_*
 * bits; 0 for an unknown name too). */
enum {
	BTR_ANALYSIS_NEEDS_BLOCKS = 1,     /* args->blocks: a blocks analysis run before it */
	BTR_ANALYSIS_NEEDS_FUNCTION = 2,   /* args->function */
};
unsigned btr_analysis_needs(const char *name);

/* The arguments every analysis can be created with by name (the rest of
 * its options at their defaults: its own constructor, btr_cov_new,
 * btr_cfg_new, ..., takes them all). */
struct btr_analysis_args {
	size_t sz;                      /* sizeof(struct btr_analysis_args) */
	struct btr_analysis *blocks;    /* borrowed: in the same run, earlier, outliving it */
	const char *function;           /* annotate, cfg: the function (copied) */
	const char *module;             /* cov, bolt, afdo: the module (NULL: the default) */
	int events;                     /* flame: keep enter/leave events (speedscope) */
};
/* Creates the library's analysis @name with @args (may be NULL if it
 * needs nothing): 0 and the analysis in *@out, -BTR_ERR_NOT_FOUND for an
 * unknown name, -BTR_ERR_INVAL when what btr_analysis_needs says is
 * missing, -BTR_ERR_NOMEM. */
int btr_analysis_create(const char *name, const struct btr_analysis_args *args, struct btr_analysis **out);

/* Writes @a's result (ops->write); -BTR_ERR_UNSUPPORTED if it has none,
 * -BTR_ERR_INVAL before its run has ended (never run, or still running:
 * an error, not an empty result; a view such as cov, cfg or annotate
 * needs its blocks analysis' run to have ended). */
int btr_analysis_write(struct btr_analysis *a, FILE *out, const char *format);

/* What a run saw. */
struct btr_analysis_run_info {
	size_t sz;                   /* sizeof(struct btr_analysis_run_info) */
	int lost;                    /* trace data was lost (truncation, bad chunk) */
	int status;                  /* how the stream ended: 0 clean, its read
				      * error, or -BTR_ERR_DATA_LOST */
	char backend[32];            /* the trace's backend ("qemu", "perf", ...) */
	struct btr_stream_stats stats;
	/* The causes of lost data (btr_stream_losses): set @losses (caller-
	 * owned, may be NULL) and @max_losses before the run; @n_losses is
	 * how many there are in all (more than @max_losses: the first ones
	 * were copied). */
	struct btr_stream_loss *losses;
	size_t max_losses;
	size_t n_losses;
};

/* Opens trace @path with @sopts (may be NULL; its branch/event/insn
 * callbacks and ctx are replaced), feeds every analysis of @list (@n of
 * them, borrowed) in one pass - begin, branch batches and events in
 * stream order, end - and fills @info (may be NULL).  Returns 0 when the
 * whole trace was read and nothing was lost; a positive value if an
 * analysis stopped the run early (ends were still called); the stream's
 * error (-BTR_ERR_TRUNCATED, -BTR_ERR_CHECKSUM, ..., or -BTR_ERR_DATA_LOST
 * for a trace read to its end that lost data on the way: btr_stream_run)
 * after the analyses were ended with it, so partial results are usable
 * (@info->status is then the same value, @info->lost 1); a negative error
 * of an analysis or of opening the trace (-BTR_ERR_NOENT,
 * -BTR_ERR_BAD_MAGIC, ...: nothing was fed, no end called; @info->status
 * 0).  An analysis object runs once: -BTR_ERR_INVAL for one that has run
 * (or is running) already, or is listed twice (its counts would add up);
 * create a new one for the next run. */
int btr_analysis_run(const char *path, const struct btr_stream_opts *sopts,
		     struct btr_analysis *const *list, size_t n,
		     struct btr_analysis_run_info *info);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
