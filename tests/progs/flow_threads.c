/* flow_threads: a multi-threaded program; main and two workers compute.
 * A flow-decoder / capture test program (the main thread is the one
 * the stepper follows). */
#include <pthread.h>
#include <stdint.h>

static volatile long sink;

__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (i & 1) ? i * 3 : -i;
	return s;
}

static void *worker(void *arg)
{
	long n = (long)(intptr_t)arg;
	sink += work(n);
	return NULL;
}

int main(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(2000 + i));
	sink += work(1500);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
