/* cli_views.c - shared by the view commands (cov, annotate, cfg, diff):
 * one pass of a blocks analysis (plus others) over a trace (their output
 * files are written by cli_output.c). */
#include "cli.h"


int cli_views_run(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis **list,
		  size_t n)
{
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	int rc = btr_analysis_run(file, &cs->so, list, n, &info);
	if (rc < 0 && info.sz == 0) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (rc < 0 && !info.status) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (rc < 0 || info.lost) {
		cli_warn("%s: %s; the %s covers only the data that could be read", file,
			  btr_errstr(rc < 0 ? rc : -BTR_ERR_CHECKSUM), cmd);
		return -EXIT_RUNTIME;   /* results usable, exit 3 at the end */
	}
	return EXIT_OK;
}
