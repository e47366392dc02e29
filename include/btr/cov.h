/* btr/cov.h - coverage files from a blocks analysis (btr/blocks.h):
 * drcov (Lighthouse, bncov, Cartographer), lcov tracefiles (genhtml) and
 * Cobertura XML (CI systems).  Module-relative like the blocks, so the
 * coverage of a PIE matches across runs.  docs/cov.md. */
#ifndef BTR_COV_H
#define BTR_COV_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdio.h>
#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a coverage analysis over @blocks (a blocks analysis, borrowed:
 * it must be in the same run before this one, and outlive it).  Its
 * write() takes the formats "drcov" (DynamoRIO drcov version 2: header,
 * module table, binary BB table), "lcov" (tracefile: FN on the DWARF
 * declaration line as gcov's, FNDA, BRDA for conditional branches and the
 * in-function targets of indirect jumps, DA records of the modules with
 * DWARF line tables) and "cobertura" (coverage-04.dtd; methods with all
 * their lines).  Returns 0, -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
int btr_cov_new(struct btr_analysis *blocks, struct btr_analysis **out);

/* Restricts the output to the module whose path or base name is @module
 * (copied; NULL: every module).  System libraries with separate debug
 * info (libc6-dbg) otherwise fill lcov with sources genhtml cannot find.
 * Returns 0, -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
int btr_cov_set_module(struct btr_analysis *cov, const char *module);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
