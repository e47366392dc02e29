/* btr/ptflow.h - Intel PT flow reconstruction: packets + code -> the
 * executed instruction and branch stream.
 *
 * The decoder is packet driven: it walks the code image (through a block
 * cache) only as far as the packets seen so far prove execution went, so
 * a stream may be fed in pieces of any size.  Semantics follow the Intel
 * SDM Vol. 3C chapter "Intel Processor Trace"; see docs/pt-decode.md for
 * the exact rules (return compression, FUP binding, overflow recovery,
 * timestamps and their precision, errata).
 */
#ifndef BTR_PTFLOW_H
#define BTR_PTFLOW_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"
#include "btr/image.h"
#include "btr/insn.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_ptflow_config {
	size_t sz;                 /* sizeof(struct btr_ptflow_config) */
	uint16_t cpu_family, cpu_model, cpu_stepping; /* for errata workarounds */
	uint8_t mtc_freq;
	uint32_t nom_freq;
	uint32_t cpuid15_eax, cpuid15_ebx;
	int no_retcomp;            /* return compression was disabled */
	unsigned n_ip_filter;
	uint64_t ip_filter[4][2];  /* [start, end] inclusive ranges */
	uint32_t tid;              /* copied into every event */
	/* 0: apply the errata of cpu_family/model like libipt's
	 * pt_cpu_errata(); BTR_PTFLOW_NO_ERRATA: apply none. */
	uint32_t flags;
	/* log2 of the number of block-cache entries (0: 16, i.e. 64K blocks,
	 * about 7.5 MiB; 8..22 accepted).  Memory is fixed by this, not by the
	 * trace. */
	uint8_t cache_bits;
	/* appended: */
	uint32_t pid;              /* copied into every branch (.pid), like @tid */
};

enum {
	BTR_PTFLOW_NO_ERRATA = 1u << 0,
};

enum btr_flow_event_type {
	BTR_FLOW_ENABLE = 1,   /* tracing (re)enabled at .ip */
	BTR_FLOW_DISABLE,      /* tracing disabled after .ip */
	BTR_FLOW_GAP,          /* flow lost: .reason, .offset; resumes at next enable */
	BTR_FLOW_OVERFLOW,     /* OVF packet */
	BTR_FLOW_ASYNC,        /* interrupt/exception from .ip (to in branch event) */
	BTR_FLOW_PAGING,       /* PIP: .cr3 */
	BTR_FLOW_MODE,         /* execution mode change */
	BTR_FLOW_TSX_ABORT,    /* .payload: the instructions the transaction had
				* executed, rolled back (0 if its start was not seen) */
	BTR_FLOW_PTWRITE,      /* .payload */
	BTR_FLOW_STOP,         /* TraceStop */
	/* appended (values above are stable): */
	BTR_FLOW_TSX,          /* MODE.TSX begin (.payload 1) or commit (0) outside PSB+ */
	BTR_FLOW_TRIG,         /* TRIG: .payload = TRBV | MULT << 8 | ICNT-valid << 9 | ICNT << 16 */
	BTR_FLOW_CFE,          /* event trace CFE: .payload = type | vector << 8 | IP bit << 16 */
	BTR_FLOW_EVD,          /* event trace EVD: .reason = type (>= 0), .payload = data */
};

struct btr_flow_event {
	enum btr_flow_event_type type;
	int reason;            /* GAP: negative btr_error */
	uint64_t offset;       /* stream offset of the packet that caused it */
	uint64_t ip;
	uint64_t tsc;          /* 0 if unknown */
	uint64_t payload;      /* PTWRITE payload, PAGING cr3, MODE: enum btr_exec_mode,
				* TSX, TRIG, CFE, EVD: see the types */
};

/* Returns "enable", "disable", "gap", "overflow", ... for @t, or "?". */
const char *btr_flow_event_name(enum btr_flow_event_type t);

