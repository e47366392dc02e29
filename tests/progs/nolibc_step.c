/* nolibc_step: a static program without libc (built -nostdlib -static by
 * CMakeLists.txt: its btr-build line): loops, calls, indirect calls, a
 * switch, system calls (write, getpid), exit_group.  Deterministic: its
 * branch stream is the same under every tracer. */
#include <stddef.h>

static long sys3(long nr, long a, long b, long c)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return ret;
}

static volatile long sink;

__attribute__((noinline)) static long fib(long n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) static long sq(long x) { return x * x; }
__attribute__((noinline)) static long inc(long x) { return x + 1; }
static long (*const ops[])(long) = { sq, inc };

__attribute__((noinline)) static long sw(long i)
{
	switch (i % 5) {
	case 0: return i * 3;
	case 1: return i - 7;
	case 2: return i << 2;
	case 3: return i ^ 0x55;
	default: return -i;
	}
}

__attribute__((noinline)) static long work(void)
{
	long s = 0;
	for (long i = 0; i < 200; i++) {
		s += ops[i & 1](i);
		s += sw(i);
		if (i % 50 == 0)
			s += sys3(39 /* getpid */, 0, 0, 0) > 0;
	}
	return s + fib(12);
}

__attribute__((noinline, used)) void cmain(void)
{
	static const char msg[] = "nolibc_step ok\n";
	sink = work();
	sys3(1 /* write */, 1, (long)msg, sizeof(msg) - 1);
	sys3(231 /* exit_group */, 0, 0, 0);
}

__asm__(".globl _start\n"
	"_start:\n"
	"  xor %ebp, %ebp\n"
	"  and $-16, %rsp\n"
	"  call cmain\n"
	"  hlt\n");
/* btr-build: nolibc */
