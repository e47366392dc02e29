/* benign_ucontext.c - a generator on its own stack (makecontext), switched
 * to and from with swapcontext, that finally returns through uc_link
 * (makecontext's __start_context).  Every switch returns from swapcontext
 * into the other context's stack: `btr check` gave return-mismatch for
 * each, and return-hijack for the first entry of gen and for its return
 * into __start_context (tests/cli_check.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

static ucontext_t main_uc, gen_uc;
static volatile long cur;
static volatile int done;

static void yield_val(long v)
{
	cur = v;
	swapcontext(&gen_uc, &main_uc);
}

static void gen(int n)
{
	for (long i = 0; i < n; i++)
		yield_val(i * 3);
	done = 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 500;
	static char stack[65536];
	if (getcontext(&gen_uc) != 0)
		return 1;
	gen_uc.uc_stack.ss_sp = stack;
	gen_uc.uc_stack.ss_size = sizeof(stack);
	gen_uc.uc_link = &main_uc;
	makecontext(&gen_uc, (void (*)(void))gen, 1, n);
	long sum = 0;
	while (!done) {
		swapcontext(&main_uc, &gen_uc);
		if (!done)
			sum += cur;
	}
	printf("%ld\n", sum);
	return sum == 3L * n * (n - 1) / 2 ? 0 : 1;
}