struct btr_ptflow_callbacks {
	/* Every branch (taken or not taken conditional, every unconditional
	 * and asynchronous transfer), in execution order.  @b is valid only
	 * during the call.  .to is the fall-through for a not-taken branch,
	 * 0 when the target is unknown (suppressed IP).  .insns counts the
	 * instructions since the previous branch including this one (an
	 * asynchronous branch's source instruction did not execute).  Return
	 * nonzero to stop decoding. */
	int (*branch)(void *ctx, const struct btr_branch *b);
	/* Every executed instruction, if non-NULL (slower); reported before
	 * the branch that ends its block.  @insn is valid during the call;
	 * only the last instruction of a block has kind/flags/target set. */
	int (*insn)(void *ctx, uint64_t ip, const struct btr_insn *insn);
	/* Events: enable, disable, gap, overflow, ... */
	int (*event)(void *ctx, const struct btr_flow_event *ev);
	void *ctx;
	/* Optional and faster than @branch: the same branch records, in
	 * execution order, in batches of 1..BTR_PTFLOW_BATCH at @b (owned by
	 * the decoder, valid only during the call).  If set, @branch is not
	 * called.  Every event and instruction callback comes after the
	 * batch holding the branches before it.  Return nonzero to stop
	 * decoding (the decoder may have walked up to a batch further). */
	int (*branches)(void *ctx, const struct btr_branch *b, size_t n);
	/* appended: Optional, for consumers that need counts rather than
	 * order (coverage, block and edge counts).  If set (and @insn is
	 * NULL), @branch and @branches are not called: every branch is
	 * reported once through @counts as a struct btr_branch_count
	 * (btr/branch.h), in batches of 1..BTR_PTFLOW_BATCH at @c (owned by
	 * the decoder, valid during the call).  Conditional branches, direct
	 * jumps and direct calls that start their block are counted on the
	 * decoder's cached blocks (two counters per block, no record per
	 * execution) and reported, with their counts, before the
	 * btr_ptflow_decode call that ran them returns (or before the block
	 * cache is emptied); the others (returns, indirect and far transfers,
	 * branches inside a TSX transaction and the first after one) come
	 * in execution order with count 1.  Events come after the ordered
	 * records before them; the counted records of a call may come after
	 * its events, except that all of them are reported before a TSX
	 * transaction begins.  The sum of the counts equals the branches
	 * @branches would have been given; every record holds the @start of
	 * its straight-line run (the previous branch's target, an ENABLE
	 * event's IP, or 0 after a GAP, OVERFLOW or DISABLE), so nothing is
	 * lost but the order and the timing.  Not supported by
	 * btr_ptflow_decode_parallel (-BTR_ERR_UNSUPPORTED). */
	int (*counts)(void *ctx, const struct btr_branch_count *c, size_t n);
	/* appended: Optional, with @branches (and without @counts and
	 * @insn): asked at the start of every btr_ptflow_decode call and
	 * after every event.  While it last returned nonzero the decoder may
	 * leave out not-taken conditional branches (JCC) of walks without
	 * timing (no TSC, no CYC for the record, outside TSX): their
	 * instructions are added to the .insns of the next record delivered.
	 * The last branch before an event, a stop or the end of a decode
	 * call is always delivered, so the instructions never move across an
	 * event.  For consumers to which such a branch changes nothing but
	 * the count of instructions (the call stack views); the branches
	 * left out are counted in btr_ptflow_folded().  Not used by
	 * btr_ptflow_decode_parallel. */
	int (*fold_ok)(void *ctx);
	/* appended: Optional, with @fold_ok: asked once for each block of
	 * straight-line code the decoder caches, when it first decodes it:
	 * @start its first instruction, @from its last, @to the target of a
	 * direct jump (JMP) or conditional branch (JCC) that ends it (else 0).
	 * The answer, BTR_FOLD_* bits, is what the decoder may leave out of
	 * the block while @fold_ok says yes: 0 nothing (then also nothing of
	 * the branch that ends the next block, if this one ends without a
	 * branch); BTR_FOLD_NOT_TAKEN its JCC when not taken (what every
	 * block gets without @fold_block); with BTR_FOLD_TAKEN also its JCC
	 * or JMP when taken, counted in btr_ptflow_folded() as well.  For call
	 * stack views: a jump inside one function changes nothing for them,
	 * but code that runs into another function without a branch must be
	 * seen.  The answer must depend on nothing but the arguments and the
	 * code: it is kept with the block (a decode call with another
	 * @fold_block or @ctx empties the block cache). */
	int (*fold_block)(void *ctx, uint64_t start, uint64_t from, uint64_t to);
};

/* btr_ptflow_callbacks.fold_block's answer. */
#define BTR_FOLD_NOT_TAKEN 1
#define BTR_FOLD_TAKEN 2

/* Largest batch passed to btr_ptflow_callbacks.branches. */
#define BTR_PTFLOW_BATCH 256

struct btr_ptflow;

/* Creates a flow decoder reading code from @img (borrowed: must outlive
 * the decoder; it is only read, so several decoders may share it across
 * threads).  @cfg (copied) may be NULL for defaults.  The decoder owns a
 * fixed-size block cache (about 7.5 MiB); memory does not grow with the
 * trace.  Returns 0 or -BTR_ERR_NOMEM, -BTR_ERR_INVAL. */
