/* stream_threads.c - the stream's table of threads (stream_threads.h). */
#include "stream_threads.h"
#include "btr/error.h"

#include <stdlib.h>

static size_t slot(const struct stream_threads *t, uint32_t tid)
{
	size_t j = (tid * 2654435761u) & (t->cap - 1);
	while (t->v[j].used && t->v[j].tid != tid)
		j = (j + 1) & (t->cap - 1);
	return j;
}

struct stream_thread *stream_threads_get(struct stream_threads *t, uint32_t tid)
{
	/* Grow at 50% load; the table is sized by the threads seen. */
	if ((t->n + 1) * 2 > t->cap) {
		struct stream_threads g = { .cap = t->cap ? t->cap * 2 : 16 };
		if (!(g.v = calloc(g.cap, sizeof(*g.v))))
			return NULL;
		for (size_t i = 0; i < t->cap; i++)
			if (t->v[i].used)
				g.v[slot(&g, t->v[i].tid)] = t->v[i];
		free(t->v);
		t->v = g.v;
		t->cap = g.cap;
	}
	struct stream_thread *e = &t->v[slot(t, tid)];
	if (!e->used) {
		*e = (struct stream_thread){ .tid = tid, .used = 1 };
		t->n++;
	}
	return e;
}

int stream_threads_set_pid(struct stream_threads *t, uint32_t tid, uint32_t pid)
{
	struct stream_thread *e = stream_threads_get(t, tid);
	if (!e)
		return -BTR_ERR_NOMEM;
	e->pid = pid;
	t->last_tid = 0;
	return 0;
}

uint32_t stream_threads_pid(struct stream_threads *t, uint32_t tid)
{
	if (!tid || !t->cap)
		return 0;
	if (tid == t->last_tid)
		return t->last_pid;
	const struct stream_thread *e = &t->v[slot(t, tid)];
	if (!e->used)
		return 0;
	t->last_tid = tid;
	t->last_pid = e->pid;
	return e->pid;
}

void stream_threads_free(struct stream_threads *t)
{
	free(t->v);
	*t = (struct stream_threads){ 0 };
}
