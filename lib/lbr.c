/* lbr.c - LBR snapshots to branches, MSR_LBR_SELECT <-> filters. */
#include "btr/lbr.h"
#include "btr/image.h"
#include "internal.h"
#include "image/insn_priv.h"

#include <string.h>

/* The entry flags we pass through; everything else (TAKEN, KERNEL...) is
 * derived here, never trusted from the record. */
#define LBR_ENTRY_FLAGS (BTR_BF_MISPRED | BTR_BF_PREDICTED | BTR_BF_TSX_ABORT)

int btr_lbr_decode(const struct btr_rec_lbr *rec, const struct btr_image *img,
		   btr_branch_fn cb, void *ctx)
{
	int delivered = 0;

	if (!rec || !cb || (!rec->entries && rec->count))
		return -BTR_ERR_INVAL;

	for (uint32_t i = rec->count; i-- > 0;) {
		const struct btr_lbr_entry *e = &rec->entries[i];
		struct btr_branch b;
		int ret;

		if (!e->from && !e->to)
			continue;
		memset(&b, 0, sizeof(b));
		b.from = e->from;
		b.to = e->to;
		b.tid = rec->tid;
		b.flags = (uint16_t)(e->flags & LBR_ENTRY_FLAGS);
		if (e->flags & BTR_BF_CYCLES) {
			b.flags |= BTR_BF_CYCLES;
			b.cycles = e->cycles;
		}
		btr__classify_taken(img, &b);

		ret = cb(ctx, &b);
		if (delivered < INT32_MAX)
			delivered++;
		if (ret < 0)
			return ret;
		if (ret > 0)
			break;
	}
	return delivered;
}

/* Kinds of LBR type class @cls (JCC..FAR_BRANCH). */
static uint32_t class_kinds(int cls)
{
	uint32_t m = 0;

	for (int k = 0; k < BTR_KIND__COUNT; k++)
		if (btr_branch_kind_class((enum btr_branch_kind)k) == cls)
			m |= 1u << k;
	return m;
}

#define TYPE_BITS (((1u << BTR_LBR__COUNT) - 1) & ~3u)

int btr_lbr_select_to_filter(uint32_t sel, struct btr_filter *out)
{
	uint32_t kinds = 0;

	if (!out || (sel & ~BTR_LBR_SELECT_MASK))
		return -BTR_ERR_INVAL;
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++)
		if (!(sel & (1u << c)))
			kinds |= class_kinds(c);
	if (!(sel & TYPE_BITS))
		kinds |= 1u << BTR_KIND_NONE;
	out->kinds = kinds;
	out->priv = (uint8_t)(((sel & (1u << BTR_LBR_CPL_EQ_0)) ? 0 : 1u) |
			      ((sel & (1u << BTR_LBR_CPL_NEQ_0)) ? 0 : 2u));
	return 0;
}

int btr_filter_to_lbr_select(const struct btr_filter *f, uint32_t *lbr_select)
{
	uint32_t sel = 0;
	int inexact = 0;

	if (!f || !lbr_select)
		return -BTR_ERR_INVAL;
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++) {
		uint32_t ck = class_kinds(c), have = f->kinds & ck;

		if (!have)
			sel |= 1u << c;
		else if (have != ck)
			inexact = 1;
	}
	if (!(f->priv & 1u))
		sel |= 1u << BTR_LBR_CPL_EQ_0;
	if (!(f->priv & 2u))
		sel |= 1u << BTR_LBR_CPL_NEQ_0;

	/* Round trip through btr_lbr_select_to_filter tells whether the
	 * hardware filter means exactly @f (this also covers NONE). */
	struct btr_filter back;
	btr_lbr_select_to_filter(sel, &back);
	if (back.kinds != f->kinds || back.priv != (f->priv & 3u))
		inexact = 1;
	*lbr_select = sel;
	return inexact;
}
