/* cmd_timeline.c - `btr timeline FILE -o OUT.json|OUT.pftrace`: function
 * enter/exit per thread for Perfetto and chrome://tracing
 * (docs/timeline.md). */
#include <getopt.h>
#include <string.h>

#include "cli_prof.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr timeline [OPTIONS] FILE -o OUT\n"
		"Function calls per thread on a timeline, for ui.perfetto.dev and\n"
		"chrome://tracing.  The format follows OUT's name unless --format says:\n"
		"  OUT.json               Chrome trace-event JSON (B/E events per thread)\n"
		"  OUT.pftrace            Perfetto's protobuf trace (TrackEvent slices)\n"
		"Time is the thread's instruction count (branches without instruction counts,\n"
		"TSC ticks with --weight time), shown as microseconds.\n\n"
		"Options:\n"
		"  -o, --output OUT       the output file ('-': stdout)\n"
		CLI_OUTPUT_HELP
		"  --format json|pftrace  output format\n"
		"  --from N, --to N       only calls overlapping [N, M) of the thread clock\n"
		"  --min-dur N            leave out calls shorter than N (default: automatic,\n"
		"                         every call up to 1M events, then the threshold\n"
		"                         is 16, then 4x at each further 1M)\n"
		"  --weight insns|time    the clock (default insns)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
		"(then OUT covers what was read).\n");
}

int cmd_timeline(int argc, char **argv)
{
	enum { O_FORMAT = 1, O_WEIGHT, O_FROM, O_TO, O_MIN };
	static const struct option lopts[] = {
		CLI_STREAM_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "weight", required_argument, NULL, O_WEIGHT },
		{ "from", required_argument, NULL, O_FROM },
		{ "to", required_argument, NULL, O_TO },
		{ "min-dur", required_argument, NULL, O_MIN },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_stream cs;
	const char *outp = NULL, *format = NULL;
	struct btr_profile_opts po = { .sz = sizeof(po) };
	int c;
	cli_stream_init(&cs);
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int sr = cli_stream_opt(&cs, "timeline", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'o': outp = optarg; break;
		case O_FORMAT:
			if (strcmp(optarg, "json") && strcmp(optarg, "pftrace"))
				return cli_usage_error("timeline", "unknown format '%s' (json, pftrace)", optarg);
			format = optarg;
			break;
		case O_WEIGHT:
			if (!strcmp(optarg, "insns"))
				po.weight = BTR_PROFILE_INSNS;
			else if (!strcmp(optarg, "time"))
				po.weight = BTR_PROFILE_TIME;
			else
				return cli_usage_error("timeline", "unknown weight '%s' (insns, time)", optarg);
			break;
		case O_FROM:
		case O_TO:
		case O_MIN: {
			uint64_t v;
			if (cli_parse_u64(optarg, &v))
				return cli_usage_error("timeline", "bad number '%s'", optarg);
			if (c == O_FROM)
				po.from = v;
			else if (c == O_TO)
				po.to = v;
			else
				po.min_dur = v;
			break;
		}
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("timeline", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("timeline", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("timeline", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!outp)
		return cli_usage_error("timeline", "missing -o OUT");
	if (po.to && po.to <= po.from)
		return cli_usage_error("timeline", "--to must be above --from");
	if (!format)
		format = cli_ends_with(outp, ".pftrace") || cli_ends_with(outp, ".pb") ? "pftrace" : "json";
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "timeline");
	if (rc != EXIT_OK)
		return rc;
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
