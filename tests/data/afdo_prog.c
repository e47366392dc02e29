/* afdo_prog.c - tests/cli_afdo.sh: a program whose sample profile is known
 * from its source.  With argument N: main's loop runs N times; sq is called
 * for every i divisible by 3 (N/3 rounded up), tri is inlined for the
 * others; op() is called indirectly N times, through add for even i and
 * sub for odd i.  Line numbers below are part of the test: keep them. */
#include <stdio.h>
#include <stdlib.h>

static int __attribute__((noinline)) sq(int x)
{
	return x * x;
}

static inline int tri(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += i;
	return s;
}

static int __attribute__((noinline)) add(int a, int b) { return a + b; }
static int __attribute__((noinline)) sub(int a, int b) { return a - b; }
int (*volatile op)(int, int);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	long acc = 0;
	for (int i = 0; i < n; i++) {
		if (i % 3 == 0)
			acc += sq(i);
		else
			acc += tri(i % 7);
		op = (i & 1) ? sub : add;
		acc = op((int)acc, i);
	}
	printf("%ld\n", acc);
	return 0;
}
