/* btr/callstack.h - call stacks rebuilt from the branch stream, per thread.
 *
 * Feeds on the common branch stream (btr/stream.h) and keeps, for every
 * thread, the stack of functions it is in, plus a calling-context tree
 * (CCT: one node per distinct call path) with the cost spent in each
 * path.  Profiles (call graph, flame graphs, timeline, pprof) and checks
 * build on it.
 *
 * What it copes with (docs/callstack.md):
 *  - calls and returns; a return is matched against the return addresses
 *    of the whole stack, so returns that skip frames (C++ unwinding,
 *    ret-based longjmp) pop every skipped frame;
 *  - tail calls: a jump (jmp, jmp_ind, taken jcc, or ret) to the first
 *    byte of a function replaces the top frame (PLT stubs and lazy-binding
 *    resolvers vanish this way: "main;puts", not "main;puts@plt");
 *  - longjmp: a jump out of the top function into a function lower in the
 *    stack pops down to that function;
 *  - signals: an asynchronous branch (BTR_KIND_ASYNC) or a re-enable of
 *    tracing at a function entry after a system call (a signal delivered
 *    on the way back to user space, as the qemu backend writes it) pushes
 *    a signal frame; tracing resuming at the interrupted instruction
 *    (rt_sigreturn), or an iret/sysret to it, pops it;
 *  - thread start, trace gaps (GAP events, PT gap/overflow) and LBR
 *    snapshots (DISCONTINUITY): the thread's stack restarts there; the
 *    first branches after a restart are looked ahead (up to
 *    BTR_CALLSTACK_LOOKAHEAD) so that returns past the bottom of the
 *    known stack synthesize the callers they return into, outermost
 *    first, before anything is attributed.
 *
 * Cost: every branch's instructions (.insns, or 1 per branch when the
 * trace has no instruction counts) and time (TSC delta, when the trace has
 * timestamps) are charged to the thread's top frame before the branch's
 * own transfer is applied.
 *
 * Functions are shared by processes: the code of an ELF file is one
 * function per (module file, entry - load bias), whatever process runs it
 * and wherever it is mapped (libc's strlen in 200 processes is one
 * function, and one CCT node where the call paths coincide).  Code that
 * no ELF file backs (JIT code, anonymous maps, raw files) is a function
 * of its process.  Threads and their stacks stay per thread.
 *
 * Memory grows with the number of threads, functions, distinct call paths
 * and stack depth (capped by opts.max_depth), never with trace length,
 * and not with the number of processes that run the same code.
 */
#ifndef BTR_CALLSTACK_H
#define BTR_CALLSTACK_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"
#include "btr/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BTR_CALLSTACK_LOOKAHEAD 64

/* How a frame came to be. */
enum btr_cs_frame_kind {
	BTR_CS_CALL = 0,   /* a call instruction */
	BTR_CS_TAIL,       /* a jump to a function entry replaced the caller */
	BTR_CS_SIGNAL,     /* a signal handler (or its return trampoline) */
	BTR_CS_ROOT,       /* where the thread's trace starts or restarts, or a
			    * caller synthesized from a return past the bottom */
};

struct btr_cs_frame {
	uint32_t func;       /* index into the function table (btr_callstack_func) */
	uint32_t node;       /* CCT node of the path ending in this frame */
	uint64_t ret;        /* expected return address, 0 if unknown */
	uint64_t site;       /* the call instruction, 0 if none */
	uint64_t resume;     /* BTR_CS_SIGNAL: the interrupted instruction */
	uint64_t lo, hi;     /* the function's address range [lo, hi) in the
			      * thread's process (lo: its entry there) */
	uint64_t enter_cost; /* thread cost clock at entry */
	uint64_t enter_time; /* thread time clock at entry */
	uint8_t kind;        /* enum btr_cs_frame_kind */
	uint8_t emitted;     /* free for the enter/leave callbacks' user */
	uint8_t returned;    /* a return came back to this frame: it runs on at
			      * its return address, whatever symbol stands
			      * there (ld.so's _start calls _dl_start, which
			      * returns to the label _dl_start_user) */
};

struct btr_cs_thread {
	uint32_t tid, pid;
	struct btr_cs_frame *frames;   /* [0] outermost .. [depth-1] top */
	unsigned depth;
	uint64_t cost;       /* instructions (or branches) of the thread so far */
	uint64_t time;       /* TSC ticks of the thread so far (0 without TSC) */
	uint64_t first_tsc;  /* TSC of its first timed branch, 0 if none */
	uint64_t branches;
	unsigned dropped;    /* pushes refused at max_depth, still open */
	void *user;          /* free for the callbacks' user */
	/* internal */
	uint64_t last_tsc, disable_ip;
	int restart;         /* the next branches start a new stack */
	struct btr_branch *pending;
	unsigned n_pending, cap_frames;
};

