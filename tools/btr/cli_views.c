/* cli_views.c - shared by the view commands (cov, annotate, cfg, diff):
 * one pass of a blocks analysis (plus others) over a trace (their output
 * files are written by cli_output.c). */
#include "cli.h"


int cli_views_run(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis **list,
		  size_t n)
{
	struct btr_stream_loss losses[CLI_MAX_LOSSES];
	struct btr_analysis_run_info info = { .sz = sizeof(info), .losses = losses, .max_losses = CLI_MAX_LOSSES };
	int rc = btr_analysis_run(file, &cs->so, list, n, &info);
	if (rc < 0 && info.sz == 0) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (rc < 0 && !info.status) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (info.lost) {
		cli_losses_print(file, cmd, losses, CLI_MAX_LOSSES, info.n_losses);
		return -EXIT_RUNTIME;   /* results usable, exit 3 at the end */
	}
	if (rc < 0) {
		cli_warn("%s: %s; the %s covers only the data that could be read", file, btr_errstr(rc), cmd);
		return -EXIT_RUNTIME;
	}
	return EXIT_OK;
}
