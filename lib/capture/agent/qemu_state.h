/* qemu_state.h - state of the btr QEMU plugin that must outlive it.
 *
 * Why shared: QEMU 7.2 runs no plugin callback when the guest dies from a
 * signal (dump_core_and_abort kills the process directly), so a crash or
 * Ctrl-C would lose the packets of the last TBs and the knowledge of
 * where the guest stopped.  The plugin therefore allocates its per-thread
 * state (including the PT buffer being filled) and its per-TB info from a
 * MAP_SHARED file; after the process is gone, `btr record`
 * (lib/capture/qemu.c) maps the same file at the same address and
 * finishes every thread exactly as the plugin's exit callback would, with
 * qs_finish_thread() below.  Shared by the plugin (agents/qemu) and the
 * recorder only (lib/capture/agent/ holds what agents and recorder share).
 */
#ifndef BTR_QEMU_STATE_H
#define BTR_QEMU_STATE_H

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include "btr/branch.h"
#include "btr/pt.h"

#define MAX_VCPUS 4096
#define PT_BUF (256 * 1024)
/* TNT bits collected before they are written (as eight 1-byte TNTs) */
#define TNT_MAX 48
#define PT_SLACK 256          /* worst case bytes emitted between space checks */
#define PSB_PERIOD 4096       /* bytes between PSBs (hardware default order of magnitude) */
#define RS_DEPTH 64           /* return-compression call stack, as libipt's pt_retstack */

enum { TB_REP = 1, TB_FAULTS = 2 };

/* DIR/count, one page every plugin instance and `btr record` map (its
 * blocks are allocated before the start, so a full $TMPDIR cannot make it
 * fault): [QC_STARTED] processes started, [QC_WERR] the first write error
 * (negative btr_error), [QC_NPIDS] processes listed so far, [QC_GTERR] the
 * first error writing the ground-truth log (errno, positive), [QC_PTRACE]
 * the first process whose ptrace() QEMU refused (ENOSYS: a debugger or
 * tracer run under btr, which btr record names), then one entry per started
 * process (pid | ppid << 32), up to QC_MAX_PIDS, so that the recorder can
 * name a process whose trace file could not be written. */
enum { QC_STARTED = 0, QC_WERR = 1, QC_NPIDS = 2, QC_GTERR = 3, QC_PTRACE = 4, QC_SNAPREQ = 5, QC_SNAPS = 6,
       QC_SNAPDROP = 7, QC_PIDS = 8, QC_MAX_PIDS = 4096 / 8 - QC_PIDS };
/* --snapshot (agents/qemu/qemu_snapshot.c): [QC_SNAPREQ] counts the
 * SIGUSR2s `btr record` got (each thread writes a window when it sees it
 * change), [QC_SNAPS] the trigger windows written by every process
 * (--max-snapshots caps it), [QC_SNAPDROP] the trigger calls beyond it. */
/* An entry with this ppid: process pid exec'd a program whose trace could
 * not be written (it ran untraced). */
#define QC_LOST_AFTER_EXEC UINT32_MAX

struct tbinfo {
	uint64_t count;      /* inline counter: instructions started (all threads; API v1 only,
				* agents/qemu/qemu_counter.c) */
	void *last;          /* the struct thr that last entered or left this TB */
	uint64_t pc;         /* first instruction */
	uint64_t end;        /* address after the last instruction */
	uint64_t last_pc;    /* last instruction */
	uint64_t target;     /* direct target of the last instruction */
	uint32_t n;
	uint16_t n_s;        /* instructions that count (see agents/qemu/qemu_plugin.c) */
	uint8_t kind;        /* enum btr_branch_kind of the last instruction */
	uint8_t flags;       /* TB_* */
	/* off[i], i < n: instruction i is at pc + off[i]; off[n + j], j <
	 * n_s: the index of the j-th counting instruction (the last
	 * instruction always counts). */
	uint16_t off[];
};

/* Instructions of @p that started, from the counter difference @c. */
static inline uint64_t qs_started(const struct tbinfo *p, uint64_t c)
{
	if (c == 0 || c > p->n_s)
		return p->n;     /* disturbed by another thread: assume complete */
	return (uint64_t)p->off[p->n + c - 1] + 1;
}

