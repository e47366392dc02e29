/* cmd_check.c - `btr check FILE`: control-flow hijack and hook detection.
 *
 * Feeds the trace through the check analysis (lib/analysis/check.c) in
 * one pass and prints its findings as text or one JSON object
 * (docs/check.md, docs/contract.md).  Exit 1 when a finding
 * reaches --fail-on.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "btr/analysis.h"
#include "btr/check.h"
#include "btr/stream.h"
#include "cli.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: btr check [OPTIONS] FILE\n"
		"Compare every recorded transfer of a trace (.btr or perf.data) with the\n"
		"transfers the loaded code allows and report control-flow hijacks and hooks:\n"
		"hijacked returns and ROP chains (shadow stack), indirect calls and jumps to\n"
		"non-entries, GOT overwrites and LD_PRELOAD interposition, transfers into\n"
		"memory no file backs and no perf map or jitdump names (shellcode, unnamed\n"
		"JIT code), code that differs from its file (inline hooks).  Sampled LBR\n"
		"data gets kBouncer-style checks.\n\n"
		"Options:\n"
		"  --format text|json     output format (default text)\n"
		"  --fail-on SEVERITY     exit 1 if a finding has SEVERITY or higher\n"
		"                         (info, low, medium, high; default info:\n"
		"                         any finding)\n"
		"  --allow FILE           known-good exceptions, one 'KIND PATTERN' a line\n"
		"                         (PATTERN: '*', 0xLO-0xHI, or text in the finding)\n"
		CLI_STREAM_HELP
		"  -h, --help             this help\n\n"
		"Exit status: 0 no finding reached --fail-on; 1 one did; 2 usage error;\n"
		"3 the trace or the allow file cannot be read.\n");
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	size_t k;
	while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	return buf;
}

int cmd_check(int argc, char **argv)
{
	enum { OPT_FORMAT = 1, OPT_FAIL_ON, OPT_ALLOW };
	static const struct option lo[] = {
		CLI_STREAM_LONGOPTS,
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "fail-on", required_argument, NULL, OPT_FAIL_ON },
		{ "allow", required_argument, NULL, OPT_ALLOW },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli_stream cs;
	cli_stream_init(&cs);
	const char *format = "text", *allow_path = NULL;
	int fail_on = BTR_CHECK_INFO;   /* by default any finding fails */
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		int r = cli_stream_opt(&cs, "check", c, optarg);
		if (r < 0)
			return EXIT_USAGE;
		if (r > 0)
			continue;
		switch (c) {
		case OPT_FORMAT:
			if (strcmp(optarg, "text") && strcmp(optarg, "json"))
				return cli_usage_error("check", "unknown format '%s' (text or json)", optarg);
			format = optarg;
			break;
		case OPT_FAIL_ON:
			if ((fail_on = btr_check_severity_parse(optarg)) < 0)
				return cli_usage_error("check", "bad --fail-on '%s' (info, low, medium, high)", optarg);
			break;
		case OPT_ALLOW:
			allow_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			return cli_usage_error("check", "unknown option");
		}
	}
	if (optind + 1 != argc)
		return cli_usage_error("check", optind >= argc ? "missing trace FILE" : "one trace FILE expected");
	const char *file = argv[optind];
	int rc = cli_stream_ready(&cs, "check");
	if (rc != EXIT_OK)
		return rc;

	char *allow = NULL;
	if (allow_path && !(allow = read_file(allow_path))) {
		cli_error("%s: %s", allow_path, strerror(errno ? errno : EIO));
		return EXIT_RUNTIME;
	}
	struct btr_check_opts co = { .sz = sizeof(co), .allow = allow };
	struct btr_analysis *a = NULL;
	int e = btr_check_new(&co, &a);
	free(allow);
	if (e < 0) {
		if (e == -BTR_ERR_BAD_FILTER)
			cli_error("%s: bad allow rule (see the message above)", allow_path);
		else
			cli_error("check: %s", btr_errstr(e));
		return EXIT_RUNTIME;
	}
	struct btr_stream_loss losses[CLI_MAX_LOSSES];
	struct btr_analysis_run_info info = { .sz = sizeof(info), .losses = losses, .max_losses = CLI_MAX_LOSSES };
	e = btr_analysis_run(file, &cs.so, &a, 1, &info);
	if (e < 0 && info.status == 0) {
		/* nothing was fed: the trace could not be opened */
		cli_error("%s: %s", file, btr_errstr(e));
		btr_analysis_free(a);
		return EXIT_RUNTIME;
	}
	if (btr_analysis_write(a, stdout, format) < 0) {
		cli_error("writing the findings: %s", strerror(errno ? errno : EIO));
		btr_analysis_free(a);
		return EXIT_RUNTIME;
	}
	fflush(stdout);
	size_t n;
	const struct btr_check_finding *f = btr_check_findings(a, &n);
	int found = 0;
	for (size_t i = 0; i < n; i++)
		found |= (int)f[i].severity >= fail_on;
	btr_analysis_free(a);
	if (info.lost) {
		cli_losses_print(file, "check", losses, CLI_MAX_LOSSES, info.n_losses);
		return EXIT_RUNTIME;
	}
	if (e < 0) {
		cli_error("%s: %s (findings cover what was read)", file, btr_errstr(e));
		return EXIT_RUNTIME;
	}
	return found ? EXIT_FOUND : EXIT_OK;
}
