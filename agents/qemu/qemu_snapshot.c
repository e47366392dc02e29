/* qemu_snapshot.c - flight-recorder snapshots (`btr record -b qemu
 * --snapshot SIZE [--trigger SYM] [--max-snapshots N]`, docs/record.md
 * "Snapshots").
 *
 * Plugin arguments: snapshot=SIZE (bytes of PT kept per thread),
 * trigger=0xOFF@FILE (a window each time the function at OFF of FILE is
 * entered), maxsnap=N (at most N trigger windows in the whole recording,
 * counted in DIR/count's QC_SNAPS by every process).
 *
 * Each thread's stream is encoded as always (qemu_plugin.c), but what
 * pt_flush would write goes into the thread's ring (struct qs_snap in
 * qemu_state.h: its last SIZE bytes and the stream offsets of its latest
 * PSBs), and the encoder holds at most SNAP_ENC bytes before it does: the
 * memory of a thread is SIZE + SNAP_ENC (BTR_QEMU_STATS says how much was
 * held).  A window is the stream from the oldest PSB+ in the last SIZE
 * bytes to the end - it decodes on its own - written as a WINDOW record
 * and its PT records:
 *  - trigger: at the entry of the trigger function, after the call was
 *    encoded (this block's callback runs after the tracing one), with a
 *    TIP.PGD at the function's address after it in the window only (the
 *    flow ends at the call; the live stream goes on);
 *  - request: `btr record` got SIGUSR2 (QC_SNAPREQ moved): each thread
 *    writes its window the next time it flushes or makes a system call;
 *  - end: the thread ends (exit, exec, the process's end) or its process
 *    dies of a signal (`btr record` writes that one from the shared state
 *    when QEMU dies without the exit callback: salvage_state).
 * A window does not repeat what the thread's previous window held, except
 * from the last PSB before that window's end (the start it needs).
 */
#include "qemu_plugin.h"

#define SNAP_ENC (16 * 1024)   /* encoder bytes before they go into the ring */
#define SNAP_MIN (16 * 1024)   /* smallest SIZE: a few PSB periods */

int snap_on;
static uint64_t snap_size;
static uint64_t max_snaps = 16;
static struct { uint64_t off; char *path; } trig;
static uint64_t trig_va[8];
static unsigned n_trig_va;
static uint64_t local_snaps;   /* without DIR/count: this process's trigger windows */
/* BTR_QEMU_STATS (snap_stats): atomic */
static uint64_t st_threads, st_held, st_pt, st_windows, st_dropped;

static uint64_t enc_bytes(void)
{
	return SNAP_ENC < snap_size / 4 ? SNAP_ENC : snap_size / 4;
}

int snap_arg(const char *a)
{
	unsigned long long v, off;
	int n = 0;
	if (sscanf(a, "snapshot=%llu%n", &v, &n) == 1 && n && !a[n]) {
		if (v < SNAP_MIN || v > (1ull << 30))
			return -1;
		snap_size = v;
		snap_on = 1;
		return 0;
	}
	if (sscanf(a, "maxsnap=%llu%n", &v, &n) == 1 && n && !a[n]) {
		max_snaps = v;
		return 0;
	}
	if (sscanf(a, "trigger=%llx@%n", &off, &n) == 1 && n && a[n] && !trig.path) {
		trig.off = off;
		return (trig.path = strdup(a + n)) ? 0 : -1;
	}
	return -1;
}

/* A mapping of @path: the trigger's address in it. */
void snap_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot)
{
	if (!trig.path || !(prot & PROT_EXEC) || trig.off < pgoff || trig.off >= pgoff + size || n_trig_va == 8)
		return;
	char real[PATH_MAX];
	if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	if (strcmp(trig.path, real) && strcmp(trig.path, path))
		return;
	trig_va[n_trig_va] = start + (trig.off - pgoff);
	__atomic_store_n(&n_trig_va, n_trig_va + 1, __ATOMIC_RELEASE);
}

