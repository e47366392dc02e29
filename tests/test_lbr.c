/* test_lbr.c - LBR snapshots to branches, MSR_LBR_SELECT <-> filters, and
 * a real Westmere LBR recording (autofdo test.lbr with its binary). */
#include <stdint.h>
#include <string.h>

#include "btr/btr.h"
#include "btr/lbr.h"
#include "btr/perfdata.h"
#include "check.h"

#define KB(k) (1u << (k))
#define ALL ((1u << BTR_KIND__COUNT) - 1)

struct sink {
	struct btr_branch b[64];
	int n;
	int stop_after;
};

static int collect(void *ctx, const struct btr_branch *b)
{
	struct sink *s = ctx;

	if (s->n < 64)
		s->b[s->n] = *b;
	s->n++;
	if (s->stop_after > 0 && s->n == s->stop_after)
		return 1;
	if (s->stop_after < 0 && s->n == 1)
		return s->stop_after;
	return 0;
}

/*   0x401000: 74 10             je   0x401012
 *   0x401012: e8 e9 0f 00 00    call 0x402000
 *   0x402000: c3                ret
 *   0x402001: 0f 01 d5          xend   (a TSX abort is reported "from" here) */
static struct btr_image *make_image(void)
{
	static const uint8_t a[] = {0x74, 0x10};
	static const uint8_t b[] = {0xe8, 0xe9, 0x0f, 0x00, 0x00};
	static const uint8_t c[] = {0xc3, 0x0f, 0x01, 0xd5};
	struct btr_image *img = NULL;

	if (btr_image_new(&img) < 0)
		return NULL;
	btr_image_add_bytes(img, a, sizeof(a), 0x401000);
	btr_image_add_bytes(img, b, sizeof(b), 0x401012);
	btr_image_add_bytes(img, c, sizeof(c), 0x402000);
	return img;
}

