/* probe.c - which capture backends work on this machine, and why not.
 *
 * Every probe tries the real thing where it is cheap (open the PMU with
 * perf_event_open, single-step a child with ptrace) rather than guessing
 * from CPUID: in VMs and containers CPUID may advertise features that the
 * hypervisor or seccomp policy does not let through.
 */
#include "perf_ops.h"
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/hwinfo.h"
#include "internal.h"

#include <cpuid.h>
#include <fcntl.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#ifndef PTRACE_SINGLEBLOCK
#define PTRACE_SINGLEBLOCK 33
#endif


static void say(struct btr_capture_probe *out, bool usable, const char *fmt, ...)
	BTR_PRINTF(3, 4);

#include <stdarg.h>
static void say(struct btr_capture_probe *out, bool usable, const char *fmt, ...)
{
	va_list ap;
	out->usable = usable;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
}

/* Opens @attr on this process, any CPU (what `btr record` would do for
 * its child) and closes it again: 0, or -1 with errno set. */
static int perf_try(struct perf_event_attr *attr)
{
	const struct btr_perf_ops *k = btr_perf_ops_get();
	struct btr_perf_event_attr a;
	memcpy(&a, attr, sizeof(a));
	int fd = k->open(k->ctx, &a, 0, -1);
	if (fd < 0)
		return -1;
	k->close(k->ctx, fd);
	return 0;
}

static const char *paranoid_hint(int err)
{
	if (err != EACCES && err != EPERM)
		return "";
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	static char buf[96];
	int v = 0;
	if (f && fscanf(f, "%d", &v) == 1)
		snprintf(buf, sizeof(buf), " (kernel.perf_event_paranoid = %d)", v);
	else
		buf[0] = 0;
	if (f)
		fclose(f);
	return buf;
}

/* intel_pt / intel_bts: the PMU must exist in sysfs and open for user space. */
static void probe_pmu(struct btr_capture_probe *out, const char *pmu)
{
	const char *root = btr_perf_ops_get()->sysfs_root;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s/type", root, pmu);
	FILE *f = fopen(path, "re");
	if (!f) {
		say(out, false, "%s/%s does not exist (CPU or hypervisor offers no %s)", root, pmu, pmu);
		return;
	}
	int type = -1;
	if (fscanf(f, "%d", &type) != 1)
		type = -1;
	fclose(f);
	if (type < 0) {
		say(out, false, "cannot read %s", path);
		return;
	}
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = (uint32_t)type;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.disabled = 1;
	if (perf_try(&attr) < 0) {
		int e = errno;
		say(out, false, "perf_event_open(%s) failed: %s%s", pmu, strerror(e), paranoid_hint(e));
		return;
	}
	say(out, true, "%s PMU present and perf_event_open works", pmu);
}

void btr_probe_pt(struct btr_capture_probe *out)
{
	probe_pmu(out, "intel_pt");
}

void btr_probe_bts(struct btr_capture_probe *out)
{
	probe_pmu(out, "intel_bts");
}

void btr_probe_lbr(struct btr_capture_probe *out)
{
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.sample_period = 100000;
	attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK;
	attr.branch_sample_type = PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_USER;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.disabled = 1;
	if (perf_try(&attr) < 0) {
		int e = errno;
		const char *why = e == ENOENT ? " (no hardware cycles event: no PMU, e.g. in a VM)" :
				  e == EOPNOTSUPP ? " (the PMU has no branch stack)" : paranoid_hint(e);
		say(out, false, "perf_event_open(cycles, PERF_SAMPLE_BRANCH_STACK) failed: %s%s",
		    strerror(e), why);
		return;
	}
	say(out, true, "perf_event_open with PERF_SAMPLE_BRANCH_STACK works");
}

void btr_probe_qemu(struct btr_capture_probe *out)
{
	char p[4096];
	if (btr_qemu_find_plugin(NULL, p, sizeof(p)) < 0) {
		say(out, false, "plugin btr-qemu.so not found next to the btr binary (set BTR_QEMU_PLUGIN)");
		return;
	}
	struct btr_qemu_selection *s = malloc(sizeof(*s));
	if (!s) {
		say(out, false, "out of memory");
		return;
	}
	if (btr_qemu_select(NULL, p, s) == 0) {
		const struct btr_qemu_candidate *c = &s->c[s->chosen];
		say(out, true, "%s (%s%s%s) with plugin %s", c->path, c->source, c->version[0] ? ", QEMU " : "",
		    c->version, p);
	} else if (!s->n) {
		say(out, false, "qemu-x86_64 not found (install qemu-user, build one with `make qemu`, or set BTR_QEMU)");
	} else if (s->n == 1) {
		char why[sizeof(out->reason)];
		btr_qemu_probe_plugin(s->c[0].path, p, why, sizeof(why));
		say(out, false, "%s", why);
	} else {
		say(out, false, "no qemu-x86_64 here loads TCG plugins (%zu tried): build one with `make qemu` "
		    "(scripts/build-qemu.sh) or set BTR_QEMU", s->n);
	}
	free(s);
}

