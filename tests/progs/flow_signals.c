/* flow_signals: setjmp/longjmp, a signal handler entered from raise(), a
 * SIGSEGV handler that leaves with siglongjmp (an asynchronous transfer
 * from a faulting instruction).  A flow-decoder test program. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile int sink;
static jmp_buf jb;
static sigjmp_buf sjb;
static volatile int hits;

static void on_usr1(int sig) { hits += sig; }
static void on_segv(int sig) { (void)sig; siglongjmp(sjb, 7); }

__attribute__((noinline)) static void deep(int d)
{
	if (d > 0) {
		sink += d;
		deep(d - 1);
		sink -= d;   /* never reached */
	}
	if (d <= 0 || sink < 0)
		longjmp(jb, 42);
}

__attribute__((noinline)) static int work(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += (i & 3) ? i : -i;
	return s;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_segv;
	sigaction(SIGSEGV, &sa, NULL);

	for (volatile int k = 0; k < 3; k++) {
		int v = setjmp(jb);
		if (v == 0)
			deep(5 + k);
		sink += v + work(200);
	}
	raise(SIGUSR1);
	sink += work(100);
	if (sigsetjmp(sjb, 1) == 0) {
		volatile int *p = (volatile int *)(uintptr_t)(sink * 0);
		*p = 1;      /* faults */
	}
	sink += work(100) + hits;
	return 0;
}
