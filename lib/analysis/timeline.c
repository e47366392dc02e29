/* timeline.c - function enter/exit per thread as a timeline: Chrome
 * trace-event JSON and Perfetto's protobuf trace (btr/profile.h,
 * docs/timeline.md).
 *
 * Timestamps are the thread's clock: instructions (branches without
 * instruction counts) or TSC ticks, shown as microseconds.  A call is
 * written only if it lasts at least the threshold (opts.min_dur; 0 means
 * automatic: every call until 1M events were written, then the threshold
 * is 16 and grows 4x at every further 1M events, so huge traces stay viewable).  A
 * call is only known to be long enough when it ends or a long call inside
 * it ends, so its BEGIN is written lazily then - ancestors first - which
 * keeps every thread's events in time order and properly nested.  Events
 * go to an unlinked temporary file (bounded memory); write() converts
 * them per thread, reading for each thread only the span of the file
 * between its first and last event (not the whole file once per thread:
 * that was quadratic in the number of processes of a shell script or a
 * build).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/callstack.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/profile.h"
#include "internal.h"
#include "pairmap.h"
#include "profutil.h"

#define AUTO_STEP 1000000u
#define MARK 2u           /* struct tev.begin of a window mark */

struct tev {
	uint32_t tid, pid;
	uint32_t func;
	uint32_t begin;   /* 1 BEGIN, 0 END; MARK | reason << 8: a snapshot window begins (func: its index) */
	uint64_t ts;
};

/* The events of one thread lie between these event indexes of the file. */
struct span {
	uint64_t first, last;
};

struct timeline {
	struct btr_profile_opts o;
	struct btr_callstack *cs;
	FILE *ev;
	int ev_err;
	uint64_t nev;          /* events in the file */
	struct pairmap tidmap; /* (tid, 0) -> index into spans */
	struct span *spans;
	size_t nspans, capspans;
	uint64_t threshold, written, next_raise;
	uint64_t dropped;   /* calls left out: shorter than the threshold, or outside --from/--to */
	uint64_t plt;       /* PLT stub frames, folded into their callers (nothing is lost) */
};

static void put(struct timeline *tl, const struct btr_cs_thread *t, uint32_t func, int begin, uint64_t ts)
{
	struct tev e = { t->tid, t->pid, func, (uint32_t)begin, ts };
	if (fwrite(&e, sizeof(e), 1, tl->ev) != 1)
		tl->ev_err = 1;
	uint32_t si;
	if (pairmap_get(&tl->tidmap, t->tid, 0, &si)) {
		tl->spans[si].last = tl->nev;
	} else {
		if (tl->nspans == tl->capspans) {
			size_t nc = tl->capspans ? tl->capspans * 2 : 64;
			struct span *ns = realloc(tl->spans, nc * sizeof(*ns));
			if (!ns) {
				tl->ev_err = 2;
				return;
			}
			tl->spans = ns;
			tl->capspans = nc;
		}
		if (pairmap_put(&tl->tidmap, t->tid, 0, (uint32_t)tl->nspans)) {
			tl->ev_err = 2;
			return;
		}
		tl->spans[tl->nspans++] = (struct span){ tl->nev, tl->nev };
	}
	tl->nev++;
	tl->written++;
}

/* Positions the event file at thread @tid's first event; returns how many
 * events to read from there (its own among them), 0 without events or -1
 * on an I/O error. */
static int64_t seek_thread(struct timeline *tl, uint32_t tid)
{
	uint32_t si;
	if (!pairmap_get(&tl->tidmap, tid, 0, &si))
		return 0;
	const struct span *sp = &tl->spans[si];
	if (fseek(tl->ev, (long)(sp->first * sizeof(struct tev)), SEEK_SET))
		return -1;
	return (int64_t)(sp->last - sp->first + 1);
}

static uint64_t clampv(const struct timeline *tl, uint64_t v)
{
	if (v < tl->o.from)
		v = tl->o.from;
	if (tl->o.to && v > tl->o.to)
		v = tl->o.to;
	return v;
}

