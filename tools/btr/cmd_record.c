/* cmd_record.c - btr record: run a command and record its control flow. */
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_cmd.h"
#include "btr/capture.h"

#define DEFAULT_OUTPUT "btr.btr"

#define STR_(x) #x
#define STR(x) STR_(x)

enum { OPT_NORETCOMP = 256, OPT_GT, OPT_DURATION, OPT_START, OPT_STOP, OPT_RING, OPT_FILTER, OPT_INPROC,
       OPT_NOFOLLOW, OPT_NOFORK, OPT_NOEXEC, OPT_MAXPROC, OPT_USER, OPT_KERNEL, OPT_PERTHREAD, OPT_IPF,
       OPT_PTCFG, OPT_SNAP, OPT_LBRF, OPT_PERIOD, OPT_AUX, OPT_PROGRESS, OPT_NOPROGRESS, OPT_SYSTEM,
       OPT_VMKERNEL, OPT_INITRD, OPT_APPEND, OPT_TRIGGER, OPT_MAXSNAP };

/* -p attaches to a running process: --attach, and --pid, its old
 * spelling (kept for scripts; every other command's --pid selects a
 * process of a trace). */
static const struct cli_opt opts[] = {
	{ "backend", 'b', CLI_ARG,
	  "  -b, --backend NAME     auto (default), qemu, pt, bts, lbr, step; auto takes\n"
	  "                         hardware tracing when it works, else qemu, and says why\n", NULL },
	{ "output", 'o', CLI_ARG,
	  "  -o, --output FILE      the trace to write (default " DEFAULT_OUTPUT "; '-': stdout,\n"
	  "                         only with -p or -a, not a terminal)\n" CLI_OUTPUT_HELP, NULL },
	{ "no-retcomp", OPT_NORETCOMP, CLI_NOARG, "      --no-retcomp       disable PT return compression\n", NULL },
	{ "ground-truth", OPT_GT, CLI_ARG,
	  "      --ground-truth FILE  qemu: also log every executed instruction address per\n"
	  "                         thread into FILE (debugging aid, slow; docs/record.md)\n", NULL },
	{ "compress", 'z', CLI_ARG, "  -z, --compress LEVEL   zstd-compress the trace (1..19, default 0: none)\n", NULL },
	{ "no-follow", OPT_NOFOLLOW, CLI_NOARG,
	  "      --no-follow        trace only CMD's first program: children and exec'd\n"
	  "                         programs run untraced (= both options below)\n", NULL },
	{ "no-follow-fork", OPT_NOFORK, CLI_NOARG,
	  "      --no-follow-fork   children (fork, vfork, clone without CLONE_VM) run untraced\n", NULL },
	{ "no-follow-exec", OPT_NOEXEC, CLI_NOARG, "      --no-follow-exec   a program started by execve runs untraced\n", NULL },
	{ "max-processes", OPT_MAXPROC, CLI_ARG,
	  "      --max-processes N  trace at most N processes (default " STR(BTR_CAPTURE_MAX_PROCESSES) "); later ones run\n"
	  "                         untraced and the trace says how many\n", NULL },
	{ "attach", 'p', CLI_ARG,
	  "step backend (trap-flag tracing with ptrace; docs/record.md):\n"
	  "  -p, --attach PID       attach to running process PID (all its threads); detach\n"
	  "                         at the end of --duration or on Ctrl-C, leaving it running\n"
	  "                         (--pid PID: the same, its old spelling)\n", NULL },
	{ "pid", 'p', CLI_ARG, NULL, NULL },
	{ "duration", OPT_DURATION, CLI_ARG, "      --duration SECONDS with -p: trace this long (default: until it exits)\n", NULL },
	{ "start", OPT_START, CLI_ARG,
	  "      --start SYM|ADDR   step, qemu: trace only from function SYM (or address ADDR) ...\n", NULL },
	{ "stop", OPT_STOP, CLI_ARG,
	  "      --stop SYM|ADDR    ... until SYM/ADDR is reached (default: until the start\n"
	  "                         function returns); every entry, per thread (qemu: TIP.PGE/\n"
	  "                         TIP.PGD; SYM@FILE for a library); step: full speed elsewhere\n", NULL },
	{ "ring", OPT_RING, CLI_ARG,
	  "      --ring N           flight recorder: keep only the last N branches per thread,\n"
	  "                         written when the thread ends or the process dies (btr crash)\n", NULL },
	{ "filter", OPT_FILTER, CLI_ARG, "      --filter EXPR      with --ring: keep only branches of these LBR_SELECT classes\n", NULL },
	{ "inproc", OPT_INPROC, CLI_NOARG,
	  "      --inproc           in-process agent (btr-step-agent.so, preloaded): TF set in\n"
	  "                         the program's own SIGTRAP handler (~1.7x cheaper per trap here);\n"
	  "                         main thread only; static programs, -p and --start fall\n"
	  "                         back to ptrace stepping, saying so\n", NULL },
	{ "snapshot", OPT_SNAP, CLI_NOARG,
	  "QEMU flight recorder (docs/record.md, \"--snapshot SIZE with -b qemu\"):\n"
	  "      --snapshot SIZE    qemu: flight recorder: each thread keeps its last SIZE\n"
	  "                         bytes of PT (16K..1G; K, M, G suffixes), written as a\n"
	  "                         window that decodes on its own on SIGUSR2 to btr, at\n"
	  "                         the thread's end and when its process dies of a signal\n"
	  "                         (pt, bts: --snapshot alone, below)\n", NULL },
	{ "trigger", OPT_TRIGGER, CLI_ARG,
	  "      --trigger SYM|ADDR qemu, with --snapshot: also a window at each entry of\n"
	  "                         SYM (SYM@FILE for a library), ending at the call\n", NULL },
	{ "max-snapshots", OPT_MAXSNAP, CLI_ARG,
	  "      --max-snapshots N  at most N --trigger windows in the recording (default\n"
	  "                         16); the windows at the end are always written\n", NULL },
	{ "system", OPT_SYSTEM, CLI_NOARG,
	  "Whole system (docs/record.md, \"Whole-system recording\"):\n"
	  "      --system           boot a VM (qemu-system-x86_64 10+) whose only program is\n"
	  "                         CMD, and record the whole machine, kernel and user code;\n"
	  "                         with --user or --kernel only that CPL (default: both)\n", NULL },
	{ "vm-kernel", OPT_VMKERNEL, CLI_ARG,
	  "      --vm-kernel FILE   the kernel to boot (default: the newest /boot/vmlinuz-*;\n"
	  "                         its System.map must be beside it)\n", NULL },
	{ "initrd", OPT_INITRD, CLI_ARG,
	  "      --initrd FILE      the initramfs (default: generated: busybox, CMD and its\n"
	  "                         libraries, an /init that runs CMD and powers off)\n", NULL },
	{ "append", OPT_APPEND, CLI_ARG, "      --append ARGS      more kernel command line\n", NULL },
	{ "user", OPT_USER, CLI_NOARG,
	  "Hardware backends (pt, bts, lbr; docs/record.md):\n"
	  "      --user, --kernel   trace user / kernel code (default: user only; with\n"
	  "                         --system: both)\n"
	  "  -p, --attach PID       attach to running process PID instead of a command\n", NULL },
	{ "kernel", OPT_KERNEL, CLI_NOARG, NULL, NULL },
	{ "all-cpus", 'a', CLI_NOARG,
	  "  -a, --all-cpus         every process on every CPU while CMD runs (or until\n"
	  "                         Ctrl-C without CMD)\n", NULL },
	{ "per-thread", OPT_PERTHREAD, CLI_NOARG,
	  "      --per-thread       one ring for the first thread only, no inheritance\n"
	  "                         (default: one ring per CPU for the whole process tree)\n", NULL },
	{ "ip-filter", OPT_IPF, CLI_ARG,
	  "      --ip-filter SPEC   pt, qemu, step: trace only START-END@FILE, SYM@FILE or\n"
	  "                         (pt) START-END (kernel); repeatable (pt: up to the\n"
	  "                         CPU's range count, qemu, step: 8); TIP.PGD/TIP.PGE at\n"
	  "                         the edges (step: marker records); qemu runs code\n"
	  "                         outside without callbacks, step at full speed\n"
	  "                         (breakpoints where the flow comes back)\n", NULL },
	{ "pt-config", OPT_PTCFG, CLI_ARG,
	  "      --pt-config LIST   pt: cyc, cyc_thresh=N, mtc_period=N, psb_period=N,\n"
	  "                         notsc, nomtc, ptw, pwr_evt, nobranch\n", NULL },
	{ "lbr-filter", OPT_LBRF, CLI_ARG,
	  /* (--snapshot's entry is above; its hardware meaning is shown here) */
	  "      --snapshot         pt, bts: keep the newest AUX data in a ring; write it on\n"
	  "                         SIGUSR2 and at the end\n"
	  "      --lbr-filter EXPR  lbr: any, call, any_call, any_return, ind_call, ind_jump,\n"
	  "                         cond, call_stack, user, kernel, hw_index, save_type\n", NULL },
	{ "period", OPT_PERIOD, CLI_ARG, "      --period N         lbr: sample every N cycles (default 100003)\n", NULL },
	{ "aux-size", OPT_AUX, CLI_ARG, "      --aux-size BYTES   pt, bts: AUX area per ring (power of two, default 4 MiB)\n", NULL },
	{ "quiet", 'q', CLI_NOARG, "  -q, --quiet            do not say which backend was chosen\n", NULL },
	{ "verbose", 'v', CLI_NOARG,
	  "  -v, --verbose          say why that backend was chosen (every hardware\n"
	  "                         backend's reason; btr info says the same)\n", NULL },
	{ "no-progress", OPT_NOPROGRESS, CLI_NOARG,
	  "      --no-progress      no progress line on stderr (default: qemu shows it\n"
	  "                         while it writes the trace if stderr is a terminal;\n"
	  "                         not while CMD runs, whose output would share its\n"
	  "                         line); --progress or BTR_PROGRESS=1: always, also\n"
	  "                         while CMD runs (processes, trace bytes)\n", NULL },
	{ "progress", OPT_PROGRESS, CLI_NOARG, NULL, NULL },
	CLI_HELP_OPT,
	{ 0 },
};

