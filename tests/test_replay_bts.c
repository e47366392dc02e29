/* test_replay_bts.c - `btr record -b bts` end to end without a PMU.
 *
 * There is no real intel_bts recording to replay, so one is made from a
 * real branch stream: the LBR stacks of the quipper Skylake and autofdo
 * Westmere recordings (../shared/traces), each stack's branches oldest
 * first, become the 24-byte BTS records {from, to, misc} the kernel copies
 * into the AUX area - one AUX chunk (and PERF_RECORD_AUX) per sample,
 * with the recording's sideband around them.  The replay kernel
 * (tests/perf_replay.h) plays that through the recorder's kernel
 * interface; the .btr must hold exactly the BTS bytes delivered, and btr
 * must decode from it the branches it decodes from the original
 * perf.data's LBR stacks, in the same order:
 *   1. a 4 KiB AUX area written in pieces of at most 1 KiB (wraps often);
 *   2. a slow consumer: chunks cut where the area is full (TRUNCATED),
 *      each cut a jump in the .btr's stream positions;
 *   3. snapshot mode (read-only AUX, overwritten; SIGUSR2 every 4 or 50
 *      steps: before and after the area has wrapped);
 *   4. Ctrl-C half-way and at four other points. */
#include "perf_replay.h"
#include "btr/stream.h"
#include "check.h"

#define SYSFS BTR_SOURCE_DIR "/tests/data/sysfs-skl"
#define AUX 4096u

struct brsum {
	uint64_t n, ordered;
};

static int br_cb(void *ctx, const struct btr_branch *b)
{
	struct brsum *s = ctx;
	s->n++;
	s->ordered = (s->ordered ^ (b->from * 0x9e3779b97f4a7c15ull) ^ b->to) * 0x100000001b3ull;
	return 0;
}

static struct brsum decode(const char *path)
{
	struct brsum s = { 0, 0 };
	struct btr_stream_opts o = { .sz = sizeof(o), .branch = br_cb, .ctx = &s };
	struct btr_stream *st;
	if (btr_stream_open(path, &o, &st) == 0) {
		btr_stream_run(st);
		btr_stream_free(st);
	}
	return s;
}

