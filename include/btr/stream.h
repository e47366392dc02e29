/* btr/stream.h - the common branch stream: any trace -> branches + events.
 *
 * A stream reads a trace (.btr, or perf.data through the same reader) and
 * turns every source of control-flow data into one sequence of struct
 * btr_branch plus events:
 *
 *   MODULE_LOAD / EXEC     -> ELF files placed into a struct btr_image at
 *                             their load bias (build-ids checked, paths
 *                             remapped through opts.root / opts.debug_dirs /
 *                             opts.elfs)
 *   PT                     -> one PT flow decoder (btr/ptflow.h) per
 *                             (thread, cpu) stream, chunks fed in order; a
 *                             jump in stream_offset is a GAP event
 *   BTS                    -> btr/bts.h
 *   LBR                    -> btr/lbr.h, one DISCONTINUITY event before
 *                             each snapshot (snapshots are not contiguous)
 *   BRANCHES               -> delivered as they are
 *   THREAD_*, PROCESS_EXIT -> events
 *
 * Module lifetimes: recorders write module records as they happen but
 * trace data in chunks, so the data of the calls into a module can come
 * after its MODULE_UNLOAD record (the rest of the unloading thread's
 * buffer in traces of older recorders, other threads' buffers).  An
 * unloaded module therefore stays in its process's image - its code
 * cannot run again - until another module is mapped over its addresses
 * (then the data before that mapping has been decoded, as far as the
 * recorder wrote it in order), or the process execs.  The same file
 * mapped again at the same load bias (dlopen after dlclose) simply stays.
 *
 * Memory is bounded by the number of threads, modules and the decoders'
 * caches, independent of the trace's length, and nearly flat in the number
 * of processes (each has an image, but the images share the module files,
 * btr/image.h): at most 16 PT flow decoders live at once (each has a block
 * cache of several MiB); with more concurrently traced streams the least
 * recently fed one is freed and resumes at its next PSB after a GAP
 * (reason -BTR_ERR_NOSYNC).  A thread's decoder is freed at its
 * THREAD_EXIT record; data of it after that resumes the same way.
 *
 * A stream is used from one thread at a time.
 */
#ifndef BTR_STREAM_H
#define BTR_STREAM_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/ptflow.h"
#include "btr/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

enum btr_stream_event_type {
	BTR_SEV_MACHINE = 1,     /* .rec: the BTR_REC_MACHINE record */
	BTR_SEV_MODULE_LOAD,     /* .rec: module record; .path: the file actually
				  * loaded into the image (NULL if none was) */
	BTR_SEV_MODULE_UNLOAD,   /* .rec; delivered when the module leaves the
				  * image, which still holds it during the event:
				  * not at the unload record (PT data of the calls
				  * into it can come after that, see "Module
				  * lifetimes" below) but when another module is
				  * mapped over its addresses, its process execs
				  * or starts over, or at btr_stream_finish */
	BTR_SEV_EXEC,            /* .rec; delivered BEFORE the image is replaced:
				  * .image is still the old program's image */
	BTR_SEV_THREAD_START,    /* .rec, .tid */
	BTR_SEV_THREAD_EXIT,     /* .rec, .tid */
	BTR_SEV_THREAD_NAME,     /* .rec, .tid */
	BTR_SEV_PROCESS_EXIT,    /* .rec */
	BTR_SEV_FLOW,            /* .flow: a PT flow event (enable, disable,
				  * gap, overflow, ...) of thread .tid */
	BTR_SEV_GAP,             /* data of thread .tid lost or skipped: .reason
				  * -BTR_ERR_TRUNCATED (stream_offset jump at
				  * .offset, BTS record cut short), CHECKSUM (bad
				  * chunk, .tid 0, .offset in the file), NOSYNC (the
				  * thread's PT decoder was evicted, see below), or
				  * a PT decoder failure */
	BTR_SEV_DISCONTINUITY,   /* the next branch of .tid does not continue
				  * from the previous one (a new LBR snapshot;
				  * or a snapshot window: .rec is then its
				  * BTR_REC_WINDOW record, .offset its start) */
	BTR_SEV_PROCESS,         /* .rec: a BTR_REC_PROCESS record (process
				  * start, exec with argv, untraced); .pid */
	BTR_SEV_SWITCH,          /* .rec: a BTR_REC_SWITCH record (context
				  * switch); .tid/.pid the thread switched in or
				  * out; also kept per CPU for
				  * btr_stream_cpu_thread */
	BTR_SEV_IP_FILTER,       /* .rec: a BTR_REC_IP_FILTER record (one range of
				  * --ip-filter: only the flow inside the ranges is
				  * in the trace) */
};

