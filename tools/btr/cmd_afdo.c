/* cmd_afdo.c - `btr afdo FILE -o OUT.prof`: an LLVM sample profile
 * (AutoFDO) of the traced program for clang -fprofile-sample-use
 * (docs/pgo.md). */
#include <string.h>

#include "cli_prof.h"

enum { O_MODULE = 1 };

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       the output file ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	{ "module", O_MODULE, CLI_ARG,
	  "  --module NAME          the module (path or file name; default: the file of\n"
	  "                         the first --elf without BASE, else the traced program)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"afdo",
	"Usage: btr afdo [OPTIONS] FILE -o OUT.prof\n"
	"An LLVM sample profile (the AutoFDO text format) of one module of the trace,\n"
	"for profile-guided optimization without instrumentation or LBR:\n"
	"  clang -O2 -gline-tables-only -fdebug-info-for-profiling \\\n"
	"        -fprofile-sample-use=OUT.prof ...\n"
	"(llvm-profdata merge --sample OUT.prof -o OUT.afdo makes the binary form.)\n"
	"Counts are exact executions per source line (the hottest instruction of\n"
	"the line), call targets per call site, inlined code nested under its call\n"
	"site. The module needs DWARF line tables.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
	"(then OUT covers what was read), the module is not in the trace or has no\n"
	"DWARF.\n",
	1, 1, NULL, NULL,
};

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

static int on_opt(void *ctx, int key, char *arg)
{
	struct cli_prof_module *x = ctx;
	if (key == 'o')
		x->outp = arg;
	else if (key == O_MODULE)
		x->po.module = arg;
	return EXIT_OK;
}

/* blocks first: afdo reads its per-instruction counts */
static int make(const struct btr_profile_opts *po, struct btr_analysis **list, size_t *n)
{
	int rc = btr_blocks_new(&list[0]);
	*n = rc == 0;
	if (rc == 0 && (rc = btr_afdo_new(list[0], po, &list[1])) == 0)
		*n = 2;
	return rc;
}

int cmd_afdo(int argc, char **argv)
{
	return cli_prof_module_cmd(&cmd, argc, argv, on_opt, make, "text", afdo_write_error);
}
