/* qemu_records.c - the records of the process's trace (g.w): one writer,
 * under g.lock, that turns itself off on the first write error (the guest
 * runs on untraced; btr record learns why from the shared state); and
 * the ground-truth log (gt=PATH), one file every process appends to.
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

/* @flush: at once (QEMU may die without calling us again, and `btr
 * record` then salvages every complete chunk), else with the next one. */
void write_rec_ex(const struct btr_record *r, int flush)
{
	pthread_mutex_lock(&g.lock);
	if (g.w && (btr_trace_write(g.w, r) < 0 || (flush && btr_trace_flush(g.w) < 0))) {
		/* The writer is unusable ($TMPDIR full); keep the guest
		 * running untraced rather than aborting it.  What was written
		 * stays as pSTEM.btr.partial, and btr record learns why from
		 * the shared page. */
		char kept[PATH_MAX];
		note_write_error(btr_trace_writer_error(g.w));
		btr_trace_writer_abort_keep(g.w, kept, sizeof(kept));
		g.w = NULL;
	}
	pthread_mutex_unlock(&g.lock);
}

void write_rec(const struct btr_record *r)
{
	write_rec_ex(r, 1);
}

/* Writes the thread's logged instructions and empties its buffer; once a
 * write has failed (a full disk) the log is closed and the rest dropped
 * (`btr record` says the ground truth is incomplete). */
void gt_flush(struct thr *t)
{
	if (!t->gt || !t->gt_n)
		return;
	/* One writev on an O_APPEND file: every process appends to the same
	 * log, and a block must not be split by another's. */
	struct { uint32_t magic, tid; uint64_t n; } h = { GT_MAGIC, t->tid, t->gt_n };
	struct iovec iov[2] = { { &h, sizeof(h) }, { t->gt, t->gt_n * 8 } };
	pthread_mutex_lock(&g.lock);
	ssize_t w = g.gt_fd >= 0 ? writev(g.gt_fd, iov, 2) : 0;
	if (g.gt_fd >= 0 && w != (ssize_t)(sizeof(h) + t->gt_n * 8)) {
		/* `btr record` says so (qemu_state.h); a short write to a
		 * file sets no errno: the disk was full */
		uint64_t zero = 0, e = w < 0 && errno ? (uint64_t)errno : ENOSPC;
		if (g.count)
			__atomic_compare_exchange_n(&g.count[QC_GTERR], &zero, e, 0, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
		close(g.gt_fd);
		g.gt_fd = -1;
	}
	pthread_mutex_unlock(&g.lock);
	t->gt_n = 0;
}
