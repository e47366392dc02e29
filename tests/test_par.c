/* test_par.c - decoding in several threads (btr_stream_opts.jobs) gives
 * what one thread gives: every analysis of tests/fuzz/analyses.h, written
 * in every format it has, and the plain stream (branches and events in
 * order), on the real hardware trace ../shared/traces/kafl-qemu wrapped
 * into a .btr (its raw PT in chunks, its code as CODE records): as one
 * thread, as three threads of one process (the trace three times,
 * chunks interleaved), and as the PT of two CPUs (which warns: no context
 * switches place their threads); the log's messages are compared too.
 * The decoder threads started, and the segments a thread's (or CPU's)
 * data was cut into at PSBs and in how many threads they began, are
 * counted from the library's debug log: the one thread of the first
 * trace is decoded in two and three threads.  Skipped when ../shared is
 * absent.
 *
 * `test_par --write-kafl OUT THREADS` writes the wrapped trace (for
 * tests/cli_jobs.sh, which runs every reading command on it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btr/analysis.h"
#include "btr/error.h"
#include "btr/stream.h"
#include "btr/trace.h"
#include "check.h"
#include "fuzz/analyses.h"
#include "image/codepages.h"

#define KAFL BTR_SHARED_DIR "/traces/kafl-qemu"
#define CODE_BASE 0x555555554000ULL
#define PID 100

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
	if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*n = (size_t)sz;
	return b;
}

/* The kafl trace as a .btr of @threads threads (@percpu: as the PT of
 * @threads CPUs, with no context switches to name their threads); 0 or -1. */
static int write_kafl(const char *out, unsigned threads, int percpu)
{
	size_t npt, ncode;
	uint8_t *pt = slurp(KAFL "/trace.pt", &npt), *code = slurp(KAFL "/code.bin", &ncode);
	struct btr_trace_writer *w;
	int rc = -1;
	if (!pt || !code || btr_trace_writer_new(out, NULL, &w) < 0)
		goto out;
	struct btr_record r = { .type = BTR_REC_MACHINE };
	snprintf(r.u.machine.backend, sizeof(r.u.machine.backend), "pt");
	snprintf(r.u.machine.cpu_vendor, sizeof(r.u.machine.cpu_vendor), "GenuineIntel");
	int e = btr_trace_write(w, &r);
	r.type = BTR_REC_PROCESS;
	r.u.process = (struct btr_rec_process){ .pid = PID, .event = BTR_PROC_START, .path = "/qemu", .args = "",
						.detail = "" };
	e = e ? e : btr_trace_write(w, &r);
	for (unsigned t = 0; t < threads && !e; t++) {
		r.type = BTR_REC_THREAD_START;
		r.u.thread = (struct btr_rec_thread){ .pid = PID, .tid = PID + t, .name = "" };
		e = btr_trace_write(w, &r);
	}
	/* the pages of code the image has (the others are zero) */
	static const uint8_t zero[4096];
	for (size_t off = 0; off + 4096 <= ncode && !e; off += 4096) {
		if (!memcmp(code + off, zero, 4096))
			continue;
		r.type = BTR_REC_CODE;
		r.u.code = (struct btr_rec_code){ .pid = PID, .addr = CODE_BASE + off,
						  .hash = codeblobs_hash(code + off, 4096), .size = 4096,
						  .data = code + off };
		e = btr_trace_write(w, &r);
	}
	const size_t chunk = 48 << 10;
	for (size_t off = 0; off < npt && !e; off += chunk)
		for (unsigned t = 0; t < threads && !e; t++) {
			r.type = BTR_REC_PT;
			r.u.data = (struct btr_rec_data){ .tid = percpu ? 0 : PID + t, .cpu = percpu ? (int32_t)t : -1,
							  .stream_offset = off,
							  .size = npt - off < chunk ? npt - off : chunk, .data = pt + off };
			e = btr_trace_write(w, &r);
		}
	for (unsigned t = 0; t < threads && !e; t++) {
		r.type = BTR_REC_THREAD_EXIT;
		r.u.thread = (struct btr_rec_thread){ .pid = PID, .tid = PID + t, .name = "" };
		e = btr_trace_write(w, &r);
	}
	rc = btr_trace_writer_close(w) < 0 || e ? -1 : 0;
out:
	free(pt);
	free(code);
	return rc;
}

/* ---- decoder threads, counted from the debug log ---- */

