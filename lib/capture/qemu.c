/* qemu.c - the "qemu" capture backend: runs a command under qemu-x86_64
 * with the btr TCG plugin (lib/capture/qemu_plugin.c) and assembles the
 * final .btr trace.
 *
 * Why two files: the plugin runs inside the traced process and may die
 * with it (a crash, SIGKILL, exec).  It writes its own trace into a
 * private temporary directory; the recorder then writes the final file:
 * the machine record, every record the plugin got out (a plugin file cut
 * short is salvaged up to its last complete chunk), and the exit record
 * built from waitpid(), all through btr_trace_writer, which renames the
 * file into place only at the end.
 */
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/trace.h"
#include "internal.h"
#include "qemu_state.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int find_in_path(const char *name, char *buf, size_t size)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		if ((size_t)snprintf(buf, size, "%.*s/%s", (int)n, n ? path : ".", name) < size &&
		    access(buf, X_OK) == 0) {
			struct stat st;
			if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
				return 0;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return -BTR_ERR_NOENT;
}

int btr_qemu_find(const char *hint, char *buf, size_t size)
{
	const char *env = getenv("BTR_QEMU");
	if (!hint && env && *env)
		hint = env;
	if (hint) {
		if (strchr(hint, '/')) {
			if (access(hint, X_OK) < 0)
				return -BTR_ERR_NOENT;
			snprintf(buf, size, "%s", hint);
			return 0;
		}
		return find_in_path(hint, buf, size);
	}
	return find_in_path("qemu-x86_64", buf, size);
}

int btr_qemu_find_plugin(const char *hint, char *buf, size_t size)
{
	const char *env = getenv("BTR_QEMU_PLUGIN");
	if (!hint && env && *env)
		hint = env;
	if (hint) {
		if (access(hint, R_OK) < 0)
			return -BTR_ERR_NOENT;
		if (!realpath(hint, buf))
			snprintf(buf, size, "%s", hint);
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -BTR_ERR_NOENT;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -BTR_ERR_NOENT;
	*slash = 0;
	static const char *const rel[] = { "/btr-qemu.so", "/../lib/btr/btr-qemu.so" };
	for (size_t i = 0; i < BTR_ARRAY_SIZE(rel); i++) {
		if ((size_t)snprintf(buf, size, "%s%s", exe, rel[i]) < size && access(buf, R_OK) == 0)
			return 0;
	}
	return -BTR_ERR_NOENT;
}

/* execvp-like lookup plus the checks that let us fail before anything
 * starts: exists, executable, an x86-64 ELF file (all qemu-x86_64 runs). */
static int resolve_cmd(const char *cmd, char *buf, size_t size)
{
	if (strchr(cmd, '/')) {
		snprintf(buf, size, "%s", cmd);
	} else if (find_in_path(cmd, buf, size) < 0) {
		btr_err("%s: command not found", cmd);
		return -BTR_ERR_CHILD;
	}
	struct stat st;
	if (stat(buf, &st) < 0) {
		btr_err("%s: %s", buf, strerror(errno));
		return -BTR_ERR_CHILD;
	}
	if (!S_ISREG(st.st_mode) || access(buf, X_OK) < 0) {
		btr_err("%s: not an executable file", buf);
		return -BTR_ERR_CHILD;
	}
	int fd = open(buf, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	ssize_t n = fd < 0 ? -1 : read(fd, &eh, sizeof(eh));
	if (fd >= 0)
		close(fd);
	if (n < (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		btr_err("%s: not an x86-64 ELF executable (the qemu backend runs only those)", buf);
		return -BTR_ERR_CHILD;
	}
	return 0;
}

int btr_capture_check_command(const char *cmd, char *buf, size_t size)
{
	if (!cmd || !buf || !size)
		return -BTR_ERR_INVAL;
	return resolve_cmd(cmd, buf, size);
}

/* ---- signals while the command runs ---- */

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t got_signal;

/* A terminal's Ctrl-C already reaches the command (same process group);
 * forward only signals sent to the recorder alone (kill from elsewhere),
 * so that the command sees each signal once. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	got_signal = sig;
	if (child_pid > 0 && si && si->si_code == SI_USER && si->si_pid != child_pid)
		kill(child_pid, sig);
}

static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

/* ---- assembling the final trace ---- */

struct plugin_exit {
	int have;
	uint32_t tid;
	uint64_t ip, boundary;
};

static int copy_plugin_trace(const char *path, struct btr_trace_writer *w,
			     struct btr_capture_result *res, struct plugin_exit *px)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		switch (rec.type) {
		case BTR_REC_PROCESS_EXIT:
			px->have = 1;
			px->tid = rec.u.exit.tid;
			px->ip = rec.u.exit.ip;
			px->boundary = rec.u.exit.addr;
			continue;   /* the recorder writes the real one */
		case BTR_REC_MACHINE:
			continue;
		case BTR_REC_THREAD_START:
			res->threads++;
			break;
		case BTR_REC_MODULE_LOAD:
			res->modules++;
			break;
		case BTR_REC_PT:
			res->pt_bytes += rec.u.data.size;
			break;
		default:
			break;
		}
		int wrc = btr_trace_write(w, &rec);
		if (wrc < 0) {
			btr_trace_reader_free(r);
			return wrc;
		}
	}
	btr_trace_reader_free(r);
	if (rc == -BTR_ERR_EOS)
		return 0;
	/* A plugin killed in the middle leaves a file cut inside a chunk:
	 * every complete chunk has been copied. */
	btr_debug("%s: plugin trace incomplete (%s); kept what was complete", path, btr_errstr(rc));
	return 0;
}

static int is_sync_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
	       sig == SIGABRT || sig == SIGSYS;
}

