/* qemu_plugin.h - the state and the functions the files of the QEMU
 * plugin (btr-qemu.so, agents/qemu/CMakeLists.txt) share.  Each file
 * calls only files listed below it here (tests/cli_layering.sh reads the
 * objects and fails on any two files that call each other):
 *   qemu_plugin.c      the callbacks: translation, the TB-exec hot path,
 *                      signals, system calls, threads; plugin arguments
 *   qemu_procs.c       processes: their traces and PROCESS records, fork, execve
 *   qemu_maps.c        the module map (MODULE_LOAD/UNLOAD) from the guest's /proc/self/maps
 *   qemu_filter.c      --ip-filter, --start/--stop: the blocks traced, TIP.PGD/TIP.PGE
 *   qemu_code.c        code without a file (CODE records)
 *   qemu_pt.c          a thread's PT leaves the encoder (pt_flush), PSB+
 *   qemu_snapshot.c    --snapshot: each thread's ring, windows on a trigger, SIGUSR2, the end
 *   qemu_records.c     the trace's records (one writer), the ground-truth log
 *   qemu_fds.c         the plugin's descriptors survive the guest closing them
 *   qemu_state_file.c  the shared state file and DIR/count, its copy for a fork child
 *   qemu_counter.c     the counter that places a fault inside a block
 *   qemu_user_info.c   the guest program's path, argv and load address
 *   qemu_guest_str.c   guest memory read safely, guest strings and string vectors
 *   qemu_insn_scan.c   scans of translated instruction bytes (qemu_insn_scan.h)
 *   qemu_stderr.c      QEMU's crash line off the guest's stderr
 *   qemu_plugin_state.c  data only: the state g, code_vcpu, fork_fd, qemu_plugin_version
 * A lower file that must run an upper one's code gets it as a function
 * pointer (flt_init: the TB-exec callback, thr_first).
 * Private to agents/qemu/; the symbols are hidden (C_VISIBILITY_PRESET). */
#ifndef BTR_QEMU_PLUGIN_H
#define BTR_QEMU_PLUGIN_H

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "btr/error.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/pt.h"
#include "btr/trace.h"
#include <Zydis/Zydis.h>

#include "qemu_exec.h"
#include "qemu_plugin_api.h"
#include "qemu_state.h"
#include "procmaps.h"
#include "qemu_insn_scan.h"

/* The plugin's state (qemu_plugin_state.c). */
struct plugin_state {
	pthread_mutex_t lock;          /* writer, gt file, module list */
	struct btr_trace_writer *w;
	int gt_fd;
	int retcomp;
	int exe_mapped;
	uint64_t guest_base;
	int have_base;
	uint64_t handler[65];          /* guest signal handlers by signo */
	uint64_t hlist[64];            /* the distinct values of handler[] */
	unsigned n_hlist;
	uint64_t hmask;                /* bit (h >> 4) & 63 of each handler h: tb_exec's test */
	int exit_called;
	int64_t exit_code;
	uint32_t pid;
	struct thr *thr[MAX_VCPUS];
	struct qs_hdr *qs;             /* shared state file (qemu_state.h) */
	struct mod { uint64_t start, size, pgoff; uint32_t prot; int backed; char *path; } mods[1024];
	unsigned n_mods;
	uint32_t parent[MAX_VCPUS];
	/* processes */
	const char *dir;
	char gt_path[PATH_MAX];
	int follow_fork, follow_exec, execd;
	uint64_t max_procs;
	uint64_t *count;               /* DIR/count, shared by every process: [0] processes
					* started, [1] the first write error (-btr_error) */
	int off;                       /* this process runs untraced (see fork_child) */
	int announced_proc;            /* the PROCESS record is written */
	uint32_t ppid;                 /* parent pid for the START record, 0: root */
	char exe[PATH_MAX];            /* the guest program */
	char *args;                    /* its argv, packed (qx_pack_args) */
	size_t args_len;
	char qemu[PATH_MAX];           /* for following exec: qemu=PATH, else /proc/self/exe */
	char plugarg[4 * PATH_MAX];    /* "SO,ARGS..." for the next QEMU */
	int fork_fd;                   /* fork_prepare's private state copy */
	char fork_path[PATH_MAX];
	unsigned fork_seq;
};
extern struct plugin_state g;

/* The vcpu whose thread runs on this host thread (linux-user runs every
 * guest thread on its own host thread); -1 before its first TB.  Only
 * translation (qemu_code.c, qemu_filter.c) asks. */
extern __thread int code_vcpu;
extern int fork_fd[MAX_VCPUS];   /* fork_prepare's copy of the state, + 1 */

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* One pointer compare per TB covers both "flush soon" and "PSB due". */
static inline void update_check(struct thr *t)
{
	uint8_t *full = t->enc.end - PT_SLACK;
	uint64_t due = t->last_psb + PSB_PERIOD;
	uint8_t *psb = due <= t->flushed ? t->enc.begin : t->enc.begin + (due - t->flushed);
	t->check_at = psb < full ? psb : full;
}