static void on_leave(void *ctx, struct btr_cs_thread *t, enum btr_cs_leave how)
{
	struct timeline *tl = ctx;
	struct btr_cs_frame *f = &t->frames[t->depth - 1];
	uint64_t now = prof_clock(t, tl->o.weight);
	uint64_t start = tl->o.weight == BTR_PROFILE_TIME ? f->enter_time : f->enter_cost;
	if (!f->emitted) {
		if (btr_callstack_func(tl->cs, f->func)->plt) {
			tl->plt++;
			return;
		}
		if (now - start < tl->threshold || now <= tl->o.from || (tl->o.to && start >= tl->o.to)) {
			tl->dropped++;
			return;
		}
		/* begin every open ancestor that was not begun yet, outermost first */
		for (unsigned i = 0; i < t->depth; i++) {
			struct btr_cs_frame *a = &t->frames[i];
			if (a->emitted)
				continue;
			a->emitted = 1;
			put(tl, t, a->func, 1,
			    clampv(tl, tl->o.weight == BTR_PROFILE_TIME ? a->enter_time : a->enter_cost));
		}
	}
	put(tl, t, f->func, 0, clampv(tl, now));
	if (!tl->o.min_dur && tl->written >= tl->next_raise) {
		tl->threshold = tl->threshold ? tl->threshold * 4 : 16;
		tl->next_raise += AUTO_STEP;
	}
}

static void on_enter(void *ctx, struct btr_cs_thread *t)
{
	t->frames[t->depth - 1].emitted = 0;
}

static int t_begin(void *p, struct btr_stream *s)
{
	btr_callstack_begin(((struct timeline *)p)->cs, s);
	return 0;
}

static int t_branches(void *p, const struct btr_branch *b, size_t n)
{
	return btr_callstack_branches(((struct timeline *)p)->cs, b, n);
}

static int t_fold_ok(void *p, uint32_t tid)
{
	return btr_callstack_fold_ok(((struct timeline *)p)->cs, tid);
}

static int t_fold_block(void *p, uint32_t pid, uint64_t start, uint64_t from, uint64_t to)
{
	return btr_callstack_fold_block(((struct timeline *)p)->cs, pid, start, from, to);
}

/* A snapshot window (BTR_REC_WINDOW) begins on @tid's track: a mark
 * (an instant event) at the thread's clock, its calls after it. */
static void window_mark(struct timeline *tl, const struct btr_rec_window *w)
{
	for (size_t i = 0; i < btr_callstack_nthreads(tl->cs); i++) {
		struct btr_cs_thread *t = btr_callstack_thread(tl->cs, i);
		if (t->tid == w->tid) {
			put(tl, t, w->index, (int)(MARK | (w->reason & 0xff) << 8), clampv(tl, prof_clock(t, tl->o.weight)));
			return;
		}
	}
}

static int t_event(void *p, const struct btr_stream_event *ev)
{
	struct timeline *tl = p;
	int rc = btr_callstack_event(tl->cs, ev);
	if (!rc && ev->type == BTR_SEV_DISCONTINUITY && ev->rec && ev->rec->type == BTR_REC_WINDOW)
		window_mark(tl, &ev->rec->u.win);
	return rc;
}

/* The name of window mark @e. */
static const char *mark_name(const struct tev *e, char *buf, size_t size)
{
	snprintf(buf, size, "snapshot window %" PRIu32 " (%s)", e->func, btr_window_reason_name(e->begin >> 8));
	return buf;
}

static int t_end(void *p, int status)
{
	struct timeline *tl = p;
	int rc = btr_callstack_end(tl->cs);
	if (!rc && (tl->ev_err || fflush(tl->ev)))
		rc = tl->ev_err == 2 ? -BTR_ERR_NOMEM : -BTR_ERR_IO;
	return rc;
}

