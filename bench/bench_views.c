/* bench_views.c - one pass of report + blocks + cov + cfg over a trace
 * against decoding it alone (btr_analysis_run with no analysis), with the
 * peak RSS of each (every measurement in its own child process, so RSS
 * is that run's).  Usage: bench_views TRACE [FUNCTION]...
 * bench/bench_views.sh records traces of 10^6 and 10^7 branches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "btr/btr.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* mode 0: decode only; 1: report+blocks+cov+cfg. Prints "secs branches". */
static int run(const char *path, int mode, const char *fn)
{
	struct btr_analysis *a[4];
	size_t n = 0;
	struct btr_report_opts ro = { .sz = sizeof(ro) };
	struct btr_cfg_opts co = { .sz = sizeof(co), .function = fn };
	if (mode) {
		btr_report_analysis_new(&ro, &a[n++]);
		btr_blocks_new(&a[n++]);
		btr_cov_new(a[1], &a[n++]);
		btr_cfg_new(a[1], &co, &a[n++]);
	}
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	double t = now();
	int rc = btr_analysis_run(path, NULL, a, n, &info);
	if (mode) {
		FILE *nul = fopen("/dev/null", "w");
		btr_analysis_write(a[2], nul, "drcov");
		btr_analysis_write(a[3], nul, "dot");
		fclose(nul);
	}
	t = now() - t;
	printf("%.3f %llu\n", t, (unsigned long long)info.stats.branches);
	for (size_t i = n; i-- > 0;)
		btr_analysis_free(a[i]);
	return rc < 0;
}

static void measure(const char *path, int mode, const char *fn, double *secs, unsigned long long *br, long *rss)
{
	int p[2];
	if (pipe(p))
		exit(1);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		int rc = run(path, mode, fn);
		fflush(stdout);
		_exit(rc);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	if (fscanf(f, "%lf %llu", secs, br) != 2)
		*secs = -1;
	fclose(f);
	int st;
	struct rusage ru;
	wait4(pid, &st, 0, &ru);
	*rss = ru.ru_maxrss;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_views TRACE [FUNCTION]\n");
		return 2;
	}
	const char *fn = argc > 2 ? argv[2] : "main";
	double s0, s1;
	unsigned long long b0, b1;
	long r0, r1;
	measure(argv[1], 0, fn, &s0, &b0, &r0);
	measure(argv[1], 1, fn, &s1, &b1, &r1);
	printf("%-40s %12s %10s %12s\n", argv[1], "branches", "seconds", "peak RSS KiB");
	printf("%-40s %12llu %10.3f %12ld\n", "  decode only", b0, s0, r0);
	printf("%-40s %12llu %10.3f %12ld\n", "  report+blocks+cov+cfg, one pass", b1, s1, r1);
	printf("  views cost: %+.1f%% time, %+ld KiB RSS\n", s0 > 0 ? 100.0 * (s1 - s0) / s0 : 0.0, r1 - r0);
	return 0;
}