static unsigned started;
static unsigned long long segs;   /* segments of one thread's data after its first */
static unsigned seg_threads;      /* ... decoded in this many decoder threads (the last run's) */
static char *said;          /* the other messages, in order */
static size_t said_len;
static FILE *said_f;

static void logged(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)ctx;
	unsigned n;
	unsigned long long k;
	if (sscanf(msg, "stream: %u decoder threads started", &n) == 1)
		started += n;
	else if (sscanf(msg, "stream: segments of a thread's data after its first: %llu, decoded in %u", &k, &n) == 2)
		segs += k, seg_threads = n;
	else if (said_f && strncmp(msg, "stream: CPU seconds", 19))   /* (only -j N says that) */
		fprintf(said_f, "%d %s\n", (int)level, msg);
}

/* Starts collecting the log's messages (said_stop returns them). */
static void said_start(void)
{
	said_f = open_memstream(&said, &said_len);
}

static char *said_stop(void)
{
	fclose(said_f);
	said_f = NULL;
	return said;
}

/* ---- every analysis, every format ---- */

struct buf {
	char *p;
	size_t n;
};

static void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->n = 0;
}

/* Creates analysis @name: the library's (fuzz_make) or a fuzz extra. */
static int make_named(const char *name, struct btr_analysis **out)
{
	for (size_t k = 0; k < sizeof(fuzz_extra) / sizeof(fuzz_extra[0]); k++)
		if (!strcmp(fuzz_extra[k].name, name))
			return fuzz_extra[k].make(NULL, 0, out);
	int rc = fuzz_make(name, NULL, 0, out);
	if (rc == 0 && !strcmp(name, "blocks"))
		fz_blocks = *out;
	return rc;
}

/* Runs the analyses named @which (NULL ends) over @path in @jobs threads
 * and writes all of them in all their formats, and the run's statistics,
 * into *@out. */
static void run_analyses(const char *path, unsigned jobs, const char *const *which, struct buf *out)
{
	struct btr_analysis *a[FUZZ_N_ANALYSES];
	size_t n = 0;
	fz_blocks = NULL;
	for (; which[n] && n < FUZZ_N_ANALYSES; n++)
		CHECK_EQ(make_named(which[n], &a[n]), 0);
	struct btr_stream_opts so = { .sz = sizeof(so), .jobs = jobs };
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	CHECK_EQ(btr_analysis_run(path, &so, a, n, &info), 0);
	FILE *m = open_memstream(&out->p, &out->n);
	CHECK(m != NULL);
	if (!m)
		return;
	fprintf(m, "records %llu pt %llu branches %llu gaps %llu lost %d\n", (unsigned long long)info.stats.records,
		(unsigned long long)info.stats.pt_bytes, (unsigned long long)info.stats.branches,
		(unsigned long long)info.stats.gaps, info.lost);
	for (size_t i = 0; i < n; i++) {
		const char *const *list = btr_analysis_ops(a[i])->formats;
		for (size_t k = 0; k == 0 || (list && list[k - 1]); k++) {
			fprintf(m, "== %s %s\n", which[i], k ? list[k - 1] : "default");
			btr_analysis_write(a[i], m, k ? list[k - 1] : NULL);
		}
	}
	fclose(m);
	/* Cobertura's timestamp is the time of writing */
	for (char *t = out->p; (t = strstr(t, "timestamp=\"")) != NULL;)
		for (t += 11; *t >= '0' && *t <= '9'; t++)
			*t = '0';
	for (size_t i = n; i-- > 0;)
		btr_analysis_free(a[i]);
}

/* ---- the plain stream ---- */

struct seq {
	uint64_t h, branches, events;
};

static void mixin(struct seq *q, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		q->h = (q->h ^ b[i]) * 0x100000001b3ULL;
}

static int seq_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct seq *q = ctx;
	mixin(q, b, n * sizeof(*b));
	q->branches += n;
	return 0;
}

static int seq_event(void *ctx, const struct btr_stream_event *ev)
{
	struct seq *q = ctx;
	uint64_t v[6] = { ev->type, ev->tid, ev->pid, (uint64_t)(int64_t)ev->reason, ev->offset,
			  ev->flow ? ev->flow->type : 0 };
	mixin(q, v, sizeof(v));
	if (ev->flow)
		mixin(q, &ev->flow->ip, sizeof(ev->flow->ip));
	q->events++;
	return 0;
}

