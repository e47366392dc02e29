/* step.c - the "step" capture backend: trap-flag tracing with ptrace.
 *
 * Every traced thread is single-stepped (PTRACE_SINGLESTEP sets TF; the
 * CPU traps after each instruction).  Per trap the recorder does as little
 * as it can: one waitpid, one PTRACE_PEEKUSER of the IP (one word instead
 * of PTRACE_GETREGS's 27; measured the same within noise here,
 * bench/bench_step_trap.c), and a look-up of the previous
 * instruction in a per-process decoded-instruction cache (the code bytes
 * are read once per page with pread on /proc/PID/mem, never per step).  A
 * taken branch becomes one 24-byte BTS record {from, to, flags 0} exactly
 * as the DS area would hold it, and the number of instructions since the
 * previous branch goes to the BTS_INSNS side stream (btr/trace.h); both
 * are buffered per thread and written in batches.
 *
 * What is written for a system call: `syscall` is stepped over (the trap
 * comes after the kernel returned, at the next instruction) and written as
 * {from = the syscall instruction, to = 0}: the transfer into the kernel,
 * whose target user-only tracing does not see - the same branch the PT
 * decoder reports for the TIP.PGD of a user-only trace.  The return to
 * user space is not a branch.  A signal handler entry is {from = the
 * interrupted (or faulting) instruction, to = the handler}; the decoder
 * classifies it as asynchronous.  rt_sigreturn is a syscall record; the
 * thread then resumes wherever the frame says, without a record.
 *
 * Region tracing (--start/--stop) plants int3 at the start address and
 * lets the threads run with PTRACE_CONT; a thread that hits it is stepped
 * until it reaches the stop address (or, without --stop, returns from the
 * start function), then runs free again; while one thread steps over the
 * lifted breakpoint, the process's free-running threads are parked.  The
 * flight recorder (--ring N)
 * keeps the last N branches per thread in a ring (the LBR stack with its
 * top-of-stack index), filtered by LBR_SELECT class, and writes it when
 * the thread ends or the process dies.
 *
 * Why ptrace and not BTF block stepping: KVM does not pass
 * IA32_DEBUGCTL.BTF through, so PTRACE_SINGLEBLOCK single-steps (or does
 * nothing useful); btr_step_probe_btf() (probe.c) checks it and the
 * recorder uses block stepping only where it traps on branches alone.
 * --inproc (step_inproc.c, agents/step/step_agent.c) replaces ptrace by an agent
 * inside the program.
 *
 * Files: step.c (this one: ptrace, the loop, btr_step_record) and
 * step_inproc.c (the agent's ring) both drive step_core.c (processes,
 * code cache, threads, records); the core calls neither.
 */
#include "btr/bts.h"
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/trace.h"
#include "internal.h"
#include "agent/procmaps.h"
#include "output.h"

#include <ctype.h>
#include <elf.h>
#include <sys/mman.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <dirent.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_SINGLEBLOCK
#define PTRACE_SINGLEBLOCK 33
#endif

#include "step_priv.h"

/* ---- registers ---- */

static uint64_t get_ip(pid_t tid)
{
	errno = 0;
	long v = ptrace(PTRACE_PEEKUSER, tid, (void *)offsetof(struct user_regs_struct, rip), NULL);
	return errno ? 0 : (uint64_t)v;
}

static uint64_t get_reg(pid_t tid, size_t off)
{
	errno = 0;
	long v = ptrace(PTRACE_PEEKUSER, tid, (void *)off, NULL);
	return errno ? 0 : (uint64_t)v;
}

/* ---- breakpoints ---- */

static void bp_plant(struct proc *p, int i)
{
	step_bp_plant(p, &p->bp[i]);
}

static void bp_remove(struct proc *p, int i)
{
	step_bp_remove(p, &p->bp[i]);
}

/* ---- system calls ---- */

/* @t just stepped over a system call: a munmap that removed whole modules
 * (dlclose) gets their MODULE_UNLOAD records and empties the code caches, after the data of the process's
 * threads so far (readers apply records in file order; in ring mode the
 * data comes at the end and readers keep the code until it is replaced). */
static void after_syscall(struct rec *r, struct thr *t)
{
	if (get_reg(t->tid, offsetof(struct user_regs_struct, orig_rax)) != SYS_munmap ||
	    get_reg(t->tid, offsetof(struct user_regs_struct, rax)) != 0)
		return;
	uint64_t a = get_reg(t->tid, offsetof(struct user_regs_struct, rdi));
	uint64_t n = get_reg(t->tid, offsetof(struct user_regs_struct, rsi));
	struct proc *p = t->p;
	int flushed = 0;
	for (size_t i = 0; i < p->nmods;) {
		struct mod *m = &p->mods[i];
		if (m->start < a || m->end > a + n) {
			i++;
			continue;
		}
		if (!flushed && !r->o->ring)
			step_flush_proc(r, p);
		flushed = 1;
		struct btr_record rec = { .type = BTR_REC_MODULE_UNLOAD };
		rec.u.module.pid = (uint32_t)p->pid;
		rec.u.module.start = m->start;
		rec.u.module.size = m->end - m->start;
		rec.u.module.path = "";
		step_wr(r, &rec);
		*m = p->mods[--p->nmods];
	}
	if (flushed) {
		/* other code may come to these addresses: forget the bytes
		 * and instructions read from them */
		memset(p->pages, 0, NPAGES * sizeof(*p->pages));
		memset(p->ic, 0, NICACHE * sizeof(*p->ic));
	}
}

