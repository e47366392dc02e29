/* step_inproc.c - `btr record -b step --inproc`: starts the program with
 * the agent btr-step-agent.so preloaded (agents/step/step_agent.c, agent/step_agent.h) and
 * turns the IPs it leaves in the shared ring into BTS records with the
 * same per-step code as the ptrace path (step.c). */
#include "btr/capture.h"
#include "btr/error.h"
#include "internal.h"
#include "agent/step_agent.h"
#include "step_priv.h"
#include "output.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- --inproc: the preloaded agent (agents/step/step_agent.c) ---- */

int step_find_agent(char *buf, size_t size)
{
	const char *env = getenv("BTR_STEP_AGENT");
	if (env && *env) {
		snprintf(buf, size, "%s", env);
		return access(buf, R_OK);
	}
	static const char *const rel[] = { "/btr-step-agent.so", "/../lib/btr/btr-step-agent.so" };
	return btr__find_beside_exe(rel, BTR_ARRAY_SIZE(rel), R_OK, buf, size) == 0 ? 0 : -1;
}

/* A program without PT_INTERP is static: LD_PRELOAD cannot reach it. */
int step_is_static(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	int interp = 0;
	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph))
				break;
			interp |= ph.p_type == PT_INTERP;
		}
	}
	close(fd);
	return !interp;
}

static void drain(struct rec *r, struct thr *t, struct sa_hdr *h)
{
	uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE), tail = h->tail;
	for (; tail != head; tail++) {
		step_account(r, t, h->ip[tail % SA_CAP]);
		r->res->steps++;
	}
	__atomic_store_n(&h->tail, tail, __ATOMIC_RELEASE);
}

int step_run_inproc(struct rec *r, const char *cmd, char *const *argv, const char *agent)
{
	char shm[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	snprintf(shm, sizeof(shm), "%s/btr-step-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && *tmp ? tmp : "/tmp");
	int fd = mkstemp(shm);
	if (fd < 0)
		return btr_err_from_errno(errno);
	struct sa_hdr *h = NULL;
	if (ftruncate(fd, sizeof(*h)) == 0)
		h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (!h || h == MAP_FAILED) {
		unlink(shm);
		return -BTR_ERR_NOMEM;
	}
	h->magic = SA_MAGIC;
	char pre[PATH_MAX + 4096];
	const char *old = getenv("LD_PRELOAD");
	snprintf(pre, sizeof(pre), "%s%s%s", agent, old && *old ? ":" : "", old && *old ? old : "");
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		munmap(h, sizeof(*h));
		unlink(shm);
		return btr_err_from_errno(e);
	}
	if (pid == 0) {
		setenv("LD_PRELOAD", pre, 1);
		setenv(SA_ENV, shm, 1);
		execv(cmd, argv);
		_exit(127);
	}
	btr__step_child = pid;
	r->root = pid;
	int rc = 0;
	struct proc *p = step_proc_new(r, pid);
	struct thr *t = p ? step_thr_new(r, pid, p, 0) : NULL;
	if (!t) {
		kill(pid, SIGKILL);
		rc = -BTR_ERR_NOMEM;
	} else {
		step_write_process(r, (uint32_t)pid, 0, BTR_PROC_START, cmd, argv);
		t->fresh = 0;
	}
	int st = 0, scanned = 0, said = 0;
	while (rc == 0) {
		uint64_t before = h->tail;
		if (!scanned && __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != SA_INIT) {
			/* The agent runs: the program and its libraries are mapped. */
			step_proc_reset(p);
			step_scan_maps(r, p);
			scanned = 1;
		}
		if (scanned)
			drain(r, t, h);
		if (h->state == SA_DEFEATED && !said) {
			btr_warn("--inproc: %s; tracing stopped there (record without --inproc to trace it with ptrace)",
				 h->why);
			struct btr_record rec = { .type = BTR_REC_PROCESS };
			rec.u.process.pid = (uint32_t)pid;
			rec.u.process.event = BTR_PROC_UNTRACED;
			rec.u.process.reason = -BTR_ERR_UNSUPPORTED;
			rec.u.process.path = cmd;
			rec.u.process.detail = h->why;
			step_wr(r, &rec);
			said = 1;
		}
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			if (scanned)
				drain(r, t, h);
			break;
		}
		if (w < 0 && errno != EINTR) {
			rc = btr_err_from_errno(errno);
			break;
		}
		if (h->tail == before) {
			struct timespec ts = { 0, 2000000 };   /* the ring holds 1M IPs: no hurry */
			nanosleep(&ts, NULL);
		}
	}
	if (rc == 0) {
		if (!h->head && !said)
			btr_warn("--inproc: the agent did not start in %s (nothing traced)", cmd);
		r->res->inproc = 1;
		if (h->untraced_threads)
			btr_warn("--inproc: %u trap(s) in other threads: the agent traces only the main thread",
				 h->untraced_threads);
		if (WIFSIGNALED(st) && t->have_prev) {
			t->last_sig = WTERMSIG(st);
			t->last_sig_ip = t->prev_ip;   /* the instruction it was at */
		}
		step_exit_status(r, t, st);
	}
	btr__step_child = 0;
	munmap(h, sizeof(*h));
	unlink(shm);
	return rc;
}

