/* internal.h - helpers shared inside lib/, not part of the public API. */
#ifndef BTR_INTERNAL_H
#define BTR_INTERNAL_H

#include "btr/error.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define BTR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define btr_likely(x) __builtin_expect(!!(x), 1)
#define btr_unlikely(x) __builtin_expect(!!(x), 0)
#else
#define BTR_PRINTF(a, b)
#define btr_likely(x) (x)
#define btr_unlikely(x) (x)
#endif

void btr__log(enum btr_log_level level, const char *fmt, ...) BTR_PRINTF(2, 3);
/* Sends the calling thread's log messages (those the log level lets
 * through) to @fn instead of the process's callback; NULL: back to it. */
void btr__log_divert(btr_log_fn fn, void *ctx);
/* The largest module, debug or source file btr reads from a name that
 * data gave (btr_file_open_named): a bound far above real files. */
#define BTR__NAMED_FILE_MAX (8ull << 30)

#define btr_err(...) btr__log(BTR_LOG_ERROR, __VA_ARGS__)
#define btr_warn(...) btr__log(BTR_LOG_WARN, __VA_ARGS__)
#define btr_info(...) btr__log(BTR_LOG_INFO, __VA_ARGS__)
#define btr_debug(...) btr__log(BTR_LOG_DEBUG, __VA_ARGS__)

#define BTR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The stream @s reads an input of @size bytes (lib/stream/stream.c; the limit of
 * what its records may cost, lib/stream/stream_code.h).  btr_stream_open sets
 * it; a stream fed records by hand gets it from here. */
struct btr_stream;
void btr__stream_input_size(struct btr_stream *s, uint64_t size);

/* Grows the array *@arr of *@cap elements of @elsize to hold at least
 * @need, doubling from @first; -BTR_ERR_NOMEM (the array unchanged) when
 * memory or size_t runs out. */
static inline int btr__grow(void **arr, size_t *cap, size_t need, size_t elsize, size_t first)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : first;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -BTR_ERR_NOMEM;
		n *= 2;
	}
	if (n > SIZE_MAX / elsize)
		return -BTR_ERR_NOMEM;
	void *p = realloc(*arr, n * elsize);
	if (!p)
		return -BTR_ERR_NOMEM;
	*arr = p;
	*cap = n;
	return 0;
}
/* The LEB128 number at *@p (ending before @end), *@p moved past it; bits
 * beyond 64 are dropped.  *@done is 0 when @end came first: then the value
 * is that of the bytes read (DWARF readers differ in what they do then).
 * The one LEB128 reader of lib/ (.debug_line, .eh_frame). */
static inline uint64_t btr__uleb128(const uint8_t **p, const uint8_t *end, int *done)
{
	uint64_t v = 0;
	unsigned sh = 0;
	*done = 0;
	while (*p < end) {
		uint8_t b = *(*p)++;
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80)) {
			*done = 1;
			break;
		}
	}
	return v;
}

/* Signed LEB128, as btr__uleb128 (the sign taken from the last byte read). */
static inline int64_t btr__sleb128(const uint8_t **p, const uint8_t *end, int *done)
{
	uint64_t v = 0;
	unsigned sh = 0;
	uint8_t b = 0;
	*done = 0;
	while (*p < end) {
		b = *(*p)++;
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80)) {
			*done = 1;
			break;
		}
	}
	if (sh < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << sh;
	return (int64_t)v;
}

#define BTR_OFFSETOFEND(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* Nonzero if a mapping of @path maps a device, not a file's bytes: a
 * direct child of /dev (devtmpfs holds device nodes: /dev/null, /dev/zero;
 * valgrind maps /dev/null for its translation cache).  Deeper paths there
 * may be regular files of filesystems mounted under /dev (/dev/shm,
 * /dev/hugepages, /dev/mqueue).  The recorder keeps the bytes of code run
 * from such a mapping; readers load no file for it and btr check treats it
 * as memory no file backs. */
static inline int btr__path_is_device(const char *path)
{
	return path && !strncmp(path, "/dev/", 5) && path[5] && !strchr(path + 5, '/');
}