/* Options end at CMD (POSIX mode), so CMD's own options stay CMD's. */
static const struct cli_cmd cmd = {
	"record",
	"Usage: btr record [OPTIONS] -- CMD [ARGS...]\n"
	"       btr record -b step -p PID [--duration SECONDS] [OPTIONS]\n"
	"Runs CMD and records its control flow into a .btr trace.  CMD's stdin, stdout\n"
	"and stderr pass through; btr exits with CMD's exit status (128+N if signal N\n"
	"killed it), or 2 (usage) / 3 (btr's own error: no trace is left under FILE;\n"
	"if the disk or $TMPDIR filled up, what was recorded is kept in FILE.partial).\n"
	"Ctrl-C (SIGINT, SIGTERM) goes to CMD while it runs; the trace is then complete.\n"
	"While the trace is written afterwards it stops btr: what was written is kept in\n"
	"FILE.partial, and btr ends by that signal (docs/record.md, \"Signals\").\n\n",
	opts,
	"qemu follows the whole process tree: every process started by CMD, including\n"
	"ones that outlive their parent, until all have exited (docs/record.md).\n",
	0, -1, NULL, NULL, 0, NULL, CLI_CMD_POSIX,
};

/* btr_capture_opts.progress: one line on stderr (cli_progress_show). */
static void record_progress(void *ctx, const struct btr_capture_progress *p)
{
	char b[32];
	/* While CMD runs it writes to the same terminal: a line rewritten in
	 * place would share a line with CMD's output ("btr: recording:
	 * startingline 1").  So on a terminal the line is drawn only once CMD's
	 * tree has ended (writing the trace), unless asked for (--progress,
	 * BTR_PROGRESS=1). */
	if (!p->writing && !*(const int *)ctx)
		return;
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

struct args {
	const char *backend;
	struct btr_capture_opts *o;
	int argc;
	char **argv;                /* --snapshot SIZE: the word after --snapshot */
	int quiet, verbose, inproc, hw_opt, system;
	int snap_bare;              /* --snapshot without a SIZE (pt, bts) */
	const char *ipf[8];
	struct btr_filter filter;   /* --filter, parsed here once (o->branch_filter) */
};

static int on_opt(void *ctx, int c, char *arg)
{
	struct args *x = ctx;
	struct btr_capture_opts *o = x->o;
	char *end;
	uint64_t v;
	if (c == OPT_SNAP && optind < x->argc && cli_parse_size(x->argv[optind], &v) == 0) {
		/* --snapshot SIZE (qemu): the size is the next word; --snapshot
		 * alone is the hardware backends' AUX snapshot mode */
		if (v < (16u << 10) || v > (1u << 30))
			return cli_usage_error("record", "bad --snapshot size '%s' (16K..1G)", x->argv[optind]);
		o->snapshot_size = v;
		optind++;
		return EXIT_OK;
	}
	if (c == OPT_USER || c == OPT_KERNEL || c == 'a' || c == OPT_PERTHREAD ||
	    c == OPT_PTCFG || c == OPT_SNAP || c == OPT_LBRF || c == OPT_PERIOD || c == OPT_AUX)
		x->hw_opt = 1;
	switch (c) {
	case 'b': x->backend = arg; break;
	case 'o': o->output = arg; break;
	case OPT_NORETCOMP: o->no_retcomp = 1; break;
	case OPT_GT: o->ground_truth = arg; break;
	case 'z':
		if (cli_parse_u64(arg, &v) < 0 || v > 19)
			return cli_usage_error("record", "bad compression level '%s'", arg);
		o->compress = (int)v;
		break;
	case 'q': x->quiet = 1; break;
	case 'v': x->verbose = 1; break;
	case OPT_PROGRESS: cli_progress_force(1); break;
	case OPT_NOPROGRESS: cli_progress_force(0); break;
	case 'p':
		if (cli_parse_u64(arg, &v) < 0 || !v || v > INT32_MAX)
			return cli_usage_error("record", "bad process id '%s'", arg);
		o->attach_pid = (int)v;
		break;
	case OPT_DURATION:
		o->duration = strtod(arg, &end);
		if (end == arg || *end || !(o->duration > 0) || o->duration > 1e6)
			return cli_usage_error("record", "bad duration '%s' (seconds > 0)", arg);
		break;
	case OPT_START: o->start = arg; break;
	case OPT_TRIGGER: o->trigger = arg; break;
	case OPT_MAXSNAP:
		if (cli_parse_u64(arg, &v) < 0 || !v || v > 1000000)
			return cli_usage_error("record", "bad --max-snapshots '%s' (1..1000000)", arg);
		o->max_snapshots = (unsigned)v;
		break;
	case OPT_STOP: o->stop = arg; break;
	case OPT_RING:
		if (cli_parse_u64(arg, &v) < 0 || !v || v > (1u << 24))
			return cli_usage_error("record", "bad ring size '%s' (1..16777216)", arg);
		o->ring = (uint32_t)v;
		break;
	case OPT_FILTER:
		if (btr_filter_parse(arg, &x->filter) < 0)
			return cli_usage_error("record", "bad filter '%s'", arg);
		o->branch_filter = &x->filter;
		break;
	case OPT_INPROC: x->inproc = 1; break;
	case OPT_NOFOLLOW: o->no_follow_fork = o->no_follow_exec = 1; break;
	case OPT_NOFORK: o->no_follow_fork = 1; break;
	case OPT_NOEXEC: o->no_follow_exec = 1; break;
	case OPT_MAXPROC:
		if (cli_parse_u64(arg, &v) < 0 || v == 0 || v > 1000000)
			return cli_usage_error("record", "bad --max-processes '%s' (1..1000000)", arg);
		o->max_processes = (unsigned)v;
		break;
	case OPT_SYSTEM: x->system = 1; break;
	case OPT_VMKERNEL: o->vm_kernel = arg; break;
	case OPT_INITRD: o->vm_initrd = arg; break;
	case OPT_APPEND: o->vm_append = arg; break;
	case OPT_USER: o->user = 1; break;
	case OPT_KERNEL: o->kernel = 1; break;
	case OPT_PERTHREAD: o->per_thread = 1; break;
	case OPT_SNAP: o->snapshot = x->snap_bare = 1; break;
	case 'a': o->system_wide = 1; break;
	case OPT_PTCFG: o->pt_config = arg; break;
	case OPT_LBRF: o->lbr_filter = arg; break;
	case OPT_IPF:
		if (o->n_ip_filters == 8)
			return cli_usage_error("record", "at most 8 --ip-filter options");
		x->ipf[o->n_ip_filters++] = arg;
		o->ip_filters = x->ipf;
		break;
	case OPT_PERIOD:
		if (cli_parse_u64(arg, &v) < 0 || v == 0)
			return cli_usage_error("record", "bad --period '%s'", arg);
		o->period = v;
		break;
	case OPT_AUX:
		if (cli_parse_u64(arg, &v) < 0 || v < 4096 || (v & (v - 1)))
			return cli_usage_error("record", "bad --aux-size '%s' (a power of two >= 4096)", arg);
		o->aux_size = v;
		break;
	}
	return EXIT_OK;
}

/* --system: the whole VM (btr_system_record). */
static int record_system(struct btr_capture_opts *o, const struct args *x, const char *backend)
{
	if (!o->argv)
		return cli_usage_error("record", "--system needs a command to run in the VM");
	if (strcmp(backend, "auto") || o->attach_pid || o->system_wide || o->per_thread || o->n_ip_filters ||
	    o->pt_config || o->snapshot || o->lbr_filter || o->period || o->aux_size || o->ground_truth ||
	    o->ring || o->start || x->inproc || o->snapshot_size || o->trigger)
		return cli_usage_error("record", "--system takes only -o, --user, --kernel, --vm-kernel, --initrd and "
				       "--append");
	if (!strcmp(o->output, "-"))
		return cli_usage_error("record", "--system writes a file: -o - is not possible");
	if (!x->quiet)
		fprintf(stderr, "btr: recording the whole VM with qemu-system-x86_64\n");
	struct btr_capture_result res = { 0 };
	int rc = btr_system_record(o, &res);
	if (rc < 0)
		return rc == -BTR_ERR_INVAL ? EXIT_USAGE : EXIT_RUNTIME;
	if (!x->quiet)
		fprintf(stderr, "btr: wrote %s (%llu bytes)\n", o->output, (unsigned long long)res.pt_bytes);
	return EXIT_OK;
}

int cmd_record(int argc, char **argv)
{
	struct btr_capture_opts o = { .sz = sizeof(o), .output = DEFAULT_OUTPUT };
	struct args x = { .backend = "auto", .o = &o, .argc = argc, .argv = argv };
	int first, prc = cli_cmd_parse(&cmd, argc, argv, NULL, on_opt, &x, &first);
	if (prc != EXIT_OK)
		return prc == CLI_CMD_DONE ? EXIT_OK : prc;
	const char *backend = x.backend;
	int quiet = x.quiet, verbose = x.verbose, inproc = x.inproc, hw_opt = x.hw_opt;
	int stepopt = o.duration > 0 || o.ring || o.branch_filter || inproc;
	if (o.attach_pid && first < argc)
		return cli_usage_error("record", "-p PID attaches to a running process: no command with it");
	if (o.attach_pid && o.system_wide)
		return cli_usage_error("record", "--pid and --all-cpus exclude each other");
	if (first >= argc && !o.attach_pid && !o.system_wide)
		return cli_usage_error("record", "no command given (btr record [OPTIONS] -- CMD [ARGS])");
	if (o.duration > 0 && !o.attach_pid)
		return cli_usage_error("record", "--duration needs -p PID");
	if (o.branch_filter && !o.ring)
		return cli_usage_error("record", "--filter needs --ring N");
	if (o.stop && !o.start)
		return cli_usage_error("record", "--stop needs --start");
	if ((o.trigger || o.max_snapshots) && !o.snapshot_size)
		return cli_usage_error("record", "--trigger and --max-snapshots need --snapshot SIZE");
	if (o.snapshot_size && !strcmp(backend, "auto"))
		backend = "qemu";   /* --snapshot SIZE: the qemu flight recorder */
	if (o.snapshot_size && strcmp(backend, "qemu"))
		return cli_usage_error("record", "--snapshot SIZE needs -b qemu (pt, bts: --snapshot alone, the AUX "
				       "area's size is --aux-size)");
	if ((stepopt || o.start) && !strcmp(backend, "auto"))
		backend = "step";   /* --start: step, as before qemu had it too */
	if (o.start && strcmp(backend, "step") && strcmp(backend, "qemu"))
		return cli_usage_error("record", "--start and --stop need -b step or qemu");
	if (stepopt && strcmp(backend, "step"))
		return cli_usage_error("record", "--duration, --ring, --filter and --inproc need -b step");
	o.argv = o.attach_pid || first >= argc ? NULL : argv + first;
	if ((o.vm_kernel || o.vm_initrd || o.vm_append) && !x.system)
		return cli_usage_error("record", "--vm-kernel, --initrd and --append need --system");
	if (x.system)
		return record_system(&o, &x, backend);

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
	if (x.snap_bare && !strcmp(b->name, "qemu"))
		return cli_usage_error("record", "-b qemu: --snapshot needs a SIZE (e.g. --snapshot 64K)");
	if (hw_opt && strcmp(b->name, "pt") && strcmp(b->name, "bts") && strcmp(b->name, "lbr"))
		return cli_usage_error("record", "--user/--kernel/--all-cpus/--per-thread/--pt-config/"
				       "--snapshot/--lbr-filter/--period/--aux-size need -b pt, bts or lbr");
	for (unsigned i = 0; (!strcmp(b->name, "qemu") || !strcmp(b->name, "step")) && i < o.n_ip_filters; i++)
		if (!strchr(o.ip_filters[i], '@'))
			return cli_usage_error("record", "--ip-filter '%s': -b %s traces user code only: give the file "
					       "(START-END@FILE or SYM@FILE)", o.ip_filters[i], b->name);
	if (o.n_ip_filters && strcmp(b->name, "pt") && strcmp(b->name, "qemu") && strcmp(b->name, "step"))
		return cli_usage_error("record", "--ip-filter needs -b pt, qemu or step (docs/record.md, \"Selecting "
				       "what is traced\")");
	if (o.n_ip_filters && !strcmp(b->name, "step") && (o.start || o.stop || o.ring))
		return cli_usage_error("record", "--ip-filter with -b step cannot be combined with %s",
				       o.ring ? "--ring" : "--start/--stop");

	static int live;   /* the line while CMD runs too (record_progress) */
	live = cli_progress_asked();
	if (cli_progress_wanted(0)) {
		o.progress = record_progress;
		o.progress_ctx = &live;
	}
	struct btr_capture_result res = { 0 };
	int rc = b->record(&o, &res);
	cli_progress_clear();
	if (rc >= 0)
		cli_output_replaced(&dst);
	cli_output_discard(&dst);
	if (rc == -BTR_ERR_UNSUPPORTED) {
		cli_error("backend %s cannot record yet (try -b qemu)", b->name);
		return EXIT_RUNTIME;
	}
	if (rc == -BTR_ERR_INTERRUPTED && res.signo > 0) {
		/* Stopped by SIGINT/SIGTERM before CMD ran or while the trace was
		 * written (the library said what it kept): end as that signal
		 * does, so that a calling shell's loop stops too. */
		signal(res.signo, SIG_DFL);
		raise(res.signo);
		return 128 + res.signo;
	}
	if (rc < 0) {
		/* The library already logged the one line naming the cause. */
		return EXIT_RUNTIME;
	}
	if (!strcmp(b->name, "step") && !quiet) {
		fprintf(stderr, "btr: step: %s; %llu steps, %llu branches", res.mode,
			(unsigned long long)res.steps, (unsigned long long)res.branches);
		if (o.n_ip_filters)
			fprintf(stderr, "; %llu stops outside the ranges", (unsigned long long)res.stops);
		fputc('\n', stderr);
	}
	if (res.untraced && !quiet)
		fprintf(stderr, "btr: %llu processes, %llu of them (or programs they ran) untraced (btr report says which)\n",
			(unsigned long long)res.processes, (unsigned long long)res.untraced);
	if (res.interrupted && !quiet)
		fprintf(stderr, "btr: interrupted; trace %s finalized\n", dst.name);
	if (!res.exited)
		return 128 + res.signo;
	return res.code;
}