/* A new thread's stream (or the same thread's anew in a fork child),
 * right after its encoder was set up: its ring, a small encoder. */
void snap_thread(struct thr *t)
{
	if (!snap_on)
		return;
	t->enc.end = t->enc.begin + enc_bytes();
	struct qs_snap *s = t->snap;
	if (!s) {
		uint32_t cap = (uint32_t)(snap_size / PSB_PERIOD + 4);
		size_t sz = sizeof(*s) + cap * sizeof(uint64_t) + snap_size;
		s = qs_alloc(sz);
		memset(s, 0, sizeof(*s));
		s->size = snap_size;
		s->cap_psb = cap;
		s->psb = (uint64_t *)(s + 1);
		s->ring = (uint8_t *)(s->psb + cap);
		__atomic_add_fetch(&st_threads, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&st_held, snap_size + enc_bytes(), __ATOMIC_RELAXED);
		t->snap = s;
	}
	s->floor = 0;
	s->n_psb = s->top_psb = 0;
	s->windows = 0;
	s->req_seen = g.count ? __atomic_load_n(&g.count[QC_SNAPREQ], __ATOMIC_RELAXED) : 0;
}

/* emit_psb: a PSB+ starts at t->last_psb. */
void snap_psb(struct thr *t)
{
	struct qs_snap *s = t->snap;
	if (!s)
		return;
	s->top_psb = (s->top_psb + 1) % s->cap_psb;
	s->psb[s->top_psb] = t->last_psb;
	if (s->n_psb < s->cap_psb)
		s->n_psb++;
}

static void write_pt(struct thr *t, const uint8_t *p, uint64_t off, uint64_t len, int flush)
{
	struct btr_record r = { .type = BTR_REC_PT };
	r.u.data.tid = t->tid;
	r.u.data.cpu = -1;
	r.u.data.stream_offset = off;
	r.u.data.size = len;
	r.u.data.data = p;
	write_rec_ex(&r, flush);
}

/* Writes thread @t's window now (enum btr_window_reason @reason); @tail:
 * it ends at the entry of @ip (TIP.PGD there, in the window only). */
static void snap_write(struct thr *t, uint32_t reason, uint64_t ip, int tail)
{
	struct qs_snap *s = t->snap;
	struct qs_span sp[3];
	int n = qs_snap_window(t, sp);
	if (!n)
		return;
	uint8_t tb[16];
	size_t tl = 0;
	if (tail) {
		struct btr_pt_encoder e;
		btr_pt_enc_init(&e, tb, sizeof(tb));
		e.last_ip = t->enc.last_ip;   /* the decoder's last IP at the window's end */
		btr_pt_enc_ip(&e, BTR_PT_TIP_PGD, ip);
		tl = btr_pt_enc_size(&e);
	}
	struct btr_record r = { .type = BTR_REC_WINDOW };
	r.u.win.pid = g.pid;
	r.u.win.tid = t->tid;
	r.u.win.reason = reason;
	r.u.win.index = s->windows++;
	r.u.win.stream_offset = sp[0].off;
	r.u.win.size = tl;
	for (int i = 0; i < n; i++)
		r.u.win.size += sp[i].len;
	r.u.win.ip = reason == BTR_WINDOW_TRIGGER ? ip : 0;
	write_rec_ex(&r, 0);
	for (int i = 0; i < n; i++)
		write_pt(t, sp[i].p, sp[i].off, sp[i].len, !tl && i == n - 1);
	if (tl)
		write_pt(t, tb, stream_pos(t), tl, 1);
	if (s->n_psb)
		s->floor = s->psb[s->top_psb];   /* the next window starts at this PSB or later */
	__atomic_add_fetch(&st_windows, 1, __ATOMIC_RELAXED);
}

/* A SIGUSR2 to `btr record` since @t last looked: its window. */
void snap_poll(struct thr *t)
{
	struct qs_snap *s = t->snap;
	if (!s || !g.count)
		return;
	uint64_t r = __atomic_load_n(&g.count[QC_SNAPREQ], __ATOMIC_RELAXED);
	if (r == s->req_seen)
		return;
	s->req_seen = r;
	snap_write(t, BTR_WINDOW_REQUEST, 0, 0);
}

