/* cmd_pprof.c - `btr pprof FILE -o OUT.pb.gz`: a pprof profile of the
 * trace's call stacks (docs/pprof.md). */
#include <string.h>

#include "cli_prof.h"

enum { O_RAW = 1 };

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       the output file ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	{ "raw", O_RAW, CLI_NOARG, "  --raw                  do not gzip\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"pprof",
	"Usage: btr pprof [OPTIONS] FILE -o OUT.pb.gz\n"
	"A pprof profile (profile.proto, gzipped) of the trace's call stacks, for\n"
	"`go tool pprof`, Pyroscope, Parca: one sample per distinct stack with its\n"
	"instructions (branches when the trace has no instruction counts) and TSC\n"
	"ticks where the trace has timestamps; functions with file and line;\n"
	"mappings with build-ids.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
	"(then OUT covers what was read).\n",
	1, 1, NULL,
};

struct args {
	const char *outp;
	int raw;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	if (key == 'o')
		x->outp = arg;
	else if (key == O_RAW)
		x->raw = 1;
	return EXIT_OK;
}

int cmd_pprof(int argc, char **argv)
{
	struct args x = { NULL, 0 };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	const char *outp = x.outp;
	int raw = x.raw;
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