/* ---- resuming ---- */

/* Stepping over the start breakpoint means lifting it for one step.  So
 * that no other thread runs through the start meanwhile untraced, the
 * threads of the process that run free are stopped first ("parked") and
 * resumed when the breakpoint is back (unpark). */
static void park_others(struct rec *r, struct thr *t)
{
	for (struct thr *o = r->thrs; o; o = o->next) {
		if (o == t || o->p != t->p || o->stepping || o->parked || o->fresh || o->over)
			continue;
		o->parked = 1;
		o->park_st_valid = 0;
		r->parked_n++;
		syscall(SYS_tgkill, o->p->pid, o->tid, SIGSTOP);
		int st;
		pid_t w;
		do
			w = waitpid(o->tid, &st, __WALL);
		while (w < 0 && errno == EINTR);
		if (w != o->tid)
			continue;
		if (WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP && !(st >> 16))
			continue;   /* our stop */
		/* It stopped for something else first: replay that later; our
		 * SIGSTOP then comes after it is resumed. */
		o->park_st = st;
		o->park_st_valid = 1;
		o->swallow_stop = WIFSTOPPED(st);
	}
}

static void on_stop(struct rec *r, pid_t tid, int st);

/* Resumes the parked threads.  A replayed stop can start another step over
 * the start breakpoint (a parked thread that had hit it): the breakpoint is
 * lifted again, and the threads still parked must stay so until that step is
 * done (it unparks them in turn).  A replayed stop can also free threads, so
 * the list is searched again from its head each time. */
static void unpark(struct rec *r)
{
	for (;;) {
		if (r->over_n)
			return;
		struct thr *o = r->thrs;
		while (o && !o->parked)
			o = o->next;
		if (!o)
			return;
		o->parked = 0;
		r->parked_n--;
		if (o->park_st_valid) {
			o->park_st_valid = 0;
			on_stop(r, o->tid, o->park_st);
		} else {
			ptrace(PTRACE_CONT, o->tid, NULL, NULL);
		}
	}
}

static void resume(struct rec *r, struct thr *t, int sig)
{
	/* Outside the --ip-filter ranges a thread runs free but stops at
	 * system calls: an mmap may bring a range (step_filter.c). */
	long req = t->stepping ? (r->block ? PTRACE_SINGLEBLOCK : PTRACE_SINGLESTEP) : r->ipf ? PTRACE_SYSCALL : PTRACE_CONT;
	struct bp *b;
	if (t->stepping && (r->region || r->ipf) && t->have_prev && (b = step_bp_find(t->p, t->prev_ip)) != NULL) {
		/* Step over our own breakpoint with the program's byte. */
		if (b->planted) {
			park_others(r, t);
			step_bp_remove(t->p, b);
		}
		if (!b->planted) {
			t->over = 1;
			r->over_n++;
			ptrace(PTRACE_SINGLESTEP, t->tid, NULL, (void *)(long)sig);
			r->res->steps++;
			return;   /* replanted when every such step is done (on_stop) */
		}
	}
	if (!t->stepping && r->over_n && !t->parked) {
		/* The start breakpoint is lifted: a thread must not run free
		 * now (a new thread's first stop, a signal); it waits. */
		t->parked = 1;
		t->park_st_valid = 0;
		r->parked_n++;
		if (sig) {
			t->park_st_valid = 1;   /* replayed: delivers @sig then */
			t->park_st = (sig << 8) | 0x7f;
		}
		return;
	}
	if (t->stepping)
		r->res->steps++;
	ptrace(req, t->tid, NULL, (void *)(long)sig);
}

static void replant(struct proc *p)
{
	for (int i = 0; i < MAX_BP; i++)
		if (p->bp[i].addr && !p->bp[i].planted)
			bp_plant(p, i);
	for (size_t i = 0; i < p->nfbp; i++)
		step_bp_plant(p, &p->fbp[i]);
}

static int sig_caught(pid_t tid, int sig)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "re");
	unsigned long long mask = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigCgt:", 7)) {
			mask = strtoull(line + 7, NULL, 16);
			break;
		}
	fclose(f);
	return sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
}

/* ---- region ---- */

