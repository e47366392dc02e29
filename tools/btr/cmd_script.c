/* cmd_script.c - `btr script FILE`: one branch per line, in perf script's
 * spirit (docs/script.md).
 *
 * Two modes:
 *  - the default prints the common branch stream (lib/stream/stream.c), so every
 *    trace kind (PT, BTS, LBR, decoded branches) reads the same way;
 *  - `--fields [ip,]brstack` prints the LBR samples of a perf.data file
 *    (or the LBR records of a .btr) exactly as Debian 12's
 *    `perf script -F ip,brstack` (perf 6.1) does, so scripts written for
 *    perf's output work unchanged.
 *
 * Both stream in constant memory: lines are formatted into one output
 * buffer by hand (printf is a large share of the run time for a format
 * this simple), and symbols go through a small direct-mapped cache.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btr/perfdata.h"
#include "btr/stream.h"
#include "btr/text.h"
#include "cli_cmd.h"

static const struct cli_opt opts[] = {
	{ "fields", 'F', CLI_ARG,
	  "  -F, --fields LIST      fields and order (comma list of tid, time, addr, sym,\n"
	  "                         kind, flags, insns; default tid,time,addr,sym,kind,flags);\n"
	  "                         'brstack' or 'ip,brstack': print LBR samples exactly\n"
	  "                         as `perf script -F [ip,]brstack` of perf 6.1 does\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"script",
	"Usage: btr script [OPTIONS] FILE\n"
	"Print the branches of a trace (.btr or perf.data), one per line:\n\n"
	"  PID/TID TIME 0xFROM -> 0xTO SYM+OFF -> SYM+OFF KIND FLAGS\n\n"
	"TIME is the TSC (or perf clock) value, '-' when unknown; a symbol is\n"
	"'[unknown]' outside every known module; FLAGS is '-' or a comma list of\n"
	"P (predicted), M (mispredicted), N (not taken), A (transaction abort),\n"
	"cyc=N (LBR cycles), "
	"insns=N (instructions since the previous branch of the thread),\n"
	"k (kernel source).  Gaps in the data are '[gap ...]' lines; a snapshot\n"
	"window (btr record -b qemu --snapshot) begins with a '[window ...]' line.\n"
	"See docs/script.md.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or data was lost\n"
	"(everything before the damage is printed).\n",
	1, 1, NULL, NULL,
};


/* ---- output buffer ---- */

struct out {
	size_t n;
	int err;
	char buf[1 << 16];
};

