/* xdc_compare.c - btr's PT flow decoder beside libxdc on the same bytes.
 *
 * Built by bench/bench_xdc.sh only (it links libxdc, a benchmark peer
 * built from ../shared/peers/libxdc; libbtr never links it).  Reads a
 * .btr trace that `btr record -b qemu --no-retcomp` wrote (libxdc needs
 * return compression off and no timing packets), takes the PT bytes of
 * the thread with the most data and the code image the trace's module
 * records describe, and decodes those bytes REPS times back to back with
 * each decoder, warm (decoder state kept between repetitions, as
 * libxdc's fuzzing use and btr's block cache both intend).
 *
 * Shared edge definition: one edge per executed control-flow transfer,
 * not-taken conditional branches included (btr: one struct btr_branch;
 * libxdc: one trace_edge_callback in tracing mode).  Both counts are
 * printed; ns/edge divides by btr's count for both.
 *
 * A raw hardware trace with a flat code image (as kAFL/Nyx store theirs,
 * e.g. ../shared/traces/kafl-qemu) is read with --raw: the PT bytes are
 * decoded as they are, the image is IMAGE mapped at BASE, and libxdc's IP
 * filter is the recording's range LO..HI.  Return compression is assumed
 * off there too (libxdc cannot decode it; kAFL turns it off).
 *
 * Usage: xdc_compare TRACE.btr REPS MODE
 *        xdc_compare --raw TRACE.pt IMAGE BASE LO HI REPS MODE
 *   MODE btr-cb     btr, per-branch callback
 *        btr-batch  btr, batched branch callback
 *        xdc-cb     libxdc, edge callback (tracing mode)
 *        xdc-bitmap libxdc, coverage bitmap only (its fastest mode)
 * One mode per process, so that peak RSS is each decoder's own.
 */
#include "btr/btr.h"
#include "libxdc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}
/* CPU time of this thread: on a loaded machine, wall time counts the time
 * other processes held the core. */
static double cpu_now(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* ---- the PT bytes of the busiest thread ---- */

struct tstream {
	uint32_t tid;
	uint8_t *buf;
	size_t len, cap;
};

static int load_pt(const char *path, uint8_t **out, size_t *len, uint32_t *tid_out)
{
	struct btr_trace_reader *r;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	struct tstream ts[64];
	size_t n = 0;
	struct btr_record rec;
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if (rec.type != BTR_REC_PT)
			continue;
		size_t i;
		for (i = 0; i < n && ts[i].tid != rec.u.data.tid; i++)
			;
		if (i == n) {
			if (n == 64)
				continue;
			memset(&ts[n], 0, sizeof(ts[n]));
			ts[n++].tid = rec.u.data.tid;
		}
		struct tstream *t = &ts[i];
		if (t->len + rec.u.data.size + 64 > t->cap) {
			t->cap = (t->len + rec.u.data.size + 64) * 2;
			t->buf = realloc(t->buf, t->cap);
			if (!t->buf)
				return -BTR_ERR_NOMEM;
		}
		memcpy(t->buf + t->len, rec.u.data.data, rec.u.data.size);
		t->len += rec.u.data.size;
	}
	btr_trace_reader_free(r);
	if (rc != -BTR_ERR_EOS)
		return rc;
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (ts[i].len > ts[best].len)
			best = i;
	if (!n)
		return -BTR_ERR_NOT_FOUND;
	for (size_t i = 0; i < n; i++)
		if (i != best)
			free(ts[i].buf);
	*out = ts[best].buf;
	*len = ts[best].len;
	*tid_out = ts[best].tid;
	return 0;
}

/* ---- libxdc's page fetch from btr's image ---- */

#define PAGES 4096   /* open-addressing table; code pages of one program */

struct pages {
	struct btr_image *img;
	uint64_t key[PAGES];
	uint8_t *data[PAGES];
};

static void *fetch_page(void *opaque, uint64_t addr, bool *success)
{
	struct pages *p = opaque;
	uint64_t page = addr & ~0xfffull;
	size_t h = (size_t)((page >> 12) * 0x9e3779b97f4a7c15ull) & (PAGES - 1);
	while (p->data[h]) {
		if (p->key[h] == page) {
			*success = true;
			return p->data[h];
		}
		h = (h + 1) & (PAGES - 1);
	}
	/* Copy what the image has of this page; the rest stays zero. */
	uint8_t *d = calloc(1, 4096 + 16);
	int any = 0;
	for (uint64_t a = page; a < page + 4096;) {
		const uint8_t *src;
		size_t avail;
		if (btr_image_map(p->img, a, &src, &avail) == 0 && avail) {
			size_t k = avail < page + 4096 - a ? avail : (size_t)(page + 4096 - a);
			memcpy(d + (a - page), src, k);
			a += k;
			any = 1;
		} else {
			a++;
		}
	}
	if (!any) {
		free(d);
		*success = false;
		return NULL;
	}
	p->key[h] = page;
	p->data[h] = d;
	*success = true;
	return d;
}

static uint64_t xdc_edges;
static void on_edge(void *opaque, uint64_t from, uint64_t to)
{
	(void)opaque;
	(void)from;
	(void)to;
	xdc_edges++;
}

static uint64_t btr_edges;
static int on_branch(void *ctx, const struct btr_branch *b)
{
	(void)ctx;
	(void)b;
	btr_edges++;
	return 0;
}
static int on_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	(void)ctx;
	(void)b;
	btr_edges += n;
	return 0;
}

