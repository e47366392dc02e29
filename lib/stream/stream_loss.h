/* stream_loss.h - what the common branch stream (lib/stream/stream.c) knows
 * about lost trace data: damaged chunks, a cut container, and processes
 * whose trace is cut or missing (BTR_PROC_LOST), for btr_stream_losses.
 * Not a public header. */
#ifndef BTR_STREAM_LOSS_H
#define BTR_STREAM_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "btr/stream.h"
#include "btr/trace.h"

/* Zero-initialized is empty; owned by the stream, freed with
 * stream_loss_free. */
struct stream_losses {
	struct sl_proc {
		uint32_t pid, ppid;
		uint8_t started, ended, lost;
		char comm[32];
	} *p;
	size_t n_p, cap_p;
	struct btr_stream_loss *l;
	size_t n_l, cap_l;
	int closed;   /* stream_loss_end ran */
};

/* A PROCESS record: START/EXEC name the process, LOST adds a CUT (or,
 * with no START before, MISSING) entry.  Returns 1 if it was LOST, 0, or
 * -BTR_ERR_NOMEM. */
int stream_loss_process(struct stream_losses *t, const struct btr_rec_process *pr);
/* A PROCESS_EXIT record of @pid.  Returns 0 or -BTR_ERR_NOMEM. */
int stream_loss_exit(struct stream_losses *t, uint32_t pid);
/* A chunk skipped at @offset.  Returns 0 or -BTR_ERR_NOMEM. */
int stream_loss_chunk(struct stream_losses *t, uint64_t offset);
/* The container ended early with @reason at @offset: an END entry, then
 * a CUT entry for every started process without an exit or LOST record.
 * Returns 0 or -BTR_ERR_NOMEM. */
int stream_loss_end(struct stream_losses *t, int reason, uint64_t offset);

/* Thread @tid's flow is unknown near @ip (an OVF in a qemu trace, at
 * stream offset @offset).  Returns 0 or -BTR_ERR_NOMEM. */
int stream_loss_flow(struct stream_losses *t, uint32_t tid, uint64_t ip, uint64_t offset);

size_t stream_loss_get(const struct stream_losses *t, struct btr_stream_loss *out, size_t max);
void stream_loss_free(struct stream_losses *t);

#endif
