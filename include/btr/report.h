/* btr/report.h - analyses over the common branch stream (btr/stream.h).
 *
 * Feed a report with branches and stream events (btr_report_branch,
 * btr_report_event - they have the signatures of the stream callbacks, so
 * a report can be the stream's callback context directly), then call
 * btr_report_finish and read the results with btr_report_get.
 *
 * Basic blocks: a block is the code between the target of a thread's
 * previous branch and the source of its next branch, [prev.to, b.from].
 * Its instruction count is b.insns (valid with BTR_BF_INSNS).  A block
 * whose start is unknown (first branch after an enable, gap or LBR
 * snapshot start) has start 0: it counts for its function, which is the
 * function containing b.from, but is not listed among the top blocks.
 * Without instruction counts (LBR, BTS) functions and blocks are ranked
 * by the number of branches leaving them and the result says so
 * (rank_by_insns == 0).
 *
 * Tables grow with the number of distinct threads, blocks, functions and
 * modules seen, never with the length of the trace.
 */
#ifndef BTR_REPORT_H
#define BTR_REPORT_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"
#include "btr/image.h"
#include "btr/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_report_opts {
	size_t sz;          /* sizeof(struct btr_report_opts) */
	unsigned top;       /* entries in top_functions/top_blocks; 0: 10 */
	unsigned max_gaps;  /* gaps described in detail; 0: 8 */
};

struct btr_report_thread {
	uint32_t tid;
	uint64_t insns;
	uint64_t branches;
	int exited;          /* a THREAD_EXIT was seen */
	int32_t exit_code;   /* its status, when @end is EXITED (or UNKNOWN in a
			      * trace before format 1.4) */
	const char *name;    /* THREAD_NAME, or NULL (owned by the report) */
	uint32_t end;        /* how it ended: enum btr_thread_end (UNKNOWN without
			      * a THREAD_EXIT, or from an older writer) */
	int32_t signo;       /* KILLED: the signal (the process's when the
			      * thread record does not say; 0 if unknown) */
};

struct btr_report_func {
	const char *name;    /* symbol; "[module]" for code of a module without a
			      * symbol there; "[unknown]" outside every module
			      * (owned by the report) */
	const char *module;  /* module path, or NULL */
	uint64_t addr;       /* symbol start (0 for [unknown]) */
	uint64_t insns;      /* instructions executed in it */
	uint64_t branches;   /* branches leaving it (= blocks executed) */
	const char *file;    /* source file of @addr, or NULL (owned by the report) */
	int line;
};

struct btr_report_block {
	uint64_t start, end; /* first instruction, the branch instruction */
	uint64_t count;      /* times executed */
	uint64_t insns;      /* instructions executed in it, all executions */
	const char *sym;     /* "func+0xoff" of @start (owned by the report) */
	const char *file;    /* source file of @start or NULL (owned by the report) */
	int line;
};

struct btr_report_gap {
	uint32_t tid;
	int reason;          /* negative enum btr_error */
	uint64_t offset;
	int from_flow;       /* 1: reported by the PT decoder, 0: container */
};

struct btr_report_module {
	uint64_t start, size, pgoff;
	const char *path;    /* recorded path (owned by the report) */
	const char *loaded;  /* file loaded into the image, or NULL */
	uint32_t pid;        /* the process that mapped it (0: not said) */
	/* appended: the program (file name) that process ran when it mapped
	 * it, "" if unknown (owned by the report): a forked child maps its
	 * parent's shell before it execs another program */
	const char *program;
};

struct btr_report_exit {
	int valid;           /* a PROCESS_EXIT record was seen */
	uint32_t pid, tid;
	int32_t code;        /* exit status if @signo == 0 */
	int32_t signo;       /* killed by this signal, 0 for a normal exit */
	uint64_t ip, addr;   /* where (0: unknown), fault address */
	const char *where;   /* "func+0xoff" of @ip, or NULL (owned by the report) */
};

/* One process of the trace (PROCESS records, or a pid named by threads
 * of a trace without them). */
struct btr_report_process {
	uint32_t pid, ppid;  /* ppid 0: the recorded command (or unknown) */
	const char *path;    /* its last program, "" if unknown (owned by the report) */
	const char *command; /* its argv joined by spaces, "" if unknown (owned) */
	uint64_t insns, branches;
	uint32_t threads;
	uint32_t execs;      /* programs it exec'd */
	int exited;          /* an exit status is known: */
	int32_t code;        /* exit status if @signo == 0 */
	int32_t signo;       /* killed by this signal */
	int untraced;        /* it ran untraced (from its start or from an exec) */
	const char *untraced_reason; /* why, or NULL (owned by the report) */
	int lost;            /* BTR_PROC_LOST: 1 its trace stops while it ran on,
			      * 2 it has no trace at all */
	const char *lost_reason;     /* why, or NULL (owned by the report) */
	/* appended: the programs (file names) it ran, in order, joined by
	 * " -> " (at most about 200 characters, then " -> ..."), "" if
	 * unknown (owned by the report) */
	const char *programs;
};

/* An --ip-filter range of a trace: link addresses [@start, @end] of @path
 * (@offsets 1: file offsets, the file being unreadable; @path "": kernel
 * addresses), and the function at @start ("" if none). */
struct btr_report_range {
	const char *path, *function;
	uint64_t start, end;
	int offsets;
};

