/* benign_forkjmp: run() sets a jump buffer and forks deep inside; the
 * child leaves through longjmp to run()'s setjmp, and run() returns to
 * main, as perl's exit in a forked child does (perl_run).  The child's
 * trace starts below run(), whose frame `btr check` never saw: a false
 * return-mismatch before. */
#include <setjmp.h>
#include <sys/wait.h>
#include <unistd.h>

static jmp_buf env;
static volatile int sink;

__attribute__((noinline)) static void leave(int code)
{
	sink += code;
	longjmp(env, code);
}

__attribute__((noinline)) static int work(int n)
{
	pid_t p = fork();
	if (p == 0) {
		for (int i = 0; i < n; i++)
			sink += i;
		leave(7);   /* the child */
	}
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

__attribute__((noinline)) static int run(void)
{
	int r = setjmp(env);
	if (r)
		return r;   /* the child, after longjmp */
	return work(100) == 7 ? 0 : 1;
}

int main(void)
{
	int r = run();
	if (r == 7)
		_exit(7);   /* the child */
	return r;
}