/* One event.  Every pointer is valid only during the callback. */
struct btr_stream_event {
	enum btr_stream_event_type type;
	uint32_t tid;                       /* thread, 0 if unknown */
	uint32_t pid;                       /* process of .tid (or of the
					     * record), 0 if unknown */
	int reason;                         /* GAP: negative enum btr_error */
	uint64_t offset;                    /* GAP: stream offset / file offset */
	const struct btr_record *rec;       /* record-derived events, else NULL */
	const struct btr_flow_event *flow;  /* BTR_SEV_FLOW, else NULL */
	const char *path;                   /* MODULE_LOAD: file used, or NULL */
	struct btr_image *image;            /* the image of process .pid (see
					     * btr_stream_image_pid) */
};

/* A user-supplied ELF file (`--elf FILE[:BASE]`). */
struct btr_stream_elf {
	const char *path;
	uint64_t base;     /* load bias, valid if @has_base */
	int has_base;      /* 1: add at @base at once (and again after EXEC);
			    * 0: use it for recorded modules whose build-id or
			    * file name matches (ET_EXEC files are also added at
			    * once, their addresses are fixed) */
};

struct btr_stream_opts {
	size_t sz;                           /* sizeof(struct btr_stream_opts) */
	/* Only branches matching @filter are delivered (NULL: all).  The
	 * instructions of dropped branches are added to the .insns of the
	 * next delivered branch of the same thread, so instruction totals
	 * stay exact: .insns then counts the instructions since the previous
	 * delivered branch. */
	const struct btr_filter *filter;
	/* Prefix prepended to absolute recorded module paths ("sysroot");
	 * NULL: none.  A file found under @root wins over the plain path. */
	const char *root;
	/* NULL-terminated list of directories searched by build-id
	 * (DIR/.build-id/xx/rest.debug and DIR/.build-id/xx/rest) and by file
	 * name (DIR/basename); NULL: none. */
	const char *const *debug_dirs;
	const struct btr_stream_elf *elfs;   /* user ELF files, @n_elfs of them */
	unsigned n_elfs;
	/* Only branches and events of process @pid / thread @tid are
	 * delivered (0: all).  Events without a process (MACHINE, container
	 * GAPs) are always delivered.  Other processes are still decoded
	 * where their data is interleaved, but nothing of them is passed on. */
	uint32_t pid, tid;
	/* Callbacks; each may be NULL.  Return nonzero to stop the stream
	 * (btr_stream_run then returns that value, if positive, or 1). */
	int (*branch)(void *ctx, const struct btr_branch *b);
	int (*event)(void *ctx, const struct btr_stream_event *ev);
	/* Every executed instruction of PT sources (slower; NULL: off). */
	int (*insn)(void *ctx, uint32_t tid, uint64_t ip, const struct btr_insn *insn);
	void *ctx;
	/* appended: optional and faster than @branch: the same branches, in
	 * the same order, in batches of 1 to BTR_PTFLOW_BATCH at @b (valid
	 * only during the call; PT streams come in whole decoder batches,
	 * other sources often one at a time).  If set, @branch is not called.
	 * Every event comes after the batch holding the branches before it.
	 * Return nonzero to stop the stream (as @branch). */
	int (*branches)(void *ctx, const struct btr_branch *b, size_t n);
	/* appended: progress of btr_stream_run (NULL: none), for a caller
	 * that shows it (the library never prints).  Called with
	 * @progress_ctx, the bytes of the input read so far (the reader's
	 * offset) and the input's size (btr_trace_info.size; 0 if unknown),
	 * after the first record and then whenever 256 KiB more were read,
	 * and once more with @done == @total when the input ended (@total
	 * then the bytes read if the size was unknown; reading
	 * on after a bad chunk, a stop or an error make no final call).  It
	 * only reports: it cannot stop the stream. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* appended: with @pid or @tid set, 1 skips the per-thread trace data
	 * (PT, BTS, LBR, branches records of a thread, not per-CPU data) of
	 * threads outside the selection instead of decoding it.  What is
	 * delivered is the same (threads are decoded independently), except
	 * that the statistics then count only the selected threads' data and
	 * gaps, and that the selected threads' decoders are never evicted
	 * for others (see "at most 16 PT flow decoders" above).  0: decode
	 * everything (the default).  For shards of one trace decoded in
	 * parallel (docs/python.md). */
	int skip_unselected;
	/* appended: Optional, for consumers of counts (btr/branch.h struct
	 * btr_branch_count): if set, the branches of per-thread PT data are
	 * delivered through @counts instead of @branch/@branches, aggregated
	 * by the flow decoder (btr/ptflow.h "counts": returns, indirect and
	 * far transfers in order with count 1, conditional and direct
	 * branches counted on the decoder's blocks and reported at the end of
	 * each data record).  All branches of a data record are delivered
	 * before the next record's events.  Other data (BTS, LBR, branch
	 * records, per-CPU PT), and every branch when @filter, @pid, @tid or
	 * @insn is set, still go to @branch/@branches in order.  The
	 * statistics count each branch @count times.  Return nonzero to stop
	 * (as @branch). */
	int (*counts)(void *ctx, const struct btr_branch_count *c, size_t n);
	/* appended: Optional, with @branches: asked (with the thread) before
	 * each data record of per-thread PT is decoded and after each of its
	 * events; while it says nonzero, the flow decoder may leave out that
	 * thread's not-taken conditional branches and add their instructions
	 * to the next branch delivered (btr/ptflow.h "fold_ok": never across
	 * an event, never with timing).  For consumers that such a branch
	 * changes nothing for but the instruction count.  The statistics
	 * still count every branch.  Not used with @counts, @filter, @pid,
	 * @tid, @insn, or for other data. */
	int (*fold_ok)(void *ctx, uint32_t tid);
	/* appended: Optional, with @fold_ok: btr/ptflow.h "fold_block" for the
	 * per-thread PT data of process @pid: the BTR_FOLD_* bits saying what
	 * may be left out of the block of code @start..@from (ending in a
	 * direct jump or conditional branch to @to, else @to 0) while
	 * @fold_ok says yes.  Asked once per block a decoder caches; the
	 * answer must depend on nothing but the arguments and the code.
	 * Without it, not-taken JCCs may be left out everywhere. */
	int (*fold_block)(void *ctx, uint32_t pid, uint64_t start, uint64_t from, uint64_t to);
	/* appended: threads btr_stream_run decodes in (btr_analysis_run
	 * too).  1: one, the caller's.  N > 1: N decoder threads, each with
	 * its own reader and images over the same file, decode the per-thread
	 * data of a share of the trace's threads (whole threads; per-CPU PT
	 * by CPU), balanced by their bytes, while the calling thread reads
	 * the other records and hands every branch, event and log message to
	 * the callbacks exactly in the order, and with the contents, of one
	 * thread (the callbacks are called from the caller's thread only).
	 * 0: 1 for now (measured slower in wall time on a loaded 2-core
	 * machine: docs/performance.md).  One thread whatever @jobs says for a stream with
	 * @insn or @fold_ok (they ask the consumer as the decoder goes), with
	 * @tid and @skip_unselected (one thread's data), one not made by
	 * btr_stream_open on a regular file, one already read from, and
	 * under btr_stream_step.  Memory: each decoder thread has a stream's
	 * (images, decoders) plus at most 1 MiB of decoded output waiting
	 * (4 MiB once it decodes segments of a thread cut at PSBs, so that
	 * it can decode one segment ahead).
	 * Differences to one thread: with more than 16 threads' PT
	 * interleaved (the decoder limit above applies per decoder thread),
	 * and with @filter over per-CPU PT (the instructions of filtered
	 * branches pass on within a decoder thread), the output may differ.
	 * BTR_LOG=debug logs "stream: N decoder threads started".  A long
	 * thread's (or CPU's) PT is cut into segments at PSBs that several
	 * decoder threads decode (each decoder brought to the state at its
	 * segment's start through the PSB period before it, without output),
	 * so one thread's data is decoded in several too; BTR_LOG=debug logs
	 * "stream: segments of a thread's data after its first: N, decoded in
	 * M decoder threads". */
	unsigned jobs;
	/* appended: with @shards > 1 (at most 64), the stream decodes only
	 * shard @shard (0 .. @shards - 1) of the trace's data: what decoder
	 * thread @shard of a run with @jobs = @shards decodes (whole threads,
	 * per-CPU PT by CPU, and segments of long threads' PT cut at PSBs).
	 * Every branch and flow event of the trace comes from exactly one
	 * shard; the other records (modules, threads, processes, ...) are
	 * read and their events delivered by each.  So per-branch sums
	 * (counts by kind, edges) over the shards equal those of the whole
	 * trace; what needs the branches before (call stacks, blocks from
	 * the previous branch's target) differs at the segments' starts.
	 * For decoding one trace in several processes (python btr.dask,
	 * docs/python.md).  Needs btr_stream_open; decodes in the caller's
	 * thread (@jobs is not used); 0 or 1: everything.  @shard >= @shards
	 * or @shards > 64: -BTR_ERR_INVAL from btr_stream_open. */
	unsigned shard, shards;
};

