/* cmd_afdo.c - `btr afdo FILE -o OUT.prof`: an LLVM sample profile
 * (AutoFDO) of the traced program for clang -fprofile-sample-use
 * (docs/pgo.md). */
#include <getopt.h>
#include <string.h>

#include "cli_prof.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr afdo [OPTIONS] FILE -o OUT.prof\n"
		"An LLVM sample profile (the AutoFDO text format) of one module of the trace,\n"
		"for profile-guided optimization without instrumentation or LBR:\n"
		"  clang -O2 -gline-tables-only -fdebug-info-for-profiling \\\n"
		"        -fprofile-sample-use=OUT.prof ...\n"
		"(llvm-profdata merge --sample OUT.prof -o OUT.afdo makes the binary form.)\n"
		"Counts are exact executions per source line (the hottest instruction of\n"
		"the line), call targets per call site, inlined code nested under its call\n"
		"site. The module needs DWARF line tables.\n\n"
		"Options:\n"
		"  -o, --output OUT       the output file ('-': stdout)\n"
		CLI_OUTPUT_HELP
		"  --module NAME          the module (path or file name; default: the file of\n"
		"                         the first --elf without BASE, else the traced program)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
		"(then OUT covers what was read), the module is not in the trace or has no\n"
		"DWARF.\n");
}

static void afdo_write_error(void *ctx, const char *file, const char *outp, int err)
{
	const struct btr_profile_opts *po = ctx;
	const char *m = po->module ? po->module : "(the program)";
	if (err == -BTR_ERR_NOT_FOUND)
		cli_error("%s: no module %s in the trace", file, m);
	else if (err == -BTR_ERR_NO_DEBUGINFO || err == -BTR_ERR_NOENT)
		cli_error("%s: module %s has no DWARF line tables (compile with -g or -gline-tables-only)", file, m);
	else
		cli_error("%s: %s", outp, btr_errstr(err));
}

int cmd_afdo(int argc, char **argv)
{
	enum { O_MODULE = 1 };
	static const struct option lopts[] = {
		CLI_STREAM_LONGOPTS,
		{ "output", required_argument, NULL, 'o' },
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
		int sr = cli_stream_opt(&cs, "afdo", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'o': outp = optarg; break;
		case O_MODULE: po.module = optarg; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("afdo", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("afdo", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("afdo", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	if (!outp)
		return cli_usage_error("afdo", "missing -o OUT");
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "afdo");
	if (rc != EXIT_OK)
		return rc;
	struct cli_output out;
	if ((rc = cli_output_check(&out, "afdo", outp, 0)) != EXIT_OK)
		return rc;
	if (!po.module && cs.n_elfs && !cs.elfs[0].has_base) {
		const char *b = strrchr(cs.elfs[0].path, '/');
		po.module = b ? b + 1 : cs.elfs[0].path;
	}
	struct btr_analysis *list[2] = { NULL, NULL };
	if (btr_blocks_new(&list[0]) || btr_afdo_new(list[0], &po, &list[1])) {
		btr_analysis_free(list[0]);
		cli_output_discard(&out);
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write_list("afdo", file, &cs, list, 2, &out, "text", afdo_write_error, &po);
}
