/* sys_count.c - an independent instruction counter for whole-system
 * recording (tests/cli_system.sh): a QEMU TCG plugin for
 * qemu-system-x86_64 (plugin API v4) loaded into the same run as btr's
 * system plugin.  No btr code, no PT, no System.map, no guest registers:
 * one callback per executed instruction.
 *
 * What counts: an instruction that completed.  An instruction is taken as
 * completed when the next one that starts is the next instruction of its
 * own TB, or the first of a TB when it was the last of its TB (so an
 * exception mid-TB, whose instruction restarts after the handler, is not
 * counted twice; one at the last instruction of a TB is).  A rep string
 * instruction counts once however many iterations it runs.
 *
 * Classes, by address (the kernel of x86-64 Linux runs in the upper half):
 * "kernel" upper-half instructions, "user" lower-half ones after the first
 * upper-half one (before it: firmware, setup and the decompressor).
 *
 * Use: qemu-system-x86_64 ... -plugin btr-sys-count.so,out=FILE
 * Output at exit: "kernel N\nuser N\n". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = BTR_QEMU_PLUGIN_VERSION_NEW;

struct insn {
	uint64_t pc;
	uint32_t idx, n;    /* index in its TB, the TB's instruction count */
	int rep;
};

static const struct insn *prev;
static int seen_high;
static uint64_t count[2];   /* 0 kernel, 1 user */
static const char *out;

static void commit(const struct insn *p)
{
	int high = p->pc >= 0xffff800000000000ull;
	if (high)
		seen_high = 1;
	if (high || seen_high)
		count[!high]++;
}

static void on_insn(unsigned vcpu, void *ud)
{
	const struct insn *cur = ud;
	(void)vcpu;
	if (prev) {
		int done = (cur->idx == 0 && prev->idx == prev->n - 1) || cur->idx == prev->idx + 1;
		if (done && !(prev->rep && cur->pc == prev->pc))
			commit(prev);
	}
	prev = cur;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		struct insn *d = calloc(1, sizeof(*d));
		if (!d)
			abort();
		const uint8_t *b = qemu_plugin_insn_data(in);
		size_t k = qemu_plugin_insn_size(in), j = 0;
		d->pc = qemu_plugin_insn_vaddr(in);
		d->idx = (uint32_t)i;
		d->n = (uint32_t)n;
		/* prefixes, then a string opcode after F2/F3 */
		int rep = 0;
		while (j < k && (b[j] == 0xf2 || b[j] == 0xf3 || b[j] == 0x66 || b[j] == 0x67 ||
				 (b[j] >= 0x40 && b[j] <= 0x4f) || b[j] == 0x2e || b[j] == 0x3e || b[j] == 0x26 ||
				 b[j] == 0x64 || b[j] == 0x65 || b[j] == 0x36)) {
			rep |= b[j] == 0xf2 || b[j] == 0xf3;
			j++;
		}
		d->rep = rep && j < k && ((b[j] >= 0xa4 && b[j] <= 0xa7) || (b[j] >= 0xaa && b[j] <= 0xaf) ||
					  (b[j] >= 0x6c && b[j] <= 0x6f));
		qemu_plugin_register_vcpu_insn_exec_cb(in, on_insn, QEMU_PLUGIN_CB_NO_REGS, d);
	}
}

static void at_exit(qemu_plugin_id_t id, void *ud)
{
	(void)id;
	(void)ud;
	/* the last instruction (the power-off's port write) completed */
	if (prev)
		commit(prev);
	FILE *f = fopen(out, "w");
	if (!f)
		return;
	fprintf(f, "kernel %" PRIu64 "\nuser %" PRIu64 "\n", count[0], count[1]);
	fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	if (!info->system_emulation || argc != 1 || strncmp(argv[0], "out=", 4))
		return -1;
	out = argv[0] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
