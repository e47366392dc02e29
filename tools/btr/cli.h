/* cli.h - shared by the btr subcommands.  The CLI uses only the public API. */
#ifndef BTR_CLI_H
#define BTR_CLI_H

#include <getopt.h>
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

/* Options every command that reads a trace shares: --filter, --elf,
 * --root, --debug-dir, --pid, --tid (cli_stream.c).  Use:
 *
 *     static const struct option lopts[] = { CLI_STREAM_LONGOPTS, {"format",...}, ... };
 *     struct cli_stream cs; cli_stream_init(&cs);
 *     while ((c = getopt_long(...)) != -1) {
 *             int r = cli_stream_opt(&cs, "cmd", c, optarg);
 *             if (r < 0) return EXIT_USAGE;   (message printed)
 *             if (r > 0) continue;            (was one of ours)
 *             switch (c) { ...own options... }
 *     }
 *     if ((rc = cli_stream_ready(&cs, "cmd")) != EXIT_OK) return rc;
 *     ... btr_stream_open(file, &cs.so, &s) or btr_analysis_run(file, &cs.so, ...)
 *
 * The option values are the short codes below (>= 0x1000, so they never
 * clash with a command's own letters); CLI_STREAM_HELP is their --help text. */
#define CLI_STREAM_MAX_ELFS 64
#define CLI_STREAM_MAX_DIRS 16
enum { CLI_OPT_FILTER = 0x1000, CLI_OPT_ELF, CLI_OPT_ROOT, CLI_OPT_DEBUG_DIR, CLI_OPT_PID, CLI_OPT_TID };
#define CLI_STREAM_LONGOPTS                                                    \
	{ "filter", required_argument, NULL, CLI_OPT_FILTER },                 \
	{ "elf", required_argument, NULL, CLI_OPT_ELF },                       \
	{ "root", required_argument, NULL, CLI_OPT_ROOT },                     \
	{ "debug-dir", required_argument, NULL, CLI_OPT_DEBUG_DIR },           \
	{ "pid", required_argument, NULL, CLI_OPT_PID },                       \
	{ "tid", required_argument, NULL, CLI_OPT_TID }
#define CLI_STREAM_HELP                                                        \
	"  --filter EXPR          only branches matching EXPR (LBR_SELECT classes and\n" \
	"                         kinds: jcc,near_ret,user,...; see docs/branch-kinds.md)\n" \
	"  --pid PID              only process PID\n"                          \
	"  --tid TID              only thread TID\n"                           \
	"  --elf FILE[:BASE]      use ELF FILE: at load bias BASE, or (without BASE) for\n" \
	"                         the recorded module with the same build-id or name\n" \
	"  --root DIR             look for recorded module paths under DIR first\n" \
	"  --debug-dir DIR        look for modules in DIR by build-id and by name\n"

struct cli_stream {
	struct btr_stream_opts so;   /* ready after cli_stream_ready (callbacks unset) */
	struct btr_filter filter;
	const char *filter_expr;
	struct btr_stream_elf elfs[CLI_STREAM_MAX_ELFS];
	unsigned n_elfs;
	const char *dirs[CLI_STREAM_MAX_DIRS + 1];
	unsigned n_dirs;
};
void cli_stream_init(struct cli_stream *cs);
/* Handles option @c if it is one of CLI_STREAM_LONGOPTS: returns 1, or -1
 * after printing a usage error; 0 if @c is not ours. */
int cli_stream_opt(struct cli_stream *cs, const char *cmd, int c, char *arg);
/* Parses the filter, checks the --elf files (one line naming a bad one)
 * and fills cs->so.  Returns EXIT_OK, EXIT_USAGE or EXIT_RUNTIME. */
int cli_stream_ready(struct cli_stream *cs, const char *cmd);

/* Views (cli_views.c): runs @list (@n analyses) over trace @file in one
 * pass.  Returns EXIT_OK; EXIT_RUNTIME after one line on stderr when the
 * trace cannot be read; -EXIT_RUNTIME when data was lost but the results
 * cover what was read (a warning was printed: write them, exit 3). */
struct btr_analysis;
int cli_views_run(const char *cmd, const char *file, struct cli_stream *cs, struct btr_analysis **list,
		  size_t n);
/* Writes @path ("-": stdout) through @fn completely, or leaves nothing
 * under that name (temp file + rename).  Returns EXIT_OK or EXIT_RUNTIME
 * (one line printed). */
int cli_write_file(const char *path, int (*fn)(void *ctx, FILE *f), void *ctx);

/* `btr report --html DIR [--diff B]` (report_html.c). */
int cli_report_html(const char *file, struct cli_stream *cs, const char *dir, const char *diff, unsigned top);

/* Subcommands: int cmd_NAME(int argc, char **argv), argv[0] is the
 * subcommand name.  Declared weak so that the table in main.c links while
 * a subcommand is being developed; main.c hides missing ones. */
#define BTR_COMMANDS(X)                                                        \
	X(record, "record a program's control flow into a .btr trace")          \
	X(report, "summarize a trace: instructions, branches, hot code")        \
	X(pt, "Intel PT tools: pt dump (packets), pt decode (flow)")            \
	X(trace, "container tools: trace dump (records), trace info")           \
	X(info, "which capture backends work on this machine, and why")         \
	X(symbolize, "map addresses to function+offset and file:line")          \
	X(check, "find hijacked control flow and hooks (ROP, GOT, preload, shellcode)") \
	X(callgraph, "call graph: per function instructions, calls, callers, callees") \
	X(flame, "flame graphs: folded stacks, speedscope JSON, interactive SVG") \
	X(timeline, "function timeline per thread: Chrome trace JSON, Perfetto") \
	X(bolt, "BOLT profile (perf2bolt fdata, or pre-aggregated)")            \
	X(pprof, "pprof profile (profile.proto, gzipped) for go tool pprof")    \
	X(merge, "merge profiles of many runs (fdata, pprof, folded)")          \
	X(crash, "a crashed thread's signal, faulting instruction, last branches") \
	X(cov, "coverage: drcov (Lighthouse), lcov (genhtml), Cobertura XML")   \
	X(annotate, "a function's disassembly or source with execution counts") \
	X(cfg, "a function's control-flow graph as a heat map (dot, svg, png)") \
	X(diff, "blocks and edges that differ between two traces")              \
	X(script, "print a trace's branches, one per line (perf script style)") \
	X(import, "convert a perf.data recording into a .btr trace")

#define X(name, help) int cmd_##name(int argc, char **argv) __attribute__((weak));
BTR_COMMANDS(X)
#undef X

/* `btr pt decode` (cmd_pt_decode.c), dispatched by cmd_pt.c; weak like the
 * commands above. */
int cmd_pt_decode(int argc, char **argv) __attribute__((weak));

#endif
