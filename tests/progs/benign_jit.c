/* benign_jit.c - a benign program `btr check` must pass (tests/cli_check.sh),
 * JIT-style code: a stub in an anonymous executable mapping (no file, so
 * the PT decoder loses the flow there) calls back into the program, whose
 * callees return normally - with PT return compression, the return from
 * the callback into the stub and the stub's own return are compressed
 * against calls the decoder did not see.  Benign: the only finding
 * `btr check` may give is unbacked-code for the stub.  Before the decoder
 * stopped at a compressed return it had no call for, it bound those
 * returns to later branches' targets: code-modified in _IO_old_init,
 * return-mismatch in _IO_default_xsputn, unbacked-code from strlen (as
 * got-overwrite and call-non-entry in node after its JIT code). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static char buf[64];

__attribute__((noinline)) static long work(long x)
{
	int n = snprintf(buf, sizeof(buf), "%ld-%ld", x, x * 7);
	return n + (long)strlen(buf) + (x & 3 ? work(x >> 1) : 0);
}

int main(void)
{
	/* push %rbx; mov %rdi,%rbx; mov %rsi,%rdi; call *%rbx; add $1,%rax; pop %rbx; ret */
	static const unsigned char stub[] = { 0x53, 0x48, 0x89, 0xfb, 0x48, 0x89, 0xf7, 0xff, 0xd3,
					      0x48, 0x83, 0xc0, 0x01, 0x5b, 0xc3 };
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memcpy(p, stub, sizeof(stub));
	long (*jit)(long (*)(long), long) = (long (*)(long (*)(long), long))p;
	long s = 0;
	for (long i = 0; i < 300; i++)
		s += jit(work, i) + work(i + 1);
	printf("%ld\n", s);
	return 0;
}
