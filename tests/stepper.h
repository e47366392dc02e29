/* stepper.h - test-side ground truth: runs a program under ptrace,
 * single-steps its main thread from main() until main returns (or the
 * process exits) and records every instruction address, plus a snapshot
 * of all executable mappings as a struct btr_image.  Test code only (it
 * forks and uses ptrace; lib/ must not).  Each step costs ~90 us: keep
 * the programs at tens of thousands of instructions.
 */
#ifndef BTR_TEST_STEPPER_H
#define BTR_TEST_STEPPER_H

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btr/image.h"
#include "btr/insn.h"

struct step_trace {
	uint64_t *ip;       /* instructions in execution order */
	uint8_t *fault;     /* 1: this instruction faulted (did not retire) */
	size_t n, cap;
	uint64_t end_ip;    /* where execution went after the last one (main's return address) */
	uint64_t main_lo, main_hi;  /* main's address range (inclusive) */
	uint64_t exe_base;          /* load address of the executable (offset 0) */
	struct btr_image *img;  /* every executable mapping, snapshot at main */
	int exited;
};

static inline void step_trace_free(struct step_trace *t)
{
	free(t->ip);
	free(t->fault);
	if (t->img)
		btr_image_free(t->img);
	memset(t, 0, sizeof(*t));
}

static inline int step_push(struct step_trace *t, uint64_t ip)
{
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 65536;
		uint64_t *a = realloc(t->ip, nc * sizeof(*a));
		uint8_t *b = realloc(t->fault, nc);
		if (!a || !b) {
			free(a == t->ip ? NULL : a);
			return -1;
		}
		t->ip = a;
		t->fault = b;
		t->cap = nc;
	}
	t->fault[t->n] = 0;
	t->ip[t->n++] = ip;
	return 0;
}

/* Offset of symbol "main" and whether @path is ET_DYN, through nm. */
static inline int step_main_sym(const char *path, uint64_t *off, uint64_t *size, int *is_dyn)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "nm -P --defined-only '%.4096s' 2>/dev/null", path);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[512];
	int found = 0;
	while (fgets(line, sizeof(line), p)) {
		char name[256], type[8];
		unsigned long long v, sz = 0;
		if (sscanf(line, "%255s %7s %llx %llx", name, type, &v, &sz) >= 3 && !strcmp(name, "main")) {
			*off = v;
			*size = sz;
			found = 1;
		}
	}
	pclose(p);
	FILE *e = fopen(path, "rb");
	if (!e)
		return -1;
	Elf64_Ehdr eh;
	if (fread(&eh, sizeof(eh), 1, e) != 1) {
		fclose(e);
		return -1;
	}
	fclose(e);
	*is_dyn = eh.e_type == ET_DYN;
	return found ? 0 : -1;
}

/* Adds every executable mapping of @pid to @img (bytes read through
 * /proc/PID/mem, so the vDSO and relocated code are included); returns
 * the load base of @exe (its mapping at file offset 0) in *@base. */
static inline int step_snapshot(pid_t pid, const char *exe, struct btr_image *img, uint64_t *base)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *m = fopen(path, "r");
	if (!m)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		fclose(m);
		return -1;
	}
	char real[4096];
	if (!realpath(exe, real))
		snprintf(real, sizeof(real), "%s", exe);
	char line[4096];
	*base = 0;
	while (fgets(line, sizeof(line), m)) {
		unsigned long long lo, hi, off;
		char perms[8], file[4096] = "";
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &lo, &hi, perms, &off, file) < 4)
			continue;
		char *f = file;
		while (*f == ' ')
			f++;
		if (!*base && off == 0 && !strcmp(f, real))
			*base = lo;
		if (perms[2] != 'x' || !strcmp(f, "[vsyscall]"))
			continue;
		size_t len = hi - lo;
		uint8_t *buf = malloc(len);
		if (!buf)
			continue;
		if (pread(fd, buf, len, (off_t)lo) == (ssize_t)len)
			btr_image_add_bytes(img, buf, len, lo);
		free(buf);
	}
	close(fd);
	fclose(m);
	return 0;
}

/* Returns 1 if this process may ptrace a child (containers may forbid
 * it: then the stepping tests skip). */
static inline int step_available(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
			_exit(1);
		raise(SIGSTOP);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return 0;
	int ok = WIFSTOPPED(st);
	if (ok) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	return ok;
}