struct thr {
	uint32_t tid, parent;
	uint32_t vcpu;       /* QEMU's vcpu index of the thread (the plugin's only) */
	int announced;       /* THREAD_START written */
	int enabled;         /* PacketEn */
	int done;
	struct tbinfo *prev;
	uint64_t base;       /* prev->count when prev was entered */
	uint64_t sys_ret;    /* address after the last system call instruction */
	struct btr_pt_encoder enc;
	uint64_t flushed;    /* stream bytes already written as records */
	uint64_t last_psb;
	uint8_t *check_at;   /* tb_exec's single test: buffer nearly full or PSB due */
	/* Pending TNT bits below a stop bit, the oldest highest (1: none
	 * pending; 0 only before tnt_reset, also none): one word to shift,
	 * and the stop bit reaching bit TNT_MAX says "full". */
	uint64_t tnt_bits;
	uint64_t rs[RS_DEPTH];
	unsigned rs_top, rs_n;
	int64_t mm_nr;       /* pending mmap/munmap arguments */
	uint64_t mm_a[6];
	char mm_path[PATH_MAX];
	uint64_t *gt;
	size_t gt_n;
	/* A signal arrived right after a conditional or indirect branch: the
	 * branch's outcome shows only when the handler returns (the resume
	 * address after rt_sigreturn).  pend_at is a reserved hole of
	 * PEND_HOLE bytes in buf, rewritten by qs_pend_resolve(). */
	uint8_t *pend_at;
	uint64_t pend_target, pend_end, pend_handler;
	uint8_t pend_kind;
	uint8_t sigreturn;   /* the last system call was rt_sigreturn */
	/* Asynchronous signals other threads of the process sent this one with
	 * tgkill/tkill and it has not entered a handler for yet (atomic): a
	 * handler entered while one is due is taken as that signal's, which
	 * comes between blocks, not as a fault (Go's preemption signal shares
	 * the handler of SIGSEGV). */
	uint32_t async_sent;
	struct qs_snap *snap; /* --snapshot: the thread's ring, else NULL */
	uint8_t buf[PT_BUF];
};


#define GT_BUF (64 * 1024)    /* ground-truth entries buffered per thread */
#define GT_MAGIC 0x54474254u  /* "BTGT" little-endian: ground-truth block header */

#define QS_MAGIC 0x3174617473726274ull   /* "btrstat1" */
#define QS_SIZE (1ull << 30)               /* sparse file, touched pages only */

/* The first bytes of the shared file. */
struct qs_hdr {
	uint64_t magic;
	uint64_t base;       /* address of the mapping in the plugin */
	uint64_t size;
	uint64_t used;       /* bump allocator, atomic */
	uint32_t pid;
	uint32_t n_thr;      /* atomic */
	struct thr *thr[MAX_VCPUS * 4]; /* every thread state allocated */
};

static inline int qs_owns(const struct qs_hdr *h, const void *p)
{
	uint64_t a = (uint64_t)(uintptr_t)p;
	return h && a >= h->base && a < h->base + h->size;
}

static inline uint64_t stream_pos(const struct thr *t)
{
	return t->flushed + btr_pt_enc_size(&t->enc);
}

/* Writes the pending TNT bits as 1-byte TNT packets, 6 bits each, the
 * oldest first (SDM "Packet Descriptions": payload below a stop bit).
 * Bits are collected up to TNT_MAX and written here in one go rather than
 * through btr_pt_enc_packet, which costs a call and a switch per packet.
 * Not long TNTs: they take no fewer bytes (47 bits in 8), cost 8 bytes
 * when a TIP cuts a run short, and some decoders (libxdc) reject them.
 * The space check callers make every TB (PT_SLACK) leaves room; the
 * bound test is a backstop. */
static inline void tnt_reset(struct thr *t)
{
	t->tnt_bits = 1;
}

static inline void tnt_flush(struct thr *t)
{
	uint64_t v = t->tnt_bits;
	if (v <= 1)
		return;
	unsigned n = 63u - (unsigned)__builtin_clzll(v);
	v &= ~(1ull << n);
	_Static_assert(TNT_MAX == 48, "the spread below writes 8 groups of 6");
	if (n == TNT_MAX && t->enc.end - t->enc.pos >= 8) {
		/* The common case, without a loop: spread the 48 bits into
		 * eight 6-bit groups one per byte (24, 12, 6), shift them
		 * over bit 0, add the stop bits, and put the oldest group
		 * (the highest) first. */
		uint64_t x = (v & 0xffffffull) | (v & 0xffffff000000ull) << 8;
		x = (x & 0x00000fff00000fffull) | (x & 0x00fff00000fff000ull) << 4;
		x = (x & 0x003f003f003f003full) | (x & 0x0fc00fc00fc00fc0ull) << 2;
		x = __builtin_bswap64(x << 1 | 0x8080808080808080ull);
		memcpy(t->enc.pos, &x, 8);
		t->enc.pos += 8;
	} else if ((size_t)(t->enc.end - t->enc.pos) >= (n + 5) / 6) {
		uint8_t *o = t->enc.pos;
		while (n >= 6) {
			n -= 6;
			*o++ = (uint8_t)(0x80 | ((v >> n) & 0x3f) << 1);
		}
		if (n)
			*o++ = (uint8_t)(((1u << n) | (v & ((1u << n) - 1))) << 1);
		t->enc.pos = o;
	}
	tnt_reset(t);
}

