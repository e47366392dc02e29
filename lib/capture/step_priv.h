/* step_priv.h - shared by the files of the "step" backend (step.c: ptrace
 * stepping; step_inproc.c: the --inproc agent's drain; step_core.c: what
 * both drive).  Not public. */
#ifndef BTR_STEP_PRIV_H
#define BTR_STEP_PRIV_H

#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>
#include "btr/branch.h"
#include "btr/capture.h"
#include "btr/trace.h"

#define PAGE 4096u
#define NPAGES 512u          /* code cache: pages per process (direct mapped) */
#define NICACHE 8192u        /* decoded instructions per process (direct mapped) */
#define BATCH 4096u          /* BTS records per thread before a write */
#define MAX_BP 2

struct cpage {
	uint64_t addr;           /* page address + 1 (0: empty) */
	uint8_t b[PAGE];
};

struct icache_ent {
	uint64_t ip;             /* ip + 1 (0: empty) */
	uint8_t len, kind;
	uint16_t flags;
	uint64_t target;
};

struct bp {
	uint64_t addr;
	uint8_t orig;
	int planted;
};

struct mod {
	uint64_t start, end;
};

/* --ip-filter: a range of one process, its addresses [lo, hi]. */
struct frange {
	uint64_t lo, hi;
};

/* --ip-filter: a range as given, file offsets [start, end] of @file. */
struct fspec {
	uint64_t start, end;
	char file[4096];
};

struct proc {
	pid_t pid;
	int memfd;
	int dead;
	struct cpage *pages;
	struct icache_ent *ic;
	struct mod *mods;
	size_t nmods, capmods;
	struct bp bp[MAX_BP];    /* [0] start, [1] stop (region mode) */
	struct bp *fbp;          /* --ip-filter: breakpoints inside the ranges, by address */
	size_t nfbp, capfbp;
	struct frange *fr;       /* --ip-filter: the ranges mapped in this process */
	size_t nfr, capfr;
	struct proc *next;
};

struct ring_ent {
	uint64_t from, to;
	uint32_t insns;
};

struct thr {
	pid_t tid;
	struct proc *p;
	int fresh;               /* waiting for its first stop */
	int over;                /* region: stepping over the lifted start breakpoint */
	int parked;              /* region: stopped while another thread steps over it */
	int park_st_valid, park_st; /* a stop reaped while parking, replayed at unpark */
	int swallow_stop;        /* our parking SIGSTOP is still to come: swallow it */
	int detached_stop;       /* detach: our SIGSTOP arrived */
	int stepping;            /* 0: running free (region mode) */
	int have_prev;
	uint64_t prev_ip;
	uint32_t ninsn;          /* instructions since the last written branch */
	int sig_entry;           /* a caught signal was injected: next trap is its handler */
	uint64_t sig_from;
	int last_sig;            /* last signal delivered, its IP and address */
	uint64_t last_sig_ip, last_sig_addr;
	uint64_t ret_addr, entry_sp; /* region without --stop: the start function's return */
	uint8_t *buf;            /* BATCH BTS records */
	uint32_t *cnt;           /* their instruction counts */
	unsigned n;
	uint64_t off, ins_off;   /* bytes written so far of the BTS / BTS_INSNS streams */
	struct ring_ent *ring;   /* flight recorder: @ring entries, @tos the next slot */
	uint32_t tos, used;
	struct thr *next;
};

struct rec {
	const struct btr_capture_opts *o;
	struct btr_trace_writer *w;
	struct btr_capture_result *res;
	struct proc *procs;
	struct thr *thrs;
	int block;               /* PTRACE_SINGLEBLOCK works (BTF) */
	int region;
	uint64_t start_addr, stop_addr;
	struct fspec *ipf;       /* --ip-filter ranges (NULL: none), @n_ipf of them */
	unsigned n_ipf;
	struct btr_filter filter;
	int err;
	pid_t root;
	int attached;
	int exited_root;
	int over_n;              /* threads stepping over a lifted breakpoint */
	int parked_n;
};

/* step_core.c: */
/* Appends @rec to the trace (the first error sticks in r->err). */
void step_wr(struct rec *r, const struct btr_record *rec);
/* The traced process @pid, or NULL. */
struct proc *step_proc_find(struct rec *r, pid_t pid);
/* Process @p is gone: closes its memory. */
void step_proc_close(struct proc *p);
/* The page of @p holding @addr through the code cache (the program's
 * bytes, without our breakpoints); NULL if unreadable. */