static int resolve_addr(struct rec *r, struct proc *p, const char *what, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(what, &end, 0);
	if (!errno && !*end && end != what) {
		*out = v;
		return 0;
	}
	/* A symbol of the program or of a library mapped now. */
	struct btr_image *img;
	if (btr_image_new(&img) < 0)
		return -BTR_ERR_NOMEM;
	char line[4096 + 128];
	FILE *f = btr_procmaps_open(p->pid);
	struct btr_procmap m;
	while (f && btr_procmaps_next(f, line, sizeof(line), &m)) {
		uint64_t bias;
		if (m.perm[2] == 'x' && m.file[0] == '/' && btr_elf_load_bias(m.file, m.start, m.off, &bias) == 0)
			btr_image_add_elf(img, m.file, bias, 0);
	}
	if (f)
		fclose(f);
	struct btr_symbol sym;
	int rc = btr_image_lookup(img, what, &sym);
	if (rc == 0)
		*out = sym.addr;
	btr_image_free(img);
	if (rc < 0)
		btr_err("%s: no such function in the program or its loaded libraries", what);
	(void)r;
	return rc;
}

/* A thread stopped at a SIGTRAP while running free: our breakpoint? */
static int region_enter(struct rec *r, struct thr *t)
{
	uint64_t ip = get_ip(t->tid);
	struct bp *b = &t->p->bp[0];
	if (!b->planted || ip != b->addr + 1)
		return 0;
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
		return 0;
	regs.rip = b->addr;
	ptrace(PTRACE_SETREGS, t->tid, NULL, &regs);
	t->stepping = 1;
	t->have_prev = 1;
	t->prev_ip = b->addr;
	t->ninsn = 0;
	if (!r->stop_addr) {
		/* Without --stop: until the start function returns. */
		errno = 0;
		long ra = ptrace(PTRACE_PEEKDATA, t->tid, (void *)regs.rsp, NULL);
		t->ret_addr = errno ? 0 : (uint64_t)ra;
		t->entry_sp = regs.rsp;
	}
	return 1;
}

static int region_leave(struct rec *r, struct thr *t, uint64_t ip)
{
	if (r->stop_addr ? ip != r->stop_addr
			 : (ip != t->ret_addr || get_reg(t->tid, offsetof(struct user_regs_struct, rsp)) <= t->entry_sp))
		return 0;
	t->stepping = 0;
	t->have_prev = 0;
	t->ninsn = 0;
	return 1;
}

/* ---- --ip-filter (step_filter.c has the ranges and breakpoints) ---- */

/* @t (not stepping) is at @ip: inside a range, it is stepped from here. */
static void filter_start_at(struct rec *r, struct thr *t, uint64_t ip)
{
	if (t->stepping || !step_filter_inside(t->p, ip))
		return;
	t->stepping = 1;
	t->have_prev = 0;
	t->ninsn = 0;
	step_marker(r, t, ip, BTR_BTS_SW_PGE);
}

/* A thread running free stopped at a SIGTRAP: one of the filter's
 * breakpoints (always inside a range)?  Then it is stepped from there. */
static int filter_enter(struct rec *r, struct thr *t)
{
	uint64_t ip = get_ip(t->tid);
	struct bp *b = ip ? step_bp_find(t->p, ip - 1) : NULL;
	if (!b || !b->planted || b == &t->p->bp[0] || b == &t->p->bp[1])
		return 0;
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
		return 0;
	regs.rip = ip - 1;
	ptrace(PTRACE_SETREGS, t->tid, NULL, &regs);
	r->res->stops++;
	filter_start_at(r, t, ip - 1);
	t->have_prev = 1;
	t->prev_ip = ip - 1;
	return 1;
}

/* The step of @t from @from (an instruction of @kind and @len; @kind
 * BTR_KIND_ASYNC: a signal handler entered, resuming at @resume later)
 * left the ranges for @to: a PGD marker, breakpoints where the flow will
 * come back, and the thread runs free. */
static void filter_leave(struct rec *r, struct thr *t, unsigned kind, unsigned len, uint64_t from, uint64_t to,
			 uint64_t resume_at)
{
	struct proc *p = t->p;
	if (kind == BTR_KIND_CALL || kind == BTR_KIND_CALL_IND) {
		step_filter_bp_add(p, from + len);
	} else if (kind == BTR_KIND_ASYNC) {
		step_filter_bp_add(p, resume_at);
	} else if (kind != BTR_KIND_RET) {
		/* A jump out (a tail call): its return comes to the return
		 * address on the stack, if that is inside. */
		errno = 0;
		long ra = ptrace(PTRACE_PEEKDATA, t->tid,
				 (void *)get_reg(t->tid, offsetof(struct user_regs_struct, rsp)), NULL);
		if (!errno && step_filter_inside(p, (uint64_t)ra) && step_filter_is_return_addr(p, (uint64_t)ra))
			step_filter_bp_add(p, (uint64_t)ra);
	}
	step_marker(r, t, to, BTR_BTS_SW_PGD);
	t->stepping = 0;
	t->have_prev = 0;
	t->ninsn = 0;
}

/* A syscall stop of a thread running free: after an mmap or mprotect, the
 * new code's modules and ranges; after a munmap, the ranges gone. */
