/* btr/crash.h - what led to a crash (`btr crash`, docs/crash.md): an
 * analysis (btr/analysis.h).
 *
 * For each process of the trace that died from a signal: the thread, the
 * signal, the faulting instruction (disassembled from the recorded code),
 * the fault address (when the backend records it: step), and the last
 * taken branches of that thread before it, oldest first, both ends
 * symbolized.  A flight-recorder trace (`btr record -b step --ring N`)
 * holds exactly the last N branches per thread. */
#ifndef BTR_CRASH_H
#define BTR_CRASH_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_crash_opts {
	size_t sz;          /* sizeof(struct btr_crash_opts) */
	/* Branches kept per thread (1..1000000); 0: 16, or the ring size of
	 * a flight-recorder trace. */
	size_t last;
	/* The trace as named in the JSON output ("file"; copied; NULL: ""). */
	const char *name;
};

/* Creates the analysis (@opts may be NULL: defaults).  Write formats:
 * "text" (default), "json" (docs/crash.md).  Returns 0, -BTR_ERR_INVAL or
 * -BTR_ERR_NOMEM. */
int btr_crash_new(const struct btr_crash_opts *opts, struct btr_analysis **out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
