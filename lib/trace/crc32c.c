/* crc32c.c - table-driven CRC-32C (slicing-by-8).
 *
 * Why slicing-by-8: the container checksums every chunk it reads and
 * writes (PT buffers of several MiB per second of execution), so the
 * byte-at-a-time loop (~400 MB/s) would show up in `btr trace dump`
 * profiles; eight 1 KiB tables give several GB/s in portable C.  The tables
 * are computed once on first use (8 KiB of .bss rather than 8 KiB of
 * literal source), guarded by pthread_once so concurrent first callers
 * are safe.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int use_hw;

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_HW 1
/* SSE4.2's CRC32 instruction computes exactly this CRC (same polynomial,
 * reflected), 8 bytes per instruction: ~3-4x the table loop.  The table
 * stays as the portable fallback and as the reference in the tests. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8); /* unaligned-safe; x86 is little-endian */
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		table[0][i] = c;
	}
	/* table[k][i] is the CRC of byte i followed by k zero bytes. */
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xff];
#ifdef HAVE_HW
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t btr_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&table_once, table_init);
#ifdef HAVE_HW
	if (use_hw)
		return ~crc_hw(~crc, buf, len);
#endif
	return btr_crc32c_sw(crc, buf, len);
}

uint32_t btr_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&table_once, table_init);
	crc = ~crc;
	/* Byte loop until p is 8-aligned is not needed: the 8-byte step below
	 * assembles its word from bytes, so it is alignment- and
	 * endianness-independent. */
	while (len >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24;
		crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
		      table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
		      table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
		      table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}
