/* cli.h - shared by the btr subcommands.  The CLI uses only the public API. */
#ifndef BTR_CLI_H
#define BTR_CLI_H

#include <stdint.h>
#include <stdio.h>
#include "btr/btr.h"

/* Exit codes (CONTRACT.md). */
enum {
	EXIT_OK = 0,
	EXIT_FOUND = 1,    /* a check found something */
	EXIT_USAGE = 2,    /* usage error */
	EXIT_RUNTIME = 3,  /* runtime error: one line on stderr naming file or cause */
};

/* Prints "btr: <message>\n" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "btr <cmd>: <message>\nTry 'btr <cmd> --help'.\n" and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes @s as a JSON string (quotes included): control characters
 * escaped, bytes that are not valid UTF-8 written as U+FFFD, NULL as null.
 * Paths and names come from traces, so they may hold anything. */
void cli_json_str(FILE *f, const char *s);

/* Parses a number (decimal, or 0x hex).  Returns 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);

/* Subcommands: int cmd_NAME(int argc, char **argv), argv[0] is the
 * subcommand name.  Declared weak so that the table in main.c links while
 * a subcommand is being developed; main.c hides missing ones. */
#define BTR_COMMANDS(X)                                                        \
	X(record, "record a program's control flow into a .btr trace")          \
	X(report, "summarize a trace: instructions, branches, hot code")         \
	X(pt, "Intel PT tools: pt dump (packets), pt decode (flow)")             \
	X(trace, "container tools: trace dump (records), trace info")            \
	X(info, "which capture backends work on this machine, and why")          \
	X(symbolize, "map addresses to function+offset and file:line")

#define X(name, help) int cmd_##name(int argc, char **argv) __attribute__((weak));
BTR_COMMANDS(X)
#undef X

/* `btr pt decode` (cmd_pt_decode.c), dispatched by cmd_pt.c; weak like the
 * commands above. */
int cmd_pt_decode(int argc, char **argv) __attribute__((weak));

#endif
