/* alloc_shim.c - allocation-failure injection for the torture build of the
 * CLI (`btr_torture`, tests/cli_alloc_fail.sh; curl's "torture" idea).
 *
 * The torture binary is linked with -Wl,--wrap=malloc,... so every
 * allocation call made by btr's own code (lib/ and tools/btr/, linked in
 * statically) comes here first; allocations inside other libraries (libdw,
 * zstd, libc's stdio) are not counted.  Normal builds of btr and libbtr are
 * untouched: only this test executable is linked with the wraps.
 *
 * Environment:
 *   BTR_ALLOC_FAIL=N     the N-th counted allocation (1-based) fails, as
 *                        if memory ran out; every other one succeeds.
 *                        Unset or 0: none fails.
 *   BTR_ALLOC_REPORT=F   at exit, write "allocs A failed K live L" to F:
 *                        A allocations were attempted, K failed, L blocks
 *                        allocated through the wraps were never freed
 *                        (a leak, unless the process died).
 *   BTR_ALLOC_BACKTRACE=1 print the call stack of the failed allocation to
 *                        stderr (addresses; `addr2line -f -e btr_torture`)
 *                        to find which caller mishandled it.
 *
 * Live blocks are tracked in an open-addressing hash set of pointers, so
 * the leak count works in every build; in the sanitizer build
 * LeakSanitizer checks the same runs as well. */
#include <execinfo.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
char *__real_strdup(const char *s);
void __real_free(void *p);

static unsigned long fail_at, calls, failed;
static unsigned long live;
static const char *report_path;

/* ---- the set of live pointers ---- */
#define SET_BITS 20
static uintptr_t set[1u << SET_BITS];
#define TOMB ((uintptr_t)1)

static size_t slot(uintptr_t p)
{
	return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> (64 - SET_BITS));
}

static void set_add(void *ptr)
{
	uintptr_t p = (uintptr_t)ptr;
	size_t mask = (1u << SET_BITS) - 1;
	for (size_t i = slot(p), k = 0; k <= mask; i = (i + 1) & mask, k++) {
		if (set[i] == 0 || set[i] == TOMB) {
			set[i] = p;
			live++;
			return;
		}
	}
}

/* Returns 1 if @ptr was in the set (and removes it). */
static int set_del(void *ptr)
{
	uintptr_t p = (uintptr_t)ptr;
	size_t mask = (1u << SET_BITS) - 1;
	for (size_t i = slot(p), k = 0; k <= mask; i = (i + 1) & mask, k++) {
		if (set[i] == p) {
			set[i] = TOMB;
			live--;
			return 1;
		}
		if (set[i] == 0)
			return 0;
	}
	return 0;
}

static void write_report(void)
{
	if (!report_path)
		return;
	FILE *f = fopen(report_path, "w");
	if (!f)
		return;
	fprintf(f, "allocs %lu failed %lu live %lu\n", calls, failed, live);
	fclose(f);
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *v = getenv("BTR_ALLOC_FAIL");
	fail_at = v ? strtoul(v, NULL, 10) : 0;
	report_path = getenv("BTR_ALLOC_REPORT");
	atexit(write_report);
}

/* Counts one allocation; returns 1 if it must fail. */
static int must_fail(void)
{
	if (++calls == fail_at) {
		failed++;
		if (getenv("BTR_ALLOC_BACKTRACE")) {
			void *pcs[32];
			backtrace_symbols_fd(pcs, backtrace(pcs, 32), 2);
		}
		return 1;
	}
	return 0;
}

static void *track(void *p)
{
	if (p)
		set_add(p);
	return p;
}

void *__wrap_malloc(size_t size)
{
	return must_fail() ? NULL : track(__real_malloc(size));
}

void *__wrap_calloc(size_t n, size_t size)
{
	return must_fail() ? NULL : track(__real_calloc(n, size));
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
	return must_fail() ? NULL : track(__real_aligned_alloc(align, size));
}

char *__wrap_strdup(const char *s)
{
	return must_fail() ? NULL : track(__real_strdup(s));
}

void *__wrap_realloc(void *p, size_t size)
{
	if (must_fail())
		return NULL;   /* like a real failure: @p stays valid and owned */
	int known = p && set_del(p);
	void *q = __real_realloc(p, size);
	if (q)
		set_add(q);
	else if (known)
		set_add(p);
	return q;
}

void __wrap_free(void *p)
{
	if (p)
		set_del(p);
	__real_free(p);
}

int __wrap_asprintf(char **out, const char *fmt, ...)
{
	if (must_fail())
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(out, fmt, ap);
	va_end(ap);
	if (r >= 0)
		set_add(*out);
	return r;
}
