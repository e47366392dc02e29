/* stream_loss.c - causes of lost trace data for the common branch
 * stream (stream_loss.h). */
#include "stream_loss.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"

static struct sl_proc *proc_get(struct stream_losses *t, uint32_t pid)
{
	for (size_t i = t->n_p; i-- > 0;)   /* the newest process first */
		if (t->p[i].pid == pid)
			return &t->p[i];
	if (t->n_p == t->cap_p) {
		size_t nc = t->cap_p ? t->cap_p * 2 : 16;
		struct sl_proc *np = realloc(t->p, nc * sizeof(*np));
		if (!np)
			return NULL;
		t->p = np;
		t->cap_p = nc;
	}
	struct sl_proc *p = &t->p[t->n_p++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

static struct btr_stream_loss *add(struct stream_losses *t, uint32_t kind, int reason)
{
	if (t->n_l == t->cap_l) {
		size_t nc = t->cap_l ? t->cap_l * 2 : 8;
		struct btr_stream_loss *nl = realloc(t->l, nc * sizeof(*nl));
		if (!nl)
			return NULL;
		t->l = nl;
		t->cap_l = nc;
	}
	struct btr_stream_loss *l = &t->l[t->n_l++];
	memset(l, 0, sizeof(*l));
	l->kind = kind;
	l->reason = reason;
	return l;
}

static void set_comm(char *dst, size_t size, const char *path)
{
	if (!path || !*path)
		return;
	const char *b = strrchr(path, '/');
	snprintf(dst, size, "%s", b && b[1] ? b + 1 : path);
}

int stream_loss_process(struct stream_losses *t, const struct btr_rec_process *pr)
{
	struct sl_proc *p = proc_get(t, pr->pid);
	if (!p)
		return -BTR_ERR_NOMEM;
	if (pr->event == BTR_PROC_START) {
		/* a pid used again is a new process */
		p->started = 1;
		p->ended = p->lost = 0;
		p->ppid = pr->ppid;
		p->comm[0] = 0;
	}
	if (pr->event == BTR_PROC_START || pr->event == BTR_PROC_EXEC)
		set_comm(p->comm, sizeof(p->comm), pr->path);
	if (pr->event != BTR_PROC_LOST)
		return 0;
	set_comm(p->comm, sizeof(p->comm), pr->path);
	p->lost = 1;
	struct btr_stream_loss *l = add(t, p->started ? BTR_LOSS_CUT : BTR_LOSS_MISSING,
					pr->reason < 0 ? pr->reason : -BTR_ERR_IO);
	if (!l)
		return -BTR_ERR_NOMEM;
	l->pid = p->pid;
	l->ppid = p->ppid ? p->ppid : pr->ppid;
	memcpy(l->comm, p->comm, sizeof(l->comm));
	snprintf(l->detail, sizeof(l->detail), "%s", pr->detail ? pr->detail : "");
	return 1;
}

int stream_loss_exit(struct stream_losses *t, uint32_t pid)
{
	struct sl_proc *p = proc_get(t, pid);
	if (!p)
		return -BTR_ERR_NOMEM;
	p->ended = 1;
	return 0;
}

int stream_loss_flow(struct stream_losses *t, uint32_t tid, uint64_t ip, uint64_t offset)
{
	struct btr_stream_loss *l = add(t, BTR_LOSS_FLOW, -BTR_ERR_OVERFLOW);
	if (!l)
		return -BTR_ERR_NOMEM;
	l->pid = tid;
	snprintf(l->detail, sizeof(l->detail), "thread %" PRIu32 " near 0x%" PRIx64 " (stream offset %" PRIu64 ")",
		 tid, ip, offset);
	return 0;
}

int stream_loss_chunk(struct stream_losses *t, uint64_t offset)
{
	struct btr_stream_loss *l = add(t, BTR_LOSS_CHUNK, -BTR_ERR_CHECKSUM);
	if (!l)
		return -BTR_ERR_NOMEM;
	l->offset = offset;
	return 0;
}

int stream_loss_end(struct stream_losses *t, int reason, uint64_t offset)
{
	if (t->closed)
		return 0;
	t->closed = 1;
	struct btr_stream_loss *l = add(t, BTR_LOSS_END, reason);
	if (!l)
		return -BTR_ERR_NOMEM;
	l->offset = offset;
	for (size_t i = 0; i < t->n_p; i++) {
		struct sl_proc *p = &t->p[i];
		if (!p->started || p->ended || p->lost)
			continue;
		if (!(l = add(t, BTR_LOSS_CUT, reason)))
			return -BTR_ERR_NOMEM;
		l->pid = p->pid;
		l->ppid = p->ppid;
		l->offset = offset;
		memcpy(l->comm, p->comm, sizeof(l->comm));
	}
	return 0;
}

size_t stream_loss_get(const struct stream_losses *t, struct btr_stream_loss *out, size_t max)
{
	for (size_t i = 0; out && i < max && i < t->n_l; i++)
		out[i] = t->l[i];
	return t->n_l;
}

void stream_loss_free(struct stream_losses *t)
{
	free(t->p);
	free(t->l);
	memset(t, 0, sizeof(*t));
}
