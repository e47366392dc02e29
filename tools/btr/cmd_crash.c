/* cmd_crash.c - `btr crash FILE`: what led to a crash.
 *
 * For each process of the trace that died from a signal: the thread, the
 * signal, the faulting instruction (disassembled from the recorded code),
 * the fault address, and the last N taken branches of that thread before
 * it, oldest first, both ends as "function+offset file:line".  Works on any
 * trace; a flight-recorder trace (`btr record -b step --ring N`) holds
 * exactly the last N branches per thread.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmd.h"

#define DEFAULT_LAST 16

#define STR_(x) #x
#define STR(x) STR_(x)
enum { OPT_FORMAT = 256 };

static const struct cli_opt opts[] = {
	{ "last", 'n', CLI_ARG, "  -n, --last N           branches to show (default " STR(DEFAULT_LAST) "; a --ring trace: its size)\n", NULL },
	{ "format", OPT_FORMAT, CLI_ARG, "      --format FMT       text (default) or json\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"crash",
	"Usage: btr crash [OPTIONS] FILE\n"
	"For each process in trace FILE that died from a signal: the crashed thread, the\n"
	"signal, the faulting instruction, the fault address, and the last branches of\n"
	"that thread before it (oldest first) with function+offset file:line of both ends.\n\n",
	opts,
	"\nExit: 0 (also when nothing crashed: \"no crash\"), 2 usage, 3 unreadable trace.\n",
	1, 1, "one trace file expected", "one trace file expected",
};


struct tring {
	uint32_t tid, pid;
	struct btr_branch *b;   /* @cap entries, @next the slot to write */
	size_t next, used;
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
	int err;
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

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct st *st = ctx;
	/* Taken branches only, as an LBR stack or BTS holds them (PT traces
	 * also report conditional branches that were not taken). */
	if (!(b->flags & BTR_BF_TAKEN))
		return 0;
	struct tring *t = tring_of(st, b->tid);
	if (!t) {
		st->err = -BTR_ERR_NOMEM;
		return 1;
	}
	t->pid = b->pid;
	t->b[t->next] = *b;
	t->next = (t->next + 1) % st->cap;
	if (t->used < st->cap)
		t->used++;
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