struct btr_cs_func {
	uint64_t addr;       /* entry address (symbol start, or the jump target)
			      * in process @pid; other processes may run the
			      * same function elsewhere (another load bias) */
	uint64_t size;       /* symbol size, 0 if unknown */
	uint32_t pid;        /* the first process it was seen in */
	const char *name;    /* "name" (symbol versions like "@@GLIBC_2.34" cut),
			      * "module+0xoff" or "0x..." without a symbol (owned) */
	const char *module;  /* module path, NULL if unknown (owned) */
	const char *file;    /* source file of the entry, NULL if unknown (owned) */
	int line;            /* its line, 0 if unknown */
	int has_symbol;      /* @addr is a symbol's start */
	int plt;             /* a PLT stub ("name@plt"): its cost and call go to
			      * the function it jumps to */
};

struct btr_cs_node {
	uint32_t parent;     /* 0 for children of the root; the root is node 0 */
	uint32_t func;       /* function index (root: UINT32_MAX) */
	uint64_t self_cost;  /* cost charged while this path was on top */
	uint64_t self_time;
	uint64_t calls;      /* times this path was entered */
};

/* Why a frame is left (the @how of the leave callback). */
enum btr_cs_leave {
	BTR_CS_LEAVE_RETURN = 0,  /* a matching return */
	BTR_CS_LEAVE_UNWIND,      /* skipped by a return/jump further down */
	BTR_CS_LEAVE_TAIL,        /* replaced by a tail call */
	BTR_CS_LEAVE_RESET,       /* gap, discontinuity, thread exit, end */
};

struct btr_callstack_opts {
	size_t sz;               /* sizeof(struct btr_callstack_opts) */
	unsigned max_depth;      /* deepest stack kept per thread (0: 65536) */
	int lines;               /* resolve source lines of functions (DWARF) */
	/* Called after a frame was pushed (t->frames[t->depth-1]) and before a
	 * frame is popped (t->frames[t->depth-1], @how why).  May be NULL. */
	void (*enter)(void *ctx, struct btr_cs_thread *t);
	void (*leave)(void *ctx, struct btr_cs_thread *t, enum btr_cs_leave how);
	void *ctx;
};

struct btr_callstack;

/* Creates a call-stack builder (@opts copied; may be NULL for defaults).
 * Returns 0, -BTR_ERR_INVAL (bad opts->sz, NULL @out) or -BTR_ERR_NOMEM. */
int btr_callstack_new(const struct btr_callstack_opts *opts, struct btr_callstack **out);
void btr_callstack_free(struct btr_callstack *cs);

/* The stream the branches come from (borrowed until btr_callstack_end):
 * function symbols come from its images.  Call before the first branch. */
void btr_callstack_begin(struct btr_callstack *cs, struct btr_stream *s);

/* Feeds branches / one event in stream order.  Return 0 or -BTR_ERR_NOMEM. */
int btr_callstack_branches(struct btr_callstack *cs, const struct btr_branch *b, size_t n);
/* Nonzero if a not-taken conditional branch of thread @tid would now
 * change nothing but the instruction count (so it may be left out with
 * its instructions added to the thread's next branch: btr/analysis.h
 * fold_ok): the thread is known and not looking ahead after a restart. */
int btr_callstack_fold_ok(const struct btr_callstack *cs, uint32_t tid);
/* What of the block of code @start..@from of process @pid (ending in a
 * direct jump or conditional branch to @to, else @to 0) changes nothing
 * for the stacks but the instruction count: BTR_FOLD_* bits (btr/ptflow.h
 * fold_block, btr/analysis.h).  Nothing of a block that starts a function
 * or runs into another one (that must be seen, docs/callstack.md); its
 * not-taken JCC otherwise; also its taken jump when @to lies in the same
 * function.  It depends only on the addresses and the process's code. */
int btr_callstack_fold_block(struct btr_callstack *cs, uint32_t pid, uint64_t start, uint64_t from, uint64_t to);
int btr_callstack_event(struct btr_callstack *cs, const struct btr_stream_event *ev);

/* Flushes look-ahead buffers and leaves every open frame of every thread
 * (how = BTR_CS_LEAVE_RESET).  Call while the stream still lives.
 * Returns 0 or -BTR_ERR_NOMEM. */
int btr_callstack_end(struct btr_callstack *cs);

/* Results, valid until btr_callstack_free.  Function and node indices are
 * dense: 0 .. n-1. */
size_t btr_callstack_nfuncs(const struct btr_callstack *cs);
const struct btr_cs_func *btr_callstack_func(const struct btr_callstack *cs, uint32_t i);
size_t btr_callstack_nnodes(const struct btr_callstack *cs);
const struct btr_cs_node *btr_callstack_node(const struct btr_callstack *cs, uint32_t i);
/* Threads seen, in order of appearance. */
size_t btr_callstack_nthreads(const struct btr_callstack *cs);
struct btr_cs_thread *btr_callstack_thread(struct btr_callstack *cs, size_t i);
/* Nonzero when every branch had an instruction count (costs are
 * instructions; otherwise they count branches) / a timestamp. */
int btr_callstack_has_insns(const struct btr_callstack *cs);
int btr_callstack_has_time(const struct btr_callstack *cs);

/* Writes the path of CCT node @node as "outer;...;inner" function names
 * into @buf (NUL-terminated, truncated to @size), each name as a folded
 * stack holds it: its `;` and control characters (a newline) become `?`
 * (docs/flame.md).  Returns the full length (like snprintf). */
size_t btr_callstack_path(const struct btr_callstack *cs, uint32_t node, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
