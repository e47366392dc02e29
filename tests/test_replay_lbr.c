/* test_replay_lbr.c - `btr record -b lbr` end to end without a PMU: the
 * replay kernel (tests/perf_replay.h) plays real LBR recordings
 * (../shared/traces: quipper Skylake 32-deep, SandyBridge system-wide
 * with call chains, autofdo Westmere) through the recorder's kernel
 * interface, and the .btr it writes must hold exactly the samples btr
 * reads from the original perf.data - all of them, in each CPU's order -
 * when the consumer keeps up; exactly the delivered ones, with the loss
 * reported, when it does not; the samples before the cut on Ctrl-C at
 * five points; and, for the system-wide recording, all of them with -a
 * (events enabled by ioctl, ended by Ctrl-C). */
#include "perf_replay.h"
#include "btr/stream.h"
#include "check.h"

#define SYSFS BTR_SOURCE_DIR "/tests/data/sysfs-skl"

struct brsum {
	uint64_t n, sum, ordered;
};

static int br_cb(void *ctx, const struct btr_branch *b)
{
	struct brsum *s = ctx;
	uint64_t h = (b->from * 0x9e3779b97f4a7c15ull) ^ (b->to + 0x632be59bd9b4e019ull) ^ ((uint64_t)b->tid << 40);
	h *= 0xff51afd7ed558ccdull;
	s->n++;
	s->sum += h;
	s->ordered = (s->ordered ^ h) * 0x100000001b3ull;
	return 0;
}

/* The branches btr decodes from @path (a .btr or a perf.data). */
static struct brsum decode(const char *path)
{
	struct brsum s = { 0, 0, 0 };
	struct btr_stream_opts o = { .sz = sizeof(o), .branch = br_cb, .ctx = &s };
	struct btr_stream *st;
	if (btr_stream_open(path, &o, &st) == 0) {
		btr_stream_run(st);
		btr_stream_free(st);
	}
	return s;
}

/* Compares the recorder's LBR lines with @want (the source's lines of the
 * delivered samples), CPU by CPU in order. */
static int same_lbr(const struct rp_trace *got, const struct rp_trace *want, int ncpu)
{
	int bad = 0;
	for (int c = 0; c < ncpu; c++) {
		char pre[32];
		snprintf(pre, sizeof(pre), "lbr cpu=%d ", c);
		if (rp_cmp_lines(got, want, pre, 0, NULL))
			bad = 1;
	}
	return !bad;
}

/* @want: the source's LBR lines of the samples among steps [0, @upto)
 * the replay delivered (borrowed from @src; free want->lines). */
static void want_upto(const struct rp_trace *src, const size_t *line_of, const struct rp *k, size_t upto,
		      struct rp_trace *want)
{
	memset(want, 0, sizeof(*want));
	want->lines = calloc(src->n_lines + 1, sizeof(char *));
	size_t li = 0;
	for (size_t i = 0; i < upto; i++) {
		if (!line_of[i])
			continue;
		while (li < src->n_lines && strncmp(src->lines[li], "lbr ", 4))
			li++;
		if (li < src->n_lines && !k->steps[i].dropped)
			want->lines[want->n_lines++] = src->lines[li];
		li++;
	}
}