const uint8_t *step_page_get(struct proc *p, uint64_t addr);
/* The decoded instruction at @ip through the caches; NULL if its bytes
 * cannot be read or decoded. */
const struct icache_ent *step_insn_at(struct proc *p, uint64_t ip);
/* The traced thread @tid, or NULL. */
struct thr *step_thr_find(struct rec *r, pid_t tid);
/* Writes the buffered branches of @t (not in ring mode). */
void step_flush_thr(struct rec *r, struct thr *t);
/* Writes the buffered branches of every thread of @p. */
void step_flush_proc(struct rec *r, struct proc *p);
/* A branch of @t from @from to @to of @kind (BTR_KIND_*). */
void step_branch(struct rec *r, struct thr *t, uint64_t from, uint64_t to, unsigned kind);
/* The path of /proc/@pid/exe in @buf ("" if unknown). */
void step_exe_path(pid_t pid, char *buf, size_t size);
/* Forgets thread @t (no record): unlinks and frees it. */
void step_thr_free(struct rec *r, struct thr *t);
/* Thread @t ended (@st: its wait status, or -1 when replaced by an exec):
 * its data and THREAD_EXIT record; frees @t. */
void step_thr_gone(struct rec *r, struct thr *t, int st);
/* A traced process: opens /proc/PID/mem; NULL on failure. */
struct proc *step_proc_new(struct rec *r, pid_t pid);
/* After exec: reopen the memory, forget code and modules. */
void step_proc_reset(struct proc *p);
/* Module records for new executable mappings of @p. */
void step_scan_maps(struct rec *r, struct proc *p);
/* A traced thread (writes its thread_start record); NULL on failure. */
struct thr *step_thr_new(struct rec *r, pid_t tid, struct proc *p, pid_t parent);
/* The step of @t ended at @ip: count it, write the branch it took. */
void step_account(struct rec *r, struct thr *t, uint64_t ip);
/* A process record (@argv may be NULL). */
void step_write_process(struct rec *r, uint32_t pid, uint32_t ppid, uint32_t ev, const char *path, char *const *argv);
/* Thread @t ended with wait status @st: its records, and the process's if it led. */
void step_exit_status(struct rec *r, struct thr *t, int st);
/* The planted breakpoint of @p at @addr (region or filter), or NULL. */
struct bp *step_bp_find(struct proc *p, uint64_t addr);
/* Writes int3 at @b's address (keeping the program's byte) / puts the byte back. */
void step_bp_plant(struct proc *p, struct bp *b);
void step_bp_remove(struct proc *p, struct bp *b);
/* A marker record of @t (BTR_BTS_SW_PGE / PGD with @to, not a branch). */
void step_marker(struct rec *r, struct thr *t, uint64_t to, uint64_t flag);
/* The command being recorded (signals sent to btr alone are forwarded to it). */
extern volatile sig_atomic_t btr__step_child;

/* step_filter.c (--ip-filter) */
/* Parses the specs of @r->o into @r->ipf.  Returns 0 or a negative error (said). */
int step_filter_parse(struct rec *r);
/* Writes the IP_FILTER records of the ranges. */
void step_filter_records(struct rec *r);
/* The ranges now mapped in @p (from /proc/PID/maps), with breakpoints at
 * their starts and the functions inside them. */
void step_filter_scan(struct rec *r, struct proc *p);
/* 1 if @ip is inside a range of @p. */
int step_filter_inside(const struct proc *p, uint64_t ip);
/* Plants a breakpoint at @addr (inside a range) in @p; 0 or -1. */
int step_filter_bp_add(struct proc *p, uint64_t addr);
/* 1 if @addr follows a call instruction (a return address). */
int step_filter_is_return_addr(struct proc *p, uint64_t addr);
/* Copies the filter state of @parent into its forked child @child. */
int step_filter_fork(struct proc *child, const struct proc *parent);
/* Forgets the ranges and breakpoints of @p (exec: a new image). */
void step_filter_reset(struct proc *p);

/* step_inproc.c */
int step_find_agent(char *buf, size_t size);
int step_is_static(const char *path);
int step_run_inproc(struct rec *r, const char *cmd, char *const *argv, const char *agent);

#endif
