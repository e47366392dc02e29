/* prof_bolt_relocs: a small program whose functions all run, linked with
 * -Wl,--emit-relocs (its btr-build line, CMakeLists.txt) as BOLT
 * wants; tests/cli_bolt.sh records it and feeds btr's profile to
 * llvm-bolt. */
#include <stdlib.h>
#include <string.h>

volatile unsigned sink;

__attribute__((noinline)) unsigned mix(unsigned x)
{
	x ^= x >> 13;
	x *= 0x5bd1e995u;
	return x ^ (x >> 15);
}

__attribute__((noinline)) int is_prime(unsigned n)
{
	if (n < 2)
		return 0;
	for (unsigned d = 2; d * d <= n; d++)
		if (n % d == 0)
			return 0;
	return 1;
}

__attribute__((noinline)) unsigned count_primes(unsigned lim)
{
	unsigned c = 0;
	for (unsigned i = 0; i < lim; i++)
		c += is_prime(i);
	return c;
}

__attribute__((noinline)) void bubble(unsigned *a, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j + 1 < n - i; j++)
			if (a[j] > a[j + 1]) {
				unsigned t = a[j];
				a[j] = a[j + 1];
				a[j + 1] = t;
			}
}

__attribute__((noinline)) unsigned checksum(const unsigned *a, int n)
{
	unsigned s = 0;
	for (int i = 0; i < n; i++)
		s = mix(s + a[i]);
	return s;
}

__attribute__((noinline)) int classify(unsigned v)
{
	switch (v % 5) {
	case 0: return 3;
	case 1: return 7;
	case 2: return v & 1 ? 11 : 13;
	case 3: return 17;
	default: return 19;
	}
}

__attribute__((noinline)) unsigned walk(int n)
{
	unsigned s = 0;
	for (int i = 0; i < n; i++)
		s += (unsigned)classify(mix((unsigned)i));
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	unsigned *a = malloc(sizeof(*a) * (size_t)n);
	for (int i = 0; i < n; i++)
		a[i] = mix((unsigned)i * 2654435761u);
	bubble(a, n);
	sink = checksum(a, n) + count_primes((unsigned)n * 10) + walk(n * 5);
	free(a);
	return 0;
}
/* btr-build: relocs */
