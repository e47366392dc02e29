/* cmd_flame.c - `btr flame FILE -o OUT`: folded stacks, speedscope JSON or
 * an interactive SVG flame graph (docs/flame.md). */
#include <getopt.h>
#include <string.h>

#include "cli_prof.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr flame [OPTIONS] FILE -o OUT\n"
		"Flame graph of a trace from its call stacks (rebuilt from calls and returns).\n"
		"The format follows OUT's name unless --format says:\n"
		"  OUT.folded (or '-')    folded stacks, one 'outer;...;inner WEIGHT' per line\n"
		"  OUT.speedscope.json    speedscope's file format, evented, one profile per thread\n"
		"  OUT.svg                an interactive SVG flame graph (hover, click to zoom)\n\n"
		"Options:\n"
		"  -o, --output OUT       the output file ('-': stdout)\n"
		CLI_OUTPUT_HELP
		"  --format F             folded, speedscope or svg\n"
		"  --weight W             insns (default: instructions, or branches when the\n"
		"                         trace has no instruction counts) or time (TSC ticks)\n"
		"  --title T              title of the SVG / speedscope file\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
		"(then OUT covers what was read).\n");
}

int cmd_flame(int argc, char **argv)
{
	enum { O_FORMAT = 1, O_WEIGHT, O_TITLE };
	static const struct option lopts[] = {
		CLI_STREAM_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "weight", required_argument, NULL, O_WEIGHT },
		{ "title", required_argument, NULL, O_TITLE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_stream cs;
	const char *outp = NULL, *format = NULL, *title = NULL;
	struct btr_profile_opts po = { .sz = sizeof(po) };
	int c;
	cli_stream_init(&cs);
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int sr = cli_stream_opt(&cs, "flame", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'o': outp = optarg; break;
		case O_FORMAT:
			if (strcmp(optarg, "folded") && strcmp(optarg, "speedscope") && strcmp(optarg, "svg"))
				return cli_usage_error("flame", "unknown format '%s' (folded, speedscope, svg)", optarg);
			format = optarg;
			break;
		case O_WEIGHT:
			if (!strcmp(optarg, "insns"))
				po.weight = BTR_PROFILE_INSNS;
			else if (!strcmp(optarg, "time"))
				po.weight = BTR_PROFILE_TIME;
			else
				return cli_usage_error("flame", "unknown weight '%s' (insns, time)", optarg);
			break;
		case O_TITLE: title = optarg; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("flame", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("flame", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("flame", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!outp)
		return cli_usage_error("flame", "missing -o OUT");
	if (!format) {
		if (cli_ends_with(outp, ".svg"))
			format = "svg";
		else if (cli_ends_with(outp, ".json"))
			format = "speedscope";
		else
			format = "folded";
	}
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "flame");
	if (rc != EXIT_OK)
		return rc;
	struct cli_output out;
	if ((rc = cli_output_check(&out, "flame", outp, 0)) != EXIT_OK)
		return rc;
	po.events = !strcmp(format, "speedscope");
	struct btr_analysis *a;
	if (btr_flame_new(&po, &a) || btr_flame_set_title(a, title ? title : file)) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write("flame", file, &cs, a, &out, format, NULL, NULL);
}
