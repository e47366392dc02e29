/* qemu.c - the "qemu" capture backend: runs a command under qemu-x86_64
 * with the btr TCG plugin (agents/qemu/qemu_plugin.c) and assembles the
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
#include "btr/file.h"
#include "btr/perfattr.h"
#include "internal.h"
#include "image/jitsyms.h"
#include "output.h"
#include "agent/qemu_exec.h"
#include "agent/qemu_state.h"

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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* execvp-like lookup plus the checks that let us fail before anything
 * starts: exists, executable, an x86-64 ELF file or a script whose
 * interpreter is one (all qemu-x86_64 runs).  @x (may be NULL) receives
 * the resolution (qemu_exec.h) for @argv. */
static int resolve_cmd(const char *cmd, char *const *argv, char *buf, size_t size, struct qx *x)
{
	if (strchr(cmd, '/')) {
		snprintf(buf, size, "%s", cmd);
	} else if (btr__find_in_path(cmd, buf, size) < 0) {
		btr_err("%s: command not found", cmd);
		return -BTR_ERR_CHILD;
	}
	struct qx *own = x ? x : malloc(sizeof(*own));
	if (!own)
		return -BTR_ERR_NOMEM;
	char *one[2] = { (char *)cmd, NULL };
	int e = qx_resolve(own, buf, argv ? argv : one);
	int rc = 0;
	if (e == ENOEXEC) {
		btr_err("%s: not an x86-64 ELF executable or #! script (btr records only those)", buf);
		rc = -BTR_ERR_CHILD;
	} else if (e == EACCES) {
		btr_err("%s: not an executable file", own->path[0] ? own->path : buf);
		rc = -BTR_ERR_CHILD;
	} else if (e) {
		btr_err("%s: %s", buf, strerror(e));
		rc = -BTR_ERR_CHILD;
	} else if (own->untraced) {
		btr_err("%s: %s: btr records only x86-64 programs, not set-uid or set-gid ones", own->path, own->untraced);
		rc = -BTR_ERR_CHILD;
	}
	if (rc < 0 || !x) {
		qx_free(own);
		if (!x)
			free(own);
	}
	return rc;
}

int btr_capture_check_command(const char *cmd, char *buf, size_t size)
{
	if (!cmd || !buf || !size)
		return -BTR_ERR_INVAL;
	return resolve_cmd(cmd, NULL, buf, size, NULL);
}

/* The qemu-x86_64 to run (btr_qemu_select), or one error line saying
 * why there is none: each candidate's reason, and the remedy. */
static int select_qemu(const char *hint, const char *plugin, char *buf, size_t size)
{
	struct btr_qemu_selection *s = malloc(sizeof(*s));
	if (!s)
		return -BTR_ERR_NOMEM;
	int rc = btr_qemu_select(hint, plugin, s);
	if (rc == 0) {
		snprintf(buf, size, "%s", s->c[s->chosen].path);
		btr_debug("qemu: %s (%s%s%s)", buf, s->c[s->chosen].source, s->c[s->chosen].version[0] ? ", QEMU " : "",
			  s->c[s->chosen].version);
	} else if (!s->n) {
		btr_err("qemu-x86_64 not found (install qemu-user, build one with `make qemu`, or set BTR_QEMU)");
	} else if (s->n == 1) {
		char why[PATH_MAX + 1024];
		btr_qemu_probe_plugin(s->c[0].path, plugin, why, sizeof(why));
		btr_err("%s", why);
	} else {
		char msg[BTR_QEMU_MAX_CANDIDATES * (PATH_MAX / 4 + 200)];
		size_t n = 0;
		for (size_t i = 0; i < s->n && n < sizeof(msg); i++)
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s%s: %s", i ? "; " : "", s->c[i].path,
					      s->c[i].why);
		btr_err("no qemu-x86_64 here loads TCG plugins (%s): build one with `make qemu` "
			"(scripts/build-qemu.sh) or point BTR_QEMU at a qemu-x86_64 built with --enable-plugins", msg);
	}
	free(s);
	return rc;
}

/* ---- signals while the command runs ---- */

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t got_signal;
static volatile sig_atomic_t got_user;   /* the signal was sent to btr alone */
static volatile sig_atomic_t sent_root;  /* on_signal passed it to CMD itself */
static volatile sig_atomic_t n_signals;
static volatile sig_atomic_t stop_signal;   /* a signal outside CMD's run: stop */
static volatile sig_atomic_t running;       /* 1 while CMD runs (signals go to it) */

/* A terminal's Ctrl-C already reaches the command (same process group);
 * forward only signals sent to the recorder alone (kill from elsewhere),
 * so that the command sees each signal once. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!running) {
		/* Before CMD starts or while the trace is assembled: the
		 * recorder stops, cleans up and says so (btr_qemu_record);
		 * a second signal then acts as if btr had no handler. */
		stop_signal = sig;
		signal(sig, SIG_DFL);
		return;
	}
	got_signal = sig;
	n_signals++;
	if (si && si->si_code == SI_USER && si->si_pid != child_pid) {
		got_user = 1;
		if (child_pid > 0) {
			kill(child_pid, sig);
			sent_root = 1;
		}
	}
}

/* --snapshot: SIGUSR2 asks every thread for a window (QC_SNAPREQ). */
static volatile sig_atomic_t snap_req;
static void on_snapreq(int sig)
{
	(void)sig;
	snap_req++;
}

static const int fwd_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
static struct sigaction old_sig[BTR_ARRAY_SIZE(fwd_signals)];
static int old_sig_saved;
static struct sigaction old_usr2;
static int old_usr2_saved;

/* The caller's handlers back (after btr_qemu_record installed its own). */
static void restore_signals(void)
{
	if (old_usr2_saved)
		sigaction(SIGUSR2, &old_usr2, NULL);
	old_usr2_saved = 0;
	if (!old_sig_saved)
		return;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
		sigaction(fwd_signals[i], &old_sig[i], NULL);
	old_sig_saved = 0;
}

/* ---- progress (btr_capture_opts.progress) ---- */

/* The interval timer only interrupts the wait loop's waitpid (EINTR). */
static void on_tick(int sig)
{
	(void)sig;
}

/* While the command runs: the shared process counter (DIR/count word 0)
 * and the sizes of the process traces written so far. */
static void poll_progress(const char *dir, void (*fn)(void *, const struct btr_capture_progress *), void *ctx)
{
	struct btr_capture_progress p = { 0 };
	char path[PATH_MAX];
	uint64_t v;
	snprintf(path, sizeof(path), "%s/count", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (pread(fd, &v, sizeof(v), 0) == (ssize_t)sizeof(v))
			p.processes = v;
		close(fd);
	}
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == 'p' && (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < sizeof(path) &&
		    stat(path, &st) == 0)
			p.bytes += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	fn(ctx, &p);
}

/* ---- assembling the final trace ---- */

struct plugin_exit {
	int have;
	uint32_t tid;
	uint64_t ip, boundary;
	int32_t code;
};

