/* proc_crash.c - children that die: one from SIGSEGV, one killed with
 * SIGKILL by the parent; the parent exits 0. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

int main(void)
{
	pid_t a = fork();
	if (a == 0) {
		volatile int *p = (int *)(long)sink;   /* NULL */
		*p = 1;
		_exit(1);
	}
	int fd[2];
	if (pipe(fd) < 0)
		return 1;
	pid_t b = fork();
	if (b == 0) {
		close(fd[0]);
		for (int i = 0; i < 1000; i++)
			sink += i;
		if (write(fd[1], "x", 1) != 1)
			_exit(1);
		/* Killed in a system call: it stops itself (the stop is in
		 * the kill system call) and the parent kills it only then.
		 * (Killed asynchronously in the middle of user code, the last
		 * block's end is approximate: docs/record.md.  Killing it
		 * when the byte arrived, as this once did, sometimes caught it
		 * between write and pause.) */
		raise(SIGSTOP);
		for (;;)
			pause();
	}
	char c;
	close(fd[1]);
	if (read(fd[0], &c, 1) != 1)
		return 1;
	int st;
	if (waitpid(b, &st, WUNTRACED) != b || !WIFSTOPPED(st))
		return 1;
	kill(b, SIGKILL);
	waitpid(a, &st, 0);
	int ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
	waitpid(b, &st, 0);
	ok &= WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
	return ok ? 0 : 1;
}
