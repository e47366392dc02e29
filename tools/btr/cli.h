/* cli.h - shared by the btr subcommands.  The CLI uses only the public API. */
#ifndef BTR_CLI_H
#define BTR_CLI_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include "btr/btr.h"

/* Exit codes (docs/contract.md). */
enum {
	EXIT_OK = 0,
	EXIT_FOUND = 1,    /* a check found something */
	EXIT_USAGE = 2,    /* usage error */
	EXIT_RUNTIME = 3,  /* runtime error: one line on stderr naming file or cause */
};

/* Prints "btr: <message>\n" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Keeps a warning ("TRACE: truncated input; ... covers what was read")
 * until the command ends: printed then as "btr: warning: <message>", or
 * appended in parentheses to the command's error line if it fails, so
 * that a command never prints more than one line for one cause.  The
 * same message given twice is kept once. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "btr <cmd>: <message>\nTry 'btr <cmd> --help'.\n" and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


/* Parses a number (decimal, or 0x hex).  Returns 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);
/* Parses a size: a decimal number with an optional K, M or G (KiB, MiB,
 * GiB: x 1024^n).  Returns 0 or -1. */
int cli_parse_size(const char *s, uint64_t *out);

/* Options every command that reads a trace shares: --filter, --elf,
 * --root, --debug-dir, --pid, --tid, --progress (cli_stream.c).  A
 * command lists them in its option table with CLI_STREAM_OPTS
 * (cli_cmd.h); cli_cmd_parse hands them to cli_stream_opt and ends with
 * cli_stream_ready, after which cs.so is ready for btr_analysis_run.
 *
 * The option values are the short codes below (>= 0x1000, so they never
 * clash with a command's own letters); CLI_STREAM_HELP is their --help text. */
#define CLI_STREAM_MAX_ELFS 64
#define CLI_STREAM_MAX_DIRS 16
enum { CLI_OPT_FILTER = 0x1000, CLI_OPT_ELF, CLI_OPT_ROOT, CLI_OPT_DEBUG_DIR, CLI_OPT_PID, CLI_OPT_TID,
       CLI_OPT_PROGRESS, CLI_OPT_NO_PROGRESS, CLI_OPT_SOURCE_ROOT };
/* --jobs is also -j: its code is the letter (no command uses it for another) */
#define CLI_OPT_JOBS 'j'
#define CLI_STREAM_HELP                                                        \
	"  --filter EXPR          only branches matching EXPR (LBR_SELECT classes and\n" \
	"                         kinds: jcc,near_ret,user,...; see docs/branch-kinds.md)\n" \
	"  --pid PID              only process PID\n"                          \
	"  --tid TID              only thread TID\n"                           \
	"  --elf FILE[:BASE]      use ELF FILE: at load bias BASE, or (without BASE) for\n" \
	"                         the recorded module with the same build-id or name\n" \
	"  --root DIR             look for recorded module paths under DIR first\n" \
	"  --debug-dir DIR        look for modules in DIR by build-id and by name\n" \
	"  -j, --jobs N           decode in N threads (the trace's threads, long ones cut\n" \
	"                         at PSBs); the output is the same (default 1)\n" \
	"  --no-progress          no progress line on stderr (default: shown while the\n" \
	"                         trace is read when stderr is a terminal; BTR_PROGRESS=0\n" \
	"                         or 1 sets the default); --progress: always\n"

struct cli_stream {
	struct btr_stream_opts so;   /* ready after cli_stream_ready (callbacks unset) */
	struct btr_filter filter;
	const char *filter_expr;
	struct btr_stream_elf elfs[CLI_STREAM_MAX_ELFS];
	unsigned n_elfs;
	const char *dirs[CLI_STREAM_MAX_DIRS + 1];
	unsigned n_dirs;
	const char *src_roots[CLI_STREAM_MAX_DIRS + 1];   /* --source-root DIR (CLI_SOURCE_ROOT_OPT) */
	unsigned n_src_roots;
	/* Set before cli_stream_ready by a command that prints its results
	 * while it reads (btr script): no progress line by default when
	 * stdout is a terminal too. */
	int live_stdout;
};
void cli_stream_init(struct cli_stream *cs);
/* Handles option @c if it is one of CLI_STREAM_OPTS: returns 1, or -1
 * after printing a usage error; 0 if @c is not ours. */
