/* cmd_diverge.c - `btr diverge A B` (docs/diverge.md): the first branch
 * where matching threads of two runs went different ways, with both call
 * stacks, the branches before it and the instruction counts; with --all
 * every divergent region. */
#include <getopt.h>
#include <inttypes.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "btr/diverge.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr diverge [OPTIONS] A B\n"
		"Where two runs went different ways: for each pair of matching threads (the\n"
		"k-th process's j-th thread in both traces), the first branch whose outcome\n"
		"differs - another direction of a conditional, another indirect target, a\n"
		"signal or system call at another point, the end of one thread - with the\n"
		"call stacks of both runs there, the branches before it, the source lines and\n"
		"the instructions each run had executed.  Addresses compare as module + offset,\n"
		"so two runs with ASLR on compare.\n\n"
		"Options:\n"
		"  --tid A:B              compare only thread A of the first trace with thread B\n"
		"                         of the second\n"
		"  --all                  after a divergence, meet again at the next call both\n"
		"                         runs make (same call site, same function) and list every\n"
		"                         divergent region with its size in instructions\n"
		"  --context N            branches shown before the divergence (default 8)\n"
		"  --module NAME          compare only branches from this module (path or file\n"
		"                         name; repeatable): ASLR changes the paths libc's string\n"
		"                         functions take by data alignment, and the loader's work\n"
		"                         depends on the machine\n"
		"  --format text|json     output format (default text)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 the runs took the same branches; 1 they diverged; 2 usage\n"
		"error; 3 a trace cannot be read or lost data (then the comparison covers what\n"
		"was read), or --tid names a thread a trace does not have.\n");
}

/* "main+0x15 (t.c:17)" or "libc.so.6+0x2a1c0" or "0x7f..." */
static void loc_text(FILE *out, const struct btr_dv_loc *l)
{
	const char *base = l->module ? strrchr(l->module, '/') : NULL;
	base = base ? base + 1 : l->module;
	size_t bl = base ? strlen(base) : 0;
	/* a function without a symbol is named "module+0xOFF": print the
	 * address as module+offset then, not "module+0xOFF+0xoff" */
	if (l->func && !(base && !strncmp(l->func, base, bl) && !strncmp(l->func + bl, "+0x", 3)))
		fprintf(out, "%s+0x%" PRIx64, l->func, l->func_off);
	else if (l->module)
		fprintf(out, "%s+0x%" PRIx64, base, l->offset);
	else
		fprintf(out, "0x%" PRIx64, l->addr);
	if (l->file)
		fprintf(out, " (%s:%d)", strrchr(l->file, '/') ? strrchr(l->file, '/') + 1 : l->file, l->line);
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

static void text(FILE *out, const struct btr_diverge_result *r)
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
			fprintf(out, "the same %" PRIu64 " branches, %" PRIu64 " instructions\n", t->branches_a,
				t->insns_a);
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
			"}, \"diverged\": %s, \"regions\": [",
			i ? "," : "", t->pid_a, t->tid_a, t->branches_a, t->insns_a, t->pid_b, t->tid_b, t->branches_b,
			t->insns_b, t->diverged ? "true" : "false");
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

int cmd_diverge(int argc, char **argv)
{
	enum { O_TID = 1, O_ALL, O_CONTEXT, O_FORMAT, O_MODULE };
	/* --tid A:B comes before the stream options' --tid (selection) */
	static const struct option lopts[] = { { "tid", required_argument, NULL, O_TID },
					       CLI_STREAM_LONGOPTS,
					       { "all", no_argument, NULL, O_ALL },
					       { "context", required_argument, NULL, O_CONTEXT },
					       { "format", required_argument, NULL, O_FORMAT },
					       { "module", required_argument, NULL, O_MODULE },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	struct cli_stream cs;
	cli_stream_init(&cs);
	struct btr_diverge_opts o = { .sz = sizeof(o) };
	int as_json = 0;
	uint64_t ctx = 8;
	const char *mods[16];
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		int r = cli_stream_opt(&cs, "diverge", c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case O_TID:
			if (parse_tids(optarg, &o.tid_a, &o.tid_b))
				return cli_usage_error("diverge", "bad --tid '%s' (A:B, two thread ids)", optarg);
			break;
		case O_ALL: o.all = 1; break;
		case O_MODULE:
			if (o.n_modules == sizeof(mods) / sizeof(mods[0]))
				return cli_usage_error("diverge", "at most 16 --module options");
			mods[o.n_modules++] = optarg;
			o.modules = mods;
			break;
		case O_CONTEXT:
			if (cli_parse_u64(optarg, &ctx) < 0 || ctx > 256)
				return cli_usage_error("diverge", "bad --context '%s' (0 to 256)", optarg);
			break;
		case O_FORMAT:
			if (strcmp(optarg, "text") && strcmp(optarg, "json"))
				return cli_usage_error("diverge", "unknown format '%s' (text or json)", optarg);
			as_json = !strcmp(optarg, "json");
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("diverge", "unknown option");
		}
	}
	if (argc - optind != 2)
		return cli_usage_error("diverge", "two traces A and B expected");
	int rc = cli_stream_ready(&cs, "diverge");
	if (rc != EXIT_OK)
		return rc;
	o.context = ctx ? (unsigned)ctx : 0;
	o.sopts = &cs.so;
	struct btr_diverge_result *r;
	int err = btr_diverge(argv[optind], argv[optind + 1], &o, &r);
	if (err == -BTR_ERR_NOT_FOUND) {
		cli_error("diverge: no thread %u in %s or no thread %u in %s", o.tid_a, argv[optind], o.tid_b,
			  argv[optind + 1]);
		return EXIT_RUNTIME;
	}
	if (err < 0) {
		cli_error("%s, %s: %s", argv[optind], argv[optind + 1], btr_errstr(err));
		return EXIT_RUNTIME;
	}
	if (as_json)
		json(stdout, argv[optind], argv[optind + 1], r);
	else
		text(stdout, r);
	int diverged = 0;
	for (size_t i = 0; i < r->n_threads; i++)
		diverged |= r->threads[i].diverged;
	if (r->lost_a)
		cli_warn("%s: trace data was lost: the comparison covers what was read", argv[optind]);
	if (r->lost_b)
		cli_warn("%s: trace data was lost: the comparison covers what was read", argv[optind + 1]);
	int lost = r->lost_a || r->lost_b;
	btr_diverge_free(r);
	if (fflush(stdout) || ferror(stdout)) {
		cli_error("writing the output: %s", strerror(errno ? errno : EIO));
		return EXIT_RUNTIME;
	}
	return lost ? EXIT_RUNTIME : diverged ? EXIT_FOUND : EXIT_OK;
}