static inline void emit_ip(struct thr *t, enum btr_pt_type type, uint64_t ip)
{
	tnt_flush(t);
	btr_pt_enc_ip(&t->enc, type, ip);
}

static inline void emit_pgd(struct thr *t)
{
	tnt_flush(t);
	struct btr_pt_packet p = { .type = BTR_PT_TIP_PGD };
	p.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
	btr_pt_enc_packet(&t->enc, &p);
	t->enabled = 0;
	/* Clearing our copy of the call stack is always safe: a decoder pops
	 * only on compressed returns, and we compress only on a match. */
	t->rs_n = 0;
}

static inline uint64_t insn_addr(const struct tbinfo *b, uint64_t i)
{
	return b->pc + b->off[i];
}

#define PEND_HOLE 27   /* TNT or TIP (9), FUP (9), TIP handler (9): full IPs */

/* Fills the hole of a pending branch.  @resumed: the thread came back
 * from the handler with rt_sigreturn at @resume, so the branch went to
 * @resume and the signal interrupted it there (FUP @resume, TIP handler).
 * Otherwise: an indirect branch really went to the handler (a direct
 * call of the function), a conditional one is taken as not taken (its
 * direction is unknowable).  Unused bytes become PAD packets. */
static inline void qs_pend_resolve(struct thr *t, int resumed, uint64_t resume)
{
	if (!t->pend_at)
		return;
	struct btr_pt_encoder e;
	struct btr_pt_packet p;
	memset(t->pend_at, 0, PEND_HOLE);     /* 0x00 = PAD */
	btr_pt_enc_init(&e, t->pend_at, PEND_HOLE);
	int cond = t->pend_kind == BTR_KIND_JCC || t->pend_kind == BTR_KIND_LOOP ||
		   t->pend_kind == BTR_KIND_JRCXZ;
	uint64_t from;
	if (cond) {
		int taken = resumed && resume == t->pend_target && resume != t->pend_end;
		memset(&p, 0, sizeof(p));
		p.type = BTR_PT_TNT;
		p.size = 1;
		p.u.tnt.bits = (unsigned)taken;
		p.u.tnt.count = 1;
		btr_pt_enc_packet(&e, &p);
		from = taken ? t->pend_target : t->pend_end;
	} else if (!resumed) {
		memset(&p, 0, sizeof(p));
		p.type = BTR_PT_TIP;
		p.u.ip.ipc = BTR_PT_IPC_FULL;
		p.u.ip.ip = t->pend_handler;
		btr_pt_enc_packet(&e, &p);
		t->pend_at = NULL;
		return;
	} else {
		memset(&p, 0, sizeof(p));
		p.type = BTR_PT_TIP;
		p.u.ip.ipc = BTR_PT_IPC_FULL;
		p.u.ip.ip = resume;
		btr_pt_enc_packet(&e, &p);
		from = resume;
	}
	memset(&p, 0, sizeof(p));
	p.type = BTR_PT_FUP;
	p.u.ip.ipc = BTR_PT_IPC_FULL;
	p.u.ip.ip = from;
	btr_pt_enc_packet(&e, &p);
	p.type = BTR_PT_TIP;
	p.u.ip.ip = t->pend_handler;
	btr_pt_enc_packet(&e, &p);
	t->pend_at = NULL;
}

/* How a thread that got no exit callback ended (see at_exit). */
struct qs_end {
	uint64_t ip;         /* instruction it stopped at (faulting one), 0 if unknown */
	uint64_t boundary;   /* where it stopped if the kill was asynchronous */
	uint64_t unlog;      /* ground truth: this instruction did not complete */
};

/* Finishes the PT stream of thread @t that died inside its last TB (or
 * in a system call): pending TNT bits, FUP at the instruction it stopped
 * at when it is the thread that died (@self) or when it left the TB
 * early, then TIP.PGD.  @self_sync: the process died from a synchronous
 * signal (a fault) raised by this thread; for an asynchronous kill the
 * last TB ran to its end.  Fills @e.  @h (may be NULL) bounds the
 * pointers that can be trusted. */
