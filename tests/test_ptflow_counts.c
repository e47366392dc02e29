/* test_ptflow_counts.c - the flow decoder's counted output (btr/ptflow.h
 * "counts") against its ordered output on the same streams.
 *
 * The ordered records are turned into counts the way a consumer would:
 * each branch's run starts at the previous branch's target, at an ENABLE
 * event's IP, or is unknown (0) after a GAP, OVERFLOW or DISABLE.  The
 * counted output must hold exactly the same multiset of (start, from, to,
 * kind, flags, insns) - timing flags aside - for streams fed whole and in
 * small pieces, with a block cache so small that it is emptied during
 * walks (its counters must go out first), and with corrupted bytes that
 * make the decoder lose and find the flow again.
 *
 * The same streams with not-taken conditionals left out (btr/ptflow.h
 * "fold_ok", switched on and off from call to call): with every not-taken
 * JCC dropped and its instructions added to the next record up to the next
 * event (a remainder stays before the event), both outputs must be the
 * same sequence, and the records plus btr_ptflow_folded() the branches.
 * And with "fold_block" saying per block what may go (nothing, not-taken
 * JCCs, or taken ones too, from a hash of the block's last address): with
 * exactly those records dropped, again the same sequence. */
#include "check.h"
#include "ptgen.h"
#include "btr/ptflow.h"
#include "btr/image.h"

#include <stdlib.h>
#include <string.h>

struct rec {
	uint64_t start, from, to, insns, count;
	uint32_t tid;
	uint16_t flags;
	uint8_t kind;
};

struct sink {
	struct rec *v;
	size_t n, cap;
	uint64_t start;      /* ordered mode: the current run's start */
	uint64_t total;      /* branches seen (sum of counts) */
	int bad_timing;      /* a record with count > 1 has timing flags */
	int order_events;    /* events seen */
	int fold_calls;      /* fold mode: fold_ok calls */
	uint64_t folded;     /* fold mode: records left out (btr_ptflow_folded) */
	struct rec *q;       /* the normalized sequence (records, events) */
	size_t qn, qcap;
	uint64_t carry;      /* instructions of dropped not-taken JCCs */
	int fb;              /* fold_block mode: drop what fold_bits lets go */
};

/* The fold_block answer for a block ending at @from: per hash, nothing,
 * not-taken JCCs, or taken ones too. */
static int fold_bits(uint64_t from)
{
	unsigned h = (unsigned)((from * 0x9e3779b97f4a7c15ull) >> 61);
	return h == 0 ? 0 : h < 3 ? BTR_FOLD_NOT_TAKEN : BTR_FOLD_NOT_TAKEN | BTR_FOLD_TAKEN;
}

/* Does @s's normalized sequence leave out record @b? */
static int dropped(const struct sink *s, const struct btr_branch *b)
{
	int taken = (b->flags & BTR_BF_TAKEN) != 0;
	if (!s->fb)
		return b->kind == BTR_KIND_JCC && !taken;
	if (b->kind != BTR_KIND_JCC && b->kind != BTR_KIND_JMP)
		return 0;
	int bits = fold_bits(b->from);
	return taken ? (bits & BTR_FOLD_TAKEN) != 0 : b->kind == BTR_KIND_JCC && (bits & BTR_FOLD_NOT_TAKEN);
}

/* Appends to @s's normalized sequence: a not-taken JCC only adds its
 * instructions to the next record; an event (@ev) keeps a remainder
 * before it. */
static void seq(struct sink *s, const struct btr_branch *b, int ev)
{
	if (!ev && dropped(s, b)) {
		s->carry += b->insns;
		return;
	}
	if (s->qn + 2 > s->qcap) {
		s->qcap = s->qcap ? 2 * s->qcap : 4096;
		s->q = realloc(s->q, s->qcap * sizeof(*s->q));
		if (!s->q)
			abort();
	}
	if (ev) {
		if (s->carry)
			s->q[s->qn++] = (struct rec){ .insns = s->carry, .kind = 0xfe };
		s->carry = 0;
		s->q[s->qn++] = (struct rec){ .from = b->from, .kind = 0xff };
		return;
	}
	s->q[s->qn++] = (struct rec){ .from = b->from, .to = b->to, .insns = b->insns + s->carry,
				      .flags = (uint16_t)(b->flags & ~(BTR_BF_TSC | BTR_BF_CYCLES)),
				      .kind = b->kind };
	s->carry = 0;
}

