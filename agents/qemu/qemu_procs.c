/* qemu_procs.c - processes: each process's own trace and PROCESS
 * records; a guest fork (the parent's private copy of the state at the
 * call, the child's adoption of it, or the child untraced); a guest
 * execve followed by starting QEMU with this plugin again.  (The
 * qemu_plugin.c header tells how, docs/record.md what a user sees.)
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

static unsigned fork_seq[MAX_VCPUS];

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Opens this process's trace DIR/pSTEM.btr; its state file is created
 * (@state_from NULL) or is @state_from renamed to DIR/sSTEM.  Returns 0
 * or -1. */
int proc_open(const char *state_from)
{
	char stem[64], path[PATH_MAX];
	snprintf(stem, sizeof(stem), "%020llu.%u", (unsigned long long)now_ns(), g.pid);
	snprintf(path, sizeof(path), "%s/s%s", g.dir, stem);
	if (state_from) {
		if (rename(state_from, path) < 0)
			return -1;
	} else if (g.qs == NULL && qs_create(path) < 0) {
		return -1;
	}
	snprintf(path, sizeof(path), "%s/p%s.btr", g.dir, stem);
	struct btr_trace_writer_opts o = { .sz = sizeof(o), .compress = 0, .no_sync = 1, .min_fd = qs_fd_min() };
	return btr_trace_writer_new(path, &o, &g.w) < 0 ? -1 : 0;
}

void write_process(uint32_t event, int32_t reason, const char *detail, const char *path,
			  const char *args, size_t args_len)
{
	struct btr_record r = { .type = BTR_REC_PROCESS };
	r.u.process.pid = g.pid;
	r.u.process.ppid = event == BTR_PROC_START ? g.ppid : 0;
	r.u.process.event = event;
	r.u.process.reason = reason;
	r.u.process.path = path ? path : g.exe;
	r.u.process.args = args ? args : g.args ? g.args : "";
	r.u.process.args_len = (uint32_t)(args ? args_len : g.args ? g.args_len : 0);
	if (r.u.process.args_len > BTR_TRACE_MAX_STRING)
		r.u.process.args_len = 0;
	r.u.process.detail = detail ? detail : "";
	write_rec(&r);
}

/* The first TB: say what runs.  A QEMU started by follow_exec continues
 * a process: EXEC drops the old program's modules. */
void announce_process(void)
{
	g.announced_proc = 1;
	read_cmdline();
	snprintf(g.exe, sizeof(g.exe), "%s", user_binary());
	if (g.execd) {
		write_process(BTR_PROC_EXEC, 0, NULL, NULL, NULL, 0);
		struct btr_record r = { .type = BTR_REC_EXEC };
		r.u.module.pid = g.pid;
		r.u.module.path = g.exe;
		write_rec(&r);
	} else {
		write_process(BTR_PROC_START, 0, NULL, NULL, NULL, 0);
	}
}

/* Parent, at the fork's entry: the start of the child's copy of the state,
 * the header and the forking thread's state (not its PT buffer), taken
 * before the parent runs on and changes them.  The rest (the blocks'
 * information) is copied by the child (fork_child): other threads go on
 * translating blocks until the fork itself, which QEMU makes while no
 * block is being translated, and the child's blocks must find theirs. */
