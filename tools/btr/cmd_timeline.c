/* cmd_timeline.c - `btr timeline FILE -o OUT.json|OUT.pftrace`: function
 * enter/exit per thread for Perfetto and chrome://tracing
 * (docs/timeline.md). */
#include <string.h>

#include "cli_prof.h"

enum { O_FORMAT = 1, O_WEIGHT, O_FROM, O_TO, O_MIN };

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       the output file ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	{ "format", O_FORMAT, CLI_ARG, "  --format json|pftrace  output format\n", NULL },
	{ "from", O_FROM, CLI_ARG, "  --from N, --to N       only calls overlapping [N, M) of the thread clock\n", NULL },
	{ "to", O_TO, CLI_ARG, NULL, NULL },
	{ "min-dur", O_MIN, CLI_ARG,
	  "  --min-dur N            leave out calls shorter than N (default: automatic,\n"
	  "                         every call up to 1M events, then the threshold\n"
	  "                         is 16, then 4x at each further 1M)\n", NULL },
	{ "weight", O_WEIGHT, CLI_ARG, "  --weight insns|time    the clock (default insns)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"timeline",
	"Usage: btr timeline [OPTIONS] FILE -o OUT\n"
	"Function calls per thread on a timeline, for ui.perfetto.dev and\n"
	"chrome://tracing.  The format follows OUT's name unless --format says:\n"
	"  OUT.json               Chrome trace-event JSON (B/E events per thread)\n"
	"  OUT.pftrace            Perfetto's protobuf trace (TrackEvent slices)\n"
	"Time is the thread's instruction count (branches without instruction counts,\n"
	"TSC ticks with --weight time), shown as microseconds.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
	"(then OUT covers what was read).\n",
	1, 1, NULL,
};

struct args {
	const char *outp, *format;
	struct btr_profile_opts po;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	uint64_t v;
	switch (key) {
	case 'o': x->outp = arg; break;
	case O_FORMAT:
		if (cli_format_check("timeline", "timeline", arg, 1))
			return EXIT_USAGE;
		x->format = arg;
		break;
	case O_WEIGHT:
		return cli_prof_weight("timeline", arg, &x->po);
	case O_FROM:
	case O_TO:
	case O_MIN:
		if (cli_parse_u64(arg, &v))
			return cli_usage_error("timeline", "bad number '%s'", arg);
		if (key == O_FROM)
			x->po.from = v;
		else if (key == O_TO)
			x->po.to = v;
		else
			x->po.min_dur = v;
		break;
	case CLI_OPT_END:
		if (x->po.to && x->po.to <= x->po.from)
			return cli_usage_error("timeline", "--to must be above --from");
		break;
	}
	return EXIT_OK;
}

int cmd_timeline(int argc, char **argv)
{
	struct args x = { NULL, NULL, { .sz = sizeof(x.po) } };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	const char *outp = x.outp, *format = x.format;
	struct btr_profile_opts po = x.po;
	if (!format)
		format = cli_ends_with(outp, ".pftrace") || cli_ends_with(outp, ".pb") ? "pftrace" : "json";
	struct cli_output out;
	if ((rc = cli_output_check(&out, "timeline", outp, !strcmp(format, "pftrace") ? CLI_OUTPUT_BINARY : 0)) != EXIT_OK)
		return rc;
	struct btr_analysis *a;
	if ((rc = btr_timeline_new(&po, &a))) {
		cli_error("%s", btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write("timeline", file, &cs, a, &out, format, NULL, NULL);
}
