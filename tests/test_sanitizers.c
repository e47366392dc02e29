/* test_sanitizers.c - in the sanitizer build (`make asan`, part of .ci/run),
 * proves that the checkers the suite relies on are really on: a child that
 * loses a block must be reported by LeakSanitizer (exit 1, not 0), one that
 * reads past a heap block by AddressSanitizer.  Skipped in other builds. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

#ifdef HAVE_ASAN
static volatile char *volatile keep;

static int run_child(int what)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* our own exit codes, whatever ASAN_OPTIONS says elsewhere */
		if (what == 0) {
			keep = malloc(77);
			keep[0] = 1;
			keep = NULL;      /* lost: a leak */
			exit(0);
		}
		char *p = malloc(8);
		volatile char c = p[8];   /* one past the end */
		(void)c;
		free(p);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
#endif

int main(void)
{
#ifndef HAVE_ASAN
	check_skip("not a sanitizer build (make asan)");
#else
	/* exit 1 for any report (the leak child itself exits 0) */
	setenv("ASAN_OPTIONS", "detect_leaks=1", 1);
	unsetenv("LSAN_OPTIONS");
	/* the options are read at start-up: re-exec ourselves once with them */
	if (!getenv("BTR_SANITIZER_TEST_CHILD")) {
		setenv("BTR_SANITIZER_TEST_CHILD", "1", 1);
		execl("/proc/self/exe", "test_sanitizers", (char *)NULL);
		return 1;
	}
	int leak = run_child(0);
	printf("leaking child: exit %d (LeakSanitizer: 1)\n", leak);
	CHECK_EQ(leak, 1);
	int oob = run_child(1);
	printf("out-of-bounds child: exit %d (AddressSanitizer: 1)\n", oob);
	CHECK_EQ(oob, 1);
	return check_done();
#endif
}
