/* insn_count.c - an independent instruction counter: a QEMU TCG plugin
 * that counts executed guest instructions per thread, for the tests to
 * compare btr's counts against (issue: ground truth that is not btr's).
 *
 * Independent of btr's plugin by construction: no btr code, no PT, no
 * translation-block bookkeeping; one callback per executed instruction.
 * Only QEMU's plugin ABI declarations (agents/qemu/qemu_plugin_api.h) are
 * shared.
 *
 * What counts as one instruction (docs/report.md, "How instructions are
 * counted"): every instruction QEMU starts executing, except that a `rep`
 * string instruction counts once however many iterations it runs.  (QEMU
 * 7.2 calls an instruction's callback once for a whole rep loop; should a
 * QEMU re-enter it per iteration, an entry that follows the same rep
 * instruction with no other instruction in between is the same one.)  A
 * faulting instruction is counted here (the callback runs before it), not
 * by btr (it does not retire): programs that fault differ by one per
 * fault.
 *
 * Use:  qemu-x86_64 -plugin build/btr-insn-count.so,out=FILE PROG ARGS
 *  or, in the same QEMU run as btr's own plugin:
 *       BTR_COUNT_OUT=FILE BTR_QEMU=tests/tools/qemu_count.sh btr record ...
 *
 * Output: lines "PID TID COUNT" appended to FILE (O_APPEND: processes of a
 * tree share it).  A thread may have several lines (one before each
 * execve, one at its exit): add them up per PID and TID.  Lines are
 * written when a thread calls exit, before execve/execveat, and at the
 * process's exit (exit_group, the end of main).  A process killed by a
 * signal (SIGSEGV, SIGABRT, SIGKILL) writes nothing: QEMU 7.2 calls no
 * plugin hook then, so the tests leave such processes out.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qemu_plugin_api.h"

BTR_QEMU_PLUGIN_VERSION_DEFINE;

#define SLOTS 4096u   /* vcpu indices; QEMU reuses those of exited threads */

struct slot {
	uint64_t count;    /* instructions counted */
	uint64_t rep_pc;   /* the last rep instruction counted ... */
	uint64_t rep_at;   /* ... and the count right after it */
	int tid;           /* 0: not known yet (set by the thread itself) */
};
static struct slot slots[SLOTS];
static uint64_t lost;          /* counted on a vcpu index >= SLOTS */
static char out_path[4096];   /* absolute: the guest may chdir */

/* Appends @line to the output.  Opened for each write: a guest closes
 * every descriptor it does not know of (close_range in a child between
 * fork and exec: Python's subprocess, gnupg), which would cut a
 * descriptor kept open. */
static void out_line(const char *line, int len)
{
	int fd = open(out_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;   /* the test sees the missing line */
	if (write(fd, line, (size_t)len) != len) {
		/* likewise */
	}
	close(fd);
}

static inline struct slot *slot_of(unsigned vcpu)
{
	return vcpu < SLOTS ? &slots[vcpu] : NULL;
}

static void on_insn(unsigned vcpu, void *udata)
{
	(void)udata;
	struct slot *s = slot_of(vcpu);
	if (!s) {
		__atomic_fetch_add(&lost, 1, __ATOMIC_RELAXED);
		return;
	}
	if (__builtin_expect(!s->tid, 0))
		s->tid = (int)syscall(SYS_gettid);
	s->count++;
}

/* @udata: the rep instruction's address. */
static void on_rep(unsigned vcpu, void *udata)
{
	struct slot *s = slot_of(vcpu);
	uint64_t pc = (uint64_t)(uintptr_t)udata;
	if (!s) {
		__atomic_fetch_add(&lost, 1, __ATOMIC_RELAXED);
		return;
	}
	if (!s->tid)
		s->tid = (int)syscall(SYS_gettid);
	if (s->rep_pc == pc && s->rep_at == s->count)
		return;   /* the next iteration of the same instruction */
	s->count++;
	s->rep_pc = pc;
	s->rep_at = s->count;
}

/* A string instruction (ins, outs, movs, cmps, stos, lods, scas) with a
 * rep/repe/repne prefix. */
static int is_rep_string(const uint8_t *p, size_t n)
{
	int rep = 0;
	size_t i = 0;
	for (; i < n; i++) {
		uint8_t b = p[i];
		if (b == 0xf2 || b == 0xf3)
			rep = 1;
		else if (b == 0x66 || b == 0x67 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 ||
			 b == 0x64 || b == 0x65 || b == 0xf0)
			;
		else
			break;
	}
	if (i < n && (p[i] & 0xf0) == 0x40)   /* REX */
		i++;
	if (!rep || i >= n)
		return 0;
	uint8_t op = p[i];
	return (op >= 0x6c && op <= 0x6f) || (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf);
}

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		if (is_rep_string(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn)))
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_rep, QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn));
		else
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
}

