/* eh_frame.h - function ranges from .eh_frame FDEs (internal to lib/).
 *
 * Stripped binaries keep .eh_frame (the unwinder needs it at run time),
 * and it has one FDE per function (and per .cold part): a reliable map of
 * where functions start and end when there are no symbols.
 */
#ifndef BTR_EH_FRAME_H
#define BTR_EH_FRAME_H

#include <stddef.h>
#include <stdint.h>

/* Calls @cb(ctx, start, end) for every FDE of the .eh_frame section
 * @data (@size bytes) loaded at link address @addr; [start, end) in link
 * addresses.  FDEs of empty or discarded ranges (start 0) are skipped.
 * Stops at the terminator, at the end of the data, at the first malformed
 * entry (what was found before still counts), or when @cb returns
 * nonzero.  Returns @cb's value if it stopped the walk, else 0. */
int btr__eh_frame_fdes(const uint8_t *data, size_t size, uint64_t addr,
		       int (*cb)(void *ctx, uint64_t start, uint64_t end), void *ctx);

#endif