void btr_probe_step(struct btr_capture_probe *out)
{
	pid_t pid = fork();
	if (pid < 0) {
		say(out, false, "fork failed: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
			_exit(errno == EPERM ? 10 : 11);
		raise(SIGSTOP);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0) {
		say(out, false, "waitpid failed: %s", strerror(errno));
		return;
	}
	if (WIFEXITED(st)) {
		say(out, false, "ptrace(PTRACE_TRACEME) failed: %s",
		    WEXITSTATUS(st) == 10 ? "operation not permitted (seccomp or yama policy)" : "error");
		return;
	}
	int ok = 0;
	if (WIFSTOPPED(st) && ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) == 0 &&
	    waitpid(pid, &st, 0) == pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP)
		ok = 1;
	int e = errno;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	if (ok) {
		/* Which mode `-b step` runs in: block stepping if BTF works. */
		char why[200];
		int btf = btr_step_probe_btf(why, sizeof(why));
		say(out, true, "ptrace single-stepping works; %s; -b step uses %s", btf < 0 ? "BTF probe failed" : why,
		    btf == 1 ? "PTRACE_SINGLEBLOCK (a trap per branch)" : "PTRACE_SINGLESTEP (a trap per instruction)");
	}
	else
		say(out, false, "ptrace(PTRACE_SINGLESTEP) failed: %s", strerror(e));
}

/* ---- BTF probe ---- */

/* A known sequence: 5 instructions, 2 of them taken jumps, then int3. */
__asm__(".text\n"
	".globl btr__step_probe_seq\n"
	".hidden btr__step_probe_seq\n"   /* internal, as -fvisibility=hidden makes C code */
	".type btr__step_probe_seq,@function\n"
	"btr__step_probe_seq:\n"
	"  nop\n"
	"  jmp 1f\n"
	"1: nop\n"
	"  nop\n"
	"  jmp 2f\n"
	"2: int3\n"
	"  ud2\n"
	".size btr__step_probe_seq, .-btr__step_probe_seq\n");
extern char btr__step_probe_seq[];

int btr_step_probe_btf(char *why, size_t size)
{
	pid_t pid = fork();
	if (pid < 0)
		return btr_err_from_errno(errno);
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		_exit(0);
	}
	int st, traps = 0, ok = 0;
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) {
		snprintf(why, size, "the probe child did not stop");
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return 0;
	}
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) == 0) {
		regs.rip = (uint64_t)(uintptr_t)btr__step_probe_seq;
		ptrace(PTRACE_SETREGS, pid, NULL, &regs);
		uint64_t end = regs.rip + 1 + 2 + 1 + 1 + 2;   /* the int3 */
		for (traps = 0; traps < 12; traps++) {
			if (ptrace(PTRACE_SINGLEBLOCK, pid, NULL, NULL) < 0) {
				snprintf(why, size, "PTRACE_SINGLEBLOCK refused: %s", strerror(errno));
				traps = -1;
				break;
			}
			if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
				break;
			errno = 0;
			uint64_t ip = (uint64_t)ptrace(PTRACE_PEEKUSER, pid, (void *)offsetof(struct user_regs_struct, rip), NULL);
			if (ip >= end)
				break;
		}
		if (traps >= 0) {
			/* Block stepping traps after each of the 2 jumps, the second
			 * landing on the int3; single-stepping after each of the 5
			 * instructions. */
			ok = traps + 1 == 2;
			snprintf(why, size, "PTRACE_SINGLEBLOCK took %d traps over 5 instructions with 2 jumps (%s)",
				 traps + 1, ok ? "BTF honoured: block stepping" : "BTF not honoured: a trap per instruction");
		}
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return ok;
}

void btr_hwinfo_gather(const char *sysfs_root, struct btr_hwinfo *out)
{
	unsigned a, b, c, d, max = 0;
	memset(out, 0, sizeof(*out));
	out->lbr_format = -1;
	if (__get_cpuid(0, &max, &b, &c, &d)) {
		memcpy(out->vendor, &b, 4);
		memcpy(out->vendor + 4, &d, 4);
		memcpy(out->vendor + 8, &c, 4);
	}
	if (__get_cpuid(1, &a, &b, &c, &d)) {
		btr_cpuid_signature_decode(a, &out->family, &out->model, &out->stepping);
		out->hypervisor = (c >> 31) & 1;
		out->pdcm = (c >> 15) & 1;
		out->ds = (d >> 21) & 1;
	}
	if (out->hypervisor) {
		__cpuid(0x40000000, a, b, c, d);
		memcpy(out->hypervisor_vendor, &b, 4);
		memcpy(out->hypervisor_vendor + 4, &c, 4);
		memcpy(out->hypervisor_vendor + 8, &d, 4);
		for (int i = 0; i < 12; i++)
			if (out->hypervisor_vendor[i] && (out->hypervisor_vendor[i] < 32 || out->hypervisor_vendor[i] > 126))
				out->hypervisor_vendor[i] = '?';
		for (int i = 11; i >= 0 && (out->hypervisor_vendor[i] == ' ' || !out->hypervisor_vendor[i]); i--)
			out->hypervisor_vendor[i] = 0;
	}
	int pt = 0;
	if (max >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		pt = (b >> 25) & 1;
		out->arch_lbr = (d >> 19) & 1;
	}
	if (max >= 0x14) {
		uint32_t s0[4], s1[4];
		__cpuid_count(0x14, 0, s0[0], s0[1], s0[2], s0[3]);
		__cpuid_count(0x14, 1, s1[0], s1[1], s1[2], s1[3]);
		btr_pt_cpuid_decode(pt, s0, s1, &out->pt);
	}
	if (out->arch_lbr && max >= 0x1c) {
		__cpuid_count(0x1c, 0, a, b, c, d);
		out->arch_lbr_depths = a & 0xff;
	}
	/* IA32_PERF_CAPABILITIES (0x345) needs the msr driver and root */
	if (out->pdcm) {
		int fd = open("/dev/cpu/0/msr", O_RDONLY | O_CLOEXEC);
		uint64_t v;
		if (fd >= 0) {
			if (pread(fd, &v, 8, 0x345) == 8)
				out->lbr_format = (int)(v & 0x3f);
			close(fd);
		}
	}
	btr_hwinfo_sysfs(sysfs_root, out);
	out->paranoid = btr_hwinfo_paranoid(NULL);
}
