/* jit_rewrite.c - code without a file, rewritten in place (issue 23;
 * tests/cli_jit.sh).  Writes a function into an anonymous executable
 * mapping, runs it, rewrites it in place with a different function (other
 * bytes, other instruction lengths at the same addresses), runs that,
 * writes the first version back and runs it again.  A perf map
 * (/tmp/perf-PID.map) names the code "jit_loop", as JIT runtimes do; or,
 * with "jitdump", a jitdump file ./jit-PID.dump (tools/perf/Documentation/
 * jitdump-specification.txt: the header, the file mapped executable so
 * that a recorder sees it, a code load record per version written) names
 * it "jit_dumped".
 * Instructions per call: version A 2 + 3n + 1, version B 2 + 4n + 1.
 * Usage: prog_jit_rewrite [CALLS [N [jitdump]]] (default 200 calls of
 * n = 500, a perf map). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

static int dump_fd = -1;

/* A jitdump JIT_CODE_LOAD record: @size bytes of code at @p, the
 * @index-th load, named "jit_dumped". */
static void dump_load(const unsigned char *p, size_t size, uint64_t index)
{
	static const char name[] = "jit_dumped";
	struct {
		uint32_t id, total_size;
		uint64_t timestamp;
		uint32_t pid, tid;
		uint64_t vma, code_addr, code_size, code_index;
	} r = { 0, (uint32_t)(sizeof(r) + sizeof(name) + size), 0, (uint32_t)getpid(),
		(uint32_t)syscall(SYS_gettid), (uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p, size, index };
	if (dump_fd < 0 || write(dump_fd, &r, sizeof(r)) != (ssize_t)sizeof(r) ||
	    write(dump_fd, name, sizeof(name)) != (ssize_t)sizeof(name) || write(dump_fd, p, size) != (ssize_t)size)
		exit(2);
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200, n = argc > 2 ? atol(argv[2]) : 500;
	int jitdump = argc > 3 && !strcmp(argv[3], "jitdump");
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	char path[64];
	if (jitdump) {
		snprintf(path, sizeof(path), "jit-%d.dump", (int)getpid());
		dump_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		struct {
			uint32_t magic, version, total_size, elf_mach, pad1, pid;
			uint64_t timestamp, flags;
		} h = { 0x4A695444, 1, sizeof(h), 62, 0, (uint32_t)getpid(), 0, 0 };
		if (dump_fd < 0 || write(dump_fd, &h, sizeof(h)) != (ssize_t)sizeof(h) ||
		    mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, dump_fd, 0) == MAP_FAILED)
			return 2;
	} else {
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
		FILE *f = fopen(path, "w");
		if (f) {
			fprintf(f, "%lx %zx jit_loop\n", (unsigned long)p, sizeof(ver_b));
			fclose(f);
		}
	}
	long (*fn)(long) = (long (*)(long))p;
	memcpy(p, ver_a, sizeof(ver_a));
	if (jitdump)
		dump_load(p, sizeof(ver_a), 1);
	long a = run(fn, calls, n);
	memcpy(p, ver_b, sizeof(ver_b));
	if (jitdump)
		dump_load(p, sizeof(ver_b), 2);
	long b = run(fn, calls, n);
	memcpy(p, ver_a, sizeof(ver_a));
	if (jitdump)
		dump_load(p, sizeof(ver_a), 3);
	long c = run(fn, calls, n);
	printf("%ld %ld %ld\n", a, b, c);
	return 0;
}
