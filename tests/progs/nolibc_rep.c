/* nolibc_rep: `rep movsb` of argc-dependent length, then exit_group.  Run
 * with no argument it copies 1 byte, with one argument 4000 bytes: the
 * instruction count is the same (a rep string instruction is one
 * instruction however many iterations it runs), which tests/cli_insn_count.sh
 * checks of the independent counter and of btr. */
static char src[4096], dst[4096];

__attribute__((noinline, used)) void cmain(long argc)
{
	unsigned long n = argc > 1 ? 4000 : 1;
	void *d = dst;
	const void *s = src;
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	__asm__ volatile("syscall" : : "a"(231), "D"(0) : "rcx", "r11", "memory");
	__builtin_unreachable();
}

__asm__(".globl _start\n_start:\n\tmov (%rsp), %rdi\n\tand $-16, %rsp\n\tcall cmain\n\thlt\n");
/* btr-build: nolibc */
