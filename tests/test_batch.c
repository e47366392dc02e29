/* test_batch.c - btr/batch.h: branches pulled in batches equal the pushed
 * stream's (btr_stream_run) in every batch size, over a .btr written here
 * (decoded branches of three threads, thread records) and over the real
 * perf.data with Intel PT in ../shared; the descriptive-records pass
 * (BTR_BATCH_NO_DATA), a stop from the event callback, a truncated file;
 * a damaged chunk: never a silent clean end (-BTR_ERR_DATA_LOST from the
 * batch, the stream and an analysis run); btr_stream_opts.skip_unselected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btr/analysis.h"
#include "btr/batch.h"
#include "btr/blocks.h"
#include "btr/error.h"
#include "btr/stream.h"
#include "btr/trace.h"
#include "check.h"

struct all {
	struct btr_branch *b;
	size_t n, cap;
	unsigned thread_starts, events;
	int stop_at_event;   /* nonzero: stop at this many events */
};

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct all *a = ctx;
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 1024;
		a->b = realloc(a->b, a->cap * sizeof(*a->b));
	}
	a->b[a->n++] = *b;
	return 0;
}

static int on_event(void *ctx, const struct btr_stream_event *ev)
{
	struct all *a = ctx;
	a->events++;
	a->thread_starts += ev->type == BTR_SEV_THREAD_START;
	return a->stop_at_event && a->events >= (unsigned)a->stop_at_event;
}

/* Everything btr_stream_run delivers. */
static int run_all(const char *path, struct all *a)
{
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event, .ctx = a };
	struct btr_stream *s;
	int rc = btr_stream_open(path, &so, &s);
	if (rc)
		return rc;
	rc = btr_stream_run(s);
	btr_stream_free(s);
	return rc;
}

/* The same through btr_batch_read in batches of @max; returns the last
 * value btr_batch_read returned (0 or an error). */
static long batch_all(const char *path, size_t max, struct all *a, unsigned flags)
{
	struct btr_stream_opts so = { .sz = sizeof(so), .event = on_event, .ctx = a };
	struct btr_batch *b;
	int rc = btr_batch_open(path, &so, flags, &b);
	if (rc)
		return rc;
	struct btr_branch *buf = malloc(max * sizeof(*buf));
	long n;
	while ((n = btr_batch_read(b, buf, max)) > 0) {
		CHECK((size_t)n <= max);
		for (long i = 0; i < n; i++)
			on_branch(a, &buf[i]);
	}
	CHECK_EQ(btr_batch_read(b, buf, max), 0);   /* the end (an error is said once) */
	CHECK(btr_batch_stream(b) != NULL);
	free(buf);
	btr_batch_free(b);
	return n;
}

static int same(const struct all *x, const struct all *y)
{
	return x->n == y->n && (!x->n || !memcmp(x->b, y->b, x->n * sizeof(*x->b)));
}

static void write_trace(const char *path)
{
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .chunk_size = 4096 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	struct btr_record r = { .type = BTR_REC_PROCESS };
	r.u.process = (struct btr_rec_process){ .pid = 10, .event = BTR_PROC_START, .path = "/bin/x", .args = "",
						.detail = "" };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	static struct btr_branch br[5000];
	for (uint32_t t = 10; t < 13; t++) {
		r.type = BTR_REC_THREAD_START;
		r.u.thread = (struct btr_rec_thread){ .pid = 10, .tid = t, .name = "" };
		CHECK_EQ(btr_trace_write(w, &r), 0);
	}
	for (int rep = 0; rep < 4; rep++)
		for (uint32_t t = 10; t < 13; t++) {
			size_t n = t == 11 ? 3 : 1200 + 700 * rep;   /* small and large records */
			for (size_t i = 0; i < n; i++)
				br[i] = (struct btr_branch){ .from = 0x1000 + i, .to = 0x2000 + t, .tsc = i * 7 + rep,
							     .insns = i % 5 + 1, .tid = t, .cycles = (uint32_t)i,
							     .flags = BTR_BF_TAKEN | BTR_BF_INSNS,
							     .kind = (uint8_t)(1 + i % 8) };
			r.type = BTR_REC_BRANCHES;
			r.u.branches = (struct btr_rec_branches){ .tid = t, .count = (uint32_t)n, .branches = br };
			CHECK_EQ(btr_trace_write(w, &r), 0);
		}
	/* an LBR snapshot of each thread (for skip_unselected's statistics) */
	static const struct btr_lbr_entry e[2] = { { .from = 0x1100, .to = 0x1200 }, { .from = 0x1000, .to = 0x1050 } };
	for (uint32_t t = 10; t < 13; t++) {
		r.type = BTR_REC_LBR;
		r.u.lbr = (struct btr_rec_lbr){ .pid = 10, .tid = t, .cpu = -1, .count = 2, .ip = 0x1200, .entries = e };
		CHECK_EQ(btr_trace_write(w, &r), 0);
	}
	CHECK_EQ(btr_trace_writer_close(w), 0);
}