static void add(struct sink *s, uint64_t start, const struct btr_branch *b, uint64_t count)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4096;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			abort();
	}
	s->v[s->n++] = (struct rec){ .start = start, .from = b->from, .to = b->to,
				     .insns = (b->flags & BTR_BF_INSNS) ? b->insns : 0, .count = count,
				     .tid = b->tid,
				     .flags = (uint16_t)(b->flags & ~(BTR_BF_TSC | BTR_BF_CYCLES)),
				     .kind = b->kind };
	s->total += count;
}

static int on_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct sink *s = ctx;
	for (size_t i = 0; i < n; i++) {
		add(s, s->start, &b[i], 1);
		s->start = b[i].to;
		seq(s, &b[i], 0);
	}
	return 0;
}

/* Yes for three calls in four. */
static int fold_ok(void *ctx)
{
	struct sink *s = ctx;
	return ++s->fold_calls % 4 != 0;
}

static int fold_block(void *ctx, uint64_t start, uint64_t from, uint64_t to)
{
	(void)ctx;
	(void)start;
	(void)to;
	return fold_bits(from);
}

static int on_counts(void *ctx, const struct btr_branch_count *c, size_t n)
{
	struct sink *s = ctx;
	for (size_t i = 0; i < n; i++) {
		if (c[i].count > 1 && (c[i].b.flags & (BTR_BF_TSC | BTR_BF_CYCLES)))
			s->bad_timing = 1;
		if (!c[i].count)
			s->bad_timing = 1;
		add(s, c[i].start, &c[i].b, c[i].count);
	}
	return 0;
}

static int on_event(void *ctx, const struct btr_flow_event *ev)
{
	struct sink *s = ctx;
	s->order_events++;
	struct btr_branch e = { .from = (uint64_t)ev->type };
	seq(s, &e, 1);
	if (ev->type == BTR_FLOW_ENABLE)
		s->start = ev->ip;
	else if (ev->type == BTR_FLOW_GAP || ev->type == BTR_FLOW_OVERFLOW || ev->type == BTR_FLOW_DISABLE)
		s->start = 0;
	return 0;
}

static int cmp_rec(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
#define C(f) if (x->f != y->f) return x->f < y->f ? -1 : 1
	C(start); C(from); C(to); C(insns); C(tid); C(flags); C(kind);
#undef C
	return 0;
}

/* Sorts and merges equal keys (their counts add up). */
static void merge(struct sink *s)
{
	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), cmp_rec);
	size_t k = 0;
	for (size_t i = 1; i < s->n; i++) {
		if (!cmp_rec(&s->v[k], &s->v[i]))
			s->v[k].count += s->v[i].count;
		else
			s->v[++k] = s->v[i];
	}
	s->n = k + 1;
}

/* Decodes @pt with callbacks @cb into @s, whole (@piece 0) or in pieces
 * of 1..@piece bytes. */
static void decode(struct btr_image *img, uint8_t cache_bits, const uint8_t *pt, size_t size,
		   size_t piece, int counts, struct sink *s, uint64_t *branches)
{
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .cache_bits = cache_bits, .tid = 7 };
	struct btr_ptflow *f;
	CHECK_EQ(btr_ptflow_new(img, &cfg, &f), 0);
	struct btr_ptflow_callbacks cb = { .event = on_event, .ctx = s };
	if (counts == 1)
		cb.counts = on_counts;
	else
		cb.branches = on_branches;
	if (counts >= 2)
		cb.fold_ok = fold_ok;
	if (counts == 3)
		cb.fold_block = fold_block;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	for (size_t off = 0; off < size;) {
		size_t n = size - off;
		if (piece) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			size_t p = 1 + (size_t)(rng % piece);
			if (p < n)
				n = p;
		}
		CHECK(btr_ptflow_decode(f, pt + off, n, &cb) >= 0);
		off += n;
	}
	struct btr_ptflow_stats st;
	btr_ptflow_stats(f, &st);
	*branches = st.branches;
	s->folded = btr_ptflow_folded(f);
	btr_ptflow_free(f);
}