static void out_flush(struct out *o)
{
	size_t off = 0;
	while (off < o->n) {
		ssize_t w = write(STDOUT_FILENO, o->buf + off, o->n - off);
		if (w <= 0) {
			o->err = 1;
			break;
		}
		off += (size_t)w;
	}
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
	char t[16];
	int k = 0;
	out_room(o, 16);
	do {
		t[k++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	for (int i = k; i < 16; i++)
		o->buf[o->n++] = ' ';
	while (k)
		o->buf[o->n++] = t[--k];
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

/* ---- perf -F brstack ---- */

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

static int print_brstack_perf(const char *file, struct btr_perf_reader *pr, int with_ip, uint32_t pid,
			      uint32_t tid, struct out *o)
{
	struct btr_perf_sample s;
	struct order od = { .with_ip = with_ip, .o = o };
	uint64_t rounds = 0;
	int rc;
	while ((rc = btr_perf_read_sample(pr, &s)) == 0) {
		/* PERF_RECORD_FINISHED_ROUND = 68, read on the way here */
		for (uint64_t nr = btr_perf_reader_count(pr, 68); rounds < nr; rounds++) {
			order_flush(&od, od.next_flush);
			od.next_flush = od.max_time;
		}
		if ((pid && s.pid != pid) || (tid && s.tid != tid))
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
	if (rc == -BTR_ERR_EOS)
		return EXIT_OK;
	if (rc < 0) {
		out_flush(o);
		cli_error("%s: %s at offset 0x%" PRIx64, file, btr_errstr(rc), btr_perf_reader_offset(pr));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

/* A .btr keeps LBR snapshots without perf's empty slots and branch types:
 * print what it has in the same layout. */
static int print_brstack_btr(const char *file, int with_ip, uint32_t pid, uint32_t tid, struct out *o)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	int rc = btr_trace_reader_new(file, &r);
	if (rc < 0) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	int lost = 0;
	while ((rc = btr_trace_read(r, &rec)) == 0 || rc == -BTR_ERR_CHECKSUM) {
		if (rc == -BTR_ERR_CHECKSUM) {
			lost = 1;
			continue;
		}
		if (rec.type != BTR_REC_LBR)
			continue;
		const struct btr_rec_lbr *l = &rec.u.lbr;
		if ((pid && l->pid != pid) || (tid && l->tid != tid))
			continue;
		if (with_ip) {
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
	if (rc != -BTR_ERR_EOS && !o->err) {
		out_flush(o);
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (lost) {
		out_flush(o);
		cli_error("warning: %s: damaged chunk(s) skipped; their samples are missing", file);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
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

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct script *sc = ctx;
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
	return o->err ? 1 : 0;
}

static int on_event(void *ctx, const struct btr_stream_event *ev)
{
	struct script *sc = ctx;
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

static int parse_fields(const char *arg, enum field *fields, unsigned *n, int *brstack, int *with_ip)
{
	char buf[256];
	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	*n = 0;
	*brstack = 0;
	*with_ip = 0;
	int other = 0;
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "brstack")) {
			*brstack = 1;
			continue;
		}
		if (!strcmp(t, "ip")) {
			*with_ip = 1;
			continue;
		}
		int f = -1;
		for (int i = 0; i < F__N; i++)
			if (!strcmp(t, field_names[i]))
				f = i;
		if (f < 0 || *n == F__N)
			return -1;
		fields[(*n)++] = (enum field)f;
		other = 1;
	}
	if (*brstack && other)
		return -1;   /* perf mode prints perf's fields only */
	if (!*brstack && *with_ip)
		return -1;
	return *n || *brstack ? 0 : -1;
}

struct args {
	struct script *sc;
	struct cli_stream *cs;
	int brstack, with_ip;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	if (key == 'F' && parse_fields(arg, x->sc->fields, &x->sc->nfields, &x->brstack, &x->with_ip) < 0)
		return cli_usage_error("script", "bad --fields '%s' (tid,time,addr,sym,kind,flags,insns; or [ip,]brstack)",
				       arg);
	if (key == CLI_OPT_END) {
		if (x->brstack && x->cs->filter_expr)
			return cli_usage_error("script",
					       "--filter does not apply to --fields brstack (raw LBR samples)");
		x->cs->live_stdout = 1;   /* branches are printed as they are read */
	}
	return EXIT_OK;
}

int cmd_script(int argc, char **argv)
{
	struct cli_stream cs;
	struct script sc = { .fields = { F_TID, F_TIME, F_ADDR, F_SYM, F_KIND, F_FLAGS }, .nfields = 6 };
	struct args x = { &sc, &cs, 0, 0 };
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	int brstack = x.brstack, with_ip = x.with_ip;

	struct out *o = malloc(sizeof(*o));
	if (!o) {
		cli_error("%s", btr_errstr(-BTR_ERR_NOMEM));
		return EXIT_RUNTIME;
	}
	o->n = 0;
	o->err = 0;

	if (brstack) {
		struct btr_perf_reader *pr;
		rc = btr_perf_reader_new(file, &pr);
		if (rc == 0) {
			rc = print_brstack_perf(file, pr, with_ip, cs.so.pid, cs.so.tid, o);
			btr_perf_reader_free(pr);
		} else if (rc == -BTR_ERR_BAD_FORMAT) {
			rc = print_brstack_btr(file, with_ip, cs.so.pid, cs.so.tid, o);
		} else {
			cli_error("%s: %s", file, btr_errstr(rc));
			rc = EXIT_RUNTIME;
		}
	} else {
		sc.o = o;
		sc.cache = calloc(SYM_CACHE, sizeof(*sc.cache));
		struct btr_stream_opts so = cs.so;
		so.branch = on_branch;
		so.event = on_event;
		so.ctx = &sc;
		if (!sc.cache) {
			cli_error("%s", btr_errstr(-BTR_ERR_NOMEM));
			rc = EXIT_RUNTIME;
		} else if ((rc = btr_stream_open(file, &so, &sc.s)) < 0) {
			cli_error("%s: %s", file, btr_errstr(rc));
			rc = EXIT_RUNTIME;
		} else {
			int run = btr_stream_run(sc.s);
			int lost = btr_stream_data_lost(sc.s);
			struct btr_stream_loss losses[CLI_MAX_LOSSES];
			size_t n_losses = btr_stream_losses(sc.s, losses, CLI_MAX_LOSSES);
			btr_stream_free(sc.s);
			out_flush(o);
			rc = EXIT_OK;
			if (o->err) {
				rc = EXIT_RUNTIME;
			} else if (lost) {
				cli_losses_print(file, "script output", losses, CLI_MAX_LOSSES, n_losses);
				rc = EXIT_RUNTIME;
			} else if (run < 0) {
				cli_error("%s: %s; the branches before it were printed", file, btr_errstr(run));
				rc = EXIT_RUNTIME;
			}
		}
		free(sc.cache);
	}
	out_flush(o);
	if (o->err) {
		cli_error("writing the output: output error");
		rc = EXIT_RUNTIME;
	}
	free(o);
	return rc;
}
