/* test_qemu_snapshot.c - `btr record -b qemu --snapshot SIZE --trigger
 * mark` (the flight recorder, agents/qemu/qemu_snapshot.c) on a
 * deterministic program that calls mark() 3 times with a few hundred KB
 * of PT before each call (tests/progs/snap_calls.c):
 *  - 3 trigger windows and the thread's end window, each at most SIZE
 *    bytes (plus the TIP.PGD that ends a trigger window);
 *  - each window decodes on its own (btr's flow decoder and libipt's
 *    instruction decoder) without a gap or an error into exactly the
 *    instructions an unfiltered recording of the same program ran just
 *    before that call of mark() (the end window: before the end);
 *  - memory: the plugin held SIZE + its encoder's bytes per thread
 *    (BTR_QEMU_STATS, counted, never timed), while the thread made many
 *    times that much PT;
 *  - --max-snapshots 2: two trigger windows, the third call dropped. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "flowdiff.h"
#include "qemu_run.h"
#include "btr/error.h"
#include "btr/trace.h"

#define BTR BTR_BINARY_DIR "/btr"
#define PROG BTR_BINARY_DIR "/prog_snap_calls"
#define SIZE 16384
#define MAXWIN 16

struct win {
	struct btr_rec_window w;
	uint8_t *pt;
	size_t n;
};

struct tr {
	struct btr_image *img;
	uint8_t *pt;              /* all the PT, in order */
	size_t pt_n;
	struct win win[MAXWIN];
	int n_win;
	int n_threads;
	uint32_t tid;
};

/* btr record -q -b qemu ARGS... -o OUT -- PROG; the plugin's counts into
 * @stats.  Returns btr's exit status. */
static int record(const char *out, const char *const *args, const char *stats)
{
	return qemu_record(BTR, out, args, PROG, stats);
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
		if (rec.type == BTR_REC_MODULE_LOAD) {
			struct stat st;
			const struct btr_rec_module *m = &rec.u.module;
			if (stat(m->path, &st) == 0 && (uint64_t)st.st_size > m->pgoff) {
				uint64_t sz = m->size;
				if (sz > (uint64_t)st.st_size - m->pgoff)
					sz = (uint64_t)st.st_size - m->pgoff;
				btr_image_add_file(t->img, m->path, m->pgoff, sz, m->start);
			}
		} else if (rec.type == BTR_REC_THREAD_START) {
			t->n_threads++;
			t->tid = rec.u.thread.tid;
		} else if (rec.type == BTR_REC_WINDOW) {
			CHECK(t->n_win < MAXWIN);
			if (t->n_win < MAXWIN)
				t->win[t->n_win++].w = rec.u.win;
		} else if (rec.type == BTR_REC_PT) {
			t->pt = realloc(t->pt, t->pt_n + rec.u.data.size);
			memcpy(t->pt + t->pt_n, rec.u.data.data, rec.u.data.size);
			t->pt_n += rec.u.data.size;
			if (t->n_win) {
				struct win *w = &t->win[t->n_win - 1];
				CHECK_EQ(rec.u.data.stream_offset, w->w.stream_offset + w->n);
				w->pt = realloc(w->pt, w->n + rec.u.data.size);
				memcpy(w->pt + w->n, rec.u.data.data, rec.u.data.size);
				w->n += rec.u.data.size;
			}
		}
	}
	CHECK_EQ(rc, -BTR_ERR_EOS);
	btr_trace_reader_free(rd);
}

static void unload(struct tr *t)
{
	btr_image_free(t->img);
	free(t->pt);
	for (int i = 0; i < t->n_win; i++)
		free(t->win[i].pt);
}

/* Window @w decodes alone into the @n instructions before @end of the
 * unfiltered run @all (both decoders, no gap, no error). */
static void same_tail(const char *what, struct tr *t, const struct win *w, const struct ipvec *all, size_t end)
{
	struct ipvec b = { 0 };
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .tid = t->tid };
	CHECK(flow_btr(t->img, &cfg, w->pt, w->n, 0, &b) >= 0);
	CHECK_EQ(b.gaps, 0);
	CHECK(b.n > 1000);   /* a window of SIZE bytes holds thousands of instructions */
	CHECK(b.n <= end);
	size_t from = b.n <= end ? end - b.n : 0;
	long at = ipvec_diff(&b, all->v + from, end - from);
	if (at >= 0)
		ipvec_report(what, &b, all->v + from, end - from, at);
	CHECK_EQ(at, -1);
#ifdef BTR_HAVE_LIBIPT
	struct ipvec a = { 0 };
	CHECK_EQ(flow_ipt(t->img, w->pt, w->n, &a), 0);
	CHECK_EQ(a.gaps, 0);
	long ai = ipvec_diff(&a, b.v, b.n);
	if (ai >= 0)
		ipvec_report("libipt vs btr", &a, b.v, b.n, ai);
	CHECK_EQ(ai, -1);
	ipvec_free(&a);
#else
	check_oracle_missing("libipt (built without libipt-dev): snapshot windows decoded by libipt");
#endif
	printf("%s: %zu bytes, %zu instructions, the tail of the unfiltered run up to instruction %zu\n", what, w->n,
	       b.n, end);
	ipvec_free(&b);
}

