/* cmd_record.c - btr record: run a command and record its control flow. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "btr/capture.h"

#define DEFAULT_OUTPUT "btr.btr"

static void usage(FILE *f)
{
	fprintf(f, "Usage: btr record [OPTIONS] -- CMD [ARGS...]\n"
		   "       btr record -b step -p PID [--duration SECONDS] [OPTIONS]\n"
		   "Runs CMD and records its control flow into a .btr trace.  CMD's stdin, stdout\n"
		   "and stderr pass through; btr exits with CMD's exit status (128+N if signal N\n"
		   "killed it), or 2 (usage) / 3 (btr's own error: no trace is left under FILE;\n"
		   "if the disk or $TMPDIR filled up, what was recorded is kept in FILE.partial).\n\n"
		   "  -b, --backend NAME     auto (default), qemu, pt, bts, lbr, step; auto takes\n"
		   "                         hardware tracing when it works, else qemu, and says why\n"
		   "  -o, --output FILE      the trace to write (default " DEFAULT_OUTPUT "; '-': stdout,\n"
		   "                         only with -p or -a, not a terminal)\n"
		   CLI_OUTPUT_HELP
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
		   "step backend (trap-flag tracing with ptrace; docs/record.md):\n"
		   "  -p, --pid PID          attach to running process PID (all its threads); detach\n"
		   "                         at the end of --duration or on Ctrl-C, leaving it running\n"
		   "      --duration SECONDS with -p: trace this long (default: until it exits)\n"
		   "      --start SYM|ADDR   trace only from function SYM (or address ADDR) ...\n"
		   "      --stop SYM|ADDR    ... until SYM/ADDR is reached (default: until the start\n"
		   "                         function returns); full speed elsewhere; every entry traced\n"
		   "      --ring N           flight recorder: keep only the last N branches per thread,\n"
		   "                         written when the thread ends or the process dies (btr crash)\n"
		   "      --filter EXPR      with --ring: keep only branches of these LBR_SELECT classes\n"
		   "      --inproc           in-process agent (btr-step-agent.so, preloaded): TF set in\n"
		   "                         the program's own SIGTRAP handler (~1.7x cheaper per trap here);\n"
		   "                         main thread only; static programs, -p and --start fall\n"
		   "                         back to ptrace stepping, saying so\n"
		   "Hardware backends (pt, bts, lbr; docs/record.md):\n"
		   "      --user, --kernel   trace user / kernel code (default: user only)\n"
		   "  -p, --pid PID          attach to running process PID instead of a command\n"
		   "  -a, --all-cpus         every process on every CPU while CMD runs (or until\n"
		   "                         Ctrl-C without CMD)\n"
		   "      --per-thread       one ring for the first thread only, no inheritance\n"
		   "                         (default: one ring per CPU for the whole process tree)\n"
		   "      --ip-filter SPEC   pt: trace only START-END (kernel), START-END@FILE or\n"
		   "                         SYM@FILE (repeatable, up to the CPU's range count)\n"
		   "      --pt-config LIST   pt: cyc, cyc_thresh=N, mtc_period=N, psb_period=N,\n"
		   "                         notsc, nomtc, ptw, pwr_evt, nobranch\n"
		   "      --snapshot         pt, bts: keep the newest AUX data in a ring; write it on\n"
		   "                         SIGUSR2 and at the end\n"
		   "      --lbr-filter EXPR  lbr: any, call, any_call, any_return, ind_call, ind_jump,\n"
		   "                         cond, call_stack, user, kernel, hw_index, save_type\n"
		   "      --period N         lbr: sample every N cycles (default 100003)\n"
		   "      --aux-size BYTES   pt, bts: AUX area per ring (power of two, default 4 MiB)\n"
		   "  -q, --quiet            do not say which backend was chosen\n"
		   "  -v, --verbose          say why that backend was chosen (every hardware\n"
		   "                         backend's reason; btr info says the same)\n"
		   "      --no-progress      no progress line on stderr (default: qemu shows\n"
		   "                         processes and trace bytes while CMD runs if\n"
		   "                         stderr is a terminal; BTR_PROGRESS=0 or 1 sets\n"
		   "                         the default); --progress: always\n"
		   "  -h, --help             this help\n"
		   "qemu follows the whole process tree: every process started by CMD, including\n"
		   "ones that outlive their parent, until all have exited (docs/record.md).\n",
		   BTR_CAPTURE_MAX_PROCESSES);
}

/* btr_capture_opts.progress: one line on stderr (cli_progress_show). */
static void record_progress(void *ctx, const struct btr_capture_progress *p)
{
	char b[32];
	(void)ctx;
	cli_progress_bytes(b, sizeof(b), p->bytes);
	if (p->writing)
		cli_progress_show("writing the trace: %llu of %llu process traces, %s of PT",
				  (unsigned long long)p->processes, (unsigned long long)p->processes_total, b);
	else if (!p->processes)
		cli_progress_show("recording: starting");
	else
		cli_progress_show("recording: %llu process%s, %s of trace", (unsigned long long)p->processes,
				  p->processes == 1 ? "" : "es", b);
}

