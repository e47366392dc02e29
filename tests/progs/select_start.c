/* select_start.c - `btr record --start rec` (tests/cli_qemu_filter.sh):
 * three threads enter rec() at once (a barrier), rec() recurses and
 * calls leaf(); outside() runs before and after and must not be traced. */
#include <pthread.h>

static volatile unsigned sink;
static pthread_barrier_t bar;

__attribute__((noinline)) unsigned leaf(unsigned x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) unsigned rec(unsigned n)
{
	if (n == 0)
		return leaf(n);
	return rec(n - 1) + leaf(n);
}

__attribute__((noinline)) unsigned outside(unsigned n)
{
	unsigned s = 0;
	for (unsigned i = 0; i < n; i++)
		s += leaf(i) ^ i;
	return s;
}

static void *thr(void *arg)
{
	unsigned k = (unsigned)(unsigned long)arg;
	pthread_barrier_wait(&bar);
	for (unsigned i = 0; i < 3; i++) {
		sink += rec(3 + k);
		sink += outside(20);
	}
	return 0;
}

int main(void)
{
	pthread_t t[3];
	pthread_barrier_init(&bar, 0, 3);
	sink += outside(50);
	for (unsigned long i = 0; i < 3; i++)
		pthread_create(&t[i], 0, thr, (void *)i);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], 0);
	return 0;
}