static void test_snapshot(struct btr_image *img)
{
	/* newest first, as perf reports them; slot 1 is unused (0 -> 0) */
	const struct btr_lbr_entry e[] = {
		{0xffffffff81000100ull, 0x401000, BTR_BF_PREDICTED, 0},               /* newest: iret-ish, kernel */
		{0, 0, 0, 0},
		{0x402001, 0x402100, BTR_BF_TSX_ABORT | BTR_BF_MISPRED, 0},          /* abort */
		{0x402000, 0x401017, BTR_BF_MISPRED | BTR_BF_CYCLES, 17},             /* ret */
		{0x401012, 0x402000, BTR_BF_PREDICTED | BTR_BF_CYCLES, 3},            /* call */
		{0x401000, 0x401012, BTR_BF_PREDICTED | BTR_BF_CYCLES | BTR_BF_KERNEL, 5}, /* oldest: je */
	};
	struct btr_rec_lbr rec = {.pid = 10, .tid = 11, .cpu = 2, .count = 6, .tsc = 99, .ip = 0x401000,
				  .entries = e};
	struct sink s;

	memset(&s, 0, sizeof(s));
	CHECK_EQ(btr_lbr_decode(&rec, img, collect, &s), 5);
	CHECK_EQ(s.n, 5);
	/* oldest first */
	CHECK_EQ(s.b[0].from, 0x401000);
	CHECK_EQ(s.b[0].kind, BTR_KIND_JCC);
	/* KERNEL comes from the address, never from the entry's flags */
	CHECK_EQ(s.b[0].flags, BTR_BF_TAKEN | BTR_BF_PREDICTED | BTR_BF_CYCLES);
	CHECK_EQ(s.b[0].cycles, 5);
	CHECK_EQ(s.b[0].tid, 11);
	CHECK_EQ(s.b[0].tsc, 0);
	CHECK_EQ(s.b[1].kind, BTR_KIND_CALL);
	CHECK_EQ(s.b[1].cycles, 3);
	CHECK_EQ(s.b[2].kind, BTR_KIND_RET);
	CHECK_EQ(s.b[2].flags, BTR_BF_TAKEN | BTR_BF_MISPRED | BTR_BF_CYCLES);
	CHECK_EQ(s.b[2].cycles, 17);
	CHECK_EQ(s.b[3].from, 0x402001);
	CHECK_EQ(s.b[3].kind, BTR_KIND_ASYNC);
	CHECK_EQ(s.b[3].flags, BTR_BF_TAKEN | BTR_BF_TSX_ABORT | BTR_BF_MISPRED);
	CHECK_EQ(s.b[3].cycles, 0);
	CHECK_EQ(s.b[4].from, 0xffffffff81000100ull);
	CHECK_EQ(s.b[4].kind, BTR_KIND_NONE);
	CHECK_EQ(s.b[4].flags, BTR_BF_TAKEN | BTR_BF_KERNEL | BTR_BF_PREDICTED);

	/* no image: same branches, unknown kinds */
	memset(&s, 0, sizeof(s));
	CHECK_EQ(btr_lbr_decode(&rec, NULL, collect, &s), 5);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(s.b[i].kind, BTR_KIND_NONE);
	CHECK_EQ(s.b[2].from, 0x402000);

	/* callback control */
	memset(&s, 0, sizeof(s));
	s.stop_after = 2;
	CHECK_EQ(btr_lbr_decode(&rec, img, collect, &s), 2);
	memset(&s, 0, sizeof(s));
	s.stop_after = -BTR_ERR_NOMEM;
	CHECK_EQ(btr_lbr_decode(&rec, img, collect, &s), -BTR_ERR_NOMEM);
	CHECK_EQ(s.n, 1);

	/* arguments */
	rec.count = 0;
	CHECK_EQ(btr_lbr_decode(&rec, img, collect, &s), 0);
	rec.entries = NULL;
	CHECK_EQ(btr_lbr_decode(&rec, img, collect, &s), 0);
	rec.count = 3;
	CHECK_EQ(btr_lbr_decode(&rec, img, collect, &s), -BTR_ERR_INVAL);
	CHECK_EQ(btr_lbr_decode(NULL, img, collect, &s), -BTR_ERR_INVAL);
	rec.entries = e;
	CHECK_EQ(btr_lbr_decode(&rec, img, NULL, &s), -BTR_ERR_INVAL);
}

static uint32_t kinds_of_class(int cls)
{
	uint32_t m = 0;

	for (int k = 0; k < BTR_KIND__COUNT; k++)
		if (btr_branch_kind_class((enum btr_branch_kind)k) == cls)
			m |= KB(k);
	return m;
}

