/* btr/capture.h - recording a program's control flow: capture backends.
 *
 * A backend is an ops table: a name, a probe that says whether it works
 * on this machine (and why not), and a record function that runs a
 * command under it and writes a .btr trace.  Backends: "pt", "bts",
 * "lbr" (hardware, through perf_event_open), "qemu" (software: a QEMU
 * TCG plugin that emits Intel PT) and "step" (ptrace single-stepping).
 * "qemu", "step" and the hardware backends record; the hardware ones
 * need the PMU (btr info says whether it is there).
 *
 * This module lives in lib/capture/, the only part of libbtr that makes
 * Linux-specific calls (fork, exec, perf_event_open, ptrace).
 */
#ifndef BTR_CAPTURE_H
#define BTR_CAPTURE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct btr_filter;   /* btr/branch.h */

#ifdef __cplusplus
extern "C" {
#endif

/* Result of a probe.  @reason is a short human-readable sentence: why the
 * backend is usable ("intel_pt PMU present") or the exact cause why not
 * ("/sys/bus/event_source/devices/intel_pt does not exist"). */
struct btr_capture_probe {
	bool usable;
	char reason[256];
};

/* Where a recording is (btr_capture_opts.progress). */
struct btr_capture_progress {
	int writing;              /* 0: the command runs; 1: the trace is being written */
	uint64_t processes;       /* 0: processes started so far (the command and its
				   * descendants, traced or not); 1: process traces
				   * written so far */
	uint64_t processes_total; /* 1: of this many (a program run after an exec
				   * has a trace of its own) */
	uint64_t bytes;           /* 0: bytes of trace the processes have written so far
				   * (a thread keeps up to 256 KiB in memory before it
				   * writes them); 1: bytes of PT data copied into the
				   * output so far */
};

/* Options of a recording.  Caller-owned; strings are borrowed for the
 * duration of the call. */
struct btr_capture_opts {
	size_t sz;                /* sizeof(struct btr_capture_opts) */
	const char *output;       /* the .btr file to write (required) */
	char *const *argv;        /* command and arguments, NULL-terminated (required) */
	int no_retcomp;           /* PT: disable return compression */
	const char *ground_truth; /* qemu: also log every executed instruction address here */
	const char *qemu;         /* qemu: the qemu-x86_64 binary (NULL: search PATH) */
	const char *plugin;       /* qemu: the plugin (NULL: $BTR_QEMU_PLUGIN, then next to /proc/self/exe) */
	int compress;             /* zstd level for the output, 0: none */
	/* step backend (lib/capture/step.c, docs/record.md) */
	int attach_pid;           /* > 0: attach to this running process (argv unused):
				   * step, pt, bts, lbr */
	double duration;          /* attach: detach after this many seconds (0: until it ends or SIGINT) */
	const char *start;        /* region start: symbol of the program or address (NULL: everything) */
	const char *stop;         /* region end: symbol or address (NULL: the start function's return) */
	uint32_t ring;            /* > 0: flight recorder, keep the last @ring branches per thread */
	const char *filter;       /* flight recorder: branches kept (btr_filter_parse syntax), NULL: all;
				   * parsed here only when @branch_filter is NULL */
	int inproc;               /* in-process agent (btr-step-agent.so) instead of ptrace where it
				   * can work; falls back to ptrace (saying why in res->mode) */
	/* qemu: processes (docs/record.md).  Children of fork, vfork and clone
	 * without CLONE_VM and programs started by execve are traced unless
	 * these say otherwise; they then run untraced, which the trace says
	 * with a PROCESS untraced record. */
	int no_follow_fork;
	int no_follow_exec;
	unsigned max_processes;   /* at most this many traced processes; 0: 1000 */

	/* Hardware backends (pt, bts, lbr through perf_event_open;
	 * lib/capture/perf_*.c, docs/record.md).  Zero means the default. */
	int user, kernel;         /* trace user / kernel code (neither set: user only) */
	int system_wide;          /* -a: every process on every CPU while argv runs */
	int per_thread;           /* one ring for the traced thread (no inheritance)
				   * instead of one per CPU (see docs/record.md) */
	const char *const *ip_filters; /* pt, qemu, step: --ip-filter specs (btr_ip_filter_parse) */
	unsigned n_ip_filters;
	const char *pt_config;    /* pt: "cyc,cyc_thresh=N,mtc_period=N,psb_period=N,
				   * notsc,nomtc,ptw,pwr_evt" (btr_pt_opts_parse) */
	int snapshot;             /* pt, bts: AUX in overwrite mode; the newest data is
				   * written on SIGUSR2 and at the end */
	const char *lbr_filter;   /* lbr: btr_lbr_filter_parse expression (default any,user) */
	uint64_t period;          /* lbr: sample every N cycles (0: 100003) */
	uint64_t aux_size;        /* pt, bts: AUX area bytes per ring (0: 4 MiB; a power of two) */
	const char *sysfs_root;   /* tests: where the PMUs are described (NULL: /sys/...) */
	/* appended: progress (NULL: none; the qemu backend only), for a
	 * caller that shows it (the library never prints): called with
	 * @progress_ctx about every @progress_ms milliseconds (0: 250) while
	 * the command runs, and after each process's trace while the final
	 * trace is written.  It only reports; it runs in the recorder, not in
	 * a signal handler. */
	void (*progress)(void *ctx, const struct btr_capture_progress *p);
	void *progress_ctx;
	unsigned progress_ms;
	/* appended: */
	int output_fd;            /* > 0: write the trace through this open descriptor (stdout,
				   * a pipe; btr_trace_writer_new_fd), @output only naming it in
				   * messages; 0: create @output (btr_trace_writer_new) */
	/* appended: the flight recorder's branch filter already parsed (the
	 * CLI parses --filter once, with btr_filter_parse, to report a bad
	 * one as a usage error); borrowed for the call.  When set, @filter is
	 * not read; NULL: @filter as above. */
	const struct btr_filter *branch_filter;
	/* appended: whole-system recording (btr_system_record,
	 * docs/record.md "Whole-system recording"): @argv runs inside a VM
	 * booted under qemu-system-x86_64; @user / @kernel select the CPL
	 * traced (neither or both: all). */
	const char *vm_kernel;    /* the kernel to boot (NULL: the newest /boot/vmlinuz-*) */
	const char *vm_initrd;    /* the initramfs (NULL: generated: busybox, @argv[0] and its libraries) */
	const char *vm_append;    /* more kernel command line, or NULL */
	/* appended: qemu flight recorder (docs/record.md "Snapshots"): each
	 * thread keeps its last @snapshot_size bytes of PT (>= 16 KiB) and
	 * writes them as a window (BTR_REC_WINDOW) on SIGUSR2 to the
	 * recorder, at its end, when its process dies of a signal, and at
	 * each entry of @trigger (SYM, ADDR or SYM@FILE, as @start), at most
	 * @max_snapshots (0: 16) trigger windows in all.  0: off. */
	uint64_t snapshot_size;
	const char *trigger;
	unsigned max_snapshots;
};

#define BTR_CAPTURE_MAX_PROCESSES 1000

/* How the recorded command ended (from waitpid), and trace statistics. */
struct btr_capture_result {
	int exited;               /* 1: exit(@code); 0: killed by signal @signo */
	int code;
	int signo;
	uint64_t crash_ip;        /* killed by a signal: the IP it happened at, 0 if unknown */
	uint64_t threads;         /* threads seen */
	uint64_t modules;         /* module load records */
	uint64_t pt_bytes;        /* trace bytes written */
	int interrupted;          /* a SIGINT/SIGTERM reached the recorder while recording */
	uint64_t steps;           /* step: traps taken */
	uint64_t branches;        /* step: branch records written */
	int inproc;               /* step: the in-process agent traced (not ptrace) */
	char mode[256];           /* step: how it ran ("PTRACE_SINGLESTEP (BTF ...)") */
	uint64_t processes;       /* processes traced (the command and its descendants) */
	uint64_t untraced;        /* processes or programs that ran untraced (PROCESS untraced records) */
	uint64_t stops;           /* step --ip-filter: stops of threads running outside the ranges
				   * (breakpoint hits, system calls), beside the @steps inside */
};

struct btr_capture_backend {
	const char *name;
	const char *description;
	/* Fills @out.  Never fails: an error is "usable = false" plus reason. */
	void (*probe)(struct btr_capture_probe *out);
	/* Runs @opts->argv under the backend and writes @opts->output
	 * completely or not at all.  The command's stdin/stdout/stderr are
	 * inherited.  Returns 0 when the command ran (whatever its exit
	 * status, which is in @res), or a negative error: -BTR_ERR_CHILD (the
	 * command cannot be started; nothing written), -BTR_ERR_PERM /
	 * -BTR_ERR_NOENT / -BTR_ERR_IO (the output cannot be created; checked
	 * before the command starts), -BTR_ERR_NODEV (backend unusable),
	 * -BTR_ERR_UNSUPPORTED (backend cannot record yet), -BTR_ERR_INVAL. */
	int (*record)(const struct btr_capture_opts *opts, struct btr_capture_result *res);
};

/* Number of backends, and the @i-th (0 <= i < count), in the order
 * pt, bts, lbr, qemu, step. */
size_t btr_capture_count(void);
const struct btr_capture_backend *btr_capture_get(size_t i);

/* The backend named @name, or NULL. */
const struct btr_capture_backend *btr_capture_find(const char *name);

/* Probes backend @b into @out.  usable is true only if `btr record -b
 * NAME` can record with it on this machine: a backend whose mechanism works
 * but that has no recorder yet is reported unusable, with both facts in
 * the reason.  Never fails. */
void btr_capture_probe_backend(const struct btr_capture_backend *b, struct btr_capture_probe *out);

/* Chooses the backend for "-b auto": the first usable hardware backend
 * that can record (pt, bts, lbr), else qemu.  Stores the choice in *@out
 * and a one-line explanation in @why (@why_size bytes).  Returns 0 or
 * -BTR_ERR_NODEV if nothing is usable. */
int btr_capture_auto(const struct btr_capture_backend **out, char *why, size_t why_size);

/* Checks that @cmd (a path, or a name searched in PATH like execvp)
 * names an executable x86-64 ELF file, or a `#!` script whose interpreter
 * (nested ones resolved like the kernel) is one, and stores the path of
 * @cmd in @buf.  Returns 0 or -BTR_ERR_CHILD (the reason is logged: not
 * found, not executable, not x86-64 ELF, 32-bit, set-uid). */
int btr_capture_check_command(const char *cmd, char *buf, size_t size);

/* Probes (lib/capture/probe.c). */
void btr_probe_pt(struct btr_capture_probe *out);
void btr_probe_bts(struct btr_capture_probe *out);
void btr_probe_lbr(struct btr_capture_probe *out);
void btr_probe_qemu(struct btr_capture_probe *out);
void btr_probe_step(struct btr_capture_probe *out);

/* The step backend's record function (lib/capture/step.c). */
int btr_step_record(const struct btr_capture_opts *opts, struct btr_capture_result *res);

/* Probes whether PTRACE_SINGLEBLOCK traps on branches only (BTF honoured
 * by kernel, CPU and hypervisor): steps a child through a known sequence
 * of 5 instructions with 2 taken jumps and counts the traps.  Returns 1
 * (block stepping works), 0 (it single-steps or does nothing useful;
 * @why says what was seen), or a negative error. */
int btr_step_probe_btf(char *why, size_t size);

/* The hardware backends' record functions (lib/capture/perf_pt.c,
 * perf_bts.c, perf_lbr.c).  Where the PMU is missing they log one line
 * naming what is missing and the alternative (-b qemu, -b step) and
 * return -BTR_ERR_NODEV before creating anything. */
int btr_pt_record(const struct btr_capture_opts *opts, struct btr_capture_result *res);
int btr_bts_record(const struct btr_capture_opts *opts, struct btr_capture_result *res);
int btr_lbr_record(const struct btr_capture_opts *opts, struct btr_capture_result *res);

struct btr_hwinfo;
/* Gathers the facts `btr info` shows (btr/hwinfo.h): CPUID (vendor,
 * family/model, hypervisor, DS, PT leaf 0x14, architectural LBR), the
 * LBR format from IA32_PERF_CAPABILITIES through /dev/cpu/0/msr when
 * readable, the PMUs under @sysfs_root (NULL: /sys/...), and
 * kernel.perf_event_paranoid (lib/capture/probe.c).  Never fails. */
void btr_hwinfo_gather(const char *sysfs_root, struct btr_hwinfo *out);

/* Whole-system recording (lib/capture/qemu_system.c): boots the kernel
 * (@opts->vm_kernel, else the newest in /boot, with its System.map) under
 * qemu-system-x86_64 ($BTR_QEMU_SYSTEM, else PATH) with the plugin
 * btr-qemu-system.so ($BTR_QEMU_SYSTEM_PLUGIN, else beside btr), running
 * @opts->argv as the VM's only program, and writes the whole machine's
 * flow to @opts->output.  Returns 0 or a negative enum btr_error (the
 * reason logged). */
int btr_system_record(const struct btr_capture_opts *opts, struct btr_capture_result *res);

/* The qemu backend's record function (lib/capture/qemu.c). */
int btr_qemu_record(const struct btr_capture_opts *opts, struct btr_capture_result *res);

/* Finds the qemu-x86_64 binary: @hint if non-NULL, else $BTR_QEMU, else
 * the first candidate of btr_qemu_select that exists (not probed).
 * Writes it to @buf; returns 0 or -BTR_ERR_NOENT. */
int btr_qemu_find(const char *hint, char *buf, size_t size);

/* One qemu-x86_64 that the qemu backend considered (btr_qemu_select). */
struct btr_qemu_candidate {
	char path[4096];
	const char *source;   /* "BTR_QEMU", "PATH", "system", "self-built", "installed" */
	bool usable;          /* it loads btr's plugin */
	char version[32];     /* e.g. "7.2.22"; "" when unknown */
	char why[768];        /* why it is not usable ("" when it is) */
};
#define BTR_QEMU_MAX_CANDIDATES 5
struct btr_qemu_selection {
	size_t n;             /* candidates tried, in order */
	int chosen;           /* index of the one used; -1: none usable */
	struct btr_qemu_candidate c[BTR_QEMU_MAX_CANDIDATES];
};

/* Chooses the qemu-x86_64 that records with plugin @plugin: @hint (or
 * $BTR_QEMU) alone when given; otherwise the first one that loads the
 * plugin of, in order: qemu-x86_64 in PATH, /usr/bin/qemu-x86_64, the one
 * scripts/build-qemu.sh built and cached
 * (${BTR_QEMU_CACHE:-${XDG_CACHE_HOME:-~/.cache}/btr}/qemu-VERSION/bin,
 * the newest complete one) and the one `make install` put beside btr
 * (PREFIX/lib/btr/qemu-x86_64).  A file met twice is tried once; a
 * statically linked one is rejected without running it (it cannot load
 * plugins); the others with btr_qemu_probe_plugin (cached per process).
 * Candidates after the chosen one are not tried.  Returns 0 with
 * @out->chosen >= 0, or -BTR_ERR_NODEV (@out says why each was rejected;
 * @out->n == 0: none exists), or -BTR_ERR_INVAL. */
int btr_qemu_select(const char *hint, const char *plugin, struct btr_qemu_selection *out);

/* Finds the plugin: @hint, else $BTR_QEMU_PLUGIN, else btr-qemu.so in the
 * directory of /proc/self/exe.  Returns 0 or -BTR_ERR_NOENT. */
int btr_qemu_find_plugin(const char *hint, char *buf, size_t size);

/* Checks that QEMU binary @qemu really loads TCG plugin @plugin: runs it
 * once with the plugin (in probe mode, which does nothing) on /bin/true;
 * the answer is kept for the life of the process.  Returns 0, or
 * -BTR_ERR_NODEV with the reason and the remedy in @why (@why_size bytes,
 * may be NULL). */
int btr_qemu_probe_plugin(const char *qemu, const char *plugin, char *why, size_t why_size);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
