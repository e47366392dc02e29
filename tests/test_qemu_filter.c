/* test_qemu_filter.c - `btr record -b qemu --ip-filter`: for each set of
 * ranges, the filtered trace decodes (libipt's instruction decoder and
 * btr's flow decoder) without a gap or an error into exactly the
 * instructions an unfiltered recording of the same deterministic program
 * ran inside those ranges, in order (tests/progs/select_qsort.c).  The
 * ranges are entered by a call (work), an indirect call from a shared
 * library (qsort's comparator cmp), a signal (on_sig), returns (main), an
 * indirect jump (qsort through the PLT); one is in a shared library
 * (qsort_r in libc); two at once; --start work (its windows); a range left
 * by returns to a block QEMU translated before the range ran
 * (tests/progs/select_late.c: no exit callback there).  And the
 * work outside the ranges:
 * with the leaf work() (about 1% of the blocks) the plugin makes at most
 * 2% of the unfiltered recording's block callbacks (counted by the
 * plugin, BTR_QEMU_STATS: never timed). */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "flowdiff.h"
#include "qemu_run.h"
#include "btr/error.h"
#include "btr/perfattr.h"
#include "btr/trace.h"

#define BTR BTR_BINARY_DIR "/btr"
#define PROG BTR_BINARY_DIR "/prog_select_qsort"
#define LATE BTR_BINARY_DIR "/prog_select_late"

static const char *prog = PROG;   /* what record() runs */
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

struct mod { char path[4096]; uint64_t start, size, pgoff; };

struct tr {
	struct btr_image *img;
	struct mod mods[64];
	int n_mods;
	uint32_t tid;
	int n_threads;
	uint8_t *pt;
	size_t pt_n;
};

/* btr record -q -b qemu [--ip-filter SPEC]... -o OUT -- PROG; the
 * plugin's counts into @stats.  Returns btr's exit status. */
static int record(const char *out, const char *const *spec, const char *stats)
{
	const char *args[25];
	int n = 0;
	for (int i = 0; spec && spec[i] && n < 24; i++) {
		/* "start=SYM": --start SYM (the window of each call) */
		int start = !strncmp(spec[i], "start=", 6);
		args[n++] = start ? "--start" : "--ip-filter";
		args[n++] = spec[i] + (start ? 6 : 0);
	}
	args[n] = NULL;
	return qemu_record(BTR, out, args, prog, stats);
}

static long long callbacks(const char *stats)
{
	FILE *f = fopen(stats, "r");
	long long n = -1;
	if (f && fscanf(f, "callbacks %lld", &n) != 1)
		n = -1;
	if (f)
		fclose(f);
	return n;
}

static void load(const char *path, struct tr *t)
{
	struct btr_trace_reader *rd;
	struct btr_record rec;
	memset(t, 0, sizeof(*t));
	CHECK_EQ(btr_image_new(&t->img), 0);
	CHECK_EQ(btr_trace_reader_new(path, &rd), 0);
	int rc;
	while ((rc = btr_trace_read(rd, &rec)) == 0) {
		if (rec.type == BTR_REC_MODULE_LOAD && t->n_mods < 64) {
			struct mod *m = &t->mods[t->n_mods++];
			snprintf(m->path, sizeof(m->path), "%s", rec.u.module.path);
			m->start = rec.u.module.start;
			m->size = rec.u.module.size;
			m->pgoff = rec.u.module.pgoff;
			struct stat st;
			if (stat(m->path, &st) == 0 && (uint64_t)st.st_size > m->pgoff) {
				uint64_t sz = m->size;
				if (sz > (uint64_t)st.st_size - m->pgoff)
					sz = (uint64_t)st.st_size - m->pgoff;
				btr_image_add_file(t->img, m->path, m->pgoff, sz, m->start);
			}
		} else if (rec.type == BTR_REC_THREAD_START) {
			t->n_threads++;
			t->tid = rec.u.thread.tid;
		} else if (rec.type == BTR_REC_PT) {
			t->pt = realloc(t->pt, t->pt_n + rec.u.data.size);
			memcpy(t->pt + t->pt_n, rec.u.data.data, rec.u.data.size);
			t->pt_n += rec.u.data.size;
		}
	}
	CHECK_EQ(rc, -BTR_ERR_EOS);
	btr_trace_reader_free(rd);
}

