/* bench_step_trap.c - the cost of one trap, the unit of trap-flag tracing:
 * a ptrace single step reading the IP with PTRACE_PEEKUSER (what
 * `btr record -b step` does per instruction), the same with
 * PTRACE_GETREGS (all registers), and an in-process SIGTRAP whose handler
 * sets TF again (what the --inproc agent does).  Prints wall and CPU
 * microseconds per trap.  Usage: bench_step_trap [TRAPS] (default 20000). */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu(void)
{
	struct rusage a, b;
	getrusage(RUSAGE_SELF, &a);
	getrusage(RUSAGE_CHILDREN, &b);
	return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
	       (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec) * 1e-6;
}

static volatile long spin;

static void ptrace_steps(long n, int getregs)
{
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		for (;;)
			spin++;
	}
	int st;
	waitpid(pid, &st, 0);
	double w0 = now(), c0 = cpu();
	unsigned long long sum = 0;
	for (long i = 0; i < n; i++) {
		ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
		waitpid(pid, &st, 0);
		if (getregs) {
			struct user_regs_struct r;
			ptrace(PTRACE_GETREGS, pid, NULL, &r);
			sum += r.rip;
		} else {
			sum += (unsigned long long)ptrace(PTRACE_PEEKUSER, pid, (void *)offsetof(struct user_regs_struct, rip), NULL);
		}
	}
	double w = now() - w0;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);   /* the child's CPU time counts once it is reaped */
	double c = cpu() - c0;
	printf("%-40s %8.1f us wall %8.1f us cpu  (%llx)\n", getregs ? "ptrace SINGLESTEP + GETREGS" : "ptrace SINGLESTEP + PEEKUSER(rip)",
	       1e6 * w / (double)n, 1e6 * c / (double)n, sum & 0xf);
}

static volatile long traps, limit;

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	ucontext_t *u = uc;
	if (++traps < limit)
		u->uc_mcontext.gregs[REG_EFL] |= 0x100;
	else
		u->uc_mcontext.gregs[REG_EFL] &= ~0x100L;
}

static void inproc_steps(long n)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	limit = n;
	double w0 = now(), c0 = cpu();
	__asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
	while (traps < limit)
		spin++;
	double w = now() - w0, c = cpu() - c0;
	printf("%-40s %8.1f us wall %8.1f us cpu\n", "in-process SIGTRAP, handler sets TF", 1e6 * w / (double)n,
	       1e6 * c / (double)n);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	printf("per trap, %ld traps each:\n", n);
	ptrace_steps(n, 0);
	ptrace_steps(n, 1);
	inproc_steps(n);
	return 0;
}