static void filter_syscall(struct rec *r, struct thr *t)
{
	long nr = (long)get_reg(t->tid, offsetof(struct user_regs_struct, orig_rax));
	long rax = (long)get_reg(t->tid, offsetof(struct user_regs_struct, rax));
	r->res->stops++;
	if (rax < 0 && rax > -4096)
		return;   /* the entry (-ENOSYS), or a failure */
	struct proc *p = t->p;
	if (nr == SYS_munmap) {
		uint64_t a = get_reg(t->tid, offsetof(struct user_regs_struct, rdi));
		uint64_t n = get_reg(t->tid, offsetof(struct user_regs_struct, rsi));
		size_t k = 0;
		for (size_t i = 0; i < p->nfr; i++)
			if (p->fr[i].lo < a || p->fr[i].hi >= a + n)
				p->fr[k++] = p->fr[i];
		p->nfr = k;
		k = 0;
		for (size_t i = 0; i < p->nfbp; i++)
			if (p->fbp[i].addr < a || p->fbp[i].addr >= a + n)
				p->fbp[k++] = p->fbp[i];
		p->nfbp = k;
	} else if (nr == SYS_mmap || nr == SYS_mprotect) {
		step_scan_maps(r, p);
		step_filter_scan(r, p);
	}
}

/* ---- the loop ---- */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	got_signal = sig;
	/* As for qemu: forward what was sent to the recorder alone (not for
	 * an attached process: there it means "detach"). */
	if (btr__step_child > 0 && si && si->si_code == SI_USER && si->si_pid != btr__step_child)
		kill(btr__step_child, sig);
}

static void on_alarm(int sig)
{
	(void)sig;
	got_signal = SIGALRM;
}

/* A process created by fork/vfork: a copy of its parent's memory,
 * modules and breakpoints. */
static struct proc *child_proc(struct rec *r, pid_t pid, const struct proc *parent)
{
	struct proc *np = step_proc_new(r, pid);
	if (!np)
		return NULL;
	char path[PATH_MAX];
	step_exe_path(pid, path, sizeof(path));
	step_write_process(r, (uint32_t)pid, parent ? (uint32_t)parent->pid : 0, BTR_PROC_START, path, NULL);
	if (parent) {
		np->bp[0] = parent->bp[0];
		np->bp[1] = parent->bp[1];
		if (step_filter_fork(np, parent) < 0)
			return NULL;
	}
	step_scan_maps(r, np);
	return np;
}

static void on_event(struct rec *r, struct thr *t, int ev)
{
	unsigned long msg = 0;
	ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg);
	if (ev == PTRACE_EVENT_CLONE || ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) {
		pid_t nid = (pid_t)msg;
		struct proc *np = t->p;
		if (ev != PTRACE_EVENT_CLONE && (np = step_proc_find(r, nid)) == NULL &&
		    !(np = child_proc(r, nid, t->p))) {
			r->err = -BTR_ERR_NOMEM;
			return;
		}
		struct thr *nt = step_thr_find(r, nid);
		if (!nt && !step_thr_new(r, nid, np, t->tid))
			r->err = -BTR_ERR_NOMEM;
		else if (nt)
			nt->p = np;
	} else if (ev == PTRACE_EVENT_EXEC) {
		struct proc *p = t->p;
		/* The old image's branches go out before the EXEC record. */
		if (t->have_prev && t->stepping) {
			const struct icache_ent *e = step_insn_at(p, t->prev_ip);
			if (e && e->kind == BTR_KIND_SYSCALL) {
				t->ninsn++;
				step_branch(r, t, t->prev_ip, 0, e->kind);
			}
		}
		if (r->ipf && t->stepping) {
			step_marker(r, t, 0, BTR_BTS_SW_PGD);
			t->stepping = 0;
		}
		/* Every process's, in fact: readers that keep one image for
		 * all processes decode what came before with the old one. */
		for (struct thr *o = r->thrs; o; o = o->next)
			step_flush_thr(r, o);
		if ((pid_t)msg != t->tid) {
			/* A non-leader thread exec'd: it now has the process id. */
			struct thr *old = step_thr_find(r, (pid_t)msg);
			if (old && old != t)
				step_thr_gone(r, old, -1);
			t->tid = (pid_t)msg;
		}
		char path[PATH_MAX];
		step_exe_path(p->pid, path, sizeof(path));
		step_write_process(r, (uint32_t)p->pid, 0, BTR_PROC_EXEC, path, NULL);
		struct btr_record rec = { .type = BTR_REC_EXEC };
		rec.u.module.pid = (uint32_t)p->pid;
		rec.u.module.path = path;
		step_wr(r, &rec);
		step_proc_reset(p);
		for (int i = 0; i < MAX_BP; i++)
			p->bp[i].planted = 0;   /* the new image has none */
		step_scan_maps(r, p);
		t->have_prev = 0;
		t->ninsn = 0;
		if (r->region) {
			/* Symbols name the new program's functions: resolve again. */
			t->stepping = 0;
			if (r->o->start && resolve_addr(r, p, r->o->start, &p->bp[0].addr) == 0)
				bp_plant(p, 0);
		}
		if (r->ipf) {
			step_filter_reset(p);
			step_filter_scan(r, p);
			filter_start_at(r, t, get_ip(t->tid));
		}
	}
}