static void unload(struct tr *t)
{
	btr_image_free(t->img);
	free(t->pt);
}

/* The guest address ranges of @spec in the recording @t. */
static int ranges(const struct tr *t, const char *const *spec, uint64_t r[][2])
{
	int n = 0;
	for (int i = 0; spec[i]; i++) {
		struct btr_ip_filter f;
		char real[4096];
		CHECK_EQ(btr_ip_filter_parse(spec[i], &f), 0);
		if (!realpath(f.module, real))
			continue;
		for (int j = 0; j < t->n_mods; j++) {
			const struct mod *m = &t->mods[j];
			if (strcmp(m->path, real) || f.start < m->pgoff || f.start >= m->pgoff + m->size)
				continue;
			r[n][0] = m->start + (f.start - m->pgoff);
			r[n][1] = m->start + (f.end - m->pgoff);
			n++;
		}
	}
	return n;
}

static int inside(uint64_t ip, uint64_t r[][2], int n)
{
	for (int i = 0; i < n; i++)
		if (ip >= r[i][0] && ip <= r[i][1])
			return 1;
	return 0;
}

/* The instructions of the unfiltered recording @full inside @spec's
 * ranges equal what the filtered recording of @spec decodes to. */
static size_t compare(const char *name, struct tr *full, const uint64_t *all, size_t n_all, const char *const *spec,
		      const char *const *rspec)
{
	char out[256], stats[256];
	snprintf(out, sizeof(out), "qemu_filter_%s.btr", name);
	snprintf(stats, sizeof(stats), "qemu_filter_%s.stats", name);
	CHECK_EQ(record(out, spec, stats), 0);
	struct tr t;
	load(out, &t);
	uint64_t r[16][2];
	int nr = ranges(full, rspec ? rspec : spec, r);
	CHECK(nr > 0);
	struct ipvec want = { 0 };
	for (size_t i = 0; i < n_all; i++)
		if (inside(all[i], r, nr))
			ipvec_push(&want, all[i]);
	CHECK(want.n > 0);

	struct ipvec b = { 0 };
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .tid = t.tid };
	int rc = flow_btr(t.img, &cfg, t.pt, t.pt_n, 0, &b);
	CHECK(rc >= 0);
	CHECK_EQ(b.gaps, 0);
	long at = ipvec_diff(&b, want.v, want.n);
	if (at >= 0) {
		char what[128];
		snprintf(what, sizeof(what), "%s: btr_ptflow vs unfiltered", name);
		ipvec_report(what, &b, want.v, want.n, at);
	}
	CHECK_EQ(at, -1);
#ifdef BTR_HAVE_LIBIPT
	struct ipvec a = { 0 };
	int errs = flow_ipt(t.img, t.pt, t.pt_n, &a);
	CHECK_EQ(errs, 0);
	CHECK_EQ(a.gaps, 0);
	long ai = ipvec_diff(&a, want.v, want.n);
	if (ai >= 0) {
		char what[128];
		snprintf(what, sizeof(what), "%s: libipt vs unfiltered", name);
		ipvec_report(what, &a, want.v, want.n, ai);
	}
	CHECK_EQ(ai, -1);
	ipvec_free(&a);
#else
	check_oracle_missing("libipt (built without libipt-dev): filtered traces decoded by libipt");
#endif
	printf("%s: %zu instructions inside, %zu bytes of PT (unfiltered %zu)\n", name, want.n, t.pt_n, full->pt_n);
	size_t bytes = t.pt_n;
	ipvec_free(&b);
	ipvec_free(&want);
	unload(&t);
	return bytes;
}

