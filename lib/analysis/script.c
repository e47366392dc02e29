/* script.c - branches as text lines (btr/script.h, `btr script`,
 * docs/script.md): an analysis over the common branch stream, so every
 * trace kind (PT, BTS, LBR, decoded branches) reads the same way; and the
 * LBR samples of a perf.data (or the LBR records of a .btr) exactly as
 * Debian 12's `perf script -F ip,brstack` (perf 6.1) prints them, so
 * scripts written for perf's output work unchanged.
 *
 * Both stream in constant memory: lines are formatted into one output
 * buffer by hand, and symbols go through a small direct-mapped cache.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "btr/image.h"
#include "btr/perfdata.h"
#include "btr/script.h"
#include "btr/stream.h"
#include "btr/text.h"
#include "btr/trace.h"
#include "internal.h"
#include "registry.h"

/* ---- output buffer ---- */

/* Lines are formatted into one buffer by hand (printf is a large share
 * of the run time for a format this simple) and written to @f when it
 * fills. */
struct out {
	FILE *f;
	size_t n;
	int err;
	char buf[1 << 16];
};

static void out_flush(struct out *o)
{
	if (o->n && !o->err && fwrite(o->buf, 1, o->n, o->f) != o->n)
		o->err = 1;
	o->n = 0;
}

static inline void out_room(struct out *o, size_t k)
{
	if (sizeof(o->buf) - o->n < k)
		out_flush(o);
}

static inline void out_ch(struct out *o, char c)
{
	out_room(o, 1);
	o->buf[o->n++] = c;
}

static void out_str(struct out *o, const char *s)
{
	size_t k = strlen(s);
	if (k > sizeof(o->buf) / 2)
		k = sizeof(o->buf) / 2;
	out_room(o, k);
	memcpy(o->buf + o->n, s, k);
	o->n += k;
}