static void test_select(void)
{
	struct btr_filter f, g;
	uint32_t sel;

	/* 0: capture everything */
	CHECK_EQ(btr_lbr_select_to_filter(0, &f), 0);
	CHECK_EQ(f.kinds, ALL);
	CHECK_EQ(f.priv, 3);
	CHECK_EQ(btr_filter_to_lbr_select(&f, &sel), 0);
	CHECK_EQ(sel, 0);

	/* each type bit suppresses exactly its class */
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++) {
		CHECK_EQ(btr_lbr_select_to_filter(1u << c, &f), 0);
		CHECK_EQ(f.kinds, (ALL & ~kinds_of_class(c)) & ~KB(BTR_KIND_NONE));
		CHECK_EQ(f.priv, 3);
		CHECK_EQ(btr_filter_to_lbr_select(&f, &sel), 0);
		CHECK_EQ(sel, 1u << c);
	}
	/* privilege bits: CPL_EQ_0 set = no kernel, CPL_NEQ_0 set = no user */
	CHECK_EQ(btr_lbr_select_to_filter(1u << BTR_LBR_CPL_EQ_0, &f), 0);
	CHECK_EQ(f.priv, 2);
	CHECK_EQ(f.kinds, ALL);
	CHECK_EQ(btr_lbr_select_to_filter(1u << BTR_LBR_CPL_NEQ_0, &f), 0);
	CHECK_EQ(f.priv, 1);

	/* perf's "-j any_call,u": keep near rel/ind calls and far branches, user
	 * only: suppress CPL_EQ_0, JCC, NEAR_RET, NEAR_IND_JMP, NEAR_REL_JMP */
	sel = 0x1 | 0x4 | 0x20 | 0x40 | 0x80;
	CHECK_EQ(btr_lbr_select_to_filter(sel, &f), 0);
	CHECK_EQ(btr_filter_parse("near_rel_call,near_ind_call,far_branch,user", &g), 0);
	CHECK_EQ(f.kinds, g.kinds);
	CHECK_EQ(f.priv, g.priv);
	CHECK_EQ(btr_filter_to_lbr_select(&g, &sel), 0);
	CHECK_EQ(sel, 0x1 | 0x4 | 0x20 | 0x40 | 0x80);

	/* EN_CALLSTACK is accepted and ignored; reserved bits are rejected */
	CHECK_EQ(btr_lbr_select_to_filter(BTR_LBR_SELECT_EN_CALLSTACK | 0x4, &f), 0);
	CHECK_EQ(f.kinds & KB(BTR_KIND_JCC), 0);
	g = f;
	CHECK_EQ(btr_lbr_select_to_filter(1u << 10, &f), -BTR_ERR_INVAL);
	CHECK_EQ(f.kinds, g.kinds);
	CHECK_EQ(btr_lbr_select_to_filter(0, NULL), -BTR_ERR_INVAL);

	/* round trip over every value of bits 0..8 */
	int bad = 0;
	for (uint32_t v = 0; v < (1u << 9); v++) {
		if (btr_lbr_select_to_filter(v, &f) || btr_filter_to_lbr_select(&f, &sel) != 0 || sel != v)
			bad++;
	}
	CHECK_EQ(bad, 0);

	/* inexact: "loop" alone needs the whole JCC class */
	CHECK_EQ(btr_filter_parse("loop", &f), 0);
	CHECK_EQ(btr_filter_to_lbr_select(&f, &sel), 1);
	CHECK_EQ(sel, 0x1f8);   /* everything but JCC (and both privileges) suppressed */
	CHECK_EQ(btr_filter_parse("syscall,kernel", &f), 0);
	CHECK_EQ(btr_filter_to_lbr_select(&f, &sel), 1);
	CHECK_EQ(sel, 0x0fe);
	CHECK_EQ(btr_filter_to_lbr_select(NULL, &sel), -BTR_ERR_INVAL);
	CHECK_EQ(btr_filter_to_lbr_select(&f, NULL), -BTR_ERR_INVAL);
}

/* ---- real data ---- */

struct real {
	struct btr_image *img;
	uint64_t n, by_kind[BTR_KIND__COUNT], outside;
	uint64_t pairs, walk_ok, walk_bad, pred, mispred;
	struct btr_branch prev;
	int have_prev;
};

/* Between two consecutive branches of one snapshot the CPU executed
 * straight-line code: walking from prev.to must reach b.from through
 * non-branches and not-taken conditionals only.  This fails if the order
 * or the classification is wrong. */
static int walk(const struct btr_image *img, uint64_t ip, uint64_t until)
{
	for (int i = 0; i < 4096; i++) {
		struct btr_insn in;

		if (ip == until)
			return 1;
		if (btr_insn_decode_image(img, ip, BTR_MODE_64, &in) < 0)
			return 0;
		if (in.kind != BTR_KIND_NONE && !(in.flags & BTR_INSN_COND))
			return 0;
		ip += in.len;
	}
	return 0;
}