struct btr_stream;

/* Creates a stream that is fed with btr_stream_record().  @opts is
 * copied (the strings and arrays it points to are borrowed and must
 * outlive the stream).  Returns 0, -BTR_ERR_INVAL (bad opts->sz or NULL
 * @out), -BTR_ERR_NOMEM, or an error of adding a user ELF with a base
 * (-BTR_ERR_NOENT, -BTR_ERR_BAD_ELF, ...). */
int btr_stream_new(const struct btr_stream_opts *opts, struct btr_stream **out);

/* Opens trace file @path (.btr or perf.data) and creates a stream over
 * it.  Returns 0 or the errors of btr_stream_new and btr_trace_reader_new
 * (-BTR_ERR_NOENT, -BTR_ERR_PERM, -BTR_ERR_BAD_MAGIC, -BTR_ERR_BAD_VERSION,
 * -BTR_ERR_TRUNCATED, ...). */
int btr_stream_open(const char *path, const struct btr_stream_opts *opts, struct btr_stream **out);

/* Processes one record (caller-owned; not kept).  Returns 0, a positive
 * value if a callback asked to stop, or a negative error that ends the
 * stream (-BTR_ERR_NOMEM).  Trace data the decoders cannot follow becomes
 * GAP / FLOW events, not errors. */
