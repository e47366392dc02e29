/* test_memory_procs.c - memory stays flat in the number of processes
 * (issue 21, item 4; docs/architecture.md "Memory").
 *
 * One real recording of /bin/true (btr record -b qemu: the program, ld.so
 * and libc mapped, one thread of real PT) is copied into traces of
 * N_FEW and N_MANY processes with the library's trace writer, each copy
 * under its own pid and tid - what `sh -c 'for i in ...; do /bin/true;
 * done'` records, without recording it N times.  Then `btr report`,
 * `btr check`, `btr flame` and `btr cov` run over both, and their peak
 * resident set sizes (wait4's ru_maxrss) must grow by less than
 * SLOPE_KB per process and stay under ABS_KB.  Before module files were
 * shared between processes and decoders freed at thread exit, each
 * process cost about 7 MB (report) and 5 MB (check): 1,000 processes
 * took 6.9 GB and 5.0 GB.  Memory, not time, is asserted.  ~12 s.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btr/error.h"
#include "btr/trace.h"
#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define BTR BTR_BINARY_DIR "/btr"
#define N_FEW 20
#define N_MANY 100
#define SLOPE_KB 256          /* per process beyond N_FEW */
#define ABS_KB (256 * 1024)   /* the promise for 1,000 processes */

static uint32_t remap(uint32_t id, uint32_t from, uint32_t to)
{
	return id && id == from ? to : id;
}

/* Writes @n copies of the one-process trace @one into @out, process k
 * under pid (and tid) 200000 + k. */
static int replicate(const char *one, const char *out, int n)
{
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	struct btr_trace_writer *w;
	if (btr_trace_writer_new(out, &wo, &w) < 0)
		return -1;
	uint32_t pid0 = 0;
	for (int k = 0; k < n; k++) {
		struct btr_trace_reader *r;
		if (btr_trace_reader_new(one, &r) < 0) {
			btr_trace_writer_abort(w);
			return -1;
		}
		uint32_t to = 200000 + (uint32_t)k;
		struct btr_record rec;
		while (btr_trace_read(r, &rec) == 0) {
			switch (rec.type) {
			case BTR_REC_MACHINE:
				if (k)
					continue;
				break;
			case BTR_REC_PROCESS:
				if (!pid0)
					pid0 = rec.u.process.pid;
				rec.u.process.pid = remap(rec.u.process.pid, pid0, to);
				rec.u.process.ppid = 0;
				break;
			case BTR_REC_MODULE_LOAD:
			case BTR_REC_MODULE_UNLOAD:
			case BTR_REC_EXEC:
				rec.u.module.pid = remap(rec.u.module.pid, pid0, to);
				break;
			case BTR_REC_THREAD_START:
			case BTR_REC_THREAD_EXIT:
			case BTR_REC_THREAD_NAME:
				rec.u.thread.pid = remap(rec.u.thread.pid, pid0, to);
				rec.u.thread.tid = remap(rec.u.thread.tid, pid0, to);
				break;
			case BTR_REC_PT:
				rec.u.data.tid = remap(rec.u.data.tid, pid0, to);
				break;
			case BTR_REC_PROCESS_EXIT:
				rec.u.exit.pid = remap(rec.u.exit.pid, pid0, to);
				rec.u.exit.tid = remap(rec.u.exit.tid, pid0, to);
				break;
			default:
				break;
			}
			if (btr_trace_write(w, &rec) < 0) {
				btr_trace_reader_free(r);
				btr_trace_writer_abort(w);
				return -1;
			}
		}
		btr_trace_reader_free(r);
	}
	return btr_trace_writer_close(w) < 0 ? -1 : 0;
}

/* Runs `btr CMD TRACE` (output discarded; flame and cov: -o mem_procs.out); returns its peak RSS in kB, or
 * -1 if it did not exit 0 or 1. */
static long peak_kb(const char *cmd, const char *trace)
{
	/* flame and cov write a file */
	int out = !strcmp(cmd, "flame") || !strcmp(cmd, "cov");
	pid_t p = fork();
	if (p == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		dup2(fd, 2);
		if (out)
			execl(BTR, "btr", cmd, "-o", "mem_procs.out", trace, (char *)NULL);
		else
			execl(BTR, "btr", cmd, trace, (char *)NULL);
		_exit(127);
	}
	int st;
	struct rusage ru;
	if (p < 0 || wait4(p, &st, 0, &ru) != p || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
		return -1;
	return ru.ru_maxrss;
}

int main(void)
{
#ifdef UNDER_ASAN
	check_skip("the resident size under ASan is the sanitizer's (shadow, quarantine)");
#endif
	if (system("command -v qemu-x86_64 >/dev/null 2>&1") != 0)
		check_skip("qemu-x86_64 absent");
	if (access(BTR_BINARY_DIR "/btr-qemu.so", R_OK) != 0)
		check_skip("btr-qemu.so not built");
	char one[] = "mem_procs_one.btr", few[] = "mem_procs_few.btr", many[] = "mem_procs_many.btr";
	CHECK_EQ(system(BTR " record -q -b qemu -o mem_procs_one.btr -- /bin/true >/dev/null 2>&1"), 0);
	CHECK_EQ(replicate(one, few, N_FEW), 0);
	CHECK_EQ(replicate(one, many, N_MANY), 0);

	static const char *const cmds[] = { "report", "check", "flame", "cov" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		long a = peak_kb(cmds[i], few), b = peak_kb(cmds[i], many);
		printf("btr %s: %d processes %ld kB, %d processes %ld kB: %ld kB per process\n", cmds[i], N_FEW, a,
		       N_MANY, b, (b - a) / (N_MANY - N_FEW));
		CHECK(a > 0 && b > 0);
		CHECK(b - a < (long)SLOPE_KB * (N_MANY - N_FEW));
		CHECK(b < ABS_KB);
	}
	if (!getenv("BTR_KEEP")) {   /* BTR_KEEP=1: the traces stay for a look */
		unlink(one);
		unlink(few);
		unlink(many);
	}
	unlink("mem_procs.out");
	return check_done();
}
