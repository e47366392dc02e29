/* proc_forktrans.c - two threads run 1000 functions never run before while
 * main forks four times; each child runs them all too.  QEMU translates
 * blocks in the threads right up to each fork, and the child's copies of
 * those blocks must find their information in the child's state (the
 * plugin copied the state at the fork's entry only: children met gaps "no
 * code image at address" in 6 of 10 recordings). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

#define F(n)                                                                   \
	__attribute__((noinline)) static long f##n(long x)                     \
	{                                                                      \
		if (x & (1 << (n % 7)))                                        \
			x = x * (n + 3) + 1;                                   \
		else                                                           \
			x ^= n * 7 + 1;                                        \
		return x + sink;                                               \
	}
#define F10(n) F(n##0) F(n##1) F(n##2) F(n##3) F(n##4) F(n##5) F(n##6) F(n##7) F(n##8) F(n##9)
#define F100(n) F10(n##0) F10(n##1) F10(n##2) F10(n##3) F10(n##4) F10(n##5) F10(n##6) F10(n##7) F10(n##8) F10(n##9)
F100(1) F100(2) F100(3) F100(4) F100(5) F100(6) F100(7) F100(8) F100(9) F100(10)

#define P(n) f##n,
#define P10(n) P(n##0) P(n##1) P(n##2) P(n##3) P(n##4) P(n##5) P(n##6) P(n##7) P(n##8) P(n##9)
#define P100(n) P10(n##0) P10(n##1) P10(n##2) P10(n##3) P10(n##4) P10(n##5) P10(n##6) P10(n##7) P10(n##8) P10(n##9)
static long (*const tab[])(long) = { P100(1) P100(2) P100(3) P100(4) P100(5) P100(6) P100(7) P100(8) P100(9) P100(10) };

static void all(void)
{
	for (unsigned i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		sink += tab[i]((long)i);
}

static void *worker(void *a)
{
	(void)a;
	all();
	return NULL;
}

int main(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	int bad = 0;
	for (int k = 0; k < 4; k++) {
		pid_t p = fork();
		if (p == 0) {
			all();
			_exit(5);
		}
		int st;
		bad |= waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 5;
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return bad;
}