static struct seq run_stream(const char *path, unsigned jobs)
{
	struct seq q = { .h = 0xcbf29ce484222325ULL };
	struct btr_stream_opts so = { .sz = sizeof(so), .branches = seq_branches, .event = seq_event, .ctx = &q,
				      .jobs = jobs };
	struct btr_stream *s;
	CHECK_EQ(btr_stream_open(path, &so, &s), 0);
	CHECK_EQ(btr_stream_run(s), 0);
	btr_stream_free(s);
	return q;
}

static void test_trace(const char *path, unsigned threads, int percpu)
{
	/* every analysis at once (branches in order), the report alone
	 * (counts), the coverage over its blocks (counts) */
	const char *all[FUZZ_N_ANALYSES + 1];
	size_t na = 0;
	for (const char *name; na < FUZZ_N_ANALYSES && (name = btr_analysis_name(na)) != NULL; na++)
		all[na] = name;
	for (size_t k = 0; k < sizeof(fuzz_extra) / sizeof(fuzz_extra[0]) && na < FUZZ_N_ANALYSES; k++)
		all[na++] = fuzz_extra[k].name;
	all[na] = NULL;
	CHECK(na > 10);
	const char *report[] = { "report", NULL };
	const char *cov[] = { "blocks", "cov", NULL };
	const char *const *sets[] = { all, report, cov };
	for (size_t k = 0; k < 3; k++) {
		if (!check_sampled())   /* (BTR_SAMPLE_STEP: make asan runs a set in K) */
			continue;
		struct buf one = { 0 }, two = { 0 };
		started = 0;
		segs = 0;
		said_start();
		run_analyses(path, 1, sets[k], &one);
		char *log1 = said_stop();
		CHECK_EQ(started, 0);
		CHECK_EQ(segs, 0);
		said_start();
		run_analyses(path, 2, sets[k], &two);
		char *log2 = said_stop();
		CHECK_EQ(started, 2);
		/* one thread's (or CPU's) data decoded in both threads, in
		 * segments cut at PSBs */
		CHECK(segs >= 4);
		CHECK_EQ(seg_threads, 2);
		/* the decoder threads' messages are said once, in order */
		CHECK_STR(log1, log2);
		if (percpu)
			CHECK(strstr(log1, "PT of cpu 1: ") != NULL);
		free(log1);
		free(log2);
		CHECK(one.n > (k == 2 ? 500u : 1000u));
		CHECK_EQ(one.n, two.n);
		CHECK(one.n == two.n && !memcmp(one.p, two.p, one.n));
		if (one.n != two.n || memcmp(one.p, two.p, one.n)) {
			fprintf(stderr, "%u thread(s), set %zu: outputs differ\n", threads, k);
			FILE *f = fopen("test_par.1.out", "w"), *g = fopen("test_par.2.out", "w");
			if (f && g) {
				fwrite(one.p, 1, one.n, f);
				fwrite(two.p, 1, two.n, g);
			}
			if (f)
				fclose(f);
			if (g)
				fclose(g);
		}
		buf_free(&one);
		buf_free(&two);
	}
	struct seq one = run_stream(path, 1);
	started = 0;
	struct seq two = run_stream(path, 2), three = run_stream(path, 3);
	CHECK_EQ(started, 5);
	CHECK_EQ(seg_threads, 3);   /* (-j 3: segments of one thread in each) */
	CHECK(one.branches > 1000000 * (uint64_t)threads);
	CHECK_EQ(one.branches, two.branches);
	CHECK_EQ(one.events, two.events);
	CHECK_EQ(one.h, two.h);
	CHECK_EQ(one.h, three.h);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--write-kafl"))
		return write_kafl(argv[2], (unsigned)atoi(argv[3]), 0) ? 3 : 0;
	if (access(KAFL "/trace.pt", R_OK) != 0)
		check_skip(KAFL " not present");
	btr_log_set(logged, NULL, BTR_LOG_DEBUG);
	char path[] = "/tmp/btr-test-par.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	for (unsigned threads = 1; threads <= 3; threads += 2) {
		CHECK_EQ(write_kafl(path, threads, 0), 0);
		test_trace(path, threads, 0);
	}
	CHECK_EQ(write_kafl(path, 2, 1), 0);
	test_trace(path, 2, 1);
	unlink(path);
	return check_done();
}
