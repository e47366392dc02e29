/* benign_cold_o2.c - a benign program `btr check` must pass (tests/cli_check.sh):
 * built with -O2 (its btr-build line, CMakeLists.txt), gcc splits f() into
 * f and f.cold - the cases that call the cold function oops() go to
 * f.cold - so f's switch table jumps into another symbol's (and, when
 * stripped, another FDE's) code.  Before check knew split functions it
 * reported jump-non-entry f+0x1d -> f.cold+0x1c. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((cold, noinline)) void oops(const char *m, int v)
{
	fprintf(stderr, "oops %s %d\n", m, v);
}

__attribute__((noinline)) int f(int k, int x)
{
	switch (k) {
	case 0: return x + 1;
	case 1: oops("a", x); return x * 3;
	case 2: return x - 7;
	case 3: oops("c", x); return x ^ 5;
	case 4: return x << 2;
	case 5: oops("d", x); return x / 3;
	case 6: return x % 7;
	default: return 0;
	}
}

int main(int argc, char **argv)
{
	(void)argv;
	int s = 0;
	for (int i = 0; i < 20; i++)
		s += f(i % 9, i - argc * 3);
	printf("%d\n", s);
	return 0;
}
/* btr-build: o2 */
