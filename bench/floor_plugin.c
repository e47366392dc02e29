/* floor_plugin.c - the cheapest useful QEMU plugin: the floor of
 * plugin-based recording, for bench/bench_record.sh.
 *
 * Per executed translation block it stores the block's address into a
 * per-vcpu buffer (wrapping, nothing written out): the least any
 * TB-granular recorder must do.  btr's real plugin (agents/qemu/
 * qemu_plugin.c) does this plus exact instruction positions and PT
 * encoding; the difference between the two is what the recorder's own
 * work costs.  Built by bench/bench_record.sh only.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "qemu_plugin_api.h"

BTR_QEMU_PLUGIN_VERSION_DEFINE;

#define RING (1u << 16)
#define VCPUS 64
/* One ring per vcpu, like btr's per-vcpu thread states.  Not __thread:
 * in a dlopen'ed plugin that is general-dynamic TLS, a __tls_get_addr
 * call on every access, which once made this floor look 1.4x slower
 * than it is. */
static struct {
	unsigned pos;
	uint64_t ring[RING];
} vc[VCPUS];
/* Read once at exit so that the stores cannot be optimized away. */
static volatile uint64_t sink;

static void on_exec(unsigned int vcpu, void *udata)
{
	unsigned v = vcpu & (VCPUS - 1);
	vc[v].ring[vc[v].pos++ & (RING - 1)] = (uint64_t)(uintptr_t)udata;
}

/* With the argument "count=on": also the least btr's exactness needs.  The
 * last instruction of each TB adds 1 to the TB's counter (an inline add,
 * no call), and the callback checks that the previous TB ran to its end
 * (counter - value at entry == 1) before storing: what any recorder must
 * do to place a fault or signal inside a block with plugin API v1, which
 * has no register reads. */
struct tb {
	uint64_t count;
	uint64_t pc;
};
static struct {
	struct tb *prev;
	uint64_t base;
	uint64_t odd;
} cs[VCPUS];

static void on_exec_count(unsigned int vcpu, void *udata)
{
	unsigned v = vcpu & (VCPUS - 1);
	struct tb *cur = udata, *p = cs[v].prev;
	if (p && p->count - cs[v].base != 1)
		cs[v].odd++;
	vc[v].ring[vc[v].pos++ & (RING - 1)] = cur->pc;
	cs[v].prev = cur;
	cs[v].base = cur->count;
}

static int count_mode;
/* Plugin API v4: what btr's plugin needs there instead (qemu_counter.c):
 * the last instruction stores the TB's address into the vcpu's own
 * scoreboard slot (an inline store, no check per TB). */
static qemu_plugin_u64 slot;

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	if (!count_mode) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS,
						     (void *)(uintptr_t)qemu_plugin_tb_vaddr(tb));
		return;
	}
	/* Never freed: TBs live as long as the process (a floor, not a tool). */
	struct tb *t = calloc(1, sizeof(*t));
	if (!t)
		abort();
	t->pc = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	if (slot.score) {
		if (n)
			qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu(qemu_plugin_tb_get_insn(tb, n - 1),
									    QEMU_PLUGIN_INLINE_STORE_U64, slot, t->pc);
		qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)t->pc);
		return;
	}
	if (n)
		qemu_plugin_register_vcpu_insn_exec_inline(qemu_plugin_tb_get_insn(tb, n - 1),
							   QEMU_PLUGIN_INLINE_ADD_U64, &t->count, 1);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec_count, QEMU_PLUGIN_CB_NO_REGS, t);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	sink = vc[0].ring[0] + vc[0].pos + cs[0].odd;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv)
{
	(void)info;
	/* QEMU 7.2 hands a bare "count" over as "count=on": before this
	 * accepted both, the count row of bench_record.sh and speed_table.sh
	 * measured the plain floor. */
	count_mode = argc > 0 && (!strcmp(argv[0], "count") || !strcmp(argv[0], "count=on"));
	if (count_mode && qemu_plugin_version >= BTR_QEMU_PLUGIN_VERSION_NEW && qemu_plugin_scoreboard_new &&
	    qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu)
		slot.score = qemu_plugin_scoreboard_new(sizeof(uint64_t));
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
