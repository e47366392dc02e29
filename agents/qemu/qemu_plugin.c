/* qemu_plugin.c - a QEMU TCG plugin that records a linux-user guest's
 * control flow as an Intel-PT-compatible packet stream per guest thread.
 *
 * Built as the shared object btr-qemu.so by agents/qemu/CMakeLists.txt; not
 * part of libbtr (it links libbtr).  What it shares with the recorder
 * (lib/capture/qemu.c) is in lib/capture/agent/.
 *
 * Arguments (-plugin btr-qemu.so,ARG=VAL,...):
 *   dir=DIR       where each process writes its trace, pSTEM.btr (module
 *                 map, threads, PT, process records), and its shared state
 *                 file sSTEM (lib/capture/agent/qemu_state.h) that lets `btr record` finish
 *                 the trace when QEMU dies without an exit callback; STEM
 *                 is "monotonic-ns.pid", so names sort in start order
 *   gt=PATH       optional ground-truth log: every executed instruction
 *                 address per thread (debugging aid, slow), appended to by
 *                 every process
 *   retcomp=on|off  PT return compression (default on)
 *   fork=on|off   follow fork/vfork/clone without CLONE_VM (default on)
 *   exec=on|off   follow execve (default on)
 *   max=N         at most N traced processes (DIR/count counts them)
 *   execd=1       this QEMU was started by the plugin for a guest execve
 *   qemu=PATH     the QEMU command to start for a guest execve (the one
 *                 `btr record` ran, which may be a wrapper named by
 *                 BTR_QEMU; default /proc/self/exe)
 *   probe=on      load and do nothing (`btr info` checks plugin support)
 *   filter=0xLO-0xHI@FILE  trace only these offsets of FILE (repeatable;
 *                 qemu_filter.c)
 *   start=0xOFF@FILE, stop=0xOFF@FILE  trace each thread from an entry of
 *                 the function at OFF until it returns or stop is reached
 *   snapshot=SIZE, trigger=0xOFF@FILE, maxsnap=N  flight recorder (qemu_snapshot.c)
 *
 * Processes (qemu_procs.c, docs/record.md).  A guest fork is a host fork of QEMU: the
 * child inherits this plugin with all its memory, including the MAP_SHARED
 * state file, so at the fork's system call entry the plugin writes a
 * private copy of the state (fork_prepare) which the child maps over the
 * same address when the call returns 0 there (fork_child); the child then
 * opens its own trace and says so with a PROCESS start record.  A guest
 * execve would run the new program natively: the plugin resolves it like
 * the kernel (qemu_exec.h) and itself execs qemu-x86_64 with the same
 * plugin on it (follow_exec); a program it cannot trace is recorded as a
 * PROCESS untraced record and QEMU's own execve runs it natively.
 *
 * How the flow is reconstructed.  At translation time every TB gets a
 * struct tbinfo: its instruction addresses and the classification of its
 * last instruction (btr_insn_decode on the guest bytes).  At run time a
 * TB-exec callback sees the sequence of TBs each thread enters; comparing
 * the new TB's pc with the possible successors of the previous TB gives
 * the TNT bit of a conditional branch, the target of an indirect branch
 * (TIP, or a compressed RET), or shows that the previous TB was left
 * early or to an unexpected place (a signal).
 *
 * Completion is decided from the thread's own TBs: the new pc is a
 * successor of the previous TB, and the new TB is not one of the previous
 * TB's instructions run again alone (is_restart: QEMU 7.2 leaves a TB in
 * its middle without a fault only to run one instruction as a TB of its
 * own).  Nothing other threads write takes part, so threads running the
 * same loop at the same moment are exact (tests/cli_race.sh).
 *
 * Why an inline counter on instructions that can fault: a faulting load
 * delivers SIGSEGV in the middle of a TB.  Each such instruction and the
 * last one of each TB are counted as they start (qemu_counter.c: under
 * API v1 an add to the TB's own counter, which every thread running the
 * TB adds to; under v4 a store into the running vcpu's scoreboard slot),
 * so when the next TB is a signal handler the counter tells which
 * instruction faulted.  It is consulted only for a handler (and when a
 * thread that died inside a TB is finished), so under v1 it limits
 * exactness only for a fault in a TB that another thread runs at the
 * same time (then said as lost data, docs/record.md), and under v4 not
 * at all.
 *
 * System calls end a TB in QEMU; the syscall callback emits TIP.PGD with
 * the IP suppressed, as user-only hardware tracing does when SYSCALL
 * switches to CPL 0 (SDM 3C 32.2.4.1 "CPL filtering"), and the next TB is
 * announced by TIP.PGE.  Signals become FUP (interrupted or faulting IP)
 * + TIP (handler); rt_sigreturn is a system call like any other.  A
 * signal right after a conditional or indirect branch hides the branch's
 * outcome until the handler returns: those packets are written into a
 * reserved hole when rt_sigreturn shows where the thread resumes
 * (qs_pend_resolve in qemu_state.h).
 */
#include "qemu_plugin.h"

/* ---- PT stream per thread ---- */

