/* test_bts.c - BTS record decoding against an image of real instruction
 * bytes: kinds, flags, skipped padding, truncation, callback control. */
#include <stdint.h>
#include <string.h>

#include "btr/btr.h"
#include "check.h"

#define KSTART 0xffffffff81000000ull

struct sink {
	struct btr_branch b[64];
	int n;
	int stop_after;  /* >0: return 1 at that branch; <0: return -code */
};

static int collect(void *ctx, const struct btr_branch *b)
{
	struct sink *s = ctx;

	if (s->n < 64)
		s->b[s->n] = *b;
	s->n++;
	if (s->stop_after > 0 && s->n == s->stop_after)
		return 1;
	if (s->stop_after < 0 && s->n == 2)
		return s->stop_after;
	return 0;
}

/* The code the synthetic records refer to:
 *   0x401000: 74 10              je   0x401012
 *   0x401012: e8 e9 0f 00 00     call 0x402000
 *   0x402000: c3                 ret
 *   0x402001: 90                 nop
 *   0x402002: ff e0              jmp  rax
 *   0x402004: 0f 05              syscall
 *   0x402006: e2 f8              loop 0x402000
 */
static struct btr_image *make_image(void)
{
	static const uint8_t a[] = {0x74, 0x10};
	static const uint8_t b[] = {0xe8, 0xe9, 0x0f, 0x00, 0x00};
	static const uint8_t c[] = {0xc3, 0x90, 0xff, 0xe0, 0x0f, 0x05, 0xe2, 0xf8};
	struct btr_image *img = NULL;

	if (btr_image_new(&img) < 0)
		return NULL;
	if (btr_image_add_bytes(img, a, sizeof(a), 0x401000) < 0 ||
	    btr_image_add_bytes(img, b, sizeof(b), 0x401012) < 0 ||
	    btr_image_add_bytes(img, c, sizeof(c), 0x402000) < 0) {
		btr_image_free(img);
		return NULL;
	}
	return img;
}

struct exp {
	uint64_t from, to;
	int predicted;
	int kind;
	uint16_t flags;   /* expected flags (TAKEN implied) */
};

static const struct exp recs[] = {
	{0x401000, 0x401012, 1, BTR_KIND_JCC, 0},
	{0x401012, 0x402000, 0, BTR_KIND_CALL, 0},
	{0x402000, 0x401017, 1, BTR_KIND_RET, 0},
	{0x402001, KSTART, 0, BTR_KIND_ASYNC, BTR_BF_TO_KERNEL},          /* interrupt at a nop */
	{KSTART + 0x10, 0x402002, 0, BTR_KIND_NONE, BTR_BF_KERNEL},       /* no kernel code in image */
	{0x402002, 0x500000, 0, BTR_KIND_JMP_IND, 0},
	{0x402004, KSTART + 0x800000, 0, BTR_KIND_SYSCALL, BTR_BF_TO_KERNEL},
	{0x401000, 0x500000, 0, BTR_KIND_ASYNC, 0},                       /* je does not go there */
	{0, 0, 0, -1, 0},                                                 /* padding: skipped */
	{0x700000, 0x401000, 1, BTR_KIND_NONE, 0},                        /* unmapped */
	{0x402006, 0x402000, 0, BTR_KIND_LOOP, 0},
};
#define NRECS (sizeof(recs) / sizeof(recs[0]))
#define NDELIV (NRECS - 1)

static size_t build(uint8_t *buf)
{
	for (size_t i = 0; i < NRECS; i++)
		btr_bts_encode(recs[i].from, recs[i].to, recs[i].predicted, buf + i * 24);
	return NRECS * 24;
}

static void check_sink(const struct sink *s, int with_image, uint32_t tid)
{
	int j = 0;

	for (size_t i = 0; i < NRECS && j < s->n; i++) {
		const struct btr_branch *b = &s->b[j];
		uint16_t want = BTR_BF_TAKEN | recs[i].flags | (recs[i].predicted ? BTR_BF_PREDICTED : 0);
		int kind = with_image ? recs[i].kind : BTR_KIND_NONE;

		if (recs[i].kind < 0)
			continue;
		CHECK_EQ(b->from, recs[i].from);
		CHECK_EQ(b->to, recs[i].to);
		CHECK_EQ(b->flags, want);
		CHECK_EQ(b->kind, kind);
		if (b->kind != kind)
			fprintf(stderr, "record %zu: kind %s, expected %s\n", i,
				btr_branch_kind_name((enum btr_branch_kind)b->kind),
				btr_branch_kind_name((enum btr_branch_kind)kind));
		CHECK_EQ(b->tid, tid);
		CHECK_EQ(b->tsc, 0);
		CHECK_EQ(b->cycles, 0);
		j++;
	}
}

