/* stream_switch.c - context switch records (BTR_REC_SWITCH) per CPU, and
 * which thread they say ran on a CPU at a given time: the common branch
 * stream (stream.c) uses this to decode per-CPU PT with the image of the
 * process that ran. */
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "stream_switch.h"

#define MAX_SWITCH_CPUS 8192

int stream_sw_add(struct stream_switches *t, const struct btr_rec_switch *w)
{
	if (w->cpu < 0 || w->cpu >= MAX_SWITCH_CPUS)
		return 0;
	unsigned cpu = (unsigned)w->cpu;
	if (cpu >= t->n_cpu) {
		void *n = realloc(t->cpu, (cpu + 1) * sizeof(*t->cpu));
		if (!n)
			return -BTR_ERR_NOMEM;
		t->cpu = n;
		memset(t->cpu + t->n_cpu, 0, (cpu + 1 - t->n_cpu) * sizeof(*t->cpu));
		t->n_cpu = cpu + 1;
	}
	struct cpu_switches *c = &t->cpu[cpu];
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		void *n = realloc(c->e, cap * sizeof(*c->e));
		if (!n)
			return -BTR_ERR_NOMEM;
		c->e = n;
		c->cap = cap;
	}
	/* records of one CPU come nearly in time order: insert from the end */
	size_t i = c->n;
	while (i && c->e[i - 1].tsc > w->tsc) {
		c->e[i] = c->e[i - 1];
		i--;
	}
	c->e[i] = (struct switch_ent){ w->tsc, w->pid, w->tid, (w->flags & BTR_SWITCH_OUT) != 0 };
	c->n++;
	return 0;
}

/* The number of @c's switches at or before @tsc (binary search). */
static size_t switches_upto(const struct cpu_switches *c, uint64_t tsc)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->e[mid].tsc <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int stream_sw_thread(const struct stream_switches *t, int32_t cpu, uint64_t tsc, uint32_t *pid, uint32_t *tid)
{
	if (cpu < 0 || (unsigned)cpu >= t->n_cpu)
		return 0;
	const struct cpu_switches *c = &t->cpu[cpu];
	size_t lo = switches_upto(c, tsc);
	if (!lo || c->e[lo - 1].out || !c->e[lo - 1].tid)
		return 0;
	if (pid)
		*pid = c->e[lo - 1].pid;
	if (tid)
		*tid = c->e[lo - 1].tid;
	return 1;
}

/* The thread whose code a per-CPU PT stream shows on @cpu at @tsc, for
 * decoding: the last switch in at or before @tsc; between a switch out
 * and the next switch in (the kernel is switching, and the address space
 * being loaded, the PIP of its MOV CR3, is the next thread's) the next
 * thread; before the CPU's first switch, the thread that first switches
 * (out: it was running; in: it was being switched to).  The decoder's
 * time lags the hardware's by up to one MTC period, which this rule
 * absorbs: the kernel path between a switch and the next user
 * instruction is longer.  Returns 1 with the thread and the interval
 * [*@from, *@until) in which the answer is the same, 0 if @cpu has no
 * switches. */
int stream_sw_runner(const struct stream_switches *t, int32_t cpu, uint64_t tsc, uint32_t *pid, uint32_t *tid,
		     uint64_t *from, uint64_t *until)
{
	if (cpu < 0 || (unsigned)cpu >= t->n_cpu || !t->cpu[cpu].n)
		return 0;
	const struct cpu_switches *c = &t->cpu[cpu];
	size_t lo = switches_upto(c, tsc);
	size_t k;   /* the entry that names the thread */
	*from = lo ? c->e[lo - 1].tsc : 0;
	if (!lo) {
		k = 0;
	} else if (!c->e[lo - 1].out) {
		k = lo - 1;
	} else {
		for (k = lo; k < c->n && c->e[k].out; k++)
			;
		if (k == c->n) {
			/* switched out and nothing in yet: the last known */
			k = lo - 1;
		}
	}
	/* the answer depends only on lo: it holds until the next entry */
	*until = lo < c->n ? c->e[lo].tsc : UINT64_MAX;
	*pid = c->e[k].pid;
	*tid = c->e[k].tid;
	return 1;
}

void stream_sw_free(struct stream_switches *t)
{
	for (unsigned i = 0; i < t->n_cpu; i++)
		free(t->cpu[i].e);
	free(t->cpu);
	t->cpu = NULL;
	t->n_cpu = 0;
}