/* opts.skip_unselected: thread 11 alone, its data decoded and the others'
 * skipped, delivers what the plain selection delivers. */
static void test_skip_unselected(const char *path)
{
	struct all plain = { 0 }, skip = { 0 };
	struct btr_stream_stats st[2];
	for (int k = 0; k < 2; k++) {
		struct all *a = k ? &skip : &plain;
		struct btr_stream_opts so = { .sz = sizeof(so), .tid = 11, .skip_unselected = k, .event = on_event, .ctx = a };
		struct btr_batch *b;
		CHECK_EQ(btr_batch_open(path, &so, 0, &b), 0);
		struct btr_branch buf[64];
		long n;
		while ((n = btr_batch_read(b, buf, 64)) > 0)
			for (long i = 0; i < n; i++)
				on_branch(a, &buf[i]);
		CHECK_EQ(n, 0);
		btr_stream_get_stats(btr_batch_stream(b), &st[k]);
		btr_batch_free(b);
	}
	CHECK_EQ(plain.n, 4 * 3 + 2);
	CHECK(same(&plain, &skip));
	CHECK_EQ(plain.events, skip.events);
	CHECK_EQ(st[0].lbr_snapshots, 3);   /* every thread's snapshot decoded */
	CHECK_EQ(st[1].lbr_snapshots, 1);   /* thread 11's only */
	free(plain.b);
	free(skip.b);
}

static void test_sizes(const char *path, size_t expect_min, unsigned expect_threads)
{
	struct all ref = { 0 };
	int rrc = run_all(path, &ref);
	CHECK(rrc <= 0);
	CHECK(ref.n >= expect_min);
	CHECK_EQ(ref.thread_starts, expect_threads);
	static const size_t sizes[] = { 1, 3, 1000, 4096, 1 << 20 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct all a = { 0 };
		CHECK_EQ(batch_all(path, sizes[k], &a, 0), rrc);
		CHECK(same(&a, &ref));
		CHECK_EQ(a.events, ref.events);
		free(a.b);
	}
	/* the descriptive records alone: the same thread events, no branches */
	struct all d = { 0 };
	CHECK_EQ(batch_all(path, 64, &d, BTR_BATCH_NO_DATA), 0);
	CHECK_EQ(d.n, 0);
	CHECK_EQ(d.thread_starts, expect_threads);
	free(ref.b);
}

/* A copy of @path with one byte in the middle of a chunk flipped: the
 * reader skips that chunk (bad checksum) and reads on to the end. */
static void damage_copy(const char *path, const char *out)
{
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	static unsigned char buf[1 << 22];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	CHECK(n > 8192 && n < sizeof(buf));
	buf[n / 2] ^= 0x10;
	f = fopen(out, "wb");
	CHECK(f != NULL);
	CHECK_EQ(fwrite(buf, 1, n, f), n);
	CHECK_EQ(fclose(f), 0);
}

/* Lost data is never a clean end: the batch reader, btr_stream_run and
 * btr_analysis_run return -BTR_ERR_DATA_LOST after every readable branch
 * (which are those of the whole trace but the damaged chunk's). */
static void test_damaged_chunk(const char *path)
{
	char bad[] = "/tmp/btr_test_batch_bad_XXXXXX";
	int fd = mkstemp(bad);
	CHECK(fd >= 0);
	close(fd);
	damage_copy(path, bad);
	struct all whole = { 0 }, ref = { 0 };
	CHECK_EQ(run_all(path, &whole), 0);
	CHECK_EQ(run_all(bad, &ref), -BTR_ERR_DATA_LOST);
	CHECK(ref.n > 0 && ref.n < whole.n);
	static const size_t sizes[] = { 1, 1000, 1 << 20 };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct all a = { 0 };
		CHECK_EQ(batch_all(bad, sizes[k], &a, 0), -BTR_ERR_DATA_LOST);
		CHECK(same(&a, &ref));
		free(a.b);
	}
	/* the descriptive pass reads every chunk too */
	struct all d = { 0 };
	CHECK_EQ(batch_all(bad, 64, &d, BTR_BATCH_NO_DATA), -BTR_ERR_DATA_LOST);
	free(d.b);
	/* btr_batch_finish says it as well, and the stream says what */
	struct btr_batch *b;
	CHECK_EQ(btr_batch_open(bad, NULL, 0, &b), 0);
	CHECK_EQ(btr_batch_finish(b), -BTR_ERR_DATA_LOST);
	CHECK(btr_stream_data_lost(btr_batch_stream(b)));
	struct btr_stream_loss l;
	CHECK_EQ(btr_stream_losses(btr_batch_stream(b), &l, 1), 1);
	CHECK_EQ(l.kind, BTR_LOSS_CHUNK);
	btr_batch_free(b);
	/* an analysis run over it: the same code, in the return and the info */
	struct btr_analysis *a;
	CHECK_EQ(btr_blocks_new(&a), 0);
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	CHECK_EQ(btr_analysis_run(bad, NULL, &a, 1, &info), -BTR_ERR_DATA_LOST);
	CHECK_EQ(info.status, -BTR_ERR_DATA_LOST);
	CHECK_EQ(info.lost, 1);
	CHECK_EQ(info.stats.lost_chunks, 1);
	btr_analysis_free(a);
	CHECK_EQ(btr_blocks_new(&a), 0);
	CHECK_EQ(btr_analysis_run(path, NULL, &a, 1, &info), 0);   /* the whole one: clean */
	CHECK_EQ(info.status, 0);
	CHECK_EQ(info.lost, 0);
	btr_analysis_free(a);
	free(whole.b);
	free(ref.b);
	unlink(bad);
}

