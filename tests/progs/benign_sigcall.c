/* benign_sigcall.c - a signal handler that injects a call, as Go's
 * asynchronous preemption does: it pushes the interrupted pc on the
 * thread's stack and resumes at the entry of `injected`, which returns
 * there.  rt_sigreturn thus resumes a function entry, and that function's
 * return reaches an address no call precedes (the busy loop): `btr check`
 * gave return-hijack (tests/cli_check.sh). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>

volatile long hits;
static volatile int armed;
void injected(void);
/* hits++ without touching the flags or any register: the interrupted
 * code goes on as if nothing ran */
__asm__(".text\n.globl injected\n.type injected, @function\ninjected:\n"
	"\tpush %rax\n\tmov hits(%rip), %rax\n\tlea 1(%rax), %rax\n\tmov %rax, hits(%rip)\n"
	"\tpop %rax\n\tret\n.size injected, .-injected\n");

static void on_alarm(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	if (!armed)
		return;
	greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	g[REG_RSP] -= 8;
	*(greg_t *)g[REG_RSP] = g[REG_RIP];
	g[REG_RIP] = (greg_t)injected;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_alarm;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	/* One shot at a time, armed again after the injected call ran: a
	 * signal during `injected` would inject it again at its own entry
	 * (QEMU delivers a pending signal right at rt_sigreturn's resume
	 * address), and its returns to that entry are then real returns that
	 * no call precedes - a rop-chain, by timing alone. */
	struct itimerval it = { { 0, 0 }, { 0, 5000 } };
	armed = 1;
	setitimer(ITIMER_REAL, &it, NULL);
	volatile unsigned long spins = 0;
	long seen = 0;
	while (hits < 3) {
		spins++;
		if (hits != seen) {
			seen = hits;
			setitimer(ITIMER_REAL, &it, NULL);
		}
	}
	armed = 0;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	printf("%ld injected calls, %lu spins\n", hits, spins);
	return 0;
}