static int write_json(struct timeline *tl, FILE *out)
{
	const struct btr_callstack *cs = tl->cs;
	fprintf(out, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"exporter\": \"btr\", \"unit\": \"%s\", "
		     "\"min_dur\": %" PRIu64 ", \"calls_left_out\": %" PRIu64 ", \"plt_calls_folded\": %" PRIu64
		     "},\n\"traceEvents\": [",
		prof_unit(cs, tl->o.weight), tl->threshold, tl->dropped, tl->plt);
	int first = 1;
	for (size_t ti = 0; ti < btr_callstack_nthreads(tl->cs); ti++) {
		const struct btr_cs_thread *t = btr_callstack_thread(tl->cs, ti);
		fprintf(out, "%s\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %" PRIu32 ", \"tid\": %" PRIu32
			     ", \"args\": {\"name\": \"tid %" PRIu32 "\"}}",
			first ? "" : ",", t->pid, t->tid, t->tid);
		first = 0;
		int64_t n = seek_thread(tl, t->tid);
		if (n < 0)
			return -BTR_ERR_IO;
		struct tev e;
		while (n-- > 0 && fread(&e, sizeof(e), 1, tl->ev) == 1) {
			if (e.tid != t->tid)
				continue;
			char mb[64];
			if ((e.begin & 0xff) == MARK) {
				fprintf(out, ",\n{\"ph\": \"i\", \"s\": \"t\", \"pid\": %" PRIu32 ", \"tid\": %" PRIu32
					     ", \"ts\": %" PRIu64 ", \"name\": ", e.pid, e.tid, e.ts);
				btr_json_str(out, mark_name(&e, mb, sizeof(mb)));
				fputc('}', out);
				continue;
			}
			fprintf(out, ",\n{\"ph\": \"%c\", \"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"ts\": %" PRIu64
				     ", \"name\": ",
				e.begin ? 'B' : 'E', e.pid, e.tid, e.ts);
			btr_json_str(out, btr_callstack_func(cs, e.func)->name);
			fputc('}', out);
		}
	}
	fprintf(out, "\n]}\n");
	return ferror(out) ? -BTR_ERR_IO : 0;
}

/* Perfetto: protos/perfetto/trace/trace.proto and the track_event protos.
 * Trace.packet = 1; TracePacket: timestamp 8, trusted_packet_sequence_id
 * 10, track_event 11, interned_data 12, sequence_flags 13,
 * track_descriptor 60; TrackDescriptor: uuid 1, name 2, thread 4;
 * ThreadDescriptor: pid 1, tid 2, thread_name 5; TrackEvent: type 9
 * (SLICE_BEGIN 1, SLICE_END 2, INSTANT 3), name_iid 10, track_uuid 11, name 23;
 * InternedData.event_names 2; EventName: iid 1, name 2. */
enum { SEQ_CLEARED = 1, SEQ_NEEDS = 2 };

static int flush_packet(FILE *out, struct pbuf *pkt)
{
	struct pbuf w = { 0 };
	pb_msg(&w, 1, pkt);
	int rc = w.nomem || pkt->nomem ? -BTR_ERR_NOMEM : 0;
	if (!rc && fwrite(w.p, 1, w.len, out) != w.len)
		rc = -BTR_ERR_IO;
	pb_free(&w);
	pkt->len = 0;
	return rc;
}

