/* nolibc_fork: a static program without libc that forks; the child execs
 * argv[1] (with argv[1..]), the parent waits for it and exits with the
 * child's exit status + 3.  For fork/exec following in the step tests. */
static long sys6(long nr, long a, long b, long c, long d)
{
	long ret;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return ret;
}

static volatile long sink;

__attribute__((noinline)) static long spin(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i ^ n;
	return s;
}

__attribute__((noinline, used)) void cmain(long *sp)
{
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	char **envp = argv + argc + 1;
	long pid = sys6(57 /* fork */, 0, 0, 0, 0);
	if (pid == 0) {
		sink = spin(10);
		if (argc > 1)
			sys6(59 /* execve */, (long)argv[1], (long)(argv + 1), (long)envp, 0);
		sys6(231, 99, 0, 0, 0);
	}
	sink = spin(20);
	int status = 0;
	sys6(61 /* wait4 */, pid, (long)&status, 0, 0);
	sys6(231 /* exit_group */, ((status >> 8) & 0xff) + 3, 0, 0, 0);
}

__asm__(".globl _start\n"
	"_start:\n"
	"  xor %ebp, %ebp\n"
	"  mov %rsp, %rdi\n"
	"  and $-16, %rsp\n"
	"  call cmain\n"
	"  hlt\n");
/* btr-build: nolibc */
