/* stream_threads.h - the stream's table of threads (lib/stream/): each
 * thread's process and the instructions of its branches the filter dropped,
 * by tid.  Open addressing, grown at half load; the stream owns one and
 * calls down into it (it calls nothing of the stream). */
#ifndef BTR_STREAM_THREADS_H
#define BTR_STREAM_THREADS_H

#include <stddef.h>
#include <stdint.h>

struct stream_thread {
	uint32_t tid;
	uint32_t pid;             /* from the thread's records, 0 if unknown */
	int used;
	uint64_t pending_insns;
};

/* Zero-initialized: empty. */
struct stream_threads {
	struct stream_thread *v;  /* cap entries, a power of two */
	size_t n, cap;
	uint32_t last_tid, last_pid; /* stream_threads_pid's one-entry cache */
};

/* The entry of @tid, added (pid 0) if new; NULL if out of memory. */
struct stream_thread *stream_threads_get(struct stream_threads *t, uint32_t tid);
/* Sets the process of @tid (added if new).  Returns 0 or -BTR_ERR_NOMEM. */
int stream_threads_set_pid(struct stream_threads *t, uint32_t tid, uint32_t pid);
/* The process of @tid, 0 if unknown. */
uint32_t stream_threads_pid(struct stream_threads *t, uint32_t tid);
void stream_threads_free(struct stream_threads *t);

#endif
