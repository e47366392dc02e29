/* test_analysis.c - the analysis interface: one pass feeds N analyses in
 * stream order, batches never straddle an event, errors and early stops
 * propagate, pids reach branches from thread records, and
 * btr_analysis_run works on a real .btr file. */
#include "btr/analysis.h"
#include "btr/blocks.h"
#include "btr/cov.h"
#include "btr/error.h"
#include "btr/report.h"
#include "btr/trace.h"
#include "check.h"

#include <unistd.h>

/* A recording analysis: a log of "B<from>" and "E<type>" entries. */
struct rec_state {
	char log[4096];
	size_t len;
	int begun, ended, end_status;
	uint64_t branches, batches, max_batch;
	uint32_t pid_seen;
	int fail_at;       /* return this error at the fail_at-th branch (1-based) */
	int stop_at;
	int destroyed_flag;
	int *destroyed;
};

static void lg(struct rec_state *st, const char *s)
{
	size_t n = strlen(s);
	if (st->len + n + 1 < sizeof(st->log)) {
		memcpy(st->log + st->len, s, n + 1);
		st->len += n;
	}
}

static int r_begin(void *p, struct btr_stream *s)
{
	struct rec_state *st = p;
	st->begun++;
	return s ? 0 : -BTR_ERR_INVAL;
}

static int r_branches(void *p, const struct btr_branch *b, size_t n)
{
	struct rec_state *st = p;
	st->batches++;
	if (n > st->max_batch)
		st->max_batch = n;
	for (size_t i = 0; i < n; i++) {
		char buf[32];
		st->branches++;
		if (b[i].pid)
			st->pid_seen = b[i].pid;
		if (st->branches < 64) {
			snprintf(buf, sizeof(buf), "B%llx ", (unsigned long long)b[i].from);
			lg(st, buf);
		}
		if (st->fail_at && st->branches == (uint64_t)st->fail_at)
			return -BTR_ERR_NOMEM;
		if (st->stop_at && st->branches == (uint64_t)st->stop_at)
			return 7;
	}
	return 0;
}

static int r_event(void *p, const struct btr_stream_event *ev)
{
	struct rec_state *st = p;
	char buf[16];
	snprintf(buf, sizeof(buf), "E%d ", (int)ev->type);
	lg(st, buf);
	return 0;
}

static int r_end(void *p, int status)
{
	struct rec_state *st = p;
	st->ended++;
	st->end_status = status;
	return 0;
}

static int r_write(void *p, FILE *out, const char *fmt)
{
	struct rec_state *st = p;
	if (fmt && strcmp(fmt, "text"))
		return -BTR_ERR_INVAL;
	fprintf(out, "%llu\n", (unsigned long long)st->branches);
	return 0;
}

static void r_destroy(void *p)
{
	struct rec_state *st = p;
	if (st->destroyed)
		(*st->destroyed)++;
}

static const struct btr_analysis_ops rec_ops = {
	.name = "rec", .begin = r_begin, .branches = r_branches, .event = r_event,
	.end = r_end, .write = r_write, .destroy = r_destroy,
};

static void feed_thread(struct btr_trace_writer *w, uint32_t pid, uint32_t tid)
{
	struct btr_record r = { .type = BTR_REC_THREAD_START };
	r.u.thread.pid = pid;
	r.u.thread.tid = tid;
	r.u.thread.name = "";
	CHECK_EQ(btr_trace_write(w, &r), 0);
}

static void feed_branches(struct btr_trace_writer *w, uint32_t tid, uint64_t base, unsigned n)
{
	struct btr_branch b[2000];
	memset(b, 0, sizeof(b));
	for (unsigned i = 0; i < n; i++) {
		b[i].from = base + i;
		b[i].to = base + i + 0x100;
		b[i].tid = tid;
		b[i].kind = BTR_KIND_JMP;
		b[i].flags = BTR_BF_TAKEN;
	}
	struct btr_record r = { .type = BTR_REC_BRANCHES };
	r.u.branches.tid = tid;
	r.u.branches.count = n;
	r.u.branches.branches = b;
	CHECK_EQ(btr_trace_write(w, &r), 0);
}

static const char *make_trace(char *path, size_t size)
{
	snprintf(path, size, "/tmp/btr_test_analysis_%d.btr", (int)getpid());
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	feed_thread(w, 100, 101);
	feed_branches(w, 101, 0x1000, 3);
	feed_thread(w, 200, 201);         /* an event between branch runs */
	feed_branches(w, 201, 0x2000, 1500);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	return path;
}

