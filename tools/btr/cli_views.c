/* cli_views.c - shared by the view commands (cov, annotate, cfg, diff):
 * one pass of a blocks analysis (plus others) over a trace, and writing
 * an output file completely or not at all. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int cli_write_file(const char *path, int (*fn)(void *ctx, FILE *f), void *ctx)
{
	if (!strcmp(path, "-")) {
		int rc = fn(ctx, stdout);
		if (rc < 0 || fflush(stdout) != 0) {
			cli_error("writing to stdout: %s", btr_errstr(rc < 0 ? rc : -BTR_ERR_IO));
			return EXIT_RUNTIME;
		}
		return EXIT_OK;
	}
	size_t len = strlen(path) + 16;
	char *tmp = malloc(len);
	if (!tmp) {
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	snprintf(tmp, len, "%s.tmp%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "wb");
	if (!f) {
		cli_error("%s: cannot create: %m", path);
		free(tmp);
		return EXIT_RUNTIME;
	}
	int rc = fn(ctx, f);
	int cerr = fclose(f);
	if (rc < 0 || cerr != 0) {
		unlink(tmp);
		cli_error("%s: %s", path, btr_errstr(rc < 0 ? rc : -BTR_ERR_IO));
		free(tmp);
		return EXIT_RUNTIME;
	}
	if (rename(tmp, path) != 0) {
		cli_error("%s: cannot rename into place: %m", path);
		unlink(tmp);
		free(tmp);
		return EXIT_RUNTIME;
	}
	free(tmp);
	return EXIT_OK;
}
