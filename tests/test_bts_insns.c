/* test_bts_insns.c - the instruction-count side stream of BTS records
 * (BTR_REC_BTS_INSNS, format 1.2): the queue API on values split at every
 * byte position and across holes, and the common stream attaching the
 * counts to branches when the writer splits both streams across chunks at
 * arbitrary bytes; without the side stream branches carry no count. */
#include <unistd.h>

#include "check.h"
#include "btr/bts.h"
#include "btr/error.h"
#include "btr/stream.h"
#include "btr/trace.h"

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static void test_queue(void)
{
	uint8_t b[4 * 10];
	for (int i = 0; i < 10; i++)
		put32(b + 4 * i, 1000u + (uint32_t)i);
	/* Every split point. */
	for (size_t cut = 0; cut <= sizeof(b); cut++) {
		struct btr_bts_insns *q;
		CHECK_EQ(btr_bts_insns_new(&q), 0);
		CHECK_EQ(btr_bts_insns_add(q, 0, b, cut), 0);
		CHECK_EQ(btr_bts_insns_add(q, cut, b + cut, sizeof(b) - cut), 0);
		int ok = 1;
		for (uint32_t i = 0; i < 10; i++) {
			uint32_t v = 0;
			ok &= btr_bts_insns_take(q, i, &v) == 1 && v == 1000u + i;
		}
		CHECK(ok);
		uint32_t v;
		CHECK_EQ(btr_bts_insns_take(q, 10, &v), 0);
		btr_bts_insns_free(q);
	}
	/* A hole: values before it are dropped, the stream restarts at the
	 * first whole value after it; take() skips forward. */
	struct btr_bts_insns *q;
	CHECK_EQ(btr_bts_insns_new(&q), 0);
	CHECK_EQ(btr_bts_insns_add(q, 0, b, 8), 0);
	CHECK_EQ(btr_bts_insns_add(q, 18, b + 18, 22), 0);   /* bytes 8..17 lost */
	uint32_t v = 0;
	CHECK_EQ(btr_bts_insns_take(q, 1, &v), 0);           /* dropped with the hole */
	CHECK_EQ(btr_bts_insns_take(q, 5, &v), 1);
	CHECK_EQ(v, 1005);
	CHECK_EQ(btr_bts_insns_take(q, 9, &v), 1);
	CHECK_EQ(v, 1009);
	CHECK_EQ(btr_bts_insns_take(q, 4, &v), 0);           /* behind: gone */
	btr_bts_insns_free(q);
	CHECK_EQ(btr_bts_insns_new(NULL), -BTR_ERR_INVAL);
}

struct got {
	uint64_t n, with, sum, bad;
};

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct got *g = ctx;
	if (b->flags & BTR_BF_INSNS) {
		g->with++;
		g->sum += b->insns;
		if (b->insns != (b->from & 0xffff) % 97 + 1)
			g->bad++;
	}
	g->n++;
	return 0;
}

static void write_trace(const char *path, unsigned n, int with_counts)
{
	struct btr_trace_writer *w;
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .chunk_size = 700, .no_sync = 1 };
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	uint8_t *bts = malloc((size_t)n * 24), *cnt = malloc((size_t)n * 4);
	for (unsigned i = 0; i < n; i++) {
		uint64_t from = 0x401000 + 16ull * i;
		btr_bts_encode(from, from + 0x100, 0, bts + 24 * i);
		put32(cnt + 4 * i, (uint32_t)((from & 0xffff) % 97 + 1));
	}
	/* Two batches; each data record larger than a chunk, so the writer
	 * splits them at arbitrary bytes. */
	unsigned half = n / 2;
	for (int k = 0; k < 2; k++) {
		unsigned first = k ? half : 0, cnt_n = k ? n - half : half;
		struct btr_record r = { .type = BTR_REC_BTS_INSNS };
		r.u.data.tid = 7;
		r.u.data.cpu = -1;
		r.u.data.stream_offset = 4ull * first;
		r.u.data.size = 4ull * cnt_n;
		r.u.data.data = cnt + 4 * first;
		if (with_counts)
			CHECK_EQ(btr_trace_write(w, &r), 0);
		r.type = BTR_REC_BTS;
		r.u.data.stream_offset = 24ull * first;
		r.u.data.size = 24ull * cnt_n;
		r.u.data.data = bts + 24 * first;
		CHECK_EQ(btr_trace_write(w, &r), 0);
	}
	CHECK_EQ(btr_trace_writer_close(w), 0);
	free(bts);
	free(cnt);
}

static void test_stream(int with_counts)
{
	const char *path = "bts_insns_test.btr";
	unsigned n = 1000;
	write_trace(path, n, with_counts);
	struct got g = { 0 };
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .ctx = &g };
	struct btr_stream *s;
	CHECK_EQ(btr_stream_open(path, &so, &s), 0);
	CHECK_EQ(btr_stream_run(s), 0);
	btr_stream_free(s);
	CHECK_EQ(g.n, n);
	CHECK_EQ(g.with, with_counts ? n : 0);
	CHECK_EQ(g.bad, 0);
	unlink(path);
}

int main(void)
{
	test_queue();
	test_stream(1);
	test_stream(0);
	return check_done();
}
