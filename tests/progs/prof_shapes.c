/* prof_shapes: control-flow shapes a call-stack rebuilder must survive,
 * each in a function of its own so the expected folded stacks are known
 * from the source (tests/cli_flame.sh):
 *  - tail calls: tail_a() ends with a jump to tail_b(), which jumps to
 *    tail_c() (forced with musttail-like -O1 sibling-call code: see the
 *    asm below, which is a plain jmp whatever the compiler does);
 *  - longjmp: main -> lj_outer -> lj_mid -> lj_inner, which longjmps back
 *    into lj_outer;
 *  - a signal handler: main -> sig_raiser raises SIGUSR1 via kill();
 *    on_usr1 runs and returns through sigreturn;
 *  - code running into the next function without a branch: fall_a ends
 *    where fall_b begins (as glibc's __strcasecmp_avx2 runs on into
 *    __strcasecmp_l_avx2); fall_b loops 20 times and returns. */
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>

volatile int sink;
static jmp_buf jb;

__attribute__((noinline)) void spin(int n)
{
	for (int i = 0; i < n; i++)
		sink += i;
}

/* tail_a and tail_b end in a jmp to the next function: written in asm so
 * that the jump is a tail call at every optimization level. */
void tail_c(void);
__attribute__((noinline)) void tail_c(void) { spin(10); }
void tail_b(void);
void tail_a(void);
__asm__(".text\n.globl tail_b\n.type tail_b,@function\ntail_b:\n"
	"  addl $1, sink(%rip)\n  jmp tail_c\n.size tail_b, .-tail_b\n"
	".globl tail_a\n.type tail_a,@function\ntail_a:\n"
	"  addl $1, sink(%rip)\n  jmp tail_b\n.size tail_a, .-tail_a\n");

void fall_a(void);
void fall_b(void);
__asm__(".text\n.globl fall_a\n.type fall_a,@function\nfall_a:\n"
	"  addl $1, sink(%rip)\n.size fall_a, .-fall_a\n"
	".globl fall_b\n.type fall_b,@function\nfall_b:\n"
	"  movl $20, %ecx\n1:\n  addl $1, sink(%rip)\n  decl %ecx\n  jnz 1b\n  ret\n"
	".size fall_b, .-fall_b\n");

__attribute__((noinline)) void lj_inner(void)
{
	spin(5);
	longjmp(jb, 1);
}

__attribute__((noinline)) void lj_mid(void)
{
	lj_inner();
	sink++;   /* not reached */
}

__attribute__((noinline)) void lj_outer(void)
{
	if (setjmp(jb) == 0)
		lj_mid();
	else
		spin(3);
}

static void on_usr1(int sig)
{
	(void)sig;
	spin(7);
}

__attribute__((noinline)) void sig_raiser(void)
{
	kill(getpid(), SIGUSR1);
	spin(2);
}

int main(void)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	tail_a();
	fall_a();
	lj_outer();
	sig_raiser();
	return 0;
}