static int run_file(const char *name)
{
	char path[4096], out[4096];
	struct rp_src s;
	int have = rp_src_open(name, path, sizeof(path), &s);
	CHECK(have >= 0);
	if (have <= 0)
		return 0;
	struct rp_trace src;
	CHECK_EQ(rp_trace_load(path, &src), 0);
	/* no PERF_SAMPLE_CPU in the recording: one ring (--per-thread) */
	int per_thread = 1;
	for (size_t i = 0; i < s.n; i++)
		if (s.recs[i].type == BTR_PERF_RECORD_SAMPLE && s.recs[i].cpu >= 0)
			per_thread = 0;
	int ncpu = per_thread ? 1 : s.max_cpu + 1;
	struct rp k;
	rp_init(&k, &s, SYSFS, ncpu);
	size_t cap = 0, n_samples = 0;
	size_t *line_of = calloc(s.n + 1, sizeof(size_t));   /* step -> source LBR line + 1 */
	for (size_t i = 0; i < s.n; i++) {
		const struct rp_src_rec *r = &s.recs[i];
		if (!rp_is_sideband(r->type) && r->type != BTR_PERF_RECORD_SAMPLE)
			continue;
		if (r->type == BTR_PERF_RECORD_SAMPLE && !r->nr_br)
			continue;
		rp_step_from(rp_add(&k, &cap), &s, i);
		if (r->type == BTR_PERF_RECORD_SAMPLE)
			line_of[k.n_steps - 1] = ++n_samples;
	}
	size_t n_src_lbr = 0;
	rp_cmp_lines(&src, &src, "lbr ", 0, &n_src_lbr);
	printf("%s: %zu records, %zu samples with a branch stack, %zu steps, %d ring(s)\n", name, s.n, n_samples,
	       k.n_steps, ncpu);
	CHECK_EQ(n_src_lbr, n_samples);
	struct brsum want_br = decode(path);

	/* 1. a consumer that keeps up, chunks of 1..8 steps per wakeup */
	struct btr_capture_opts o = { .per_thread = per_thread };
	struct rp_run run;
	rp_out_path(out, sizeof(out), "lbr.btr");
	CHECK_EQ(rp_record(&k, "lbr", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(k.next, k.n_steps);
	CHECK_EQ(run.res.signo, SIGTERM);
	struct rp_trace got;
	CHECK_EQ(rp_trace_load(out, &got), 0);
	CHECK_EQ(got.read_rc, 0);
	CHECK(same_lbr(&got, &src, ncpu));
	CHECK_EQ(rp_cmp_lines(&got, &src, "module ", 1, NULL), 0);
	CHECK_EQ(rp_cmp_lines(&got, &src, "thread", 1, NULL), 0);
	CHECK_EQ(rp_cmp_lines(&got, &src, "switch ", 1, NULL), 0);
	struct brsum got_br = decode(out);
	printf("  decoded branches: %llu (perf.data %llu)\n", (unsigned long long)got_br.n,
	       (unsigned long long)want_br.n);
	CHECK(want_br.n > 0);
	CHECK_EQ(got_br.n, want_br.n);
	CHECK_EQ(got_br.sum, want_br.sum);
	if (per_thread) {
		CHECK_EQ(got_br.ordered, want_br.ordered);
		/* and as the user sees it: `btr script` prints the same lines */
		uint64_t lg, lw;
		uint64_t hg = rp_script(out, "tid,time,addr,kind,flags", &lg);
		uint64_t hw = rp_script(path, "tid,time,addr,kind,flags", &lw);
		printf("  btr script: %llu lines (perf.data %llu)\n", (unsigned long long)lg, (unsigned long long)lw);
		CHECK(lw > 0);
		CHECK_EQ(lg, lw);
		CHECK_EQ(hg, hw);
	}
	rp_trace_free(&got);

	/* 2. a slow consumer: a burst of steps per wakeup overruns the
	 * 256 KiB ring; the kernel drops records and says so with
	 * PERF_RECORD_LOST; the .btr holds exactly the delivered samples */
	rp_rewind(&k);
	k.lossy = 1;
	k.burst = 1500;
	CHECK_EQ(rp_record(&k, "lbr", &o, out, &run), 0);
	CHECK_STR(k.err, "");
	CHECK_EQ(rp_trace_load(out, &got), 0);
	struct rp_trace want;
	want_upto(&src, line_of, &k, k.n_steps, &want);
	printf("  lossy: %llu records dropped, %llu told by LOST records\n", (unsigned long long)k.lost_records,
	       (unsigned long long)k.lost_reported);
	if (k.lost_records) {
		CHECK(same_lbr(&got, &want, ncpu));
		char says[64];
		snprintf(says, sizeof(says), "lost %llu ", (unsigned long long)k.lost_reported);
		CHECK(strstr(run.err, says) != NULL);
	}
	free(want.lines);
	rp_trace_free(&got);

	/* 3. Ctrl-C before the middle sample and at four pseudo-random
	 * steps: the samples before the cut, in order, and a valid file */
	k.lossy = 0;
	size_t cuts[5] = { 0 };
	for (size_t i = 0, seen = 0; i < k.n_steps && !cuts[0]; i++)
		if (line_of[i] && ++seen > n_samples / 2)
			cuts[0] = i;
	rp_random_cuts(&k, cuts + 1, 4, 7);
	for (int j = 0; j < 5; j++) {
		rp_rewind(&k);
		k.ctrlc_at = cuts[j];
		CHECK_EQ(rp_record(&k, "lbr", &o, out, &run), 0);
		CHECK_STR(k.err, "");
		CHECK_EQ(run.res.interrupted, 1);
		CHECK_EQ(rp_trace_load(out, &got), 0);
		CHECK_EQ(got.read_rc, 0);
		want_upto(&src, line_of, &k, k.ctrlc_at, &want);
		if (!same_lbr(&got, &want, ncpu)) {
			fprintf(stderr, "  (Ctrl-C before step %zu of %zu)\n", k.ctrlc_at, k.n_steps);
			CHECK(0);
		}
		free(want.lines);
		rp_trace_free(&got);
	}
	k.ctrlc_at = 0;

	/* 4. a recording made system-wide (-a, no command: events on every
	 * CPU enabled by ioctl, until Ctrl-C, here after the last step) */
	if (!per_thread) {
		rp_rewind(&k);
		k.ctrlc_at = k.n_steps;
		struct btr_capture_opts oa = { .system_wide = 1 };
		CHECK_EQ(rp_record(&k, "lbr", &oa, out, &run), 0);
		CHECK_STR(k.err, "");
		CHECK_EQ(k.next, k.n_steps);
		CHECK_EQ(run.res.interrupted, 1);
		CHECK_EQ(rp_trace_load(out, &got), 0);
		CHECK_EQ(got.read_rc, 0);
		CHECK(same_lbr(&got, &src, ncpu));
		rp_trace_free(&got);
		k.ctrlc_at = 0;
	}

	unlink(out);
	free(line_of);
	free(k.steps);
	rp_trace_free(&src);
	rp_src_free(&s);
	return 1;
}

int main(void)
{
	int ran = 0;
	ran += run_file("quipper/perf.data.branch-4.14");
	ran += run_file("quipper/perf.data.callgraph_and_branch-3.8");
	ran += run_file("autofdo/test.lbr");
	if (!ran)
		check_skip("no LBR recording in " BTR_SHARED_DIR "/traces");
	return check_done();
}
