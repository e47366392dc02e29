/* qemu_fds.c - the plugin's descriptors in the guest's process.
 *
 * QEMU runs the guest in our own process, so the guest's close(),
 * close_range() and the "close every descriptor but 0-2" loops that
 * programs run in a child between fork and exec (Python's subprocess,
 * gnupg spawning gpg-agent) close the plugin's trace, state and
 * ground-truth files too.  Before such a system call the plugin's
 * descriptors in its range are noted (a descriptor is the plugin's when it
 * names a file in the recording's directory or the ground-truth file); after
 * it, each is opened again by its path and put back at its number, so the
 * writers holding those numbers go on.  g.lock is held in between: the
 * writer and the ground-truth log are written under it, so no thread
 * writes while a descriptor is away.
 *
 * A guest that names one of the plugin's numbers in any other call
 * (bash's `exec 897>file` asks fcntl(897, F_GETFD) and dup2()s onto it;
 * `echo >&897` dup2()s from it; a write(897)): before the call the plugin
 * moves its file to another high number and closes the old one (fd_named),
 * so the guest's file takes the number, and a guest naming a number it
 * never opened gets EBADF, as without btr.
 *
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

#include <dirent.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define MAX_KEPT 16
static struct {
	int n;
	int fd[MAX_KEPT];
	int fl[MAX_KEPT];       /* O_ACCMODE | O_APPEND */
	int cloexec[MAX_KEPT];
	char path[MAX_KEPT][PATH_MAX];
	int locked;
	unsigned vcpu;
} kept;

static int fd_is_ours(int fd, char *path)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, path, PATH_MAX - 1);
	if (k <= 0)
		return 0;
	path[k] = 0;
	size_t dl = g.dir ? strlen(g.dir) : 0;
	return (dl && !strncmp(path, g.dir, dl) && path[dl] == '/') || (g.gt_fd >= 0 && fd == g.gt_fd);
}

static void keep_fd(int fd)
{
	if (kept.n == MAX_KEPT || !fd_is_ours(fd, kept.path[kept.n]))
		return;
	int fl = fcntl(fd, F_GETFL), fdf = fcntl(fd, F_GETFD);
	if (fl < 0 || fdf < 0)
		return;
	kept.fd[kept.n] = fd;
	kept.fl[kept.n] = fl & (O_ACCMODE | O_APPEND);
	kept.cloexec[kept.n] = fdf & FD_CLOEXEC;
	kept.n++;
}

/* Before the guest's close(@a1) / close_range(@a1, @a2, @a3). */
void fds_close_before(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3)
{
	if (num == SYS_close) {
		char path[PATH_MAX];
		if (a1 >= INT32_MAX || !fd_is_ours((int)a1, path))
			return;   /* most closes: one readlink, no lock */
		pthread_mutex_lock(&g.lock);
		kept.n = 0;
		keep_fd((int)a1);
	} else if (num == SYS_close_range) {
		if (a3 & 4u /* CLOSE_RANGE_CLOEXEC: closes nothing */ || a1 > a2)
			return;
		pthread_mutex_lock(&g.lock);
		kept.n = 0;
		DIR *d = opendir("/proc/self/fd");
		int dfd = d ? dirfd(d) : -1;
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			char *end;
			long fd = strtol(e->d_name, &end, 10);
			if (*end || end == e->d_name || fd == dfd || (uint64_t)fd < a1 || (uint64_t)fd > a2)
				continue;
			keep_fd((int)fd);
		}
		if (d)
			closedir(d);
	} else {
		return;
	}
	if (!kept.n) {
		pthread_mutex_unlock(&g.lock);
		return;
	}
	kept.locked = 1;
	kept.vcpu = vcpu;
}

/* Before a guest system call that names descriptor @n (not close: see
 * above): a number of the plugin's moves out of the way (the block comment
 * above), every holder following it.  Guest descriptors below qs_fd_min()
 * cost one compare. */
static void fd_named(uint64_t n)
{
	char path[PATH_MAX];
	if (n < (uint64_t)qs_fd_min() || n >= INT32_MAX || !fd_is_ours((int)n, path))
		return;
	int fd = (int)n, hi, held = 0;
	pthread_mutex_lock(&g.lock);
	if (g.w && (hi = btr_trace_writer_move_fd(g.w, fd, qs_fd_min())) > 0) {
		held = 1;   /* the writer moved and closed it */
	} else if ((hi = fcntl(fd, F_DUPFD_CLOEXEC, qs_fd_min())) >= 0) {
		if (qs_fd == fd)
			qs_fd = hi, held = 1;
		if (g.gt_fd == fd)
			g.gt_fd = hi, held = 1;
		for (unsigned v = 0; v < MAX_VCPUS; v++)
			if (fork_fd[v] == fd + 1)
				fork_fd[v] = hi + 1, held = 1;
		if (!held)
			close(hi);
		close(fd);
	}
	pthread_mutex_unlock(&g.lock);
}

/* The descriptors system call @num names (x86-64 numbers). */
void fds_named(int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a5)
{
	switch (num) {
	case SYS_dup2: case SYS_dup3: case SYS_sendfile:
		fd_named(a2);
		break;
	case SYS_copy_file_range: case SYS_splice:
		fd_named(a3);
		break;
	case SYS_mmap:
		fd_named(a5);
		return;
	case SYS_read: case SYS_write: case SYS_pread64: case SYS_pwrite64: case SYS_readv: case SYS_writev:
	case SYS_preadv: case SYS_pwritev: case SYS_lseek: case SYS_fstat: case SYS_ioctl: case SYS_dup:
	case SYS_fcntl: case SYS_flock: case SYS_fsync: case SYS_fdatasync: case SYS_ftruncate:
	case SYS_fchmod: case SYS_fchown: case SYS_getdents64: case SYS_fadvise64: case SYS_fallocate:
		break;
	default:
		return;
	}
	fd_named(a1);
}

/* After it: each noted descriptor back at its number. */
void fds_close_after(unsigned vcpu)
{
	if (!kept.locked || kept.vcpu != vcpu)
		return;
	for (int i = 0; i < kept.n; i++) {
		if (fcntl(kept.fd[i], F_GETFD) >= 0)
			continue;   /* still open (the call failed) */
		int nfd = open(kept.path[i], kept.fl[i] | O_CLOEXEC);
		if (nfd < 0)
			continue;   /* the writer reports the loss as before */
		if (!(kept.fl[i] & O_APPEND))
			(void)lseek(nfd, 0, SEEK_END);   /* the writer only appends */
		if (nfd != kept.fd[i]) {
			(void)dup3(nfd, kept.fd[i], kept.cloexec[i] ? O_CLOEXEC : 0);
			close(nfd);
		} else if (!kept.cloexec[i]) {
			(void)fcntl(nfd, F_SETFD, 0);
		}
	}
	kept.n = 0;
	kept.locked = 0;
	pthread_mutex_unlock(&g.lock);
}

