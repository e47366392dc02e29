/* qemu_counter.c - where inside a block a thread stopped: the counter on
 * the instructions that can fault.  Part of the QEMU plugin
 * (qemu_plugin.h); private to agents/qemu/.
 *
 * A faulting instruction delivers its signal in the middle of a TB; the
 * TB-exec callback sees only the handler's first TB next.  So each
 * instruction that can stop a TB early (may_stop) and the last one of
 * each TB are counted as they start, and the handler case of resolve()
 * (and at_exit, and `btr record` finishing a thread that died) asks the
 * counter how far the thread got.  Two forms, by the plugin API of the
 * QEMU the plugin is loaded into:
 *
 *  - API v1 (QEMU 7.2): inline operations add to one fixed address, so
 *    the counter is the TB's own (struct tbinfo's count, in the shared
 *    state file), added to by every thread that runs the TB.  Another
 *    thread running the same TB at the same moment disturbs it, which
 *    count_is_own detects (each thread stores itself in the TB's `last`
 *    when it enters or leaves it); the place is then lost and resolve()
 *    says so (an OVF, BTR_LOSS_FLOW when read).
 *
 *  - API v4 (QEMU 9.2 and later): a scoreboard, one slot per vcpu, which
 *    only that vcpu's thread writes (in linux-user each guest thread is a
 *    host thread with a vcpu of its own).  Each counting instruction
 *    stores its own guest address into the running vcpu's slot
 *    (QEMU_PLUGIN_INLINE_STORE_U64 per vcpu: an inline store, no call), so
 *    the slot names the last counting instruction this thread started,
 *    whatever other threads run: the place of a fault is always known and
 *    nothing is ever lost to a race.  The slot lives in QEMU's memory, not
 *    in the state file: at_exit (which QEMU 10 runs for exit_group and for
 *    death by a signal) turns it into the TB counter's form for
 *    qs_finish_thread (counter_pin); only a process killed outright
 *    (SIGKILL) ends its last block without it, as docs/record.md says of
 *    that case anyway.
 */
#include "qemu_plugin.h"

static int per_vcpu;
static qemu_plugin_u64 slot;

int counter_init(void)
{
	if (qemu_plugin_version >= BTR_QEMU_PLUGIN_VERSION_NEW && qemu_plugin_scoreboard_new &&
	    qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu && qemu_plugin_u64_get) {
		slot.score = qemu_plugin_scoreboard_new(sizeof(uint64_t));
		slot.offset = 0;
		per_vcpu = slot.score != NULL;
	}
	return per_vcpu;
}

int counter_is_per_vcpu(void)
{
	return per_vcpu;
}

void counter_insn(struct qemu_plugin_insn *in, struct tbinfo *b, uint64_t va)
{
	if (per_vcpu)
		qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(in, QEMU_PLUGIN_INLINE_STORE_U64, slot, va);
	else
		qemu_plugin_register_vcpu_insn_exec_inline(in, QEMU_PLUGIN_INLINE_ADD_U64, &b->count, 1);
}

/* Does @p's counter hold only thread @t's increments since @t entered @p
 * (API v1)?  Another thread that ran @p during @t's stay either left it
 * (so `last` is not @t) or is still in it (its prev is @p). */
static int count_is_own(const struct thr *t, const struct tbinfo *p)
{
	if (__atomic_load_n(&p->last, __ATOMIC_ACQUIRE) != t)
		return 0;
	for (unsigned i = 0; i < MAX_VCPUS; i++) {
		const struct thr *x = g.thr[i];
		if (x && x != t && !x->done && __atomic_load_n(&x->prev, __ATOMIC_RELAXED) == p)
			return 0;
	}
	return 1;
}

/* API v4: the position (1-based) among @p's counting instructions of the
 * one @t's slot names; @p->n_s (all of them: completed) when the slot
 * names none of them. */
static uint64_t slot_position(const struct thr *t, const struct tbinfo *p)
{
	uint64_t ip = qemu_plugin_u64_get(slot, t->vcpu);
	for (uint32_t j = 0; j < p->n_s; j++)
		if (insn_addr(p, p->off[p->n + j]) == ip)
			return j + 1;
	return p->n_s;
}

uint64_t counter_started(const struct thr *t, const struct tbinfo *p)
{
	if (per_vcpu)
		return qs_started(p, slot_position(t, p));
	if (!count_is_own(t, p))
		return 0;
	return qs_started(p, p->count - t->base);
}

void counter_pin(struct thr *t)
{
	struct tbinfo *p = t->prev;
	if (per_vcpu && p)
		t->base = p->count - slot_position(t, p);   /* p->count - t->base: the position */
}