static void rs_push(struct thr *t, uint64_t ret)
{
	t->rs_top = (t->rs_top + 1) % RS_DEPTH;
	t->rs[t->rs_top] = ret;
	if (t->rs_n < RS_DEPTH)
		t->rs_n++;
}

/* ---- ground truth ---- */

/* The instruction that was logged last did not complete (it faulted or
 * is restarted): drop it from the ground truth, as PT shows it as the
 * FUP source instead of an executed instruction. */
static void gt_unlog(struct thr *t, uint64_t ip)
{
	if (t->gt && t->gt_n && t->gt[t->gt_n - 1] == ip)
		t->gt_n--;
}

/* ---- threads ---- */

static void announce(struct thr *t);

static struct thr *thr_get(unsigned vcpu)
{
	struct thr *t = g.thr[vcpu];
	if (LIKELY(t))
		return t;
	t = qs_alloc(sizeof(*t));
	if (g.qs && qs_owns(g.qs, t)) {
		uint32_t k = __atomic_fetch_add(&g.qs->n_thr, 1, __ATOMIC_RELAXED);
		if (k < sizeof(g.qs->thr) / sizeof(g.qs->thr[0]))
			g.qs->thr[k] = t;
	}
	t->tid = gettid_();
	t->parent = g.parent[vcpu];
	t->vcpu = vcpu;
	code_vcpu = (int)vcpu;
	btr_pt_enc_init(&t->enc, t->buf, sizeof(t->buf));
	snap_thread(t);
	tnt_reset(t);
	update_check(t);
	if (g.gt_fd >= 0)
		t->gt = qs_alloc(GT_BUF * sizeof(uint64_t));
	announce(t);
	g.thr[vcpu] = t;
	return t;
}

static void announce(struct thr *t)
{
	struct btr_record r = { .type = BTR_REC_THREAD_START };
	r.u.thread.pid = g.pid;
	r.u.thread.tid = t->tid;
	r.u.thread.parent_tid = t->parent;
	write_rec(&r);
	t->announced = 1;
	emit_psb(t, 0, 0);
}

/* @end: enum btr_thread_end; @code: the status when EXITED. */
static void thread_end(struct thr *t, uint32_t end, int32_t code)
{
	if (t->done)
		return;
	pt_flush(t);
	snap_end(t, end);
	gt_flush(t);
	struct btr_record r = { .type = BTR_REC_THREAD_EXIT };
	r.u.thread.pid = g.pid;
	r.u.thread.tid = t->tid;
	r.u.thread.exit_code = end == BTR_THREAD_END_EXITED ? code : 0;
	r.u.thread.end = end;
	write_rec(&r);
	t->done = 1;
}

/* ---- control flow ---- */

static int is_sync_handler(uint64_t pc)
{
	static const int sync[] = { 4, 5, 7, 8, 11 };   /* ILL TRAP BUS FPE SEGV */
	int found = 0;
	for (int s = 1; s < 65; s++) {
		if (g.handler[s] != pc)
			continue;
		int is_sync = 0;
		for (size_t i = 0; i < sizeof(sync) / sizeof(sync[0]); i++)
			is_sync |= sync[i] == s;
		if (!is_sync)
			return 0;
		found = 1;
	}
	return found;
}

static void async_branch(struct thr *t, uint64_t from, uint64_t to)
{
	qs_pend_resolve(t, 0, 0);
	emit_ip(t, BTR_PT_FUP, from);
	btr_pt_enc_ip(&t->enc, BTR_PT_TIP, to);
}

/* A signal handler @pc was entered right after the branch ending @p,
 * whose outcome is unknown until the handler returns: reserve a hole for
 * the branch and FUP, write the TIP to the handler after it with a full
 * IP (so it does not depend on the FUP's IP). */
static void defer_branch(struct thr *t, struct tbinfo *p, uint64_t pc)
{
	qs_pend_resolve(t, 0, 0);
	tnt_flush(t);
	t->pend_at = t->enc.pos;
	t->pend_kind = p->kind;
	t->pend_target = p->target;
	t->pend_end = p->end;
	t->pend_handler = pc;
	memset(t->enc.pos, 0, PEND_HOLE);
	t->enc.pos += PEND_HOLE;
	t->enc.last_ip = pc;
}

/* Is @cur, entered after @p at @pc, one of @p's instructions run again
 * alone?  QEMU 7.2 (linux-user) leaves a block in its middle without a
 * fault only to run one instruction of it again as a block of its own (a
 * store into the page of its own block; an atomic operation it must run
 * while the other threads wait): such a block has one instruction, a
 * counting one (a memory access) of @p; @p's last one only when @p ends
 * without a branch.  A block of one instruction inside @p is nothing else:
 * a block entered in @p's middle runs to @p's end, so it has one
 * instruction only at @p's last, which ends @p by itself when it is a
 * branch.  Decided from this thread's own blocks: no counter other
 * threads write (issue: threads running the same loop lost iterations
 * when another thread's increments made the loop's own start look like
 * a restarted instruction). */