/* What the recorder knows about each process's end. */
struct proc {
	uint32_t pid;
	int waited, wst;             /* reaped by the recorder: waitpid status */
	int observed;                /* reaped by a traced parent (its wait4) */
	int32_t ocode, osigno;
	int listed;                  /* has a trace of its own */
	struct plugin_exit px;       /* its last program's plugin exit */
};

struct ptab {
	struct proc *p;
	size_t n, cap;
};

static struct proc *ptab_get(struct ptab *t, uint32_t pid)
{
	for (size_t i = t->n; i-- > 0;)
		if (t->p[i].pid == pid)
			return &t->p[i];
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		struct proc *np = realloc(t->p, nc * sizeof(*np));
		if (!np)
			return NULL;
		t->p = np;
		t->cap = nc;
	}
	struct proc *p = &t->p[t->n++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

/* Copies the records of process @pid's plugin trace @path.  Exit records
 * are kept back (the recorder writes the real ones at the end): its own
 * goes to @px, a traced parent's observation of a child to @tab. */
static int copy_plugin_trace(const char *path, struct btr_trace_writer *w, struct btr_capture_result *res,
			     uint32_t pid, struct ptab *tab, struct plugin_exit *px)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if (stop_signal) {
			btr_trace_reader_free(r);
			return -BTR_ERR_INTERRUPTED;
		}
		switch (rec.type) {
		case BTR_REC_PROCESS_EXIT:
			if (rec.u.exit.pid == pid) {
				px->have = 1;
				px->tid = rec.u.exit.tid;
				px->ip = rec.u.exit.ip;
				px->boundary = rec.u.exit.addr;
				px->code = rec.u.exit.code;
			} else {
				struct proc *c = ptab_get(tab, rec.u.exit.pid);
				if (c) {
					c->observed = 1;
					c->ocode = rec.u.exit.code;
					c->osigno = rec.u.exit.signo;
				}
			}
			continue;
		case BTR_REC_MACHINE:
			continue;
		case BTR_REC_PROCESS:
			if (rec.u.process.event == BTR_PROC_START && rec.u.process.pid == pid)
				res->processes++;
			if (rec.u.process.event == BTR_PROC_UNTRACED)
				res->untraced++;
			break;
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
	/* A plugin killed in the middle (or replaced by exec) leaves a file
	 * cut inside a chunk: every complete chunk has been copied. */
	btr_debug("%s: plugin trace incomplete (%s); kept what was complete", path, btr_errstr(rc));
	return 0;
}

static int write_jit_rec(void *ctx, const struct btr_record *rec)
{
	return btr_trace_write(ctx, rec);
}

/* The names JIT runtimes gave process @pid's generated code, as SYMBOL
 * records before its own: its perf map /tmp/perf-PID.map and the jitdump
 * files the plugin saw it map (DIR/jitdumps), read now that it ended
 * (docs/record.md).  Returns 0 or the writer's error. */
static int write_jit_symbols(struct btr_trace_writer *w, const char *dir, uint32_t pid)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "/tmp/perf-%u.map", pid);
	int rc = jit_perf_map_read(path, pid, geteuid(), write_jit_rec, w);   /* we ran it: our user */
	if (rc < 0 && rc != -BTR_ERR_NOENT && btr_trace_writer_error(w) < 0)
		return rc;
	snprintf(path, sizeof(path), "%s/jitdumps", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char line[PATH_MAX + 32];
	while (fgets(line, sizeof(line), f)) {
		unsigned p;
		int pos = 0;
		if (sscanf(line, "%u %n", &p, &pos) < 1 || p != pid || !pos)
			continue;
		line[strcspn(line, "\n")] = 0;
		rc = jit_dump_read(line + pos, pid, 0, write_jit_rec, w);
		if (rc < 0 && btr_trace_writer_error(w) < 0)
			break;
		if (rc < 0)
			btr_warn("%s: %s: its names are not in the trace", line + pos, btr_errstr(rc));
	}
	fclose(f);
	return btr_trace_writer_error(w);
}

/* Reads the first @size bytes of the plugins' shared page DIR/count into
 * @v.  Returns the bytes read (0 if it cannot be read). */
static size_t read_count_page(const char *dir, uint64_t *v, size_t size)
{
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s/count", dir) >= sizeof(path))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = pread(fd, v, size, 0);
	close(fd);
	return n > 0 ? (size_t)n : 0;
}

/* The first write error a plugin met (DIR/count word 1), 0 if none. */
static int plugin_write_error(const char *dir)
{
	uint64_t v[2] = { 0, 0 };
	size_t n = read_count_page(dir, v, sizeof(v));
	int64_t e = (int64_t)v[QC_WERR];
	return n == sizeof(v) && e < 0 && e > -BTR_ERR__COUNT ? (int)e : 0;
}


static int is_sync_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
	       sig == SIGABRT || sig == SIGSYS;
}

/* --snapshot: thread @t's last window, from its ring in the state @qh
 * (agents/qemu/qemu_snapshot.c writes the others): the process died
 * (@signo) or exec'd (0). */
static int salvage_window(const struct qs_hdr *qh, struct thr *t, struct btr_trace_writer *w,
			  struct btr_capture_result *res, int signo)
{
	struct qs_snap *s = t->snap;
	if (!qs_owns(qh, s) || !qs_owns(qh, s->ring) || !qs_owns(qh, s->psb) || !s->size || !s->cap_psb ||
	    s->n_psb > s->cap_psb || !qs_owns(qh, s->ring + s->size - 1) ||
	    !qs_owns(qh, (const uint8_t *)(s->psb + s->cap_psb) - 1))
		return 0;   /* inconsistent: never happens for a sane state */
	struct qs_span sp[3];
	int n = qs_snap_window(t, sp);
	if (!n)
		return 0;
	struct btr_record r = { .type = BTR_REC_WINDOW };
	r.u.win.pid = qh->pid;
	r.u.win.tid = t->tid;
	r.u.win.reason = signo ? BTR_WINDOW_KILLED : BTR_WINDOW_END;
	r.u.win.index = s->windows;
	r.u.win.stream_offset = sp[0].off;
	for (int i = 0; i < n; i++)
		r.u.win.size += sp[i].len;
	int rc = btr_trace_write(w, &r);
	for (int i = 0; i < n && !rc; i++) {
		memset(&r, 0, sizeof(r));
		r.type = BTR_REC_PT;
		r.u.data.tid = t->tid;
		r.u.data.cpu = -1;
		r.u.data.stream_offset = sp[i].off;
		r.u.data.size = sp[i].len;
		r.u.data.data = sp[i].p;
		res->pt_bytes += sp[i].len;
		rc = btr_trace_write(w, &r);
	}
	return rc;
}

/* QEMU died without the plugin's exit callback (a fatal signal, SIGKILL,
 * exec): finish every thread from the shared state file, mapped at the
 * plugin's address so that its pointers stay valid (qemu_state.h). */
