/* btr/annotate.h - a function's disassembly (Zydis, Intel syntax) with
 * per-instruction execution counts, per-branch taken/not-taken counts and
 * percentages, and the source line of each instruction; or its source
 * lines with their counts (docs/annotate.md). */
#ifndef BTR_ANNOTATE_H
#define BTR_ANNOTATE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdio.h>
#include <sys/types.h>
#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates an annotate analysis of function @function (borrowed string;
 * btr_image_function_by_name forms) over @blocks (a blocks analysis
 * earlier in the same run; borrowed).  write() formats: "asm" (default)
 * and "source" (lines of the function's source files with the maximum
 * count of their instructions; the text of the line when the file can be
 * read).  write() returns -BTR_ERR_NOT_FOUND if the function is in no
 * module.  Returns 0, -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
int btr_annotate_new(struct btr_analysis *blocks, const char *function, struct btr_analysis **out);

/* Which source files the "source" format reads (the rule of
 * btr_file_open_source): a trace names its source files through DWARF,
 * so whoever made it chooses them (docs/reliability.md, "Threat model"). */
struct btr_annotate_opts {
	size_t sz;                        /* sizeof(struct btr_annotate_opts) */
	int source_rule;                  /* 1: read a source file only if
					   * @source_owner could read it, or it
					   * lies under one of @source_roots;
					   * 0: any file this process can read */
	uid_t source_owner;               /* the trace file's owner */
	const char *const *source_roots;  /* NULL-terminated; borrowed; may be NULL */
};

/* btr_annotate_new with @opts (may be NULL: btr_annotate_new). */
int btr_annotate_new_opts(struct btr_analysis *blocks, const char *function, const struct btr_annotate_opts *opts,
			  struct btr_analysis **out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