static void compare(const char *what, struct btr_image *img, uint8_t cache_bits, const uint8_t *pt,
		    size_t size, size_t piece)
{
	struct sink a = { 0 }, b = { 0 };
	uint64_t na, nb;
	decode(img, cache_bits, pt, size, piece, 0, &a, &na);
	decode(img, cache_bits, pt, size, piece, 1, &b, &nb);
	CHECK_EQ(na, nb);
	CHECK_EQ(a.total, na);
	CHECK_EQ(b.total, nb);
	CHECK(!b.bad_timing);
	CHECK(a.total > 1000);
	size_t records = b.n;
	merge(&a);
	merge(&b);
	int same = a.n == b.n;
	for (size_t i = 0; same && i < a.n; i++)
		same = !cmp_rec(&a.v[i], &b.v[i]) && a.v[i].count == b.v[i].count;
	CHECK(same);
	if (!same && getenv("COUNTS_DEBUG")) {
		size_t i = 0;
		while (i < a.n && i < b.n && !cmp_rec(&a.v[i], &b.v[i]) && a.v[i].count == b.v[i].count)
			i++;
		for (size_t k = i; k < i + 4; k++) {
			if (k < a.n)
				printf("ordered %zu: start %llx from %llx to %llx insns %llu flags %x kind %u count %llu\n", k,
				       (unsigned long long)a.v[k].start, (unsigned long long)a.v[k].from,
				       (unsigned long long)a.v[k].to, (unsigned long long)a.v[k].insns, a.v[k].flags,
				       a.v[k].kind, (unsigned long long)a.v[k].count);
			if (k < b.n)
				printf("counted %zu: start %llx from %llx to %llx insns %llu flags %x kind %u count %llu\n", k,
				       (unsigned long long)b.v[k].start, (unsigned long long)b.v[k].from,
				       (unsigned long long)b.v[k].to, (unsigned long long)b.v[k].insns, b.v[k].flags,
				       b.v[k].kind, (unsigned long long)b.v[k].count);
		}
	}
	/* the point of counting: far fewer records than branches */
	CHECK(records * 4 < nb);
	printf("%-34s %9llu branches, %7zu counted records, %6zu distinct, %s\n", what,
	       (unsigned long long)nb, records, b.n, same ? "same" : "DIFFERENT");
	/* not-taken conditionals left out */
	struct sink c = { 0 };
	uint64_t nc;
	decode(img, cache_bits, pt, size, piece, 2, &c, &nc);
	CHECK_EQ(nc, na);
	CHECK_EQ(c.total + c.folded, nc);
	CHECK(c.folded > 0);   /* (walks with a TSC keep them all) */
	CHECK(c.fold_calls > 0);
	seq(&a, &(struct btr_branch){ 0 }, 1);   /* the remainders at the end */
	seq(&c, &(struct btr_branch){ 0 }, 1);
	int fsame = a.qn == c.qn;
	for (size_t i = 0; fsame && i < a.qn; i++)
		fsame = !cmp_rec(&a.q[i], &c.q[i]);
	CHECK(fsame);
	printf("%-34s %9llu branches, %7llu left out, %s\n", "  not-taken JCCs left out", (unsigned long long)nc,
	       (unsigned long long)c.folded, fsame ? "same" : "DIFFERENT");
	/* what fold_block lets go left out */
	struct sink a3 = { .fb = 1 }, c3 = { .fb = 1 };
	uint64_t na3, nc3;
	decode(img, cache_bits, pt, size, piece, 0, &a3, &na3);
	decode(img, cache_bits, pt, size, piece, 3, &c3, &nc3);
	CHECK_EQ(nc3, na);
	CHECK_EQ(c3.total + c3.folded, nc3);
	CHECK(c3.folded > 0);
	seq(&a3, &(struct btr_branch){ 0 }, 1);
	seq(&c3, &(struct btr_branch){ 0 }, 1);
	size_t taken_out = 0;
	for (size_t i = 0; i < a.n; i++)
		if (a.v[i].kind == BTR_KIND_JCC && (a.v[i].flags & BTR_BF_TAKEN) &&
		    (fold_bits(a.v[i].from) & BTR_FOLD_TAKEN))
			taken_out++;
	int bsame = a3.qn == c3.qn;
	for (size_t i = 0; bsame && i < a3.qn; i++)
		bsame = !cmp_rec(&a3.q[i], &c3.q[i]);
	CHECK(bsame);
	if (!bsame && getenv("COUNTS_DEBUG")) {
		size_t i = 0;
		while (i < a3.qn && i < c3.qn && !cmp_rec(&a3.q[i], &c3.q[i]))
			i++;
		printf("qn %zu %zu first diff %zu\n", a3.qn, c3.qn, i);
		for (size_t k = i >= 2 ? i - 2 : 0; k < i + 3; k++) {
			if (k < a3.qn)
				printf("ordered %zu: from %llx to %llx insns %llu flags %x kind %u\n", k,
				       (unsigned long long)a3.q[k].from, (unsigned long long)a3.q[k].to,
				       (unsigned long long)a3.q[k].insns, a3.q[k].flags, a3.q[k].kind);
			if (k < c3.qn)
				printf("folded  %zu: from %llx to %llx insns %llu flags %x kind %u\n", k,
				       (unsigned long long)c3.q[k].from, (unsigned long long)c3.q[k].to,
				       (unsigned long long)c3.q[k].insns, c3.q[k].flags, c3.q[k].kind);
		}
	}
	CHECK(taken_out > 0);   /* taken JCCs that may go are there */
	printf("%-34s %9llu branches, %7llu left out, %s\n", "  per block (fold_block)", (unsigned long long)nc3,
	       (unsigned long long)c3.folded, bsame ? "same" : "DIFFERENT");
	free(a3.q);
	free(c3.q);
	free(a3.v);
	free(c3.v);
	free(a.q);
	free(b.q);
	free(c.q);
	free(c.v);
	free(a.v);
	free(b.v);
}