int cmd_record(int argc, char **argv)
{
	enum { OPT_NORETCOMP = 256, OPT_GT, OPT_DURATION, OPT_START, OPT_STOP, OPT_RING, OPT_FILTER, OPT_INPROC,
	       OPT_NOFOLLOW, OPT_NOFORK, OPT_NOEXEC, OPT_MAXPROC, OPT_USER, OPT_KERNEL, OPT_PERTHREAD, OPT_IPF,
	       OPT_PTCFG, OPT_SNAP, OPT_LBRF, OPT_PERIOD, OPT_AUX, OPT_PROGRESS, OPT_NOPROGRESS };
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "output", required_argument, NULL, 'o' },
		{ "no-retcomp", no_argument, NULL, OPT_NORETCOMP },
		{ "ground-truth", required_argument, NULL, OPT_GT },
		{ "compress", required_argument, NULL, 'z' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "no-progress", no_argument, NULL, OPT_NOPROGRESS },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "start", required_argument, NULL, OPT_START },
		{ "stop", required_argument, NULL, OPT_STOP },
		{ "ring", required_argument, NULL, OPT_RING },
		{ "filter", required_argument, NULL, OPT_FILTER },
		{ "inproc", no_argument, NULL, OPT_INPROC },
		{ "no-follow", no_argument, NULL, OPT_NOFOLLOW },
		{ "no-follow-fork", no_argument, NULL, OPT_NOFORK },
		{ "no-follow-exec", no_argument, NULL, OPT_NOEXEC },
		{ "max-processes", required_argument, NULL, OPT_MAXPROC },
		{ "user", no_argument, NULL, OPT_USER },
		{ "kernel", no_argument, NULL, OPT_KERNEL },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "per-thread", no_argument, NULL, OPT_PERTHREAD },
		{ "ip-filter", required_argument, NULL, OPT_IPF },
		{ "pt-config", required_argument, NULL, OPT_PTCFG },
		{ "snapshot", no_argument, NULL, OPT_SNAP },
		{ "lbr-filter", required_argument, NULL, OPT_LBRF },
		{ "period", required_argument, NULL, OPT_PERIOD },
		{ "aux-size", required_argument, NULL, OPT_AUX },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *backend = "auto";
	struct btr_capture_opts o = { .sz = sizeof(o), .output = DEFAULT_OUTPUT };
	int quiet = 0, verbose = 0, inproc = 0, c, hw_opt = 0;
	char *end;
	uint64_t v;
	const char *ipf[8];

	/* '+': stop at the first non-option, so CMD's own options stay CMD's. */
	while ((c = getopt_long(argc, argv, "+b:o:z:qvhp:a", lo, NULL)) != -1) {
		if (c == OPT_USER || c == OPT_KERNEL || c == 'a' || c == OPT_PERTHREAD || c == OPT_IPF ||
		    c == OPT_PTCFG || c == OPT_SNAP || c == OPT_LBRF || c == OPT_PERIOD || c == OPT_AUX)
			hw_opt = 1;
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
		case 'v': verbose = 1; break;
		case OPT_PROGRESS: cli_progress_force(1); break;
		case OPT_NOPROGRESS: cli_progress_force(0); break;
		case 'p':
			if (cli_parse_u64(optarg, &v) < 0 || !v || v > INT32_MAX)
				return cli_usage_error("record", "bad process id '%s'", optarg);
			o.attach_pid = (int)v;
			break;
		case OPT_DURATION:
			o.duration = strtod(optarg, &end);
			if (end == optarg || *end || !(o.duration > 0) || o.duration > 1e6)
				return cli_usage_error("record", "bad duration '%s' (seconds > 0)", optarg);
			break;
		case OPT_START: o.start = optarg; break;
		case OPT_STOP: o.stop = optarg; break;
		case OPT_RING:
			if (cli_parse_u64(optarg, &v) < 0 || !v || v > (1u << 24))
				return cli_usage_error("record", "bad ring size '%s' (1..16777216)", optarg);
			o.ring = (uint32_t)v;
			break;
		case OPT_FILTER: {
			struct btr_filter f;
			if (btr_filter_parse(optarg, &f) < 0)
				return cli_usage_error("record", "bad filter '%s'", optarg);
			o.filter = optarg;
			break;
		}
		case OPT_INPROC: inproc = 1; break;
		case OPT_NOFOLLOW: o.no_follow_fork = o.no_follow_exec = 1; break;
		case OPT_NOFORK: o.no_follow_fork = 1; break;
		case OPT_NOEXEC: o.no_follow_exec = 1; break;
		case OPT_MAXPROC:
			if (cli_parse_u64(optarg, &v) < 0 || v == 0 || v > 1000000)
				return cli_usage_error("record", "bad --max-processes '%s' (1..1000000)", optarg);
			o.max_processes = (unsigned)v;
			break;
		case OPT_USER: o.user = 1; break;
		case OPT_KERNEL: o.kernel = 1; break;
		case OPT_PERTHREAD: o.per_thread = 1; break;
		case OPT_SNAP: o.snapshot = 1; break;
		case 'a': o.system_wide = 1; break;
		case OPT_PTCFG: o.pt_config = optarg; break;
		case OPT_LBRF: o.lbr_filter = optarg; break;
		case OPT_IPF:
			if (o.n_ip_filters == 8)
				return cli_usage_error("record", "at most 8 --ip-filter options");
			ipf[o.n_ip_filters++] = optarg;
			o.ip_filters = ipf;
			break;
		case OPT_PERIOD:
			if (cli_parse_u64(optarg, &v) < 0 || v == 0)
				return cli_usage_error("record", "bad --period '%s'", optarg);
			o.period = v;
			break;
		case OPT_AUX:
			if (cli_parse_u64(optarg, &v) < 0 || v < 4096 || (v & (v - 1)))
				return cli_usage_error("record", "bad --aux-size '%s' (a power of two >= 4096)", optarg);
			o.aux_size = v;
			break;
		case 'h': usage(stdout); return EXIT_OK;
		default: return cli_usage_error("record", "unknown option");
		}
	}
	int stepopt = o.duration > 0 || o.start || o.stop || o.ring || o.filter || inproc;
	if (o.attach_pid && optind < argc)
		return cli_usage_error("record", "-p PID attaches to a running process: no command with it");
	if (o.attach_pid && o.system_wide)
		return cli_usage_error("record", "--pid and --all-cpus exclude each other");
	if (optind >= argc && !o.attach_pid && !o.system_wide)
		return cli_usage_error("record", "no command given (btr record [OPTIONS] -- CMD [ARGS])");
	if (o.duration > 0 && !o.attach_pid)
		return cli_usage_error("record", "--duration needs -p PID");
	if (o.filter && !o.ring)
		return cli_usage_error("record", "--filter needs --ring N");
	if (o.stop && !o.start)
		return cli_usage_error("record", "--stop needs --start");
	if (stepopt && !strcmp(backend, "auto"))
		backend = "step";
	if (stepopt && strcmp(backend, "step"))
		return cli_usage_error("record", "--duration, --start, --stop, --ring, --filter and --inproc need -b step");
	o.argv = o.attach_pid || optind >= argc ? NULL : argv + optind;

	/* A command that cannot run is reported before anything else. */
	char path[4096];
	if (o.argv && btr_capture_check_command(o.argv[0], path, sizeof(path)) < 0)
		return EXIT_RUNTIME;
	/* So is an output that cannot be written: before CMD runs
	 * (docs/cli.md "Output files"). */
	if (o.argv && !strcmp(o.output, "-"))
		return cli_usage_error("record", "-o -: CMD writes to the same stdout as the trace would; give a file or "
				       "a FIFO");
	struct cli_output dst;
	int orc = cli_output_check(&dst, "record", o.output, CLI_OUTPUT_BINARY);
	if (orc != EXIT_OK)
		return orc;
	dst.quiet = quiet;
	struct stat so, sd;
	if (o.argv && dst.kind == CLI_OUTPUT_STREAM && fstat(dst.fd, &sd) == 0 && fstat(STDOUT_FILENO, &so) == 0 &&
	    !S_ISCHR(sd.st_mode) && sd.st_dev == so.st_dev && sd.st_ino == so.st_ino) {
		cli_output_discard(&dst);
		return cli_usage_error("record", "-o %s: CMD writes to the same stdout as the trace would; give a file "
				       "or a FIFO", o.output);
	}
	const char *wpath;
	int wfd;
	cli_output_trace_target(&dst, &wpath, &wfd);
	o.output = wpath;
	o.output_fd = wfd > 0 ? wfd : 0;
	o.inproc = inproc;

	const struct btr_capture_backend *b;
	if (!strcmp(backend, "auto")) {
		char why[1200];
		if (btr_capture_auto(&b, why, sizeof(why)) < 0) {
			cli_error("%s", why);
			return EXIT_RUNTIME;
		}
		const char *brief = "";
		if (o.attach_pid && !strcmp(b->name, "qemu")) {
			/* qemu cannot attach to a running process; stepping can. */
			b = btr_capture_find("step");
			snprintf(why, sizeof(why), "step (attaching with -p: qemu cannot attach, no hardware tracing here)");
			brief = " (-p: qemu cannot attach, no hardware tracing here)";
		} else if (!strcmp(b->name, "qemu")) {
			brief = " (no hardware tracing here; `btr info` says why)";
		}
		/* One short line; the reasons (about 400 characters when it
		 * falls back to qemu) only with -v. */
		if (verbose)
			fprintf(stderr, "btr: backend %s\n", why);
		else if (!quiet)
			fprintf(stderr, "btr: recording with %s%s\n", b->name, brief);
	} else if (!(b = btr_capture_find(backend))) {
		return cli_usage_error("record", "unknown backend '%s' (auto, pt, bts, lbr, qemu, step)", backend);
	}
	if (o.attach_pid && !strcmp(b->name, "qemu"))
		return cli_usage_error("record", "-p PID needs -b step, pt, bts or lbr (qemu cannot attach)");
	if (strcmp(b->name, "qemu") && o.ground_truth)
		return cli_usage_error("record", "--ground-truth needs the qemu backend");
	if (hw_opt && strcmp(b->name, "pt") && strcmp(b->name, "bts") && strcmp(b->name, "lbr"))
		return cli_usage_error("record", "--user/--kernel/--all-cpus/--per-thread/--ip-filter/--pt-config/"
				       "--snapshot/--lbr-filter/--period/--aux-size need -b pt, bts or lbr");

	if (cli_progress_wanted(0)) {
		o.progress = record_progress;
		o.progress_ctx = NULL;
	}
	struct btr_capture_result res;
	int rc = b->record(&o, &res);
	cli_progress_clear();
	if (rc >= 0)
		cli_output_replaced(&dst);
	cli_output_discard(&dst);
	if (rc == -BTR_ERR_UNSUPPORTED) {
		cli_error("backend %s cannot record yet (try -b qemu)", b->name);
		return EXIT_RUNTIME;
	}
	if (rc < 0) {
		/* The library already logged the one line naming the cause. */
		return EXIT_RUNTIME;
	}
	if (!strcmp(b->name, "step") && !quiet)
		fprintf(stderr, "btr: step: %s; %llu steps, %llu branches\n", res.mode,
			(unsigned long long)res.steps, (unsigned long long)res.branches);
	if (res.untraced && !quiet)
		fprintf(stderr, "btr: %llu processes, %llu of them (or programs they ran) untraced (btr report says which)\n",
			(unsigned long long)res.processes, (unsigned long long)res.untraced);
	if (res.interrupted && !quiet)
		fprintf(stderr, "btr: interrupted; trace %s finalized\n", dst.name);
	if (!res.exited)
		return 128 + res.signo;
	return res.code;
}
