/* qemu_async: asynchronous signals (an interval timer) interrupting hot
 * loops full of conditional and indirect branches at arbitrary points,
 * plus signals sent by another thread.  A capture test program: the
 * trace must show each interruption (FUP + TIP) at the exact IP. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static volatile long sink;
static volatile int ticks;

static void on_alarm(int sig) { ticks++; sink += sig; }

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
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };   /* every 2 ms */
	setitimer(ITIMER_REAL, &it, NULL);
	/* Runs for a fixed number of ticks, not a fixed amount of work, so
	 * that every run sees interruptions. */
	for (long i = 1; ticks < 20; i++)
		sink += collatz(i);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	return 0;
}
