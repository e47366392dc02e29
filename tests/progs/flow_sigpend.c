/* flow_sigpend: signals pending when a handler returns.  SIGALRM's handler
 * raises SIGUSR1, which its sa_mask blocks: SIGUSR1 is pending when
 * rt_sigreturn restores the mask, and is delivered right there, before the
 * interrupted code runs again (where a return, an indirect call or a
 * conditional branch may have been waiting for its target since SIGALRM
 * came).  The QEMU recorder once took SIGUSR1's handler for that target. */
#include <signal.h>
#include <string.h>
#include <sys/time.h>

static volatile long sink;
static volatile int ticks, usr;

static void on_usr(int sig) { usr++; sink += sig; }
static void on_alarm(int sig) { ticks++; raise(SIGUSR1); sink += sig; }

__attribute__((noinline)) static long f1(long x) { return x * 3 + 1; }
__attribute__((noinline)) static long f2(long x) { return x / 2; }
static long (*const volatile fns[2])(long) = { f1, f2 };

__attribute__((noinline)) static long collatz(long n)
{
	long steps = 0;
	while (n != 1) {
		n = fns[n & 1 ? 0 : 1](n);
		steps++;
	}
	return steps;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	for (long i = 1; ticks < 30; i++)
		sink += collatz(i);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	return usr == ticks ? 0 : 1;
}
