/* cmd_cov.c - `btr cov FILE --format drcov|lcov|cobertura -o OUT`
 * (docs/cov.md): coverage of a trace for Lighthouse, genhtml and CI. */
#include <inttypes.h>
#include <string.h>

#include "cli_cmd.h"

enum { O_FORMAT = 256, O_MODULE };

static const struct cli_opt opts[] = {
	{ "format", O_FORMAT, CLI_ARG,
	  "  --format drcov|lcov|cobertura\n"
	  "                         drcov version 2 (Lighthouse, bncov, Cartographer;\n"
	  "                         default), lcov tracefile with line and branch\n"
	  "                         coverage through DWARF (genhtml), Cobertura XML\n"
	  "                         (lcov, drcov: a control character in a path or\n"
	  "                         name, and ',' in an lcov name, becomes '?')\n", NULL },
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       output file ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	{ "module", O_MODULE, CLI_ARG, "  --module NAME          only module NAME (path or base name; default: all)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"cov",
	"Usage: btr cov [OPTIONS] FILE -o OUT\n"
	"Write the code coverage of a trace (.btr or perf.data), by module-relative\n"
	"address so that runs of a PIE compare.\n\n"
	"Options:\n",
	opts,
	"\nInstructions of aborted TSX transactions are not covered; their count goes\n"
	"to stderr (\"aborted instructions: N\").\n"
	"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or data was lost.\n",
	1, 1, NULL,
};

struct wctx {
	struct btr_analysis *cov;
	const char *format;
};

static int write_cov(void *ctx, FILE *f)
{
	struct wctx *w = ctx;
	return btr_analysis_write(w->cov, f, w->format);
}

struct args {
	const char *format, *out, *module;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	switch (key) {
	case O_FORMAT:
		if (cli_format_check("cov", "cov", arg, 0))
			return EXIT_USAGE;
		x->format = arg;
		break;
	case 'o': x->out = arg; break;
	case O_MODULE: x->module = arg; break;
	}
	return EXIT_OK;
}

int cmd_cov(int argc, char **argv)
{
	struct args x = { "drcov", NULL, NULL };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	const char *format = x.format, *out = x.out, *module = x.module;
	(void)file;
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
	rc = cli_views_run("coverage", argv[first], &cs, list, 2);
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
