/* cmd_script.c - `btr script FILE`: one branch per line, in perf script's
 * spirit (docs/script.md).  Options only: the lines are the script
 * analysis' (lib/analysis/script.c, btr/script.h), run like every view
 * (cli_views_run); `--fields [ip,]brstack` prints the LBR samples as
 * perf 6.1's `perf script -F [ip,]brstack` does (btr_script_brstack).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/script.h"
#include "cli_cmd.h"

static const struct cli_opt opts[] = {
	{ "fields", 'F', CLI_ARG,
	  "  -F, --fields LIST      fields and order (comma list of tid, time, addr, sym,\n"
	  "                         kind, flags, insns; default tid,time,addr,sym,kind,flags);\n"
	  "                         'brstack' or 'ip,brstack': print LBR samples exactly\n"
	  "                         as `perf script -F [ip,]brstack` of perf 6.1 does\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"script",
	"Usage: btr script [OPTIONS] FILE\n"
	"Print the branches of a trace (.btr or perf.data), one per line:\n\n"
	"  PID/TID TIME 0xFROM -> 0xTO SYM+OFF -> SYM+OFF KIND FLAGS\n\n"
	"TIME is the TSC (or perf clock) value, '-' when unknown; a symbol is\n"
	"'[unknown]' outside every known module; FLAGS is '-' or a comma list of\n"
	"P (predicted), M (mispredicted), N (not taken), A (transaction abort),\n"
	"cyc=N (LBR cycles), "
	"insns=N (instructions since the previous branch of the thread),\n"
	"k (kernel source).  Gaps in the data are '[gap ...]' lines; a snapshot\n"
	"window (btr record -b qemu --snapshot) begins with a '[window ...]' line.\n"
	"See docs/script.md.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or data was lost\n"
	"(everything before the damage is printed).\n",
	1, 1, NULL, NULL,
};


/* --fields: perf's mode ([ip,]brstack) or the analysis' columns (checked
 * by btr_script_new). */
static int parse_mode(const char *arg, int *brstack, int *with_ip)
{
	char buf[256];
	int other = 0;
	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	*brstack = *with_ip = 0;
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "brstack"))
			*brstack = 1;
		else if (!strcmp(t, "ip"))
			*with_ip = 1;
		else
			other = 1;
	}
	if (*brstack && other)
		return -1;   /* perf mode prints perf's fields only */
	if (!*brstack && *with_ip)
		return -1;
	return 0;
}

struct args {
	struct cli_stream *cs;
	const char *fields;
	int brstack, with_ip;
	struct btr_analysis *a;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	if (key == 'F') {
		struct btr_script_opts so = { .sz = sizeof(so), .fields = arg, .out = stdout };
		struct btr_analysis *a = NULL;
		if (parse_mode(arg, &x->brstack, &x->with_ip) < 0 ||
		    (!x->brstack && btr_script_new(&so, &a) < 0))
			return cli_usage_error("script",
					       "bad --fields '%s' (tid,time,addr,sym,kind,flags,insns; or [ip,]brstack)", arg);
		btr_analysis_free(a);
		x->fields = arg;
	}
	if (key == CLI_OPT_END) {
		if (x->brstack && x->cs->filter_expr)
			return cli_usage_error("script",
					       "--filter does not apply to --fields brstack (raw LBR samples)");
		x->cs->live_stdout = 1;   /* branches are printed as they are read */
	}
	return EXIT_OK;
}

static int run_brstack(const char *file, const struct args *x)
{
	struct btr_script_brstack_opts o = { .sz = sizeof(o), .with_ip = x->with_ip, .pid = x->cs->so.pid,
					     .tid = x->cs->so.tid };
	struct btr_script_brstack_info info = { .sz = sizeof(info) };
	int rc = btr_script_brstack(file, &o, stdout, &info);
	if (fflush(stdout) != 0 || info.output_error) {
		cli_error("writing the output: output error");
		return EXIT_RUNTIME;
	}
	if (rc < 0) {
		if (info.at_offset)
			cli_error("%s: %s at offset 0x%" PRIx64, file, btr_errstr(rc), info.offset);
		else
			cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (info.damaged) {
		cli_error("warning: %s: damaged chunk(s) skipped; their samples are missing", file);
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int cmd_script(int argc, char **argv)
{
	struct cli_stream cs;
	struct args x = { .cs = &cs };
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	if (x.brstack)
		return run_brstack(file, &x);

	struct btr_script_opts so = { .sz = sizeof(so), .fields = x.fields, .out = stdout };
	struct btr_analysis *a;
	if ((rc = btr_script_new(&so, &a)) < 0) {
		cli_error("%s", btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	rc = cli_views_run("script output", file, &cs, &a, 1);
	if (rc == EXIT_OK || rc == -EXIT_RUNTIME) {
		int w = btr_analysis_write(a, stdout, "text");
		if (w < 0 || fflush(stdout) != 0) {
			cli_error("writing the output: output error");
			rc = EXIT_RUNTIME;
		}
	} else if (fflush(stdout) != 0) {
		cli_error("writing the output: output error");
	}
	btr_analysis_free(a);
	return rc < 0 ? -rc : rc;
}