void fork_prepare(unsigned vcpu, struct thr *t)
{
	fork_fd[vcpu] = 0;
	if (!g.qs || !g.dir)
		return;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/f%u.%u", g.dir, t->tid, ++fork_seq[vcpu]);
	int fd = qs_fd_high(open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
	if (fd < 0)
		return;
	uint64_t base = (uint64_t)(uintptr_t)g.qs;
	uint64_t t_at = (uint64_t)(uintptr_t)t - base;
	size_t t_len = (size_t)((uint8_t *)t->buf - (uint8_t *)t);
	int ok = ftruncate(fd, (off_t)g.qs->size) == 0 &&
		 pwrite(fd, g.qs, sizeof(struct qs_hdr), 0) == (ssize_t)sizeof(struct qs_hdr) &&
		 (!qs_owns(g.qs, t) || pwrite(fd, t, t_len, (off_t)t_at) == (ssize_t)t_len);
	if (!ok) {
		close(fd);
		unlink(path);
		return;
	}
	fork_fd[vcpu] = fd + 1;
}

/* Parent, after the fork returned: the copy is the child's now. */
void fork_parent_done(unsigned vcpu, struct thr *t, int64_t ret)
{
	if (!fork_fd[vcpu])
		return;
	close(fork_fd[vcpu] - 1);
	fork_fd[vcpu] = 0;
	if (ret < 0) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/f%u.%u", g.dir, t->tid, fork_seq[vcpu]);
		unlink(path);
	}
}

static char off_detail[96];

/* Child, when the fork returned 0: a new process with its own state,
 * trace and PROCESS start record; or untraced (--no-follow-fork,
 * --max-processes reached, a parent that is untraced), which is said in
 * a trace of its own holding only the START and UNTRACED records. */
