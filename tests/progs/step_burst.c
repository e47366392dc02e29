/* step_burst: twelve threads and main enter work() at the same moment
 * (released by one barrier), for `btr record -b step --start work`: while
 * one thread steps over the lifted start breakpoint, every other entry must
 * still be caught. */
#include <pthread.h>
#include <stdint.h>

#define NTHR 12

static volatile long sink;
static pthread_barrier_t bar;

__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += (i & 1) ? i * 3 : -i;
	return s;
}

static void *worker(void *arg)
{
	pthread_barrier_wait(&bar);
	sink += work((long)(intptr_t)arg);
	return NULL;
}

int main(void)
{
	pthread_t t[NTHR];
	pthread_barrier_init(&bar, NULL, NTHR + 1);
	for (int i = 0; i < NTHR; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(100 + i));
	pthread_barrier_wait(&bar);
	sink += work(50);
	for (int i = 0; i < NTHR; i++)
		pthread_join(t[i], NULL);
	return 0;
}