/* A whole container whose recorder lost a process's data (a BTR_PROC_LOST
 * record, as `btr record` writes when its temporary space fills up:
 * tests/cli_lost.sh): the same -BTR_ERR_DATA_LOST at the end. */
static void test_recorder_loss(void)
{
	char path[] = "/tmp/btr_test_batch_lost_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, NULL, &w), 0);
	struct btr_record r = { .type = BTR_REC_PROCESS };
	r.u.process = (struct btr_rec_process){ .pid = 10, .event = BTR_PROC_START, .path = "/bin/x", .args = "",
						.detail = "" };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	struct btr_branch br[3] = { { .from = 0x1000, .to = 0x2000, .tid = 10, .insns = 1, .flags = BTR_BF_TAKEN },
				    { .from = 0x2010, .to = 0x1004, .tid = 10, .insns = 2, .flags = BTR_BF_TAKEN },
				    { .from = 0x1010, .to = 0x3000, .tid = 10, .insns = 3, .flags = BTR_BF_TAKEN } };
	r.type = BTR_REC_BRANCHES;
	r.u.branches = (struct btr_rec_branches){ .tid = 10, .count = 3, .branches = br };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	r.type = BTR_REC_PROCESS;
	r.u.process = (struct btr_rec_process){ .pid = 10, .event = BTR_PROC_LOST, .path = "/bin/x", .args = "",
						.detail = "no space left for its trace" };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	struct all ref = { 0 }, a = { 0 };
	CHECK_EQ(run_all(path, &ref), -BTR_ERR_DATA_LOST);
	CHECK_EQ(batch_all(path, 2, &a, 0), -BTR_ERR_DATA_LOST);
	CHECK_EQ(a.n, 3);
	CHECK(same(&a, &ref));
	free(a.b);
	free(ref.b);
	struct all d = { 0 };
	CHECK_EQ(batch_all(path, 2, &d, BTR_BATCH_NO_DATA), -BTR_ERR_DATA_LOST);
	free(d.b);
	unlink(path);
}

int main(void)
{
	char path[] = "/tmp/btr_test_batch_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	write_trace(path);
	test_sizes(path, 4 * (1200 + 1200) + 12 + 4 * 1050 * 2, 3);
	test_skip_unselected(path);
	test_damaged_chunk(path);
	test_recorder_loss();

	/* a stop from the event callback: what came before, then the end */
	struct all st = { .stop_at_event = 3 }, ref = { .stop_at_event = 3 };
	CHECK(run_all(path, &ref) > 0);
	CHECK_EQ(batch_all(path, 100, &st, 0), 0);
	CHECK(same(&st, &ref));
	free(st.b);
	free(ref.b);

	/* bad arguments */
	struct btr_batch *b;
	CHECK_EQ(btr_batch_open(path, NULL, 0x80, &b), -BTR_ERR_INVAL);
	CHECK_EQ(btr_batch_open("/nonexistent/x.btr", NULL, 0, &b), -BTR_ERR_NOENT);
	CHECK_EQ(btr_batch_open(path, NULL, 0, &b), 0);
	struct btr_branch one;
	CHECK_EQ(btr_batch_read(b, &one, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_batch_read(b, &one, 1), 1);
	CHECK_EQ(btr_batch_finish(b), 0);
	CHECK_EQ(btr_batch_read(b, &one, 1), 0);
	btr_batch_free(b);

	/* a cut file: every branch before the cut, then the reader's error */
	struct stat sb;
	CHECK_EQ(stat(path, &sb), 0);
	CHECK_EQ(truncate(path, sb.st_size / 2), 0);
	struct all cut = { 0 }, cref = { 0 };
	CHECK_EQ(run_all(path, &cref), -BTR_ERR_TRUNCATED);
	CHECK_EQ(batch_all(path, 500, &cut, 0), -BTR_ERR_TRUNCATED);
	CHECK(cref.n > 0);
	CHECK(same(&cut, &cref));
	free(cut.b);
	free(cref.b);
	unlink(path);

	/* real Intel PT: perf.data recorded by perf 4.14 (quipper's test data) */
	const char *pt = BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14";
	if (access(pt, R_OK) == 0)
		test_sizes(pt, 1, 0);
	else
		printf("note: %s not found, the real-trace part is not run\n", pt);
	return check_done();
}
