/* crash.c - what led to a crash (btr/crash.h, `btr crash`, docs/crash.md):
 * an analysis.
 *
 * For each process of the trace that died from a signal: the thread, the
 * signal, the faulting instruction (disassembled from the recorded code),
 * the fault address, and the last N taken branches of that thread before
 * it, oldest first, both ends as "function+offset file:line".  Works on any
 * trace; a flight-recorder trace (`btr record -b step --ring N`) holds
 * exactly the last N branches per thread.  Symbolized at the process's
 * exit, before its image can change (exec).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/crash.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/text.h"
#include "internal.h"
#include "registry.h"

#define DEFAULT_LAST 16

struct tring {
	uint32_t tid, pid;
	struct btr_branch *b;   /* @cap entries, @next the slot to write */
	size_t next, used;
	int win;                /* 1 + the reason of the snapshot window its branches are of, 0: none */
	uint32_t win_index;
};

struct crash {
	struct btr_rec_exit ex;
	struct btr_branch *b;   /* copy of the thread's last branches, oldest first */
	size_t n;
	char insn[128];
	char ip_sym[256], ip_file[512];
	int ip_line;
	struct {
		char sym[256], file[512];
		int line;
	} *ends;                /* 2 per branch: from, to */
	int win;                /* the branches are the end of snapshot window @win_index: 1 + reason; 0 none */
	uint32_t win_index;
};

struct st {
	struct btr_stream *s;
	struct tring *t;
	size_t nt, capt, last;   /* last: the thread tring_of found last */
	size_t cap;             /* branches kept per thread */
	int cap_from_trace;
	int addr_known;         /* the backend records fault addresses (step: siginfo) */
	struct crash *c;
	size_t nc;
	char *name;             /* the trace as the JSON output names it */
};

static struct tring *tring_of(struct st *st, uint32_t tid)
{
	/* The thread of the last branch first: branches come in runs of one
	 * thread, and a trace can hold thousands of threads (a shell loop of
	 * 1000 processes took 3.8 s for this search alone). */
	if (st->last < st->nt && st->t[st->last].tid == tid)
		return &st->t[st->last];
	for (size_t i = st->nt; i-- > 0;)
		if (st->t[i].tid == tid) {
			st->last = i;
			return &st->t[i];
		}
	if (st->nt == st->capt) {
		size_t nc = st->capt ? st->capt * 2 : 16;
		struct tring *n = realloc(st->t, nc * sizeof(*n));
		if (!n)
			return NULL;
		st->t = n;
		st->capt = nc;
	}
	struct tring *t = &st->t[st->nt];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	if (!(t->b = calloc(st->cap, sizeof(*t->b))))
		return NULL;
	st->last = st->nt++;
	return t;
}

static int a_branches(void *state, const struct btr_branch *bb, size_t nb)
{
	struct st *st = state;
	for (size_t k = 0; k < nb; k++) {
		const struct btr_branch *b = &bb[k];
		/* Taken branches only, as an LBR stack or BTS holds them (PT
		 * traces also report conditional branches that were not taken). */
		if (!(b->flags & BTR_BF_TAKEN))
			continue;
		struct tring *t = tring_of(st, b->tid);
		if (!t)
			return -BTR_ERR_NOMEM;
		t->pid = b->pid;
		t->b[t->next] = *b;
		t->next = (t->next + 1) % st->cap;
		if (t->used < st->cap)
			t->used++;
	}
	return 0;
}

static void where(struct btr_image *img, uint64_t addr, char *sym, size_t symsz, char *file, size_t filesz, int *line)
{
	const char *f = NULL;
	btr_image_symbolize(img, addr, sym, symsz);
	*line = 0;
	if (btr_image_line(img, addr, &f, line) == 0 && f)
		snprintf(file, filesz, "%s", f);
	else
		file[0] = 0;
}

static int a_begin(void *state, struct btr_stream *s)
{
	((struct st *)state)->s = s;
	return 0;
}