static int salvage_state(const char *path, struct btr_trace_writer *w, struct btr_capture_result *res,
			 int signo, struct plugin_exit *px, const char *gt)
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
		qs_finish_thread(qh, t, t == self && is_sync_signal(signo), &e);
		if (gt && t->gt && qs_owns(qh, t->gt) && t->gt_n <= GT_BUF) {
			/* The ground-truth entries the plugin had not written. */
			if (e.unlog && t->gt_n && t->gt[t->gt_n - 1] == e.unlog)
				t->gt_n--;
			int gfd = open(gt, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			FILE *f = gfd >= 0 ? fdopen(gfd, "ab") : NULL;
			if (!f && gfd >= 0)
				close(gfd);
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
		if (t->snap)
			rc = salvage_window(qh, t, w, res, signo);   /* --snapshot: its last window */
		else if (r.u.data.size) {
			res->pt_bytes += r.u.data.size;
			rc = btr_trace_write(w, &r);
		}
		memset(&r, 0, sizeof(r));
		r.type = BTR_REC_THREAD_EXIT;
		r.u.thread.pid = qh->pid;
		r.u.thread.tid = t->tid;
		/* QEMU died without the exit callback: a signal, or an exec
		 * (the exec'ing thread starts again in the new program) */
		r.u.thread.end = signo ? BTR_THREAD_END_KILLED : BTR_THREAD_END_UNKNOWN;
		r.u.thread.signo = signo;
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

/* One process's files in the temporary directory: pSTEM.btr (or the
 * writer's pSTEM.btr.tmp.* of a plugin that did not finish it) and its
 * state sSTEM; STEM = "monotonic-ns.pid" sorts in start order. */
struct pfile {
	char stem[48];
	char name[300];    /* the trace file's name */
	uint32_t pid;
};

static int pfile_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pfile *)a)->stem, ((const struct pfile *)b)->stem);
}

static int write_lost(struct btr_trace_writer *w, uint32_t pid, uint32_t ppid, int werr)
{
	if (werr == -BTR_ERR_INTERRUPTED) {
		struct btr_record rec = { .type = BTR_REC_PROCESS };
		rec.u.process.pid = pid;
		rec.u.process.event = BTR_PROC_LOST;
		rec.u.process.reason = werr;
		rec.u.process.path = "";
		rec.u.process.args = "";
		rec.u.process.detail = "btr record was interrupted while it wrote the trace";
		return btr_trace_write(w, &rec);
	}
	struct btr_record rec = { .type = BTR_REC_PROCESS };
	rec.u.process.pid = pid;
	rec.u.process.ppid = ppid;
	rec.u.process.event = BTR_PROC_LOST;
	rec.u.process.reason = werr < 0 ? werr : -BTR_ERR_IO;
	rec.u.process.path = "";
	rec.u.process.args = "";
	rec.u.process.detail = "writing to $TMPDIR failed while recording";
	return btr_trace_write(w, &rec);
}

/* Processes the plugins listed in DIR/count (qemu_state.h) without any
 * trace file: their plugin could not write one ($TMPDIR full). */
static int write_missing(struct btr_trace_writer *w, const char *dir, const struct pfile *files, size_t n_files,
			 int werr)
{
	uint64_t v[QC_PIDS + QC_MAX_PIDS];
	size_t got = read_count_page(dir, v, sizeof(v));
	if (got < QC_PIDS * sizeof(v[0]))
		return 0;
	uint64_t n = v[QC_NPIDS] < QC_MAX_PIDS ? v[QC_NPIDS] : QC_MAX_PIDS;
	if ((size_t)got < (QC_PIDS + n) * sizeof(v[0]))
		n = (uint64_t)got / sizeof(v[0]) - QC_PIDS;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t pid = (uint32_t)v[QC_PIDS + i], ppid = (uint32_t)(v[QC_PIDS + i] >> 32);
		size_t j = 0;
		while (j < n_files && files[j].pid != pid)
			j++;
		if (!pid || (j < n_files && ppid != QC_LOST_AFTER_EXEC))
			continue;
		int rc = write_lost(w, pid, ppid == QC_LOST_AFTER_EXEC ? 0 : ppid, werr);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int list_plugin_files(const char *dir, struct pfile **out, size_t *n_out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct pfile *v = NULL;
	size_t n = 0, cap = 0;
	if (!d)
		return -BTR_ERR_IO;
	while ((e = readdir(d))) {
		const char *dot = strstr(e->d_name, ".btr");
		size_t sl = dot ? (size_t)(dot - e->d_name) - 1 : 0;
		if (e->d_name[0] != 'p' || !dot || sl == 0 || sl >= sizeof(v->stem) ||
		    strlen(e->d_name) >= sizeof(v->name))
			continue;
		/* pSTEM.btr, the writer's pSTEM.btr.tmp.* (the plugin did not
		 * finish), pSTEM.btr.partial (its writes failed) */
		if (dot[4] && strncmp(dot + 4, ".tmp.", 5) && strcmp(dot + 4, ".partial"))
			continue;
		size_t i;
		for (i = 0; i < n; i++)   /* a finished file wins over a temporary one */
			if (!strncmp(v[i].stem, e->d_name + 1, sl) && !v[i].stem[sl])
				break;
		if (i < n) {
			if (!dot[4])
				snprintf(v[i].name, sizeof(v[i].name), "%s", e->d_name);
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct pfile *nv = realloc(v, nc * sizeof(*nv));
			if (!nv) {
				free(v);
				closedir(d);
				return -BTR_ERR_NOMEM;
			}
			v = nv;
			cap = nc;
		}
		memcpy(v[n].stem, e->d_name + 1, sl);
		v[n].stem[sl] = 0;
		snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
		const char *pd = strchr(v[n].stem, '.');
		v[n].pid = pd ? (uint32_t)strtoul(pd + 1, NULL, 10) : 0;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), pfile_cmp);
	*out = v;
	*n_out = n;
	return 0;
}

/* Ctrl-C or a kill reached the recorder: pass it to every traced process
 * that would not get it otherwise (another process group, e.g. a daemon
 * after setsid, or all of them when the signal was meant for btr alone).
 * Only processes still running QEMU (@qemu) are signalled, so that a pid
 * reused by an unrelated program is left alone. */
static void forward_signal(const char *dir, const char *qemu, int sig, int to_all, pid_t skip)
{
	struct pfile *v;
	size_t n;
	char rq[PATH_MAX];
	if (!realpath(qemu, rq) || list_plugin_files(dir, &v, &n) < 0)
		return;
	pid_t grp = getpgrp();
	for (size_t i = 0; i < n; i++) {
		char link[64], exe[PATH_MAX];
		snprintf(link, sizeof(link), "/proc/%u/exe", v[i].pid);
		ssize_t k = readlink(link, exe, sizeof(exe) - 1);
		if (k <= 0)
			continue;
		exe[k] = 0;
		if (strcmp(exe, rq) || (pid_t)v[i].pid == skip || (!to_all && getpgid((pid_t)v[i].pid) == grp))
			continue;
		kill((pid_t)v[i].pid, sig);
	}
	free(v);
}