/* QEMU died without the plugin's exit callback (a fatal signal, SIGKILL,
 * exec): finish every thread from the shared state file, mapped at the
 * plugin's address so that its pointers stay valid (qemu_state.h). */
static int salvage_state(const char *path, struct btr_trace_writer *w, struct btr_capture_result *res,
			 struct plugin_exit *px, const char *gt)
{
	struct qs_hdr h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &h, sizeof(h.magic) * 4, 0) != (ssize_t)(sizeof(h.magic) * 4) || h.magic != QS_MAGIC ||
	    h.size != QS_SIZE) {
		close(fd);
		return 0;
	}
	void *want = (void *)(uintptr_t)h.base;
	void *m = mmap(want, h.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
		       fd, 0);
	close(fd);
	if (m == MAP_FAILED || m != want) {
		if (m != MAP_FAILED)
			munmap(m, h.size);
		btr_warn("cannot map the plugin state at 0x%llx: the last packets of each thread are lost",
			 (unsigned long long)h.base);
		return 0;
	}
	struct qs_hdr *qh = m;
	uint32_t n = qh->n_thr;
	if (n > BTR_ARRAY_SIZE(qh->thr))
		n = BTR_ARRAY_SIZE(qh->thr);
	/* The thread that died: the one that left its TB early (a fault),
	 * else the main thread. */
	struct thr *self = NULL;
	for (uint32_t i = 0; i < n; i++) {
		struct thr *t = qh->thr[i];
		if (!qs_owns(qh, t) || t->done || !t->announced)
			continue;
		struct tbinfo *p = t->prev;
		if (p && qs_owns(qh, p) && qs_started(p, p->count - t->base) < p->n) {
			self = t;
			break;
		}
		if (!self || t->tid == qh->pid)
			self = t;
	}
	int rc = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		struct thr *t = qh->thr[i];
		if (!qs_owns(qh, t) || t->done || !t->announced)
			continue;
		struct qs_end e;
		if (btr_pt_enc_size(&t->enc) + PT_SLACK > PT_BUF)
			continue;   /* inconsistent: never happens for a sane state */
		qs_finish_thread(qh, t, t == self && is_sync_signal(res->signo), &e);
		if (gt && t->gt && qs_owns(qh, t->gt) && t->gt_n <= GT_BUF) {
			/* The ground-truth entries the plugin had not written. */
			if (e.unlog && t->gt_n && t->gt[t->gt_n - 1] == e.unlog)
				t->gt_n--;
			FILE *f = fopen(gt, "ab");
			struct { uint32_t magic, tid; uint64_t n; } gh = { GT_MAGIC, t->tid, t->gt_n };
			if (f) {
				if (t->gt_n && (fwrite(&gh, sizeof(gh), 1, f) != 1 ||
						fwrite(t->gt, 8, t->gt_n, f) != t->gt_n))
					btr_warn("%s: cannot complete the ground truth", gt);
				fclose(f);
			}
		}
		if (t == self) {
			px->have = 1;
			px->tid = t->tid;
			px->ip = e.ip;
			px->boundary = e.boundary;
		}
		struct btr_record r = { .type = BTR_REC_PT };
		r.u.data.tid = t->tid;
		r.u.data.cpu = -1;
		r.u.data.stream_offset = t->flushed;
		r.u.data.size = btr_pt_enc_size(&t->enc);
		r.u.data.data = t->enc.begin;
		if (r.u.data.size) {
			res->pt_bytes += r.u.data.size;
			rc = btr_trace_write(w, &r);
		}
		memset(&r, 0, sizeof(r));
		r.type = BTR_REC_THREAD_EXIT;
		r.u.thread.pid = qh->pid;
		r.u.thread.tid = t->tid;
		if (!rc)
			rc = btr_trace_write(w, &r);
	}
	munmap(m, h.size);
	return rc;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX];
	if (d) {
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) < sizeof(p))
				unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* The plugin's finished file, else the temporary file of a plugin that
 * did not get to finish it. */
