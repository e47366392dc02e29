/* cmd_crash.c - `btr crash FILE`: what led to a crash (docs/crash.md),
 * the library's crash analysis (lib/analysis/crash.c, btr/crash.h) run
 * through btr_analysis_run and written to stdout. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cmd.h"

#define DEFAULT_LAST 16

#define STR_(x) #x
#define STR(x) STR_(x)
enum { OPT_FORMAT = 256 };

static const struct cli_opt opts[] = {
	{ "last", 'n', CLI_ARG, "  -n, --last N           branches to show (default " STR(DEFAULT_LAST) "; a --ring trace: its size)\n", NULL },
	{ "format", OPT_FORMAT, CLI_ARG, "      --format FMT       text (default) or json\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"crash",
	"Usage: btr crash [OPTIONS] FILE\n"
	"For each process in trace FILE that died from a signal: the crashed thread, the\n"
	"signal, the faulting instruction, the fault address, and the last branches of\n"
	"that thread before it (oldest first) with function+offset file:line of both ends.\n\n",
	opts,
	"\nExit: 0 (also when nothing crashed: \"no crash\"), 2 usage, 3 unreadable trace.\n",
	1, 1, "one trace file expected", "one trace file expected",
};


struct args {
	struct btr_crash_opts o;
	int json;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	uint64_t v;
	switch (key) {
	case 'n':
		if (cli_parse_u64(arg, &v) < 0 || !v || v > 1000000)
			return cli_usage_error("crash", "bad count '%s'", arg);
		x->o.last = (size_t)v;
		break;
	case OPT_FORMAT:
		return cli_format_text_json("crash", arg, &x->json, "unknown format '%s' (text, json)");
	}
	return EXIT_OK;
}

int cmd_crash(int argc, char **argv)
{
	struct args x = { .o = { .sz = sizeof(x.o) } };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	x.o.name = file;
	struct btr_analysis *a;
	if ((rc = btr_crash_new(&x.o, &a)) < 0) {
		cli_error("%s", btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	rc = cli_views_run("crash report", file, &cs, &a, 1);
	if (rc == EXIT_OK || rc == -EXIT_RUNTIME) {
		int w = btr_analysis_write(a, stdout, x.json ? "json" : "text");
		if (w < 0 || fflush(stdout) != 0) {
			cli_error("writing the output: output error");
			rc = EXIT_RUNTIME;
		}
	}
	btr_analysis_free(a);
	return rc < 0 ? -rc : rc;
}