static int a_event(void *state, const struct btr_stream_event *ev)
{
	struct st *st = state;
	if (ev->type == BTR_SEV_MACHINE)
		/* Only trap-flag stepping reads the signal's siginfo; the other
		 * recorders know the signal and the IP, not the address. */
		st->addr_known = !strcmp(ev->rec->u.machine.backend, "step");
	if (ev->type == BTR_SEV_MACHINE && ev->rec->u.machine.lbr_depth && st->cap_from_trace && !st->nt) {
		/* A flight-recorder trace: show its whole ring.  Only before
		 * the first thread's ring is made with the size it has (a
		 * machine record after branches changed the size under rings
		 * already made: a heap overflow the fuzz targets found once
		 * they reached this analysis). */
		st->cap = ev->rec->u.machine.lbr_depth;
		return 0;
	}
	if (ev->type == BTR_SEV_DISCONTINUITY && ev->rec && ev->rec->type == BTR_REC_WINDOW) {
		/* A snapshot window (--snapshot): the thread's branches start
		 * again; those before are of another window, not the flow that
		 * led to the crash. */
		struct tring *t = tring_of(st, ev->rec->u.win.tid);
		if (!t)
			return -BTR_ERR_NOMEM;
		t->next = t->used = 0;
		t->win = 1 + (int)ev->rec->u.win.reason;
		t->win_index = ev->rec->u.win.index;
		return 0;
	}
	if (ev->type != BTR_SEV_PROCESS_EXIT || !ev->rec->u.exit.signo)
		return 0;
	/* Before the image changes (exec): symbolize now. */
	struct crash *n = realloc(st->c, (st->nc + 1) * sizeof(*n));
	if (!n)
		return -BTR_ERR_NOMEM;
	st->c = n;
	struct crash *c = &st->c[st->nc++];
	memset(c, 0, sizeof(*c));
	c->ex = ev->rec->u.exit;
	struct btr_image *img = btr_stream_image_pid(st->s, c->ex.pid);
	struct tring *t = NULL;
	for (size_t i = 0; i < st->nt; i++)
		if (st->t[i].tid == c->ex.tid)
			t = &st->t[i];
	if (t) {
		c->win = t->win;
		c->win_index = t->win_index;
	}
	if (t && t->used) {
		c->b = malloc(t->used * sizeof(*c->b));
		c->ends = calloc(2 * t->used, sizeof(*c->ends));
		if (!c->b || !c->ends)
			return -BTR_ERR_NOMEM;
		size_t first = t->used < st->cap ? 0 : t->next;
		for (size_t i = 0; i < t->used; i++) {
			c->b[i] = t->b[(first + i) % st->cap];
			where(img, c->b[i].from, c->ends[2 * i].sym, sizeof(c->ends[0].sym), c->ends[2 * i].file,
			      sizeof(c->ends[0].file), &c->ends[2 * i].line);
			where(img, c->b[i].to, c->ends[2 * i + 1].sym, sizeof(c->ends[0].sym), c->ends[2 * i + 1].file,
			      sizeof(c->ends[0].file), &c->ends[2 * i + 1].line);
		}
		c->n = t->used;
	}
	if (c->ex.ip) {
		where(img, c->ex.ip, c->ip_sym, sizeof(c->ip_sym), c->ip_file, sizeof(c->ip_file), &c->ip_line);
		uint8_t bytes[16];
		memset(bytes, 0, sizeof(bytes));
		int got = btr_image_read(img, c->ex.ip, bytes, sizeof(bytes));
		if (got <= 0 || btr_insn_format(bytes, (size_t)got, c->ex.ip, BTR_MODE_64, c->insn, sizeof(c->insn)) < 0)
			snprintf(c->insn, sizeof(c->insn), "(code not in the trace)");
	}
	return 0;
}

static const char *signame(int sig)
{
	static char buf[16];
	const char *d = sigabbrev_np(sig);
	if (!d) {
		snprintf(buf, sizeof(buf), "%d", sig);
		return buf;
	}
	snprintf(buf, sizeof(buf), "SIG%s", d);
	return buf;
}

static void print_text(FILE *f, const struct st *st)
{
	if (!st->nc) {
		fprintf(f, "no crash: no process in the trace died from a signal\n");
		return;
	}
	for (size_t i = 0; i < st->nc; i++) {
		const struct crash *c = &st->c[i];
		fprintf(f, "process %" PRIu32 " thread %" PRIu32 ": %s (%s)\n", c->ex.pid, c->ex.tid, signame(c->ex.signo),
		       strsignal(c->ex.signo));
		if (c->ex.ip)
			fprintf(f, "  at 0x%" PRIx64 " %s %s:%d\n  instruction: %s\n", c->ex.ip, c->ip_sym,
			       c->ip_file[0] ? c->ip_file : "??", c->ip_line, c->insn);
		else
			fprintf(f, "  instruction: unknown\n");
		if (c->ex.signo == SIGSEGV || c->ex.signo == SIGBUS || c->ex.signo == SIGFPE || c->ex.signo == SIGILL) {
			if (st->addr_known)
				fprintf(f, "  fault address: 0x%" PRIx64 "\n", c->ex.addr);
			else
				fprintf(f, "  fault address: unknown (this backend does not record it)\n");
		}
		if (c->win)
			fprintf(f, "  snapshot window %" PRIu32 " (%s): the thread's last window before the death\n",
				c->win_index, btr_window_reason_name((uint32_t)(c->win - 1)));
		fprintf(f, "  last %zu branches, oldest first:\n", c->n);
		for (size_t j = 0; j < c->n; j++) {
			const struct btr_branch *b = &c->b[j];
			fprintf(f, "  %4zu  0x%" PRIx64 " %s %s:%d -> 0x%" PRIx64 " %s %s:%d  %s\n", c->n - j, b->from,
			       c->ends[2 * j].sym, c->ends[2 * j].file[0] ? c->ends[2 * j].file : "??",
			       c->ends[2 * j].line, b->to, c->ends[2 * j + 1].sym,
			       c->ends[2 * j + 1].file[0] ? c->ends[2 * j + 1].file : "??", c->ends[2 * j + 1].line,
			       btr_branch_kind_name((enum btr_branch_kind)b->kind));
		}
	}
}

