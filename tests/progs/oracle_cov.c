/* oracle_cov: the subject of the oracle tests (tests/cli_oracles.sh): a
 * switch gcc compiles to a jump table (cases 0-5 by the table, 6 and 7 by
 * the range check to default), an early return, recursion (fib, drive),
 * and a function that never runs; no loops (gcov counts a loop header's
 * line by its condition's evaluations, btr by its instructions').  Built
 * by CMake (-g -O1 -fno-inline) for btr and callgrind, and by the test
 * with the same flags and --coverage for gcov.  Lines marked "oracle:
 * shared" hold an instruction that runs on more paths than the line's
 * statement (see the test). */
#include <stdlib.h>

volatile int sink;

int classify(int v)
{
	switch (v) {
	case 0:
		sink += 3;
		break;   /* oracle: shared (the common return's code is on this line) */
	case 1:
		sink ^= 7;
		break;
	case 2:
		sink -= 11;
		break;
	case 3:
		sink += sink << 1;
		break;
	case 4:
		sink = sink * 5 + 1;
		break;
	case 5:
		sink >>= 1;
		break;
	default:
		sink = 1;
		break;
	}
	return sink;
}

int clamp(int x)
{
	if (x < 10) {
		sink++;
		return 0;
	}
	sink--;
	return x;
}

long fib(int n)
{
	if (n < 2)
		return n;   /* oracle: shared (its mov runs before the test) */
	return fib(n - 1) + fib(n - 2);
}

int never(int x)
{
	sink = x * 3;
	return sink;
}

int drive(int n)
{
	if (n == 0)
		return 0;
	classify(n % 8);
	clamp(n);
	return drive(n - 1) + 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	drive(n);
	sink = (int)fib(10);
	if (argc > 5)
		never(argc);
	return 0;
}
