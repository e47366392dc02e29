/* cmd_report.c - `btr report FILE`: what a trace says about the run.
 *
 * Runs the report analysis (lib/analysis/report.c) over the trace through
 * the one driver (btr_analysis_run) and writes it as text or one JSON
 * object (docs/report.md, docs/contract.md); --html runs it with the view
 * analyses (report_html.c).
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "btr/report.h"
#include "btr/analysis.h"
#include "btr/stream.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr report [OPTIONS] FILE\n"
		"Summarize a trace (.btr or perf.data): executed instructions, branches by\n"
		"class and kind, threads, modules, gaps, hottest functions and basic blocks,\n"
		"and how the process ended.\n\n"
		"Options:\n"
		"  --format text|json     output format (default text)\n"
		"  --top N                entries in the top lists (default 10)\n"
		"  --html DIR             write DIR/index.html: one self-contained page with\n"
		"                         the summary, threads, hot functions and blocks, each\n"
		"                         hot function's CFG heat map and annotated source, and\n"
		"                         coverage per file (docs/report.md)\n"
		"  --diff B               with --html: colour the CFGs by the difference to B\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 ok; 2 usage error; 3 the trace cannot be read, or data was\n"
		"lost (a truncated or corrupt trace, or a process whose trace the recorder\n"
		"could not write: the report covers what was read, one line per cause).\n");
}


int cmd_report(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "top", required_argument, NULL, 't' },
		{ "html", required_argument, NULL, 'H' },
		{ "diff", required_argument, NULL, 'D' },
		CLI_STREAM_LONGOPTS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int json = 0;
	uint64_t top = 10;
	const char *html = NULL, *diff = NULL;   /* --html DIR, --diff B (report_html.c) */
	struct cli_stream cs;
	int c;

	cli_stream_init(&cs);
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		int sr = cli_stream_opt(&cs, "report", c, optarg);
		if (sr < 0)
			return EXIT_USAGE;
		if (sr > 0)
			continue;
		switch (c) {
		case 'f':
			if (!strcmp(optarg, "json"))
				json = 1;
			else if (!strcmp(optarg, "text"))
				json = 0;
			else
				return cli_usage_error("report", "unknown format '%s' (text or json)", optarg);
			break;
		case 't':
			if (cli_parse_u64(optarg, &top) < 0 || top == 0 || top > 100000)
				return cli_usage_error("report", "bad --top '%s' (1..100000)", optarg);
			break;
		case 'H':
			html = optarg;
			break;
		case 'D':
			diff = optarg;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cli_usage_error("report", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("report", "missing trace FILE");
	if (optind + 1 < argc)
		return cli_usage_error("report", "one trace FILE expected, got '%s' too", argv[optind + 1]);
	const char *file = argv[optind];
	int crc = cli_stream_ready(&cs, "report");
	if (crc != EXIT_OK)
		return crc;
	if (diff && !html)
		return cli_usage_error("report", "--diff needs --html DIR");
	if (html)
		return cli_report_html(file, &cs, html, diff, (unsigned)top);
	struct btr_report_opts ro = { .sz = sizeof(ro), .top = (unsigned)top };
	struct btr_analysis *rep;
	int rc = btr_report_analysis_new(&ro, &rep);
	if (rc == 0)
		rc = btr_report_analysis_set_name(rep, file);
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
