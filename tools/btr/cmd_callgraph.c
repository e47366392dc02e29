/* cmd_callgraph.c - `btr callgraph FILE`: per function inclusive and
 * exclusive instructions (or time), calls, callers and callees
 * (docs/callgraph.md). */
#include <getopt.h>
#include <string.h>

#include "cli_prof.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr callgraph [OPTIONS] FILE\n"
		"The call graph of a trace, from its call stacks (rebuilt from calls and\n"
		"returns): per function the inclusive and exclusive (self) instructions, the\n"
		"number of calls, its callers and callees with call counts.  Recursion is\n"
		"counted once in inclusive figures.\n\n"
		"Options:\n"
		"  --format text|json|dot output format (default text; dot for Graphviz)\n"
		"  --weight W             insns (default: instructions, or branches when the\n"
		"                         trace has no instruction counts) or time (TSC ticks)\n"
		"  -o, --output OUT       write to OUT instead of stdout\n"
		CLI_OUTPUT_HELP
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
		"(then the output covers what was read).\n");
}

/* A failed write: the output, or the trace the analysis could not use. */
static void callgraph_write_error(void *ctx, const char *file, const char *outp, int err)
{
	(void)ctx;
	(void)outp;
	cli_error("%s: %s", err == -BTR_ERR_IO ? "writing the output" : file,
		  err == -BTR_ERR_UNSUPPORTED ? "the trace has no timestamps (use --weight insns)" : btr_errstr(err));
}

int cmd_callgraph(int argc, char **argv)
{
	enum { O_FORMAT = 1, O_WEIGHT };
	static const struct option lopts[] = {
		CLI_STREAM_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "weight", required_argument, NULL, O_WEIGHT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_stream cs;
	const char *outp = "-", *format = "text";
	struct btr_profile_opts po = { .sz = sizeof(po) };
	int c;
	cli_stream_init(&cs);
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int sr = cli_stream_opt(&cs, "callgraph", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'o': outp = optarg; break;
		case O_FORMAT:
			if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "dot"))
				return cli_usage_error("callgraph", "unknown format '%s' (text, json, dot)", optarg);
			format = optarg;
			break;
		case O_WEIGHT:
			if (!strcmp(optarg, "insns"))
				po.weight = BTR_PROFILE_INSNS;
			else if (!strcmp(optarg, "time"))
				po.weight = BTR_PROFILE_TIME;
			else
				return cli_usage_error("callgraph", "unknown weight '%s' (insns, time)", optarg);
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("callgraph", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("callgraph", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("callgraph", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "callgraph");
	if (rc != EXIT_OK)
		return rc;
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
