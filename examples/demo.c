/* demo.c - the program `make demo` records: loops, recursion, indirect
 * calls through a table and a switch, driven by its argument N. */
#include <stdio.h>
#include <stdlib.h>

static unsigned long fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static unsigned long square(unsigned long x) { return x * x; }
static unsigned long twice(unsigned long x) { return 2 * x; }
static unsigned long succ(unsigned long x) { return x + 1; }

static unsigned long (*const ops[])(unsigned long) = { square, twice, succ };

static unsigned long classify(unsigned long v)
{
	switch (v % 7) {   /* a jump table at -O1 */
	case 0: return v / 7;
	case 1: return v * 3 + 1;
	case 2: return v ^ 0x55;
	case 3: return v + 11;
	case 4: return v - 1;
	case 5: return v << 1;
	default: return v >> 1;
	}
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 10;
	if (n > 30)
		n = 30;
	unsigned long acc = 0;
	for (unsigned i = 0; i < n; i++) {
		acc += ops[i % 3](i);
		acc = classify(acc);
	}
	printf("fib(%u) = %lu, acc = %lu\n", n, fib(n), acc);
	return 0;
}
