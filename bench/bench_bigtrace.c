/* bench_bigtrace.c - bounded memory: decoding and reporting a trace of
 * several GB must stay within a fixed resident size (the reader streams
 * chunk by chunk, the stream keeps at most 16 PT decoders, the report's
 * tables grow with the code seen, never with the trace's length).
 *
 *   bench_bigtrace gen TEMPLATE.btr OUT.btr GB [pt|bts]
 *       writes OUT.btr of at least GB GiB: TEMPLATE's non-PT records once,
 *       then, with "pt" (default), its PT records over and over as ONE
 *       continuous stream of its first thread (each copy starts with PSB+
 *       and TIP.PGE and ends with TIP.PGD, so the stream is valid Intel PT:
 *       the program runs again and again); with "bts", the first 2M
 *       branches of the decoded template as 24-byte BTS records, over and
 *       over (classified against the same modules: about 30x cheaper to
 *       decode per byte than dense PT, so GBs take seconds); then the exit
 *       records.
 *   bench_bigtrace run TRACE
 *       in two fresh child processes: (1) the stream alone (read + decode),
 *       (2) the stream feeding a report; prints trace size, instructions,
 *       branches, time and each child's peak RSS (getrusage ru_maxrss).
 *
 * bench/bench_memory.sh does both on a qemu recording of gzip in /tmp and
 * deletes the file afterwards.  Not a timed test; the figure is the RSS.
 * Without arguments it prints this usage and exits 0 (make bench). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "btr/btr.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct tpl {
	uint8_t *pt;           /* the first PT thread's bytes, concatenated */
	size_t pt_size;
	uint32_t tid;
};

enum { BTS_MAX = 2u << 20 };
struct bts_buf {
	uint8_t *p;
	size_t n;   /* records */
};

static int collect_bts(void *ctx, const struct btr_branch *b)
{
	struct bts_buf *bb = ctx;
	if (bb->n == BTS_MAX)
		return 1;
	if (!(b->flags & BTR_BF_TAKEN))
		return 0;
	btr_bts_encode(b->from, b->to, 0, bb->p + bb->n++ * BTR_BTS_RECORD_SIZE);
	return 0;
}

static int gen(const char *tplpath, const char *out, double gb, int bts)
{
	struct btr_trace_reader *r;
	struct btr_trace_writer *w;
	struct btr_record rec;
	struct tpl t = { 0 };
	int rc;

	if ((rc = btr_trace_reader_new(tplpath, &r)) < 0) {
		fprintf(stderr, "%s: %s\n", tplpath, btr_errstr(rc));
		return 1;
	}
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	if ((rc = btr_trace_writer_new(out, &wo, &w)) < 0) {
		fprintf(stderr, "%s: %s\n", out, btr_errstr(rc));
		return 1;
	}
	/* pass 1: header records out, PT of the first thread collected */
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if (rec.type == BTR_REC_PT) {
			if (!t.pt)
				t.tid = rec.u.data.tid;
			if (rec.u.data.tid != t.tid)
				continue;
			uint8_t *n = realloc(t.pt, t.pt_size + rec.u.data.size);
			if (!n)
				return 1;
			t.pt = n;
			memcpy(t.pt + t.pt_size, rec.u.data.data, rec.u.data.size);
			t.pt_size += rec.u.data.size;
		} else if (rec.type == BTR_REC_MACHINE || rec.type == BTR_REC_MODULE_LOAD ||
			   (rec.type == BTR_REC_THREAD_START && rec.u.thread.tid == t.tid) ||
			   (rec.type == BTR_REC_THREAD_START && !t.pt)) {
			if (btr_trace_write(w, &rec) < 0)
				return 1;
		}
	}
	btr_trace_reader_free(r);
	if (!t.pt_size) {
		fprintf(stderr, "%s: no PT data\n", tplpath);
		return 1;
	}
	if (bts) {
		/* the template's branches (taken ones: BTS records only those) */
		struct bts_buf bb = { malloc((size_t)BTS_MAX * BTR_BTS_RECORD_SIZE), 0 };
		struct btr_stream_opts so = { .sz = sizeof(so), .branch = collect_bts, .ctx = &bb };
		struct btr_stream *s;
		if (!bb.p || btr_stream_open(tplpath, &so, &s) < 0)
			return 1;
		btr_stream_run(s);
		btr_stream_free(s);
		free(t.pt);
		t.pt = bb.p;
		t.pt_size = bb.n * BTR_BTS_RECORD_SIZE;
	}
	uint64_t target = (uint64_t)(gb * (1ull << 30)), off = 0;
	const size_t piece = 256 << 10;
	while (off < target) {
		for (size_t i = 0; i < t.pt_size; i += piece) {
			size_t n = t.pt_size - i < piece ? t.pt_size - i : piece;
			rec = (struct btr_record){ .type = bts ? BTR_REC_BTS : BTR_REC_PT };
			rec.u.data = (struct btr_rec_data){ .tid = t.tid, .cpu = -1, .stream_offset = off,
							    .size = n, .data = t.pt + i };
			if ((rc = btr_trace_write(w, &rec)) < 0) {
				fprintf(stderr, "%s: %s\n", out, btr_errstr(rc));
				btr_trace_writer_abort(w);
				return 1;
			}
			off += n;
		}
	}
	rec = (struct btr_record){ .type = BTR_REC_THREAD_EXIT };
	rec.u.thread = (struct btr_rec_thread){ .pid = t.tid, .tid = t.tid, .name = "" };
	btr_trace_write(w, &rec);
	rec = (struct btr_record){ .type = BTR_REC_PROCESS_EXIT };
	rec.u.exit = (struct btr_rec_exit){ .pid = t.tid, .tid = t.tid };
	btr_trace_write(w, &rec);
	if ((rc = btr_trace_writer_close(w)) < 0) {
		fprintf(stderr, "%s: %s\n", out, btr_errstr(rc));
		return 1;
	}
	printf("generated %s: %.2f GiB of %s (%zu-byte template stream of thread %u, %llu copies)\n", out,
	       (double)off / (1ull << 30), bts ? "BTS" : "PT", t.pt_size, t.tid,
	       (unsigned long long)(off / t.pt_size));
	free(t.pt);
	return 0;
}