/* ---- the traced tree does not outlive the recorder ----
 *
 * If `btr record` itself dies (SIGKILL, the OOM killer), nobody would wait
 * for the traced processes, finish their trace or clean $TMPDIR.  A
 * watchdog process (not a child: btr's wait loop waits for every child)
 * holds the read end of a pipe; btr says "done" at its normal end.  EOF
 * without it means btr died: the watchdog kills every traced process still
 * running QEMU in btr's session (a daemon that detached with setsid() lives
 * on), removes the output's temporary file (a header only: @tmpname,
 * btr_trace_writer_tmp_name) and says in one line on
 * stderr where the plugins' traces are (docs/reliability.md: readable,
 * recoverable).  The root QEMU also has PR_SET_PDEATHSIG. */
static void watchdog_run(int rfd, const char *dir, const char *qemu, const char *tmpname, pid_t btr)
{
	int nul = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 2; fd++)
		dup2(nul, fd);   /* stderr stays: the one line */
	if (rfd != 3) {
		dup2(rfd, 3);
		rfd = 3;
	}
	syscall(SYS_close_range, 4u, ~0u, 0u);
	pid_t sid = getsid(0);
	setsid();   /* a terminal's Ctrl-C is for CMD and btr, not for the watchdog */
	prctl(PR_SET_NAME, "btr-watchdog");
	char c = 0;
	ssize_t k;
	while ((k = read(rfd, &c, 1)) < 0 && errno == EINTR)
		;
	if (k == 1)
		_exit(0);   /* btr ended normally */
	char rq[PATH_MAX];
	if (!realpath(qemu, rq))
		snprintf(rq, sizeof(rq), "%s", qemu);
	for (int round = 0, killed = 1; round < 20 && killed; round++) {
		struct pfile *v;
		size_t n;
		killed = 0;
		if (list_plugin_files(dir, &v, &n) < 0)
			break;
		for (size_t i = 0; i < n; i++) {
			char link[64], exe[PATH_MAX];
			snprintf(link, sizeof(link), "/proc/%u/exe", v[i].pid);
			ssize_t m = readlink(link, exe, sizeof(exe) - 1);
			if (m <= 0)
				continue;
			exe[m] = 0;
			if (!strcmp(exe, rq) && getsid((pid_t)v[i].pid) == sid && kill((pid_t)v[i].pid, SIGKILL) == 0)
				killed = 1;
		}
		free(v);
		if (killed)
			usleep(20000);   /* let them go before the next look */
	}
	if (tmpname)
		unlink(tmpname);
	dprintf(2, "btr: btr record (pid %ld) was killed: its traced processes were ended; what they recorded is in "
		"%s (btr report %s/p*.btr*; remove it afterwards)\n", (long)btr, dir, dir);
	_exit(0);
}

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
static int watchdog_fd = -1;   /* the write end of its pipe while btr records */

/* Starts the watchdog; returns the write end of its pipe (-1: none). */
static int watchdog_start(const char *dir, const char *qemu, const char *tmpname)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t btr = getpid(), mid = fork();
	if (mid == 0) {
		if (fork() == 0)
			watchdog_run(p[0], dir, qemu, tmpname, btr);
		_exit(0);
	}
	close(p[0]);
	if (mid < 0) {
		close(p[1]);
		return -1;
	}
	while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
		;
	return p[1];
}

/* The recorder ends normally: the watchdog goes. */
static void watchdog_stop(void)
{
	if (watchdog_fd < 0)
		return;
	if (write(watchdog_fd, "q", 1) < 0) {
		/* it is gone already */
	}
	close(watchdog_fd);
	watchdog_fd = -1;
}