static int find_plugin_file(const char *dir, char *buf, size_t size)
{
	snprintf(buf, size, "%s/plugin.btr", dir);
	if (access(buf, R_OK) == 0)
		return 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	int rc = -BTR_ERR_NOENT;
	if (!d)
		return rc;
	while ((e = readdir(d))) {
		if (!strncmp(e->d_name, "plugin.btr.tmp.", 15) &&
		    (size_t)snprintf(buf, size, "%s/%s", dir, e->d_name) < size) {
			rc = 0;
			break;
		}
	}
	closedir(d);
	return rc;
}


int btr_qemu_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	char qemu[PATH_MAX], plugin[PATH_MAX], cmd[PATH_MAX], dir[PATH_MAX], pfile[PATH_MAX + 32];
	char gt[PATH_MAX] = "";
	struct btr_trace_writer *w = NULL;
	int rc;

	if (!opts || !opts->output || !opts->argv || !opts->argv[0] || !res)
		return -BTR_ERR_INVAL;
	memset(res, 0, sizeof(*res));
	if ((rc = resolve_cmd(opts->argv[0], cmd, sizeof(cmd))) < 0)
		return rc;
	if (btr_qemu_find(opts->qemu, qemu, sizeof(qemu)) < 0) {
		btr_err("qemu-x86_64 not found (install qemu-user or set BTR_QEMU)");
		return -BTR_ERR_NODEV;
	}
	if (btr_qemu_find_plugin(opts->plugin, plugin, sizeof(plugin)) < 0) {
		btr_err("btr-qemu.so not found next to the btr binary (set BTR_QEMU_PLUGIN)");
		return -BTR_ERR_NODEV;
	}
	if (opts->ground_truth) {
		/* The plugin opens it; resolve it here so a relative path means
		 * the same thing and an unwritable one fails before the start. */
		int fd = open(opts->ground_truth, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0) {
			rc = btr_err_from_errno(errno);
			btr_err("%s: %s", opts->ground_truth, strerror(errno));
			return rc;
		}
		close(fd);
		if (!realpath(opts->ground_truth, gt)) {
			btr_err("%s: %s", opts->ground_truth, strerror(errno));
			return -BTR_ERR_IO;
		}
	}
	if (strchr(plugin, ',') || strchr(gt, ',')) {
		btr_err("paths given to the QEMU plugin must not contain ','");
		return -BTR_ERR_INVAL;
	}

	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .compress = opts->compress };
	if ((rc = btr_trace_writer_new(opts->output, &wo, &w)) < 0) {
		btr_err("%s: cannot create: %s", opts->output, btr_errstr(rc));
		return rc;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/btr-record-XXXXXX", tmp && *tmp && !strchr(tmp, ',') ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		rc = btr_err_from_errno(errno);
		btr_err("%s: cannot create a temporary directory: %s", dir, strerror(errno));
		btr_trace_writer_abort(w);
		return rc;
	}

	char parg[6 * PATH_MAX + 128];
	snprintf(parg, sizeof(parg), "%s,out=%s/plugin.btr,state=%s/state,retcomp=%s%s%s", plugin, dir, dir,
		 opts->no_retcomp ? "off" : "on", gt[0] ? ",gt=" : "", gt);
	size_t argc = 0;
	while (opts->argv[argc])
		argc++;
	char **args = calloc(argc + 5, sizeof(char *));
	if (!args) {
		btr_trace_writer_abort(w);
		remove_dir(dir);
		return -BTR_ERR_NOMEM;
	}
	args[0] = qemu;
	args[1] = "-plugin";
	args[2] = parg;
	args[3] = cmd;
	for (size_t i = 1; i < argc; i++)
		args[3 + i] = opts->argv[i];

	struct sigaction sa, old[BTR_ARRAY_SIZE(fwd_signals)];
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	got_signal = 0;
	child_pid = 0;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
		sigaction(fwd_signals[i], &sa, &old[i]);

	/* A close-on-exec pipe tells the parent whether exec worked. */
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		rc = btr_err_from_errno(errno);
		goto fail_restore;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	pid_t pid = fork();
	if (pid < 0) {
		rc = btr_err_from_errno(errno);
		close(pfd[0]);
		close(pfd[1]);
		goto fail_restore;
	}
	if (pid == 0) {
		for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
			sigaction(fwd_signals[i], &old[i], NULL);
		close(pfd[0]);
		execv(qemu, args);
		int e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	child_pid = pid;
	close(pfd[1]);
	int child_errno = 0;
	ssize_t got;
	do
		got = read(pfd[0], &child_errno, sizeof(child_errno));
	while (got < 0 && errno == EINTR);
	close(pfd[0]);

	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	child_pid = 0;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
		sigaction(fwd_signals[i], &old[i], NULL);
	free(args);
	args = NULL;
	res->interrupted = got_signal != 0;
	if (got > 0) {
		btr_err("%s: cannot execute: %s", qemu, strerror(child_errno));
		rc = -BTR_ERR_CHILD;
		goto fail;
	}

	res->exited = WIFEXITED(st);
	res->code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
	res->signo = WIFSIGNALED(st) ? WTERMSIG(st) : 0;

	struct btr_record rec = { .type = BTR_REC_MACHINE };
	struct btr_rec_machine *m = &rec.u.machine;
	snprintf(m->backend, sizeof(m->backend), "qemu");
	snprintf(m->cpu_vendor, sizeof(m->cpu_vendor), "qemu-tcg");
	m->flags = BTR_MACHINE_USER_ONLY | (opts->no_retcomp ? 0 : BTR_MACHINE_PT_RETCOMP);
	m->start_time_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if ((rc = btr_trace_write(w, &rec)) < 0)
		goto fail;

	struct plugin_exit px = { 0 };
	if (find_plugin_file(dir, pfile, sizeof(pfile)) < 0) {
		btr_err("%s did not run the plugin %s (exit status %d)", qemu, plugin,
			res->exited ? res->code : 128 + res->signo);
		rc = -BTR_ERR_CHILD;
		goto fail;
	}
	if ((rc = copy_plugin_trace(pfile, w, res, &px)) < 0) {
		btr_err("%s: %s", pfile, btr_errstr(rc));
		goto fail;
	}
	if (!px.have) {
		char sfile[PATH_MAX + 16];
		snprintf(sfile, sizeof(sfile), "%s/state", dir);
		if ((rc = salvage_state(sfile, w, res, &px, gt[0] ? gt : NULL)) < 0) {
			btr_err("%s: %s", opts->output, btr_errstr(rc));
			goto fail;
		}
	}

	memset(&rec, 0, sizeof(rec));
	rec.type = BTR_REC_PROCESS_EXIT;
	rec.u.exit.pid = (uint32_t)pid;
	rec.u.exit.tid = px.have ? px.tid : (uint32_t)pid;
	rec.u.exit.code = res->exited ? res->code : 0;
	rec.u.exit.signo = res->signo;
	if (res->signo && px.have) {
		/* A synchronous signal hit the instruction the plugin saw start
		 * last; an asynchronous one arrived between two blocks. */
		rec.u.exit.ip = is_sync_signal(res->signo) ? px.ip : px.boundary;
		res->crash_ip = rec.u.exit.ip;
	}
	if ((rc = btr_trace_write(w, &rec)) < 0)
		goto fail;
	rc = btr_trace_writer_close(w);
	w = NULL;
	if (rc < 0) {
		btr_err("%s: cannot write: %s", opts->output, btr_errstr(rc));
		goto fail;
	}
	remove_dir(dir);
	return 0;

fail_restore:
	for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
		sigaction(fwd_signals[i], &old[i], NULL);
	btr_err("cannot start %s: %s", qemu, btr_errstr(rc));
fail:
	free(args);
	if (w)
		btr_trace_writer_abort(w);
	remove_dir(dir);
	return rc;
}