int main(void)
{
	static const struct { unsigned nfunc; uint64_t seed; size_t psb; uint8_t cache_bits; size_t piece;
			      int corrupt; const char *what; } cases[] = {
		{ 64, 1, 4096, 0, 0, 0, "64 functions, whole" },
		{ 64, 2, 512, 0, 977, 0, "64 functions, pieces" },
		{ 4096, 3, 4096, 8, 0, 0, "4096 functions, 256-block cache" },
		{ 4096, 4, 2048, 8, 3001, 0, "4096 functions, small cache, pieces" },
		{ 256, 5, 1024, 0, 0, 1, "256 functions, corrupted bytes" },
		{ 256, 6, 1024, 8, 1500, 1, "corrupted, small cache, pieces" },
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct ptgen g;
		memset(&g, 0, sizeof(g));
		ptgen_code(&g, 0x400000, cases[c].nfunc);
		ptgen_walk(&g, 600000, cases[c].seed, cases[c].psb);
		if (cases[c].corrupt) {
			/* a wrong byte every 40 KB: gaps, then resync */
			for (size_t i = 20000; i < g.pt_size; i += 40000)
				g.pt[i] ^= 0x5a;
		}
		struct btr_image *img;
		CHECK_EQ(btr_image_new(&img), 0);
		CHECK_EQ(btr_image_add_bytes(img, g.code, g.code_size, g.base), 0);
		compare(cases[c].what, img, cases[c].cache_bits, g.pt, g.pt_size, cases[c].piece);
		btr_image_free(img);
		ptgen_free(&g);
	}
	/* not in parallel */
	{
		struct btr_image *img;
		CHECK_EQ(btr_image_new(&img), 0);
		struct btr_ptflow_callbacks cb = { .counts = on_counts };
		uint8_t buf[16] = { 0 };
		CHECK_EQ(btr_ptflow_decode_parallel(img, NULL, buf, sizeof(buf), 2, 0, &cb, NULL),
			 -BTR_ERR_UNSUPPORTED);
		btr_image_free(img);
	}
	return check_done();
}