static inline void qs_finish_thread(const struct qs_hdr *h, struct thr *t, int self_sync, struct qs_end *e)
{
	struct tbinfo *p = t->prev;
	e->ip = e->boundary = e->unlog = 0;
	qs_pend_resolve(t, 0, 0);
	if (h && p && !qs_owns(h, p))
		p = NULL;
	if (!p) {
		/* Died in a system call (abort, raise, kill): the stream
		 * already ended with TIP.PGD. */
		e->ip = e->boundary = t->sys_ret;
		if (t->enabled)
			emit_pgd(t);
		return;
	}
	uint64_t started = qs_started(p, p->count - t->base);
	uint64_t ip = insn_addr(p, started - 1);
	int int3 = started == p->n && p->kind == BTR_KIND_INT3;
	if (int3)
		ip = p->end;      /* a trap: it completed */
	e->ip = ip;
	e->boundary = started == p->n ? p->end : ip;
	if (int3) {
		emit_pgd(t);
	} else if (self_sync || started < p->n) {
		e->unlog = ip;
		emit_ip(t, BTR_PT_FUP, ip);
		emit_pgd(t);
	} else if (p->kind == BTR_KIND_NONE) {
		emit_ip(t, BTR_PT_FUP, p->end);
		emit_pgd(t);
	} else {
		/* Stopped between a block ending in a branch and the next
		 * block (another thread's exit_group, a kill): where the
		 * branch went shows only in the next block, which never ran,
		 * and no packet can say "executed, outcome unknown".  Report
		 * the stop at the branch, as if it had not executed (FUP at
		 * it + TIP.PGD, what the CPU writes for an interrupt there):
		 * a valid trace one instruction short, instead of a branch
		 * without its TNT/TIP that the decoder must call a gap. */
		e->unlog = ip;
		e->boundary = ip;
		emit_ip(t, BTR_PT_FUP, ip);
		emit_pgd(t);
	}
	t->prev = NULL;
}

/* --snapshot SIZE (flight recorder, agents/qemu/qemu_snapshot.c): the
 * thread's stream is not written as it goes but kept in a ring of its
 * last @size bytes, with the stream offsets of its latest PSBs, so that a
 * window - the bytes from the oldest PSB within the last @size bytes to
 * the end - decodes on its own.  In the shared state (allocated with the
 * thread), so that `btr record` writes the last window of a thread whose
 * QEMU died without an exit callback (salvage_state). */
struct qs_snap {
	uint64_t size;        /* ring bytes */
	uint64_t floor;       /* a window starts at or after this offset (the
			       * last PSB before the previous window's end) */
	uint64_t req_seen;    /* QC_SNAPREQ handled */
	uint32_t cap_psb, n_psb, top_psb;   /* psb[]: circular, top the newest */
	uint32_t windows;     /* windows written */
	uint64_t *psb;        /* @cap_psb stream offsets of PSBs */
	uint8_t *ring;        /* stream byte at offset o is ring[o % size] */
};

/* One piece of a window: @len bytes at @p, stream offset @off. */
struct qs_span {
	const uint8_t *p;
	uint64_t off, len;
};

/* The window of @t now: the bytes from the oldest PSB in its last
 * s->size bytes (at or after s->floor) to the end of its stream, the
 * flushed part from the ring, the rest from the encoder; at most 3
 * pieces in @sp.  Returns how many (0: no PSB there, no window). */
static inline int qs_snap_window(const struct thr *t, struct qs_span sp[3])
{
	const struct qs_snap *s = t->snap;
	uint64_t end = stream_pos(t), lo = end > s->size ? end - s->size : 0;
	uint64_t rlo = t->flushed > s->size ? t->flushed - s->size : 0;
	if (lo < rlo)
		lo = rlo;
	if (lo < s->floor)
		lo = s->floor;
	uint64_t from = end;
	for (uint32_t i = 0; i < s->n_psb && s->cap_psb; i++) {
		uint64_t o = s->psb[(s->top_psb + s->cap_psb - s->n_psb + 1 + i) % s->cap_psb];
		if (o >= lo && o < end) {
			from = o;
			break;
		}
	}
	if (from >= end)
		return 0;
	int n = 0;
	if (from < t->flushed) {
		uint64_t a = from % s->size, len = t->flushed - from;
		uint64_t first = len < s->size - a ? len : s->size - a;
		sp[n++] = (struct qs_span){ s->ring + a, from, first };
		if (first < len)
			sp[n++] = (struct qs_span){ s->ring, from + first, len - first };
	}
	uint64_t e0 = from > t->flushed ? from - t->flushed : 0;
	if (e0 < btr_pt_enc_size(&t->enc))
		sp[n++] = (struct qs_span){ t->enc.begin + e0, t->flushed + e0, btr_pt_enc_size(&t->enc) - e0 };
	return n;
}

#endif
