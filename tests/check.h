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

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (cond) {                                                      \
			check_pass_++;                                           \
		} else {                                                         \
			check_fail_++;                                           \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
		}                                                                \
	} while (0)

#define CHECK_EQ(a, b)                                                           \
	do {                                                                     \
		long long a_ = (long long)(a), b_ = (long long)(b);              \
		if (a_ == b_) {                                                  \
			check_pass_++;                                           \
		} else {                                                         \
			check_fail_++;                                           \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld (0x%llx != 0x%llx)\n", \
				__FILE__, __LINE__, #a, #b, a_, b_,                \
				(unsigned long long)a_, (unsigned long long)b_);   \
		}                                                                \
	} while (0)

#define CHECK_STR(a, b)                                                          \
	do {                                                                     \
		const char *a_ = (a), *b_ = (b);                                 \
		if (a_ && b_ && !strcmp(a_, b_)) {                               \
			check_pass_++;                                           \
		} else {                                                         \
			check_fail_++;                                           \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", \
				__FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
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

static inline int check_done(void)
{
	printf("%d passed, %d failed\n", check_pass_, check_fail_);
	return check_fail_ ? 1 : 0;
}

#endif
