/* select_qsort.c - deterministic subject of the selection tests
 * (tests/cli_qemu_filter.sh) and of the timings in docs/record.md: its
 * time goes to libc's qsort with a comparison callback, cmp(); a small
 * leaf, work(), runs about 1% of its instructions.  A signal handler,
 * on_sig(), runs once per round (entered by a signal from outside).
 * Usage: select_qsort [N [ROUNDS]] (default 3000 elements, 3 rounds). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned sink;

__attribute__((noinline)) unsigned work(unsigned x)
{
	unsigned s = 0;
	for (unsigned i = 0; i < (x & 15) + 4; i++)
		s += (x >> (i & 7)) ^ i;
	return s;
}

__attribute__((noinline)) int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) void on_sig(int sig)
{
	sink += (unsigned)sig;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 3000;
	unsigned rounds = argc > 2 ? (unsigned)atoi(argv[2]) : 3;
	int *v = malloc(n * sizeof(*v));
	if (!v)
		return 1;
	signal(SIGUSR1, on_sig);
	unsigned seed = 1;
	for (unsigned r = 0; r < rounds; r++) {
		for (unsigned i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			v[i] = (int)(seed >> 8);
		}
		qsort(v, n, sizeof(*v), cmp);
		for (unsigned i = 0; i < n; i += 16)
			sink += work((unsigned)v[i]);
		kill(getpid(), SIGUSR1);
	}
	printf("%u\n", sink);
	free(v);
	return 0;
}