static int on_event(void *ctx, const struct btr_stream_event *ev)
{
	struct st *st = ctx;
	if (ev->type == BTR_SEV_MACHINE)
		/* Only trap-flag stepping reads the signal's siginfo; the other
		 * recorders know the signal and the IP, not the address. */
		st->addr_known = !strcmp(ev->rec->u.machine.backend, "step");
	if (ev->type == BTR_SEV_MACHINE && ev->rec->u.machine.lbr_depth && st->cap_from_trace) {
		/* A flight-recorder trace: show its whole ring. */
		st->cap = ev->rec->u.machine.lbr_depth;
		return 0;
	}
	if (ev->type != BTR_SEV_PROCESS_EXIT || !ev->rec->u.exit.signo)
		return 0;
	/* Before the image changes (exec): symbolize now. */
	struct crash *n = realloc(st->c, (st->nc + 1) * sizeof(*n));
	if (!n) {
		st->err = -BTR_ERR_NOMEM;
		return 1;
	}
	st->c = n;
	struct crash *c = &st->c[st->nc++];
	memset(c, 0, sizeof(*c));
	c->ex = ev->rec->u.exit;
	struct btr_image *img = btr_stream_image_pid(st->s, c->ex.pid);
	struct tring *t = NULL;
	for (size_t i = 0; i < st->nt; i++)
		if (st->t[i].tid == c->ex.tid)
			t = &st->t[i];
	if (t && t->used) {
		c->b = malloc(t->used * sizeof(*c->b));
		c->ends = calloc(2 * t->used, sizeof(*c->ends));
		if (!c->b || !c->ends) {
			st->err = -BTR_ERR_NOMEM;
			return 1;
		}
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

static void print_text(const struct st *st)
{
	if (!st->nc) {
		printf("no crash: no process in the trace died from a signal\n");
		return;
	}
	for (size_t i = 0; i < st->nc; i++) {
		const struct crash *c = &st->c[i];
		printf("process %" PRIu32 " thread %" PRIu32 ": %s (%s)\n", c->ex.pid, c->ex.tid, signame(c->ex.signo),
		       strsignal(c->ex.signo));
		if (c->ex.ip)
			printf("  at 0x%" PRIx64 " %s %s:%d\n  instruction: %s\n", c->ex.ip, c->ip_sym,
			       c->ip_file[0] ? c->ip_file : "??", c->ip_line, c->insn);
		else
			printf("  instruction: unknown\n");
		if (c->ex.signo == SIGSEGV || c->ex.signo == SIGBUS || c->ex.signo == SIGFPE || c->ex.signo == SIGILL) {
			if (st->addr_known)
				printf("  fault address: 0x%" PRIx64 "\n", c->ex.addr);
			else
				printf("  fault address: unknown (this backend does not record it)\n");
		}
		printf("  last %zu branches, oldest first:\n", c->n);
		for (size_t j = 0; j < c->n; j++) {
			const struct btr_branch *b = &c->b[j];
			printf("  %4zu  0x%" PRIx64 " %s %s:%d -> 0x%" PRIx64 " %s %s:%d  %s\n", c->n - j, b->from,
			       c->ends[2 * j].sym, c->ends[2 * j].file[0] ? c->ends[2 * j].file : "??",
			       c->ends[2 * j].line, b->to, c->ends[2 * j + 1].sym,
			       c->ends[2 * j + 1].file[0] ? c->ends[2 * j + 1].file : "??", c->ends[2 * j + 1].line,
			       btr_branch_kind_name((enum btr_branch_kind)b->kind));
		}
	}
}

static void json_place(const char *key, uint64_t addr, const char *sym, const char *file, int line)
{
	printf("\"%s\": {\"addr\": \"0x%" PRIx64 "\", \"symbol\": ", key, addr);
	btr_json_str(stdout, sym);
	printf(", \"file\": ");
	if (file[0])
		btr_json_str(stdout, file);
	else
		printf("null");
	printf(", \"line\": %d}", line);
}

static void print_json(const struct st *st, const char *file)
{
	printf("{\"file\": ");
	btr_json_str(stdout, file);
	printf(", \"crashes\": [");
	for (size_t i = 0; i < st->nc; i++) {
		const struct crash *c = &st->c[i];
		printf("%s\n  {\"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"signal\": %d, \"signal_name\": \"%s\", ",
		       i ? "," : "", c->ex.pid, c->ex.tid, c->ex.signo, signame(c->ex.signo));
		json_place("ip", c->ex.ip, c->ip_sym, c->ip_file, c->ip_line);
		printf(", \"instruction\": ");
		btr_json_str(stdout, c->ex.ip ? c->insn : NULL);
		if (st->addr_known)
			printf(", \"fault_addr\": \"0x%" PRIx64 "\", \"branches\": [", c->ex.addr);
		else
			printf(", \"fault_addr\": null, \"branches\": [");
		for (size_t j = 0; j < c->n; j++) {
			const struct btr_branch *b = &c->b[j];
			printf("%s\n    {", j ? "," : "");
			json_place("from", b->from, c->ends[2 * j].sym, c->ends[2 * j].file, c->ends[2 * j].line);
			printf(", ");
			json_place("to", b->to, c->ends[2 * j + 1].sym, c->ends[2 * j + 1].file, c->ends[2 * j + 1].line);
			printf(", \"kind\": \"%s\"}", btr_branch_kind_name((enum btr_branch_kind)b->kind));
		}
		printf("%s]}", c->n ? "\n  " : "");
	}
	printf("%s]}\n", st->nc ? "\n" : "");
}

struct args {
	struct st *st;
	int json;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	uint64_t v;
	switch (key) {
	case 'n':
		if (cli_parse_u64(arg, &v) < 0 || !v || v > 1000000)
			return cli_usage_error("crash", "bad count '%s'", arg);
		x->st->cap = (size_t)v;
		x->st->cap_from_trace = 0;
		break;
	case OPT_FORMAT:
		return cli_format_text_json("crash", arg, &x->json, "unknown format '%s' (text, json)");
	}
	return EXIT_OK;
}

int cmd_crash(int argc, char **argv)
{
	struct st st = { .cap = DEFAULT_LAST, .cap_from_trace = 1 };
	struct args x = { &st, 0 };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	int json = x.json;
	cs.so.branch = on_branch;
	cs.so.event = on_event;
	cs.so.ctx = &st;
	rc = btr_stream_open(file, &cs.so, &st.s);
	if (rc < 0) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	int run = btr_stream_run(st.s);
	if (run == -BTR_ERR_DATA_LOST)
		run = 0;   /* the report covers what was read; the losses are said below */
	int ret = EXIT_OK;
	if (st.err || run < 0) {
		cli_error("%s: %s", file, btr_errstr(st.err ? st.err : run));
		ret = EXIT_RUNTIME;
	} else {
		if (json)
			print_json(&st, file);
		else
			print_text(&st);
		if (fflush(stdout) != 0) {
			cli_error("writing the output: output error");
			ret = EXIT_RUNTIME;
		} else if (cli_stream_losses(file, "crash report", st.s)) {
			ret = EXIT_RUNTIME;
		}
	}
	btr_stream_free(st.s);
	for (size_t i = 0; i < st.nt; i++)
		free(st.t[i].b);
	free(st.t);
	for (size_t i = 0; i < st.nc; i++) {
		free(st.c[i].b);
		free(st.c[i].ends);
	}
	free(st.c);
	return ret;
}
