/* test_replay_pt.c - `btr record -b pt` end to end without a PMU: the
 * replay kernel (tests/perf_replay.h) plays the real Skylake Intel PT
 * recording (../shared/traces/quipper/perf.data.intel_pt-4.14: kernel 4.14,
 * two CPUs with trace, MMAP/COMM/SWITCH_CPU_WIDE/ITRACE_START sideband,
 * ten PERF_RECORD_AUX) through the recorder's kernel interface: per-CPU
 * rings, the AUX area at aux_offset, AUX records in the recorded order and
 * sizes.  The .btr must hold, per CPU, exactly the AUX bytes btr reads
 * from the perf.data, and the same sideband:
 *   1. AUX areas of 4, 16 and 64 KiB written a quarter at a time, and
 *      the CPUs numbered the other way round: every module record must
 *      come before the trace that runs in it;
 *   2. a slow consumer: chunks cut where the AUX area is full (AUX
 *      records flagged TRUNCATED) - the .btr holds exactly the delivered
 *      bytes and marks each cut as a jump in stream_offset, so that the
 *      decoder restarts instead of splicing unrelated packets;
 *   3. snapshot mode: the AUX area mapped read-only and overwritten, the
 *      newest data taken on SIGUSR2 and at the end;
 *   4. Ctrl-C half-way and at four other points: the data before the
 *      cut, a valid file. */
#include "perf_replay.h"
#include "btr/stream.h"
#include "check.h"

#define SYSFS BTR_SOURCE_DIR "/tests/data/sysfs-skl"
#define AUX 16384u

struct evsum {
	uint64_t branches, events, gaps;
};

static int ev_cb(void *ctx, const struct btr_stream_event *ev)
{
	struct evsum *s = ctx;
	s->events++;
	if (ev->type == BTR_SEV_GAP)
		s->gaps++;
	return 0;
}

static int br_cb(void *ctx, const struct btr_branch *b)
{
	(void)b;
	((struct evsum *)ctx)->branches++;
	return 0;
}

static struct evsum decode(const char *path)
{
	struct evsum s = { 0, 0, 0 };
	struct btr_stream_opts o = { .sz = sizeof(o), .branch = br_cb, .event = ev_cb, .ctx = &s };
	struct btr_stream *st;
	if (btr_stream_open(path, &o, &st) == 0) {
		btr_stream_run(st);
		btr_stream_free(st);
	}
	return s;
}