int btr_stream_record(struct btr_stream *s, const struct btr_record *rec);

/* Reads every record of the trace opened by btr_stream_open and then
 * calls btr_stream_finish.  Returns 0 at the clean end (the whole trace,
 * nothing lost), a positive value if a callback stopped the stream, or a
 * negative error.  A chunk with a bad checksum is skipped with a GAP
 * event (reason -BTR_ERR_CHECKSUM) and reading goes on;
 * -BTR_ERR_TRUNCATED (and other reader errors) are returned after
 * everything before the damage was delivered and the stream finished.
 * Loss is never a 0: a trace read to its end that lost data on the way
 * (a skipped chunk, a recorder's BTR_PROC_LOST record) returns
 * -BTR_ERR_DATA_LOST, and everything readable was delivered (accept it to
 * use partial results; btr_stream_losses() says what was lost). */
int btr_stream_run(struct btr_stream *s);

/* One turn of btr_stream_run: reads the next record of the trace opened by
 * btr_stream_open and processes it (a damaged chunk is skipped with its
 * GAP event, as there).  At the end of the input, or at a reader error,
 * sets *@end to 1 and finishes the stream (btr_stream_finish); later calls
 * only set *@end again.  Otherwise sets *@end to 0.  Returns what
 * btr_stream_run would: 0, a positive value if a callback stopped the
 * stream, the reader's error (-BTR_ERR_TRUNCATED, ...: *@end is 1),
 * -BTR_ERR_DATA_LOST at the end of a trace that lost data (*@end is 1; so
 * do later calls) or another negative error; -BTR_ERR_INVAL for a stream
 * not made by btr_stream_open or a NULL @end.  For callers that pace the
 * decoding themselves (btr/batch.h). */
int btr_stream_step(struct btr_stream *s, int *end);

/* Flushes per-thread state at the end of the input (BTS bytes left over
 * become a GAP).  Called by btr_stream_run; call it yourself after the
 * last btr_stream_record.  Returns 0, or a positive value if a callback
 * stopped (loss is not in this return: a stream fed record by record asks
 * btr_stream_data_lost()). */
int btr_stream_finish(struct btr_stream *s);

/* The image the stream decodes with (owned by the stream; replaced on
 * EXEC records, valid until then or until btr_stream_free). */
struct btr_image *btr_stream_image(struct btr_stream *s);

/* The image of process @pid: its own modules, replaced when that process
 * execs (valid until then or until btr_stream_free; owned by the stream).
 * Branches carry .pid, so consumers symbolize b->from with
 * btr_stream_image_pid(s, b->pid).  @pid 0 or a process the trace never
 * named gives the image of the trace's first process.  Never NULL for a
 * live stream. */
