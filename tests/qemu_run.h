/* qemu_run.h - test helper: run `btr record -q -b qemu ARGS... -o OUT --
 * PROG` with the plugin's counts going to a stats file (BTR_QEMU_STATS),
 * stdout to /dev/null.  Shared by the QEMU recorder's tests. */
#ifndef BTR_TEST_QEMU_RUN_H
#define BTR_TEST_QEMU_RUN_H

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Returns btr's exit status (128 + signal if it died).  @args: NULL or a
 * NULL-terminated list of at most 24 words. */
static inline int qemu_record(const char *btr, const char *out, const char *const *args, const char *prog,
			      const char *stats)
{
	char *argv[32];
	int n = 0;
	argv[n++] = (char *)btr;
	argv[n++] = "record";
	argv[n++] = "-q";
	argv[n++] = "-b";
	argv[n++] = "qemu";
	for (int i = 0; args && args[i] && n < 24 + 5; i++)
		argv[n++] = (char *)args[i];
	argv[n++] = "-o";
	argv[n++] = (char *)out;
	argv[n++] = "--";
	argv[n++] = (char *)prog;
	argv[n] = NULL;
	unlink(stats);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		setenv("BTR_QEMU_STATS", stats, 1);
		execv(btr, argv);
		_exit(126);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
