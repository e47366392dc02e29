/* cmd_cov.c - `btr cov FILE --format drcov|lcov|cobertura -o OUT`
 * (docs/cov.md): coverage of a trace for Lighthouse, genhtml and CI. */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr cov [OPTIONS] FILE -o OUT\n"
		"Write the code coverage of a trace (.btr or perf.data), by module-relative\n"
		"address so that runs of a PIE compare.\n\n"
		"Options:\n"
		"  --format drcov|lcov|cobertura\n"
		"                         drcov version 2 (Lighthouse, bncov, Cartographer;\n"
		"                         default), lcov tracefile with line and branch\n"
		"                         coverage through DWARF (genhtml), Cobertura XML\n"
		"  -o, --output OUT       output file ('-': stdout)\n"
		CLI_OUTPUT_HELP
		"  --module NAME          only module NAME (path or base name; default: all)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Instructions of aborted TSX transactions are not covered; their count goes\n"
		"to stderr (\"aborted instructions: N\").\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or data was lost.\n");
}

struct wctx {
	struct btr_analysis *cov;
	const char *format;
};

static int write_cov(void *ctx, FILE *f)
{
	struct wctx *w = ctx;
	return btr_analysis_write(w->cov, f, w->format);
}

int cmd_cov(int argc, char **argv)
{
	static const struct option lopts[] = { CLI_STREAM_LONGOPTS,
					       { "format", required_argument, NULL, 'f' },
					       { "output", required_argument, NULL, 'o' },
					       { "module", required_argument, NULL, 'm' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	struct cli_stream cs;
	cli_stream_init(&cs);
	const char *format = "drcov", *out = NULL, *module = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int r = cli_stream_opt(&cs, "cov", c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case 'f':
			if (strcmp(optarg, "drcov") && strcmp(optarg, "lcov") && strcmp(optarg, "cobertura"))
				return cli_usage_error("cov", "unknown format '%s' (drcov, lcov or cobertura)", optarg);
			format = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'm':
			module = optarg;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cli_usage_error("cov", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("cov", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("cov", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!out)
		return cli_usage_error("cov", "missing -o OUT");
	int rc = cli_stream_ready(&cs, "cov");
	if (rc != EXIT_OK)
		return rc;
	struct cli_output o;
	if ((rc = cli_output_check(&o, "cov", out, !strcmp(format, "drcov") ? CLI_OUTPUT_BINARY : 0)) != EXIT_OK)
		return rc;
	struct btr_analysis *bl = NULL, *cov = NULL;
	if (btr_blocks_new(&bl) < 0 || btr_cov_new(bl, &cov) < 0 || btr_cov_set_module(cov, module) < 0) {
		cli_error("out of memory");
		btr_analysis_free(bl);
		return EXIT_RUNTIME;
	}
	struct btr_analysis *list[2] = { bl, cov };
	rc = cli_views_run("coverage", argv[optind], &cs, list, 2);
	if (rc == EXIT_OK || rc == -EXIT_RUNTIME) {
		struct wctx w = { cov, format };
		int wrc = cli_write_file(&o, write_cov, &w);
		rc = wrc != EXIT_OK ? wrc : rc < 0 ? EXIT_RUNTIME : EXIT_OK;
		const struct btr_blocks_result *br = btr_blocks_get(bl);
		if (br && br->tsx_aborts)   /* docs/cov.md: not covered */
			fprintf(stderr, "btr cov: aborted instructions: %" PRIu64 " (in %" PRIu64
				" aborted TSX transaction%s), not counted as covered\n",
				br->aborted_insns, br->tsx_aborts, br->tsx_aborts > 1 ? "s" : "");
	}
	btr_analysis_free(cov);
	btr_analysis_free(bl);
	return rc;
}
