/* cli_cmd.h - one declarative table per command: its options, their
 * --help lines and its operands (cli_cmd.c parses argv from it, prints
 * --help from it and checks the operands, so no command writes its own
 * getopt loop; curl's tool_getparam.c / tool_listhelp.c are the model).
 *
 *     static const struct cli_opt opts[] = {
 *             { "output", 'o', CLI_ARG, "  -o, --output OUT       the output file\n", "missing -o OUT" },
 *             CLI_STREAM_OPTS,                 (the stream options and their help here)
 *             CLI_HELP_OPT,
 *             { 0 } };
 *     static const struct cli_cmd cmd = { "flame", "Usage: ...\n", opts, "Exit status: ...\n", 1, 1 };
 *     static int on_opt(void *ctx, int key, char *arg) { switch (key) {...} return EXIT_OK; }
 *     ...
 *     struct cli_stream cs;
 *     int rc = cli_cmd_parse(&cmd, argc, argv, &cs, on_opt, &ctx, &first);
 *     if (rc != EXIT_OK) return rc == CLI_CMD_DONE ? EXIT_OK : rc;
 *     ... argv[first] is the first operand ...
 */
#ifndef BTR_CLI_CMD_H
#define BTR_CLI_CMD_H

#include "cli.h"

enum { CLI_NOARG = 0, CLI_ARG = 1 };

struct cli_opt {
	const char *name;      /* long name; NULL ends the table */
	int key;               /* its short letter, or a code >= 1 (the stream
				* options: CLI_OPT_*); on_opt gets it */
	int has_arg;           /* CLI_ARG: takes a value */
	const char *help;      /* its --help lines, as printed (NULL: none) */
	const char *missing;   /* not NULL: the option is required; the usage
				* error said when it is not given */
	unsigned only;         /* 0: always; else the option is taken only by
				* the subcommands (cli_cmd.sub) of these bits,
				* and shown in every one's --help */
};

/* The stream options (cli_stream.c; handled by the parser, not on_opt)
 * with CLI_STREAM_HELP where they stand in the table. */
#define CLI_STREAM_OPTS                                                        \
	{ "filter", CLI_OPT_FILTER, CLI_ARG, CLI_STREAM_HELP, NULL },          \
	{ "elf", CLI_OPT_ELF, CLI_ARG, NULL, NULL },                           \
	{ "root", CLI_OPT_ROOT, CLI_ARG, NULL, NULL },                         \
	{ "debug-dir", CLI_OPT_DEBUG_DIR, CLI_ARG, NULL, NULL },               \
	{ "pid", CLI_OPT_PID, CLI_ARG, NULL, NULL },                           \
	{ "tid", CLI_OPT_TID, CLI_ARG, NULL, NULL },                           \
	{ "jobs", CLI_OPT_JOBS, CLI_ARG, NULL, NULL },                         \
	{ "progress", CLI_OPT_PROGRESS, CLI_NOARG, NULL, NULL },               \
	{ "no-progress", CLI_OPT_NO_PROGRESS, CLI_NOARG, NULL, NULL }
/* --source-root DIR, for the commands that print source files (annotate,
 * report --html); handled by the parser into cli_stream.src_roots. */
#define CLI_SOURCE_ROOT_OPT                                                    \
	{ "source-root", CLI_OPT_SOURCE_ROOT, CLI_ARG,                         \
	  "  --source-root DIR      also read source files under DIR (repeatable); others\n" \
	  "                         only if the trace file's owner could read them\n", NULL }
#define CLI_HELP_OPT { "help", 'h', CLI_NOARG, "  -h, --help             this help\n", NULL }

struct cli_cmd {
	const char *name;          /* "flame": messages say "btr flame: ..." */
	const char *usage;         /* --help before the options */
	const struct cli_opt *opts;
	const char *epilog;        /* --help after the options (may be NULL) */
	int min_files, max_files;  /* operands (traces): 1, 1 for "FILE"; max -1: any */
	/* The usage errors for too few / too many operands (NULL: "missing
	 * trace FILE" / "one trace FILE expected, got 'X' too"; a "%s" in
	 * @extra_msg is the first operand too many). */
	const char *missing_msg, *extra_msg;
	unsigned sub;              /* the subcommand's bit (cli_opt.only) */
	const char *unknown_msg;   /* NULL: "unknown option" */
	unsigned flags;            /* CLI_CMD_* */
};
enum {
	CLI_CMD_POSIX = 1,   /* options end at the first operand (getopt "+") */
};

/* The key on_opt gets once after every option was read, the operands
 * counted and the required options seen (before the stream options are
 * checked): for checks of options together.  @arg is NULL. */
#define CLI_OPT_END (-1)
/* cli_cmd_parse's return after printing --help. */
#define CLI_CMD_DONE (-1)

/* Called for each option of @cmd's table that is not a stream option
 * (@key from the table, @arg its value or NULL), then with CLI_OPT_END.
 * Returns EXIT_OK, or an exit code after one message (cli_usage_error). */
typedef int (*cli_opt_fn)(void *ctx, int key, char *arg);

/* Parses @argv (argv[0]: the command's name) by @cmd's table: --help
 * prints cli_cmd_help and returns CLI_CMD_DONE; an unknown option, a
 * wrong number of operands ("missing trace FILE", "one trace FILE
 * expected, got 'X' too") or a missing required option is a usage error
 * (EXIT_USAGE after one message).  With @cs (may be NULL for a command
 * without stream options) the stream options fill it and are checked
 * (cli_stream_ready).  *@first is the index of the first operand in
 * @argv.  Returns EXIT_OK, CLI_CMD_DONE, EXIT_USAGE or EXIT_RUNTIME. */
int cli_cmd_parse(const struct cli_cmd *cmd, int argc, char **argv, struct cli_stream *cs, cli_opt_fn on_opt,
		  void *ctx, int *first);

/* Prints @cmd's --help (usage, the options' lines in table order, epilog). */
void cli_cmd_help(const struct cli_cmd *cmd, FILE *f);

/* --format @arg of command @cmd: one of the output formats of the
 * library's analysis @analysis (btr_analysis_formats, the one list).
 * Returns EXIT_OK, or EXIT_USAGE after "unknown format 'X' (LIST)", the
 * list as "a, b or c" (@commas 0) or "a, b, c" (@commas 1). */
int cli_format_check(const char *cmd, const char *analysis, const char *arg, int commas);

/* --format text|json of a command without an analysis: *@json becomes 1
 * for "json", 0 for "text" (the last --format wins).  Returns EXIT_OK, or
 * EXIT_USAGE after the usage error @msg (a format with one %s: @arg). */
int cli_format_text_json(const char *cmd, const char *arg, int *json, const char *msg);

#endif
