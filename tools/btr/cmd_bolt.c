/* cmd_bolt.c - `btr bolt FILE -o OUT.fdata`: BOLT's branch profile of the
 * traced program (docs/bolt.md). */
#include <string.h>

#include "cli_prof.h"

enum { O_PA = 1, O_MODULE };

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       the output file ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	{ "pre-aggregated", O_PA, CLI_NOARG,
	  "  --pre-aggregated       write the pre-aggregated format instead (llvm-bolt -pa):\n"
	  "                         B (branch) and F (fall-through range) lines with\n"
	  "                         offsets from the module's load base (from PT: ranges\n"
	  "                         end at every branch, docs/bolt.md)\n", NULL },
	{ "module", O_MODULE, CLI_ARG,
	  "  --module NAME          the module (path or file name; default: the file of\n"
	  "                         the first --elf without BASE, else the traced program)\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"bolt",
	"Usage: btr bolt [OPTIONS] FILE -o OUT.fdata\n"
	"BOLT's branch profile of one module of the trace, in the fdata format that\n"
	"perf2bolt writes (taken branches and fall-through edges as function+offset,\n"
	"counts, mispredictions where the trace has them), for\n"
	"  llvm-bolt PROGRAM -o PROGRAM.bolt -data OUT.fdata ...\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
	"(then OUT covers what was read), or the module is not in the trace.\n",
	1, 1, NULL,
};

/* A failed write: the module asked for is not in the trace, or the output. */
static void bolt_write_error(void *ctx, const char *file, const char *outp, int err)
{
	const struct btr_profile_opts *po = ctx;
	if (err == -BTR_ERR_NOT_FOUND)
		cli_error("%s: no module %s in the trace", file, po->module ? po->module : "(the program)");
	else
		cli_error("%s: %s", outp, btr_errstr(err));
}

static int on_opt(void *ctx, int key, char *arg)
{
	struct cli_prof_module *x = ctx;
	switch (key) {
	case 'o': x->outp = arg; break;
	case O_PA: x->po.pre_aggregated = 1; break;
	case O_MODULE: x->po.module = arg; break;
	}
	return EXIT_OK;
}

static int make(const struct btr_profile_opts *po, struct btr_analysis **list, size_t *n)
{
	int rc = btr_bolt_new(po, &list[0]);
	*n = rc == 0;
	return rc;
}

int cmd_bolt(int argc, char **argv)
{
	return cli_prof_module_cmd(&cmd, argc, argv, on_opt, make, "fdata", bolt_write_error);
}
