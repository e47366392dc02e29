/* file.c - the one way btr creates output files and opens the files that
 * data names (btr/file.h; docs/reliability.md, "Threat model").
 *
 * Output files are written under a name nobody else can choose (O_TMPFILE,
 * or mkostemp's O_EXCL random name, which never follows a planted symlink
 * and never opens a planted FIFO) and renamed into place; rename(2) replaces
 * a link at the destination instead of following it.  Where the user named
 * a symlink, the kernel follows it (open(2)), so fs.protected_symlinks
 * decides about links in sticky directories, not btr.
 *
 * Files named by data (a trace's module paths, DWARF's source files, a perf
 * map in /tmp) are opened without blocking, checked with fstat before any
 * read, and refused unless regular (and small enough, and, where asked,
 * owned by or readable to a given user). */
#include "btr/file.h"
#include "btr/error.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(BTR_PATH_MAX == PATH_MAX, "struct btr_outfile's buffers are PATH_MAX long");

/* @path's directory part into @dir ("." for a bare name). */
static int dir_of(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');
	int n = !slash ? snprintf(dir, size, ".")
	      : slash == path ? snprintf(dir, size, "/")
	      : snprintf(dir, size, "%.*s", (int)(slash - path), path);
	return n < 0 || (size_t)n >= size ? -BTR_ERR_INVAL : 0;
}

static int copy_path(char *dst, size_t size, const char *src)
{
	if (strlen(src) >= size)
		return -BTR_ERR_INVAL;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/* The file a symlink the user named leads to, resolved by the kernel
 * (open(2) follows it; fs.protected_symlinks applies).  A dangling link
 * creates its target, as `cmd > link` would (@created: 1).  @real: the
 * resolved name, checked to be the file the kernel opened. */
static int follow_user_link(const char *path, char *real, struct stat *st, int *created, mode_t mode)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	*created = 0;
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
		*created = fd >= 0;
	}
	if (fd < 0)
		return btr_err_from_errno(errno);
	int rc = 0;
	struct stat rst;
	char *r = NULL;
	if (fstat(fd, st) < 0)
		rc = btr_err_from_errno(errno);
	else if (S_ISDIR(st->st_mode))
		rc = -BTR_ERR_ISDIR;
	else if (!S_ISREG(st->st_mode))
		rc = -BTR_ERR_UNSUPPORTED;
	else if (!(r = realpath(path, NULL)))
		rc = btr_err_from_errno(errno);
	else if (stat(r, &rst) < 0 || rst.st_dev != st->st_dev || rst.st_ino != st->st_ino)
		rc = -BTR_ERR_IO;   /* the link changed under us */
	else
		rc = copy_path(real, PATH_MAX, r);
	if (rc && *created)
		unlink(r ? r : path);
	if (rc)
		*created = 0;
	free(r);
	close(fd);
	return rc;
}

static mode_t umasked(mode_t mode)
{
	mode_t um = umask(077);
	umask(um);
	return mode & ~um;
}

int btr_outfile_open(struct btr_outfile *of, const char *path, mode_t mode, unsigned flags)
{
	if (!of || !path || !*path)
		return -BTR_ERR_INVAL;
	memset(of, 0, sizeof(*of));
	of->fd = -1;
	struct stat st;
	int keep_mode = 0, rc;
	if (lstat(path, &st) < 0) {
		if (errno != ENOENT)
			return btr_err_from_errno(errno);
		rc = copy_path(of->path, sizeof(of->path), path);
	} else if (S_ISLNK(st.st_mode)) {
		rc = follow_user_link(path, of->path, &st, &of->placeholder, mode);
		keep_mode = !of->placeholder;
	} else if (S_ISDIR(st.st_mode)) {
		return -BTR_ERR_ISDIR;
	} else if (!S_ISREG(st.st_mode)) {
		return -BTR_ERR_UNSUPPORTED;
	} else {
		keep_mode = 1;
		rc = copy_path(of->path, sizeof(of->path), path);
	}
	if (rc)
		return rc;
	/* The file it replaces keeps its permissions only if it is ours: an
	 * 0666 file someone else planted must not make our output theirs. */
	mode_t want = keep_mode && st.st_uid == geteuid() ? (st.st_mode & 07777) : umasked(mode);

	char dir[PATH_MAX];
	if ((rc = dir_of(of->path, dir, sizeof(dir))) < 0)
		goto fail;
#ifdef O_TMPFILE
	if (!(flags & BTR_OUTFILE_NAMED)) {
		of->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
		if (of->fd >= 0) {
			of->anon = 1;
			goto made;
		}
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT) {
			rc = btr_err_from_errno(errno);
			goto fail;
		}
	}