/* ---- option structs (libbpf's OPTS_VALID is the model) ----
 * Every public option struct begins with `size_t sz`, the size of the
 * struct its caller was compiled with, so that fields appended in later
 * versions keep old callers working (docs/library.md).  One check and one
 * copy for every public function that takes one:
 *   BTR_OPTS_VALID(opts, min)  true if @opts is NULL, or if its sz is at
 *       least @min (the size of the struct's first version: BTR_OFFSETOFEND
 *       of its last field then; sizeof(*opts) for a struct that has had one
 *       version) and every byte a newer caller passed beyond sizeof(*opts)
 *       is zero (fields this library does not know must not be asked for).
 *   BTR_OPTS_COPY(dst, opts)  *@dst = what the caller passed of *@opts
 *       (NULL: nothing), the rest zero, and @dst->sz = sizeof(*@dst).
 *   BTR_OPTS_GET(opts, field, fallback)  @opts->field if the caller's
 *       struct has it and it is not zero, else @fallback. */
static inline int btr__opts_valid(const void *opts, size_t sz, size_t known, size_t min)
{
	if (sz < min || sz < sizeof(size_t))
		return 0;
	for (size_t i = known; i < sz; i++)
		if (((const unsigned char *)opts)[i])
			return 0;
	return 1;
}
#define BTR_OPTS_VALID(opts, min) (!(opts) || btr__opts_valid((opts), (opts)->sz, sizeof(*(opts)), (min)))
static inline void btr__opts_copy(void *dst, size_t size, const void *opts)
{
	memset(dst, 0, size);
	if (opts) {
		size_t sz;
		memcpy(&sz, opts, sizeof(sz));   /* every option struct begins with size_t sz */
		memcpy(dst, opts, sz < size ? sz : size);
	}
	memcpy(dst, &size, sizeof(size));
}
/* (the sizeof of the conditional only makes the compiler check that @dst
 * and @opts point to the same type) */
#define BTR_OPTS_COPY(dst, opts) ((void)sizeof(0 ? (dst) : (opts)), btr__opts_copy((dst), sizeof(*(dst)), (opts)))
#define BTR_OPTS_HAS(opts, field) ((opts)->sz >= offsetof(__typeof__(*(opts)), field) + sizeof((opts)->field))
#define BTR_OPTS_GET(opts, field, fallback) (BTR_OPTS_HAS(opts, field) && (opts)->field ? (opts)->field : (fallback))

/* A PT flow decoder's block cache tables (7.5 MiB by default), kept by a
 * reader that creates and frees many decoders (a stream: one per thread)
 * for the next one, instead of mapping, faulting in and unmapping them each
 * time (lib/pt/ptflow.c).  Zero-initialized: empty. */
struct btr_ptflow_config;
struct btr_ptflow;
struct btr_image;
struct btr_ptflow_spare {
	void *blks, *idx, *lens, *cold;
	unsigned cache_bits;
};
int btr__ptflow_new_reuse(struct btr_image *img, const struct btr_ptflow_config *cfg,
			  struct btr_ptflow_spare *spare, struct btr_ptflow **out);
/* btr_ptflow_free, the tables going to @spare if it is empty. */
void btr__ptflow_free_keep(struct btr_ptflow *f, struct btr_ptflow_spare *spare);
void btr__ptflow_spare_free(struct btr_ptflow_spare *spare);
/* For the stream's parallel run (lib/stream/stream_par.c), which cuts one
 * thread's PT at PSBs: forgets @f's flow as btr_ptflow_reset does (the
 * next decode starts at its first PSB, at stream offset @offset), without
 * the gap a reset reports and keeping the statistics (lib/pt/ptflow.c). */
void btr__ptflow_restart(struct btr_ptflow *f, uint64_t offset);
/* A place in PT data @p[0..n) where decoding can be taken over
 * (lib/pt/ptflow_par.c): a PSB at *@warm, then a MODE.Exec and an enable
 * (a FUP in PSB+ or a TIP.PGE), then a branch (TNT or TIP: the count of
 * instructions and the straight-line run start over), no OVF, and the
 * next PSB at *@at.  A decoder started at *@warm has at *@at the state of
 * one that decoded all the data before.  Returns 1, or 0 if there is
 * none. */
int btr__ptflow_seam(const uint8_t *p, size_t n, size_t *warm, size_t *at);

#endif
