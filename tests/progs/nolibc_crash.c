/* nolibc_crash: a static program without libc that calls through a few
 * functions and then writes through a bad pointer (SIGSEGV at a known
 * place, fault address 0x1234) - for the flight recorder and btr crash. */
static volatile long sink;

__attribute__((noinline)) static void poke(long *p, long v)
{
	*p = v;                        /* faults: p = 0x1234 */
}

__attribute__((noinline)) static long step2(long x)
{
	for (long i = 0; i < 40; i++)
		x += (i & 1) ? i : -i;
	return x;
}

__attribute__((noinline)) static void step1(long n)
{
	sink = step2(n);
	poke((long *)(0x1234 + (sink & 0)), n);
}

__attribute__((noinline, used)) void cmain(void)
{
	for (long i = 0; i < 3; i++)
		sink += step2(i);
	step1(sink);
}

__asm__(".globl _start\n"
	"_start:\n"
	"  xor %ebp, %ebp\n"
	"  and $-16, %rsp\n"
	"  call cmain\n"
	"  hlt\n");
/* btr-build: nolibc */