int btr_ptflow_new(struct btr_image *img, const struct btr_ptflow_config *cfg,
		   struct btr_ptflow **out);
void btr_ptflow_free(struct btr_ptflow *f);

/* Decodes the PT stream @buf (@size bytes, caller-owned) and calls @cb.
 * May be called repeatedly with consecutive pieces of one stream.
 * Returns 0 when the buffer is consumed, a positive value if a callback
 * stopped decoding, or a negative error for a failure that is not a
 * trace gap (gaps are reported as events and decoding goes on). */
int btr_ptflow_decode(struct btr_ptflow *f, const uint8_t *buf, size_t size,
		      const struct btr_ptflow_callbacks *cb);

/* Forgets the stream position and flow state (not the block cache or
 * the statistics): the next btr_ptflow_decode starts a new stream, at
 * its first PSB, at stream offset @offset.  Use it when the input has a
 * hole (for example discontinuous AUX buffers).  A BTR_FLOW_GAP event
 * with -BTR_ERR_TRUNCATED is reported through the next decode's
 * callbacks if the decoder was tracing. */
void btr_ptflow_reset(struct btr_ptflow *f, uint64_t offset);

/* Makes @f read code from @img (borrowed, like btr_ptflow_new's) from
 * now on, keeping the flow state: for a per-CPU stream in which another
 * process, with its own address space, starts to run.  Called between
 * decode calls it takes effect at once; called from an event callback
 * during btr_ptflow_decode it takes effect right after a BTR_FLOW_ENABLE
 * or BTR_FLOW_PAGING event (call it from those; from any other callback
 * it waits for the next of them or the next decode call).  A different
 * image empties the block cache, at a cost proportional to the blocks
 * decoded since the last change.  Returns 0 or -BTR_ERR_INVAL. */
int btr_ptflow_set_image(struct btr_ptflow *f, struct btr_image *img);

struct btr_ptflow_stats {
	uint64_t insns, branches, gaps, bytes;
	uint64_t by_kind[BTR_KIND__COUNT];
	uint64_t overflows;      /* OVF packets */
	uint64_t blocks_decoded; /* block cache misses (basic blocks decoded) */
	/* TSX: transactions that aborted (MODE.TSX abort while in one) and
	 * the instructions they had executed (counted in @insns too). */
	uint64_t tsx_aborts, tsx_aborted_insns;
};
/* Fills @st with the totals since btr_ptflow_new (all decode calls); with
 * zeros if @f is NULL. */
void btr_ptflow_stats(const struct btr_ptflow *f, struct btr_ptflow_stats *st);
/* The branches left out since btr_ptflow_new (btr_ptflow_callbacks.fold_ok;
 * counted in btr_ptflow_stats too); 0 if @f is NULL. */
uint64_t btr_ptflow_folded(const struct btr_ptflow *f);

/* Names of the errata workarounds enabled for @cfg's CPU (for example
 * "bdm70 skd007 skd022 skd010 skl014 skl168"), written into @buf
 * (NUL-terminated, "" if none).  Returns the length. */
int btr_ptflow_errata_names(const struct btr_ptflow_config *cfg, char *buf, size_t size);

/* Decodes the whole stream @buf (caller-owned) in parallel: splits it at
 * PSB packets into pieces of about @chunk bytes (0: 16 KiB); @nthreads
 * worker threads, each with its own decoder and block cache, decode the
 * pieces in order into 2 x @nthreads buffers while the calling thread
 * delivers the branch (or batched branches) and event callbacks in
 * stream order (cb->insn is not supported here: -BTR_ERR_UNSUPPORTED).
 * The output equals btr_ptflow_decode's on the same stream because the
 * hardware resets its return-compression stack at every PSB.  Memory is bounded by the
 * buffers (48 bytes per branch of a piece).  @st (may be NULL) receives
 * the summed statistics.  Returns 0, a positive value if a callback
 * stopped decoding, -BTR_ERR_INVAL, -BTR_ERR_NOMEM (also when no thread
 * can be started), -BTR_ERR_UNSUPPORTED. */
int btr_ptflow_decode_parallel(struct btr_image *img, const struct btr_ptflow_config *cfg,
			       const uint8_t *buf, size_t size, unsigned nthreads, size_t chunk,
			       const struct btr_ptflow_callbacks *cb, struct btr_ptflow_stats *st);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
