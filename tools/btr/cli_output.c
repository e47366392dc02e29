/* cli_output.c - the one writer of the files named on the command line
 * (-o FILE, report --html DIR/index.html): the rules of docs/cli.md
 * "Output files".  cli_output_check decides, before a command does any
 * work, what FILE is and whether it can be written; cli_output_open and
 * cli_output_close then write it:
 *
 *   "-"                stdout (a binary format refuses a terminal)
 *   a new name         a temporary file beside it, renamed into place
 *   a regular file     the same, then "replaced existing FILE" on stderr;
 *                      a failed command leaves the old file untouched
 *   a symlink          followed by the kernel (open(2), so
 *                      fs.protected_symlinks applies): the file it points
 *                      to is written (and the link kept); the temporary
 *                      file is beside the target (btr_outfile_open)
 *   a device, FIFO or  written through (O_WRONLY, never created, truncated,
 *   socket             unlinked or renamed over): /dev/null discards
 *   a directory, a missing or unwritable parent: refused, exit 3.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* @path's directory part into @dir ("." for a bare name). */
static void dir_of(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, size, ".");
	else if (slash == path)
		snprintf(dir, size, "/");
	else
		snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

int cli_output_refuse_tty(struct cli_output *o, const char *cmd, const char *what)
{
	int fd = o->kind == CLI_OUTPUT_STDOUT ? STDOUT_FILENO : o->kind == CLI_OUTPUT_STREAM ? o->fd : -1;
	if (fd < 0 || !isatty(fd))
		return EXIT_OK;
	return cli_usage_error(cmd, "not writing %s to the terminal %s (redirect it, or give -o FILE)", what,
			       o->kind == CLI_OUTPUT_STDOUT ? "on stdout" : o->name);
}

