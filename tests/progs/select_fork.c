/* select_fork.c - a leaf, work(), in a parent, its forked child and the
 * program the child execs (this one again, argument "exec"):
 * tests/test_qemu_filter.c traces work() alone in all three. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned sink;

__attribute__((noinline)) unsigned work(unsigned x)
{
	unsigned s = 0;
	for (unsigned i = 0; i < (x & 7) + 2; i++)
		s += x ^ i;
	return s;
}

static void calls(unsigned n, unsigned seed)
{
	for (unsigned i = 0; i < n; i++)
		sink += work(i * seed);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		calls(50, 7);
		return 0;
	}
	calls(30, 3);
	pid_t pid = fork();
	if (pid == 0) {
		calls(40, 5);
		execl(argv[0], argv[0], "exec", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	calls(20, 11);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