static int is_restart(const struct tbinfo *p, const struct tbinfo *cur, uint64_t pc)
{
	if (cur == p || cur->n != 1 || pc - p->pc >= p->end - p->pc)
		return 0;
	for (uint32_t j = 0; j < p->n_s; j++) {
		uint32_t k = p->off[p->n + j];
		if (insn_addr(p, k) == pc)
			return k + 1 < p->n || p->kind == BTR_KIND_NONE;
	}
	return 0;
}

static const int sync_sigs[] = { 4, 5, 7, 8, 11 };   /* ILL TRAP BUS FPE SEGV */

/* Can @pc be entered for a fault: the handler of a synchronous signal? */
static int may_be_fault(uint64_t pc)
{
	for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		if (g.handler[sync_sigs[i]] == pc)
			return 1;
	return 0;
}

/* tgkill(@tgid, @tid, @sig) / tkill(@tid, @sig) (@tgid 0): an
 * asynchronous signal due to thread @tid of ours (resolve, take_async). */
static void async_sent(uint64_t tgid, uint64_t tid, uint64_t sig)
{
	for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		if (sig == (uint64_t)sync_sigs[i])
			return;
	if (!sig || (tgid && tgid != (uint64_t)getpid()) || tid == (uint64_t)gettid_())
		return;   /* to itself: delivered as the call returns, no block in between */
	for (unsigned i = 0; i < MAX_VCPUS; i++) {
		struct thr *x = g.thr[i];
		if (x && !x->done && x->tid == tid) {
			__atomic_add_fetch(&x->async_sent, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}

/* Takes one of @t's due asynchronous signals, if any. */
static int take_async(struct thr *t)
{
	uint32_t n = __atomic_load_n(&t->async_sent, __ATOMIC_RELAXED);
	while (n && !__atomic_compare_exchange_n(&t->async_sent, &n, n - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return n != 0;
}

/* @t entered signal handler @pc from TB @p, possibly for a fault in @p,
 * but another thread ran @p at the same time, so @p's counter cannot say
 * where: an OVF (data lost here, as hardware says it) and the handler as
 * the place where the flow resumes (FUP).  Readers report it as lost
 * data of this thread at this place (docs/record.md). */
static void count_lost(struct thr *t, uint64_t pc)
{
	qs_pend_resolve(t, 0, 0);
	tnt_flush(t);
	struct btr_pt_packet o = { .type = BTR_PT_OVF };
	btr_pt_enc_packet(&t->enc, &o);
	t->enc.last_ip = 0;    /* a full IP: nothing before the OVF is relied on */
	t->rs_n = 0;
	btr_pt_enc_ip(&t->enc, BTR_PT_FUP, pc);
}

/* The thread left TB @p for @cur (at @pc).  The shared counter is
 * consulted only for the handler of a synchronous signal (which
 * instruction faulted), and only when no other thread ran @p meanwhile. */
static void resolve(struct thr *t, struct tbinfo *p, struct tbinfo *cur, uint64_t pc)
{
	if (is_restart(p, cur, pc)) {
		gt_unlog(t, pc);                      /* it did not complete */
		return;
	}
	int async = is_handler(pc) && take_async(t);   /* a signal due: it came between blocks */
	if (is_handler(pc) && may_be_fault(pc) && !async) {
		uint64_t started = counter_started(t, p);
		if (!started) {
			count_lost(t, pc);
			return;
		}
		if (started < p->n) {
			uint64_t ip = insn_addr(p, started - 1);
			gt_unlog(t, ip);
			async_branch(t, ip, pc);      /* it faulted: signal handler */
			return;
		}
	}
	/* Left early and went on in order at an instruction of @p that is not
	 * a successor of its branch: nothing ran but @p's first instructions,
	 * nothing to say.  (QEMU 7.2 runs such an instruction again alone
	 * instead, is_restart; this is for any other way out.) */
	if (pc != p->target && pc - p->pc < p->end - p->pc &&
	    (p->kind == BTR_KIND_NONE || p->kind == BTR_KIND_JCC || p->kind == BTR_KIND_LOOP ||
	     p->kind == BTR_KIND_JRCXZ || p->kind == BTR_KIND_JMP || p->kind == BTR_KIND_CALL))
		return;

	switch (p->kind) {
	case BTR_KIND_NONE:
		if (pc == p->end || ((p->flags & TB_REP) && pc == p->last_pc))
			return;
		if ((p->flags & TB_FAULTS) || is_sync_handler(pc)) {
			gt_unlog(t, p->last_pc);
			async_branch(t, p->last_pc, pc);
		} else {
			async_branch(t, p->end, pc);
		}
		return;
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ:
		if (pc == p->target) {
			tnt_add(t, 1);
		} else if (pc == p->end) {
			tnt_add(t, 0);
		} else {
			/* A signal right after the branch: its direction shows
			 * when the handler returns. */
			defer_branch(t, p, pc);
		}
		return;
	case BTR_KIND_JMP:
		if (pc != p->target)
			async_branch(t, p->target, pc);
		return;
	case BTR_KIND_CALL:
		if (pc != p->target && is_sync_handler(pc)) {
			gt_unlog(t, p->last_pc);      /* the push faulted */
			async_branch(t, p->last_pc, pc);
			return;
		}
		rs_push(t, p->end);
		if (pc != p->target)
			async_branch(t, p->target, pc);
		return;
	case BTR_KIND_CALL_IND:
		rs_push(t, p->end);
		if (is_handler(pc))
			defer_branch(t, p, pc);   /* maybe a signal, not the target */
		else
			emit_ip(t, BTR_PT_TIP, pc);
		return;
	case BTR_KIND_RET:
		if (g.retcomp && t->rs_n && t->rs[t->rs_top] == pc) {
			t->rs_top = (t->rs_top + RS_DEPTH - 1) % RS_DEPTH;
			t->rs_n--;
			tnt_add(t, 1);
			return;
		}
		/* A deferred RET is never compressed: an uncompressed one is
		 * valid whatever the call stack. */
		if (is_handler(pc))
			defer_branch(t, p, pc);
		else
			emit_ip(t, BTR_PT_TIP, pc);
		return;
	case BTR_KIND_JMP_IND:
		if (is_handler(pc)) {
			defer_branch(t, p, pc);
			return;
		}
		emit_ip(t, BTR_PT_TIP, pc);
		return;
	case BTR_KIND_INT3:
	case BTR_KIND_FAR_CALL:
	case BTR_KIND_FAR_JMP:
	case BTR_KIND_FAR_RET:
	case BTR_KIND_IRET:
	case BTR_KIND_SYSRET:
		emit_ip(t, BTR_PT_TIP, pc);
		return;
	case BTR_KIND_SYSCALL:
		/* Normally handled by the syscall callback; be robust. */
		emit_pgd(t);
		emit_mode(t);
		btr_pt_enc_ip(&t->enc, BTR_PT_TIP_PGE, pc);
		t->enabled = 1;
		return;
	default:                                      /* INT n, UD: faults */
		gt_unlog(t, p->last_pc);
		async_branch(t, p->last_pc, pc);
		return;
	}
}



__attribute__((noinline)) struct thr *thr_first(unsigned vcpu, uint64_t pc)
{
	if (!g.announced_proc)
		announce_process();
	if (!g.exe_mapped)
		read_maps(pc);
	return thr_get(vcpu);
}

static __attribute__((noinline)) void tb_check(struct thr *t, uint64_t pc)
{
	ensure_space(t);
	if (t->enabled && stream_pos(t) - t->last_psb >= PSB_PERIOD)
		emit_psb(t, pc, 1);
	update_check(t);
}

/* Can the branch waiting in the hole (defer_branch) have gone to @pc, the
 * first code after rt_sigreturn?  Not when @pc is a handler it cannot
 * reach: a signal that was pending while the handler ran (the same one
 * again, or one its sa_mask blocked) is delivered as rt_sigreturn returns,
 * before the interrupted code runs again.  The branch then waits for that
 * handler's rt_sigreturn, which resumes where the first one would have. */
static int pend_resumes_at(const struct thr *t, uint64_t pc)
{
	if (!is_handler(pc))
		return 1;
	if (t->pend_kind == BTR_KIND_JCC || t->pend_kind == BTR_KIND_LOOP || t->pend_kind == BTR_KIND_JRCXZ)
		return pc == t->pend_target || pc == t->pend_end;
	return 0;
}

static __attribute__((noinline)) void tb_enable(struct thr *t, uint64_t pc)
{
	if (t->pend_at && t->sigreturn && pend_resumes_at(t, pc))
		qs_pend_resolve(t, 1, pc);
	tnt_flush(t);
	emit_mode(t);
	btr_pt_enc_ip(&t->enc, BTR_PT_TIP_PGE, pc);
	t->enabled = 1;
}

/* The ways out of tb_exec's hot path, out of line: with every call in
 * them a tail call, the hot path needs no callee-saved registers (no
 * pushes and pops on each of the hundreds of millions of TBs). */
static __attribute__((noinline)) void tb_done(struct thr *t, struct tbinfo *cur)
{
	uint64_t pc = cur->pc;
	if (UNLIKELY(t->enc.pos >= t->check_at))
		tb_check(t, pc);
	if (t->prev)
		t->prev->last = t;
	cur->last = t;
	t->prev = cur;
	t->base = cur->count;
}

static __attribute__((noinline)) void tb_flush_done(struct thr *t, struct tbinfo *cur)
{
	tnt_flush(t);
	tb_done(t, cur);
}

/* Everything but a completed TB followed by a regular successor. */
static __attribute__((noinline)) void tb_exec_slow(struct thr *t, struct tbinfo *cur)
{
	uint64_t pc = cur->pc;
	struct tbinfo *p = t->prev;
	if (p != NULL)
		resolve(t, p, cur, pc);
	else if (!t->enabled) {
		if (is_handler(pc))
			take_async(t);   /* a signal due, delivered as a system call returned */
		tb_enable(t, pc);
	}
	tb_done(t, cur);
}

/* The thread's first TB (its state does not exist yet).  Apart from
 * tb_exec_slow so that the hot path need not keep @vcpu for it. */
static __attribute__((noinline)) void tb_exec_first(unsigned vcpu, struct tbinfo *cur)
{
	if (g.off)
		return;
	tb_exec_slow(thr_first(vcpu, cur->pc), cur);
}

/* Called at the start of every executed TB: the hot path.  The common
 * cases (TB completed, new pc a regular successor) are decided inline
 * here; everything else goes through resolve().  @shared: the counter is
 * the TB's, shared by all threads (API v1): count_is_own needs `last`
 * and the thread's base; with a per-vcpu counter (v4) nothing does. */
static inline __attribute__((always_inline)) void tb_exec_in(unsigned vcpu, void *ud, const int shared)
{
	struct tbinfo *cur = ud;
	struct thr *t = g.thr[vcpu];
	if (UNLIKELY(!t)) {
		tb_exec_first(vcpu, cur);
		return;
	}
	struct tbinfo *p = t->prev;
	if (UNLIKELY(!p))
		goto slow;
	uint64_t pc = cur->pc;
	/* Decided from this thread's own blocks, not from the counter (which
	 * every thread running @p adds to): @p completed when @pc is one of
	 * its regular successors, unless @cur may be one of @p's instructions
	 * run again (a block entered inside @p other than @p itself: a loop
	 * into its own block, is_restart) or @pc may be a signal handler. */
	if (UNLIKELY(pc - p->pc < p->end - p->pc) && cur != p)
		goto slow;
	if (UNLIKELY((g.hmask >> ((pc >> 4) & 63)) & 1))
		goto slow;
	/* if-chain, not switch: one predictable compare per kind beats an
	 * indirect jump through a table here. */
	unsigned k = p->kind;
	if (LIKELY(k == BTR_KIND_JCC)) {
		unsigned taken = pc == p->target;
		if (UNLIKELY(!taken && pc != p->end))
			goto slow;
		if (UNLIKELY(tnt_push(t, taken)))
			goto flush;
	} else if (k == BTR_KIND_NONE || k == BTR_KIND_JMP) {
		if (pc != p->target)
			goto slow;
	} else if (k == BTR_KIND_RET) {
		if (!(g.retcomp && t->rs_n && t->rs[t->rs_top] == pc))
			goto slow;
		t->rs_top = (t->rs_top + RS_DEPTH - 1) % RS_DEPTH;
		t->rs_n--;
		if (UNLIKELY(tnt_push(t, 1)))
			goto flush;
	} else if (k == BTR_KIND_CALL) {
		if (pc != p->target)
			goto slow;
		rs_push(t, p->end);
	} else {
		goto slow;
	}
	/* No space check: this path writes no packet (the ways out check). */
	if (shared) {
		p->last = t;          /* count_is_own: left @p, entered @cur */
		cur->last = t;
		t->base = cur->count;
	}
	t->prev = cur;
	return;
flush:
	tb_flush_done(t, cur);
	return;
slow:
	tb_exec_slow(t, cur);
}

void tb_exec(unsigned vcpu, void *ud)
{
	tb_exec_in(vcpu, ud, 1);
}

void tb_exec_own(unsigned vcpu, void *ud)
{
	tb_exec_in(vcpu, ud, 0);
}

static void gt_insn(unsigned vcpu, void *ud)
{
	if (UNLIKELY(g.off))
		return;
	struct thr *t = thr_get(vcpu);
	if (UNLIKELY(!t->gt))
		return;   /* a thread started after the log was closed */
	uint64_t ip = (uint64_t)(uintptr_t)ud;
	int rep = (int)(ip >> 63);
	ip &= ~(1ull << 63);
	/* QEMU runs each iteration of a REP string instruction as its own
	 * TB; architecturally it is one instruction. */
	if (rep && t->gt_n && t->gt[t->gt_n - 1] == ip)
		return;
	if (t->gt_n == GT_BUF)
		gt_flush(t);
	t->gt[t->gt_n++] = ip;
}


static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	if (!n || g.off || !flt_trans(tb, qemu_plugin_tb_vaddr(tb)))
		return;
	/* QEMU 7.2 lists an instruction that crosses into the next page as
	 * the last of the TB, with only its bytes on the first page, but
	 * stops the TB before it and runs it as the first of a new TB: such
	 * a truncated instruction is not part of this TB. */
	if (n > 1) {
		struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
		struct btr_insn ins;
		if (btr_insn_decode(qemu_plugin_insn_data(last), qemu_plugin_insn_size(last),
				    qemu_plugin_insn_vaddr(last), BTR_MODE_64, &ins) == -BTR_ERR_TRUNCATED)
			n--;
	}
	struct tbinfo *b = qs_alloc(sizeof(*b) + 2 * n * sizeof(uint16_t));
	b->pc = qemu_plugin_tb_vaddr(tb);
	b->n = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		uint64_t va = qemu_plugin_insn_vaddr(in);
		b->off[i] = (uint16_t)(va - b->pc);
		if (i == n - 1 || may_stop(qemu_plugin_insn_data(in), qemu_plugin_insn_size(in), va)) {
			counter_insn(in, b, va);
			b->off[n + b->n_s++] = (uint16_t)i;
		}
		if (!g.have_base) {
			g.guest_base = (uint64_t)(uintptr_t)qemu_plugin_insn_haddr(in) - va;
			g.have_base = 1;
		}
		int rep = 0;
		if (i == n - 1 || g.gt_fd >= 0) {
			const uint8_t *bytes = qemu_plugin_insn_data(in);
			size_t len = qemu_plugin_insn_size(in);
			rep = is_rep_string(bytes, len);
			if (i == n - 1) {
				struct btr_insn ins;
				b->last_pc = va;
				b->end = va + len;
				b->target = b->end;   /* the successor of a TB without a branch */
				if (btr_insn_decode(bytes, len, va, BTR_MODE_64, &ins) > 0) {
					b->kind = ins.kind;
					if (ins.kind != BTR_KIND_NONE)
						b->target = ins.target;
					if (ins.flags & BTR_INSN_STOPS)
						b->flags |= TB_FAULTS;
				}
				if (rep)
					b->flags |= TB_REP;
			}
		}
		if (g.gt_fd >= 0)
			qemu_plugin_register_vcpu_insn_exec_cb(in, gt_insn, QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)(va | ((uint64_t)rep << 63)));
	}
	flt_trans_in(tb, n, b, counter_is_per_vcpu() ? tb_exec_own : tb_exec);
	snap_trans(tb, b);   /* after the tracing callback: the trigger's window */
	if (g.exe_mapped)   /* the first TB: the module map comes with it */
		code_seen(tb, n, b->pc, b->end);
}

/* ---- module map ---- */


/* ---- system calls ---- */

/* ---- processes ---- */

static uint8_t forking[MAX_VCPUS];   /* the pending system call is a fork */

/* The thread that forked goes on in the child (fork_child): the same
 * thread, a new stream in a new process. */
static void thr_forked(struct thr *t)
{
	uint32_t ptid = t->tid;
	t->tid = gettid_();
	t->parent = ptid;
	t->flushed = 0;
	t->last_psb = 0;
	tnt_reset(t);
	t->rs_n = 0;
	t->pend_at = NULL;
	t->gt_n = 0;
	t->done = 0;
	t->enabled = 0;
	t->prev = NULL;
	btr_pt_enc_init(&t->enc, t->buf, sizeof(t->buf));
	snap_thread(t);
	update_check(t);
	announce(t);
}

static void syscall_cb(qemu_plugin_id_t id, unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2,
		       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
	forking[vcpu] = (uint8_t)is_fork_call(num, a1);
	if (num == SYS_close || num == SYS_close_range)
		fds_close_before(vcpu, num, a1, a2, a3);
	else if (num == SYS_setuid || num == SYS_setreuid || num == SYS_setresuid || num == SYS_setfsuid)
		qs_grant_uid(num, a1, a2);
	else
		fds_named(num, a1, a2, a3, a5);
	if (g.off)
		return;
	if (num == SYS_tgkill)
		async_sent(a1, a2, a3);
	else if (num == SYS_tkill)
		async_sent(0, a1, a2);
	struct thr *t = thr_get(vcpu);
	ensure_space(t);
	snap_poll(t);
	flt_syscall(vcpu, t, 0);
	if (t->prev) {
		/* The syscall instruction ended the previous TB. */
		t->sys_ret = t->prev->end;
		t->prev->last = t;
		emit_pgd(t);
		t->prev = NULL;
	}
	t->mm_nr = -1;
	t->sigreturn = num == SYS_rt_sigreturn;
	switch (num) {
	case SYS_mmap:
		if ((a3 & PROT_EXEC) && (int64_t)a5 >= 0) {
			char link[64];
			snprintf(link, sizeof(link), "/proc/self/fd/%d", (int)a5);
			ssize_t k = readlink(link, t->mm_path, sizeof(t->mm_path) - 1);
			if (k > 0) {
				t->mm_path[k] = 0;
				t->mm_nr = num;
			}
		}
		break;
	case SYS_munmap:
	case SYS_wait4:
		t->mm_nr = num;
		break;
	default:
		break;
	}
	t->mm_a[0] = a1; t->mm_a[1] = a2; t->mm_a[2] = a3;
	t->mm_a[3] = a4; t->mm_a[4] = a5; t->mm_a[5] = a6;

	switch (num) {
	case SYS_rt_sigaction: {
		uint64_t h;
		if (a1 < 65 && a2 && guest_read(a2, &h, sizeof(h)) == 0) {
			g.handler[a1] = h > 1 ? h : 0;   /* SIG_DFL 0, SIG_IGN 1 */
			unsigned k = 0;
			for (int sig = 1; sig < 65; sig++) {
				int seen = !g.handler[sig];
				for (unsigned j = 0; j < k && !seen; j++)
					seen = g.hlist[j] == g.handler[sig];
				if (!seen && k < 64)
					g.hlist[k++] = g.handler[sig];
			}
			g.n_hlist = k;
			uint64_t m = 0;
			for (unsigned j = 0; j < k; j++)
				m |= 1ull << ((g.hlist[j] >> 4) & 63);
			g.hmask = m;
		}
		break;
	}
	case SYS_exit:
		thread_end(t, BTR_THREAD_END_EXITED, (int32_t)a1);
		break;
	case SYS_exit_group:
		g.exit_called = 1;
		g.exit_code = (int64_t)a1;
		break;
	case SYS_execve:
		follow_exec(t, a1, a2, a3);
		break;
	default:
		if (forking[vcpu] && g.follow_fork)
			fork_prepare(vcpu, t);
		break;
	}
	(void)a7; (void)a8;
}

static void syscall_ret_cb(qemu_plugin_id_t id, unsigned vcpu, int64_t num, int64_t ret)
{
	if (num == SYS_ptrace && ret == -ENOSYS && g.count) {
		uint64_t zero = 0;   /* QEMU has no ptrace: btr record says so */
		__atomic_compare_exchange_n(&g.count[QC_PTRACE], &zero, (uint64_t)g.pid, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	}
	if (num == SYS_close || num == SYS_close_range)
		fds_close_after(vcpu);
	if (forking[vcpu]) {
		forking[vcpu] = 0;
		if (ret == 0) {
			struct thr *t = fork_child(vcpu);
			if (t)
				thr_forked(t);
			return;
		}
		if (!g.off)
			fork_parent_done(vcpu, g.thr[vcpu], ret);
	}
	if (g.off)
		return;
	struct thr *t = thr_get(vcpu);
	if (t->mm_nr != num)
		return;
	t->mm_nr = -1;
	if (num == SYS_wait4 && ret > 0 && t->mm_a[1]) {
		/* The parent saw a child end: its status, for `btr record`
		 * (which cannot wait for grandchildren). */
		int st;
		if (guest_read(t->mm_a[1], &st, sizeof(st)) == 0 && (WIFEXITED(st) || WIFSIGNALED(st))) {
			struct btr_record r = { .type = BTR_REC_PROCESS_EXIT };
			r.u.exit.pid = (uint32_t)ret;
			r.u.exit.code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
			r.u.exit.signo = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
			write_rec(&r);
		}
		return;
	}
	if (num == SYS_mmap && ret >= 0 && (uint64_t)ret < (1ull << 56))
		add_module(t->mm_path, (uint64_t)ret, t->mm_a[1], t->mm_a[5], (uint32_t)t->mm_a[2]);
	else if (num == SYS_munmap && ret == 0)
		remove_modules(t, t->mm_a[0], t->mm_a[1]);
}

/* ---- lifecycle ---- */

static void vcpu_init(qemu_plugin_id_t id, unsigned vcpu)
{
	if (vcpu >= MAX_VCPUS) {
		qemu_plugin_outs("btr: too many threads\n");
		abort();
	}
	if (g.off)
		return;
	/* linux-user creates the CPU of a new thread in the parent thread. */
	g.parent[vcpu] = vcpu ? gettid_() : 0;
	struct thr *old = g.thr[vcpu];
	if (old) {     /* index reused before the exit callback ran */
		thread_end(old, BTR_THREAD_END_UNKNOWN, 0);
		g.thr[vcpu] = NULL;
		if (!qs_owns(g.qs, old->gt))
			free(old->gt);
		old->gt = NULL;
		if (!qs_owns(g.qs, old))
			free(old);
	}
}

static void vcpu_exit(qemu_plugin_id_t id, unsigned vcpu)
{
	struct thr *t = vcpu < MAX_VCPUS && !g.off ? g.thr[vcpu] : NULL;
	if (!t)
		return;
	thread_end(t, BTR_THREAD_END_UNKNOWN, 0);
	g.thr[vcpu] = NULL;
	if (!qs_owns(g.qs, t->gt))
		free(t->gt);
	t->gt = NULL;
	if (!qs_owns(g.qs, t))
		free(t);
}

/* Called by qemu_plugin_user_exit() for exit_group and for death by a
 * signal (QEMU's dump_core_and_abort), with the other vcpus stopped. */
static void at_exit(qemu_plugin_id_t id, void *ud)
{
	if (g.off)
		return;
	uint32_t self = gettid_();
	struct btr_record ex = { .type = BTR_REC_PROCESS_EXIT };
	ex.u.exit.pid = g.pid;
	ex.u.exit.code = g.exit_called ? (int32_t)g.exit_code : -1;
	for (unsigned i = 0; i < MAX_VCPUS; i++) {
		struct thr *t = g.thr[i];
		if (!t || t->done)
			continue;
		struct qs_end e;
		ensure_space(t);
		counter_pin(t);
		flt_syscall(i, t, 1);
		qs_finish_thread(NULL, t, t->tid == self, &e);
		if (e.unlog)
			gt_unlog(t, e.unlog);
		if (t->tid == self) {
			ex.u.exit.tid = t->tid;
			ex.u.exit.ip = e.ip;
			ex.u.exit.addr = e.boundary;
		}
		/* exit_group: its status; else a signal (btr record knows which) */
		thread_end(t, g.exit_called ? BTR_THREAD_END_EXITED : BTR_THREAD_END_KILLED, ex.u.exit.code);
	}
	write_rec(&ex);
	flt_stats();
	snap_stats();
	pthread_mutex_lock(&g.lock);
	if (g.w && btr_trace_writer_close(g.w) < 0)
		qemu_plugin_outs("btr: cannot finish the trace file\n");
	g.w = NULL;
	if (g.gt_fd >= 0)
		close(g.gt_fd);
	g.gt_fd = -1;
	pthread_mutex_unlock(&g.lock);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *gt = NULL;
	if (info->system_emulation) {
		qemu_plugin_outs("btr: the plugin supports linux-user mode only\n");
		return -1;
	}
	Dl_info dl;
	if (!dladdr((void *)qemu_plugin_install, &dl) || !dl.dli_fname) {
		qemu_plugin_outs("btr: cannot find the plugin's own path\n");
		return -1;
	}
	size_t pl = (size_t)snprintf(g.plugarg, sizeof(g.plugarg), "%s", dl.dli_fname);
	int probe = 0;
	for (int i = 0; i < argc; i++)
		probe |= !strcmp(argv[i], "probe=on");
	if (!probe)
		qemu_stderr_filter();
	for (int i = 0; i < argc; i++) {
		uint64_t v;
		if (!strcmp(argv[i], "probe=on"))
			return 0;   /* `btr info`: the plugin loads, that is all */
		if (!strncmp(argv[i], "dir=", 4))
			g.dir = argv[i] + 4;
		else if (!strncmp(argv[i], "gt=", 3))
			gt = argv[i] + 3;
		else if (!strcmp(argv[i], "retcomp=off") || !strcmp(argv[i], "retcomp=0"))
			g.retcomp = 0;
		else if (!strcmp(argv[i], "retcomp=on") || !strcmp(argv[i], "retcomp=1"))
			g.retcomp = 1;
		else if (!strcmp(argv[i], "fork=on") || !strcmp(argv[i], "fork=off"))
			g.follow_fork = argv[i][6] == 'n';
		else if (!strcmp(argv[i], "exec=on") || !strcmp(argv[i], "exec=off"))
			g.follow_exec = argv[i][6] == 'n';
		else if (!strcmp(argv[i], "execd=1"))
			g.execd = 1;
		else if (!strncmp(argv[i], "qemu=", 5))
			snprintf(g.qemu, sizeof(g.qemu), "%s", argv[i] + 5);
		else if (sscanf(argv[i], "max=%" SCNu64, &v) == 1)
			g.max_procs = v;
		else if (!strncmp(argv[i], "filter=", 7) && flt_arg(argv[i] + 7) == 0)
			;
		else if (!strncmp(argv[i], "start=", 6) && flt_start_arg(argv[i] + 6, 0) == 0)
			;
		else if (!strncmp(argv[i], "stop=", 5) && flt_start_arg(argv[i] + 5, 1) == 0)
			;
		else if (snap_arg(argv[i]) == 0)
			;
		else {
			qemu_plugin_outs("btr: unknown plugin argument\n");
			return -1;
		}
		if (strcmp(argv[i], "execd=1"))
			pl += (size_t)snprintf(g.plugarg + pl, pl < sizeof(g.plugarg) ? sizeof(g.plugarg) - pl : 0,
					       ",%s", argv[i]);
	}
	pl += (size_t)snprintf(g.plugarg + pl, pl < sizeof(g.plugarg) ? sizeof(g.plugarg) - pl : 0, ",execd=1");
	if (!g.dir || pl >= sizeof(g.plugarg)) {
		qemu_plugin_outs("btr: plugin argument dir=PATH is required\n");
		return -1;
	}
	if (!g.qemu[0]) {
		ssize_t k = readlink("/proc/self/exe", g.qemu, sizeof(g.qemu) - 1);
		if (k <= 0) {
			qemu_plugin_outs("btr: cannot read /proc/self/exe\n");
			return -1;
		}
		g.qemu[k] = 0;
	}
	g.pid = (uint32_t)getpid();
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&zdec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64))) {
		qemu_plugin_outs("btr: cannot initialize Zydis\n");
		return -1;
	}
	qc_map();
	if (g.count && !g.execd) {
		__atomic_add_fetch(&g.count[QC_STARTED], 1, __ATOMIC_SEQ_CST);
		note_process();
	}
	if (proc_open(NULL) < 0) {
		if (!g.count || !g.execd) {
			qemu_plugin_outs("btr: cannot create the plugin trace or state file\n");
			return -1;
		}
		/* After an exec ($TMPDIR full): the program runs untraced
		 * rather than not at all; btr record says its trace is lost. */
		note_write_error(errno == ENOSPC || errno == EDQUOT ? -BTR_ERR_NOSPACE : -BTR_ERR_IO);
		note_pid(g.pid, QC_LOST_AFTER_EXEC);
		g.off = 1;
	}
	if (gt) {
		/* Appended to by every process (gt_flush); `btr record`
		 * truncated it before the start. */
		snprintf(g.gt_path, sizeof(g.gt_path), "%s", gt);
		g.gt_fd = qs_fd_high(open(gt, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
		if (g.gt_fd < 0) {
			qemu_plugin_outs("btr: cannot open the ground-truth file\n");
			return -1;
		}
	}
	counter_init();
	flt_init(counter_is_per_vcpu() ? tb_exec_own : tb_exec, thr_first);
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_exit_cb(id, vcpu_exit);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_vcpu_syscall_cb(id, syscall_cb);
	qemu_plugin_register_vcpu_syscall_ret_cb(id, syscall_ret_cb);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
