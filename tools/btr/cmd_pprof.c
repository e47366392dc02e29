/* cmd_pprof.c - `btr pprof FILE -o OUT.pb.gz`: a pprof profile of the
 * trace's call stacks (docs/pprof.md). */
#include <getopt.h>
#include <string.h>

#include "cli_prof.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr pprof [OPTIONS] FILE -o OUT.pb.gz\n"
		"A pprof profile (profile.proto, gzipped) of the trace's call stacks, for\n"
		"`go tool pprof`, Pyroscope, Parca: one sample per distinct stack with its\n"
		"instructions (branches when the trace has no instruction counts) and TSC\n"
		"ticks where the trace has timestamps; functions with file and line;\n"
		"mappings with build-ids.\n\n"
		"Options:\n"
		"  -o, --output OUT       the output file ('-': stdout)\n"
		CLI_OUTPUT_HELP
		"  --raw                  do not gzip\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
		"(then OUT covers what was read).\n");
}

int cmd_pprof(int argc, char **argv)
{
	enum { O_RAW = 1 };
	static const struct option lopts[] = {
		CLI_STREAM_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
		{ "raw", no_argument, NULL, O_RAW },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_stream cs;
	const char *outp = NULL;
	int raw = 0, c;
	cli_stream_init(&cs);
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int sr = cli_stream_opt(&cs, "pprof", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'o': outp = optarg; break;
		case O_RAW: raw = 1; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("pprof", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("pprof", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("pprof", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!outp)
		return cli_usage_error("pprof", "missing -o OUT");
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "pprof");
	if (rc != EXIT_OK)
		return rc;
	struct cli_output out;
	if ((rc = cli_output_check(&out, "pprof", outp, CLI_OUTPUT_BINARY)) != EXIT_OK)
		return rc;
	struct btr_profile_opts po = { .sz = sizeof(po) };
	struct btr_analysis *a;
	if (btr_pprof_new(&po, &a)) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write("pprof", file, &cs, a, &out, raw ? "pb-raw" : "pb", NULL, NULL);
}
