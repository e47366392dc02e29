/* qemu_mt: four threads run the same hot code at the same time, so that
 * QEMU executes the same translation blocks in parallel host threads.
 * A capture test program: per-thread streams must stay exact. */
#include <pthread.h>
#include <stdint.h>

static volatile long sink;

__attribute__((noinline)) static long mix(long x, long i)
{
	if (x & 1)
		x = x * 3 + i;
	else
		x = x / 2 + (i & 7);
	return x;
}

static void *worker(void *arg)
{
	long x = (long)(intptr_t)arg, acc = 0;
	for (long i = 0; i < 60000; i++) {
		x = mix(x, i);
		acc += (x & 4) ? x : -x;
	}
	sink += acc;
	return NULL;
}

int main(void)
{
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i + 7));
	worker((void *)(intptr_t)5);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	return 0;
}