/* Is @pc a signal handler?  Called on every indirect branch that is not
 * a compressed return, so it scans the few distinct handlers only. */
static inline int is_handler(uint64_t pc)
{
	for (unsigned i = 0; i < g.n_hlist; i++)
		if (g.hlist[i] == pc)
			return 1;
	return 0;
}

static inline uint32_t gettid_(void) { return (uint32_t)syscall(SYS_gettid); }

/* ---- qemu_records.c ---- */
/* @flush: at once (QEMU may die without calling us again, and `btr
 * record` then salvages every complete chunk), else with the next one. */
void write_rec_ex(const struct btr_record *r, int flush);
void write_rec(const struct btr_record *r);
/* Writes @t's logged instructions to the ground-truth log, empties its buffer. */
void gt_flush(struct thr *t);

/* ---- qemu_pt.c ---- */
/* Writes @t's PT so far as a record (into its ring under --snapshot). */
void pt_flush(struct thr *t);
/* MODE.Exec (64-bit code). */
void emit_mode(struct thr *t);
/* PSB+: PSB, MODE.Exec, FUP (current IP, only while PacketEn), PSBEND. */
void emit_psb(struct thr *t, uint64_t ip, int with_fup);

/* Adds one TNT bit; returns 1 when TNT_MAX are pending (to be flushed). */
static inline int tnt_push(struct thr *t, unsigned taken)
{
	uint64_t v = (t->tnt_bits << 1) | taken;
	t->tnt_bits = v;
	return (int)(v >> TNT_MAX);
}

static inline void tnt_add(struct thr *t, int taken)
{
	if (tnt_push(t, taken != 0))
		tnt_flush(t);
}

/* Less than PT_SLACK bytes left in @t's encoder. */
static inline int enc_low(const struct thr *t)
{
	return t->enc.end - t->enc.pos < PT_SLACK;
}

static inline void ensure_space(struct thr *t)
{
	if (UNLIKELY(enc_low(t))) {
		pt_flush(t);
		update_check(t);
	}
}

/* A thread's first block: the process's records (the first time), the
 * module map, the thread's state. */
struct thr *thr_first(unsigned vcpu, uint64_t pc);
/* The TB-exec callback (the hot path). */
void tb_exec(unsigned vcpu, void *ud);       /* API v1: the TB's counter is shared */
void tb_exec_own(unsigned vcpu, void *ud);   /* a per-vCPU counter (v4) */

/* ---- qemu_filter.c: --ip-filter (IP ranges) ---- */
extern int flt_on;
/* filter=0xLO-0xHI@FILE: 0, or -1 (bad, or too many). */
int flt_arg(const char *arg);
/* BTR_QEMU_STATS (the counts flt_stats writes at the end); @exec: the
 * plugin's TB-exec callback a block inside runs on to, @first: a thread's
 * first block (the filter's callbacks run before them). */
void flt_init(void (*exec)(unsigned, void *), struct thr *(*first)(unsigned, uint64_t));
void flt_stats(void);
/* A mapping of a file: the ranges in it. */
void flt_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot);
/* A block at @pc is translated: 1 to trace it, 0 (outside) to leave it. */
int flt_trans(struct qemu_plugin_tb *tb, uint64_t pc);
/* Registers the callbacks of a traced block @b of @n instructions. */
void flt_trans_in(struct qemu_plugin_tb *tb, size_t n, struct tbinfo *b, void (*cb)(unsigned, void *));
void flt_tb_exec(unsigned vcpu, void *ud);
/* --start/--stop: start=0xOFF@FILE (@which 0), stop=... (1): 0 or -1. */
extern int flt_start_on;
int flt_start_arg(const char *arg, int which);
void flt_start_exec(unsigned vcpu, void *ud);
/* Is @pc a signal handler of the process? */
int is_handler(uint64_t pc);
/* Thread @t (vcpu @vcpu) makes a system call, or the process ends
 * (@at_exit): says a leave of the ranges before it. */
void flt_syscall(unsigned vcpu, struct thr *t, int at_exit);

/* ---- qemu_state_file.c ---- */
extern int qs_fd;                 /* the state file, for fallocate */
void *qs_alloc(size_t size);
int qs_create(const char *path);
/* The lowest descriptor number the plugin's own files take (near the top
 * of RLIMIT_NOFILE): the guest runs in this process and may dup2() over
 * small numbers of its choosing (a shell's `exec 4>file`), which would
 * send the trace into its file. */
int qs_fd_min(void);
/* @fd moved to at least qs_fd_min() (the old number closed); @fd itself
 * if that fails or it is negative. */
int qs_fd_high(int fd);
int qs_adopt_copy(int fd);
/* Child of a fork, before it adopts the copy @fd: the blocks' information
 * as it was at the fork.  Returns 1, or 0 if a write failed. */
int fork_copy_rest(int fd);
/* Before a guest setuid-family call: DIR and DIR/count to the new user. */
void qs_grant_uid(int64_t num, uint64_t a1, uint64_t a2);
/* QEMU's "uncaught target signal" line off the guest's stderr
 * (qemu_stderr.c). */