static int real_cb(void *ctx, const struct btr_branch *b)
{
	struct real *r = ctx;
	const uint8_t *p;
	size_t avail;

	r->n++;
	r->by_kind[b->kind]++;
	if (btr_image_map(r->img, b->from, &p, &avail) < 0)
		r->outside++;
	if (b->flags & BTR_BF_PREDICTED)
		r->pred++;
	if (b->flags & BTR_BF_MISPRED)
		r->mispred++;
	if (r->have_prev && r->prev.kind != BTR_KIND_NONE && b->kind != BTR_KIND_NONE) {
		r->pairs++;
		if (walk(r->img, r->prev.to, b->from))
			r->walk_ok++;
		else
			r->walk_bad++;
	}
	r->prev = *b;
	r->have_prev = 1;
	return 0;
}

static void test_real(void)
{
	const char *data = BTR_SHARED_DIR "/traces/autofdo/test.lbr";
	const char *bin = BTR_SHARED_DIR "/traces/autofdo/test.binary";
	struct btr_perf_reader *pr;
	struct btr_record rec;
	struct real r;
	uint64_t snaps = 0, entries = 0;
	int ret;

	if (btr_perf_reader_new(data, &pr) < 0) {
		printf("real LBR data absent: %s\n", data);
		return;
	}
	memset(&r, 0, sizeof(r));
	CHECK_EQ(btr_image_new(&r.img), 0);
	CHECK_EQ(btr_image_add_elf(r.img, bin, 0, 0), 0);
	while ((ret = btr_perf_read(pr, &rec)) == 0) {
		if (rec.type != BTR_REC_LBR)
			continue;
		snaps++;
		entries += rec.u.lbr.count;
		r.have_prev = 0;
		CHECK(btr_lbr_decode(&rec.u.lbr, r.img, real_cb, &r) >= 0);
	}
	CHECK_EQ(ret, -BTR_ERR_EOS);
	btr_perf_reader_free(pr);

	printf("autofdo test.lbr: %" PRIu64 " snapshots, %" PRIu64 " branches, jcc %" PRIu64
	       " call %" PRIu64 " ret %" PRIu64 " jmp %" PRIu64 " jmp_ind %" PRIu64 " unknown %" PRIu64
	       " async %" PRIu64 "; walks %" PRIu64 " ok, %" PRIu64 " bad\n",
	       snaps, r.n, r.by_kind[BTR_KIND_JCC], r.by_kind[BTR_KIND_CALL], r.by_kind[BTR_KIND_RET],
	       r.by_kind[BTR_KIND_JMP], r.by_kind[BTR_KIND_JMP_IND], r.by_kind[BTR_KIND_NONE],
	       r.by_kind[BTR_KIND_ASYNC], r.walk_ok, r.walk_bad);

	CHECK(snaps > 1000);
	CHECK_EQ(r.n, entries);              /* 16-deep stacks, no empty slots */
	CHECK_EQ(r.n, snaps * 16);
	/* unknown kind exactly for the branches outside test.binary */
	CHECK_EQ(r.by_kind[BTR_KIND_NONE], r.outside);
	CHECK(r.outside * 10 < r.n);
	/* Westmere reports predicted or mispredicted for every entry */
	CHECK_EQ(r.pred + r.mispred, r.n);
	CHECK(r.by_kind[BTR_KIND_JCC] > r.n / 2);
	CHECK(r.by_kind[BTR_KIND_CALL] > 0 && r.by_kind[BTR_KIND_RET] > 0);
	/* a user program's trace: no interrupts inside test.binary's code */
	CHECK(r.by_kind[BTR_KIND_ASYNC] * 1000 <= r.n);
	CHECK(r.pairs > r.n / 2);
	CHECK(r.walk_bad * 1000 <= r.pairs);
	btr_image_free(r.img);
}

int main(void)
{
	struct btr_image *img = make_image();

	CHECK(img != NULL);
	if (!img)
		return check_done();
	test_snapshot(img);
	test_select();
	test_real();
	btr_image_free(img);
	return check_done();
}