/* pt_flush in snapshot mode: the encoder's bytes go into the ring. */
void snap_flush(struct thr *t)
{
	qs_pend_resolve(t, 0, 0);    /* the hole must be filled before it leaves */
	if (!btr_pt_enc_size(&t->enc))
		return;
	struct qs_snap *s = t->snap;
	uint64_t n = btr_pt_enc_size(&t->enc), keep = n < s->size ? n : s->size;
	const uint8_t *p = t->enc.begin + (n - keep);
	uint64_t off = t->flushed + (n - keep), a = off % s->size;
	uint64_t first = keep < s->size - a ? keep : s->size - a;
	memcpy(s->ring + a, p, first);
	memcpy(s->ring, p + first, keep - first);
	t->flushed += n;
	t->enc.pos = t->enc.begin;   /* keeps last_ip: the stream continues */
	__atomic_add_fetch(&st_pt, n, __ATOMIC_RELAXED);
	snap_poll(t);
}

/* thread_end, after its last bytes were flushed: the final window. */
void snap_end(struct thr *t, uint32_t end)
{
	if (!t->snap)
		return;
	snap_write(t, end == BTR_THREAD_END_KILLED ? BTR_WINDOW_KILLED : BTR_WINDOW_END, 0, 0);
	/* all written: an exec's other threads are finished by btr record
	 * from the state, which then finds nothing more of this one */
	t->snap->floor = stream_pos(t);
}

/* The trigger's block runs (its callback comes after the tracing one,
 * which encoded the way into it). */
static void trigger_exec(unsigned vcpu, void *ud)
{
	struct tbinfo *cur = ud;
	struct thr *t = vcpu < MAX_VCPUS ? g.thr[vcpu] : NULL;
	if (g.off || !t || t->done || !t->snap)
		return;
	uint64_t k = g.count ? __atomic_add_fetch(&g.count[QC_SNAPS], 1, __ATOMIC_SEQ_CST)
			     : __atomic_add_fetch(&local_snaps, 1, __ATOMIC_RELAXED);
	if (k > max_snaps) {
		if (g.count)
			__atomic_add_fetch(&g.count[QC_SNAPDROP], 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&st_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	if (UNLIKELY(enc_low(t))) {   /* ensure_space: t->snap, so pt_flush is snap_flush */
		snap_flush(t);
		update_check(t);
	}
	tnt_flush(t);
	snap_write(t, BTR_WINDOW_TRIGGER, cur->pc, t->enabled && t->prev == cur);
}

/* A traced block @b is translated: the trigger's callback if it starts
 * at the trigger. */
void snap_trans(struct qemu_plugin_tb *tb, struct tbinfo *b)
{
	unsigned k = __atomic_load_n(&n_trig_va, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < k; i++)
		if (trig_va[i] == b->pc) {
			qemu_plugin_register_vcpu_tb_exec_cb(tb, trigger_exec, QEMU_PLUGIN_CB_NO_REGS, b);
			return;
		}
}

/* BTR_QEMU_STATS=FILE: "snapshot size S enc E threads T held H pt P
 * windows W dropped D" appended at the end: the memory held for the rings
 * (threads x (S + E)) against the PT the threads made (the tests count). */
void snap_stats(void)
{
	const char *f = getenv("BTR_QEMU_STATS");
	if (!snap_on || !f || !*f)
		return;
	int fd = open(f, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	char line[256];
	int k = snprintf(line, sizeof(line),
			 "snapshot size %" PRIu64 " enc %" PRIu64 " threads %" PRIu64 " held %" PRIu64 " pt %" PRIu64
			 " windows %" PRIu64 " dropped %" PRIu64 "\n",
			 snap_size, enc_bytes(), st_threads, st_held, st_pt, st_windows, st_dropped);
	if (write(fd, line, (size_t)k) != k)
		(void)0;
	close(fd);
}
