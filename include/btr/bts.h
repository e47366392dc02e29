/* btr/bts.h - Branch Trace Store record decoding.
 *
 * BTS writes one 24-byte record per taken branch into the DS save area
 * (Intel SDM Vol. 3B, "BTS Record Format" for IA-32e mode): three
 * little-endian 64-bit words
 *
 *   +0  branch from (linear address of the branch instruction)
 *   +8  branch to   (linear address of the target)
 *   +16 flags: bit 4 = branch predicted; other bits reserved
 *
 * Linux perf (intel_bts) hands these records out unchanged, and the .btr
 * container stores them as BTR_REC_BTS.  BTS records only taken branches
 * and carries no timing, so decoded branches have neither TSC nor cycles.
 */
#ifndef BTR_BTS_H
#define BTR_BTS_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_image;

#define BTR_BTS_RECORD_SIZE 24u
#define BTR_BTS_PREDICTED (1ull << 4)   /* bit in the flags word */
/* Markers of software stepping with --ip-filter (btr record -b step): a
 * record with @from 0 and one of these bits in the flags word is no branch
 * but what Intel PT's IP filter writes as TIP.PGD / TIP.PGE: PGD - tracing
 * stops here, the flow went to @to (0: unknown) outside the ranges; PGE -
 * tracing resumes at @to, inside the ranges.  Hardware never sets them.
 * btr_bts_decode skips markers (no callback); the stream reader turns them
 * into BTR_FLOW_DISABLE / BTR_FLOW_ENABLE events (btr/stream.h). */
#define BTR_BTS_SW_PGD (1ull << 62)
#define BTR_BTS_SW_PGE (1ull << 63)

/* Branch callback: return 0 to continue, a negative btr error to abort
 * (the decoder returns it unchanged), or a positive value to stop early
 * (the decoder then returns the number of branches delivered so far,
 * including this one).  @b is valid only during the call. */
typedef int (*btr_branch_fn)(void *ctx, const struct btr_branch *b);

/* Decodes the BTS records in @buf (@size bytes, caller-owned, any
 * alignment) and calls @cb for each, in buffer order (oldest first).
 *
 * Every branch gets .tid = @tid, the flags TAKEN, KERNEL (from >=
 * 0xffff800000000000), TO_KERNEL (to in the same range), PREDICTED (flags
 * bit 4), and .kind from the instruction at .from read through @img (64-bit
 * mode).  @img may be NULL.  Kind rules:
 *   - @img NULL, no code at .from, or undecodable: BTR_KIND_NONE (unknown);
 *   - a branch instruction: its kind (a conditional one was taken);
 *   - a non-branch instruction at .from, or a direct branch whose target
 *     is not .to: BTR_KIND_ASYNC (interrupt, exception or fault).
 * Records whose from and to are both 0 are padding (perf leaves them in
 * wrapped buffers) and are skipped without a callback, as are the markers
 * BTR_BTS_SW_PGD / BTR_BTS_SW_PGE.
 *
 * Returns the number of branches delivered; -BTR_ERR_TRUNCATED if @size is
 * not a multiple of 24, after delivering the floor(@size / 24) complete
 * records (a stream reader can keep the last @size % 24 bytes and prepend
 * them to the next buffer); -BTR_ERR_INVAL if @cb is NULL or @buf is NULL
 * with @size > 0; or the callback's negative value. */
int btr_bts_decode(const uint8_t *buf, size_t size, const struct btr_image *img, uint32_t tid,
		   btr_branch_fn cb, void *ctx);

/* Encodes one record into @out (24 bytes): the inverse of the decoder, for
 * software capture and tests.  @predicted sets flags bit 4. */
void btr_bts_encode(uint64_t from, uint64_t to, int predicted, uint8_t out[BTR_BTS_RECORD_SIZE]);

/* ---- instruction counts beside BTS records (BTR_REC_BTS_INSNS) ----
 *
 * Software stepping knows how many instructions ran between two branches;
 * it stores them in a side stream of little-endian u32 values, the i-th
 * belonging to the i-th BTS record of the same thread (btr/trace.h).  A
 * reader keeps the values it has not used yet in a queue: */
struct btr_bts_insns;

/* Creates an empty queue in *@out.  Returns 0, -BTR_ERR_NOMEM or
 * -BTR_ERR_INVAL. */
int btr_bts_insns_new(struct btr_bts_insns **out);

/* Appends the bytes of one BTS_INSNS record (@data, @size bytes starting
 * at byte @stream_offset of the side stream; caller-owned).  A value may
 * be split across records.  A jump in @stream_offset drops what was
 * queued and restarts at the first whole value after it.  Returns 0 or
 * -BTR_ERR_NOMEM. */
int btr_bts_insns_add(struct btr_bts_insns *q, uint64_t stream_offset, const uint8_t *data, size_t size);

/* Looks up the count of BTS record @index (0-based in its stream): returns
 * 1 and stores it in *@out, or 0 if the queue does not hold it.  Values
 * below @index are dropped (records are read in order). */
int btr_bts_insns_take(struct btr_bts_insns *q, uint64_t index, uint32_t *out);

void btr_bts_insns_free(struct btr_bts_insns *q);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