static void test_decode(struct btr_image *img)
{
	uint8_t buf[NRECS * 24 + 32];
	struct sink s;
	size_t size = build(buf);

	/* the record layout: from, to, flags (bit 4 predicted), little-endian */
	CHECK_EQ(buf[0], 0x00);
	CHECK_EQ(buf[1], 0x10);
	CHECK_EQ(buf[2], 0x40);
	CHECK_EQ(buf[8], 0x12);
	CHECK_EQ(buf[16], 0x10);
	CHECK_EQ(buf[24 + 16], 0x00);

	memset(&s, 0, sizeof(s));
	CHECK_EQ(btr_bts_decode(buf, size, img, 42, collect, &s), NDELIV);
	CHECK_EQ(s.n, NDELIV);
	check_sink(&s, 1, 42);

	/* without an image every kind is unknown; flags are unchanged */
	memset(&s, 0, sizeof(s));
	CHECK_EQ(btr_bts_decode(buf, size, NULL, 7, collect, &s), NDELIV);
	check_sink(&s, 0, 7);

	/* unaligned input */
	{
		uint8_t ubuf[sizeof(buf) + 1];

		memcpy(ubuf + 1, buf, size);
		memset(&s, 0, sizeof(s));
		CHECK_EQ(btr_bts_decode(ubuf + 1, size, img, 42, collect, &s), NDELIV);
		check_sink(&s, 1, 42);
	}

	/* truncated: complete records are delivered first */
	for (size_t extra = 1; extra < 24; extra += 7) {
		memset(&s, 0, sizeof(s));
		CHECK_EQ(btr_bts_decode(buf, 3 * 24 + extra, img, 42, collect, &s), -BTR_ERR_TRUNCATED);
		CHECK_EQ(s.n, 3);
		check_sink(&s, 1, 42);
	}
	memset(&s, 0, sizeof(s));
	CHECK_EQ(btr_bts_decode(buf, 23, img, 42, collect, &s), -BTR_ERR_TRUNCATED);
	CHECK_EQ(s.n, 0);
	CHECK_EQ(btr_bts_decode(buf, 0, img, 42, collect, &s), 0);
	CHECK_EQ(btr_bts_decode(NULL, 0, img, 42, collect, &s), 0);

	/* callback control: positive stops with the count, negative aborts */
	memset(&s, 0, sizeof(s));
	s.stop_after = 3;
	CHECK_EQ(btr_bts_decode(buf, size, img, 42, collect, &s), 3);
	CHECK_EQ(s.n, 3);
	memset(&s, 0, sizeof(s));
	s.stop_after = -BTR_ERR_INTERRUPTED;
	CHECK_EQ(btr_bts_decode(buf, size, img, 42, collect, &s), -BTR_ERR_INTERRUPTED);
	CHECK_EQ(s.n, 2);

	CHECK_EQ(btr_bts_decode(buf, size, img, 42, NULL, &s), -BTR_ERR_INVAL);
	CHECK_EQ(btr_bts_decode(NULL, 24, img, 42, collect, &s), -BTR_ERR_INVAL);
}

/* A stream reader carries the remainder over to the next buffer: feeding
 * the records in odd-sized pieces that way yields the same branches. */
static void test_split(struct btr_image *img)
{
	uint8_t buf[NRECS * 24], carry[48];
	size_t size = build(buf), off = 0, ncarry = 0;
	struct sink s;

	memset(&s, 0, sizeof(s));
	while (off < size) {
		size_t piece = size - off < 17 ? size - off : 17;
		uint8_t tmp[64];
		size_t n = ncarry + piece;
		int ret;

		memcpy(tmp, carry, ncarry);
		memcpy(tmp + ncarry, buf + off, piece);
		off += piece;
		ret = btr_bts_decode(tmp, n, img, 42, collect, &s);
		CHECK(ret >= 0 || ret == -BTR_ERR_TRUNCATED);
		ncarry = n % 24;
		memcpy(carry, tmp + n - ncarry, ncarry);
	}
	CHECK_EQ(ncarry, 0);
	CHECK_EQ(s.n, NDELIV);
	check_sink(&s, 1, 42);
}

int main(void)
{
	struct btr_image *img = make_image();

	CHECK(img != NULL);
	if (!img)
		return check_done();
	test_decode(img);
	test_split(img);
	btr_image_free(img);
	return check_done();
}