/* Handles one wait status.  Returns 1 while the loop goes on. */
static void on_stop(struct rec *r, pid_t tid, int st)
{
	struct thr *t = step_thr_find(r, tid);
	if (!t) {
		/* A new thread or process whose parent's event we have not seen
		 * yet: its process is its thread group. */
		char path[64], line[128];
		pid_t tgid = tid, ppid = 0;
		snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
		FILE *f = fopen(path, "re");
		while (f && fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Tgid:", 5))
				tgid = (pid_t)atoi(line + 5);
			if (!strncmp(line, "PPid:", 5))
				ppid = (pid_t)atoi(line + 5);
		}
		if (f)
			fclose(f);
		struct proc *p = step_proc_find(r, tgid);
		if (!p) {
			if (!(p = child_proc(r, tgid, step_proc_find(r, ppid)))) {
				r->err = -BTR_ERR_NOMEM;
				return;
			}
		}
		if (!(t = step_thr_new(r, tid, p, 0))) {
			r->err = -BTR_ERR_NOMEM;
			return;
		}
	}
	if (t->over) {
		t->over = 0;
		if (--r->over_n == 0) {
			replant(t->p);
			unpark(r);
		}
	}
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		step_exit_status(r, t, st);
		return;
	}
	if (!WIFSTOPPED(st))
		return;
	int sig = WSTOPSIG(st), ev = st >> 16;
	if (t->swallow_stop && sig == SIGSTOP && !ev) {
		t->swallow_stop = 0;
		resume(r, t, 0);
		return;
	}
	if (ev) {
		on_event(r, t, ev);
		resume(r, t, 0);
		return;
	}
	if (sig == (SIGTRAP | 0x80)) {
		/* A syscall stop (PTRACE_O_TRACESYSGOOD): only --ip-filter's
		 * threads running free make them. */
		if (r->ipf && !t->stepping)
			filter_syscall(r, t);
		resume(r, t, 0);
		return;
	}
	if (t->fresh && sig == SIGSTOP) {
		/* The first stop of an auto-attached thread. */
		t->fresh = 0;
		if (r->ipf)
			filter_start_at(r, t, get_ip(tid));
		if (t->stepping)
			step_account(r, t, get_ip(tid));
		resume(r, t, 0);
		return;
	}
	t->fresh = 0;
	if (sig == SIGTRAP && t->stepping && t->have_prev && !t->sig_entry) {
		/* After a system call the SIGTRAP may be the program's own
		 * (raise, kill): a user-sent signal, not our trap. */
		const struct icache_ent *e = step_insn_at(t->p, t->prev_ip);
		siginfo_t si;
		if (e && e->kind == BTR_KIND_SYSCALL && ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0 && si.si_code <= 0)
			goto deliver;
	}
	if (sig == SIGTRAP) {
		if (!t->stepping) {
			if (region_enter(r, t) || (r->ipf && filter_enter(r, t))) {
				resume(r, t, 0);
				return;
			}
			/* The program's own SIGTRAP. */
			resume(r, t, SIGTRAP);
			return;
		}
		uint64_t ip = get_ip(tid);
		if (t->sig_entry) {
			/* The kernel stops at the handler's first instruction. */
			t->sig_entry = 0;
			step_branch(r, t, t->sig_from, ip, BTR_KIND_ASYNC);
			t->prev_ip = ip;
			t->have_prev = 1;
			if (r->ipf && !step_filter_inside(t->p, ip)) {
				filter_leave(r, t, BTR_KIND_ASYNC, 0, t->sig_from, ip, t->sig_from);
				resume(r, t, 0);
				return;
			}
		} else {
			const struct icache_ent *e = t->have_prev ? step_insn_at(t->p, t->prev_ip) : NULL;
			if (e && e->kind == BTR_KIND_INT3 &&
			    !(r->region && t->p->bp[0].addr == t->prev_ip)) {
				/* The program's own int3: it executed; deliver it. */
				step_account(r, t, ip);
				resume(r, t, SIGTRAP);
				return;
			}
			unsigned kind = e ? e->kind : BTR_KIND_NONE, len = e ? e->len : 0;
			uint64_t from = t->prev_ip;
			int had_prev = t->have_prev;
			step_account(r, t, ip);
			if (kind == BTR_KIND_SYSCALL)
				after_syscall(r, t);
			if (r->ipf && had_prev && !step_filter_inside(t->p, ip)) {
				filter_leave(r, t, kind, len, from, ip, 0);
				resume(r, t, 0);
				return;
			}
		}
		if (r->region) {
			if (region_leave(r, t, ip)) {
				resume(r, t, 0);
				return;
			}
		}
		resume(r, t, 0);
		return;
	}
