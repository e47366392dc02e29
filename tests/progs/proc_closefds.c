/* proc_closefds.c - children that close every descriptor they did not
 * open, as programs do between fork and exec (Python's subprocess with
 * close_fds=True calls close_range(3, ~0U, 0); gnupg closes in a loop
 * before it execs gpg-agent).  Under `btr record -b qemu` the guest runs
 * in QEMU's process, so this closes the recorder plugin's trace, state
 * and ground-truth files too (before: "input/output error while
 * recording", no trace).
 *
 * Child 1: close_range(3, ~0U, 0), some work, then execs ARGV[1] (when
 * given) or exits 11.  Child 2: close(fd) for every fd from 3 to 1023,
 * some work, exits 12.  The parent waits for both and exits 0. */
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static volatile long sink;
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(int argc, char **argv)
{
	pid_t a = fork();
	if (a == 0) {
		syscall(SYS_close_range, 3u, ~0u, 0u);
		sink = fib(12);
		if (argc > 1)
			execv(argv[1], argv + 1);
		_exit(11);
	}
	pid_t b = fork();
	if (b == 0) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		sink = fib(13);
		_exit(12);
	}
	int st;
	waitpid(a, &st, 0);
	waitpid(b, &st, 0);
	sink = fib(10);
	return 0;
}