static uint64_t nbranch, ninsn;
static int on_branch(void *ctx, const struct btr_branch *b)
{
	(void)ctx;
	nbranch++;
	ninsn += b->insns;
	return 0;
}

/* One measurement in a child; prints a line. */
static void measure(const char *path, int with_report, double size_gib)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		double t0 = now();
		int rc;
		const char *what;
		if (with_report) {
			struct btr_report *rep = NULL;
			int lost = 0;
			what = "decode + report";
			rc = btr_report_trace(path, NULL, NULL, &rep, &lost);
			if (rep) {
				const struct btr_report_result *res = btr_report_get(rep);
				ninsn = res->insns;
				nbranch = res->branches;
			}
			btr_report_free(rep);
		} else {
			struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch };
			struct btr_stream *s;
			what = "decode (stream)";
			rc = btr_stream_open(path, &so, &s);
			if (rc == 0) {
				rc = btr_stream_run(s);
				btr_stream_free(s);
			}
		}
		double dt = now() - t0;
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		printf("%-16s trace %.2f GiB  %.3g insns  %.3g branches  %.1f s  peak RSS %.1f MiB%s%s\n", what,
		       size_gib, (double)ninsn, (double)nbranch, dt, ru.ru_maxrss / 1024.0, rc < 0 ? "  error: " : "",
		       rc < 0 ? btr_errstr(rc) : "");
		fflush(stdout);
		_exit(rc < 0 ? 1 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "gen"))
		return gen(argv[2], argv[3], atof(argv[4]), argc > 5 && !strcmp(argv[5], "bts"));
	if (argc >= 3 && !strcmp(argv[1], "run")) {
		struct stat st;
		if (stat(argv[2], &st) != 0) {
			perror(argv[2]);
			return 1;
		}
		double gib = (double)st.st_size / (1ull << 30);
		measure(argv[2], 0, gib);
		measure(argv[2], 1, gib);
		return 0;
	}
	printf("bench_bigtrace: bounded memory on a multi-GB trace; run bench/bench_memory.sh BUILD [GIB]\n"
	       "  (bench_bigtrace gen TEMPLATE.btr OUT.btr GIB [pt|bts]; bench_bigtrace run TRACE)\n");
	return 0;
}
