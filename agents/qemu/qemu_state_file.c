/* qemu_state_file.c - the plugin's shared state file: created sparse,
 * its pages reserved before use, handed out by a bump allocator, and
 * adopted as a private copy by a forked child; and the page DIR/count
 * every process shares (lib/capture/agent/qemu_state.h).
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

#include <fcntl.h>
#include <sys/resource.h>

/* The state file is sparse (QS_SIZE), and its pages are reserved with
 * fallocate before they are handed out: a write to a page that the file
 * system cannot back (a full $TMPDIR) raises SIGBUS, which QEMU reports
 * as the guest's and btr record's salvage would hit again reading it.
 * Everything below qs->used is reserved. */
#define QS_CHUNK (1ull << 20)
_Static_assert(sizeof(struct qs_hdr) <= QS_CHUNK, "the header is in the first reservation");
int qs_fd = -1;                       /* the state file, for fallocate */
static uint64_t qs_reserved;      /* bytes of it known to be backed */
static int qs_full;               /* a reservation failed: heap from now on */
static pthread_mutex_t qs_mu = PTHREAD_MUTEX_INITIALIZER;

/* Reserves the file up to @end (under qs_mu).  Returns 1 if it is. */
static int qs_reserve_locked(uint64_t end)
{
	if (end <= qs_reserved)
		return 1;
	if (qs_full || qs_fd < 0)
		return 0;
	uint64_t to = (end + QS_CHUNK - 1) & ~(QS_CHUNK - 1);
	if (to > QS_SIZE)
		to = QS_SIZE;
	if (posix_fallocate(qs_fd, (off_t)qs_reserved, (off_t)(to - qs_reserved)) != 0) {
		qs_full = 1;
		return 0;
	}
	qs_reserved = to;
	return 1;
}

/* Zeroed memory from the shared state file (or the heap if it is full:
 * such state is simply not salvageable after a crash). */
void *qs_alloc(size_t size)
{
	size = (size + 63) & ~(size_t)63;
	if (g.qs) {
		pthread_mutex_lock(&qs_mu);
		uint64_t at = g.qs->used;
		int ok = at + size <= g.qs->size && qs_reserve_locked(at + size);
		if (ok)
			__atomic_store_n(&g.qs->used, at + size, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&qs_mu);
		if (ok)
			return (uint8_t *)g.qs + at;
	}
	void *p = calloc(1, size);
	if (!p)
		abort();
	return p;
}

int qs_fd_min(void)
{
	static int min;
	if (!min) {
		struct rlimit rl;
		rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
		if (lim == RLIM_INFINITY || lim > 65536)
			lim = 65536;
		min = lim >= 512 ? (int)lim - 128 : (int)lim / 2;
		if (min < 3)
			min = 3;
	}
	return min;
}