int main(void)
{
	char path[4096], out[4096];
	struct rp_src s;
	int have = rp_src_open("quipper/perf.data.intel_pt-4.14", path, sizeof(path), &s);
	CHECK(have >= 0);
	if (have <= 0)
		check_skip("the Intel PT recording " BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14 is absent");
	struct rp_trace src;
	CHECK_EQ(rp_trace_load(path, &src), 0);
	int ncpu = s.max_cpu + 1;
	struct rp k;
	rp_init(&k, &s, SYSFS, ncpu);
	size_t cap = 0;
	uint64_t pos[RP_MAX_CPU] = { 0 };
	unsigned n_aux = 0;
	for (size_t i = 0; i < s.n; i++) {
		const struct rp_src_rec *r = &s.recs[i];
		if (r->type == BTR_PERF_RECORD_AUX && r->cpu >= 0 && r->body_len >= 24) {
			/* the recorded chunk: the next aux_size bytes of the CPU's stream */
			uint64_t len = rp_rd64(r->body + 8);
			if (pos[r->cpu] + len > s.aux_len[r->cpu])
				len = s.aux_len[r->cpu] - pos[r->cpu];
			struct rp_step *st = rp_add(&k, &cap);
			rp_step_from(st, &s, i);
			st->kind = RP_AUX;
			st->aux = s.aux[r->cpu];
			st->aux_pos = pos[r->cpu];
			st->aux_len = len;
			pos[r->cpu] += len;
			n_aux++;
		} else if (rp_is_sideband(r->type)) {
			rp_step_from(rp_add(&k, &cap), &s, i);
		}
	}
	printf("%zu records, %zu steps, %u AUX chunks, %d CPUs\n", s.n, k.n_steps, n_aux, ncpu);
	for (int c = 0; c < ncpu; c++) {
		CHECK_EQ(pos[c], s.aux_len[c]);   /* the AUX records cover the AUXTRACE data */
		CHECK(rp_same_bytes(src.aux[c], src.aux_len[c], s.aux[c], s.aux_len[c], "btr's reading of the perf.data", c));
	}
	struct evsum want_dec = decode(path);

	/* 1. the whole recording through AUX areas of 4, 16 and 64 KiB
	 * written a quarter at a time (wrapping 34, 9 and 3 times) */
	struct btr_capture_opts o = { .aux_size = AUX };
	struct rp_run run;
	struct rp_trace got;
	rp_out_path(out, sizeof(out), "pt.btr");
	static const uint64_t sizes[] = { 4096, AUX, 65536 };
	for (int z = 0; z < 3; z++) {
		rp_rewind(&k);
		o.aux_size = sizes[z];
		k.aux_piece = sizes[z] / 4;
		/* the largest area: a recorder that wakes up late, when the
		 * rings of several CPUs hold many records each */
		k.per_poll = z == 2 ? 64 : 8;
		CHECK_EQ(rp_record(&k, "pt", &o, out, &run), 0);
		CHECK_STR(k.err, "");
		CHECK_EQ(k.next, k.n_steps);
		CHECK_EQ(rp_trace_load(out, &got), 0);
		CHECK_EQ(got.read_rc, 0);
		for (int c = 0; c < ncpu; c++) {
			CHECK(rp_same_bytes(got.aux[c], got.aux_len[c], s.aux[c], s.aux_len[c], "full", c));
			CHECK_EQ(got.jumps[c], 0);
		}
		CHECK_EQ(rp_cmp_lines(&got, &src, "module ", 1, NULL), 0);
		CHECK_EQ(rp_cmp_lines(&got, &src, "thread", 1, NULL), 0);
		CHECK_EQ(rp_cmp_lines(&got, &src, "switch ", 1, NULL), 0);
		CHECK_EQ(run.res.pt_bytes, s.aux_len[0] + s.aux_len[3]);
		CHECK(rp_modules_before_aux(&k, &got));
		struct evsum got_dec = decode(out);
		printf("  AUX %llu: decoded %llu branches, %llu gaps (perf.data: %llu, %llu)\n",
		       (unsigned long long)sizes[z], (unsigned long long)got_dec.branches,
		       (unsigned long long)got_dec.gaps, (unsigned long long)want_dec.branches,
		       (unsigned long long)want_dec.gaps);
		CHECK_EQ(got_dec.branches, want_dec.branches);
		CHECK_EQ(got_dec.gaps, want_dec.gaps);
		rp_trace_free(&got);
	}
	o.aux_size = AUX;
	k.per_poll = 8;

	/* 1b. the same recording with its CPUs numbered the other way round
	 * (CPU 0's data on CPU 3 and so on), woken late (up to 1000 steps
	 * per wakeup: the whole recording at once): the kernel writes
	 * MMAPs into a higher CPU's ring before another CPU's AUX data the
	 * code runs in; the .btr must still have each module before that
	 * data, whatever order the rings are read in */
	rp_rewind(&k);
	k.reverse_cpus = 1;
	k.per_poll = 1000;
	k.aux_piece = AUX / 4;
	CHECK_EQ(rp_record(&k, "pt", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(rp_trace_load(out, &got), 0);
	for (int c = 0; c < ncpu; c++)
		CHECK(rp_same_bytes(got.aux[ncpu - 1 - c], got.aux_len[ncpu - 1 - c], s.aux[c], s.aux_len[c],
				    "renumbered", c));
	CHECK_EQ(rp_cmp_lines(&got, &src, "module ", 1, NULL), 0);
	CHECK(rp_modules_before_aux(&k, &got));
	rp_trace_free(&got);
	k.reverse_cpus = 0;
	k.per_poll = 8;

	/* 2. a slow consumer: chunks as recorded (up to 28 KiB) into a
	 * 16 KiB area, three steps per wakeup: TRUNCATED */
	rp_rewind(&k);
	k.aux_piece = 0;
	k.lossy = 1;
	k.burst = 3;
	CHECK_EQ(rp_record(&k, "pt", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(rp_trace_load(out, &got), 0);
	printf("  lossy: %llu AUX records truncated, %llu bytes cut\n", (unsigned long long)k.truncated,
	       (unsigned long long)k.aux_cut_bytes);
	CHECK(k.truncated > 0);
	for (int c = 0; c < ncpu; c++) {
		uint64_t nw;
		unsigned cuts;
		uint8_t *want = rp_want_delivered(&k, c, 0, &nw, &cuts);
		CHECK(rp_same_bytes(got.aux[c], got.aux_len[c], want, nw, "lossy", c));
		printf("  cpu %d: %u cut(s) with data after them, %u jump(s) in the .btr\n", c, cuts, got.jumps[c]);
		CHECK_EQ(got.jumps[c], cuts);
		free(want);
	}
	char says[64];
	snprintf(says, sizeof(says), "(%llu truncated", (unsigned long long)k.truncated);
	CHECK(strstr(run.err, says) != NULL);
	rp_trace_free(&got);

	/* 3. snapshot mode: overwritten round and round; SIGUSR2 every 40
	 * steps and at the end the newest data is taken */
	rp_rewind(&k);
	k.lossy = 0;
	k.aux_piece = 4096;
	k.usr2_every = 40;
	o.snapshot = 1;
	CHECK_EQ(rp_record(&k, "pt", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(rp_trace_load(out, &got), 0);
	CHECK_EQ(got.read_rc, 0);
	/* the final snapshot, at the end */
	for (int c = 0; c < ncpu; c++)
		if (k.rings[c].open || s.aux_len[c])
			k.snaps[k.n_snaps++] = (struct rp_snap){ c, s.aux_len[c] };
	printf("  snapshot: %u snapshots\n", k.n_snaps);
	for (int c = 0; c < ncpu; c++) {
		uint64_t nw;
		unsigned windows;
		uint8_t *want = rp_want_snapshots(&k, c, s.aux[c], AUX, &nw, &windows);
		CHECK(rp_same_bytes(got.aux[c], got.aux_len[c], want, nw, "snapshot", c));
		CHECK(got.jumps[c] <= windows);
		free(want);
	}
	o.snapshot = 0;
	k.usr2_every = 0;
	rp_trace_free(&got);

	/* 4. Ctrl-C before the middle AUX chunk and at four pseudo-random
	 * steps: the data before the cut, a valid file */
	size_t cuts[5] = { 0 };
	for (size_t i = 0, seen = 0; i < k.n_steps && !cuts[0]; i++)
		if (k.steps[i].kind == RP_AUX && ++seen > n_aux / 2)
			cuts[0] = i;
	rp_random_cuts(&k, cuts + 1, 4, 11);
	for (int j = 0; j < 5; j++) {
		rp_rewind(&k);
		k.ctrlc_at = cuts[j];
		CHECK_EQ(rp_record(&k, "pt", &o, out, &run), 0);
		CHECK_STR(k.err, "");
		CHECK_EQ(run.res.interrupted, 1);
		CHECK_EQ(rp_trace_load(out, &got), 0);
		CHECK_EQ(got.read_rc, 0);
		for (int c = 0; c < ncpu; c++) {
			uint64_t nw;
			unsigned nc;
			uint8_t *want = rp_want_delivered(&k, c, k.ctrlc_at, &nw, &nc);
			CHECK(rp_same_bytes(got.aux[c], got.aux_len[c], want, nw, "ctrl-c", c));
			free(want);
		}
		if (!j)
			CHECK(got.aux_len[3] < s.aux_len[3]);   /* it was cut */
		rp_trace_free(&got);
	}

	unlink(out);
	free(k.steps);
	rp_trace_free(&src);
	rp_src_free(&s);
	return check_done();
}
