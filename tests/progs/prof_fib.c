/* prof_fib: a recursive program with a known call tree for the profile
 * tests: main calls fib(N) once; fib(n) calls fib(n-1) and fib(n-2) for
 * n >= 2, so fib(k) is entered fib-count(k) times (tests/cli_flame.sh). */
#include <stdlib.h>

__attribute__((noinline)) int fib(int n)
{
	if (n < 2)
		return n;
	return fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	return fib(n) == 55 ? 0 : 1;
}
