/* cmd_flame.c - `btr flame FILE -o OUT`: folded stacks, speedscope JSON or
 * an interactive SVG flame graph (docs/flame.md). */
#include <string.h>

#include "cli_prof.h"

enum { O_FORMAT = 1, O_WEIGHT, O_TITLE };

static const struct cli_opt opts[] = {
	{ "output", 'o', CLI_ARG, "  -o, --output OUT       the output file ('-': stdout)\n" CLI_OUTPUT_HELP, "missing -o OUT" },
	{ "format", O_FORMAT, CLI_ARG, "  --format F             folded, speedscope or svg\n", NULL },
	{ "weight", O_WEIGHT, CLI_ARG,
	  "  --weight W             insns (default: instructions, or branches when the\n"
	  "                         trace has no instruction counts) or time (TSC ticks)\n", NULL },
	{ "title", O_TITLE, CLI_ARG, "  --title T              title of the SVG / speedscope file\n", NULL },
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"flame",
	"Usage: btr flame [OPTIONS] FILE -o OUT\n"
	"Flame graph of a trace from its call stacks (rebuilt from calls and returns).\n"
	"The format follows OUT's name unless --format says:\n"
	"  OUT.folded (or '-')    folded stacks, one 'outer;...;inner WEIGHT' per line\n"
	"                         (a ';' or control character in a name becomes '?')\n"
	"  OUT.speedscope.json    speedscope's file format, evented, one profile per thread\n"
	"  OUT.svg                an interactive SVG flame graph (hover, click to zoom)\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read or was damaged\n"
	"(then OUT covers what was read).\n",
	1, 1, NULL,
};

struct args {
	const char *outp, *format, *title;
	struct btr_profile_opts po;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	switch (key) {
	case 'o': x->outp = arg; break;
	case O_FORMAT:
		if (cli_format_check("flame", "flame", arg, 1))
			return EXIT_USAGE;
		x->format = arg;
		break;
	case O_WEIGHT:
		return cli_prof_weight("flame", arg, &x->po);
	case O_TITLE: x->title = arg; break;
	}
	return EXIT_OK;
}

int cmd_flame(int argc, char **argv)
{
	struct cli_stream cs;
	struct args x = { .po = { .sz = sizeof(x.po) } };
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *outp = x.outp, *format = x.format, *title = x.title;
	struct btr_profile_opts po = x.po;
	if (!format) {
		if (cli_ends_with(outp, ".svg"))
			format = "svg";
		else if (cli_ends_with(outp, ".json"))
			format = "speedscope";
		else
			format = "folded";
	}
	const char *file = argv[first];
	struct cli_output out;
	if ((rc = cli_output_check(&out, "flame", outp, 0)) != EXIT_OK)
		return rc;
	po.events = !strcmp(format, "speedscope");
	struct btr_analysis *a;
	if (btr_flame_new(&po, &a)) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	if (btr_flame_set_title(a, title ? title : file)) {
		btr_analysis_free(a);
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write("flame", file, &cs, a, &out, format, NULL, NULL);
}
