/* cli_prof.h - shared by the profile commands (callgraph, flame, timeline,
 * bolt, pprof, merge): one
 * pass of analyses over a trace with the CLI's error conventions. */
#ifndef BTR_CLI_PROF_H
#define BTR_CLI_PROF_H

#include <stdio.h>
#include "btr/btr.h"
#include "cli.h"
#include "cli_cmd.h"

/* Runs @list (@n analyses) over trace @file with the stream options of
 * @cs.  Returns EXIT_OK, or EXIT_RUNTIME after printing one line naming
 * the file and cause.  *@lost is set when the trace was damaged (the
 * results then cover what was read; the caller writes them and exits
 * EXIT_RUNTIME). */
int cli_prof_run(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis *const *list,
		 size_t n, int *lost);

/* Prints the one error line for a failed btr_analysis_write (@err < 0)
 * of trace @file into @outp (cli_prof_run_write's @on_error). */
typedef void (*cli_write_error_fn)(void *ctx, const char *file, const char *outp, int err);

/* The common profile command: runs analysis @a over @file (cli_prof_run)
 * and writes it in @format to @out (checked by cli_output_check before),
 * so a failed write leaves the target as it was.  A write error prints one line through
 * @on_error, or, if NULL, "OUTP: cause" (for -BTR_ERR_UNSUPPORTED: the
 * trace has no timestamps).  Frees @a.  Returns EXIT_OK, or EXIT_RUNTIME
 * (also when the trace was damaged: the output then covers what was
 * read). */
int cli_prof_run_write(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis *a,
		       struct cli_output *out, const char *format, cli_write_error_fn on_error, void *ctx);

/* --weight W of the profile commands: insns or time into @po->weight.
 * Returns EXIT_OK or EXIT_USAGE after one message. */
int cli_prof_weight(const char *cmd, const char *arg, struct btr_profile_opts *po);

/* The same for an analysis that needs others before it in the run (cov
 * and afdo over blocks): runs @list (@n analyses), writes the last one,
 * frees them all (last first). */
int cli_prof_run_write_list(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis **list,
			    size_t n, struct cli_output *out, const char *format, cli_write_error_fn on_error,
			    void *ctx);

/* --module's default (bolt, afdo): the file name of the first --elf
 * without BASE, if there is one and --module was not given. */
void cli_prof_default_module(const struct cli_stream *cs, struct btr_profile_opts *po);

/* The commands that write one module's profile (bolt, afdo): their
 * options go to a struct cli_prof_module; cli_prof_module_cmd parses
 * @cmd with @on_opt, checks -o before any work, takes the module from the
 * first --elf without BASE when --module is not given, builds the
 * analyses with @make (@list of up to 4, the one to write last, *@n of
 * them) and runs and writes them (cli_prof_run_write_list). */
struct cli_cmd;
struct cli_prof_module {
	const char *outp;
	struct btr_profile_opts po;
};
int cli_prof_module_cmd(const struct cli_cmd *cmd, int argc, char **argv,
			int (*on_opt)(void *ctx, int key, char *arg),
			int (*make)(const struct btr_profile_opts *po, struct btr_analysis **list, size_t *n),
			const char *format, cli_write_error_fn on_error);

/* The file's extension test: does @path end with @suffix? */
int cli_ends_with(const char *path, const char *suffix);

#endif