#endif
	if ((size_t)snprintf(of->tmp, sizeof(of->tmp), "%s.tmp.XXXXXX", of->path) >= sizeof(of->tmp)) {
		rc = -BTR_ERR_INVAL;
		goto fail;
	}
	/* O_CREAT|O_EXCL (mkostemp): a planted symlink or FIFO at the name
	 * fails, and the random name is tried again. */
	of->fd = mkostemp(of->tmp, O_CLOEXEC | O_NOFOLLOW);
	if (of->fd < 0) {
		rc = btr_err_from_errno(errno);
		of->tmp[0] = 0;
		goto fail;
	}
#ifdef O_TMPFILE
made:
#endif
	(void)fchmod(of->fd, want);
	return 0;
fail:
	btr_outfile_discard(of);
	return rc;
}

/* Gives the O_TMPFILE @fd the name @name (which must not exist). */
static int link_anon(int fd, const char *name)
{
	if (linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH) == 0)
		return 0;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0 ? 0 : -1;
}

int btr_outfile_commit(struct btr_outfile *of, const char *dest, int no_sync)
{
	if (!of || of->fd < 0)
		return -BTR_ERR_INVAL;
	int rc = 0;
	if (!dest)
		dest = of->path;
	/* fsync before rename: otherwise a power loss can leave the new
	 * name pointing at an empty file (the classic ext4 rename race). */
	if (!no_sync && fsync(of->fd) < 0 && errno != EINVAL && errno != EROFS)
		rc = btr_err_from_errno(errno);
	if (!rc && of->anon) {
		/* A name of its own first (a random one, O_EXCL-like: linkat
		 * never replaces), then renamed over @dest. */
		char base[PATH_MAX];
		copy_path(base, sizeof(base), dest);
		for (int i = 0; !rc; i++) {
			if ((size_t)snprintf(of->tmp, sizeof(of->tmp), "%s.tmp.XXXXXX", base) >= sizeof(of->tmp) ||
			    i == 100) {
				rc = -BTR_ERR_IO;
				of->tmp[0] = 0;
				break;
			}
			int tfd = mkostemp(of->tmp, O_CLOEXEC);   /* picks a free random name */
			if (tfd < 0) {
				rc = btr_err_from_errno(errno);
				of->tmp[0] = 0;
				break;
			}
			close(tfd);
			unlink(of->tmp);
			if (link_anon(of->fd, of->tmp) == 0)
				break;
			if (errno != EEXIST) {
				rc = btr_err_from_errno(errno);
				of->tmp[0] = 0;
			}
		}
	}
	if (close(of->fd) < 0 && !rc)
		rc = btr_err_from_errno(errno);
	of->fd = -1;
	if (!rc && rename(of->tmp, dest) < 0) {
		rc = btr_err_from_errno(errno);
		btr_debug("renaming %s to %s: %s", of->tmp, dest, strerror(errno));
	}
	if (rc) {
		btr_outfile_discard(of);
		return rc;
	}
	of->tmp[0] = 0;
	if (of->placeholder && strcmp(dest, of->path))
		unlink(of->path);
	of->placeholder = 0;
	return 0;
}

void btr_outfile_discard(struct btr_outfile *of)
{
	if (!of)
		return;
	if (of->fd >= 0)
		close(of->fd);
	of->fd = -1;
	if (of->tmp[0])
		unlink(of->tmp);
	of->tmp[0] = 0;
	if (of->placeholder)
		unlink(of->path);
	of->placeholder = 0;
}

int btr_outfile_open_inplace(const char *path, mode_t mode)
{
	if (!path || !*path)
		return -BTR_ERR_INVAL;
	int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode);
	if (fd < 0)
		return errno == ENXIO ? -BTR_ERR_UNSUPPORTED : btr_err_from_errno(errno);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = btr_err_from_errno(errno);
	else if (!S_ISREG(st.st_mode))
		rc = -BTR_ERR_UNSUPPORTED;
	else if (st.st_uid != geteuid())
		rc = -BTR_ERR_PERM;
	else if (ftruncate(fd, 0) < 0 || fcntl(fd, F_SETFL, O_WRONLY) < 0)
		rc = btr_err_from_errno(errno);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

/* ---- files named by data ---- */

/* Refusals are said once per path: a module is looked up many times. */
static pthread_mutex_t said_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t said[256];

