/* btr/check.h - control-flow hijack and hook detection (`btr check`).
 *
 * An analysis (btr/analysis.h) that compares every recorded transfer with
 * the transfers the loaded code allows:
 *  - direct branches reach their encoded target, the source is a branch
 *    of the recorded kind (else the code that ran is not the file's);
 *  - returns reach the instruction after their call (a shadow stack per
 *    thread that follows longjmp, C++ unwinding, signal delivery and
 *    sigreturn, thread exit, gaps and a trace starting mid-stack; where
 *    it knows nothing, a return must at least reach an instruction
 *    preceded by a call);
 *  - indirect calls reach function entries (symbols, .eh_frame FDE
 *    starts, ENDBR64 sites, PLT entries); indirect jumps stay in their
 *    function or reach an entry;
 *  - PLT jumps land in the module that provides the symbol without
 *    preloading (else: interposition) and in a function of that name
 *    (else: GOT overwrite);
 *  - no transfer enters executable memory that no file backs; a PT trace
 *    that stops matching the file's code means the code changed.
 * Sampled LBR data (no full flow) gets the kBouncer-style subset.
 * Findings are deduplicated by (kind, from, to); memory grows with the
 * code seen and the stack depth, not with the trace.  docs/check.md.
 */
#ifndef BTR_CHECK_ANALYSIS_H   /* not BTR_CHECK_H: tests/check.h uses that */
#define BTR_CHECK_ANALYSIS_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

enum btr_check_severity {
	BTR_CHECK_INFO = 0,
	BTR_CHECK_LOW,
	BTR_CHECK_MEDIUM,
	BTR_CHECK_HIGH,
};

/* "info", "low", "medium", "high". */
const char *btr_check_severity_name(enum btr_check_severity s);
/* Parses a severity name (case-insensitive).  Returns it, or -1. */
int btr_check_severity_parse(const char *name);

struct btr_check_opts {
	size_t sz;                   /* sizeof(struct btr_check_opts) */
	/* Known-good exceptions, the text of an allow file (borrowed for
	 * btr_check_new only; NULL: none).  One rule per line, '#' starts a
	 * comment:  KIND PATTERN  where KIND is a finding kind or '*', and
	 * PATTERN is '*', an address range 0xLO-0xHI (matches when from or to
	 * lies in it), or text that must occur in the finding's symbols or
	 * detail (module paths and symbol names appear there). */
	const char *allow;
};

struct btr_check_finding {
	const char *kind;            /* "return-hijack", "rop-chain", ... (static) */
	enum btr_check_severity severity;
	uint32_t pid, tid;
	uint64_t from, to;
	uint64_t position;           /* index of the branch in the stream (0-based) */
	uint64_t tsc;                /* 0 if unknown */
	uint64_t count;              /* times seen (same kind, from and to) */
	const char *from_sym, *to_sym;   /* "name+0xoff", "module+0xoff" or "0x..." */
	const char *detail;          /* the evidence */
};

/* Creates a check analysis.  Returns 0, -BTR_ERR_INVAL (bad @opts->sz,
 * NULL @out), -BTR_ERR_BAD_FILTER (an allow rule that does not parse,
 * named through the log) or -BTR_ERR_NOMEM. */
int btr_check_new(const struct btr_check_opts *opts, struct btr_analysis **out);

/* The findings after the run, in the order first seen (owned by @a,
 * valid until it is freed); allowed findings are not included.  *@n gets
 * the count.  Returns NULL with *@n 0 if there are none. */
const struct btr_check_finding *btr_check_findings(const struct btr_analysis *a, size_t *n);

/* What the check looked at. */
struct btr_check_stats {
	uint64_t branches;           /* branches checked */
	uint64_t unknown_code;       /* branches whose code the image lacks */
	uint64_t allowed;            /* findings suppressed by allow rules */
	uint64_t dropped;            /* findings beyond the table's limit */
	int sampled;                 /* LBR snapshots: kBouncer-style checks only */
	unsigned max_depth;          /* deepest shadow stack */
};
void btr_check_get_stats(const struct btr_analysis *a, struct btr_check_stats *st);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
