/* proc_mtfork.c - a threaded process that forks while its threads run;
 * the child (one thread) works and exits 6. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void *work(void *arg)
{
	long n = (long)arg;
	for (int i = 0; i < 20; i++)
		sink += fib((int)n);
	return NULL;
}

int main(void)
{
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, work, (void *)(12 + i));
	pid_t p = fork();
	if (p == 0) {
		sink = fib(14);
		_exit(6);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 6 ? 0 : 1;
}
