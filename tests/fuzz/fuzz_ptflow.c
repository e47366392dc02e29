/* fuzz_ptflow: random PT bytes against a fixed code image (the generated
 * functions of tests/ptgen.h at 0x400000, plus a page of zero bytes and a
 * page of 0xff at other addresses).  The decoder must never crash, hang
 * or read out of bounds; the stream is fed in two pieces (packets cut at
 * the boundary), with and without the instruction callback, and through
 * the parallel decoder.  With bit 4 of the first byte the event callback
 * switches between two images at every event, as a per-CPU reader does
 * at context switches (btr_ptflow_set_image, taken at ENABLE/PAGING). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/image.h"
#include "btr/ptflow.h"
#include "../ptgen.h"

static struct btr_image *img, *img2;
static struct btr_ptflow *cur_f;
static int switching;

static int on_insn(void *ctx, uint64_t ip, const struct btr_insn *in)
{
	(void)ip;
	(void)in;
	(*(uint64_t *)ctx)++;
	return 0;
}

static int on_branch(void *ctx, const struct btr_branch *b)
{
	(void)b;
	(*(uint64_t *)ctx)++;
	return 0;
}

static int on_event(void *ctx, const struct btr_flow_event *ev)
{
	uint64_t *n = ctx;
	(*n)++;
	if (switching && cur_f)
		btr_ptflow_set_image(cur_f, ((*n + ev->offset) & 1) ? img2 : img);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!img) {
		static struct ptgen g;
		ptgen_code(&g, 0x400000, 16);
		btr_image_new(&img);
		btr_image_add_bytes(img, g.code, g.code_size, g.base);
		static uint8_t zeros[4096], ones[4096];
		memset(ones, 0xff, sizeof(ones));
		btr_image_add_bytes(img, zeros, sizeof(zeros), 0x10000);
		btr_image_add_bytes(img, ones, sizeof(ones), 0x20000);
		/* the other process: other code at the same addresses */
		static struct ptgen g2;
		ptgen_code(&g2, 0x400040, 12);
		btr_image_new(&img2);
		btr_image_add_bytes(img2, g2.code, g2.code_size, g2.base);
		btr_image_add_bytes(img2, ones, sizeof(ones), 0x10000);
	}
	uint64_t n = 0;
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .cache_bits = 8 };
	if (size && (data[0] & 1)) {
		cfg.cpu_family = 6;
		cfg.cpu_model = (data[0] & 2) ? 0x5e : 0x5c;  /* Skylake / Goldmont errata */
		cfg.n_ip_filter = 1;
		cfg.ip_filter[0][0] = 0x400000;
		cfg.ip_filter[0][1] = 0x400fff;
		cfg.cpuid15_eax = 2;
		cfg.cpuid15_ebx = 100;
	}
	struct btr_ptflow *f;
	if (btr_ptflow_new(img, &cfg, &f))
		return 0;
	struct btr_ptflow_callbacks cb = { .branch = on_branch, .event = on_event, .ctx = &n };
	switching = size && (data[0] & 16);
	cur_f = f;
	if (size && (data[0] & 4))
		cb.insn = on_insn;
	size_t cut = size ? data[size - 1] % (size + 1) : 0;
	btr_ptflow_decode(f, data, cut, &cb);
	btr_ptflow_decode(f, data + cut, size - cut, &cb);
	cur_f = NULL;
	btr_ptflow_free(f);
	if (size && (data[0] & 8)) {
		cb.insn = NULL;
		btr_ptflow_decode_parallel(img, &cfg, data, size, 2, 64, &cb, NULL);
	}
	return 0;
}