/* Runs @argv[0] (a path) and records the main thread from main() on.
 * Returns 0, or -1 with a message on stderr. */
static inline int step_run(char *const argv[], size_t max_steps, struct step_trace *t)
{
	memset(t, 0, sizeof(*t));
	uint64_t main_off = 0, main_size = 0;
	int is_dyn;
	if (step_main_sym(argv[0], &main_off, &main_size, &is_dyn)) {
		fprintf(stderr, "stepper: no main in %s\n", argv[0]);
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		personality(ADDR_NO_RANDOMIZE);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFSTOPPED(st)) {
		fprintf(stderr, "stepper: exec of %s failed\n", argv[0]);
		return -1;
	}
	/* The executable is mapped at exec; find its base for PIE. */
	uint64_t base = 0;
	{
		struct btr_image *tmp;
		btr_image_new(&tmp);
		step_snapshot(pid, argv[0], tmp, &base);
		btr_image_free(tmp);
	}
	uint64_t main_addr = is_dyn ? base + main_off : main_off;
	t->main_lo = main_addr;
	t->exe_base = base;
	t->main_hi = main_addr + (main_size ? main_size : 1) - 1;
	errno = 0;
	long orig = ptrace(PTRACE_PEEKTEXT, pid, (void *)main_addr, NULL);
	if (errno) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return -1;
	}
	ptrace(PTRACE_POKETEXT, pid, (void *)main_addr, (void *)((orig & ~0xffL) | 0xcc));
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	struct user_regs_struct regs;
	for (;;) {
		if (waitpid(pid, &st, 0) < 0 || !WIFSTOPPED(st)) {
			fprintf(stderr, "stepper: %s did not reach main\n", argv[0]);
			return -1;
		}
		ptrace(PTRACE_GETREGS, pid, NULL, &regs);
		if (WSTOPSIG(st) == SIGTRAP && regs.rip == main_addr + 1)
			break;
		ptrace(PTRACE_CONT, pid, NULL, (void *)(long)(WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st)));
	}
	ptrace(PTRACE_POKETEXT, pid, (void *)main_addr, (void *)orig);
	regs.rip = main_addr;
	ptrace(PTRACE_SETREGS, pid, NULL, &regs);
	uint64_t entry_rsp = regs.rsp;
	errno = 0;
	uint64_t ret_addr = (uint64_t)ptrace(PTRACE_PEEKDATA, pid, (void *)regs.rsp, NULL);

	btr_image_new(&t->img);
	step_snapshot(pid, argv[0], t->img, &base);

	int sig = 0;
	for (size_t steps = 0; steps < max_steps; steps++) {
		ptrace(PTRACE_GETREGS, pid, NULL, &regs);
		if (regs.rip == ret_addr && regs.rsp > entry_rsp) {
			t->end_ip = ret_addr;
			break;
		}
		/* A REP string instruction traps after every iteration: one
		 * instruction, many stops at the same address. */
		int dup = 0;
		if (t->n && t->ip[t->n - 1] == regs.rip && !sig) {
			uint8_t b[16];
			struct btr_insn in;
			if (btr_image_read(t->img, regs.rip, b, sizeof(b)) > 0 &&
			    btr_insn_decode(b, sizeof(b), regs.rip, BTR_MODE_64, &in) > 0 &&
			    in.kind == BTR_KIND_NONE)
				dup = 1;
		}
		if (!dup && step_push(t, regs.rip))
			break;
		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) < 0)
			break;
		sig = 0;
		if (waitpid(pid, &st, 0) < 0)
			break;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			t->exited = 1;
			t->end_ip = 0;
			break;
		}
		while (WIFSTOPPED(st) && WSTOPSIG(st) != SIGTRAP) {
			/* Signal-delivery stop: pass the signal on.  If it
			 * stopped at the instruction we just recorded, that
			 * instruction faulted and did not retire. */
			struct user_regs_struct r2;
			ptrace(PTRACE_GETREGS, pid, NULL, &r2);
			if (t->n && r2.rip == t->ip[t->n - 1])
				t->fault[t->n - 1] = 1;
			sig = WSTOPSIG(st);
			if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) < 0)
				break;
			sig = 0;
			if (waitpid(pid, &st, 0) < 0)
				break;
			if (WIFEXITED(st) || WIFSIGNALED(st)) {
				t->exited = 1;
				break;
			}
		}
		if (t->exited)
			break;
	}
	if (!t->exited) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	return 0;
}

#endif
