/* btr/diverge.h - where two runs went different ways: the first branch
 * whose outcome differs between matching threads of two traces, with the
 * call stacks, the last branches before it and the instruction counts of
 * both runs (docs/diverge.md).
 *
 * Threads are matched by position: the k-th process to start in trace A
 * (processes in the order the traces list them, which is the order of the
 * process tree's creation) with the k-th of B, and in each the j-th thread
 * to start with the j-th; or one pair chosen by thread id.  Addresses are
 * compared as (module file, link address), so two runs of the same
 * program compare with ASLR on; code outside every module compares by
 * run-time address.
 *
 * Both traces are decoded side by side (one thread each, a bounded queue
 * between), once per thread pair: time is linear in the traces' length,
 * memory bounded (the queues, the re-synchronisation window, the stacks).
 */
#ifndef BTR_DIVERGE_H
#define BTR_DIVERGE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_diverge_opts {
	size_t sz;                 /* sizeof(struct btr_diverge_opts) */
	/* Stream options used for both traces (elfs, root, debug_dirs;
	 * callbacks, pid, tid and filter are ignored, but for @progress:
	 * called from the two reader threads, one call at a time, with the
	 * bytes read of both files of the thread pair being compared and
	 * their sizes added); may be NULL. */
	const struct btr_stream_opts *sopts;
	unsigned context;          /* branches before the divergence kept per run (0: 8, at most 256) */
	int all;                   /* re-synchronise after each divergence and list every region */
	uint64_t window;           /* --all: branches searched for a common call after a divergence (0: 1M) */
	size_t max_regions;        /* --all: regions kept per thread pair (0: 1000) */
	uint32_t tid_a, tid_b;     /* compare only this pair of threads (0: all pairs by position) */
	/* Compare only branches from these modules (paths or base names,
	 * @n_modules of them; NULL/0: every branch).  The others still move
	 * the call stacks and count their instructions.  Code whose path
	 * depends on data alignment (libc's string functions under ASLR) or
	 * on the machine (the loader) otherwise shows as divergences. */
	const char *const *modules;
	size_t n_modules;
};

/* A code address of one run, placed. */
struct btr_dv_loc {
	uint64_t addr;             /* run-time address */
	const char *module;        /* module file path (owned by the result), NULL outside every module */
	uint64_t offset;           /* link address within @module (= addr without one) */
	const char *func;          /* function name (owned by the result), NULL if unknown */
	uint64_t func_off;         /* @offset - the function's start */
	const char *file;          /* source file (owned by the result), NULL without DWARF */
	int line;
};

struct btr_dv_branch {
	struct btr_dv_loc from, to;
	uint8_t kind;              /* enum btr_branch_kind */
	uint8_t taken;
	uint64_t index;            /* 1-based number of the branch in its thread */
	uint64_t insns;            /* instructions the thread had executed when it ran (this one's included) */
};

/* One run's side of a divergence. */
struct btr_dv_side {
	int ended;                 /* the thread ended here (no branch: @at is not set) */
	int gap;                   /* trace data of the thread was lost here: nothing is known beyond */
	struct btr_dv_branch at;   /* the first branch that differs */
	struct btr_dv_branch *last;/* the branches before it, oldest first */
	size_t n_last;
	struct btr_dv_loc *stack;  /* call stack at @at: innermost first (the function @at is in, then
				    * the call sites that led there) */
	size_t depth;
};

/* A divergent region (--all): from a divergence to where both runs
 * entered the same function from the same call site again. */
struct btr_dv_region {
	struct btr_dv_side a, b;   /* where it began (last/stack only for the first region) */
	uint64_t a_insns, b_insns; /* instructions each run spent in the region */
	uint64_t a_branches, b_branches;
	int resynced;              /* 0: the runs did not meet again (within the window, or before an end) */
	struct btr_dv_loc sync;    /* where both runs met again (the target of the call or return both
				    * made at the same depth), if @resynced */
};

struct btr_dv_thread {
	uint32_t pid_a, tid_a, pid_b, tid_b;   /* 0 for a thread one trace lacks */
	int diverged;              /* 0: the two threads ran the same branches */
	uint64_t branches_a, branches_b;       /* branches of each thread in all */
	uint64_t insns_a, insns_b;
	struct btr_dv_region *regions;         /* the first divergence, then (--all) the others */
	size_t n_regions;
	int regions_cut;           /* more regions than opts.max_regions */
	uint64_t compared;         /* branch pairs compared equal before the first divergence
				    * (all of them without opts.modules; 0 if none was from
				    * the chosen modules) */
};

struct btr_diverge_result {
	struct btr_dv_thread *threads;
	size_t n_threads;
	int lost_a, lost_b;        /* a trace lost data (results cover what was read) */
};

/* Compares traces @a and @b.  Returns 0 and *@out (free with
 * btr_diverge_free) - check each thread's .diverged -, or a negative
 * enum btr_error of opening or reading a trace (-BTR_ERR_NOENT,
 * -BTR_ERR_BAD_MAGIC, ...), -BTR_ERR_NOT_FOUND (opts.tid_a/tid_b not in
 * the traces), -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
int btr_diverge(const char *a, const char *b, const struct btr_diverge_opts *opts,
		struct btr_diverge_result **out);

void btr_diverge_free(struct btr_diverge_result *r);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
