/* cmd_report.c - `btr report FILE`: what a trace says about the run.
 *
 * Runs the report analysis (lib/analysis/report.c) over the trace through
 * the one driver (btr_analysis_run) and writes it as text or one JSON
 * object (docs/report.md, docs/contract.md); --html runs it with the view
 * analyses (report_html.c).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "btr/report.h"
#include "btr/analysis.h"
#include "btr/stream.h"
#include "cli_cmd.h"

enum { O_FORMAT = 256, O_TOP, O_HTML, O_DIFF };

static const struct cli_opt opts[] = {
	{ "format", O_FORMAT, CLI_ARG, "  --format text|json     output format (default text)\n", NULL },
	{ "top", O_TOP, CLI_ARG, "  --top N                entries in the top lists (default 10)\n", NULL },
	{ "html", O_HTML, CLI_ARG,
	  "  --html DIR             write DIR/index.html: one self-contained page with\n"
	  "                         the summary, threads, hot functions and blocks, each\n"
	  "                         hot function's CFG heat map and annotated source, and\n"
	  "                         coverage per file (docs/report.md)\n", NULL },
	{ "diff", O_DIFF, CLI_ARG, "  --diff B               with --html: colour the CFGs by the difference to B\n", NULL },
	CLI_SOURCE_ROOT_OPT,
	CLI_STREAM_OPTS,
	CLI_HELP_OPT,
	{ 0 },
};

static const struct cli_cmd cmd = {
	"report",
	"Usage: btr report [OPTIONS] FILE\n"
	"Summarize a trace (.btr or perf.data): executed instructions, branches by\n"
	"class and kind, threads, modules, gaps, hottest functions and basic blocks,\n"
	"and how the process ended.\n\n"
	"Options:\n",
	opts,
	"\nExit status: 0 ok; 2 usage error; 3 the trace cannot be read, or data was\n"
	"lost (a truncated or corrupt trace, or a process whose trace the recorder\n"
	"could not write: the report covers what was read, one line per cause).\n",
	1, 1, NULL,
};



struct args {
	int json;
	uint64_t top;
	const char *html, *diff;   /* --html DIR, --diff B (report_html.c) */
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	switch (key) {
	case O_FORMAT:
		if (cli_format_check("report", "report", arg, 0))
			return EXIT_USAGE;
		x->json = !strcmp(arg, "json");
		break;
	case O_TOP:
		if (cli_parse_u64(arg, &x->top) < 0 || x->top == 0 || x->top > 100000)
			return cli_usage_error("report", "bad --top '%s' (1..100000)", arg);
		break;
	case O_HTML: x->html = arg; break;
	case O_DIFF: x->diff = arg; break;
	}
	return EXIT_OK;
}

int cmd_report(int argc, char **argv)
{
	struct args x = { 0, 10, NULL, NULL };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	const char *file = argv[first];
	int json = x.json;
	uint64_t top = x.top;
	const char *html = x.html, *diff = x.diff;
	if (diff && !html)
		return cli_usage_error("report", "--diff needs --html DIR");
	if (html)
		return cli_report_html(file, &cs, html, diff, (unsigned)top);
	struct btr_report_opts ro = { .sz = sizeof(ro), .top = (unsigned)top };
	struct btr_analysis *rep = NULL;
	rc = btr_report_analysis_new(&ro, &rep);   /* (it names the trace by the path it runs on) */
	if (rc < 0) {
		btr_analysis_free(rep);
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	struct btr_stream_loss losses[CLI_MAX_LOSSES];
	struct btr_analysis_run_info info = { .sz = sizeof(info), .losses = losses, .max_losses = CLI_MAX_LOSSES };
	int run = btr_analysis_run(file, &cs.so, &rep, 1, &info);
	if (run > 0 || (run < 0 && !info.status) || !btr_report_analysis_get(rep)) {
		/* nothing could be read, or the report failed (out of memory) */
		btr_analysis_free(rep);
		cli_error("%s: %s", file, btr_errstr(run < 0 && !info.status ? run : -BTR_ERR_NOMEM));
		return EXIT_RUNTIME;
	}
	rc = btr_analysis_write(rep, stdout, json ? "json" : "text");
	btr_analysis_free(rep);
	if (rc < 0) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (fflush(stdout) != 0) {
		cli_error("writing the report: output error");
		return EXIT_RUNTIME;
	}
	int lost = info.lost;
	if (info.stats.modules_missing && !json && run >= 0 && !lost)
		fprintf(stderr, "btr: note: %u recorded module(s) had no file here; use --elf, --root or --debug-dir\n",
			info.stats.modules_missing);
	if (run < 0 || lost) {
		/* The report covers what could be read; data was lost, so the
		 * run as a whole is a runtime error (exit 3, one line per cause). */
		if (lost)
			cli_losses_print(file, "report", losses, CLI_MAX_LOSSES, info.n_losses);
		else
			cli_error("warning: %s: %s; the report covers only the data before it", file, btr_errstr(run));
		return EXIT_RUNTIME;
	}
	return EXIT_OK;
}
