/* cmd_annotate.c - `btr annotate FILE --function SYM [--source]`
 * (docs/annotate.md). */
#include <getopt.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr annotate [OPTIONS] FILE --function SYM\n"
		"Print a function's disassembly with the execution count of every\n"
		"instruction, taken/not-taken counts and percentages of its branches and the\n"
		"source line of each instruction; or, with --source, its source lines with\n"
		"their counts ('#####': has code, never ran).\n\n"
		"Options:\n"
		"  --function SYM         the function: name, C++ name, or module+0xOFF\n"
		"  --source               source lines instead of instructions\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read, the function is\n"
		"not in it, or data was lost.\n");
}

int cmd_annotate(int argc, char **argv)
{
	static const struct option lopts[] = { CLI_STREAM_LONGOPTS,
					       { "function", required_argument, NULL, 'F' },
					       { "source", no_argument, NULL, 'S' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	struct cli_stream cs;
	cli_stream_init(&cs);
	const char *function = NULL, *format = "asm";
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		int r = cli_stream_opt(&cs, "annotate", c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case 'F':
			function = optarg;
			break;
		case 'S':
			format = "source";
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cli_usage_error("annotate", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("annotate", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("annotate", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!function)
		return cli_usage_error("annotate", "missing --function SYM");
	int rc = cli_stream_ready(&cs, "annotate");
	if (rc != EXIT_OK)
		return rc;
	struct btr_analysis *bl = NULL, *an = NULL;
	if (btr_blocks_new(&bl) < 0 || btr_annotate_new(bl, function, &an) < 0) {
		cli_error("out of memory");
		btr_analysis_free(bl);
		return EXIT_RUNTIME;
	}
	struct btr_analysis *list[2] = { bl, an };
	rc = cli_views_run("annotation", argv[optind], &cs, list, 2);
	if (rc == EXIT_OK || rc == -EXIT_RUNTIME) {
		int lost = rc < 0;
		int w = btr_analysis_write(an, stdout, format);
		if (w == -BTR_ERR_NOT_FOUND) {
			cli_error("%s: function '%s' is in no module of the trace", argv[optind], function);
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
