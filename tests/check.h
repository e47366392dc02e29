/* check.h - a tiny test harness.  Each test program ends with
 * `return check_done();`, which prints "N passed, N failed" and exits 1 on
 * failures.  check_skip() exits 77 (CTest's skip code) with a message -
 * unless a check has already failed: a skip after a failure is a failure
 * (exit 1), never shown as "Skipped". */
#ifndef BTR_CHECK_H
#define BTR_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_pass_, check_fail_;

/* Counts a failure (its message is printed already).  Under
 * BTR_TEST_FIRST_FAIL=1 (`make mutants` sets it: a mutant is killed by its
 * first failure) the program ends there, exit 1. */
static inline void check_failed_(void)
{
	const char *s = getenv("BTR_TEST_FIRST_FAIL");

	check_fail_++;
	if (s && !strcmp(s, "1")) {
		printf("%d passed, %d failed (BTR_TEST_FIRST_FAIL=1: stopped at the first failure)\n",
		       check_pass_, check_fail_);
		fflush(stdout);
		fflush(stderr);
		exit(1);
	}
}

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (cond) {                                                      \
			check_pass_++;                                           \
		} else {                                                         \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			check_failed_();                                         \
		}                                                                \
	} while (0)

#define CHECK_EQ(a, b)                                                           \
	do {                                                                     \
		long long a_ = (long long)(a), b_ = (long long)(b);              \
		if (a_ == b_) {                                                  \
			check_pass_++;                                           \
		} else {                                                         \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld (0x%llx != 0x%llx)\n", \
				__FILE__, __LINE__, #a, #b, a_, b_,                \
				(unsigned long long)a_, (unsigned long long)b_);   \
			check_failed_();                                         \
		}                                                                \
	} while (0)

#define CHECK_STR(a, b)                                                          \
	do {                                                                     \
		const char *a_ = (a), *b_ = (b);                                 \
		if (a_ && b_ && !strcmp(a_, b_)) {                               \
			check_pass_++;                                           \
		} else {                                                         \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", \
				__FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
			check_failed_();                                         \
		}                                                                \
	} while (0)

static inline void check_skip(const char *why)
{
	if (check_fail_) {
		printf("SKIP requested (%s) after %d failed checks: reported as a failure\n", why, check_fail_);
		printf("%d passed, %d failed\n", check_pass_, check_fail_);
		exit(1);
	}
	printf("SKIP: %s\n", why);
	exit(77);
}

/* An oracle - an independent tool or library that a test compares btr with
 * (libipt, perf, objdump...) - is missing: under BTR_REQUIRE_ORACLES=1
 * (`make test` and `make asan` set it, scripts/deps.sh installs them all) a
 * failed check, unless BTR_ALLOW_MISSING_ORACLES=1; otherwise a note.  Said
 * once per @what (pass the same string literal at every call of a site). */
static inline void check_oracle_missing(const char *what)
{
	static const char *said[16];
	for (unsigned i = 0; i < 16; i++) {
		if (said[i] == what)
			return;
		if (!said[i]) {
			said[i] = what;
			break;
		}
	}
	const char *req = getenv("BTR_REQUIRE_ORACLES"), *allow = getenv("BTR_ALLOW_MISSING_ORACLES");
	if (req && !strcmp(req, "1") && !(allow && !strcmp(allow, "1"))) {
		fprintf(stderr, "FAIL: oracle missing: %s (scripts/deps.sh installs it; "
			"BTR_ALLOW_MISSING_ORACLES=1 allows this)\n", what);
		check_failed_();
	} else {
		printf("note: oracle missing, not checked: %s\n", what);
	}
}

/* True for one case in BTR_SAMPLE_STEP (default 1: every case), counting
 * the calls; TORTURE_SHIFT moves which one (tests/lib.sh's `sampled`; `make
 * asan` samples the long case lists, make test runs them all). */
static inline int check_sampled(void)
{
	static unsigned long n;
	const char *s = getenv("BTR_SAMPLE_STEP"), *sh = getenv("TORTURE_SHIFT");
	unsigned long step = s ? strtoul(s, NULL, 10) : 1, shift = sh ? strtoul(sh, NULL, 10) : 0;
	n++;
	return step <= 1 || (n + shift) % step == 0;
}

static inline int check_done(void)
{
	printf("%d passed, %d failed\n", check_pass_, check_fail_);
	return check_fail_ ? 1 : 0;
}

#endif