static void json_place(FILE *f, const char *key, uint64_t addr, const char *sym, const char *file, int line)
{
	fprintf(f, "\"%s\": {\"addr\": \"0x%" PRIx64 "\", \"symbol\": ", key, addr);
	btr_json_str(f, sym);
	fprintf(f, ", \"file\": ");
	if (file[0])
		btr_json_str(f, file);
	else
		fprintf(f, "null");
	fprintf(f, ", \"line\": %d}", line);
}

static void print_json(FILE *f, const struct st *st)
{
	fprintf(f, "{\"file\": ");
	btr_json_str(f, st->name);
	fprintf(f, ", \"crashes\": [");
	for (size_t i = 0; i < st->nc; i++) {
		const struct crash *c = &st->c[i];
		fprintf(f, "%s\n  {\"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"signal\": %d, \"signal_name\": \"%s\", ",
		       i ? "," : "", c->ex.pid, c->ex.tid, c->ex.signo, signame(c->ex.signo));
		json_place(f, "ip", c->ex.ip, c->ip_sym, c->ip_file, c->ip_line);
		fprintf(f, ", \"instruction\": ");
		btr_json_str(f, c->ex.ip ? c->insn : NULL);
		if (c->win)
			fprintf(f, ", \"window\": {\"index\": %" PRIu32 ", \"reason\": \"%s\"}", c->win_index,
				btr_window_reason_name((uint32_t)(c->win - 1)));
		if (st->addr_known)
			fprintf(f, ", \"fault_addr\": \"0x%" PRIx64 "\", \"branches\": [", c->ex.addr);
		else
			fprintf(f, ", \"fault_addr\": null, \"branches\": [");
		for (size_t j = 0; j < c->n; j++) {
			const struct btr_branch *b = &c->b[j];
			fprintf(f, "%s\n    {", j ? "," : "");
			json_place(f, "from", b->from, c->ends[2 * j].sym, c->ends[2 * j].file, c->ends[2 * j].line);
			fprintf(f, ", ");
			json_place(f, "to", b->to, c->ends[2 * j + 1].sym, c->ends[2 * j + 1].file, c->ends[2 * j + 1].line);
			fprintf(f, ", \"kind\": \"%s\"}", btr_branch_kind_name((enum btr_branch_kind)b->kind));
		}
		fprintf(f, "%s]}", c->n ? "\n  " : "");
	}
	fprintf(f, "%s]}\n", st->nc ? "\n" : "");
}

static void a_destroy(void *state)
{
	struct st *st = state;
	for (size_t i = 0; i < st->nt; i++)
		free(st->t[i].b);
	free(st->t);
	for (size_t i = 0; i < st->nc; i++) {
		free(st->c[i].b);
		free(st->c[i].ends);
	}
	free(st->c);
	free(st->name);
	free(st);
}

static int a_write(void *state, FILE *f, const char *format)
{
	struct st *st = state;
	if (!format || !strcmp(format, "text"))
		print_text(f, st);
	else if (!strcmp(format, "json"))
		print_json(f, st);
	else
		return -BTR_ERR_INVAL;
	return ferror(f) ? -BTR_ERR_IO : 0;
}

static const char *const crash_formats[] = { "text", "json", NULL };

const struct btr_analysis_ops btr__crash_ops = {
	.name = "crash", .begin = a_begin, .branches = a_branches, .event = a_event,
	.write = a_write, .destroy = a_destroy, .formats = crash_formats,
};

int btr_crash_new(const struct btr_crash_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	*out = NULL;
	struct btr_crash_opts o;
	BTR_OPTS_COPY(&o, opts);
	if (o.last > 1000000)
		return -BTR_ERR_INVAL;
	struct st *st = calloc(1, sizeof(*st));
	if (!st)
		return -BTR_ERR_NOMEM;
	st->cap = o.last ? o.last : DEFAULT_LAST;
	st->cap_from_trace = !o.last;
	size_t nl = strlen(o.name ? o.name : "") + 1;
	if (!(st->name = malloc(nl))) {
		free(st);
		return -BTR_ERR_NOMEM;
	}
	memcpy(st->name, o.name ? o.name : "", nl);
	return btr_analysis_new(&btr__crash_ops, st, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__crash_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	(void)a;
	return btr_crash_new(NULL, out);
}
