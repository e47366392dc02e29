/* stream_switch.h - the context switches of a trace, per CPU, for the
 * common branch stream (lib/stream/stream.c): which thread ran on a CPU at a
 * time, to decode per-CPU PT with the right process's image.  Not a
 * public header. */
#ifndef BTR_STREAM_SWITCH_H
#define BTR_STREAM_SWITCH_H

#include <stddef.h>
#include <stdint.h>

#include "btr/trace.h"

/* Switch records of every CPU, each CPU's sorted by time.  Zero-
 * initialized is empty; owned by the stream, freed with stream_sw_free. */
struct stream_switches {
	struct cpu_switches {
		struct switch_ent { uint64_t tsc; uint32_t pid, tid; int out; } *e;
		size_t n, cap;
	} *cpu;
	unsigned n_cpu;
};

/* Adds switch record @w (a CPU beyond 8191 or negative is ignored).
 * Returns 0 or -BTR_ERR_NOMEM. */
int stream_sw_add(struct stream_switches *t, const struct btr_rec_switch *w);

/* btr_stream_cpu_thread's answer: the thread switched in on @cpu at or
 * before @tsc, 1 with *@pid and *@tid (each may be NULL), 0 if none runs
 * there then (or nothing is known). */
int stream_sw_thread(const struct stream_switches *t, int32_t cpu, uint64_t tsc, uint32_t *pid, uint32_t *tid);

/* The thread whose code a per-CPU PT stream shows on @cpu at @tsc, for
 * decoding, and the interval [*@from, *@until) in which the answer holds
 * (the rule is in stream_switch.c).  Returns 1, or 0 if @cpu has no
 * switches. */
int stream_sw_runner(const struct stream_switches *t, int32_t cpu, uint64_t tsc, uint32_t *pid, uint32_t *tid,
		     uint64_t *from, uint64_t *until);

void stream_sw_free(struct stream_switches *t);

#endif