int main(int argc, char **argv)
{
	int raw = argc == 9 && !strcmp(argv[1], "--raw");
	if (argc != 4 && !raw) {
		fprintf(stderr, "usage: %s TRACE.btr REPS MODE\n"
				"       %s --raw TRACE.pt IMAGE BASE LO HI REPS MODE\n"
				"MODE: btr-cb|btr-batch|xdc-cb|xdc-bitmap\n", argv[0], argv[0]);
		return 2;
	}
	const char *mode = argv[argc - 1];
	int reps = atoi(argv[argc - 2]);
	if (reps < 1)
		reps = 1;

	struct btr_stream *s = NULL;
	struct btr_image *img = NULL;
	uint8_t *pt = NULL;
	size_t len = 0;
	uint32_t tid = 0;
	uint64_t filter[4][2] = { { 0x1000, 0x7ffffffff000ull } };
	int rc;
	if (raw) {
		/* The flat image, mapped; the PT bytes read whole (+16 for the end marker). */
		FILE *fp = fopen(argv[2], "rb");
		if (!fp) {
			perror(argv[2]);
			return 3;
		}
		fseek(fp, 0, SEEK_END);
		len = (size_t)ftell(fp);
		rewind(fp);
		pt = malloc(len + 16);
		if (!pt || fread(pt, 1, len, fp) != len) {
			fprintf(stderr, "%s: read failed\n", argv[2]);
			return 3;
		}
		fclose(fp);
		filter[0][0] = strtoull(argv[5], NULL, 16);
		filter[0][1] = strtoull(argv[6], NULL, 16);
		if ((rc = btr_image_new(&img)) < 0 ||
		    (rc = btr_image_add_file(img, argv[3], 0, 0, strtoull(argv[4], NULL, 16))) < 0) {
			fprintf(stderr, "%s: %s\n", argv[3], btr_errstr(rc));
			return 3;
		}
	} else {
		/* The image: the stream loads every module the trace records. */
		struct btr_stream_opts so = { .sz = sizeof(so) };
		rc = btr_stream_open(argv[1], &so, &s);
		if (rc >= 0)
			rc = btr_stream_run(s);
		if (rc < 0) {
			fprintf(stderr, "%s: %s\n", argv[1], btr_errstr(rc));
			return 3;
		}
		img = btr_stream_image(s);
		rc = load_pt(argv[1], &pt, &len, &tid);
		if (rc < 0) {
			fprintf(stderr, "%s: no PT data: %s\n", argv[1], btr_errstr(rc));
			return 3;
		}
	}
	/* libxdc reads a 0x55 end marker past the data. */
	memset(pt + len, PT_TRACE_END, 16);

	double best = 1e30, best_cpu = 1e30;
	/* BENCH_REPS_LOG=1: every decode's CPU and wall seconds on stderr */
	const int reps_log = getenv("BENCH_REPS_LOG") != NULL;
	uint64_t edges = 0;
	if (!strncmp(mode, "btr", 3)) {
		struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .no_retcomp = 1, .tid = tid };
		struct btr_ptflow *f;
		if (btr_ptflow_new(img, &cfg, &f) < 0)
			return 3;
		struct btr_ptflow_callbacks cb = { 0 };
		if (!strcmp(mode, "btr-batch"))
			cb.branches = on_branches;
		else
			cb.branch = on_branch;
		for (int i = 0; i < reps; i++) {
			btr_ptflow_reset(f, 0);
			btr_edges = 0;
			double c0 = cpu_now(), t0 = now();
			btr_ptflow_decode(f, pt, len, &cb);
			double t = now() - t0, c = cpu_now() - c0;
			if (reps_log)
				fprintf(stderr, "rep %d cpu %.6f wall %.6f\n", i, c, t);
			if (t < best)
				best = t;
			if (c < best_cpu)
				best_cpu = c;
		}
		edges = btr_edges;
		btr_ptflow_free(f);
	} else {
		static struct pages pg;
		pg.img = img;
		void *bitmap = calloc(1, 0x10000);
		libxdc_t *x = libxdc_init(filter, fetch_page, &pg, bitmap, 0x10000);
		if (!x)
			return 3;
		int cbmode = !strcmp(mode, "xdc-cb");
		if (cbmode) {
			libxdc_register_edge_callback(x, on_edge, NULL);
			libxdc_enable_tracing(x);
		}
		for (int i = 0; i < reps; i++) {
			xdc_edges = 0;
			libxdc_bitmap_reset(x);
			double c0 = cpu_now(), t0 = now();
			decoder_result_t r = libxdc_decode(x, pt, len);
			double t = now() - t0, c = cpu_now() - c0;
			if (reps_log)
				fprintf(stderr, "rep %d cpu %.6f wall %.6f\n", i, c, t);
			if (c < best_cpu)
				best_cpu = c;
			if (r != decoder_success && r != decoder_success_pt_overflow && i == 0)
				fprintf(stderr, "libxdc: decode result %d\n", (int)r);
			if (t < best)
				best = t;
		}
		edges = xdc_edges;
		libxdc_free(x);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	/* One line, machine-readable: mode, bytes, edges, best wall seconds,
	 * peak RSS KiB, best CPU seconds, the process's user+sys CPU seconds
	 * so far (start-up, image, every repetition; finer than time(1)'s). */
	double proc_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
			  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	printf("%s %zu %" PRIu64 " %.6f %ld %.6f %.6f\n", mode, len, edges, best, ru.ru_maxrss, best_cpu,
	       proc_cpu);
	if (s)
		btr_stream_free(s);
	else
		btr_image_free(img);
	free(pt);
	return 0;
}