int main(void)
{
	if (access(BTR, X_OK) || access(BTR_BINARY_DIR "/btr-qemu.so", R_OK) || access(PROG, X_OK) || access(LATE, X_OK))
		check_skip("btr, btr-qemu.so, prog_select_qsort or prog_select_late not built");
	if (system("command -v qemu-x86_64 >/dev/null 2>&1") != 0)
		check_skip("qemu-x86_64 absent");
	if (system(BTR " info 2>/dev/null | grep -q '^qemu  yes'") != 0)
		check_skip("the qemu backend is unusable here (btr info says why)");

	CHECK_EQ(record("qemu_filter_full.btr", NULL, "qemu_filter_full.stats"), 0);
	struct tr full;
	load("qemu_filter_full.btr", &full);
	CHECK_EQ(full.n_threads, 1);
	struct ipvec all = { 0 };
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .tid = full.tid };
	CHECK(flow_btr(full.img, &cfg, full.pt, full.pt_n, 0, &all) >= 0);
	CHECK_EQ(all.gaps, 0);
	CHECK(all.n > 1000000);

	const char *work[] = { "work@" PROG, NULL };
	size_t wb = compare("work", &full, all.v, all.n, work, NULL);   /* call, return */
	CHECK(wb * 20 < full.pt_n);
	/* --start work: work() calls nothing, so each window is work()'s run */
	const char *start[] = { "start=work", NULL };
	compare("start_work", &full, all.v, all.n, start, work);
	const char *cmp[] = { "cmp@" PROG, NULL };
	compare("cmp", &full, all.v, all.n, cmp, NULL);                /* indirect call from libc */
	const char *sig[] = { "on_sig@" PROG, NULL };
	compare("on_sig", &full, all.v, all.n, sig, NULL);             /* a signal */
	const char *two[] = { "work@" PROG, "on_sig@" PROG, NULL };
	compare("two", &full, all.v, all.n, two, NULL);
	const char *main_[] = { "main@" PROG, NULL };
	compare("main", &full, all.v, all.n, main_, NULL);             /* entered by returns */
	if (access(LIBC, R_OK) == 0) {
		const char *lib[] = { "qsort_r@" LIBC, NULL };
		compare("qsort_r", &full, all.v, all.n, lib, NULL);    /* a shared library, left by calls */
		const char *plt[] = { "qsort@" LIBC, NULL };
		compare("qsort", &full, all.v, all.n, plt, NULL);      /* an indirect jump (PLT) */
	} else {
		printf("note: %s absent: no shared-library range\n", LIBC);
	}

	/* The leaf alone: the blocks outside run without callbacks. */
	long long cf = callbacks("qemu_filter_full.stats"), cw = callbacks("qemu_filter_work.stats");
	printf("block callbacks: unfiltered %lld, work() alone %lld\n", cf, cw);
	CHECK(cf > 100000);
	CHECK(cw > 0);
	CHECK(cw * 50 <= cf);

	ipvec_free(&all);
	unload(&full);

	/* Returns to a block translated before: their targets, no gap. */
	prog = LATE;
	CHECK_EQ(record("qemu_filter_lfull.btr", NULL, "qemu_filter_lfull.stats"), 0);
	load("qemu_filter_lfull.btr", &full);
	struct ipvec lall = { 0 };
	struct btr_ptflow_config lcfg = { .sz = sizeof(lcfg), .tid = full.tid };
	CHECK(flow_btr(full.img, &lcfg, full.pt, full.pt_n, 0, &lall) >= 0);
	CHECK_EQ(lall.gaps, 0);
	const char *late[] = { "inside@" LATE, NULL };
	compare("late", &full, lall.v, lall.n, late, NULL);
	ipvec_free(&lall);
	unload(&full);
	return check_done();
}