static int write_exits(struct btr_trace_writer *w, struct ptab *tab, uint32_t root, struct btr_capture_result *res)
{
	for (size_t i = 0; i < tab->n; i++) {
		struct proc *p = &tab->p[i];
		if (!p->listed)
			continue;
		struct btr_record rec = { .type = BTR_REC_PROCESS_EXIT };
		rec.u.exit.pid = p->pid;
		rec.u.exit.tid = p->px.have ? p->px.tid : p->pid;
		/* Best source first: our own waitpid, a traced parent's wait4,
		 * the plugin's exit callback (exit_group only). */
		if (p->waited) {
			rec.u.exit.code = WIFEXITED(p->wst) ? WEXITSTATUS(p->wst) : 0;
			rec.u.exit.signo = WIFSIGNALED(p->wst) ? WTERMSIG(p->wst) : 0;
		} else if (p->observed) {
			rec.u.exit.code = p->ocode;
			rec.u.exit.signo = p->osigno;
		} else if (p->px.have && p->px.code >= 0) {
			rec.u.exit.code = p->px.code;
		} else {
			continue;   /* nobody saw it end */
		}
		if (rec.u.exit.signo && p->px.have) {
			/* A synchronous signal hit the instruction the plugin saw
			 * start last; an asynchronous one arrived between blocks. */
			rec.u.exit.ip = is_sync_signal(rec.u.exit.signo) ? p->px.ip : p->px.boundary;
			if (p->pid == root)
				res->crash_ip = rec.u.exit.ip;
		}
		int rc = btr_trace_write(w, &rec);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* A signal reached the recorder while it wrote the trace (a Ctrl-C at
 * "writing the trace"): the first @copied of the @n_files program traces
 * are in the output.  Every process whose trace is not whole gets a
 * `lost` record (readers name it and exit 3), the file is closed as
 * OUTPUT.partial (a device or FIFO: cut there), $TMPDIR is cleaned and one
 * line says what is where.  Frees what btr_qemu_record holds.  Returns
 * -BTR_ERR_INTERRUPTED (res->signo: the signal). */
static int assembly_stopped(struct btr_trace_writer *w, const char *output, const char *dir, struct pfile *files,
			    size_t copied, size_t n_files, struct ptab *tab, uint32_t root, struct btr_capture_result *res,
			    struct qx *x, char **args)
{
	int sig = stop_signal, rc = 0;
	restore_signals();
	for (size_t i = copied; i < n_files && rc == 0; i++) {
		size_t j = copied;
		while (j < i && files[j].pid != files[i].pid)
			j++;
		if (j == i)   /* each process once */
			rc = write_lost(w, files[i].pid, 0, -BTR_ERR_INTERRUPTED);
	}
	if (rc == 0)
		rc = write_exits(w, tab, root, res);
	char kept[PATH_MAX];
	snprintf(kept, sizeof(kept), "%s", output);
	if (rc == 0 && !btr_trace_writer_streaming(w)) {
		if ((size_t)snprintf(kept, sizeof(kept), "%s.partial", output) >= sizeof(kept))
			rc = -BTR_ERR_INVAL;
		else
			rc = btr_trace_writer_retarget(w, kept);
	}
	if (rc == 0)
		rc = btr_trace_writer_close(w);
	else
		btr_trace_writer_abort(w);
	if (rc < 0)
		btr_err("interrupted by SIG%s while writing the trace, and %s could not be kept: %s", sigabbrev_np(sig),
			kept, btr_errstr(rc));
	else
		btr_err("interrupted by SIG%s while writing the trace: %s holds %zu of %zu program traces (readers "
			"name the processes left out)", sigabbrev_np(sig), kept, copied, n_files);
	remove_dir(dir);
	watchdog_stop();
	free(files);
	free(tab->p);
	free(args);
	qx_free(x);
	free(x);
	res->signo = sig;
	return -BTR_ERR_INTERRUPTED;
}

/* --ip-filter SPEC for the plugin: ",filter=0xLO-0xHI@FILE" per range
 * (file offsets, btr_ip_filter_parse as for -b pt; FILE made absolute:
 * the plugin matches it against the paths of the guest's mappings). */
static int filter_args(const struct btr_capture_opts *opts, char *buf, size_t size)
{
	const char *const *spec = BTR_OPTS_GET(opts, ip_filters, NULL);
	unsigned n = BTR_OPTS_GET(opts, n_ip_filters, 0);
	size_t len = 0;
	buf[0] = 0;
	if (n > BTR_PT_MAX_FILTERS) {
		btr_err("--ip-filter: at most %d ranges", BTR_PT_MAX_FILTERS);
		return -BTR_ERR_INVAL;
	}
	for (unsigned i = 0; i < n && spec; i++) {
		struct btr_ip_filter f;
		char real[PATH_MAX];
		int rc = btr_ip_filter_parse(spec[i], &f);
		if (rc < 0)
			return rc;   /* the parser said why */
		if (!f.module[0]) {
			btr_err("--ip-filter '%s': -b qemu traces user code only: give the file (START-END@FILE or "
				"SYM@FILE)", spec[i]);
			return -BTR_ERR_INVAL;
		}
		if (!realpath(f.module, real)) {
			btr_err("--ip-filter: %s: %s", f.module, strerror(errno));
			return btr_err_from_errno(errno);
		}
		if (strchr(real, ',')) {
			btr_err("--ip-filter: %s: a path with a comma cannot be passed to the QEMU plugin", real);
			return -BTR_ERR_INVAL;
		}
		int k = snprintf(buf + len, size - len, ",filter=0x%llx-0x%llx@%s", (unsigned long long)f.start,
				 (unsigned long long)f.end, real);
		if (k < 0 || (size_t)k >= size - len)
			return -BTR_ERR_OVERFLOW;
		len += (size_t)k;
	}
	return 0;
}

/* --start/--stop/--trigger SPEC for the plugin: ",NAME=0xOFF@FILE"
 * appended to @buf, @name "start", "stop" or "trigger".  SPEC is SYM or
 * ADDR (a link-time address) of the program @prog, or SYM@FILE /
 * ADDR@FILE; resolved by btr_ip_filter_parse, the one parser of symbols
 * and addresses in files. */
static int start_arg(const char *spec, const char *prog, const char *name, char *buf, size_t size)
{
	char full[2 * PATH_MAX + 64], real[PATH_MAX];
	struct btr_ip_filter f;
	const char *at = strchr(spec, '@');
	size_t n = at ? (size_t)(at - spec) : strlen(spec);
	const char *file = at ? at + 1 : prog;
	char *end;
	errno = 0;
	unsigned long long a = strtoull(spec, &end, 0);
	int is_addr = end == spec + n && n && !errno;
	snprintf(full, sizeof(full), is_addr ? "%.*s-%.*s@%s" : "%.*s%.*s@%s", (int)n, spec, is_addr ? (int)n : 0,
		 spec, file);
	(void)a;
	int rc = btr_ip_filter_parse(full, &f);
	if (rc < 0)
		return rc;   /* the parser said why */
	if (!realpath(f.module, real) || strchr(real, ',')) {
		btr_err("--%s %s: %s: cannot pass it to the QEMU plugin", name, spec, f.module);
		return -BTR_ERR_INVAL;
	}
	size_t len = strlen(buf);
	int k = snprintf(buf + len, size - len, ",%s=0x%llx@%s", name, (unsigned long long)f.start, real);
	return k < 0 || (size_t)k >= size - len ? -BTR_ERR_OVERFLOW : 0;
}

int btr_qemu_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	char qemu[PATH_MAX], plugin[PATH_MAX], cmd[PATH_MAX], dir[PATH_MAX] = "", pfile[2 * PATH_MAX];
	char gt[PATH_MAX] = "";
	struct btr_trace_writer *w = NULL;
	struct qx *x = NULL;
	struct ptab tab = { 0 };
	struct pfile *files = NULL;
	size_t n_files = 0;
	static char fspec[BTR_PT_MAX_FILTERS * (PATH_MAX + 48)];   /* the filter= plugin arguments */
	char **args = NULL, **renv = NULL;
	int rc;

	if (!opts || !BTR_OPTS_VALID(opts, BTR_CAPTURE_OPTS_V1) || !opts->output || !opts->argv || !opts->argv[0] || !res)
		return -BTR_ERR_INVAL;
	memset(res, 0, sizeof(*res));
	unsigned max_procs = BTR_OPTS_GET(opts, max_processes, BTR_CAPTURE_MAX_PROCESSES);
	int follow_fork = !BTR_OPTS_GET(opts, no_follow_fork, 0), follow_exec = !BTR_OPTS_GET(opts, no_follow_exec, 0);
	void (*progress)(void *, const struct btr_capture_progress *) = BTR_OPTS_GET(opts, progress, NULL);
	void *progress_ctx = BTR_OPTS_GET(opts, progress_ctx, NULL);
	unsigned progress_ms = BTR_OPTS_GET(opts, progress_ms, 250);
	if (!(x = malloc(sizeof(*x))))
		return -BTR_ERR_NOMEM;
	if ((rc = resolve_cmd(opts->argv[0], opts->argv, cmd, sizeof(cmd), x)) < 0) {
		free(x);
		return rc;
	}
	if (btr_qemu_find_plugin(opts->plugin, plugin, sizeof(plugin)) < 0) {
		btr_err("btr-qemu.so not found next to the btr binary (set BTR_QEMU_PLUGIN)");
		rc = -BTR_ERR_NODEV;
		goto out_x;
	}
	if ((rc = select_qemu(opts->qemu, plugin, qemu, sizeof(qemu))) < 0)
		goto out_x;
	if ((rc = filter_args(opts, fspec, sizeof(fspec))) < 0)
		goto out_x;
	if ((opts->start && (rc = start_arg(opts->start, cmd, "start", fspec, sizeof(fspec))) < 0) ||
	    (opts->stop && (rc = start_arg(opts->stop, cmd, "stop", fspec, sizeof(fspec))) < 0))
		goto out_x;
	int ipf = fspec[0] != 0;   /* --ip-filter, --start: TIP.PGD/PGE at the edges */
	uint64_t snap = BTR_OPTS_GET(opts, snapshot_size, 0);
	const char *trigger = BTR_OPTS_GET(opts, trigger, NULL);
	if (trigger && !snap) {
		btr_err("--trigger needs --snapshot SIZE");
		rc = -BTR_ERR_INVAL;
		goto out_x;
	}
	if (snap && (snap < (16u << 10) || snap > (1u << 30))) {
		btr_err("--snapshot %llu: from 16 KiB to 1 GiB", (unsigned long long)snap);
		rc = -BTR_ERR_INVAL;
		goto out_x;
	}
	if (snap) {
		size_t len = strlen(fspec);
		int k = snprintf(fspec + len, sizeof(fspec) - len, ",snapshot=%llu,maxsnap=%u", (unsigned long long)snap,
				 BTR_OPTS_GET(opts, max_snapshots, 16u));
		if (k < 0 || (size_t)k >= sizeof(fspec) - len || (trigger && (rc = start_arg(trigger, cmd, "trigger", fspec,
											   sizeof(fspec))) < 0)) {
			rc = rc < 0 ? rc : -BTR_ERR_OVERFLOW;
			goto out_x;
		}
	}
	struct rlimit fl;
	if (getrlimit(RLIMIT_FSIZE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY && fl.rlim_cur < QS_SIZE) {
		/* Each process's plugin state is a sparse file of QS_SIZE in
		 * $TMPDIR: below that limit QEMU could not even start. */
		btr_err("%s: the file size limit (ulimit -f: %llu KiB) is below the %llu MiB sparse state file the qemu "
			"backend keeps per process in $TMPDIR; raise it or record with -b step",
			opts->output, (unsigned long long)(fl.rlim_cur >> 10), (unsigned long long)(QS_SIZE >> 20));
		rc = -BTR_ERR_FBIG;
		goto out_x;
	}
	if (opts->ground_truth) {
		/* Every process appends to it; resolve it here so a relative
		 * path means the same thing and an unwritable one fails before
		 * the start. */
		/* 0600 like the trace; a regular file of ours only (never a
		 * FIFO, nor another user's file planted under that name). */
		int fd = btr_outfile_open_inplace(opts->ground_truth, BTR_OUTFILE_PRIVATE);
		if (fd < 0) {
			rc = fd;
			btr_err("%s: %s", opts->ground_truth,
				fd == -BTR_ERR_PERM ? "belongs to another user (not written into)"
				: fd == -BTR_ERR_UNSUPPORTED ? "not a regular file" : btr_errstr(fd));
			goto out_x;
		}
		struct stat gst, rst;
		int same = fstat(fd, &gst) == 0 && realpath(opts->ground_truth, gt) && stat(gt, &rst) == 0 &&
			   rst.st_dev == gst.st_dev && rst.st_ino == gst.st_ino;
		close(fd);
		if (!same) {
			btr_err("%s: %s", opts->ground_truth, "changed while it was opened");
			rc = -BTR_ERR_IO;
			goto out_x;
		}
	}
	if (strchr(plugin, ',') || strchr(gt, ',')) {
		btr_err("paths given to the QEMU plugin must not contain ','");
		rc = -BTR_ERR_INVAL;
		goto out_x;
	}

	/* From here on a SIGINT/SIGTERM/SIGHUP/SIGQUIT never leaves files
	 * behind: before CMD starts and while the trace is assembled it stops
	 * the recorder, which cleans up and says what it kept; while CMD runs
	 * it goes to CMD (on_signal). */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO;   /* no SA_RESTART: the wait loop must see EINTR */
	sigemptyset(&sa.sa_mask);
	got_signal = 0;
	got_user = 0;
	sent_root = 0;
	n_signals = 0;
	stop_signal = 0;
	running = 0;
	child_pid = 0;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
		sigaction(fwd_signals[i], &sa, &old_sig[i]);
	old_sig_saved = 1;

	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .compress = opts->compress };
	if ((rc = btr_capture_writer_new(opts, &wo, &w)) < 0) {
		goto fail;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/btr-record-XXXXXX", tmp && *tmp && !strchr(tmp, ',') ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		rc = btr_err_from_errno(errno);
		btr_err("%s: cannot create a temporary directory: %s", dir, strerror(errno));
		dir[0] = 0;
		goto fail;
	}
	/* The process counter every plugin instance shares (--max-processes). */
	snprintf(pfile, sizeof(pfile), "%s/count", dir);
	/* The plugins map this file and their state files: a page that a
	 * full file system cannot back would be SIGBUS there, so it is
	 * allocated now, and so is room for one process's first state
	 * chunk and trace chunk (a full $TMPDIR is then one clear line). */
	int cfd = open(pfile, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int ferr = cfd < 0 ? errno : posix_fallocate(cfd, 0, (off_t)(4096 + (3u << 20)));

	if (cfd >= 0 && !ferr && ftruncate(cfd, 4096) < 0)
		ferr = errno;
	if (cfd >= 0)
		close(cfd);
	if (ferr) {
		rc = btr_err_from_errno(ferr);
		if (ferr == ENOSPC || ferr == EDQUOT)
			btr_err("%s: %s: btr record keeps each process's trace there while it records; point TMPDIR at "
				"a file system with room", dir, strerror(ferr));
		else
			btr_err("%s: %s", pfile, strerror(ferr));
		goto fail;
	}

	/* --snapshot: a SIGUSR2 to btr asks every thread of every process for
	 * its window (the count page's QC_SNAPREQ, which they watch). */
	uint64_t *cpage = NULL;
	if (snap) {
		int fd = open(pfile, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		void *m = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
		if (fd >= 0)
			close(fd);
		if (m == MAP_FAILED) {
			rc = btr_err_from_errno(errno);
			btr_err("%s: %s", pfile, strerror(errno));
			goto fail;
		}
		cpage = m;
		struct sigaction su;
		memset(&su, 0, sizeof(su));
		su.sa_handler = on_snapreq;   /* no SA_RESTART: the wait loop wakes up */
		sigemptyset(&su.sa_mask);
		snap_req = 0;
		sigaction(SIGUSR2, &su, &old_usr2);
		old_usr2_saved = 1;
	}
	sig_atomic_t snap_seen = 0;

	char parg[6 * PATH_MAX + 160 + sizeof(fspec)];
	/* qemu=: a guest execve starts the same QEMU command again (BTR_QEMU
	 * may be a wrapper); a path with a comma cannot be a plugin argument. */
	int qarg = !strchr(qemu, ',');
	snprintf(parg, sizeof(parg), "%s,dir=%s,retcomp=%s,fork=%s,exec=%s,max=%u%s%s%s%s", plugin, dir,
		 opts->no_retcomp ? "off" : "on", follow_fork ? "on" : "off", follow_exec ? "on" : "off", max_procs,
		 gt[0] ? ",gt=" : "", gt, qarg ? ",qemu=" : "", qarg ? qemu : "");
	if (strlen(parg) + strlen(fspec) < sizeof(parg))
		strcat(parg, fspec);
	args = calloc((size_t)x->argc + 8, sizeof(char *));
	if (!args) {
		rc = -BTR_ERR_NOMEM;
		goto fail;
	}
	size_t k = 0;
	args[k++] = qemu;
	args[k++] = "-plugin";
	args[k++] = parg;
	args[k++] = "-0";
	args[k++] = x->argv[0];
	args[k++] = x->path;
	for (int i = 1; i < x->argc; i++)
		args[k++] = x->argv[i];

	struct sigaction tick, old_tick;
	struct itimerval iv = { { progress_ms / 1000, (progress_ms % 1000) * 1000 },
				{ progress_ms / 1000, (progress_ms % 1000) * 1000 } }, old_iv;
	if (progress) {
		memset(&tick, 0, sizeof(tick));
		tick.sa_handler = on_tick;   /* no SA_RESTART: the wait loop wakes up */
		sigemptyset(&tick.sa_mask);
		sigaction(SIGALRM, &tick, &old_tick);
	}
	watchdog_fd = watchdog_start(dir, qemu, btr_trace_writer_tmp_name(w));
	/* Processes whose parent exits first (double-fork daemons) are
	 * re-parented to us, so we see them end and know their status. */
	int was_subreaper = 0;
	prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	/* A close-on-exec pipe tells the parent whether exec worked. */
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		rc = btr_err_from_errno(errno);
		goto fail_restore;
	}
	/* QEMU linux-user builds the guest's environment by inserting each of
	 * its own variables at the head of a list (util/envlist.c): the guest
	 * would see them in reverse order.  Given reversed, they arrive in the
	 * order CMD would see natively. */
	size_t n_env = 0;
	while (environ[n_env])
		n_env++;
	renv = malloc((n_env + 1) * sizeof(*renv));
	for (size_t i = 0; renv && i < n_env; i++)
		renv[i] = environ[n_env - 1 - i];
	if (renv)
		renv[n_env] = NULL;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	running = 1;
	if (stop_signal) {
		/* Interrupted before CMD could start: nothing ran. */
		running = 0;
		close(pfd[0]);
		close(pfd[1]);
		btr_err("interrupted by SIG%s before %s started: no trace written", sigabbrev_np(stop_signal),
			opts->argv[0]);
		res->signo = stop_signal;
		rc = -BTR_ERR_INTERRUPTED;
		goto fail_quiet;
	}
	pid_t pid = fork();
	if (pid < 0) {
		rc = btr_err_from_errno(errno);
		close(pfd[0]);
		close(pfd[1]);
		goto fail_restore;
	}
	if (pid == 0) {
		for (size_t i = 0; i < BTR_ARRAY_SIZE(fwd_signals); i++)
			sigaction(fwd_signals[i], &old_sig[i], NULL);
		/* The recorder's end (even SIGKILL) ends the traced tree's
		 * root: QEMU must not run on unobserved (docs/record.md). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(pfd[0]);
		/* Under a file size limit (`ulimit -f`) the plugin's working
		 * files can reach it: the write must then fail (EFBIG, said in
		 * one line, OUTPUT.partial kept), not kill QEMU with the
		 * traced program in it. */
		struct rlimit fl;
		if (getrlimit(RLIMIT_FSIZE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY)
			signal(SIGXFSZ, SIG_IGN);
		execve(qemu, args, renv ? renv : environ);
		int e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	child_pid = pid;
	free(renv);
	renv = NULL;
	close(pfd[1]);
	int child_errno = 0;
	ssize_t got;
	do
		got = read(pfd[0], &child_errno, sizeof(child_errno));
	while (got < 0 && errno == EINTR);
	close(pfd[0]);
	if (progress && got <= 0) {
		/* Timers are not inherited across fork: QEMU never sees it. */
		setitimer(ITIMER_REAL, &iv, &old_iv);
		poll_progress(dir, progress, progress_ctx);
	}

	/* Wait until the whole tree has ended: every process we can reap. */
	int root_st = 0, forwarded = 0, killed = 0;
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p > 0) {
			struct proc *pr = ptab_get(&tab, (uint32_t)p);
			if (pr) {
				pr->waited = 1;
				pr->wst = st;
			}
			if (p == pid) {
				root_st = st;
				child_pid = 0;
			}
			continue;
		}
		if (errno == EINTR) {
			if (progress)
				poll_progress(dir, progress, progress_ctx);
			if (cpage && snap_req != snap_seen) {
				snap_seen = snap_req;
				__atomic_add_fetch(&cpage[QC_SNAPREQ], 1, __ATOMIC_SEQ_CST);
			}
			if (got_signal && forwarded != got_signal) {
				forwarded = got_signal;
				/* on_signal passed a kill to CMD itself unless it
				 * came before CMD's pid was known */
				if (got_user && !sent_root)
					kill(pid, got_signal);
				forward_signal(dir, qemu, got_signal, got_user, got_user ? pid : 0);
			}
			if (n_signals >= 2 && !killed) {
				/* A second Ctrl-C: what ignores the first (a shell's
				 * background jobs ignore SIGINT) ends now; the trace
				 * keeps everything up to there. */
				killed = 1;
				forward_signal(dir, qemu, SIGKILL, 1, 0);
			}
			continue;
		}
		break;   /* ECHILD: nothing left */
	}
	child_pid = 0;
	running = 0;   /* a signal from now on stops the assembly */
	if (cpage)
		munmap(cpage, 4096);
	cpage = NULL;
	prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
	if (progress) {
		if (got <= 0)
			setitimer(ITIMER_REAL, &old_iv, NULL);
		sigaction(SIGALRM, &old_tick, NULL);
	}
	res->interrupted = got_signal != 0;
	if (got > 0) {
		btr_err("%s: cannot execute: %s", qemu, strerror(child_errno));
		rc = -BTR_ERR_CHILD;
		goto fail;
	}

	res->exited = WIFEXITED(root_st);
	res->code = WIFEXITED(root_st) ? WEXITSTATUS(root_st) : 0;
	res->signo = WIFSIGNALED(root_st) ? WTERMSIG(root_st) : 0;

	struct btr_record rec = { .type = BTR_REC_MACHINE };
	struct btr_rec_machine *m = &rec.u.machine;
	snprintf(m->backend, sizeof(m->backend), "qemu");
	snprintf(m->cpu_vendor, sizeof(m->cpu_vendor), "qemu-tcg");
	m->flags = BTR_MACHINE_USER_ONLY | (opts->no_retcomp ? 0 : BTR_MACHINE_PT_RETCOMP) |
		   (ipf ? BTR_MACHINE_IP_FILTER : 0);
	m->start_time_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	if ((rc = btr_trace_write(w, &rec)) < 0)
		goto fail;
	/* The --ip-filter ranges, for readers (report, cov): the plugin's
	 * ",filter=0xLO-0xHI@FILE" arguments (filter_args). */
	for (const char *q = fspec; (q = strstr(q, ",filter=")) != NULL;) {
		unsigned long long lo, hi;
		int at = 0;
		q += 8;
		if (sscanf(q, "0x%llx-0x%llx@%n", &lo, &hi, &at) != 2 || !at || hi < lo)
			continue;
		char path[PATH_MAX];
		size_t n = strcspn(q + at, ",");
		snprintf(path, sizeof(path), "%.*s", (int)n, q + at);
		struct btr_record fr = { .type = BTR_REC_IP_FILTER };
		fr.u.module.pgoff = lo;
		fr.u.module.size = hi - lo + 1;
		fr.u.module.path = path;
		if ((rc = btr_trace_write(w, &fr)) < 0)
			goto fail;
	}

	if ((rc = list_plugin_files(dir, &files, &n_files)) < 0)
		goto fail;
	if (!n_files) {
		btr_err("%s did not run the plugin %s (exit status %d)", qemu, plugin,
			res->exited ? res->code : 128 + res->signo);
		rc = -BTR_ERR_CHILD;
		goto fail;
	}
	size_t copied = 0;   /* files written whole */
	for (size_t i = 0; i < n_files && !stop_signal; i++) {
		struct pfile *f = &files[i];
		struct proc *pr = ptab_get(&tab, f->pid);
		if (!pr) {
			rc = -BTR_ERR_NOMEM;
			goto fail;
		}
		if (!pr->listed && (rc = write_jit_symbols(w, dir, f->pid)) < 0) {
			rc = btr_capture_output_failed(w, opts->output, rc);
			w = NULL;
			goto fail;
		}
		pr->listed = 1;
		/* The last program of this pid ends the process; an earlier
		 * one ended in its execve (a system call, no signal). */
		int last = 1;
		for (size_t j = i + 1; j < n_files; j++)
			last &= files[j].pid != f->pid;
		struct plugin_exit px = { 0 };
		snprintf(pfile, sizeof(pfile), "%s/%s", dir, f->name);
		if ((rc = copy_plugin_trace(pfile, w, res, f->pid, &tab, &px)) == -BTR_ERR_INTERRUPTED)
			break;
		if (rc < 0) {
			if (btr_trace_writer_error(w) < 0) {
				rc = btr_capture_output_failed(w, opts->output, rc);
				w = NULL;
			} else {
				btr_err("%s: %s", pfile, btr_errstr(rc));
			}
			goto fail;
		}
		pr = ptab_get(&tab, f->pid);   /* the table may have moved */
		if (!px.have) {
			int signo = !last ? 0 : pr->waited ? (WIFSIGNALED(pr->wst) ? WTERMSIG(pr->wst) : 0)
					      : pr->observed ? pr->osigno : 0;
			snprintf(pfile, sizeof(pfile), "%s/s%s", dir, f->stem);
			if ((rc = salvage_state(pfile, w, res, signo, &px, gt[0] ? gt : NULL)) < 0) {
				rc = btr_capture_output_failed(w, opts->output, rc);
				w = NULL;
				goto fail;
			}
			px.code = -1;
		}
		if (last)
			pr->px = px;
		/* Its plugin's writes failed: the process ran on untraced. */
		size_t nl = strlen(f->name);
		if (nl > 8 && !strcmp(f->name + nl - 8, ".partial") &&
		    (rc = write_lost(w, f->pid, 0, plugin_write_error(dir))) < 0) {
			rc = btr_capture_output_failed(w, opts->output, rc);
			w = NULL;
			goto fail;
		}
		copied = i + 1;
		if (progress) {
			struct btr_capture_progress pp = { .writing = 1, .processes = i + 1, .processes_total = n_files,
							   .bytes = res->pt_bytes };
			progress(progress_ctx, &pp);
		}
	}
	if (stop_signal)
		return assembly_stopped(w, opts->output, dir, files, copied, n_files, &tab, (uint32_t)pid, res, x, args);
	if ((rc = write_missing(w, dir, files, n_files, plugin_write_error(dir))) < 0 ||
	    (rc = write_exits(w, &tab, (uint32_t)pid, res)) < 0 || (rc = btr_trace_flush(w)) < 0) {
		rc = btr_capture_output_failed(w, opts->output, rc);
		w = NULL;
		goto fail;
	}
	uint64_t cv[QC_PTRACE + 1] = { 0 };
	size_t cvn = read_count_page(dir, cv, sizeof(cv));
	if (opts->ground_truth && cvn == sizeof(cv) && cv[QC_GTERR])
		btr_warn("%s: cannot write the ground truth (%s): the rest is left out", opts->ground_truth,
			 strerror((int)cv[QC_GTERR]));
	if (cvn == sizeof(cv) && cv[QC_PTRACE])
		btr_warn("process %llu called ptrace, which QEMU does not emulate (\"Function not implemented\"): a "
			 "debugger or tracer (strace, gdb) cannot run under the qemu backend; run it outside btr record",
			 (unsigned long long)cv[QC_PTRACE]);
	/* A plugin whose writes failed ($TMPDIR full) left its trace cut:
	 * the result is incomplete, so it goes to OUTPUT.partial. */
	int werr = plugin_write_error(dir);
	char kept[PATH_MAX];
	snprintf(kept, sizeof(kept), "%s", opts->output);
	if (werr < 0 && !btr_trace_writer_streaming(w)) {
		if ((size_t)snprintf(kept, sizeof(kept), "%s.partial", opts->output) >= sizeof(kept))
			rc = -BTR_ERR_INVAL;
		else
			rc = btr_trace_writer_retarget(w, kept);
		if (rc < 0) {
			btr_err("%s: %s", opts->output, btr_errstr(rc));
			goto fail;
		}
	}
	rc = btr_trace_writer_close(w);
	w = NULL;
	if (rc < 0) {
		btr_err("%s: cannot write: %s", werr < 0 ? kept : opts->output, btr_errstr(rc));
		goto fail;
	}
	if (werr < 0) {
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		btr_err("%s: %s while recording (the plugin keeps each process's trace there): the traces are cut; what "
			"was recorded is in %s", dir, btr_errstr(werr), kept);
		if (slash)
			*slash = '/';
		rc = werr;
		goto fail;
	}
	restore_signals();
	remove_dir(dir);
	watchdog_stop();
	free(files);
	free(tab.p);
	free(args);
	qx_free(x);
	free(x);
	return 0;

fail_restore:
	btr_err("cannot start %s: %s", qemu, btr_errstr(rc));
fail_quiet:
	prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
	if (progress)
		sigaction(SIGALRM, &old_tick, NULL);
fail:
	restore_signals();
	free(renv);
	free(args);
	free(files);
	free(tab.p);
	if (w)
		btr_trace_writer_abort(w);
	if (dir[0])
		remove_dir(dir);
	watchdog_stop();
out_x:
	qx_free(x);
	free(x);
	return rc;
}