struct btr_report_result {
	const char *backend;            /* "" if unknown */
	int has_insns;                  /* some branch carried an instruction count */
	int rank_by_insns;              /* top lists ranked by instructions (else branches) */
	uint64_t insns;                 /* executed instructions (sum of .insns) */
	uint64_t branches;              /* branches (incl. not-taken conditionals) */
	uint64_t taken;
	uint64_t mispredicted;          /* LBR only */
	uint64_t unclassified;          /* kind BTR_KIND_NONE (no code to classify) */
	/* Indexed by enum btr_lbr_class: type classes JCC..FAR_BRANCH, and the
	 * privilege counts CPL_EQ_0 (kernel source) / CPL_NEQ_0 (user). */
	uint64_t by_class[BTR_LBR__COUNT];
	uint64_t by_kind[BTR_KIND__COUNT];
	uint64_t gaps;                  /* all gaps (container + flow + overflow) */
	uint64_t overflows;             /* of which hardware overflows */
	const struct btr_report_gap *gap_list; size_t n_gap_list; /* the first max_gaps */
	const struct btr_report_thread *threads; size_t n_threads;  /* by tid */
	const struct btr_report_module *modules; size_t n_modules;  /* load order */
	const struct btr_report_func *top_functions; size_t n_top_functions;
	const struct btr_report_block *top_blocks; size_t n_top_blocks;
	size_t n_functions, n_blocks;   /* distinct functions / blocks seen */
	struct btr_report_exit exit;    /* the recorded command's (first process's) exit */
	/* Processes in the order they started; top lists cover all of them. */
	const struct btr_report_process *processes; size_t n_processes;
	uint64_t untraced;              /* processes / programs that ran untraced */
	/* TSX (PT): transactions that aborted (BTR_FLOW_TSX_ABORT events)
	 * and the instructions they had executed (their payloads; included
	 * in @insns). */
	uint64_t tsx_aborts, aborted_insns;
	/* appended: the recorder traced only IP ranges (--ip-filter,
	 * BTR_MACHINE_IP_FILTER): the counts cover the flow inside them */
	int ip_filtered;
	/* appended: the --ip-filter ranges the trace names (BTR_REC_IP_FILTER
	 * records; older traces have none) */
	const struct btr_report_range *ip_ranges; size_t n_ip_ranges;
	/* appended: snapshot windows (BTR_REC_WINDOW: `btr record -b qemu
	 * --snapshot`), each decoded on its own; 0 for a continuous trace */
	uint64_t windows;
};

struct btr_report;

/* Creates an empty report.  @opts may be NULL.  Returns 0,
 * -BTR_ERR_INVAL (bad opts->sz, NULL @out) or -BTR_ERR_NOMEM. */
int btr_report_new(const struct btr_report_opts *opts, struct btr_report **out);
void btr_report_free(struct btr_report *r);

/* Counts branch @b (a struct btr_report * passed as void * so it can be
 * a stream callback).  Returns 0, or 1 after an allocation failure (the
 * report then stops the stream and btr_report_finish returns
 * -BTR_ERR_NOMEM). */
int btr_report_branch(void *report, const struct btr_branch *b);
/* The same for @n branches (btr_stream_opts.branches): equal to @n calls
 * of btr_report_branch, faster (the thread is looked up once per run of
 * one thread's branches). */
int btr_report_branches(void *report, const struct btr_branch *b, size_t n);

/* Takes note of stream event @ev (threads, modules, gaps, exit; on EXEC
 * the blocks seen so far are symbolized with the old image).  Returns 0
 * or 1 like btr_report_branch. */
int btr_report_event(void *report, const struct btr_stream_event *ev);

/* Symbolizes with @img (may be NULL: addresses only), ranks, and fills
 * the result.  @backend (may be NULL) names the trace source.  Returns 0
 * or -BTR_ERR_NOMEM. */
int btr_report_finish(struct btr_report *r, struct btr_image *img, const char *backend);

/* The result, valid after btr_report_finish until btr_report_free. */
const struct btr_report_result *btr_report_get(const struct btr_report *r);

/* Convenience: runs a report analysis (btr_report_analysis_new) over
 * trace @path with @sopts through btr_analysis_run and hands its report
 * to the caller.  On success or on a read error after which a report was
 * still produced (-BTR_ERR_TRUNCATED, -BTR_ERR_DATA_LOST, ...), *@out
 * holds the report (free it with btr_report_free) and *@lost (may be NULL)
 * says whether trace data was lost.  Returns 0 or a negative error; *@out
 * is NULL if nothing could be read. */
int btr_report_trace(const char *path, const struct btr_stream_opts *sopts,
		     const struct btr_report_opts *ropts, struct btr_report **out, int *lost);

/* The report as an analysis (btr/analysis.h), to run alone or with other
 * analyses in one pass: btr_analysis_run(path, sopts, list, n, info).  Its
 * end finishes the report with the stream's image and backend; it writes
 * (btr_analysis_write) the formats "text" (the default) and "json" of
 * `btr report` (docs/report.md).  Returns 0, -BTR_ERR_INVAL,
 * -BTR_ERR_NOMEM.  (lib/analysis/report.c, like everything declared here.) */
struct btr_analysis;
int btr_report_analysis_new(const struct btr_report_opts *opts, struct btr_analysis **out);

/* The trace's name as the output says it (text "trace:", JSON "file";
 * copied).  Without it, the report names the trace by the path its run
 * opened (btr_stream_path).  Returns 0, -BTR_ERR_INVAL (@a is not a report analysis, NULL
 * @name) or -BTR_ERR_NOMEM. */
int btr_report_analysis_set_name(struct btr_analysis *a, const char *name);

/* The finished report of analysis @a (owned by @a), or NULL before its
 * end or if @a is not a report analysis. */
const struct btr_report *btr_report_analysis_get(const struct btr_analysis *a);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
