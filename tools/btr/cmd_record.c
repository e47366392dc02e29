/* cmd_record.c - btr record: run a command and record its control flow. */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "btr/capture.h"

#define DEFAULT_OUTPUT "btr.btr"

static void usage(FILE *f)
{
	fprintf(f, "Usage: btr record [OPTIONS] -- CMD [ARGS...]\n"
		   "Runs CMD and records its control flow into a .btr trace.  CMD's stdin, stdout\n"
		   "and stderr pass through; btr exits with CMD's exit status (128+N if signal N\n"
		   "killed it), or 2 (usage) / 3 (btr's own error: no trace is left behind).\n\n"
		   "  -b, --backend NAME     auto (default), qemu, pt, bts, lbr, step; auto takes\n"
		   "                         hardware tracing when it works, else qemu, and says why\n"
		   "  -o, --output FILE      the trace to write (default " DEFAULT_OUTPUT ")\n"
		   "      --no-retcomp       disable PT return compression\n"
		   "      --ground-truth FILE  qemu: also log every executed instruction address per\n"
		   "                         thread into FILE (debugging aid, slow; docs/record.md)\n"
		   "  -z, --compress LEVEL   zstd-compress the trace (1..19, default 0: none)\n"
		   "      --no-follow        trace only CMD's first program: children and exec'd\n"
		   "                         programs run untraced (= both options below)\n"
		   "      --no-follow-fork   children (fork, vfork, clone without CLONE_VM) run untraced\n"
		   "      --no-follow-exec   a program started by execve runs untraced\n"
		   "      --max-processes N  trace at most N processes (default %u); later ones run\n"
		   "                         untraced and the trace says how many\n"
		   "  -q, --quiet            do not say which backend was chosen\n"
		   "  -h, --help             this help\n"
		   "qemu follows the whole process tree: every process started by CMD, including\n"
		   "ones that outlive their parent, until all have exited (docs/record.md).\n",
		   BTR_CAPTURE_MAX_PROCESSES);
}

int cmd_record(int argc, char **argv)
{
	enum { OPT_NORETCOMP = 256, OPT_GT, OPT_NOFOLLOW, OPT_NOFORK, OPT_NOEXEC, OPT_MAXPROC };
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "output", required_argument, NULL, 'o' },
		{ "no-retcomp", no_argument, NULL, OPT_NORETCOMP },
		{ "ground-truth", required_argument, NULL, OPT_GT },
		{ "compress", required_argument, NULL, 'z' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "no-follow", no_argument, NULL, OPT_NOFOLLOW },
		{ "no-follow-fork", no_argument, NULL, OPT_NOFORK },
		{ "no-follow-exec", no_argument, NULL, OPT_NOEXEC },
		{ "max-processes", required_argument, NULL, OPT_MAXPROC },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *backend = "auto";
	struct btr_capture_opts o = { .sz = sizeof(o), .output = DEFAULT_OUTPUT };
	int quiet = 0, c;
	uint64_t v;

	/* '+': stop at the first non-option, so CMD's own options stay CMD's. */
	while ((c = getopt_long(argc, argv, "+b:o:z:qh", lo, NULL)) != -1) {
		switch (c) {
		case 'b': backend = optarg; break;
		case 'o': o.output = optarg; break;
		case OPT_NORETCOMP: o.no_retcomp = 1; break;
		case OPT_GT: o.ground_truth = optarg; break;
		case 'z':
			if (cli_parse_u64(optarg, &v) < 0 || v > 19)
				return cli_usage_error("record", "bad compression level '%s'", optarg);
			o.compress = (int)v;
			break;
		case 'q': quiet = 1; break;
		case OPT_NOFOLLOW: o.no_follow_fork = o.no_follow_exec = 1; break;
		case OPT_NOFORK: o.no_follow_fork = 1; break;
		case OPT_NOEXEC: o.no_follow_exec = 1; break;
		case OPT_MAXPROC:
			if (cli_parse_u64(optarg, &v) < 0 || v == 0 || v > 1000000)
				return cli_usage_error("record", "bad --max-processes '%s' (1..1000000)", optarg);
			o.max_processes = (unsigned)v;
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("record", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_error("record", "no command given (btr record [OPTIONS] -- CMD [ARGS])");
	if (!*o.output)
		return cli_usage_error("record", "empty output file name");
	o.argv = argv + optind;

	/* A command that cannot run is reported before anything else. */
	char path[4096];
	if (btr_capture_check_command(o.argv[0], path, sizeof(path)) < 0)
		return EXIT_RUNTIME;

	const struct btr_capture_backend *b;
	if (!strcmp(backend, "auto")) {
		char why[600];
		if (btr_capture_auto(&b, why, sizeof(why)) < 0) {
			cli_error("%s", why);
			return EXIT_RUNTIME;
		}
		if (!quiet)
			fprintf(stderr, "btr: backend %s\n", why);
	} else if (!(b = btr_capture_find(backend))) {
		return cli_usage_error("record", "unknown backend '%s' (auto, pt, bts, lbr, qemu, step)", backend);
	}
	if (strcmp(b->name, "qemu") && o.ground_truth)
		return cli_usage_error("record", "--ground-truth needs the qemu backend");

	struct btr_capture_result res;
	int rc = b->record(&o, &res);
	if (rc == -BTR_ERR_UNSUPPORTED) {
		cli_error("backend %s cannot record yet (try -b qemu)", b->name);
		return EXIT_RUNTIME;
	}
	if (rc < 0) {
		/* The library already logged the one line naming the cause. */
		return EXIT_RUNTIME;
	}
	if (res.untraced && !quiet)
		fprintf(stderr, "btr: %llu processes, %llu of them (or programs they ran) untraced (btr report says which)\n",
			(unsigned long long)res.processes, (unsigned long long)res.untraced);
	if (res.interrupted && !quiet)
		fprintf(stderr, "btr: interrupted; trace %s finalized\n", o.output);
	if (!res.exited)
		return 128 + res.signo;
	return res.code;
}
