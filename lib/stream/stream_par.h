/* stream_par.h - what the parallel run (stream_par.c: btr_stream_run with
 * opts.jobs) needs of the stream (stream.c), which never calls it. */
#ifndef BTR_STREAM_PAR_H
#define BTR_STREAM_PAR_H

#include "btr/stream.h"

/* Called by btr_stream_record for every record before anything else is
 * done with it (and with @rec NULL when btr_stream_finish begins).
 * Returns 0 to process the record, 1 to skip it, 2 to process the part of
 * a PT record that btr__stream_cut gave, or a negative error that
 * btr_stream_record returns. */
typedef int (*stream_rec_hook)(void *ctx, const struct btr_record *rec);
void btr__stream_hook(struct btr_stream *s, stream_rec_hook fn, void *ctx);
/* Whether @s has a hook. */
int btr__stream_hooked(const struct btr_stream *s);
/* The same, @ctx freed by @free_ctx with the stream. */
void btr__stream_hook_owned(struct btr_stream *s, stream_rec_hook fn, void *ctx, void (*free_ctx)(void *ctx));

/* btr_stream_opts.shards: makes stream @s (made by btr_stream_open, not
 * yet read from) decode only its shard of the data (stream_par.c); 0
 * (also without shards, or when done before), -BTR_ERR_NOMEM.  Called by
 * btr_stream_run and the batch reader (stream_batch.c). */
int btr__stream_shard_start(struct btr_stream *s);

/* The part of the next PT record to decode (the hook returns 2): bytes
 * [@from, @to).  With @from > 0 the stream of its thread (or CPU) goes on
 * there as if this stream had decoded the bytes before: @from is a PSB,
 * and the decoder starts afresh at the PSB at @warm (< @from) and decodes
 * [@warm, @from) without output, which gives it the state at @from of a
 * decoder of the whole stream (the PSB resets the return stack, the IP
 * compression and the timing; the first branch after @warm the count of
 * instructions and the straight-line run).  With @from 0 and @to a PSB:
 * the stream decodes up to that PSB as usual. */
void btr__stream_cut(struct btr_stream *s, size_t warm, size_t from, size_t to);

/* The stream's options (its copy) and, in *@path, the file btr_stream_open
 * opened (NULL for a stream fed by btr_stream_record). */
const struct btr_stream_opts *btr__stream_opts(const struct btr_stream *s, const char **path);

/* Hand to @s's consumer what another stream over the same trace decoded:
 * branches (after that stream's filter) and counts as they are, events
 * with the bookkeeping the stream does for them (gaps, lost flow).
 * Return 0, or the stop value / negative error, as the callbacks would. */
int btr__stream_replay_branches(struct btr_stream *s, const struct btr_branch *b, size_t n);
int btr__stream_replay_counts(struct btr_stream *s, const struct btr_branch_count *c, size_t n);
int btr__stream_replay_event(struct btr_stream *s, struct btr_stream_event *ev);
/* Adds @a's data counters (bytes, snapshots, branches, filtered, blocks). */
void btr__stream_add_stats(struct btr_stream *s, const struct btr_stream_stats *a);

#endif
