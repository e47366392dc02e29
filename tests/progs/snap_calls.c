/* snap_calls.c - deterministic subject of the snapshot tests
 * (tests/test_qemu_snapshot.c, tests/cli_qemu_snapshot.sh): busy work
 * (a few hundred KB of PT) between calls of mark(), the trigger.
 * Usage:
 *   snap_calls [N]          calls mark() N times (default 3), busy work before each
 *   snap_calls wait READY STOP  creates READY, then works (one system call per
 *                           round) until the file STOP exists */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile unsigned sink;

__attribute__((noinline)) unsigned step(unsigned x)
{
	unsigned s = 0;
	for (unsigned i = 0; i < (x & 7) + 3; i++)
		s += (x >> (i & 7)) ^ i;
	return s;
}

__attribute__((noinline)) void busy(unsigned seed, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		if (seed & 0x100)
			sink += step(seed >> 8);
		else
			sink ^= seed;
	}
}

__attribute__((noinline)) void mark(unsigned i)
{
	sink += i;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "wait")) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			return 1;
		close(fd);
		for (unsigned r = 0; access(argv[3], F_OK) != 0; r++)
			busy(r, 2000);
		printf("%u\n", sink);
		return 0;
	}
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
	for (unsigned i = 0; i < n; i++) {
		busy(i + 1, 200000);
		mark(i);
	}
	printf("%u\n", sink);
	return 0;
}
