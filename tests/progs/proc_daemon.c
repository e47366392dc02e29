/* proc_daemon.c - a double-fork daemon: the grandchild outlives its
 * parent and the recorded command, works a while and exits 9. */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(void)
{
	pid_t p = fork();
	if (p == 0) {
		setsid();
		if (fork() == 0) {
			struct timespec ts = { 0, 300 * 1000 * 1000 };
			nanosleep(&ts, NULL);   /* after everyone else has gone */
			sink = fib(13);
			_exit(9);
		}
		_exit(0);
	}
	int st;
	waitpid(p, &st, 0);
	return 0;
}
