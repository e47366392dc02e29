/* step_dyn: a small dynamically linked libc program for the step tests:
 * PLT calls, qsort with a callback (indirect calls from libc into the
 * program), a loop with a switch, a system call through libc.  Prints the
 * same line every run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) static long mix(int *v, int n)
{
	long s = 0;
	for (int i = 0; i < n; i++) {
		switch (v[i] % 3) {
		case 0: s += v[i]; break;
		case 1: s -= v[i] / 2; break;
		default: s ^= v[i];
		}
	}
	return s;
}

int main(int argc, char **argv)
{
	int v[24];
	for (int i = 0; i < 24; i++)
		v[i] = (i * 37 + 11) % 41;
	qsort(v, 24, sizeof(v[0]), cmp);
	long s = mix(v, 24) + (long)strlen(argv[0]) * 0 + argc;
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "step_dyn %ld %d\n", s, v[23]);
	if (write(1, buf, (size_t)n) != n)
		return 1;
	return 0;
}
