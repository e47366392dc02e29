/* jit_rewrite.c - code without a file, rewritten in place (issue 23;
 * tests/cli_jit.sh).  Writes a function into an anonymous executable
 * mapping, runs it, rewrites it in place with a different function (other
 * bytes, other instruction lengths at the same addresses), runs that,
 * writes the first version back and runs it again.  A perf map
 * (/tmp/perf-PID.map) names the code "jit_loop", as JIT runtimes do.
 * Instructions per call: version A 2 + 3n + 1, version B 2 + 4n + 1.
 * Usage: prog_jit_rewrite [CALLS [N]] (default 200 calls of n = 500). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* mov %edi,%ecx; xor %eax,%eax; L: add $3,%eax; dec %ecx; jnz L; ret */
static const unsigned char ver_a[] = { 0x89, 0xf9, 0x31, 0xc0, 0x83, 0xc0, 0x03, 0xff, 0xc9, 0x75, 0xf9, 0xc3 };
/* mov %edi,%ecx; mov $1,%eax; L: lea (%rax,%rax,2),%eax; xor %ecx,%eax;
 * sub $1,%ecx; jne L; ret */
static const unsigned char ver_b[] = { 0x89, 0xf9, 0xb8, 0x01, 0x00, 0x00, 0x00, 0x8d, 0x04, 0x40,
				       0x31, 0xc8, 0x83, 0xe9, 0x01, 0x75, 0xf6, 0xc3 };

__attribute__((noinline)) static long run(long (*f)(long), long calls, long n)
{
	long s = 0;
	for (long i = 0; i < calls; i++)
		s += f(n);
	return s;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200, n = argc > 2 ? atol(argv[2]) : 500;
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	char map[64];
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(map, "w");
	if (f) {
		fprintf(f, "%lx %zx jit_loop\n", (unsigned long)p, sizeof(ver_b));
		fclose(f);
	}
	long (*fn)(long) = (long (*)(long))p;
	memcpy(p, ver_a, sizeof(ver_a));
	long a = run(fn, calls, n);
	memcpy(p, ver_b, sizeof(ver_b));
	long b = run(fn, calls, n);
	memcpy(p, ver_a, sizeof(ver_a));
	long c = run(fn, calls, n);
	printf("%ld %ld %ld\n", a, b, c);
	return 0;
}
