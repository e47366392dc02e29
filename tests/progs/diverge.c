/* diverge.c - tests/cli_diverge.sh: two runs that part in a known place.
 * Usage: prog_diverge MODE DIGIT (one digit, read without libc so that
 * libc runs alike in both runs).  The lines marked DIVERGE are where the
 * test expects the first divergence. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

static volatile long sink;

static void __attribute__((noinline)) work(int n)
{
	for (int i = 0; i < n; i++)
		sink += i;
}

static int __attribute__((noinline)) leaf(int x)
{
	if (x > 4)                      /* DIVERGE deep */
		sink += 100;
	return x + 1;
}
static int __attribute__((noinline)) mid(int x) { return leaf(x) + 3; }
static int __attribute__((noinline)) top(int x) { return mid(x) * 5; }

static void __attribute__((noinline)) after(void) { work(5); }

static void __attribute__((noinline)) loop(int n)
{
	for (int i = 0; i < n; i++)     /* DIVERGE loop */
		work(3);
	after();
}

static void __attribute__((noinline)) even(int x) { sink += x; }
static void __attribute__((noinline)) odd(int x) { sink -= x; }
static void (*volatile handler)(int);

static void on_usr1(int sig) { sink += sig; }

static void *thread2(void *arg)
{
	int v = *(int *)arg;
	work(10);
	top(v);                         /* the thread's own divergence (deep) */
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	char mode = argv[1][0];
	int v = argv[2][0] - '0';
	work(20);
	switch (mode) {
	case 'd': /* deep */
		sink += top(v);
		break;
	case 'l': /* loop */
		loop(v);
		break;
	case 'i': /* indirect */
		handler = (v & 1) ? odd : even;
		handler(v);             /* DIVERGE indirect */
		break;
	case 's': /* signal */
		signal(SIGUSR1, on_usr1);
		if (v > 4)              /* DIVERGE signal */
			raise(SIGUSR1);
		break;
	case 't': { /* threads: the main thread runs alike, thread 2 differs */
		pthread_t t;
		pthread_create(&t, NULL, thread2, &v);
		pthread_join(t, NULL);
		break;
	}
	}
	work(7);
	return 0;
}
