/* floor_plugin.c - the cheapest useful QEMU plugin: the floor of
 * plugin-based recording, for bench/bench_record.sh.
 *
 * Per executed translation block it stores the block's address into a
 * per-vcpu buffer (wrapping, nothing written out): the least any
 * TB-granular recorder must do.  btr's real plugin (lib/capture/
 * qemu_plugin.c) does this plus exact instruction positions and PT
 * encoding; the difference between the two is what the recorder's own
 * work costs.  Built by bench/bench_record.sh only.
 */
#include <stddef.h>
#include <stdint.h>
#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = BTR_QEMU_PLUGIN_VERSION;

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

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_exec, QEMU_PLUGIN_CB_NO_REGS,
					     (void *)(uintptr_t)qemu_plugin_tb_vaddr(tb));
}

static void on_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	sink = vc[0].ring[0] + vc[0].pos;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv)
{
	(void)info;
	(void)argc;
	(void)argv;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
	qemu_plugin_register_atexit_cb(id, on_exit, NULL);
	return 0;
}
