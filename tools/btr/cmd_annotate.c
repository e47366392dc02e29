/* cmd_annotate.c - `btr annotate FILE --function SYM [--source]`
 * (docs/annotate.md). */
#include <string.h>

#include "cli_cmd.h"

enum { O_FUNCTION = 256, O_SOURCE };

static const struct cli_opt opts[] = {
	{ "function", O_FUNCTION, CLI_ARG, "  --function SYM         the function: name, C++ name, or module+0xOFF\n",
	  "missing --function SYM" },
	{ "source", O_SOURCE, CLI_NOARG, "  --source               source lines instead of instructions\n", NULL },
	CLI_SOURCE_ROOT_OPT,
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"annotate",
	"Usage: btr annotate [OPTIONS] FILE --function SYM\n"
	"Print a function's disassembly with the execution count of every\n"
	"instruction, taken/not-taken counts and percentages of its branches and the\n"
	"source line of each instruction; or, with --source, its source lines with\n"
	"their counts ('#####': has code, never ran).\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read, the function is\n"
	"not in it, or data was lost.\n",
	1, 1, NULL,
};

struct args {
	const char *function, *format;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	if (key == O_FUNCTION)
		x->function = arg;
	else if (key == O_SOURCE)
		x->format = "source";
	return EXIT_OK;
}

int cmd_annotate(int argc, char **argv)
{
	struct args x = { NULL, "asm" };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	const char *function = x.function, *format = x.format;
	struct btr_analysis *bl = NULL, *an = NULL;
	struct btr_annotate_opts ao;
	cli_source_rule(&cs, file, &ao);
	if (btr_blocks_new(&bl) < 0 || btr_annotate_new_opts(bl, function, &ao, &an) < 0) {
		cli_error("out of memory");
		btr_analysis_free(bl);
		return EXIT_RUNTIME;
	}
	struct btr_analysis *list[2] = { bl, an };
	rc = cli_views_run("annotation", argv[first], &cs, list, 2);
	if (rc == EXIT_OK || rc == -EXIT_RUNTIME) {
		int lost = rc < 0;
		int w = btr_analysis_write(an, stdout, format);
		if (w == -BTR_ERR_NOT_FOUND) {
			cli_error("%s: function '%s' is in no module of the trace", argv[first], function);
			rc = EXIT_RUNTIME;
		} else if (w < 0 || fflush(stdout) != 0) {
			cli_error("annotate: %s", btr_errstr(w < 0 ? w : -BTR_ERR_IO));
			rc = EXIT_RUNTIME;
		} else {
			rc = lost ? EXIT_RUNTIME : EXIT_OK;
		}
	}
	btr_analysis_free(an);
	btr_analysis_free(bl);
	return rc;
}
