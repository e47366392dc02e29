/* proc_spawn.c - posix_spawn (glibc: clone with CLONE_VM|CLONE_VFORK)
 * of this program with an argument. */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static volatile long sink;
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "spawned")) {
		sink = fib(9);
		return 4;
	}
	pid_t p;
	char *args[] = { argv[0], "spawned", NULL };
	if (posix_spawn(&p, "/proc/self/exe", NULL, NULL, args, environ) != 0)
		return 1;
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 4 ? 0 : 2;
}