int main(void)
{
	char path[128];
	make_trace(path, sizeof(path));

	/* Two analyses, one pass: identical logs, order kept, batches
	 * bounded, every branch carries its process id. */
	int destroyed = 0;
	struct rec_state *s1 = calloc(1, sizeof(*s1)), *s2 = calloc(1, sizeof(*s2));
	s1->destroyed = s2->destroyed = &destroyed;
	struct btr_analysis *a[2];
	CHECK_EQ(btr_analysis_new(&rec_ops, s1, &a[0]), 0);
	CHECK_EQ(btr_analysis_new(&rec_ops, s2, &a[1]), 0);
	/* no result before the run: an error, not an empty result */
	CHECK_EQ(btr_analysis_write(a[0], stdout, "text"), -BTR_ERR_INVAL);
	/* one analysis listed twice would count everything twice */
	struct btr_analysis *twice[2] = { a[0], a[0] };
	CHECK_EQ(btr_analysis_run(path, NULL, twice, 2, NULL), -BTR_ERR_INVAL);
	CHECK_EQ(s1->begun, 0);
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	CHECK_EQ(btr_analysis_run(path, NULL, a, 2, &info), 0);
	CHECK_EQ(s1->begun, 1);
	CHECK_EQ(s1->ended, 1);
	CHECK_EQ(s1->end_status, 0);
	CHECK_EQ(s1->branches, 1503);
	CHECK_EQ(s2->branches, 1503);
	CHECK(s1->max_batch <= 512);
	CHECK(s1->batches >= 4);          /* 3, then 1500 in >= 3 batches */
	CHECK_STR(s1->log, s2->log);
	/* THREAD_START(101), 3 branches, THREAD_START(201), then branches */
	CHECK(!strncmp(s1->log, "E5 B1000 B1001 B1002 E5 B2000 ", 30));
	CHECK_EQ(s1->pid_seen, 200);
	CHECK_EQ(info.stats.branches, 1503);
	CHECK_EQ(info.lost, 0);
	CHECK_EQ(btr_analysis_state(a[0]) == s1, 1);
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	CHECK_EQ(btr_analysis_write(a[0], f, "text"), 0);
	CHECK_EQ(btr_analysis_write(a[0], f, "bogus"), -BTR_ERR_INVAL);
	fclose(f);
	CHECK_STR(buf, "1503\n");
	free(buf);
	/* a second run is refused: it would add to the first (3006) */
	CHECK_EQ(btr_analysis_run(path, NULL, a, 1, &info), -BTR_ERR_INVAL);
	CHECK_EQ(btr_analysis_run(path, NULL, &a[1], 1, NULL), -BTR_ERR_INVAL);
	CHECK_EQ(s1->begun, 1);
	CHECK_EQ(s1->branches, 1503);
	CHECK_EQ(s2->branches, 1503);
	btr_analysis_free(a[0]);
	btr_analysis_free(a[1]);
	CHECK_EQ(destroyed, 2);
	free(s1);
	free(s2);

	/* An error in the second analysis stops the run; both are ended. */
	s1 = calloc(1, sizeof(*s1));
	s2 = calloc(1, sizeof(*s2));
	s2->fail_at = 700;
	CHECK_EQ(btr_analysis_new(&rec_ops, s1, &a[0]), 0);
	CHECK_EQ(btr_analysis_new(&rec_ops, s2, &a[1]), 0);
	CHECK_EQ(btr_analysis_run(path, NULL, a, 2, NULL), -BTR_ERR_NOMEM);
	CHECK_EQ(s1->ended, 1);
	CHECK_EQ(s2->ended, 1);
	CHECK_EQ(s2->end_status, -BTR_ERR_NOMEM);
	CHECK(s1->branches < 1503);
	btr_analysis_free(a[0]);
	btr_analysis_free(a[1]);
	free(s1);
	free(s2);

	/* A positive answer stops early without error. */
	s1 = calloc(1, sizeof(*s1));
	s1->stop_at = 2;
	CHECK_EQ(btr_analysis_new(&rec_ops, s1, &a[0]), 0);
	CHECK_EQ(btr_analysis_run(path, NULL, a, 1, NULL), 7);
	CHECK_EQ(s1->ended, 1);
	CHECK(s1->branches < 1503);
	btr_analysis_free(a[0]);
	free(s1);

	/* A missing file: nothing fed, no end. */
	s1 = calloc(1, sizeof(*s1));
	CHECK_EQ(btr_analysis_new(&rec_ops, s1, &a[0]), 0);
	CHECK_EQ(btr_analysis_run("/nonexistent/x.btr", NULL, a, 1, NULL), -BTR_ERR_NOENT);
	CHECK_EQ(s1->begun + s1->ended, 0);
	CHECK_EQ(btr_analysis_write(a[0], stdout, "text"), -BTR_ERR_INVAL);
	/* not run yet: it can run on another file */
	CHECK_EQ(btr_analysis_run(path, NULL, a, 1, NULL), 0);
	CHECK_EQ(s1->branches, 1503);
	btr_analysis_free(a[0]);
	free(s1);

	/* Bad arguments. */
	CHECK_EQ(btr_analysis_new(NULL, NULL, &a[0]), -BTR_ERR_INVAL);
	CHECK_EQ(btr_analysis_write(NULL, stdout, NULL), -BTR_ERR_INVAL);

	/* The report is an analysis like the others, run by the one driver,
	 * and its output formats are the registry's list. */
	struct btr_analysis *rep;
	CHECK_EQ(btr_report_analysis_new(NULL, &rep), 0);
	CHECK_EQ(btr_report_analysis_set_name(rep, "t.btr"), 0);
	CHECK_EQ(btr_analysis_write(rep, stdout, "text"), -BTR_ERR_INVAL);   /* not run yet */
	CHECK_EQ(btr_analysis_run(path, NULL, &rep, 1, NULL), 0);
	CHECK_EQ(btr_analysis_run(path, NULL, &rep, 1, NULL), -BTR_ERR_INVAL);   /* once */
	CHECK(btr_report_analysis_get(rep) != NULL);
	const char *const *rf = btr_analysis_formats("report");
	CHECK(rf && rf == btr_analysis_ops(rep)->formats);
	CHECK_STR(rf[0], "text");
	CHECK_STR(rf[1], "json");
	CHECK(rf[2] == NULL);
	for (size_t k = 0; k < 2; k++) {
		buf = NULL;
		blen = 0;
		FILE *m = open_memstream(&buf, &blen);
		CHECK_EQ(btr_analysis_write(rep, m, rf[k]), 0);
		fclose(m);
		CHECK(strstr(buf, k ? "\"file\": \"t.btr\"" : "trace:        t.btr\n") != NULL);
		CHECK(strstr(buf, k ? "\"branches\": 1503" : "branches:     1503 ") != NULL);
		free(buf);
	}
	CHECK_EQ(btr_analysis_write(rep, stdout, "html"), -BTR_ERR_INVAL);
	btr_analysis_free(rep);

	/* A view (cov over blocks) has a result once its blocks have run. */
	struct btr_analysis *bl, *cov;
	CHECK_EQ(btr_blocks_new(&bl), 0);
	CHECK_EQ(btr_cov_new(bl, &cov), 0);
	buf = NULL;
	blen = 0;
	f = open_memstream(&buf, &blen);
	CHECK_EQ(btr_analysis_write(cov, f, "lcov"), -BTR_ERR_INVAL);
	CHECK_EQ(btr_analysis_run(path, NULL, &bl, 1, NULL), 0);
	CHECK_EQ(btr_analysis_write(cov, f, "lcov"), 0);
	fclose(f);
	free(buf);
	CHECK_EQ(btr_analysis_run(path, NULL, &bl, 1, NULL), -BTR_ERR_INVAL);
	btr_analysis_free(cov);
	btr_analysis_free(bl);
	CHECK_STR(btr_analysis_formats("cov")[2], "cobertura");
	CHECK_STR(btr_analysis_formats("flame")[0], "folded");
	CHECK(btr_analysis_formats("blocks") == NULL);
	CHECK(btr_analysis_formats("nosuch") == NULL);
	CHECK(btr_analysis_formats(NULL) == NULL);

	/* The list by index, and every analysis created by name and run:
	 * its name is its ops' name, a view over the blocks created before. */
	size_t nl = 0;
	struct btr_analysis *all[32], *blk = NULL;
	for (const char *nm; (nm = btr_analysis_name(nl)) != NULL && nl < 32; nl++) {
		struct btr_analysis_args args = { .sz = sizeof(args), .blocks = blk, .function = "main" };
		CHECK_EQ(btr_analysis_create(nm, &args, &all[nl]), 0);
		CHECK_STR(btr_analysis_ops(all[nl])->name, nm);
		if (!strcmp(nm, "blocks"))
			blk = all[nl];
	}
	CHECK(nl >= 12 && blk != NULL);
	CHECK_EQ(btr_analysis_run(path, NULL, all, nl, NULL), 0);
	for (size_t k = nl; k-- > 0;)
		btr_analysis_free(all[k]);
	CHECK_STR(btr_analysis_name(0), "report");
	CHECK(btr_analysis_needs("cov") == BTR_ANALYSIS_NEEDS_BLOCKS);
	CHECK(btr_analysis_needs("cfg") == (BTR_ANALYSIS_NEEDS_BLOCKS | BTR_ANALYSIS_NEEDS_FUNCTION));
	CHECK(btr_analysis_needs("flame") == 0);
	struct btr_analysis *x = NULL;
	CHECK_EQ(btr_analysis_create("cov", NULL, &x), -BTR_ERR_INVAL);   /* no blocks */
	CHECK_EQ(btr_analysis_create("nosuch", NULL, &x), -BTR_ERR_NOT_FOUND);
	CHECK_EQ(btr_analysis_create("flame", NULL, &x), 0);
	btr_analysis_free(x);

	unlink(path);
	return check_done();
}