void qemu_stderr_filter(void);
/* The plugin's descriptors in the guest's process (qemu_fds.c): kept
 * across a guest close()/close_range() (before and after the call), moved
 * away from a number another guest call names. */
void fds_close_before(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3);
void fds_close_after(unsigned vcpu);
void fds_named(int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a5);
/* Where the state's allocations start: the header's pages end. */
#define QS_DATA_START ((sizeof(struct qs_hdr) + 4095) & ~4095ull)
void qc_map(void);
void note_write_error(int err);
void note_pid(uint32_t pid, uint32_t ppid);
void note_process(void);

/* ---- qemu_code.c ---- */
int code_file_backed(const char *path);
void code_seen(struct qemu_plugin_tb *tb, size_t n, uint64_t pc, uint64_t end);
void code_forget(uint64_t lo, uint64_t size);
void code_fork_child(void);
void code_note_jitdump(const char *path);

/* ---- qemu_maps.c ---- */
void read_maps(uint64_t first_pc);
/* A MODULE_LOAD record only (a fork child's copy of the map). */
void write_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot);
/* A MODULE_LOAD record, and the module in g.mods. */
void add_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot);
/* munmap(@start, @size) by thread @t: every module it covers entirely goes. */
void remove_modules(struct thr *t, uint64_t start, uint64_t size);

/* ---- qemu_counter.c ---- */
/* Chooses the counter's form for this QEMU's API; 1: per vcpu (v4). */
int counter_init(void);
int counter_is_per_vcpu(void);
/* At translation: count instruction @in (at @va) of TB @b as it starts. */
void counter_insn(struct qemu_plugin_insn *in, struct tbinfo *b, uint64_t va);
/* How many of @p's instructions thread @t started (its last TB, left for
 * a signal handler); 0 when another thread's count is mixed in (v1). */
uint64_t counter_started(const struct thr *t, const struct tbinfo *p);
/* Before qs_finish_thread in the plugin: makes p->count - t->base @t's
 * own count (v4). */
void counter_pin(struct thr *t);

/* ---- qemu_snapshot.c: --snapshot SIZE, --trigger, --max-snapshots ---- */
extern int snap_on;
/* snapshot=SIZE, trigger=0xOFF@FILE, maxsnap=N: 0, or -1 (not one of them, or bad). */
int snap_arg(const char *arg);
void snap_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot);
/* After a thread's encoder is set up (a new thread, a fork child's): its ring. */
void snap_thread(struct thr *t);
/* A PSB+ begins at t->last_psb. */
void snap_psb(struct thr *t);
/* pt_flush of a thread with a ring (t->snap): into the ring, not the trace. */
void snap_flush(struct thr *t);
/* The thread ends (@end: enum btr_thread_end): its last window. */
void snap_end(struct thr *t, uint32_t end);
/* A SIGUSR2 to btr record since the thread last looked: its window. */
void snap_poll(struct thr *t);
/* A traced block @b is translated: the trigger's callback at the trigger. */
void snap_trans(struct qemu_plugin_tb *tb, struct tbinfo *b);
void snap_stats(void);

/* ---- qemu_procs.c ---- */
/* Opens this process's trace DIR/pSTEM.btr; its state file is created
 * (@state_from NULL) or is @state_from renamed to DIR/sSTEM: 0 or -1. */
int proc_open(const char *state_from);
/* A PROCESS record (@path, @args NULL: the program's). */
void write_process(uint32_t event, int32_t reason, const char *detail, const char *path, const char *args,
		   size_t args_len);
/* The first TB: say what runs (START, or EXEC after follow_exec). */
void announce_process(void);
/* Is the system call a fork (a new process, not a thread)? */
int is_fork_call(int64_t num, uint64_t a1);
/* Parent at a fork's entry: the child's copy of the state; after it returns. */
void fork_prepare(unsigned vcpu, struct thr *t);
void fork_parent_done(unsigned vcpu, struct thr *t, int64_t ret);
/* Child, when the fork returned 0: its own state and trace, or untraced.
 * Returns the thread that made the fork when it goes on traced (its
 * stream to start anew), else NULL. */
struct thr *fork_child(unsigned vcpu);
/* Guest execve: QEMU with this plugin again; returns only when QEMU's own
 * execve is to run. */
void follow_exec(struct thr *t, uint64_t a1, uint64_t a2, uint64_t a3);

/* ---- qemu_user_info.c ---- */
/* g.args and the program path from QEMU's command line. */
void read_cmdline(void);
/* The guest program as QEMU was given it ("" if unknown). */
const char *user_binary(void);
/* The start of its code as QEMU loaded it, 0 if this QEMU does not say. */
uint64_t user_start_code(void);

/* ---- qemu_guest_str.c ---- */
/* Reads guest memory without trusting the guest's pointer: 0, or -1. */
int guest_read(uint64_t addr, void *buf, size_t len);
char *guest_strdup(uint64_t addr);
void free_strv(char **v);
char **guest_strv(uint64_t addr);

#endif
