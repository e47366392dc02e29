/* proc_exec.c - fork, then the child execs this program again (dynamic
 * x86-64) with an argument; the parent waits and execs /bin/true. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		sink = fib(11);
		return 7;
	}
	pid_t p = fork();
	if (p == 0) {
		execl("/proc/self/exe", "proc_exec", "child", (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 7)
		return 1;
	execl("/bin/true", "true", (char *)NULL);
	return 2;
}
