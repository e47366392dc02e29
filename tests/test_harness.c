/* test_harness.c - tests of tests/check.h itself: a failed CHECK makes
 * check_done() fail, and a check_skip() after a failed check exits 1 (a
 * failure), not 77 (CTest's "Skipped").  Each case runs in a child
 * process, since check_skip() and check_done() end the program. */
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Runs @fn in a child whose stdout/stderr go to /dev/null; its exit code. */
static int run(int (*fn)(void))
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(99);
		check_pass_ = check_fail_ = 0;
		exit(fn());
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int all_pass(void) { CHECK(1); CHECK_EQ(2, 2); CHECK_STR("a", "a"); return check_done(); }
static int one_fail(void) { CHECK(1); CHECK(0); return check_done(); }
static int eq_fail(void) { CHECK_EQ(1, 2); return check_done(); }
static int str_fail(void) { CHECK_STR("a", NULL); return check_done(); }
/* BTR_TEST_FIRST_FAIL=1 (make mutants): the first failed check ends the
 * program, exit 1; without it the program goes on */
static int first_fail_stops(void) { setenv("BTR_TEST_FIRST_FAIL", "1", 1); CHECK(1); CHECK_EQ(1, 2); return 5; }
static int first_fail_off(void) { unsetenv("BTR_TEST_FIRST_FAIL"); CHECK_EQ(1, 2); return 5; }
static int skip_clean(void) { CHECK(1); check_skip("nothing to test"); return 5; }
static int skip_after_fail(void) { CHECK(0); check_skip("data absent"); return 5; }

int main(void)
{
	int rc;
	unsetenv("BTR_TEST_FIRST_FAIL");   /* the cases below fail on purpose */
	CHECK_EQ(rc = run(all_pass), 0);
	CHECK_EQ(rc = run(one_fail), 1);
	CHECK_EQ(rc = run(eq_fail), 1);
	CHECK_EQ(rc = run(str_fail), 1);
	CHECK_EQ(rc = run(skip_clean), 77);
	CHECK_EQ(rc = run(skip_after_fail), 1);
	CHECK_EQ(rc = run(first_fail_stops), 1);
	CHECK_EQ(rc = run(first_fail_off), 5);
	(void)rc;
	return check_done();
}