static void emit(struct slot *s)
{
	if (!s->tid && !s->count)
		return;
	char line[96];
	int len = snprintf(line, sizeof(line), "%d %d %" PRIu64 "\n", (int)getpid(),
			   s->tid ? s->tid : -1, s->count);
	out_line(line, len);
	memset(s, 0, sizeof(*s));
}

static void emit_all(void)
{
	for (unsigned i = 0; i < SLOTS; i++)
		emit(&slots[i]);
	if (lost) {
		char line[96];
		int len = snprintf(line, sizeof(line), "%d lost %" PRIu64 "\n", (int)getpid(), lost);
		out_line(line, len);
		lost = 0;
	}
}

static void on_syscall(qemu_plugin_id_t id, unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
		       uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
	(void)id, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
	struct slot *s = slot_of(vcpu);
	if (num == SYS_exit && s)
		emit(s);        /* this thread ends; its vcpu index may be reused */
	else if (num == SYS_execve || num == SYS_execveat)
		emit_all();     /* the process image goes; if execve fails, counting goes on */
	else if ((num == SYS_tgkill || num == SYS_tkill || num == SYS_kill || num == SYS_rt_sigprocmask) && s)
		/* a signal may end the process when this call returns (abort():
		 * tgkill, then the mask restored), and QEMU dumps core without
		 * the plugins' exit callbacks: say this thread's count so far
		 * (the test adds a thread's lines up).  Only its own slot: the
		 * other threads are counting into theirs at this moment, and
		 * reading and clearing those lost their increments (qemu_mt's
		 * threads calling rt_sigprocmask: counts 16280 short). */
		emit(s);
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned vcpu, int64_t num, int64_t ret)
{
	(void)id;
	/* The child of a fork (QEMU runs vfork and clone without CLONE_VM as
	 * fork): the inherited counts are the parent's; start from zero after
	 * the system call, which the parent counted. */
	if (ret == 0 && (num == SYS_fork || num == SYS_vfork || num == SYS_clone || num == 435 /* clone3 */)) {
		memset(slots, 0, sizeof(slots));
		lost = 0;
		struct slot *s = slot_of(vcpu);
		if (s)
			s->tid = (int)syscall(SYS_gettid);
	}
}

static void on_vcpu_exit(qemu_plugin_id_t id, unsigned vcpu)
{
	(void)id;
	struct slot *s = slot_of(vcpu);
	if (s)
		emit(s);
}

static void on_exit_all(qemu_plugin_id_t id, void *p)
{
	(void)id, (void)p;
	emit_all();
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	(void)info;
	const char *out = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
		else {
			fprintf(stderr, "insn_count: unknown argument %s (out=FILE)\n", argv[i]);
			return -1;
		}
	}
	if (!out) {
		fprintf(stderr, "insn_count: out=FILE is required\n");
		return -1;
	}
	int fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || !realpath(out, out_path)) {
		perror(out);
		return -1;
	}
	close(fd);
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
	qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
	qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
	qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
	qemu_plugin_register_atexit_cb(id, on_exit_all, NULL);
	return 0;
}