deliver:;
	/* A signal for the tracee: deliver it as it would be without btr. */
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	ptrace(PTRACE_GETSIGINFO, tid, NULL, &si);
	uint64_t ip = get_ip(tid);
	if (t->stepping) {
		if (t->have_prev && ip != t->prev_ip)
			step_account(r, t, ip);   /* the step completed before the signal */
		else if (!t->have_prev)
			step_account(r, t, ip);
	}
	t->last_sig = sig;
	t->last_sig_ip = ip;
	t->last_sig_addr = (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) ?
			   (uint64_t)(uintptr_t)si.si_addr : 0;
	if (t->stepping && sig != SIGSTOP && sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU &&
	    sig_caught(tid, sig)) {
		t->sig_entry = 1;
		t->sig_from = ip;
	}
	resume(r, t, sig);
}

static void detach_all(struct rec *r)
{
	/* Each thread is in a ptrace stop or about to be: stop the running
	 * ones, then take out the breakpoints and detach (the kernel clears
	 * TF on detach). */
	for (struct thr *t = r->thrs; t; t = t->next)
		syscall(SYS_tgkill, t->p->pid, t->tid, SIGSTOP);
	for (struct proc *p = r->procs; p; p = p->next) {
		for (int i = 0; i < MAX_BP; i++)
			bp_remove(p, i);
		for (size_t i = 0; i < p->nfbp; i++)
			step_bp_remove(p, &p->fbp[i]);
	}
	while (r->thrs) {
		int st;
		pid_t tid = waitpid(-1, &st, __WALL);
		if (tid < 0)
			break;
		struct thr *t = step_thr_find(r, tid);
		if (!t)
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			step_exit_status(r, t, st);
			continue;
		}
		int sig = WIFSTOPPED(st) && !(st >> 16) ? WSTOPSIG(st) : 0;
		if (sig == (SIGTRAP | 0x80))
			sig = 0;   /* a syscall stop (--ip-filter), no signal */
		if (sig == SIGSTOP && !t->detached_stop) {
			/* Our SIGSTOP: suppressed by detaching with signal 0. */
			t->detached_stop = 1;
			step_flush_thr(r, t);
			struct proc *p = t->p;
			ptrace(PTRACE_DETACH, tid, NULL, NULL);
			struct btr_record rec = { .type = BTR_REC_THREAD_EXIT };
			rec.u.thread.pid = (uint32_t)p->pid;
			rec.u.thread.tid = (uint32_t)tid;
			rec.u.thread.end = BTR_THREAD_END_RUNNING;   /* detached: it runs on */
			step_wr(r, &rec);
			step_thr_free(r, t);
			continue;
		}
		if (sig == SIGTRAP) {
			/* A step trap, or a hit of the (now removed) start
			 * breakpoint: then back to the start of its instruction. */
			uint64_t ip = get_ip(tid);
			struct bp *b = ip ? step_bp_find(t->p, ip - 1) : NULL;
			if (!t->stepping && b && b != &t->p->bp[1]) {
				struct user_regs_struct regs;
				if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0) {
					regs.rip = ip - 1;
					ptrace(PTRACE_SETREGS, tid, NULL, &regs);
				}
			}
			sig = 0;
		}
		/* Something else first (a step trap, a signal): let it happen
		 * untraced and wait for our SIGSTOP. */
		ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
	}
}

/* ---- record ---- */

static int start_child(struct rec *r, const char *cmd, char *const *argv, pid_t *out)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return btr_err_from_errno(errno);
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return btr_err_from_errno(errno);
	}
	if (pid == 0) {
		close(pfd[0]);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		execv(cmd, argv);
		int e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) {
		close(pfd[0]);
		return -BTR_ERR_CHILD;
	}
	ptrace(PTRACE_SETOPTIONS, pid, NULL,
	       (void *)(long)(PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC |
			      PTRACE_O_TRACESYSGOOD |
			      PTRACE_O_EXITKILL));
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	/* The next stop is the exec event, or the child's death if exec failed. */
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st) || (st >> 16) != PTRACE_EVENT_EXEC) {
		int e = 0;
		if (read(pfd[0], &e, sizeof(e)) == (ssize_t)sizeof(e))
			btr_err("%s: cannot execute: %s", cmd, strerror(e));
		else
			btr_err("%s: did not start", cmd);
		close(pfd[0]);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return -BTR_ERR_CHILD;
	}
	close(pfd[0]);
	(void)r;
	*out = pid;
	return 0;
}

static int attach(struct rec *r, pid_t pid)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	if (access(dir, F_OK) < 0) {
		btr_err("process %d: no such process", (int)pid);
		return -BTR_ERR_NOENT;
	}
	struct proc *p = step_proc_new(r, pid);
	if (!p) {
		int e = errno;
		btr_err("process %d: cannot open its memory: %s", (int)pid, strerror(e));
		return e == ENOENT ? -BTR_ERR_NOENT : -BTR_ERR_PERM;
	}
	char path[PATH_MAX];
	step_exe_path(pid, path, sizeof(path));
	step_write_process(r, (uint32_t)pid, 0, BTR_PROC_START, path, NULL);
	/* Attach every thread; a second pass catches threads created
	 * meanwhile (PTRACE_O_TRACECLONE covers them from then on). */
	for (int pass = 0; pass < 2; pass++) {
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			pid_t tid = (pid_t)atoi(de->d_name);
			if (tid <= 0 || step_thr_find(r, tid))
				continue;
			if (ptrace(PTRACE_SEIZE, tid, NULL,
				   (void *)(long)(PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
						  PTRACE_O_TRACESYSGOOD |
						  PTRACE_O_TRACEEXEC)) < 0) {
				int e = errno;
				if (e == ESRCH)
					continue;
				closedir(d);
				btr_err("process %d: cannot attach: %s%s", (int)pid, strerror(e),
					e == EPERM ? " (ptrace not permitted: kernel.yama.ptrace_scope or capabilities)" : "");
				return e == EPERM ? -BTR_ERR_PERM : btr_err_from_errno(e);
			}
			ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
			struct thr *t = step_thr_new(r, tid, p, 0);
			if (!t) {
				closedir(d);
				return -BTR_ERR_NOMEM;
			}
			t->fresh = 2;   /* its first stop is the PTRACE_INTERRUPT one */
		}
		if (d)
			closedir(d);
	}
	step_scan_maps(r, p);
	return 0;
}

