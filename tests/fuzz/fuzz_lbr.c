/* fuzz_lbr.c - libFuzzer target: LBR snapshots and the MSR_LBR_SELECT
 * filter conversions.  The input is read as a snapshot (count, then
 * from/to/flags/cycles per entry) decoded against a fixed code image and
 * against none; then the first bytes as an LBR_SELECT value, converted to
 * a filter and back.  Entries are copied to an exact-size heap array so
 * ASan sees any read past the snapshot. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/btr.h"

/* xor eax,eax; inc eax; cmp eax,3; jne -7; call +2; syscall; ret; jmp [rax] */
static const uint8_t code[] = { 0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x03, 0x75, 0xf9,
				0xe8, 0x02, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3, 0xff, 0x20 };

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct btr_filter *f = ctx;
	if (b->kind >= BTR_KIND__COUNT)
		abort();
	/* every delivered branch is taken */
	if (!(b->flags & BTR_BF_TAKEN))
		abort();
	(void)btr_filter_match(f, b);
	return 0;
}

static uint64_t take(const uint8_t **p, const uint8_t *end, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n && *p < end; i++)
		v |= (uint64_t)*(*p)++ << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct btr_image *img;
	if (!img) {
		btr_image_new(&img);
		btr_image_add_bytes(img, code, sizeof(code), 0x1000);
	}
	const uint8_t *p = data, *end = data + size;
	uint32_t sel = (uint32_t)take(&p, end, 2);
	uint32_t count = (uint32_t)take(&p, end, 1);
	struct btr_lbr_entry *ent = malloc((count ? count : 1) * sizeof(*ent));
	if (!ent)
		return 0;
	for (uint32_t i = 0; i < count; i++) {
		uint8_t small = (uint8_t)take(&p, end, 1);
		/* mostly addresses inside the code, sometimes anything */
		if (small & 0x80) {
			ent[i].from = take(&p, end, 8);
			ent[i].to = take(&p, end, 8);
		} else {
			ent[i].from = 0x1000 + take(&p, end, 1) % 24;
			ent[i].to = 0x1000 + take(&p, end, 1) % 24;
		}
		ent[i].flags = (uint32_t)take(&p, end, 1);
		ent[i].cycles = (uint32_t)take(&p, end, 2);
	}
	struct btr_rec_lbr rec = { .pid = 1, .tid = 2, .cpu = -1, .count = count, .entries = ent };
	struct btr_filter f;
	if (btr_lbr_select_to_filter(sel & 0x3ff, &f) != 0)
		abort();
	uint32_t back;
	int r = btr_filter_to_lbr_select(&f, &back);
	if (r < 0)
		abort();
	/* the round trip keeps the type bits that were suppressed */
	if (r == 0 && (back & 0x1ff) != (sel & 0x1ff))
		abort();
	int n1 = btr_lbr_decode(&rec, img, on_branch, &f);
	int n2 = btr_lbr_decode(&rec, NULL, on_branch, &f);
	if (n1 < 0 || n1 != n2 || (uint32_t)n1 > count)
		abort();
	free(ent);
	return 0;
}
