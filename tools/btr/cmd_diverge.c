/* cmd_diverge.c - `btr diverge A B` (docs/diverge.md): the first branch
 * where matching threads of two runs went different ways, with both call
 * stacks, the branches before it and the instruction counts; with --all
 * every divergent region. */
#include <inttypes.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmd.h"
#include "btr/diverge.h"

enum { O_TID = 1, O_ALL, O_CONTEXT, O_FORMAT, O_MODULE };

/* --tid A:B comes before the stream options' --tid (selection): getopt
 * takes the first entry of a name. */
static const struct cli_opt opts[] = {
	{ "tid", O_TID, CLI_ARG,
	  "  --tid A:B              compare only thread A of the first trace with thread B\n"
	  "                         of the second\n", NULL },
	{ "all", O_ALL, CLI_NOARG,
	  "  --all                  after a divergence, meet again at the next call both\n"
	  "                         runs make (same call site, same function) and list every\n"
	  "                         divergent region with its size in instructions\n", NULL },
	{ "context", O_CONTEXT, CLI_ARG, "  --context N            branches shown before the divergence (default 8)\n", NULL },
	{ "module", O_MODULE, CLI_ARG,
	  "  --module NAME          compare only branches from this module (path or file\n"
	  "                         name; repeatable): ASLR changes the paths libc's string\n"
	  "                         functions take by data alignment, and the loader's work\n"
	  "                         depends on the machine\n", NULL },
	{ "format", O_FORMAT, CLI_ARG, "  --format text|json     output format (default text)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"diverge",
	"Usage: btr diverge [OPTIONS] A B\n"
	"Where two runs went different ways: for each pair of matching threads (the\n"
	"k-th process's j-th thread in both traces), the first branch whose outcome\n"
	"differs - another direction of a conditional, another indirect target, a\n"
	"signal or system call at another point, the end of one thread - with the\n"
	"call stacks of both runs there, the branches before it, the source lines and\n"
	"the instructions each run had executed.  Addresses compare as module + offset,\n"
	"so two runs with ASLR on compare.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 the runs took the same branches; 1 they diverged; 2 usage\n"
	"error; 3 a trace cannot be read or lost data (then the comparison covers what\n"
	"was read), or --tid names a thread a trace does not have.\n",
	2, 2, "two traces A and B expected", "two traces A and B expected",
};

void cli_dv_loc_str(const struct btr_dv_loc *l, char *buf, size_t size)
{
	const char *base = l->module ? strrchr(l->module, '/') : NULL;
	base = base ? base + 1 : l->module;
	size_t bl = base ? strlen(base) : 0, n;
	/* a function without a symbol is named "module+0xOFF": print the
	 * address as module+offset then, not "module+0xOFF+0xoff" */
	if (l->func && !(base && !strncmp(l->func, base, bl) && !strncmp(l->func + bl, "+0x", 3)))
		n = (size_t)snprintf(buf, size, "%s+0x%" PRIx64, l->func, l->func_off);
	else if (l->module)
		n = (size_t)snprintf(buf, size, "%s+0x%" PRIx64, base, l->offset);
	else
		n = (size_t)snprintf(buf, size, "0x%" PRIx64, l->addr);
	if (l->file && n < size)
		snprintf(buf + n, size - n, " (%s:%d)", strrchr(l->file, '/') ? strrchr(l->file, '/') + 1 : l->file,
			 l->line);
}

static void loc_text(FILE *out, const struct btr_dv_loc *l)
{
	char buf[1024];
	cli_dv_loc_str(l, buf, sizeof(buf));
	fputs(buf, out);
}

static void branch_text(FILE *out, const struct btr_dv_branch *b)
{
	fprintf(out, "0x%" PRIx64 " -> 0x%" PRIx64 "  ", b->from.addr, b->to.addr);
	loc_text(out, &b->from);
	fputs(" -> ", out);
	loc_text(out, &b->to);
	fprintf(out, "  %s%s", btr_branch_kind_name(b->kind), b->taken ? "" : " not-taken");
}

static void side_text(FILE *out, const char *name, const struct btr_dv_side *s)
{
	fprintf(out, "  %s: ", name);
	if (s->ended)
		fputs("the thread ended\n", out);
	else if (s->gap)
		fputs("trace data lost here (nothing is known beyond)\n", out);
	else {
		fprintf(out, "branch %" PRIu64 ", %" PRIu64 " instructions: ", s->at.index, s->at.insns);
		branch_text(out, &s->at);
		fputc('\n', out);
	}
}

static void stack_text(FILE *out, const char *name, const struct btr_dv_side *s)
{
	if (!s->depth)
		return;
	fprintf(out, "  stack %s:\n", name);
	for (size_t i = 0; i < s->depth; i++) {
		fputs("    ", out);
		loc_text(out, &s->stack[i]);
		fputc('\n', out);
	}
}

static void text(FILE *out, const struct btr_diverge_result *r, int modules)
{
	for (size_t i = 0; i < r->n_threads; i++) {
		const struct btr_dv_thread *t = &r->threads[i];
		fprintf(out, "%sthread A pid %u tid %u, B pid %u tid %u: ", i ? "\n" : "", t->pid_a, t->tid_a,
			t->pid_b, t->tid_b);
		if (!t->tid_a || !t->tid_b) {
			fprintf(out, "only in %s\n", t->tid_a ? "A" : "B");
			continue;
		}
		if (!t->diverged) {
			fprintf(out, "the same %" PRIu64 " branches, %" PRIu64 " instructions", t->branches_a,
				t->insns_a);
			if (modules)
				fprintf(out, " (%" PRIu64 " compared: those from the chosen modules)", t->compared);
			fputc('\n', out);
			continue;
		}
		const struct btr_dv_region *f = &t->regions[0];
		uint64_t common = f->a.ended || f->a.gap ? t->branches_a : f->a.at.index - 1;
		fprintf(out, "diverged after %" PRIu64 " common branches (A ran %" PRIu64 " branches, %" PRIu64
			" instructions; B %" PRIu64 ", %" PRIu64 ")\n",
			common, t->branches_a, t->insns_a, t->branches_b, t->insns_b);
		side_text(out, "A", &f->a);
		side_text(out, "B", &f->b);
		stack_text(out, "A", &f->a);
		stack_text(out, "B", &f->b);
		if (f->a.n_last) {
			fprintf(out, "  the %zu branches before (both runs):\n", f->a.n_last);
			for (size_t k = 0; k < f->a.n_last; k++) {
				fputs("    ", out);
				branch_text(out, &f->a.last[k]);
				fputc('\n', out);
			}
		}
		if (t->n_regions > 1 || f->resynced) {
			fprintf(out, "  divergent regions: %zu%s\n", t->n_regions, t->regions_cut ? " (more not listed)" : "");
			for (size_t k = 0; k < t->n_regions; k++) {
				const struct btr_dv_region *g = &t->regions[k];
				fprintf(out, "    %zu: at A branch %" PRIu64 ", B branch %" PRIu64 ": A %" PRIu64
					" instructions (%" PRIu64 " branches), B %" PRIu64 " (%" PRIu64 ")",
					k + 1, g->a.at.index, g->b.at.index, g->a_insns, g->a_branches, g->b_insns,
					g->b_branches);
				if (g->resynced) {
					fputs(", met again at ", out);
					loc_text(out, &g->sync);
				} else {
					fputs(", did not meet again", out);
				}
				fputc('\n', out);
			}
		}
	}
}

static void loc_json(FILE *out, const struct btr_dv_loc *l)
{
	fprintf(out, "{\"addr\": \"0x%" PRIx64 "\", \"module\": ", l->addr);
	if (l->module)
		btr_json_str(out, l->module);
	else
		fputs("null", out);
	fprintf(out, ", \"offset\": \"0x%" PRIx64 "\", \"function\": ", l->offset);
	if (l->func)
		btr_json_str(out, l->func);
	else
		fputs("null", out);
	fprintf(out, ", \"function_offset\": \"0x%" PRIx64 "\", \"file\": ", l->func_off);
	if (l->file)
		btr_json_str(out, l->file);
	else
		fputs("null", out);
	fprintf(out, ", \"line\": %d}", l->line);
}

static void branch_json(FILE *out, const struct btr_dv_branch *b)
{
	fprintf(out, "{\"index\": %" PRIu64 ", \"instructions\": %" PRIu64 ", \"kind\": \"%s\", \"taken\": %s, \"from\": ",
		b->index, b->insns, btr_branch_kind_name(b->kind), b->taken ? "true" : "false");
	loc_json(out, &b->from);
	fputs(", \"to\": ", out);
	loc_json(out, &b->to);
	fputc('}', out);
}

static void side_json(FILE *out, const struct btr_dv_side *s)
{
	fprintf(out, "{\"ended\": %s, \"gap\": %s, \"branch\": ", s->ended ? "true" : "false", s->gap ? "true" : "false");
	if (s->ended || s->gap)
		fputs("null", out);
	else
		branch_json(out, &s->at);
	fputs(", \"stack\": [", out);
	for (size_t i = 0; i < s->depth; i++) {
		fputs(i ? ", " : "", out);
		loc_json(out, &s->stack[i]);
	}
	fputs("], \"before\": [", out);
	for (size_t i = 0; i < s->n_last; i++) {
		fputs(i ? ",\n        " : "\n        ", out);
		branch_json(out, &s->last[i]);
	}
	fputs("]}", out);
}

static void json(FILE *out, const char *a, const char *b, const struct btr_diverge_result *r)
{
	fputs("{\n  \"a\": ", out);
	btr_json_str(out, a);
	fputs(",\n  \"b\": ", out);
	btr_json_str(out, b);
	fprintf(out, ",\n  \"data_lost\": %s,\n  \"threads\": [", r->lost_a || r->lost_b ? "true" : "false");
	for (size_t i = 0; i < r->n_threads; i++) {
		const struct btr_dv_thread *t = &r->threads[i];
		fprintf(out, "%s\n    {\"a\": {\"pid\": %u, \"tid\": %u, \"branches\": %" PRIu64 ", \"instructions\": %" PRIu64
			"}, \"b\": {\"pid\": %u, \"tid\": %u, \"branches\": %" PRIu64 ", \"instructions\": %" PRIu64
			"}, \"diverged\": %s, \"compared\": %" PRIu64 ", \"regions\": [",
			i ? "," : "", t->pid_a, t->tid_a, t->branches_a, t->insns_a, t->pid_b, t->tid_b, t->branches_b,
			t->insns_b, t->diverged ? "true" : "false", t->compared);
		for (size_t k = 0; k < t->n_regions; k++) {
			const struct btr_dv_region *g = &t->regions[k];
			fprintf(out, "%s\n      {\"a\": ", k ? "," : "");
			side_json(out, &g->a);
			fputs(",\n       \"b\": ", out);
			side_json(out, &g->b);
			fprintf(out, ",\n       \"a_instructions\": %" PRIu64 ", \"b_instructions\": %" PRIu64
				", \"a_branches\": %" PRIu64 ", \"b_branches\": %" PRIu64 ", \"met_again\": ",
				g->a_insns, g->b_insns, g->a_branches, g->b_branches);
			if (g->resynced)
				loc_json(out, &g->sync);
			else
				fputs("null", out);
			fputc('}', out);
		}
		fprintf(out, "%s], \"regions_cut\": %s}", t->n_regions ? "\n    " : "", t->regions_cut ? "true" : "false");
	}
	fprintf(out, "%s]\n}\n", r->n_threads ? "\n  " : "");
}

static int parse_tids(const char *s, uint32_t *a, uint32_t *b)
{
	char *end;
	unsigned long x = strtoul(s, &end, 10);
	if (end == s || *end != ':' || !x || x > UINT32_MAX)
		return -1;
	const char *p = end + 1;
	unsigned long y = strtoul(p, &end, 10);
	if (end == p || *end || !y || y > UINT32_MAX)
		return -1;
	*a = (uint32_t)x;
	*b = (uint32_t)y;
	return 0;
}

struct args {
	struct btr_diverge_opts *o;
	int as_json;
	uint64_t ctx;
	const char *mods[16];
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	struct btr_diverge_opts *o = x->o;
	switch (key) {
	case O_TID:
		if (parse_tids(arg, &o->tid_a, &o->tid_b))
			return cli_usage_error("diverge", "bad --tid '%s' (A:B, two thread ids)", arg);
		break;
	case O_ALL: o->all = 1; break;
	case O_MODULE:
		if (o->n_modules == sizeof(x->mods) / sizeof(x->mods[0]))
			return cli_usage_error("diverge", "at most 16 --module options");
		x->mods[o->n_modules++] = arg;
		o->modules = x->mods;
		break;
	case O_CONTEXT:
		if (cli_parse_u64(arg, &x->ctx) < 0 || x->ctx > 256)
			return cli_usage_error("diverge", "bad --context '%s' (0 to 256)", arg);
		break;
	case O_FORMAT:
		return cli_format_text_json("diverge", arg, &x->as_json, "unknown format '%s' (text or json)");
	}
	return EXIT_OK;
}

int cmd_diverge(int argc, char **argv)
{
	struct btr_diverge_opts o = { .sz = sizeof(o) };
	static struct args x;   /* o.modules points into it */
	memset(&x, 0, sizeof(x));
	x.o = &o;
	x.ctx = 8;
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	int as_json = x.as_json;
	uint64_t ctx = x.ctx;
	(void)file;
	o.context = ctx ? (unsigned)ctx : 0;
	o.sopts = &cs.so;
	struct btr_diverge_result *r;
	int err = btr_diverge(argv[first], argv[first + 1], &o, &r);
	cli_progress_clear();   /* (the line of cs.so.progress: both traces' bytes read) */
	if (err == -BTR_ERR_NOT_FOUND) {
		cli_error("diverge: no thread %u in %s or no thread %u in %s", o.tid_a, argv[first], o.tid_b,
			  argv[first + 1]);
		return EXIT_RUNTIME;
	}
	if (err < 0) {
		cli_error("%s, %s: %s", argv[first], argv[first + 1], btr_errstr(err));
		return EXIT_RUNTIME;
	}
	if (!r->n_threads) {
		/* a file cut before its first thread's data: said as lost data */
		cli_error("%s, %s: no thread with trace data to compare%s", argv[first], argv[first + 1],
			  r->lost_a || r->lost_b ? " (trace data was lost)" : "");
		btr_diverge_free(r);
		return EXIT_RUNTIME;
	}
	if (as_json)
		json(stdout, argv[first], argv[first + 1], r);
	else
		text(stdout, r, o.n_modules > 0);
	int diverged = 0;
	for (size_t i = 0; i < r->n_threads; i++)
		diverged |= r->threads[i].diverged;
	if (r->lost_a)
		cli_warn("%s: trace data was lost: the comparison covers what was read", argv[first]);
	if (r->lost_b)
		cli_warn("%s: trace data was lost: the comparison covers what was read", argv[first + 1]);
	int lost = r->lost_a || r->lost_b;
	btr_diverge_free(r);
	if (fflush(stdout) || ferror(stdout)) {
		cli_error("writing the output: %s", strerror(errno ? errno : EIO));
		return EXIT_RUNTIME;
	}
	return lost ? EXIT_RUNTIME : diverged ? EXIT_FOUND : EXIT_OK;
}
