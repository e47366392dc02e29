/* main.c - the btr command: dispatches to the commands of the registry
 * (commands.c). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <signal.h>

#include "cli.h"

/* A warning waits until the command ends, so that a command that then
 * fails says both in its one error line (docs/contract.md: bad input gives one
 * line), and the same warning about one file named twice is said once. */
static char pending[1024];

void cli_error(const char *fmt, ...)
{
	va_list ap;
	cli_progress_clear();
	fputs("btr: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (pending[0])
		fprintf(stderr, " (%s)", pending);
	pending[0] = 0;
	fputc('\n', stderr);
}

void cli_warn(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (strstr(pending, msg))
		return;
	size_t n = strlen(pending);
	snprintf(pending + n, sizeof(pending) - n, "%s%s", n ? "; " : "", msg);
}

/* Says a warning still waiting (the command ended without an error). */
static void flush_warning(void)
{
	cli_progress_clear();
	if (pending[0])
		fprintf(stderr, "btr: warning: %s\n", pending);
	pending[0] = 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	cli_progress_clear();
	fprintf(stderr, "btr %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'btr %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int cli_parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned sh = 0;
	if (*end == 'K' || *end == 'k')
		sh = 10;
	else if (*end == 'M')
		sh = 20;
	else if (*end == 'G')
		sh = 30;
	if (sh)
		end += !strcmp(end + 1, "iB") ? 3 : 1;
	if (errno || *end || (sh && v > (UINT64_MAX >> sh)))
		return -1;
	*out = (uint64_t)v << sh;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "Usage: btr COMMAND [OPTIONS] [ARGS]\n"
		   "Record and analyse the control flow of Linux x86-64 programs.\n\nCommands:\n");
	for (const struct cli_command *c = cli_commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
	fprintf(f, "\nRun 'btr COMMAND --help' for a command's options.\n"
		   "Exit codes: 0 ok, 1 a check found something, 2 usage error, 3 runtime error.\n");
}

/* SIGXFSZ (a file size limit, `ulimit -f`) would kill btr in the middle
 * of a write, leaving temporary files behind.  Caught (not ignored, so
 * that programs btr starts get the default action back at exec), it lets
 * the write fail with EFBIG and the command end with its error. */
static void on_xfsz(int sig)
{
	(void)sig;
}

/* A command's output that could not be written (a full disk, /dev/full,
 * a file size limit) is an error, not a silent success: returns the exit
 * code for @rc given the state of stdout. */
static int check_stdout(int rc)
{
	int saved = errno;   /* usually still the failed write's */
	int e = fflush(stdout) ? errno : 0;
	if (!ferror(stdout) || (rc != EXIT_OK && rc != EXIT_FOUND))
		return rc;
	if (!e && (saved == ENOSPC || saved == EFBIG || saved == EDQUOT || saved == EIO))
		e = saved;
	cli_error("writing the output: %s", e ? strerror(e) : "write error");
	return EXIT_RUNTIME;
}

static void log_to_stderr(void *ctx, enum btr_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	(void)ctx;
	cli_progress_clear();
	fprintf(stderr, "btr: %s: %s\n", names[level], msg);
}

int main(int argc, char **argv)
{
	const char *v = getenv("BTR_LOG");
	enum btr_log_level lvl = BTR_LOG_WARN;
	if (v && !strcmp(v, "debug"))
		lvl = BTR_LOG_DEBUG;
	else if (v && !strcmp(v, "info"))
		lvl = BTR_LOG_INFO;
	btr_log_set(log_to_stderr, NULL, lvl);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_xfsz;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGXFSZ, &sa, NULL);

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("btr %s\n", btr_version());
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--list-commands")) {
		cli_commands_list(stdout);
		return check_stdout(EXIT_OK);
	}
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		if (!strcmp(argv[1], c->name)) {
			int rc = c->fn(argc - 1, argv + 1);
			cli_progress_clear();
			rc = check_stdout(rc);
			flush_warning();
			return rc;
		}
	}
	fprintf(stderr, "btr: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