static inline void out_hex(struct out *o, uint64_t v)
{
	char t[16];
	int k = 0;
	out_room(o, 16);
	do {
		t[k++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	while (k)
		o->buf[o->n++] = t[--k];
}

/* "%16" PRIx64: right-aligned in 16 columns. */
static inline void out_hex16(struct out *o, uint64_t v)
{
	int k = 1;
	for (uint64_t x = v >> 4; x; x >>= 4)
		k++;
	out_room(o, 16);
	for (int i = k; i < 16; i++)
		o->buf[o->n++] = ' ';
	out_hex(o, v);
}

static inline void out_dec(struct out *o, uint64_t v)
{
	char t[20];
	int k = 0;
	out_room(o, 20);
	do {
		t[k++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (k)
		o->buf[o->n++] = t[--k];
}

/* ---- the branch stream ---- */

enum field { F_TID, F_TIME, F_ADDR, F_SYM, F_KIND, F_FLAGS, F_INSNS, F__N };
static const char *const field_names[F__N] = { "tid", "time", "addr", "sym", "kind", "flags", "insns" };

#define SYM_CACHE 4096
#define SYM_LEN 96

struct sym_slot {
	uint64_t addr;
	const struct btr_image *img;
	unsigned gen;
	int valid;
	char name[SYM_LEN];
};

struct script {
	struct btr_stream *s;
	struct out *o;
	enum field fields[F__N];
	unsigned nfields;
	struct sym_slot *cache;   /* SYM_CACHE slots */
	FILE *tmp;                /* the lines when the caller gave no stream (btr_script_opts.out) */
};

static const char *symbol(struct script *sc, struct btr_image *img, uint64_t addr)
{
	unsigned gen = btr_image_generation(img);
	struct sym_slot *e = &sc->cache[(addr ^ (addr >> 12)) & (SYM_CACHE - 1)];
	if (e->valid && e->addr == addr && e->img == img && e->gen == gen)
		return e->name;
	btr_image_symbolize(img, addr, e->name, sizeof(e->name));
	/* btr_image_symbolize gives the bare address outside every module:
	 * the address is already on the line, so say it plainly. */
	if (!strncmp(e->name, "0x", 2))
		strcpy(e->name, "[unknown]");
	/* a space would break the column layout (names are not demangled,
	 * but a raw file path may contain one) */
	for (char *p = e->name; *p; p++)
		if (*p == ' ' || *p == '\t' || *p == '\n')
			*p = '_';
	/* and no control character reaches a terminal (btr/text.h) */
	btr_text_field_fix(e->name, sizeof(e->name), NULL);
	e->addr = addr;
	e->img = img;
	e->gen = gen;
	e->valid = 1;
	return e->name;
}

static void flags_field(struct out *o, const struct btr_branch *b)
{
	int any = 0;
#define SEP() do { if (any) out_ch(o, ','); any = 1; } while (0)
	if (b->flags & BTR_BF_MISPRED) {
		SEP();
		out_ch(o, 'M');
	} else if (b->flags & BTR_BF_PREDICTED) {
		SEP();
		out_ch(o, 'P');
	}
	if (!(b->flags & BTR_BF_TAKEN)) {
		SEP();
		out_ch(o, 'N');
	}
	if (b->flags & BTR_BF_TSX_ABORT) {
		SEP();
		out_ch(o, 'A');
	}
	if (b->flags & BTR_BF_CYCLES) {
		SEP();
		out_str(o, "cyc=");
		out_dec(o, b->cycles);
	}
	if (b->flags & BTR_BF_INSNS) {
		SEP();
		out_str(o, "insns=");
		out_dec(o, b->insns);
	}
	if (b->flags & BTR_BF_KERNEL) {
		SEP();
		out_ch(o, 'k');
	}
	if (!any)
		out_ch(o, '-');
#undef SEP
}

static int on_branch(struct script *sc, const struct btr_branch *b)
{
	struct out *o = sc->o;
	struct btr_image *img = NULL;
	for (unsigned i = 0; i < sc->nfields; i++) {
		if (i)
			out_ch(o, ' ');
		switch (sc->fields[i]) {
		case F_TID:
			out_dec(o, b->pid);
			out_ch(o, '/');
			out_dec(o, b->tid);
			break;
		case F_TIME:
			if (b->flags & BTR_BF_TSC)
				out_dec(o, b->tsc);
			else
				out_ch(o, '-');
			break;
		case F_ADDR:
			out_str(o, "0x");
			out_hex(o, b->from);
			out_str(o, " -> 0x");
			out_hex(o, b->to);
			break;
		case F_SYM:
			if (!img)
				img = btr_stream_image_pid(sc->s, b->pid);
			out_str(o, symbol(sc, img, b->from));
			out_str(o, " -> ");
			out_str(o, symbol(sc, img, b->to));
			break;
		case F_KIND:
			out_str(o, btr_branch_kind_name((enum btr_branch_kind)b->kind));
			break;
		case F_FLAGS:
			flags_field(o, b);
			break;
		case F_INSNS:
			if (b->flags & BTR_BF_INSNS)
				out_dec(o, b->insns);
			else
				out_ch(o, '-');
			break;
		case F__N:
			break;
		}
	}
	out_ch(o, '\n');
	return o->err ? 1 : 0;   /* a write error stops the run; btr_analysis_write says it */
}

static int a_event(void *state, const struct btr_stream_event *ev)
{
	struct script *sc = state;
	/* A gap is part of the flow a reader must see: one event line, which
	 * starts with '[' like every event line of btr (docs/cli.md), so
	 * line-oriented consumers can skip it. */
	/* Gaps of the container (BTR_SEV_GAP) and of the PT decoder (a flow
	 * GAP or OVERFLOW event): both are data the reader does not see. */
	int reason = 0;
	uint64_t offset = ev->offset;
	if (ev->type == BTR_SEV_DISCONTINUITY && ev->rec && ev->rec->type == BTR_REC_WINDOW) {
		/* A snapshot window: its branches do not continue the ones before */
		const struct btr_rec_window *w = &ev->rec->u.win;
		out_str(sc->o, "[window ");
		out_dec(sc->o, w->pid);
		out_ch(sc->o, '/');
		out_dec(sc->o, w->tid);
		out_ch(sc->o, ' ');
		out_dec(sc->o, w->index);
		out_ch(sc->o, ' ');
		out_str(sc->o, btr_window_reason_name(w->reason));
		out_str(sc->o, "]\n");
		return sc->o->err ? 1 : 0;
	}
	if (ev->type == BTR_SEV_GAP) {
		reason = ev->reason;
	} else if (ev->type == BTR_SEV_FLOW && ev->flow &&
		   (ev->flow->type == BTR_FLOW_GAP || ev->flow->type == BTR_FLOW_OVERFLOW)) {
		reason = ev->flow->type == BTR_FLOW_OVERFLOW ? -BTR_ERR_OVERFLOW : ev->flow->reason;
		offset = ev->flow->offset;
	} else {
		return sc->o->err ? 1 : 0;
	}
	out_str(sc->o, "[gap ");
	out_dec(sc->o, ev->pid);
	out_ch(sc->o, '/');
	out_dec(sc->o, ev->tid);
	out_str(sc->o, " offset 0x");
	out_hex(sc->o, offset);
	out_ch(sc->o, ' ');
	out_str(sc->o, btr_errstr(reason));
	out_str(sc->o, "]\n");
	return sc->o->err ? 1 : 0;
}


static int a_begin(void *state, struct btr_stream *s)
{
	struct script *sc = state;
	sc->s = s;
	return 0;
}

static int a_branches(void *state, const struct btr_branch *b, size_t n)
{
	struct script *sc = state;
	for (size_t i = 0; i < n; i++) {
		int rc = on_branch(sc, &b[i]);
		if (rc)
			return rc;
	}
	return 0;
}

static int a_end(void *state, int status)
{
	struct script *sc = state;
	(void)status;
	out_flush(sc->o);
	return 0;
}

static int a_write(void *state, FILE *out, const char *format)
{
	struct script *sc = state;
	char buf[1 << 14];
	size_t k;

	if (format && strcmp(format, "text"))
		return -BTR_ERR_INVAL;
	if (sc->o->err)
		return -BTR_ERR_IO;
	if (!sc->tmp)
		return 0;   /* the lines went to the caller's stream as they came */
	if (fflush(sc->tmp) || fseek(sc->tmp, 0, SEEK_SET))
		return -BTR_ERR_IO;
	while ((k = fread(buf, 1, sizeof(buf), sc->tmp)) > 0)
		if (fwrite(buf, 1, k, out) != k)
			return -BTR_ERR_IO;
	return ferror(sc->tmp) ? -BTR_ERR_IO : 0;
}

static void a_destroy(void *state)
{
	struct script *sc = state;
	if (sc->tmp)
		fclose(sc->tmp);
	free(sc->cache);
	free(sc->o);
	free(sc);
}

static const char *const script_formats[] = { "text", NULL };

const struct btr_analysis_ops btr__script_ops = {
	.name = "script", .begin = a_begin, .branches = a_branches, .event = a_event, .end = a_end,
	.write = a_write, .destroy = a_destroy, .formats = script_formats,
};

/* The columns of @list (NULL: the default), as the CLI always read them:
 * comma-separated names, empty ones skipped; -1 for an unknown name, more
 * than F__N names, or none. */
static int parse_fields(const char *list, struct script *sc)
{
	static const enum field dflt[] = { F_TID, F_TIME, F_ADDR, F_SYM, F_KIND, F_FLAGS };
	char buf[256];

	sc->nfields = 0;
	if (!list) {
		memcpy(sc->fields, dflt, sizeof(dflt));
		sc->nfields = BTR_ARRAY_SIZE(dflt);
		return 0;
	}
	if (strlen(list) >= sizeof(buf))
		return -1;
	strcpy(buf, list);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int f = -1;
		for (int i = 0; i < F__N; i++)
			if (!strcmp(t, field_names[i]))
				f = i;
		if (f < 0 || sc->nfields == F__N)
			return -1;
		sc->fields[sc->nfields++] = (enum field)f;
	}
	return sc->nfields ? 0 : -1;
}

int btr_script_new(const struct btr_script_opts *opts, struct btr_analysis **out)
{
	struct btr_script_opts o = { .sz = sizeof(o) };

	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	BTR_OPTS_COPY(&o, opts);
	struct script *sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -BTR_ERR_NOMEM;
	if (parse_fields(o.fields, sc) < 0) {
		free(sc);
		return -BTR_ERR_INVAL;
	}
	sc->o = malloc(sizeof(*sc->o));
	sc->cache = calloc(SYM_CACHE, sizeof(*sc->cache));
	if (!sc->o || !sc->cache) {
		a_destroy(sc);
		return -BTR_ERR_NOMEM;
	}
	sc->o->n = 0;
	sc->o->err = 0;
	sc->o->f = o.out;
	if (!o.out) {
		sc->tmp = tmpfile();
		if (!sc->tmp) {
			a_destroy(sc);
			return -BTR_ERR_IO;
		}
		sc->o->f = sc->tmp;
	}
	return btr_analysis_new(&btr__script_ops, sc, out);
}

/* Created by name (registry.c: btr_analysis_create): the default columns,
 * the lines kept until written. */
int btr__script_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	(void)a;
	return btr_script_new(NULL, out);
}

/* ---- perf script -F [ip,]brstack ---- */

/* tools/perf/util/branch.c (perf 6.1): branch_type_name, branch_new_type_name. */
static const char *perf_branch_type(uint8_t type, uint8_t new_type)
{
	static const char *const names[16] = {
		"N/A", "COND", "UNCOND", "IND", "CALL", "IND_CALL", "RET", "SYSCALL",
		"SYSRET", "COND_CALL", "COND_RET", "ERET", "IRQ", "SERROR", "NO_TX", "",
	};
	static const char *const new_names[8] = {
		"FAULT_ALGN", "FAULT_DATA", "FAULT_INST", "ARCH_1", "ARCH_2", "ARCH_3", "ARCH_4", "ARCH_5",
	};
	if (type == 0)
		return "";
	if (type == 15)
		return new_names[new_type & 7];
	return names[type & 15];
}

/* One entry as perf 6.1's perf_sample__fprintf_brstack + print_bstack_flags
 * write it: " 0xFROM/0xTO/P/-/-/CYCLES/TYPE ". */
static void brstack_entry(struct out *o, uint64_t from, uint64_t to, char pred, int in_tx, int abort_,
			  unsigned cycles, const char *type)
{
	out_str(o, " 0x");
	out_hex(o, from);
	out_str(o, "/0x");
	out_hex(o, to);
	out_ch(o, '/');
	out_ch(o, pred);
	out_ch(o, '/');
	out_ch(o, in_tx ? 'X' : '-');
	out_ch(o, '/');
	out_ch(o, abort_ ? 'A' : '-');
	out_ch(o, '/');
	out_dec(o, cycles);
	out_ch(o, '/');
	out_str(o, type);
	out_ch(o, ' ');
}

/* perf script prints samples in time order: it queues events and, at
 * each FINISHED_ROUND record, flushes those not later than the largest
 * timestamp of the round before (tools/perf/util/ordered-events.c,
 * OE_FLUSH__ROUND); the rest at the end.  Equal timestamps keep file
 * order.  Doing the same keeps memory bounded by two rounds (perf's
 * ring-buffer flushes), not by the file. */
struct pending {
	uint64_t time, seq, ip;
	uint64_t nr, nr_cc;
	int has_cc;                      /* print the callchain as perf does */
	struct btr_perf_branch *br;      /* malloc'ed: nr entries, then nr_cc
					  * callchain addresses behind them */
};

struct order {
	struct pending *q;
	size_t n, cap;
	uint64_t seq, max_time, next_flush;
	int with_ip;
	struct out *o;
};

static int cmp_pending(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void print_sample(struct out *o, int with_ip, const struct pending *p)
{
	if (with_ip && p->has_cc) {
		/* perf prints the resolved callchain instead of the ip: a
		 * newline, then one "\t%16lx\n" per address */
		const uint64_t *cc = (const uint64_t *)(p->br + p->nr);
		out_ch(o, '\n');
		for (uint64_t i = 0; i < p->nr_cc; i++) {
			out_ch(o, '\t');
			out_hex16(o, cc[i]);
			out_ch(o, '\n');
		}
	} else if (with_ip) {
		out_ch(o, ' ');
		out_hex16(o, p->ip);
	}
	for (uint64_t i = 0; i < p->nr; i++) {
		const struct btr_perf_branch *b = &p->br[i];
		char pred = !(b->mispred || b->predicted) ? '-' : b->predicted ? 'P' : 'M';
		brstack_entry(o, b->from, b->to, pred, b->in_tx, b->abort, b->cycles,
			      perf_branch_type(b->type, b->new_type));
	}
	out_ch(o, '\n');
}

/* Prints (in time order) the queued samples with time <= @limit. */
static void order_flush(struct order *od, uint64_t limit)
{
	qsort(od->q, od->n, sizeof(*od->q), cmp_pending);
	size_t k = 0;
	while (k < od->n && od->q[k].time <= limit) {
		print_sample(od->o, od->with_ip, &od->q[k]);
		free(od->q[k].br);
		k++;
	}
	memmove(od->q, od->q + k, (od->n - k) * sizeof(*od->q));
	od->n -= k;
}

/* PERF_CONTEXT_* markers in a callchain (linux/perf_event.h): values
 * >= (u64)-4095 name the context of the addresses that follow. */
#define PERF_CONTEXT_MAX ((uint64_t)-4095)

static int order_add(struct order *od, const struct btr_perf_sample *s)
{
	if (od->n == od->cap) {
		size_t cap = od->cap ? od->cap * 2 : 1024;
		void *p = realloc(od->q, cap * sizeof(*od->q));
		if (!p)
			return -1;
		od->q = p;
		od->cap = cap;
	}
	uint64_t ncc = 0;
	for (uint64_t i = 0; i < s->nr_callchain; i++)
		ncc += s->callchain[i] < PERF_CONTEXT_MAX;
	struct pending *e = &od->q[od->n];
	e->br = malloc(s->nr_branches * sizeof(*e->br) + ncc * 8 + 1);
	if (!e->br)
		return -1;
	od->n++;
	e->time = s->time;
	e->seq = od->seq++;
	e->ip = s->ip;
	e->nr = s->nr_branches;
	e->nr_cc = ncc;
	e->has_cc = (s->sample_type & (1u << 5)) != 0;   /* PERF_SAMPLE_CALLCHAIN */
	memcpy(e->br, s->branches, s->nr_branches * sizeof(*e->br));
	uint64_t *cc = (uint64_t *)(e->br + e->nr);
	for (uint64_t i = 0, k = 0; i < s->nr_callchain; i++)
		if (s->callchain[i] < PERF_CONTEXT_MAX)
			cc[k++] = s->callchain[i];
	if (s->time > od->max_time)
		od->max_time = s->time;
	return 0;
}

static int brstack_perf(struct btr_perf_reader *pr, const struct btr_script_brstack_opts *op, struct out *o,
			struct btr_script_brstack_info *info)
{
	struct btr_perf_sample s;
	struct order od = { .with_ip = op->with_ip, .o = o };
	uint64_t rounds = 0;
	int rc;
	while ((rc = btr_perf_read_sample(pr, &s)) == 0) {
		/* PERF_RECORD_FINISHED_ROUND = 68, read on the way here */
		for (uint64_t nr = btr_perf_reader_count(pr, 68); rounds < nr; rounds++) {
			order_flush(&od, od.next_flush);
			od.next_flush = od.max_time;
		}
		if ((op->pid && s.pid != op->pid) || (op->tid && s.tid != op->tid))
			continue;
		if (order_add(&od, &s) < 0) {
			rc = -BTR_ERR_NOMEM;
			break;
		}
		if (o->err)
			break;
	}
	if (rc == -BTR_ERR_EOS || rc == -BTR_ERR_TRUNCATED)
		order_flush(&od, UINT64_MAX);
	for (size_t i = 0; i < od.n; i++)
		free(od.q[i].br);
	free(od.q);
	if (rc == -BTR_ERR_EOS || rc == 0)
		return 0;
	info->offset = btr_perf_reader_offset(pr);
	info->at_offset = 1;
	return rc;
}

/* A .btr keeps LBR snapshots without perf's empty slots and branch types:
 * print what it has in the same layout. */
static int brstack_btr(const char *path, const struct btr_script_brstack_opts *op, struct out *o,
		       struct btr_script_brstack_info *info)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	while ((rc = btr_trace_read(r, &rec)) == 0 || rc == -BTR_ERR_CHECKSUM) {
		if (rc == -BTR_ERR_CHECKSUM) {
			info->damaged = 1;
			continue;
		}
		if (rec.type != BTR_REC_LBR)
			continue;
		const struct btr_rec_lbr *l = &rec.u.lbr;
		if ((op->pid && l->pid != op->pid) || (op->tid && l->tid != op->tid))
			continue;
		if (op->with_ip) {
			out_ch(o, ' ');
			out_hex16(o, l->ip);
		}
		for (uint32_t i = 0; i < l->count; i++) {
			const struct btr_lbr_entry *e = &l->entries[i];
			int m = !!(e->flags & BTR_BF_MISPRED), p = !!(e->flags & BTR_BF_PREDICTED);
			char pred = !(m || p) ? '-' : p ? 'P' : 'M';
			brstack_entry(o, e->from, e->to, pred, 0, !!(e->flags & BTR_BF_TSX_ABORT),
				      (e->flags & BTR_BF_CYCLES) ? e->cycles : 0, "");
		}
		out_ch(o, '\n');
		if (o->err)
			break;
	}
	btr_trace_reader_free(r);
	return rc == -BTR_ERR_EOS || o->err ? 0 : rc;
}

int btr_script_brstack(const char *path, const struct btr_script_brstack_opts *opts, FILE *out,
		       struct btr_script_brstack_info *info)
{
	struct btr_script_brstack_opts op = { .sz = sizeof(op) };
	struct btr_script_brstack_info dummy = { .sz = sizeof(dummy) };
	struct btr_perf_reader *pr;
	int rc;

	if (!path || !out || !BTR_OPTS_VALID(opts, sizeof(*opts)) || (info && info->sz < sizeof(*info)))
		return -BTR_ERR_INVAL;
	BTR_OPTS_COPY(&op, opts);
	if (!info)
		info = &dummy;
	memset(info, 0, sizeof(*info));
	info->sz = sizeof(*info);
	struct out *o = malloc(sizeof(*o));
	if (!o)
		return -BTR_ERR_NOMEM;
	o->f = out;
	o->n = 0;
	o->err = 0;
	rc = btr_perf_reader_new(path, &pr);
	if (rc == 0) {
		rc = brstack_perf(pr, &op, o, info);
		btr_perf_reader_free(pr);
	} else if (rc == -BTR_ERR_BAD_FORMAT) {
		rc = brstack_btr(path, &op, o, info);
	}
	out_flush(o);
	if (o->err) {
		info->output_error = 1;
		rc = -BTR_ERR_IO;
	}
	free(o);
	return rc;
}