static int parse_region(struct rec *r, struct proc *p)
{
	const struct btr_capture_opts *o = r->o;
	if (!o->start && !o->stop)
		return 0;
	if (!o->start) {
		btr_err("--stop needs --start");
		return -BTR_ERR_INVAL;
	}
	r->region = 1;
	int rc = resolve_addr(r, p, o->start, &p->bp[0].addr);
	if (rc < 0)
		return rc;
	r->start_addr = p->bp[0].addr;
	if (o->stop && (rc = resolve_addr(r, p, o->stop, &r->stop_addr)) < 0)
		return rc;
	bp_plant(p, 0);
	if (!p->bp[0].planted) {
		btr_err("%s: cannot plant a breakpoint at 0x%" PRIx64, o->start, p->bp[0].addr);
		return -BTR_ERR_INVAL;
	}
	return 0;
}

int btr_step_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	char cmd[PATH_MAX] = "";
	int rc;

	if (!opts || !BTR_OPTS_VALID(opts, BTR_CAPTURE_OPTS_V1) || !opts->output || !res ||
	    (opts->attach_pid <= 0 && (!opts->argv || !opts->argv[0])))
		return -BTR_ERR_INVAL;
	memset(res, 0, sizeof(*res));
	if (opts->attach_pid <= 0 && (rc = btr_capture_check_command(opts->argv[0], cmd, sizeof(cmd))) < 0)
		return rc;
	struct rec r = { .o = opts, .res = res };
	const struct btr_filter *bf = BTR_OPTS_GET(opts, branch_filter, NULL);
	btr_filter_all(&r.filter);
	if (bf)
		r.filter = *bf;
	else if (opts->filter && (rc = btr_filter_parse(opts->filter, &r.filter)) < 0)
		return rc;
	if (BTR_OPTS_GET(opts, n_ip_filters, 0)) {
		if (opts->start || opts->stop || opts->ring) {
			btr_err("--ip-filter with -b step cannot be combined with %s",
				opts->ring ? "--ring" : "--start/--stop");
			return -BTR_ERR_INVAL;
		}
		if ((rc = step_filter_parse(&r)) < 0) {
			free(r.ipf);
			return rc;
		}
	}
	char why[200] = "", agent[PATH_MAX] = "";
	const char *no_inproc = NULL;
	if (opts->inproc) {
		if (opts->attach_pid > 0)
			no_inproc = "an attached process cannot preload the agent";
		else if (opts->start)
			no_inproc = "region tracing needs ptrace's breakpoints";
		else if (r.ipf)
			no_inproc = "--ip-filter needs ptrace's breakpoints";
		else if (step_find_agent(agent, sizeof(agent)) < 0)
			no_inproc = "btr-step-agent.so not found next to btr (set BTR_STEP_AGENT)";
		else if (step_is_static(cmd))
			no_inproc = "the program is static: LD_PRELOAD cannot load the agent";
	}
	int inproc = opts->inproc && !no_inproc;
	r.block = !inproc && btr_step_probe_btf(why, sizeof(why)) == 1;
	if (inproc)
		snprintf(res->mode, sizeof(res->mode), "in-process agent %.150s (TF set in its own SIGTRAP handler)", agent);
	else
		snprintf(res->mode, sizeof(res->mode), "%s%s%s%s (%.150s)", no_inproc ? "--inproc not possible (" : "",
			 no_inproc ? no_inproc : "", no_inproc ? "), " : "",
			 r.block ? "PTRACE_SINGLEBLOCK" : "PTRACE_SINGLESTEP", why);
	if (no_inproc)
		btr_warn("--inproc: %s; falling back to ptrace", no_inproc);

	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .compress = opts->compress };
	if ((rc = btr_capture_writer_new(opts, &wo, &r.w)) < 0) {
		free(r.ipf);
		return rc;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct btr_record rec = { .type = BTR_REC_MACHINE };
	snprintf(rec.u.machine.backend, sizeof(rec.u.machine.backend), "step");
	snprintf(rec.u.machine.cpu_vendor, sizeof(rec.u.machine.cpu_vendor), "ptrace");
	rec.u.machine.flags = BTR_MACHINE_USER_ONLY | (r.ipf ? BTR_MACHINE_IP_FILTER : 0);
	rec.u.machine.lbr_depth = (uint16_t)(opts->ring > 65535 ? 65535 : opts->ring);
	rec.u.machine.start_time_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	step_wr(&r, &rec);
	step_filter_records(&r);

	struct sigaction sa, old[5];
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO;   /* no SA_RESTART: waitpid must return */
	sigemptyset(&sa.sa_mask);
	got_signal = 0;
	btr__step_child = 0;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, &old[i]);
	struct sigaction al = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &al, &old[4]);

	pid_t root = 0;
	struct proc *p = NULL;
	if (inproc) {
		rc = step_run_inproc(&r, cmd, opts->argv, agent);
		if (rc < 0) {
			btr_err("%s: %s", cmd, btr_errstr(rc));
			goto out;
		}
		goto finish;
	}
	if (opts->attach_pid > 0) {
		root = opts->attach_pid;
		r.attached = 1;
		rc = attach(&r, root);
		p = step_proc_find(&r, root);
	} else {
		rc = start_child(&r, cmd, opts->argv, &root);
		if (rc == 0) {
			btr__step_child = root;
			if (!(p = step_proc_new(&r, root)))
				rc = -BTR_ERR_NOMEM;
			else {
				step_write_process(&r, (uint32_t)root, 0, BTR_PROC_START, cmd, opts->argv);
				step_scan_maps(&r, p);
				struct thr *t = step_thr_new(&r, root, p, 0);
				if (!t)
					rc = -BTR_ERR_NOMEM;
				else
					t->fresh = 0;
			}
		}
	}
	r.root = root;
	if (rc == 0 && p)
		rc = parse_region(&r, p);
	for (struct thr *t = r.thrs; t; t = t->next)
		t->stepping = !r.region && !r.ipf;
	if (rc == 0 && p && r.ipf) {
		step_filter_scan(&r, p);
		if (opts->attach_pid <= 0)
			filter_start_at(&r, step_thr_find(&r, root), get_ip(root));
	}
	if (rc < 0) {
		if (r.attached)
			detach_all(&r);
		else if (p)
			kill(root, SIGKILL);
		goto out;
	}
	if (opts->attach_pid <= 0) {
		struct thr *t = step_thr_find(&r, root);
		if (t->stepping)
			step_account(&r, t, get_ip(root));
		resume(&r, t, 0);
	}
	if (opts->duration > 0) {
		struct itimerval it = { .it_value = { .tv_sec = (time_t)opts->duration,
						     .tv_usec = (suseconds_t)((opts->duration - (double)(time_t)opts->duration) * 1e6) } };
		if (!it.it_value.tv_sec && !it.it_value.tv_usec)
			it.it_value.tv_usec = 1;
		setitimer(ITIMER_REAL, &it, NULL);
	}
	while (r.thrs && !r.err) {
		if (got_signal && (r.attached || got_signal == SIGALRM) && !r.over_n && !r.parked_n) {
			detach_all(&r);
			break;
		}
		int st;
		pid_t tid = waitpid(-1, &st, __WALL);
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (r.attached && WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP) {
			/* Seized thread's first stop (or a group stop): start stepping. */
			struct thr *t = step_thr_find(&r, tid);
			if (t && t->fresh) {
				t->fresh = 0;
				if (r.ipf)
					filter_start_at(&r, t, get_ip(tid));
				if (t->stepping)
					step_account(&r, t, get_ip(tid));
				resume(&r, t, 0);
				continue;
			}
			if (t) {
				resume(&r, t, 0);
				continue;
			}
		}
		on_stop(&r, tid, st);
	}
