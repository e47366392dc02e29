/* insn_image.c - instruction decoding at an address of a struct btr_image.
 *
 * Apart from lib/image/insn.c so that code which decodes instruction bytes only
 * (the QEMU plugin, agents/qemu/qemu_plugin.c) does not link the image and
 * with it libdw, libelf and libstdc++: every traced process loads the
 * plugin, and those libraries cost it about 1 ms of dynamic linking.
 */
#include "btr/insn.h"
#include "btr/image.h"
#include "internal.h"
#include "insn_priv.h"

#include <string.h>
#include <Zydis/Zydis.h>

int btr_insn_decode_image(const struct btr_image *img, uint64_t ip,
			  enum btr_exec_mode mode, struct btr_insn *out)
{
	const uint8_t *p;
	size_t avail;
	int ret;

	if (!img || !out)
		return -BTR_ERR_INVAL;
	ret = btr_image_map(img, ip, &p, &avail);
	if (ret < 0)
		return ret;
	ret = btr_insn_decode(p, avail, ip, mode, out);
	if (ret != -BTR_ERR_TRUNCATED || avail >= ZYDIS_MAX_INSTRUCTION_LENGTH)
		return ret;

	/* The section ends inside the instruction.  Code may continue in an
	 * adjacent section (e.g. two segments of one file), so gather up to
	 * 15 bytes across section boundaries before giving up. */
	uint8_t buf[ZYDIS_MAX_INSTRUCTION_LENGTH];
	size_t have = 0;
	while (have < sizeof(buf)) {
		if (btr_image_map(img, ip + have, &p, &avail) < 0 || !avail)
			break;
		if (avail > sizeof(buf) - have)
			avail = sizeof(buf) - have;
		memcpy(buf + have, p, avail);
		have += avail;
	}
	return btr_insn_decode(buf, have, ip, mode, out);
}

void btr__classify_taken(const struct btr_image *img, struct btr_branch *b)
{
	struct btr_insn in;

	b->flags |= BTR_BF_TAKEN;
	if (b->from >= BTR_KERNEL_START)
		b->flags |= BTR_BF_KERNEL;
	if (b->to >= BTR_KERNEL_START)
		b->flags |= BTR_BF_TO_KERNEL;

	b->kind = BTR_KIND_NONE;
	if (!img || btr_insn_decode_image(img, b->from, BTR_MODE_64, &in) < 0)
		return;
	if (in.kind == BTR_KIND_NONE || ((in.flags & BTR_INSN_DIRECT) && in.target != b->to))
		b->kind = BTR_KIND_ASYNC;
	else
		b->kind = in.kind;
}