struct thr *fork_child(unsigned vcpu)
{
	struct thr *t = g.off ? NULL : g.thr[vcpu];
	uint32_t ptid = t ? t->tid : 0;
	char fpath[PATH_MAX] = "";
	int fd = fork_fd[vcpu] - 1;
	fork_fd[vcpu] = 0;
	if (fd >= 0)
		snprintf(fpath, sizeof(fpath), "%s/f%u.%u", g.dir, ptid, fork_seq[vcpu]);
	/* Another thread of the parent may have held the lock at the fork;
	 * it does not exist here. */
	pthread_mutex_init(&g.lock, NULL);
	g.ppid = g.pid;
	g.pid = (uint32_t)getpid();
	/* The parent's writer shares the parent's file: drop it unclosed. */
	g.w = NULL;
	g.announced_proc = 1;
	uint64_t n = g.count ? __atomic_add_fetch(&g.count[QC_STARTED], 1, __ATOMIC_SEQ_CST) : 0;
	note_process();
	if (!g.off && !g.follow_fork)
		snprintf(off_detail, sizeof(off_detail), "--no-follow-fork");
	else if (!g.off && g.max_procs && n > g.max_procs)
		snprintf(off_detail, sizeof(off_detail), "--max-processes %llu reached",
			 (unsigned long long)g.max_procs);
	else if (!g.off && (fd < 0 || !g.qs || !fork_copy_rest(fd) || !qs_adopt_copy(fd)))
		snprintf(off_detail, sizeof(off_detail), "cannot copy the plugin state");
	else if (!g.off)
		off_detail[0] = 0;
	if (fd >= 0 && fd != qs_fd)
		close(fd);
	if (g.off || off_detail[0]) {
		/* Nothing of the parent's state may be touched again: a
		 * private zeroed mapping takes the shared one's place. */
		if (fpath[0])
			unlink(fpath);
		if (g.qs && !g.off)
			mmap(g.qs, QS_SIZE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		g.off = 1;
		for (unsigned i = 0; i < MAX_VCPUS; i++)
			g.thr[i] = NULL;
		if (g.dir && proc_open(NULL) == 0) {
			int err = strstr(off_detail, "max-processes") ? -BTR_ERR_LIMIT : -BTR_ERR_UNSUPPORTED;
			write_process(BTR_PROC_START, 0, NULL, NULL, NULL, 0);
			write_process(BTR_PROC_UNTRACED, err, off_detail, NULL, NULL, 0);
			btr_trace_writer_close(g.w);
			g.w = NULL;
		}
		return NULL;
	}
	g.qs->pid = g.pid;
	if (proc_open(fpath) < 0) {
		g.off = 1;
		return NULL;
	}
	for (unsigned i = 0; i < MAX_VCPUS; i++)
		if (i != vcpu)
			g.thr[i] = NULL;
	write_process(BTR_PROC_START, 0, NULL, NULL, NULL, 0);
	for (unsigned i = 0; i < g.n_mods; i++)
		write_module(g.mods[i].path, g.mods[i].start, g.mods[i].size, g.mods[i].pgoff, g.mods[i].prot);
	code_fork_child();
	return t;
}


/* Guest execve(@a1, @a2, @a3) by thread @t: run the new program under
 * QEMU with this plugin again, so tracing continues; or record why it
 * runs untraced.  Returns only if QEMU's own execve is to run (it then
 * fails with the guest's errno, or runs the untraceable program). */
void follow_exec(struct thr *t, uint64_t a1, uint64_t a2, uint64_t a3)
{
	char *path = guest_strdup(a1);
	char **argv = guest_strv(a2), **envp = guest_strv(a3);
	struct qx *x = malloc(sizeof(*x));
	if (path) {
		/* The host's /proc/self/exe is QEMU: the guest means its program. */
		char self[64];
		snprintf(self, sizeof(self), "/proc/%u/exe", g.pid);
		char real[PATH_MAX];
		if ((!strcmp(path, "/proc/self/exe") || !strcmp(path, self)) && g.exe[0]) {
			free(path);
			path = strdup(realpath(g.exe, real) ? real : g.exe);
		}
	}
	if (!path || !argv || !envp || !x || qx_resolve(x, path, argv) != 0)
		goto out;
	char packed[8192];
	size_t plen = qx_pack_args(x->argv, x->argc, packed, sizeof(packed));
	const char *why = x->untraced ? x->untraced : !g.follow_exec ? "--no-follow-exec" : NULL;
	/* Everything of this thread so far must reach the file before the
	 * process image goes; other threads are finished from the state
	 * file by `btr record`. */
	pt_flush(t);
	snap_end(t, BTR_THREAD_END_UNKNOWN);
	gt_flush(t);
	if (why) {
		write_process(BTR_PROC_UNTRACED, x->untraced ? x->untraced_err : -BTR_ERR_UNSUPPORTED, why, x->path,
			      packed, plen);
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	if (g.w)
		btr_trace_flush(g.w);
	pthread_mutex_unlock(&g.lock);
	char **qa = calloc((size_t)x->argc + 8, sizeof(char *));
	if (qa) {
		size_t k = 0;
		qa[k++] = g.qemu;
		qa[k++] = "-plugin";
		qa[k++] = g.plugarg;
		qa[k++] = "-0";
		qa[k++] = x->argv[0];
		qa[k++] = x->path;
		for (int i = 1; i < x->argc; i++)
			qa[k++] = x->argv[i];
		qa[k] = NULL;
		/* QEMU reverses its environment into the guest's (btr_qemu_record
		 * in lib/capture/qemu.c): given reversed, the order is the guest's. */
		size_t ne = 0;
		while (envp[ne])
			ne++;
		for (size_t i = 0; i < ne / 2; i++) {
			char *tmp = envp[i];
			envp[i] = envp[ne - 1 - i];
			envp[ne - 1 - i] = tmp;
		}
		execve(g.qemu, qa, envp);
		free(qa);
	}
out:
	if (x)
		qx_free(x);
	free(x);
	free(path);
	free_strv(argv);
	free_strv(envp);
}

int is_fork_call(int64_t num, uint64_t a1)
{
	if (num == SYS_fork || num == SYS_vfork)
		return 1;
	/* QEMU turns CLONE_VFORK into a plain fork (posix_spawn's clone). */
	if (num == SYS_clone)
		return !(a1 & CLONE_VM) || (a1 & CLONE_VFORK);
#ifdef SYS_clone3
	if (num == SYS_clone3) {
		uint64_t flags;
		return guest_read(a1, &flags, 8) == 0 && (!(flags & CLONE_VM) || (flags & CLONE_VFORK));
	}
#endif
	return 0;
}