static void refuse(const char *path, unsigned flags, const char *fmt, ...) BTR_PRINTF(3, 4);
static void refuse(const char *path, unsigned flags, const char *fmt, ...)
{
	if (flags & BTR_NAMED_QUIET)
		return;
	uint64_t h = 1469598103934665603ull;
	for (const char *p = path; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h |= 1;
	pthread_mutex_lock(&said_lock);
	int seen = 0;
	size_t i = h % BTR_ARRAY_SIZE(said);
	if (said[i] == h)
		seen = 1;
	said[i] = h;
	pthread_mutex_unlock(&said_lock);
	if (seen)
		return;
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	btr_warn("%s: not read: %s", path, why);
}

/* Whether user @uid could read @path (whose file is @st): the file and
 * every directory above it are the user's or open to everyone.  Groups
 * are not counted (a refusal is the safe side). */
static int readable_by(const char *path, const struct stat *st, uid_t uid)
{
	if (!(st->st_uid == uid ? (st->st_mode & S_IRUSR) : (st->st_mode & S_IROTH)))
		return 0;
	char *r = realpath(path, NULL);
	if (!r)
		return 0;
	int ok = 1;
	for (char *slash = strrchr(r, '/'); ok && slash; slash = strrchr(r, '/')) {
		*slash = 0;
		struct stat d;
		if (stat(*r ? r : "/", &d) < 0)
			ok = 0;
		else
			ok = d.st_uid == uid ? (d.st_mode & S_IXUSR) != 0 : (d.st_mode & S_IXOTH) != 0;
		if (!*r)
			break;
	}
	free(r);
	return ok;
}

int btr_file_open_named(const char *path, uint64_t max_size, unsigned flags, uid_t uid)
{
	if (!path || !*path)
		return -BTR_ERR_INVAL;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (flags & BTR_NAMED_NOFOLLOW ? O_NOFOLLOW : 0));
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP && (flags & BTR_NAMED_NOFOLLOW)) {
			refuse(path, flags, "a symbolic link");
			return -BTR_ERR_PERM;
		}
		if (e == ENXIO || e == ENODEV) {
			refuse(path, flags, "not a regular file");
			return -BTR_ERR_UNSUPPORTED;
		}
		return btr_err_from_errno(e);
	}
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0) {
		rc = btr_err_from_errno(errno);
	} else if (!S_ISREG(st.st_mode)) {
		refuse(path, flags, "not a regular file");
		rc = S_ISDIR(st.st_mode) ? -BTR_ERR_ISDIR : -BTR_ERR_UNSUPPORTED;
	} else if (max_size && (uint64_t)st.st_size > max_size) {
		refuse(path, flags, "larger than %llu bytes", (unsigned long long)max_size);
		rc = -BTR_ERR_FBIG;
	} else if ((flags & BTR_NAMED_OWNER) && st.st_uid != uid) {
		refuse(path, flags, "owned by uid %u, not by uid %u", (unsigned)st.st_uid, (unsigned)uid);
		rc = -BTR_ERR_PERM;
	} else if ((flags & BTR_NAMED_READER) && uid != geteuid() && !readable_by(path, &st, uid)) {
		refuse(path, flags, "the trace's owner (uid %u) could not read it (give --source-root DIR to allow)",
		       (unsigned)uid);
		rc = -BTR_ERR_PERM;
	} else if (fcntl(fd, F_SETFL, O_RDONLY) < 0) {
		rc = btr_err_from_errno(errno);
	}
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int btr_file_open_source(const char *path, int rule, uid_t owner, const char *const *roots, unsigned flags)
{
	const uint64_t max = 64ull << 20;
	if (!rule || btr_file_under_roots(path, roots))
		return btr_file_open_named(path, max, flags & BTR_NAMED_QUIET, 0);
	return btr_file_open_named(path, max, BTR_NAMED_READER | (flags & BTR_NAMED_QUIET), owner);
}

int btr_file_under_roots(const char *path, const char *const *roots)
{
	if (!path || !roots || !roots[0])
		return 0;
	char *r = realpath(path, NULL);
	if (!r)
		return 0;
	int ok = 0;
	for (size_t i = 0; !ok && roots[i]; i++) {
		char *d = realpath(roots[i], NULL);
		if (!d)
			continue;
		size_t n = strlen(d);
		ok = !strncmp(r, d, n) && (r[n] == '/' || (n == 1 && d[0] == '/'));
		free(d);
	}
	free(r);
	return ok;
}
