/* cmd_callgraph.c - `btr callgraph FILE`: per function inclusive and
 * exclusive instructions (or time), calls, callers and callees
 * (docs/callgraph.md). */
#include <string.h>

#include "cli_prof.h"

enum { O_FORMAT = 1, O_WEIGHT };

static const struct cli_opt opts[] = {
	{ "format", O_FORMAT, CLI_ARG, "  --format text|json|dot output format (default text; dot for Graphviz)\n", NULL },
	{ "weight", O_WEIGHT, CLI_ARG,
	  "  --weight W             insns (default: instructions, or branches when the\n"
	  "                         trace has no instruction counts) or time (TSC ticks)\n", NULL },
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       write to OUT instead of stdout\n" CLI_OUTPUT_HELP, NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"callgraph",
	"Usage: btr callgraph [OPTIONS] FILE\n"
	"The call graph of a trace, from its call stacks (rebuilt from calls and\n"
	"returns): per function the inclusive and exclusive (self) instructions, the\n"
	"number of calls, its callers and callees with call counts.  Recursion is\n"
	"counted once in inclusive figures.  A function of a module file is one row\n"
	"for all processes that ran it (figures summed; --pid for one process).\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
	"(then the output covers what was read).\n",
	1, 1, NULL,
};

/* A failed write: the output, or the trace the analysis could not use. */
static void callgraph_write_error(void *ctx, const char *file, const char *outp, int err)
{
	(void)ctx;
	(void)outp;
	cli_error("%s: %s", err == -BTR_ERR_IO ? "writing the output" : file,
		  err == -BTR_ERR_UNSUPPORTED ? "the trace has no timestamps (use --weight insns)" : btr_errstr(err));
}

struct args {
	const char *outp, *format;
	struct btr_profile_opts po;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	switch (key) {
	case 'o': x->outp = arg; break;
	case O_FORMAT:
		if (cli_format_check("callgraph", "callgraph", arg, 1))
			return EXIT_USAGE;
		x->format = arg;
		break;
	case O_WEIGHT:
		return cli_prof_weight("callgraph", arg, &x->po);
	}
	return EXIT_OK;
}

int cmd_callgraph(int argc, char **argv)
{
	struct args x = { "-", "text", { .sz = sizeof(x.po) } };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	const char *outp = x.outp, *format = x.format;
	struct btr_profile_opts po = x.po;
	struct cli_output out;
	if ((rc = cli_output_check(&out, "callgraph", outp, 0)) != EXIT_OK)
		return rc;
	struct btr_analysis *a;
	if (btr_callgraph_new(&po, &a)) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write("callgraph", file, &cs, a, &out, format, callgraph_write_error, NULL);
}
