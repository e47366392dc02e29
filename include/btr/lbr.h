/* btr/lbr.h - Last Branch Record snapshots and the MSR_LBR_SELECT filter.
 *
 * An LBR snapshot (struct btr_rec_lbr in btr/trace.h, newest entry first
 * as perf reports them) is a window of the most recent taken branches.
 * Snapshots are not contiguous with each other: a consumer that joins
 * them must treat each as starting after a discontinuity.
 */
#ifndef BTR_LBR_H
#define BTR_LBR_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdint.h>
#include "btr/branch.h"
#include "btr/bts.h"     /* btr_branch_fn */
#include "btr/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_image;

/* MSR_LBR_SELECT (Intel SDM Vol. 3B, "Filtering of Last Branch Records"):
 * bits 0..8 are numbered like enum btr_lbr_class, and a SET bit
 * SUPPRESSES that class.  Bit 9 (EN_CALLSTACK, Haswell and later) turns on
 * call-stack mode; it is not a filter. */
#define BTR_LBR_SELECT_EN_CALLSTACK (1u << 9)
#define BTR_LBR_SELECT_MASK 0x3ffu

/* Turns one snapshot into branches, oldest first (entries[count-1] ..
 * entries[0]), and calls @cb for each (see btr_branch_fn in btr/bts.h for
 * the return convention).  Every branch gets .tid = @rec->tid, TAKEN,
 * KERNEL / TO_KERNEL from the addresses (>= 0xffff800000000000), and the
 * entry's MISPRED, PREDICTED, TSX_ABORT flags; CYCLES and .cycles if the
 * entry has BTR_BF_CYCLES.  .kind comes from the instruction at .from
 * through @img (may be NULL) with the rules of btr_bts_decode: unknown
 * -> BTR_KIND_NONE, non-branch or direct branch not going to .to ->
 * BTR_KIND_ASYNC.  Entries with from == to == 0 (unused slots) are
 * skipped.  No TSC is set: @rec->tsc is the sample time, not a branch's.
 * Returns the number of branches delivered, -BTR_ERR_INVAL (@rec or @cb
 * NULL, entries NULL with count > 0), or the callback's negative value. */
int btr_lbr_decode(const struct btr_rec_lbr *rec, const struct btr_image *img,
		   btr_branch_fn cb, void *ctx);

/* Converts an MSR_LBR_SELECT value into the filter it implements: a
 * cleared type bit keeps every kind of that class (btr_branch_kind_class);
 * BTR_KIND_NONE (unknown kind) is kept only if no type class is
 * suppressed.  Privilege: bit 0 (CPL_EQ_0) clears filter priv bit 0
 * (kernel), bit 1 (CPL_NEQ_0) clears priv bit 1 (user).  Note: the
 * hardware applies the CPL bits to the privilege a branch ENDS in, while
 * btr_filter_match tests the source (BTR_BF_KERNEL); the two differ only
 * for ring transitions (syscall, sysret, interrupts).  EN_CALLSTACK is
 * ignored.  Returns 0, -BTR_ERR_INVAL (@out NULL or reserved bits above
 * bit 9 set; @out is then unchanged). */
int btr_lbr_select_to_filter(uint32_t lbr_select, struct btr_filter *out);

/* The inverse: the MSR_LBR_SELECT value (bits 0..8) that captures at least
 * what @f matches.  A class is suppressed only if @f matches none of its
 * kinds.  Returns 0 if the value is exact, 1 if the LBR captures more than
 * @f (a class is only partly in @f, e.g. "loop" alone, which the hardware
 * cannot separate from Jcc; or NONE differs), -BTR_ERR_INVAL on NULL. */
int btr_filter_to_lbr_select(const struct btr_filter *f, uint32_t *lbr_select);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