int cli_stream_opt(struct cli_stream *cs, const char *cmd, int c, char *arg);
/* Parses the filter, checks the --elf files (one line naming a bad one)
 * and fills cs->so.  Returns EXIT_OK, EXIT_USAGE or EXIT_RUNTIME. */
int cli_stream_ready(struct cli_stream *cs, const char *cmd);
/* The rule for the source files trace @file names (btr_annotate_opts):
 * read only what the trace file's owner could read, or what lies under a
 * --source-root (docs/reliability.md, "Threat model"). */
void cli_source_rule(const struct cli_stream *cs, const char *file, struct btr_annotate_opts *o);

/* The progress line (cli_progress.c): one line on stderr, rewritten in
 * place ("\r...ESC[K") at most 4 times a second and erased when the work
 * ends or before any other message; never on stdout.  Shown when stderr
 * is a terminal (and, with @live_stdout, stdout is not), unless
 * BTR_PROGRESS (0: off, else on) or cli_progress_force (--progress,
 * --no-progress: wins over both) say otherwise. */
void cli_progress_force(int on);
int cli_progress_wanted(int live_stdout);
/* 1 if the line was asked for (--progress, BTR_PROGRESS=1), not only
 * allowed by a terminal. */
int cli_progress_asked(void);
/* Draws "btr: <text>" unless the line was drawn less than 250 ms ago. */
void cli_progress_show(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_clear(void);
/* "12.3 MiB" into @buf. */
void cli_progress_bytes(char *buf, size_t size, uint64_t n);
/* Sets @so's progress callback (reading: bytes read of the file's size)
 * if the line is wanted. */
void cli_progress_stream(struct btr_stream_opts *so, int live_stdout);
/* Lost trace data (cli_stream.c): one "btr: warning: FILE: ..." line per
 * cause in @l (@n of them copied, @total in all: the rest is summed up in
 * one line), each saying what @what ("report", "flame") covers; a single
 * cause goes through cli_warn (one line, or said in a failing command's
 * error line).  Prints a generic line when @total is 0. */
#define CLI_MAX_LOSSES 32
void cli_losses_print(const char *file, const char *what, const struct btr_stream_loss *l, size_t n, size_t total);
/* The same for stream @s (btr_stream_losses); prints nothing unless
 * btr_stream_data_lost(@s).  Returns nonzero if data was lost. */
int cli_stream_losses(const char *file, const char *what, const struct btr_stream *s);

/* Views (cli_views.c): runs @list (@n analyses) over trace @file in one
 * pass.  Returns EXIT_OK; EXIT_RUNTIME after one line on stderr when the
 * trace cannot be read; -EXIT_RUNTIME when data was lost but the results
 * cover what was read (a warning was printed: write them, exit 3). */
struct btr_analysis;
int cli_views_run(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis **list,
		  size_t n);
/* Output files named on the command line (cli_output.c; the rules are
 * docs/cli.md "Output files").  A command checks its output before it
 * does any work:
 *
 *     struct cli_output out;
 *     if ((rc = cli_output_check(&out, "cmd", name, 0)) != EXIT_OK) return rc;
 *     ... the work ...
 *     rc = cli_write_file(&out, fn, ctx);     (or cli_output_open/_close)
 *
 * and on a path that never writes, cli_output_discard(&out). */
enum cli_output_kind {
	CLI_OUTPUT_STDOUT,   /* "-" */
	CLI_OUTPUT_NEW,      /* no such file yet: temporary file + rename */
	CLI_OUTPUT_REPLACE,  /* a regular file: temporary file + rename, then one note */
	CLI_OUTPUT_STREAM,   /* a device, FIFO or socket: written through */
};
enum {
	CLI_OUTPUT_BINARY = 1,     /* binary data: refuse a terminal */
	CLI_OUTPUT_NO_STDOUT = 2,  /* "-" is a usage error */
};
struct cli_output {
	const char *name;           /* as given (messages name it) */
	char path[PATH_MAX];        /* the file written: symlinks followed */
	enum cli_output_kind kind;
	int fd;                     /* STDOUT: 1; STREAM: opened by the check; else -1 */
	unsigned mode;              /* REPLACE: the replaced file's permissions */
	int quiet;                  /* 1: no "replaced existing FILE" note */
	FILE *f;                    /* between open and close */
	struct btr_outfile of;      /* the temporary file (btr/file.h), while open */
	int open;                   /* 1: @of holds one */
};
/* --help text under each command's -o line. */
#define CLI_OUTPUT_HELP                                                        \
	"                         (a device or FIFO is written through, a symlink\n" \
	"                         followed, an existing file replaced whole, saying\n" \
	"                         so; checked first: docs/cli.md \"Output files\")\n"
/* Decides what @name is and whether it can be written (flags: CLI_OUTPUT_*),
 * opening a device or FIFO.  Returns EXIT_OK, or EXIT_USAGE / EXIT_RUNTIME
 * after one line naming @name and the cause. */
int cli_output_check(struct cli_output *o, const char *cmd, const char *name, unsigned flags);
/* Refuses (EXIT_USAGE, one line) when @o is a terminal: for a format found
 * to be binary only after the check.  @what names the data. */
int cli_output_refuse_tty(struct cli_output *o, const char *cmd, const char *what);
/* The stream to write (stdout, the device, or a temporary file beside
 * the target), or NULL after one line. */
FILE *cli_output_open(struct cli_output *o);
/* Finishes: flushes, closes and renames into place (then the one note
 * when a file was replaced); with @ok 0, or when a write failed, removes
 * the temporary file and leaves the target as it was.  Returns EXIT_OK or
 * EXIT_RUNTIME (one line printed for a write error; none for !@ok). */
int cli_output_close(struct cli_output *o, int ok);
/* Gives up without writing: nothing is left behind. */
void cli_output_discard(struct cli_output *o);
/* What the library's trace writer gets for @o: a path to create through
 * its own temporary file (*@fd -1), or, for stdout and devices, the fd to
 * write through and the name to say in messages. */
int cli_output_trace_target(const struct cli_output *o, const char **path, int *fd);
/* The note after a file was replaced by a writer other than cli_output_close. */
void cli_output_replaced(const struct cli_output *o);
/* Says the one line for a writer that returned @err (< 0) into @o: the
 * system's cause (@saved_errno, errno right after the write) when the
 * stream failed, else btr_errstr(@err).  Returns 1 if it printed. */
int cli_output_failed(struct cli_output *o, int err, int saved_errno);
/* Writes @o through @fn completely, or leaves the target as it was.
 * Returns EXIT_OK or EXIT_RUNTIME (one line printed). */
int cli_write_file(struct cli_output *o, int (*fn)(void *ctx, FILE *f), void *ctx);

/* `btr report --html DIR [--diff B]` (report_html.c). */
int cli_report_html(const char *file, struct cli_stream *cs, const char *dir, const char *diff, unsigned top);

/* The registry of commands (commands.c): what `btr --help` lists and
 * main.c dispatches, and what the tests run (`btr --list-commands`). */
enum {
	CLI_READS_TRACE = 1,     /* FILE: a trace (.btr or perf.data) */
	CLI_READS_ELF = 2,       /* ELF: an ELF file */
	CLI_WRITES_STDOUT = 4,   /* its result on stdout */
	CLI_WRITES_FILE = 8,     /* its result into OUT (-o) */
	CLI_BINARY = 16,         /* in a binary format (refused on a terminal) */
};
struct cli_form {
	unsigned flags;          /* CLI_READS_*, CLI_WRITES_*, CLI_BINARY */
	const char *args;        /* "cov -o OUT FILE" (placeholders: commands.c) */
};
struct cli_command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;        /* its line in `btr --help` */
	const char *doc;         /* its reference page, docs/DOC (linked from docs/cli.md) */
	const char *test;        /* its test, tests/TEST */
	const struct cli_form *forms;   /* ends with { 0, NULL } */
};
extern const struct cli_command cli_commands[];   /* ends with a NULL name */
/* `btr --list-commands`: one tab-separated line per form (NAME DOC TEST
 * FLAGS FORM; FLAGS: reads-trace,writes-stdout,...). */
void cli_commands_list(FILE *f);

/* A place of btr diverge's result as "main+0x15 (t.c:17)", "libc.so.6+0x2a1c0"
 * or "0x7f...", into @buf (@size bytes; cmd_diverge.c: the text output and
 * the HTML report's side-by-side view share it). */
struct btr_dv_loc;
void cli_dv_loc_str(const struct btr_dv_loc *l, char *buf, size_t size);

/* `btr pt decode` (cmd_pt_decode.c), dispatched by cmd_pt.c. */
int cmd_pt_decode(int argc, char **argv);

#endif
