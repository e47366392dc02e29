/* fuzz_insn.c - libFuzzer target: arbitrary bytes through the instruction
 * classifier (fast path and Zydis path must agree exactly, in every mode),
 * the formatter, BTS decoding and filter parsing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/btr.h"

int btr__insn_decode_zydis(const uint8_t *bytes, size_t size, uint64_t ip,
			   enum btr_exec_mode mode, struct btr_insn *out);

static int cb(void *ctx, const struct btr_branch *b)
{
	(void)ctx;
	return b->kind >= BTR_KIND__COUNT ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int m = BTR_MODE_64; m <= BTR_MODE_16; m++) {
		struct btr_insn a, z;
		char text[96];
		size_t n = size < 16 ? size : 16;
		int ra = btr_insn_decode(data, n, 0x7ffff7a00000ull, (enum btr_exec_mode)m, &a);
		int rz = btr__insn_decode_zydis(data, n, 0x7ffff7a00000ull, (enum btr_exec_mode)m, &z);

		if (ra != rz)
			abort();
		if (ra > 0 && (a.len != z.len || a.kind != z.kind || a.flags != z.flags ||
			       a.target != z.target || a.imm != z.imm || a.len > n))
			abort();
		btr_insn_format(data, n, 0x1000, (enum btr_exec_mode)m, text, sizeof(text));
		if (strlen(text) >= sizeof(text))
			abort();
	}

	/* BTS: the bytes as records, classified against themselves as code */
	struct btr_image *img;
	if (btr_image_new(&img) == 0) {
		btr_image_add_bytes(img, data, size, 0x401000);
		btr_bts_decode(data, size, img, 1, cb, NULL);
		btr_image_free(img);
	}

	/* filter parser on a NUL-terminated copy */
	char *expr = malloc(size + 1);
	if (expr) {
		struct btr_filter f;
		memcpy(expr, data, size);
		expr[size] = '\0';
		btr_filter_parse(expr, &f);
		free(expr);
	}
	return 0;
}
