/* cli_prof.c - helpers of the profile commands (cli_prof.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli_prof.h"
#include "cli_cmd.h"

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
		       struct cli_output *out, const char *format, cli_write_error_fn on_error, void *ctx)
{
	return cli_prof_run_write_list(cmd, file, cs, &a, 1, out, format, on_error, ctx);
}

static void free_list(struct btr_analysis **list, size_t n)
{
	for (size_t i = n; i-- > 0;)
		btr_analysis_free(list[i]);
}

int cli_prof_run_write_list(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis **list,
			    size_t n, struct cli_output *out, const char *format, cli_write_error_fn on_error,
			    void *ctx)
{
	int lost;
	int rc = cli_prof_run(cmd, file, cs, list, n, &lost);
	if (rc != EXIT_OK) {
		free_list(list, n);
		cli_output_discard(out);
		return rc;
	}
	FILE *f = cli_output_open(out);
	if (!f) {
		free_list(list, n);
		cli_output_discard(out);
		return EXIT_RUNTIME;
	}
	errno = 0;
	int wr = btr_analysis_write(list[n - 1], f, format);
	int e = errno;
	free_list(list, n);
	const char *outp = out->kind == CLI_OUTPUT_STDOUT ? "-" : out->name;
	if (wr && ferror(f))
		cli_output_failed(out, wr, e);   /* the output failed, not the analysis */
	else if (wr && on_error)
		on_error(ctx, file, outp, wr);
	else if (wr)
		cli_error("%s: %s", outp, wr == -BTR_ERR_UNSUPPORTED ? "the trace has no timestamps (use --weight insns)"
								   : btr_errstr(wr));
	if (cli_output_close(out, wr == 0) || wr)
		return EXIT_RUNTIME;
	return lost ? EXIT_RUNTIME : EXIT_OK;
}

int cli_ends_with(const char *path, const char *suffix)
{
	size_t a = strlen(path), b = strlen(suffix);
	return a >= b && !strcmp(path + a - b, suffix);
}

int cli_prof_weight(const char *cmd, const char *arg, struct btr_profile_opts *po)
{
	if (!strcmp(arg, "insns"))
		po->weight = BTR_PROFILE_INSNS;
	else if (!strcmp(arg, "time"))
		po->weight = BTR_PROFILE_TIME;
	else
		return cli_usage_error(cmd, "unknown weight '%s' (insns, time)", arg);
	return EXIT_OK;
}

void cli_prof_default_module(const struct cli_stream *cs, struct btr_profile_opts *po)
{
	if (!po->module && cs->n_elfs && !cs->elfs[0].has_base) {
		/* --elf PROGRAM names the module to profile */
		const char *b = strrchr(cs->elfs[0].path, '/');
		po->module = b ? b + 1 : cs->elfs[0].path;
	}
}

int cli_prof_module_cmd(const struct cli_cmd *cmd, int argc, char **argv,
			int (*on_opt)(void *ctx, int key, char *arg),
			int (*make)(const struct btr_profile_opts *po, struct btr_analysis **list, size_t *n),
			const char *format, cli_write_error_fn on_error)
{
	struct cli_prof_module x = { NULL, { .sz = sizeof(x.po) } };
	struct cli_stream cs;
	int first;
	int rc = cli_cmd_parse(cmd, argc, argv, &cs, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	struct cli_output out;
	if ((rc = cli_output_check(&out, cmd->name, x.outp, 0)) != EXIT_OK)
		return rc;
	cli_prof_default_module(&cs, &x.po);
	struct btr_analysis *list[4] = { NULL };
	size_t n = 0;
	if (make(&x.po, list, &n) < 0 || !n) {
		for (size_t i = n; i-- > 0;)
			btr_analysis_free(list[i]);
		cli_output_discard(&out);
		cli_error("out of memory");
		return EXIT_RUNTIME;
	}
	return cli_prof_run_write_list(cmd->name, argv[first], &cs, list, n, &out, format, on_error, &x.po);
}