static int run_file(const char *name)
{
	char path[4096], out[4096];
	struct rp_src s;
	int have = rp_src_open(name, path, sizeof(path), &s);
	CHECK(have >= 0);
	if (have <= 0)
		return 0;
	/* the synthesized BTS stream: every LBR stack, oldest branch first */
	uint64_t total = 0;
	for (size_t i = 0; i < s.n; i++)
		if (s.recs[i].type == BTR_PERF_RECORD_SAMPLE)
			total += 24 * s.recs[i].nr_br;
	uint8_t *bts = malloc(total + 1);
	struct rp k;
	rp_init(&k, &s, SYSFS, 1);
	size_t cap = 0;
	uint64_t pos = 0;
	unsigned n_chunks = 0;
	for (size_t i = 0; i < s.n; i++) {
		const struct rp_src_rec *r = &s.recs[i];
		if (rp_is_sideband(r->type)) {
			rp_step_from(rp_add(&k, &cap), &s, i);
			continue;
		}
		if (r->type != BTR_PERF_RECORD_SAMPLE || !r->nr_br)
			continue;
		uint64_t start = pos;
		for (uint64_t j = r->nr_br; j-- > 0;) {
			uint64_t rec[3] = { rp_rd64(r->br + 24 * j), rp_rd64(r->br + 24 * j + 8), 0 };
			if (!rec[0] && !rec[1])
				continue;   /* an empty slot of a short stack */
			memcpy(bts + pos, rec, 24);
			pos += 24;
		}
		struct rp_step *st = rp_add(&k, &cap);
		rp_step_from(st, &s, i);
		st->sample = NULL;
		st->kind = RP_AUX;
		st->aux = bts;
		st->aux_pos = start;
		st->aux_len = pos - start;
		n_chunks++;
	}
	printf("%s: %zu records -> %u BTS chunks, %llu bytes (%llu branches), %zu steps\n", name, s.n, n_chunks,
	       (unsigned long long)pos, (unsigned long long)pos / 24, k.n_steps);
	struct brsum want_br = decode(path);

	/* 1. everything through a 4 KiB AUX area, 1 KiB pieces */
	struct btr_capture_opts o = { .aux_size = AUX, .per_thread = 1 };
	struct rp_run run;
	rp_out_path(out, sizeof(out), "bts.btr");
	k.aux_piece = 1024;
	CHECK_EQ(rp_record(&k, "bts", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(k.next, k.n_steps);
	struct rp_trace got;
	CHECK_EQ(rp_trace_load(out, &got), 0);
	CHECK_EQ(got.read_rc, 0);
	CHECK(rp_same_bytes(got.aux[0], got.aux_len[0], bts, pos, "full", 0));
	CHECK_EQ(got.jumps[0], 0);
	struct rp_trace src;
	CHECK_EQ(rp_trace_load(path, &src), 0);
	CHECK_EQ(rp_cmp_lines(&got, &src, "module ", 1, NULL), 0);
	CHECK_EQ(rp_cmp_lines(&got, &src, "thread", 1, NULL), 0);
	rp_trace_free(&src);
	struct brsum got_br = decode(out);
	printf("  decoded branches: %llu from the .btr's BTS, %llu from the perf.data's LBR\n",
	       (unsigned long long)got_br.n, (unsigned long long)want_br.n);
	CHECK_EQ(got_br.n, pos / 24);
	CHECK_EQ(got_br.n, want_br.n);
	CHECK_EQ(got_br.ordered, want_br.ordered);
	/* as the user sees it: `btr script` prints the same branches (the
	 * addresses: BTS has no thread of its own here - the replay's traced
	 * command is another process - and no LBR flags) */
	uint64_t lg, lw;
	uint64_t hg = rp_script(out, "addr", &lg), hw = rp_script(path, "addr", &lw);
	printf("  btr script: %llu lines (perf.data %llu)\n", (unsigned long long)lg, (unsigned long long)lw);
	CHECK(lw > 0);
	CHECK_EQ(lg, lw);
	CHECK_EQ(hg, hw);
	rp_trace_free(&got);

	/* 2. a slow consumer: 20 steps per wakeup into 4 KiB */
	rp_rewind(&k);
	k.lossy = 1;
	k.burst = 20;
	k.aux_piece = 0;
	CHECK_EQ(rp_record(&k, "bts", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(rp_trace_load(out, &got), 0);
	uint64_t nw;
	unsigned cuts;
	uint8_t *want = rp_want_delivered(&k, 0, 0, &nw, &cuts);
	printf("  lossy: %llu chunks truncated (%llu bytes cut), %u cut(s) before more data, %u jump(s)\n",
	       (unsigned long long)k.truncated, (unsigned long long)k.aux_cut_bytes, cuts, got.jumps[0]);
	CHECK(k.truncated > 0);
	CHECK(rp_same_bytes(got.aux[0], got.aux_len[0], want, nw, "lossy", 0));
	CHECK_EQ(got.jumps[0], cuts);
	free(want);
	rp_trace_free(&got);

	/* 3. snapshot mode */
	rp_rewind(&k);
	k.lossy = 0;
	k.aux_piece = 1024;
	k.usr2_every = s.n < 100 ? 4 : 50;   /* the small one: snapshots before the area wraps */
	o.snapshot = 1;
	CHECK_EQ(rp_record(&k, "bts", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(rp_trace_load(out, &got), 0);
	CHECK_EQ(got.read_rc, 0);
	k.snaps[k.n_snaps < 256 ? k.n_snaps++ : 255] = (struct rp_snap){ 0, pos };   /* the final one */
	unsigned windows;
	want = rp_want_snapshots(&k, 0, bts, AUX, &nw, &windows);
	printf("  snapshot: %u snapshots, %u whole-area windows\n", k.n_snaps, windows);
	CHECK(rp_same_bytes(got.aux[0], got.aux_len[0], want, nw, "snapshot", 0));
	CHECK(got.jumps[0] <= windows);
	free(want);
	o.snapshot = 0;
	k.usr2_every = 0;
	rp_trace_free(&got);

	/* 4. Ctrl-C half-way and at four pseudo-random steps */
	size_t cuts5[5] = { k.n_steps / 2 };
	rp_random_cuts(&k, cuts5 + 1, 4, 13);
	for (int j = 0; j < 5; j++) {
		rp_rewind(&k);
		k.ctrlc_at = cuts5[j];
		CHECK_EQ(rp_record(&k, "bts", &o, out, &run), 0);
		CHECK_STR(k.err, "");
		CHECK_EQ(run.res.interrupted, 1);
		CHECK_EQ(rp_trace_load(out, &got), 0);
		CHECK_EQ(got.read_rc, 0);
		want = rp_want_delivered(&k, 0, k.ctrlc_at, &nw, &cuts);
		if (!j)
			CHECK(nw > 0 && nw < pos);
		CHECK(rp_same_bytes(got.aux[0], got.aux_len[0], want, nw, "ctrl-c", 0));
		free(want);
		rp_trace_free(&got);
	}

	unlink(out);
	free(bts);
	free(k.steps);
	rp_src_free(&s);
	return 1;
}

int main(void)
{
	int ran = run_file("quipper/perf.data.branch-4.14");
	ran += run_file("autofdo/test.lbr");
	if (!ran)
		check_skip("no LBR recording in " BTR_SHARED_DIR "/traces to make a BTS recording from");
	return check_done();
}
