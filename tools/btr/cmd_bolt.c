/* cmd_bolt.c - `btr bolt FILE -o OUT.fdata`: BOLT's branch profile of the
 * traced program (docs/bolt.md). */
#include <getopt.h>
#include <string.h>

#include "cli_prof.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr bolt [OPTIONS] FILE -o OUT.fdata\n"
		"BOLT's branch profile of one module of the trace, in the fdata format that\n"
		"perf2bolt writes (taken branches and fall-through edges as function+offset,\n"
		"counts, mispredictions where the trace has them), for\n"
		"  llvm-bolt PROGRAM -o PROGRAM.bolt -data OUT.fdata ...\n\n"
		"Options:\n"
		"  -o, --output OUT       the output file ('-': stdout)\n"
		CLI_OUTPUT_HELP
		"  --pre-aggregated       write the pre-aggregated format instead (llvm-bolt -pa):\n"
		"                         B (branch) and F (fall-through range) lines with\n"
		"                         offsets from the module's load base\n"
		"  --module NAME          the module (path or file name; default: the file of\n"
		"                         the first --elf without BASE, else the traced program)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
		"(then OUT covers what was read), or the module is not in the trace.\n");
}

/* A failed write: the module asked for is not in the trace, or the output. */
static void bolt_write_error(void *ctx, const char *file, const char *outp, int err)
{
	const struct btr_profile_opts *po = ctx;
	if (err == -BTR_ERR_NOT_FOUND)
		cli_error("%s: no module %s in the trace", file, po->module ? po->module : "(the program)");
	else
		cli_error("%s: %s", outp, btr_errstr(err));
}

int cmd_bolt(int argc, char **argv)
{
	enum { O_PA = 1, O_MODULE };
	static const struct option lopts[] = {
		CLI_STREAM_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
		{ "pre-aggregated", no_argument, NULL, O_PA },
		{ "module", required_argument, NULL, O_MODULE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_stream cs;
	const char *outp = NULL;
	struct btr_profile_opts po = { .sz = sizeof(po) };
	int c;
	cli_stream_init(&cs);
	while ((c = getopt_long(argc, argv, "o:h", lopts, NULL)) != -1) {
		int sr = cli_stream_opt(&cs, "bolt", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'o': outp = optarg; break;
		case O_PA: po.pre_aggregated = 1; break;
		case O_MODULE: po.module = optarg; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("bolt", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("bolt", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("bolt", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!outp)
		return cli_usage_error("bolt", "missing -o OUT");
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "bolt");
	if (rc != EXIT_OK)
		return rc;
	struct cli_output out;
	if ((rc = cli_output_check(&out, "bolt", outp, 0)) != EXIT_OK)
		return rc;
	if (!po.module && cs.n_elfs && !cs.elfs[0].has_base) {
		/* --elf PROGRAM names the module to profile */
		const char *b = strrchr(cs.elfs[0].path, '/');
		po.module = b ? b + 1 : cs.elfs[0].path;
	}
	struct btr_analysis *a;
	if (btr_bolt_new(&po, &a)) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write("bolt", file, &cs, a, &out, "fdata", bolt_write_error, &po);
}
