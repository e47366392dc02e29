/* cli_prof.c - helpers of the profile commands (cli_prof.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli_prof.h"

int cli_out_open(struct cli_out *o, const char *path)
{
	memset(o, 0, sizeof(*o));
	o->path = path;
	if (!strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(o->tmp)) {
		cli_error("%s: path too long", path);
		return -1;
	}
	o->f = fopen(o->tmp, "wb");
	if (!o->f) {
		cli_error("%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int cli_out_close(struct cli_out *o, int ok)
{
	if (!o->f)
		return -1;
	if (o->f == stdout) {
		if (fflush(stdout) || ferror(stdout)) {
			/* Said once: the caller already reported a failed write. */
			if (ok)
				cli_error("writing the output: %s", strerror(errno ? errno : EIO));
			return -1;
		}
		return ok ? 0 : -1;
	}
	int bad = ferror(o->f) || fflush(o->f) != 0;
	int err = errno;
	bad |= fclose(o->f) != 0;
	o->f = NULL;
	if (bad || !ok) {
		unlink(o->tmp);
		if (bad && ok)
			cli_error("%s: write error: %s", o->path, strerror(err ? err : EIO));
		return -1;
	}
	if (rename(o->tmp, o->path)) {
		cli_error("%s: %s", o->path, strerror(errno));
		unlink(o->tmp);
		return -1;
	}
	return 0;
}

int cli_prof_run(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis *const *list,
		 size_t n, int *lost)
{
	struct btr_stream_loss losses[CLI_MAX_LOSSES];
	struct btr_analysis_run_info info = { .sz = sizeof(info), .losses = losses, .max_losses = CLI_MAX_LOSSES };
	int rc = btr_analysis_run(file, &cs->so, list, n, &info);
	*lost = info.lost || rc < 0;
	if (rc < 0 && !info.status) {
		/* nothing usable was read, or an analysis failed */
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	if (info.lost)
		cli_losses_print(file, cmd, losses, CLI_MAX_LOSSES, info.n_losses);
	else if (rc < 0)
		cli_warn("%s: %s (the %s output covers what was read)", file, btr_errstr(info.status), cmd);
	return EXIT_OK;
}

int cli_prof_run_write(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis *a,
		       const char *outp, const char *format, cli_write_error_fn on_error, void *ctx)
{
	int lost;
	int rc = cli_prof_run(cmd, file, cs, &a, 1, &lost);
	if (rc != EXIT_OK) {
		btr_analysis_free(a);
		return rc;
	}
	struct cli_out o;
	if (cli_out_open(&o, outp)) {
		btr_analysis_free(a);
		return EXIT_RUNTIME;
	}
	int wr = btr_analysis_write(a, o.f, format);
	btr_analysis_free(a);
	if (wr && on_error)
		on_error(ctx, file, outp, wr);
	else if (wr)
		cli_error("%s: %s", outp, wr == -BTR_ERR_UNSUPPORTED ? "the trace has no timestamps (use --weight insns)"
								   : btr_errstr(wr));
	if (cli_out_close(&o, wr == 0) || wr)
		return EXIT_RUNTIME;
	return lost ? EXIT_RUNTIME : EXIT_OK;
}

int cli_ends_with(const char *path, const char *suffix)
{
	size_t a = strlen(path), b = strlen(suffix);
	return a >= b && !strcmp(path + a - b, suffix);
}