int qs_fd_high(int fd)
{
	if (fd < 0 || fd >= qs_fd_min())
		return fd;
	int cloexec = fcntl(fd, F_GETFD);
	int hi = fcntl(fd, cloexec >= 0 && (cloexec & FD_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, qs_fd_min());
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

int qs_create(const char *path)
{
	int fd = qs_fd_high(open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
	if (fd < 0)
		return -1;
	int e = 0;
	if (ftruncate(fd, (off_t)QS_SIZE) < 0 || (e = posix_fallocate(fd, 0, (off_t)QS_CHUNK)) != 0) {
		if (e)
			errno = e;   /* for the caller's error */
		close(fd);
		unlink(path);
		return -1;
	}
	void *m = mmap(NULL, QS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (m == MAP_FAILED) {
		close(fd);
		unlink(path);
		return -1;
	}
	/* No readahead: a fault on this file-backed mapping would otherwise
	 * read (allocate and zero) the pages around it in the page cache,
	 * most of which the bump allocator never reaches; about 3 ms of
	 * CPU per process, which a shell loop of short programs pays each
	 * time (docs/record.md "Cost"). */
	madvise(m, QS_SIZE, MADV_RANDOM);
	qs_fd = fd;
	qs_reserved = QS_CHUNK;
	qs_full = 0;
	g.qs = m;
	g.qs->base = (uint64_t)(uintptr_t)m;
	g.qs->size = QS_SIZE;
	g.qs->used = QS_DATA_START;
	g.qs->pid = (uint32_t)getpid();
	__atomic_store_n(&g.qs->magic, QS_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

/* Child: the copy @fd of the parent's state replaces the shared mapping;
 * its used part is reserved first (the copy skipped the ground-truth
 * buffers, which would be holes).  Returns 1, or 0 if it cannot be. */
int qs_adopt_copy(int fd)
{
	pthread_mutex_init(&qs_mu, NULL);
	uint64_t used = __atomic_load_n(&g.qs->used, __ATOMIC_RELAXED);
	uint64_t to = (used + QS_CHUNK - 1) & ~(QS_CHUNK - 1);
	if (to > QS_SIZE)
		to = QS_SIZE;
	if (posix_fallocate(fd, 0, (off_t)to) != 0)
		return 0;
	if (mmap(g.qs, QS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd, 0) !=
	    (void *)g.qs)
		return 0;
	madvise(g.qs, QS_SIZE, MADV_RANDOM);   /* see qs_create */
	if (qs_fd >= 0)
		close(qs_fd);   /* the parent's file: the parent keeps its own */
	qs_fd = fd;
	qs_reserved = to;
	qs_full = 0;
	return 1;
}

/* Before the guest's setuid/setreuid/setresuid/setfsuid (@num, @a1, @a2):
 * a process that drops privileges (setpriv, su, a daemon's worker) and then
 * forks or execs must still create its trace and state files in DIR and map
 * DIR/count, which `btr record` made for its own user (mode 0700).  While
 * the plugin can (it is privileged: that is when the guest's call can
 * succeed), DIR, DIR/count and the ground-truth log are given to the new
 * effective user; the
 * recorder, root then, reads them anyway.  Otherwise the new program's QEMU
 * could not load the plugin and the program never ran. */
void qs_grant_uid(int64_t num, uint64_t a1, uint64_t a2)
{
	uint32_t uid = (uint32_t)(num == SYS_setuid || num == SYS_setfsuid ? a1 : a2);
	struct stat st;
	if (!g.dir || uid == (uint32_t)-1 || uid == (uint32_t)geteuid() || stat(g.dir, &st) < 0 || st.st_uid == uid)
		return;
	char cpath[PATH_MAX];
	snprintf(cpath, sizeof(cpath), "%s/count", g.dir);
	if (st.st_uid != (uint32_t)geteuid()) {
		/* Given to another user already: every user may now add files
		 * (not list them, nor remove other users' ones). */
		if (chmod(g.dir, 01733) == 0)
			(void)chmod(cpath, 0666);
		if (g.gt_fd >= 0)
			(void)fchmod(g.gt_fd, 0666);
		return;
	}
	if (chown(g.dir, uid, (gid_t)-1) < 0)
		return;
	(void)chown(cpath, uid, (gid_t)-1);
	if (g.gt_fd >= 0)
		(void)fchown(g.gt_fd, uid, (gid_t)-1);   /* --ground-truth, made by btr record */
}

/* Maps DIR/count into g.count (left NULL if that fails). */
void qc_map(void)
{
	char cpath[PATH_MAX];
	snprintf(cpath, sizeof(cpath), "%s/count", g.dir);
	int cfd = open(cpath, O_RDWR | O_CLOEXEC);
	if (cfd >= 0) {
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
		close(cfd);
		if (m != MAP_FAILED)
			g.count = m;
	}
}

/* The first write error of any process, for btr record (DIR/count). */
void note_write_error(int err)
{
	uint64_t zero = 0;
	if (g.count && err < 0)
		__atomic_compare_exchange_n(&g.count[QC_WERR], &zero, (uint64_t)(int64_t)err, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
}

/* Lists this process in DIR/count (qemu_state.h), where `btr record`
 * finds it even if its trace cannot be written. */
void note_pid(uint32_t pid, uint32_t ppid)
{
	if (!g.count)
		return;
	uint64_t i = __atomic_fetch_add(&g.count[QC_NPIDS], 1, __ATOMIC_SEQ_CST);
	if (i < QC_MAX_PIDS)
		__atomic_store_n(&g.count[QC_PIDS + i], (uint64_t)pid | (uint64_t)ppid << 32, __ATOMIC_SEQ_CST);
}

void note_process(void)
{
	note_pid(g.pid, g.ppid);
}

/* The bytes of the state from @from to @to, written to @fd at the same
 * offsets, but not the thread states nor their ground-truth buffers
 * (holes): the child has one thread, whose state fork_prepare wrote.
 * Returns 1, or 0 if a write failed. */
static int state_copy(int fd, uint64_t from, uint64_t to)
{
	uint32_t n = __atomic_load_n(&g.qs->n_thr, __ATOMIC_ACQUIRE);
	if (n > sizeof(g.qs->thr) / sizeof(g.qs->thr[0]))
		n = sizeof(g.qs->thr) / sizeof(g.qs->thr[0]);
	struct { uint64_t lo, hi; } *skip = malloc((2 * (size_t)n + 1) * sizeof(*skip));
	if (!skip)
		return 0;
	size_t ns = 0;
	uint64_t base = (uint64_t)(uintptr_t)g.qs;
	for (uint32_t i = 0; i < n; i++) {
		struct thr *x = g.qs->thr[i];
		if (!qs_owns(g.qs, x))
			continue;
		skip[ns].lo = (uint64_t)(uintptr_t)x - base;
		skip[ns++].hi = (uint64_t)(uintptr_t)(x + 1) - base;
		uint64_t *gt = x->gt;
		if (gt && qs_owns(g.qs, gt)) {
			skip[ns].lo = (uint64_t)(uintptr_t)gt - base;
			skip[ns].hi = skip[ns].lo + GT_BUF * sizeof(uint64_t);
			ns++;
		}
	}
	/* Insertion sort: a handful of threads. */
	for (size_t i = 1; i < ns; i++)
		for (size_t j = i; j > 0 && skip[j].lo < skip[j - 1].lo; j--) {
			__typeof__(*skip) tmp = skip[j];
			skip[j] = skip[j - 1];
			skip[j - 1] = tmp;
		}
	int ok = 1;
	uint64_t at = from;
	for (size_t i = 0; ok && i <= ns; i++) {
		uint64_t end = i < ns ? skip[i].lo : to;
		if (end > to)
			end = to;
		while (ok && at < end) {
			ssize_t w = pwrite(fd, (uint8_t *)g.qs + at, end - at, (off_t)at);
			ok = w > 0;
			at += w > 0 ? (uint64_t)w : 0;
		}
		if (i < ns && skip[i].hi > at)
			at = skip[i].hi;
	}
	free(skip);
	return ok;
}

/* Child, before it adopts the copy @fd: the blocks' information as it was
 * at the fork (the shared mapping is still the parent's here; what the
 * parent adds after the fork is not used by the child's blocks). */
int fork_copy_rest(int fd)
{
	uint64_t used = __atomic_load_n(&g.qs->used, __ATOMIC_RELAXED);
	if (used > g.qs->size)
		used = g.qs->size;
	if (!state_copy(fd, QS_DATA_START, used))
		return 0;
	return pwrite(fd, &used, sizeof(used), (off_t)offsetof(struct qs_hdr, used)) == (ssize_t)sizeof(used);
}
