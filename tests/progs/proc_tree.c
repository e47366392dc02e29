/* proc_tree.c - a fork tree three levels deep, different work in each
 * process, distinct exit codes (tests/cli_procs.sh checks them). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static long sum_to(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i ^ (i >> 3);
	return s;
}

static int wait_all(void)
{
	int st, bad = 0;
	while (wait(&st) > 0)
		bad |= !WIFEXITED(st);
	return bad;
}

int main(void)
{
	for (int c = 0; c < 2; c++) {
		pid_t p = fork();
		if (p < 0)
			return 100;
		if (p == 0) {
			/* level 2: child c, with one grandchild of its own */
			pid_t g = fork();
			if (g == 0) {
				sink = c ? sum_to(3000) : fib(12);   /* level 3 */
				_exit(20 + c);
			}
			sink = c ? fib(10 + c) : sum_to(1000);
			int st;
			waitpid(g, &st, 0);
			exit(WIFEXITED(st) && WEXITSTATUS(st) == 20 + c ? 10 + c : 99);
		}
	}
	sink = fib(8);
	return wait_all() ? 1 : 0;
}
