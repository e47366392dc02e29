/* bench_report.c - cost of the common branch stream and of the report.
 *
 * Usage: bench_report TRACE [REPEAT]
 * Runs the stream over TRACE (.btr or perf.data) twice per repetition:
 * once with a no-op branch callback (reading + decoding), once feeding a
 * report (decoding + analysis), and prints the best times in ns per
 * branch.  The difference is what the report itself costs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "btr/error.h"
#include "btr/report.h"
#include "btr/stream.h"

static uint64_t count;
static int nop_branch(void *ctx, const struct btr_branch *b)
{
	(void)ctx;
	count += b->insns & 1;   /* touch the branch so it is not optimized out */
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_report TRACE [REPEAT]\n");
		return 2;
	}
	int rep = argc > 2 ? atoi(argv[2]) : 3;
	double best_stream = 1e30, best_report = 1e30;
	struct btr_stream_stats st = { 0 };
	uint64_t insns = 0;
	for (int i = 0; i < rep; i++) {
		struct btr_stream_opts so = { .sz = sizeof(so), .branch = nop_branch };
		struct btr_stream *s;
		int rc = btr_stream_open(argv[1], &so, &s);
		if (rc < 0) {
			fprintf(stderr, "%s: %s\n", argv[1], btr_errstr(rc));
			return 3;
		}
		double t0 = now();
		rc = btr_stream_run(s);
		double t = now() - t0;
		btr_stream_get_stats(s, &st);
		btr_stream_free(s);
		if (rc < 0)
			fprintf(stderr, "%s: %s (timing what was read)\n", argv[1], btr_errstr(rc));
		if (t < best_stream)
			best_stream = t;

		struct btr_report *r;
		int lost;
		t0 = now();
		rc = btr_report_trace(argv[1], NULL, NULL, &r, &lost);
		t = now() - t0;
		if (!r) {
			fprintf(stderr, "%s: %s\n", argv[1], btr_errstr(rc));
			return 3;
		}
		insns = btr_report_get(r)->insns;
		btr_report_free(r);
		if (t < best_report)
			best_report = t;
	}
	double nb = st.branches ? (double)st.branches : 1;
	printf("trace %s: %llu records, %llu branches, %llu instructions, %.1f MB PT, %.1f MB BTS, %llu LBR snapshots\n",
	       argv[1], (unsigned long long)st.records, (unsigned long long)st.branches,
	       (unsigned long long)insns, st.pt_bytes / 1e6, st.bts_bytes / 1e6,
	       (unsigned long long)st.lbr_snapshots);
	printf("stream only:     %8.3f s  %6.2f ns/branch\n", best_stream, best_stream * 1e9 / nb);
	printf("stream + report: %8.3f s  %6.2f ns/branch  (report: %.2f ns/branch)\n", best_report,
	       best_report * 1e9 / nb, (best_report - best_stream) * 1e9 / nb);
	return 0;
}