static int write_pftrace(struct timeline *tl, FILE *out)
{
	const struct btr_callstack *cs = tl->cs;
	size_t nf = btr_callstack_nfuncs(cs);
	uint8_t *seen = malloc(nf ? nf : 1);
	struct pbuf pkt = { 0 }, a = { 0 }, b = { 0 }, c = { 0 };
	int rc = 0;
	if (!seen)
		return -BTR_ERR_NOMEM;
	for (size_t ti = 0; ti < btr_callstack_nthreads(tl->cs) && !rc; ti++) {
		const struct btr_cs_thread *t = btr_callstack_thread(tl->cs, ti);
		uint64_t uuid = 0x6274720000000000ull + ti + 1;   /* "btr" + index */
		uint32_t seq = (uint32_t)ti + 1;
		char name[48];
		snprintf(name, sizeof(name), "tid %" PRIu32, t->tid);
		/* the thread's track */
		b.len = 0;
		pb_uint(&b, 1, t->pid);
		pb_uint(&b, 2, t->tid);
		pb_str(&b, 5, name);
		a.len = 0;
		pb_uint(&a, 1, uuid);
		pb_str(&a, 2, name);
		pb_msg(&a, 4, &b);
		pb_msg(&pkt, 60, &a);
		pb_uint(&pkt, 10, seq);
		pb_uint(&pkt, 13, SEQ_CLEARED);
		if ((rc = flush_packet(out, &pkt)))
			break;
		memset(seen, 0, nf ? nf : 1);
		int64_t n = seek_thread(tl, t->tid);
		if (n < 0) {
			rc = -BTR_ERR_IO;
			break;
		}
		struct tev e;
		while (n-- > 0 && fread(&e, sizeof(e), 1, tl->ev) == 1) {
			if (e.tid != t->tid)
				continue;
			pb_uint_always(&pkt, 8, e.ts * 1000);   /* ns: one unit shows as 1 us */
			pb_uint(&pkt, 10, seq);
			pb_uint(&pkt, 13, SEQ_NEEDS);
			if ((e.begin & 0xff) == MARK) {
				/* TrackEvent: type INSTANT (3), name 23 */
				char mb[64];
				a.len = 0;
				pb_uint(&a, 9, 3);
				pb_str(&a, 23, mark_name(&e, mb, sizeof(mb)));
				pb_uint(&a, 11, uuid);
				pb_msg(&pkt, 11, &a);
				if ((rc = flush_packet(out, &pkt)))
					break;
				continue;
			}
			if (e.begin && !seen[e.func]) {
				seen[e.func] = 1;
				c.len = 0;
				pb_uint(&c, 1, (uint64_t)e.func + 1);
				pb_str(&c, 2, btr_callstack_func(cs, e.func)->name);
				b.len = 0;
				pb_msg(&b, 2, &c);
				pb_msg(&pkt, 12, &b);
			}
			a.len = 0;
			pb_uint(&a, 9, e.begin ? 1 : 2);
			if (e.begin)
				pb_uint(&a, 10, (uint64_t)e.func + 1);
			pb_uint(&a, 11, uuid);
			pb_msg(&pkt, 11, &a);
			if ((rc = flush_packet(out, &pkt)))
				break;
		}
	}
	free(seen);
	pb_free(&pkt);
	pb_free(&a);
	pb_free(&b);
	pb_free(&c);
	if (!rc && ferror(out))
		rc = -BTR_ERR_IO;
	return rc;
}

static int t_write(void *p, FILE *out, const char *format)
{
	struct timeline *tl = p;
	int rc = prof_weight_ok(tl->cs, tl->o.weight);
	if (rc)
		return rc;
	if (tl->ev_err)
		return tl->ev_err == 2 ? -BTR_ERR_NOMEM : -BTR_ERR_IO;
	if (!format || !strcmp(format, "json"))
		return write_json(tl, out);
	if (!strcmp(format, "pftrace"))
		return write_pftrace(tl, out);
	return -BTR_ERR_INVAL;
}

static void t_destroy(void *p)
{
	struct timeline *tl = p;
	btr_callstack_free(tl->cs);
	if (tl->ev)
		fclose(tl->ev);
	pairmap_clear(&tl->tidmap);
	free(tl->spans);
	free(tl);
}

static const char *const timeline_formats[] = { "json", "pftrace", NULL };

const struct btr_analysis_ops btr__timeline_ops = {
	.name = "timeline", .begin = t_begin, .branches = t_branches, .fold_ok = t_fold_ok, .fold_block = t_fold_block, .event = t_event,
	.end = t_end, .write = t_write, .destroy = t_destroy,
	.formats = timeline_formats,
};

int btr_timeline_new(const struct btr_profile_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct timeline *tl = calloc(1, sizeof(*tl));
	if (!tl)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&tl->o, opts);
	if (tl->o.to && tl->o.to <= tl->o.from) {
		free(tl);
		return -BTR_ERR_INVAL;
	}
	tl->threshold = tl->o.min_dur;
	tl->next_raise = AUTO_STEP;
	struct btr_callstack_opts co = { .sz = sizeof(co), .enter = on_enter, .leave = on_leave, .ctx = tl };
	if (!(tl->ev = prof_tmpfile())) {
		free(tl);
		return -BTR_ERR_IO;
	}
	int rc = btr_callstack_new(&co, &tl->cs);
	if (rc) {
		t_destroy(tl);
		return rc;
	}
	return btr_analysis_new(&btr__timeline_ops, tl, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__timeline_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_profile_opts o = { .sz = sizeof(o), .events = a->events, .module = a->module };
	return btr_timeline_new(&o, out);
}