finish:;
	struct itimerval off = { 0 };
	setitimer(ITIMER_REAL, &off, NULL);
	if (r.err) {
		rc = btr_capture_output_failed(r.w, opts->output, r.err);
		r.w = NULL;
		if (r.attached)
			detach_all(&r);
		else
			kill(root, SIGKILL);
		while (waitpid(-1, NULL, __WALL) > 0)
			;
		goto out;
	}
	if (r.attached && !r.exited_root) {
		res->exited = 1;
		res->code = 0;
	}
	res->interrupted = got_signal && got_signal != SIGALRM;
	rc = btr_trace_writer_close(r.w);
	r.w = NULL;
	if (rc < 0)
		btr_err("%s: cannot write: %s", opts->output, btr_errstr(rc));
out:
	btr__step_child = 0;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &old[i], NULL);
	sigaction(SIGALRM, &old[4], NULL);
	if (r.w)
		btr_trace_writer_abort(r.w);
	while (r.thrs)
		step_thr_free(&r, r.thrs);
	while (r.procs) {
		struct proc *q = r.procs;
		r.procs = q->next;
		if (q->memfd >= 0)
			close(q->memfd);
		free(q->pages);
		free(q->ic);
		free(q->mods);
		free(q->fbp);
		free(q->fr);
		free(q);
	}
	free(r.ipf);
	return rc;
}