struct btr_image *btr_stream_image_pid(struct btr_stream *s, uint32_t pid);

/* The thread that runs on @cpu at time @tsc according to the SWITCH
 * records processed so far (perf SWITCH and SWITCH_CPU_WIDE): the last
 * switch on @cpu at or before @tsc decides; a switch out leaves the CPU
 * to nobody known.  Returns 1 and sets *@pid and *@tid, or 0 if unknown.
 * Memory: the stream keeps every switch record (16 bytes each), so that
 * per-CPU trace data, which perf writes after the switches it spans, can
 * be attributed to threads. */
int btr_stream_cpu_thread(struct btr_stream *s, int32_t cpu, uint64_t tsc, uint32_t *pid, uint32_t *tid);

/* The process id of thread @tid as the trace's records say, 0 if unknown. */
uint32_t btr_stream_pid_of(struct btr_stream *s, uint32_t tid);

struct btr_stream_stats {
	uint64_t records;        /* records processed */
	uint64_t pt_bytes, bts_bytes, lbr_snapshots;
	uint64_t branches;       /* branches delivered (after the filter) */
	uint64_t filtered;       /* branches dropped by the filter */
	uint64_t gaps;           /* GAP events + flow GAP/OVERFLOW events */
	uint64_t lost_chunks;    /* chunks skipped (bad checksum) */
	unsigned modules_loaded; /* module files placed into the image */
	unsigned modules_missing;/* recorded modules without a usable file */
	unsigned buildid_mismatch;
	int read_error;          /* the reader's terminating error, 0 if clean */
	uint64_t pt_blocks;      /* basic blocks the PT decoders decoded (cache misses) */
};
void btr_stream_get_stats(const struct btr_stream *s, struct btr_stream_stats *st);

/* Returns nonzero if trace data was lost while reading the container
 * (bad checksum, truncation, unreadable record) or while recording (a
 * BTR_PROC_LOST record: a process's trace is cut or missing) - not
 * counting gaps the recording itself contains (overflows, code missing
 * for decoding).  btr_stream_losses() says where and for which processes. */
int btr_stream_data_lost(const struct btr_stream *s);

/* One cause of lost data (btr_stream_losses). */
enum btr_stream_loss_kind {
	BTR_LOSS_CHUNK = 1,    /* a damaged chunk at @offset was skipped */
	BTR_LOSS_END,          /* the container ends early: the input stops
				* at @offset (@reason: -BTR_ERR_TRUNCATED, ...) */
	BTR_LOSS_CUT,          /* process @pid ran on after its trace data
				* stops (a BTR_PROC_LOST record, or a process
				* without an exit record in a cut container) */
	BTR_LOSS_MISSING,      /* process @pid ran but has no trace at all */
	BTR_LOSS_FLOW,         /* thread @pid's flow is unknown at one place:
				* the qemu recorder could not tell where a
				* block another thread ran at the same time
				* faulted (an OVF in its stream); @detail
				* names the thread and the address */
};
struct btr_stream_loss {
	uint32_t kind;         /* enum btr_stream_loss_kind */
	uint32_t pid, ppid;    /* CUT/MISSING: the process (ppid 0 if unknown);
				* FLOW: pid is the thread */
	int32_t reason;        /* negative enum btr_error */
	uint64_t offset;       /* CHUNK/END: file offset; else 0 */
	char comm[32];         /* CUT/MISSING: the program's file name, "" if
				* unknown (truncated to fit) */
	char detail[64];       /* the recorder's words (BTR_PROC_LOST), "" */
};

/* Copies up to @max causes of lost data, in the order they were found
 * (after btr_stream_run: a cut container's CUT entries come last), into
 * @out (caller-owned, may be NULL when @max is 0) and returns how many
 * there are in all.  Nonzero exactly when btr_stream_data_lost() is,
 * except for a stream fed by btr_stream_record without any. */
size_t btr_stream_losses(const struct btr_stream *s, struct btr_stream_loss *out, size_t max);

/* The backend named by the trace's MACHINE record ("qemu", "perf", ...)
 * or "" before one was seen.  Owned by the stream. */
const char *btr_stream_backend(const struct btr_stream *s);

/* The path the stream was opened with (btr_stream_open's @path; owned by
 * the stream), "" for NULL.  Analyses name the trace with it (the
 * report's "trace:" line and JSON "file"). */
const char *btr_stream_path(const struct btr_stream *s);

void btr_stream_free(struct btr_stream *s);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
