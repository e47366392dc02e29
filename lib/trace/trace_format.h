/* trace_format.h - the .btr byte layout shared by the writer
 * (trace_write.c) and the reader (trace.c): constants of docs/format.md
 * and little-endian field access.  Internal to lib/. */
#ifndef BTR_TRACE_FORMAT_H
#define BTR_TRACE_FORMAT_H

#include <stdint.h>
#include <string.h>

/* ---- format constants (docs/format.md) ---- */

#define FILE_MAGIC "BTRTRACE"
#define PERF_MAGIC "PERFILE2"
#define FILE_HDR_FIXED 38u   /* bytes before the creator string */
#define FILE_HDR_MAX 4096u   /* header_size above this is corruption */
#define CHUNK_MAGIC 0x43525442u /* "BTRC" read as a little-endian u32 */
#define CHUNK_HDR 32u
#define CF_ZSTD 1u
#define CF_END 2u
#define REC_HDR 8u
#define END_PAYLOAD 16u
#define SCAN_WINDOW 65536u

/* Fixed body sizes (without strings / arrays / data). */
#define MACHINE_FIXED 108u   /* + 2 + backend + 2 + vendor */
#define MODULE_FIXED 43u     /* + build_id_len + path */
#define THREAD_FIXED 26u     /* + name */
#define THREAD_EXIT_MORE 8u  /* thread_exit since 1.4: u32 end, i32 signo after the name */
#define DATA_FIXED 24u       /* + size */
#define LBR_FIXED 32u        /* + 24 * count */
#define LBR_ENTRY 24u
#define BRANCHES_FIXED 8u    /* + 44 * count */
#define BRANCH_SIZE 44u
#define EXIT_FIXED 40u
#define SWITCH_FIXED 24u     /* pid, tid, cpu, flags, tsc */
#define PROCESS_FIXED 30u    /* + path + args + detail (u16 length each) */
#define CODE_FIXED 32u       /* pid, flags, addr, hash, size, data_len + data (1.5) */
#define SYMBOL_FIXED 26u     /* pid, source, addr, size + name (1.5) */
#define WINDOW_FIXED 40u     /* pid, tid, reason, index, stream_offset, size, ip (1.6) */

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

#endif
