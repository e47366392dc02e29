/* select_late.c - subject of tests/test_qemu_filter.c's "late" case: an
 * IP range left by returns to a block QEMU translated before the range
 * ever ran.  main() calls through a function pointer: the first call goes
 * to outside(), whose return translates the block after the call; every
 * later call goes to inside() (the range), whose return lands in that
 * block, translated without the plugin's exit callback.  inside() also
 * calls outside() (translated before) and comes back.  Usage:
 * select_late [N] (default 200 calls). */
#include <stdio.h>
#include <stdlib.h>

volatile unsigned sink;

__attribute__((noinline)) unsigned outside(unsigned x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) unsigned inside(unsigned x)
{
	unsigned s = 0;
	for (unsigned i = 0; i < (x & 3) + 1; i++)
		s += x ^ i;
	if (x % 5 == 0)
		s += outside(x);   /* out and back in */
	return s;
}

typedef unsigned (*fn)(unsigned);
fn volatile table[2] = { outside, inside };

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
	for (unsigned i = 0; i < n; i++) {
		fn f = table[i > 0];
		sink += f(i);
	}
	printf("%u\n", sink);
	return 0;
}
