/* btr/batch.h - branches pulled in batches into the caller's buffer.
 *
 * btr_stream_run pushes branches into callbacks.  A batch reader turns that
 * around: the caller asks for the next up to @max branches and gets them
 * copied into its own array of struct btr_branch (48 bytes each, the
 * layout of btr/branch.h), which is what language bindings want (the
 * Python package maps each batch onto a numpy structured array without
 * touching single branches; docs/python.md).
 *
 *     struct btr_batch *b;
 *     btr_batch_open(path, &sopts, 0, &b);
 *     struct btr_branch buf[4096];
 *     long n;
 *     while ((n = btr_batch_read(b, buf, 4096)) > 0)
 *         use(buf, n);
 *     (n < 0: an error; the branches before it were delivered;
 *      n == -BTR_ERR_DATA_LOST: the whole trace was read, but data was
 *      lost on the way: the branches are right but not all there)
 *     btr_batch_free(b);
 *
 * The branches, their order and their contents are exactly those of
 * btr_stream_run over the same trace with the same options.
 */
#ifndef BTR_BATCH_H
#define BTR_BATCH_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"
#include "btr/stream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of btr_batch_open. */
enum {
	/* Process only the records that describe the trace (machine,
	 * processes, threads, modules, exits, switches) and skip its data
	 * (PT, BTS, LBR, branches): no decoding, no branches; the events and
	 * the stream's images (symbolization) are those of a full pass.  A
	 * quick listing of a trace's processes, threads and modules. */
	BTR_BATCH_NO_DATA = 1u << 0,
};

struct btr_batch;

/* Opens trace @path (.btr or perf.data) as btr_stream_open does with
 * @opts (may be NULL: defaults; its branch and branches callbacks are
 * replaced, its event callback and ctx are kept and called as records are
 * processed, which can be before the caller has read the branches that
 * precede the event).  @flags: BTR_BATCH_*.  Returns 0 and the reader in
 * *@out, or the errors of btr_stream_open (-BTR_ERR_NOENT,
 * -BTR_ERR_BAD_MAGIC, ...), -BTR_ERR_INVAL (NULL @path/@out, unknown
 * flags), -BTR_ERR_NOMEM. */
int btr_batch_open(const char *path, const struct btr_stream_opts *opts, unsigned flags, struct btr_batch **out);

/* Copies the next up to @max branches into @buf (caller-owned, room for
 * @max) and returns how many; fewer than @max only at the end of the
 * trace.  Returns 0 at the clean end (the stream is finished then, nothing
 * was lost), or a negative error once every branch before it was
 * returned: the reader's (-BTR_ERR_TRUNCATED, ...) where the file is
 * damaged, -BTR_ERR_DATA_LOST at the end of a trace that lost data on the
 * way (a skipped chunk, a recorder's loss record: never a silent 0; which
 * data, btr_stream_losses(btr_batch_stream(b), ...)), -BTR_ERR_NOMEM,
 * -BTR_ERR_INVAL (NULL @b or @buf, @max 0).  The error is returned once;
 * the calls after it return 0.  An event callback that returns nonzero stops the
 * stream: the branches before the stop are returned, then 0.  Memory:
 * besides @buf, the branches of one record (one PT chunk's worth) that
 * did not fit are held until the next call. */
long btr_batch_read(struct btr_batch *b, struct btr_branch *buf, size_t max);

/* The stream under @b (owned by @b): images for symbolizing
 * (btr_stream_image_pid), statistics, losses, the backend.  After
 * btr_batch_read returned 0 every record has been processed. */
struct btr_stream *btr_batch_stream(struct btr_batch *b);

/* Reads the rest of the trace without returning branches (the images,
 * statistics and events are then complete).  Returns 0 or the error
 * btr_batch_read would return (-BTR_ERR_DATA_LOST too). */
int btr_batch_finish(struct btr_batch *b);

/* Frees @b and its stream; NULL is fine. */
void btr_batch_free(struct btr_batch *b);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
