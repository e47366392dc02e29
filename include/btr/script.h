/* btr/script.h - branches as text lines (`btr script`, docs/script.md): an
 * analysis (btr/analysis.h), and the perf-compatible LBR sample printer.
 *
 * The analysis writes one line per branch of the stream, and one
 * "[gap ...]" line per gap of the data, in stream order:
 *
 *     PID/TID TIME 0xFROM -> 0xTO SYM+OFF -> SYM+OFF KIND FLAGS
 *
 * (the columns chosen by @fields).  It streams: lines go to @out as the
 * branches come, in constant memory (symbols through a small cache). */
#ifndef BTR_SCRIPT_H
#define BTR_SCRIPT_H
#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_script_opts {
	size_t sz;            /* sizeof(struct btr_script_opts) */
	/* The columns, a comma list of tid, time, addr, sym, kind, flags,
	 * insns (as listed; empty names skipped; at most 7); NULL: the default
	 * tid,time,addr,sym,kind,flags.  Copied. */
	const char *fields;
	/* Where the lines go as the branches come (borrowed for the run; a
	 * write error stops the run early, and btr_analysis_write then
	 * returns -BTR_ERR_IO).  NULL: they are kept in
	 * a temporary file (tmpfile(3), not memory) that
	 * btr_analysis_write(a, f, "text") copies to f after the run. */
	FILE *out;
};

/* Creates the analysis (@opts may be NULL: defaults).  Write formats:
 * "text".  Returns 0, -BTR_ERR_INVAL (an unknown or empty @fields list),
 * -BTR_ERR_NOMEM, -BTR_ERR_IO (no temporary file). */
int btr_script_new(const struct btr_script_opts *opts, struct btr_analysis **out);

/* The LBR samples of a perf.data file, or the LBR records of a .btr trace,
 * as Debian 12's `perf script -F [ip,]brstack` (perf 6.1) prints them
 * (perf.data: in perf's time order, round by round; .btr: in file order,
 * without the branch types perf.data has). */
struct btr_script_brstack_opts {
	size_t sz;        /* sizeof(struct btr_script_brstack_opts) */
	int with_ip;      /* -F ip,brstack: the sample's ip (or callchain) first */
	uint32_t pid, tid;   /* only this process / thread (0: all) */
};
/* What btr_script_brstack saw. */
struct btr_script_brstack_info {
	size_t sz;          /* sizeof(struct btr_script_brstack_info) */
	int at_offset;      /* a read error of a perf.data's samples, at @offset */
	uint64_t offset;
	int damaged;        /* .btr: damaged chunks were skipped (their samples are missing) */
	int output_error;   /* writing to @out failed */
};
/* Prints the samples of @path to @out.  Returns 0 (also with @info->damaged
 * set: the rest was printed), -BTR_ERR_IO when writing failed
 * (@info->output_error), or the reader's error (everything before it was
 * printed; @info->offset says where for a perf.data): -BTR_ERR_NOENT,
 * -BTR_ERR_BAD_FORMAT (neither perf.data nor .btr), -BTR_ERR_NOMEM, ... */
int btr_script_brstack(const char *path, const struct btr_script_brstack_opts *opts, FILE *out,
		       struct btr_script_brstack_info *info);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop
#endif