/* "snapshot size S enc E threads T held H pt P windows W dropped D" */
static int stats(const char *path, unsigned long long v[7])
{
	FILE *f = fopen(path, "r");
	char line[512];
	int ok = 0;
	while (f && fgets(line, sizeof(line), f))
		ok |= sscanf(line, "snapshot size %llu enc %llu threads %llu held %llu pt %llu windows %llu dropped %llu",
			     &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) == 7;
	if (f)
		fclose(f);
	return ok;
}

int main(void)
{
	if (access(BTR, X_OK) || access(BTR_BINARY_DIR "/btr-qemu.so", R_OK) || access(PROG, X_OK))
		check_skip("btr, btr-qemu.so or prog_snap_calls not built");
	if (system("command -v qemu-x86_64 >/dev/null 2>&1") != 0)
		check_skip("qemu-x86_64 absent");
	if (system(BTR " info 2>/dev/null | grep -q '^qemu  yes'") != 0)
		check_skip("the qemu backend is unusable here (btr info says why)");

	CHECK_EQ(record("qemu_snap_full.btr", NULL, "qemu_snap_full.stats"), 0);
	struct tr full;
	load("qemu_snap_full.btr", &full);
	CHECK_EQ(full.n_threads, 1);
	CHECK_EQ(full.n_win, 0);
	struct ipvec all = { 0 };
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .tid = full.tid };
	CHECK(flow_btr(full.img, &cfg, full.pt, full.pt_n, 0, &all) >= 0);
	CHECK_EQ(all.gaps, 0);

	const char *args[] = { "--snapshot", "16K", "--trigger", "mark", NULL };
	CHECK_EQ(record("qemu_snap.btr", args, "qemu_snap.stats"), 0);
	struct tr s;
	load("qemu_snap.btr", &s);
	CHECK_EQ(s.n_threads, 1);
	CHECK_EQ(s.n_win, 4);
	/* where mark() was entered in the unfiltered run: the windows end there */
	uint64_t mark = s.n_win ? s.win[0].w.ip : 0;
	size_t calls[8], n_calls = 0;
	for (size_t i = 0; i < all.n; i++)
		if (all.v[i] == mark && n_calls < 8)
			calls[n_calls++] = i;
	CHECK_EQ(n_calls, 3);
	for (int i = 0; i < s.n_win && i < 4 && n_calls == 3; i++) {
		const struct win *w = &s.win[i];
		char what[64];
		snprintf(what, sizeof(what), "window %d (%s)", i, i < 3 ? "trigger" : "end");
		CHECK_EQ(w->w.index, (uint32_t)i);
		CHECK_EQ(w->w.reason, i < 3 ? BTR_WINDOW_TRIGGER : BTR_WINDOW_END);
		CHECK_EQ(w->w.size, w->n);
		/* it starts with a PSB (02 82 x8): decodable from its first byte */
		static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
		CHECK(w->n >= 16 && !memcmp(w->pt, psb, 16));
		CHECK(w->n <= SIZE + (i < 3 ? 16 : 0));
		if (i < 3)   /* the end window starts where window 2 ended (its last PSB) */
			CHECK(w->n >= SIZE / 2);
		same_tail(what, &s, w, &all, i < 3 ? calls[i] : all.n);
	}
	/* the rings, not the stream: SIZE + the encoder's bytes per thread */
	unsigned long long v[7];
	CHECK(stats("qemu_snap.stats", v));
	printf("plugin: size %llu enc %llu threads %llu held %llu bytes, made %llu bytes of PT, %llu windows\n", v[0],
	       v[1], v[2], v[3], v[4], v[5]);
	CHECK_EQ(v[0], SIZE);
	CHECK_EQ(v[2], 1);
	CHECK(v[3] <= v[2] * (SIZE + v[1]));
	CHECK(v[1] <= SIZE / 4);
	CHECK(v[4] >= 20 * v[3]);   /* the thread made far more than was held */
	CHECK(v[4] + 4096 >= full.pt_n);
	CHECK_EQ(v[5], 4);
	CHECK(s.pt_n < full.pt_n / 5);

	/* --max-snapshots 2: the third call writes nothing */
	const char *cap[] = { "--snapshot", "16K", "--trigger", "mark", "--max-snapshots", "2", NULL };
	CHECK_EQ(record("qemu_snap_max.btr", cap, "qemu_snap_max.stats"), 0);
	struct tr m;
	load("qemu_snap_max.btr", &m);
	CHECK_EQ(m.n_win, 3);
	int trig = 0;
	for (int i = 0; i < m.n_win; i++)
		trig += m.win[i].w.reason == BTR_WINDOW_TRIGGER;
	CHECK_EQ(trig, 2);
	CHECK(stats("qemu_snap_max.stats", v));
	CHECK_EQ(v[6], 1);
	if (m.n_win == 3 && n_calls == 3) {
		same_tail("--max-snapshots 2: window 1", &m, &m.win[1], &all, calls[1]);
		same_tail("--max-snapshots 2: end window", &m, &m.win[2], &all, all.n);
	}
	unload(&m);

	ipvec_free(&all);
	unload(&s);
	unload(&full);
	return check_done();
}