int cli_output_check(struct cli_output *o, const char *cmd, const char *name, unsigned flags)
{
	memset(o, 0, sizeof(*o));
	o->name = name;
	o->fd = -1;
	if (!name || !*name)
		return cli_usage_error(cmd, "empty output file name");
	if (!strcmp(name, "-")) {
		if (flags & CLI_OUTPUT_NO_STDOUT)
			return cli_usage_error(cmd, "-o -: this output cannot go to stdout; give a file name");
		o->kind = CLI_OUTPUT_STDOUT;
		o->fd = STDOUT_FILENO;
		snprintf(o->path, sizeof(o->path), "-");
		return (flags & CLI_OUTPUT_BINARY) ? cli_output_refuse_tty(o, cmd, "binary data") : EXIT_OK;
	}
	/* /dev/stdout, /dev/fd/N, /proc/self/fd/N: the open descriptor
	 * itself (reopening the name would start a regular file over at
	 * offset 0, and renaming over it would leave the shell's redirection
	 * writing to a deleted file). */
	int dfd = -1;
	char *end;
	if (!strcmp(name, "/dev/stdout"))
		dfd = STDOUT_FILENO;
	else if (!strcmp(name, "/dev/stderr"))
		dfd = STDERR_FILENO;
	else if (!strncmp(name, "/dev/fd/", 8) || !strncmp(name, "/proc/self/fd/", 14)) {
		const char *num = name + (name[1] == 'd' ? 8 : 14);
		long v = strtol(num, &end, 10);
		if (end != num && !*end && v >= 0 && v < INT_MAX)
			dfd = (int)v;
	}
	if (dfd >= 0) {
		o->kind = CLI_OUTPUT_STREAM;
		snprintf(o->path, sizeof(o->path), "%s", name);
		o->fd = fcntl(dfd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
		if (o->fd < 0) {
			cli_error("%s: %s", name, strerror(errno));
			return EXIT_RUNTIME;
		}
		return (flags & CLI_OUTPUT_BINARY) ? cli_output_refuse_tty(o, cmd, "binary data") : EXIT_OK;
	}
	/* What the name leads to, symlinks followed by the kernel (so that
	 * /dev/stdout and /proc/self/fd/N work).  A dangling symlink is left
	 * to btr_outfile_open, which lets open(2) create its target (never
	 * followed by hand: fs.protected_symlinks must be able to refuse
	 * another user's link in a sticky directory). */
	struct stat st;
	char real[PATH_MAX];
	int dangling = 0;
	if (strlen(name) >= sizeof(o->path)) {
		cli_error("%s: %s", name, strerror(ENAMETOOLONG));
		return EXIT_RUNTIME;
	}
	snprintf(o->path, sizeof(o->path), "%s", name);
	if (stat(name, &st) < 0 && errno == ENOENT && lstat(name, &st) == 0 && S_ISLNK(st.st_mode))
		dangling = 1;
	if (dangling) {
		o->kind = CLI_OUTPUT_NEW;
		return EXIT_OK;
	}
	if (stat(o->path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			cli_error("%s: is a directory (the output must be a file)", name);
			return EXIT_RUNTIME;
		}
		if (!S_ISREG(st.st_mode)) {
			/* A device, FIFO or socket: written through, never
			 * replaced.  Opened now, as a shell redirection would
			 * be (a FIFO waits here for its reader). */
			o->kind = CLI_OUTPUT_STREAM;
			o->fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
			if (o->fd < 0) {
				cli_error("%s: cannot write: %s", name, strerror(errno));
				return EXIT_RUNTIME;
			}
			if (o->fd <= STDERR_FILENO) {
				/* stdin/stdout/stderr were closed: keep ours apart */
				int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
				close(o->fd);
				o->fd = fd;
				if (fd < 0) {
					cli_error("%s: %s", name, strerror(errno));
					return EXIT_RUNTIME;
				}
			}
			return (flags & CLI_OUTPUT_BINARY) ? cli_output_refuse_tty(o, cmd, "binary data") : EXIT_OK;
		}
		o->kind = CLI_OUTPUT_REPLACE;
		o->mode = st.st_mode & 07777;
		if (access(o->path, W_OK) < 0) {
			cli_error("%s: cannot replace: %s", name, strerror(errno));
			return EXIT_RUNTIME;
		}
	} else if (errno != ENOENT) {
		cli_error("%s: %s", name, strerror(errno));
		return EXIT_RUNTIME;
	} else {
		o->kind = CLI_OUTPUT_NEW;
	}
	/* The temporary file and the rename need the directory (of the
	 * file a symlink leads to: only to say what is wrong early). */
	char dir[PATH_MAX];
	dir_of(o->kind == CLI_OUTPUT_REPLACE && realpath(o->path, real) ? real : o->path, dir, sizeof(dir));
	if (stat(dir, &st) < 0) {
		cli_error("%s: no such directory: %s", name, dir);
		return EXIT_RUNTIME;
	}
	if (!S_ISDIR(st.st_mode)) {
		cli_error("%s: %s is not a directory", name, dir);
		return EXIT_RUNTIME;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		cli_error("%s: cannot create files in %s: %s", name, dir, strerror(errno));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int cli_output_trace_target(const struct cli_output *o, const char **path, int *fd)
{
	*path = o->kind == CLI_OUTPUT_STDOUT || o->kind == CLI_OUTPUT_STREAM ? o->name : o->path;
	*fd = o->kind == CLI_OUTPUT_STDOUT || o->kind == CLI_OUTPUT_STREAM ? o->fd : -1;
	return 0;
}

FILE *cli_output_open(struct cli_output *o)
{
	if (o->kind == CLI_OUTPUT_STDOUT)
		return o->f = stdout;
	if (o->kind == CLI_OUTPUT_STREAM) {
		o->f = fdopen(o->fd, "wb");
		if (!o->f)
			cli_error("%s: %s", o->name, strerror(errno));
		else
			o->fd = -1;   /* o->f owns it now */
		return o->f;
	}
	/* A temporary file beside the target (btr_outfile_open): the output
	 * gets what a new file would get (0666 less the umask), or the mode
	 * of the file of ours it replaces. */
	int rc = btr_outfile_open(&o->of, o->path, 0666, 0);
	if (rc < 0) {
		cli_error("%s: cannot create: %s", o->name, btr_errstr(rc));
		return NULL;
	}
	o->open = 1;
	int fd = dup(o->of.fd);
	o->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!o->f) {
		cli_error("%s: %s", o->name, strerror(errno));
		if (fd >= 0)
			close(fd);
		btr_outfile_discard(&o->of);
		o->open = 0;
	}
	return o->f;
}

void cli_output_replaced(const struct cli_output *o)
{
	if (o->kind == CLI_OUTPUT_REPLACE && !o->quiet)
		cli_warn("replaced existing %s", o->name);   /* said at the end, in the command's one line */
}

int cli_output_close(struct cli_output *o, int ok)
{
	if (!o->f) {
		cli_output_discard(o);
		return EXIT_RUNTIME;
	}
	if (o->f == stdout) {
		o->f = NULL;
		if (fflush(stdout) || ferror(stdout)) {
			/* Said once: the caller already reported a failed write. */
			if (ok)
				cli_error("writing the output: %s", strerror(errno ? errno : EIO));
			return EXIT_RUNTIME;
		}
		return ok ? EXIT_OK : EXIT_RUNTIME;
	}
	errno = 0;
	int bad = ferror(o->f) || fflush(o->f) != 0;
	int err = errno;
	if (fclose(o->f) != 0 && !bad) {
		bad = 1;
		err = errno;
	}
	o->f = NULL;
	if (bad && ok)
		cli_error("%s: write error: %s", o->name, strerror(err ? err : EIO));
	if (bad || !ok) {
		if (o->open)
			btr_outfile_discard(&o->of);
		o->open = 0;
		return EXIT_RUNTIME;
	}
	if (o->kind == CLI_OUTPUT_STREAM)
		return EXIT_OK;
	o->open = 0;
	int rc = btr_outfile_commit(&o->of, NULL, 1);
	if (rc < 0) {
		cli_error("%s: cannot rename into place: %s", o->name, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	cli_output_replaced(o);
	return EXIT_OK;
}

void cli_output_discard(struct cli_output *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	o->f = NULL;
	if (o->open)
		btr_outfile_discard(&o->of);
	o->open = 0;
	if (o->fd > STDERR_FILENO)
		close(o->fd);
	o->fd = -1;
}

int cli_output_failed(struct cli_output *o, int err, int saved_errno)
{
	const char *who = o->kind == CLI_OUTPUT_STDOUT ? "writing to stdout" : o->name;
	if (o->f && ferror(o->f)) {
		/* The stream failed: the system's cause (ENOSPC on /dev/full,
		 * EFBIG past `ulimit -f`) says more than "input/output error". */
		cli_error("%s: write error: %s", who, strerror(saved_errno ? saved_errno : EIO));
		return 1;
	}
	if (err < 0) {
		cli_error("%s: %s", who, btr_errstr(err));
		return 1;
	}
	return 0;
}

int cli_write_file(struct cli_output *o, int (*fn)(void *ctx, FILE *f), void *ctx)
{
	FILE *f = cli_output_open(o);
	if (!f) {
		cli_output_discard(o);
		return EXIT_RUNTIME;
	}
	errno = 0;
	int rc = fn(ctx, f);
	int e = errno;
	if (rc < 0)
		cli_output_failed(o, rc, e);
	return cli_output_close(o, rc >= 0);
}
