/* crc32c.h - CRC-32C (Castagnoli), internal to lib/.
 *
 * Used by the .btr container (lib/trace/trace.c) to checksum chunk headers and
 * payloads.  Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value
 * and final XOR 0xFFFFFFFF: the variant of iSCSI (RFC 3720), ext4 and
 * SSE4.2's CRC32 instruction.  crc32c("123456789") == 0xE3069283.
 */
#ifndef BTR_CRC32C_H
#define BTR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Returns the CRC-32C of @len bytes at @buf continuing from @crc, which is
 * 0 for the first call (the pre- and post-inversion are done inside, so
 * crc32c(crc32c(0, a, n), b, m) == crc32c(0, a||b, n+m)).  @buf may be NULL
 * when @len is 0.  Never fails. */
uint32_t btr_crc32c(uint32_t crc, const void *buf, size_t len);

/* The same, always with the portable slicing-by-8 tables (btr_crc32c uses
 * SSE4.2's CRC32 instruction when the CPU has it).  For tests. */
uint32_t btr_crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif
