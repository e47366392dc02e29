/* test_qemu_record.c - software capture end to end: `btr record -b qemu
 * --ground-truth` on test programs, then decode every thread's PT stream
 * (libipt's instruction decoder, the reference, and btr's own flow
 * decoder) and compare the full sequence of executed instruction
 * addresses with the plugin's ground-truth log (one per-instruction
 * callback per executed instruction, independent of the PT encoder). */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "flowdiff.h"
#include "btr/error.h"
#include "btr/trace.h"
#include "btr/insn.h"

#define BTR BTR_BINARY_DIR "/btr"
#define MAXT 64

struct thread_data {
	uint32_t tid;
	uint8_t *pt;
	size_t pt_n, pt_cap;
	uint64_t next_off;
	int offset_gap;
	uint64_t *gt;
	size_t gt_n;
};

struct rec {
	struct btr_image *img;
	struct thread_data t[MAXT];
	int nt;
	int machine_first, retcomp, user_only;
	int n_modules, n_thread_start, n_thread_exit, n_unload;
	int parents_ok;         /* every thread but the first names an earlier thread as parent */
	uint32_t first_tid;
	char unloaded[256];     /* path of the last module_unload */
	int have_exit;
	struct btr_rec_exit exit;
	uint64_t pt_bytes;
	uint64_t exe_bias;      /* load bias of the first module (the program) */
};

static struct thread_data *thread_of(struct rec *r, uint32_t tid)
{
	for (int i = 0; i < r->nt; i++)
		if (r->t[i].tid == tid)
			return &r->t[i];
	if (r->nt == MAXT)
		abort();
	struct thread_data *t = &r->t[r->nt++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

/* Runs btr record; returns the wait status of btr.  stdout of the
 * command goes to /dev/null. */
static int run_record(const char *out, const char *gt, int no_retcomp, char *const cmd[], const char *count)
{
	char *argv[64];
	int n = 0;
	argv[n++] = BTR;
	argv[n++] = "record";
	argv[n++] = "-q";
	argv[n++] = "-b";
	argv[n++] = "qemu";
	argv[n++] = "-o";
	argv[n++] = (char *)out;
	if (gt) {
		argv[n++] = "--ground-truth";
		argv[n++] = (char *)gt;
	}
	if (no_retcomp)
		argv[n++] = "--no-retcomp";
	argv[n++] = "--";
	for (int i = 0; cmd[i]; i++)
		argv[n++] = cmd[i];
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		if (count) {
			/* the independent counter in the same QEMU run */
			setenv("BTR_QEMU", BTR_SOURCE_DIR "/tests/tools/qemu_count.sh", 1);
			setenv("BTR_COUNT_PLUGIN", BTR_BINARY_DIR "/btr-insn-count.so", 1);
			setenv("BTR_COUNT_OUT", count, 1);
		}
		execv(BTR, argv);
		_exit(126);
	}
	int st;
	waitpid(pid, &st, 0);
	return st;
}

static void load_modules_and_streams(const char *path, struct rec *r)
{
	struct btr_trace_reader *rd;
	struct btr_record rec;
	memset(r, 0, sizeof(*r));
	CHECK_EQ(btr_image_new(&r->img), 0);
	CHECK_EQ(btr_trace_reader_new(path, &rd), 0);
	int first = 1, rc;
	while ((rc = btr_trace_read(rd, &rec)) == 0) {
		if (first) {
			r->machine_first = rec.type == BTR_REC_MACHINE;
			first = 0;
		}
		switch (rec.type) {
		case BTR_REC_MACHINE:
			CHECK_STR(rec.u.machine.backend, "qemu");
			r->retcomp = !!(rec.u.machine.flags & BTR_MACHINE_PT_RETCOMP);
			r->user_only = !!(rec.u.machine.flags & BTR_MACHINE_USER_ONLY);
			break;
		case BTR_REC_MODULE_LOAD: {
			struct stat st;
			if (!r->n_modules)
				r->exe_bias = rec.u.module.start - rec.u.module.pgoff;
			r->n_modules++;
			CHECK(rec.u.module.path && rec.u.module.path[0] == '/');
			CHECK(rec.u.module.build_id_len > 0);
			if (stat(rec.u.module.path, &st) == 0 && (uint64_t)st.st_size > rec.u.module.pgoff) {
				uint64_t sz = rec.u.module.size;
				if (sz > (uint64_t)st.st_size - rec.u.module.pgoff)
					sz = (uint64_t)st.st_size - rec.u.module.pgoff;
				CHECK_EQ(btr_image_add_file(r->img, rec.u.module.path, rec.u.module.pgoff, sz,
							    rec.u.module.start), 0);
			}
			break;
		}
		case BTR_REC_THREAD_START:
			if (!r->n_thread_start) {
				r->first_tid = rec.u.thread.tid;
				r->parents_ok = rec.u.thread.parent_tid == 0;
			} else {
				int known = 0;
				for (int i = 0; i < r->nt; i++)
					known |= r->t[i].tid == rec.u.thread.parent_tid;
				r->parents_ok &= known;
			}
			r->n_thread_start++;
			thread_of(r, rec.u.thread.tid);
			break;
		case BTR_REC_THREAD_EXIT:
			r->n_thread_exit++;
			break;
		case BTR_REC_MODULE_UNLOAD:
			r->n_unload++;
			snprintf(r->unloaded, sizeof(r->unloaded), "%s", rec.u.module.path ? rec.u.module.path : "");
			break;
		case BTR_REC_PT: {
			struct thread_data *t = thread_of(r, rec.u.data.tid);
			if (rec.u.data.stream_offset != t->next_off)
				t->offset_gap = 1;
			t->next_off = rec.u.data.stream_offset + rec.u.data.size;
			if (t->pt_n + rec.u.data.size > t->pt_cap) {
				t->pt_cap = (t->pt_n + rec.u.data.size) * 2;
				t->pt = realloc(t->pt, t->pt_cap);
			}
			memcpy(t->pt + t->pt_n, rec.u.data.data, rec.u.data.size);
			t->pt_n += rec.u.data.size;
			r->pt_bytes += rec.u.data.size;
			break;
		}
		case BTR_REC_PROCESS_EXIT:
			r->have_exit = 1;
			r->exit = rec.u.exit;
			break;
		default:
			break;
		}
	}
	CHECK_EQ(rc, -BTR_ERR_EOS);
	btr_trace_reader_free(rd);
}

static void load_gt(const char *path, struct rec *r)
{
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	struct { uint32_t magic, tid; uint64_t n; } h;
	while (fread(&h, sizeof(h), 1, f) == 1) {
		CHECK_EQ(h.magic, 0x54474254u);
		if (h.magic != 0x54474254u)
			break;
		struct thread_data *t = thread_of(r, h.tid);
		t->gt = realloc(t->gt, (t->gt_n + h.n) * 8);
		CHECK_EQ(fread(t->gt + t->gt_n, 8, h.n, f), h.n);
		t->gt_n += h.n;
	}
	fclose(f);
}

static void free_rec(struct rec *r)
{
	for (int i = 0; i < r->nt; i++) {
		free(r->t[i].pt);
		free(r->t[i].gt);
	}
	btr_image_free(r->img);
}

/* The independent counter's instructions for @tid (tests/tools/insn_count.c:
 * lines "PID TID COUNT" in @path, summed), or -1 without a line. */
static long long counter_of(const char *path, unsigned tid)
{
	FILE *f = fopen(path, "r");
	long long sum = -1, pid, t, n;
	char line[128];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lld %lld %lld", &pid, &t, &n) == 3 && t == (long long)tid)
			sum = (sum < 0 ? 0 : sum) + n;
	if (f)
		fclose(f);
	return sum;
}

/* Records @cmd and compares every thread's decoded flow with the ground
 * truth, and its length with the independent counter's count, run in
 * the same QEMU (the ground truth is btr's own plugin's log, edited by
 * gt_unlog to match what PT shows: not independent).  @faults: the
 * faulting instructions whose signal the program handles (all in one
 * thread): the counter's callback runs before an instruction executes, so
 * it counts them; they do not retire, and btr (PT: a FUP at them, then the
 * handler) does not.  Returns the total number of instructions compared. */
static uint64_t check_exact(const char *name, char *const cmd[], int no_retcomp, int expect_status,
			    int expect_threads, int faults, struct rec *keep)
{
	char out[256], gt[256], count[256];
	snprintf(out, sizeof(out), "qemu_test_%s.btr", name);
	snprintf(gt, sizeof(gt), "qemu_test_%s.gt", name);
	snprintf(count, sizeof(count), "qemu_test_%s.count", name);
	unlink(count);
	int have_counter = access(BTR_BINARY_DIR "/btr-insn-count.so", R_OK) == 0;
	if (!have_counter)
		printf("note: btr-insn-count.so not built: no independent count\n");
	int st = run_record(out, gt, no_retcomp, cmd, have_counter ? count : NULL);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), expect_status);

	struct rec r;
	load_modules_and_streams(out, &r);
	load_gt(gt, &r);
	CHECK(r.machine_first);
	CHECK_EQ(r.retcomp, !no_retcomp);
	CHECK(r.user_only);
	CHECK(r.n_modules >= 2);       /* the program and at least ld.so or libc */
	CHECK(r.have_exit);
	CHECK_EQ(r.n_thread_start, expect_threads);
	CHECK_EQ(r.n_thread_exit, expect_threads);
	CHECK(r.parents_ok);

	uint64_t total = 0;
	for (int i = 0; i < r.nt; i++) {
		struct thread_data *t = &r.t[i];
		char what[128];
		CHECK(!t->offset_gap);
		CHECK(t->gt_n > 0);
		CHECK(t->pt_n > 0);
		total += t->gt_n;
#ifdef BTR_HAVE_LIBIPT
		struct ipvec a = { 0 };
		int errs = flow_ipt(r.img, t->pt, t->pt_n, &a);
		long at = ipvec_diff(&a, t->gt, t->gt_n);
		snprintf(what, sizeof(what), "%s tid %u libipt", name, t->tid);
		if (at >= 0 || errs)
			ipvec_report(what, &a, t->gt, t->gt_n, at);
		CHECK_EQ(errs, 0);
		CHECK_EQ(at, -1);
		ipvec_free(&a);
#else
		check_oracle_missing("libipt (built without libipt-dev): the recorded PT decoded by libipt vs the ground truth");
#endif
		struct ipvec b = { 0 };
		struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .no_retcomp = no_retcomp, .tid = t->tid };
		int rc = flow_btr(r.img, &cfg, t->pt, t->pt_n, 0, &b);
		long bt = ipvec_diff(&b, t->gt, t->gt_n);
		snprintf(what, sizeof(what), "%s tid %u btr_ptflow", name, t->tid);
		if (bt >= 0 || rc < 0 || b.gaps)
			ipvec_report(what, &b, t->gt, t->gt_n, bt);
		CHECK(rc >= 0);
		CHECK_EQ(b.gaps, 0);
		CHECK_EQ(bt, -1);
		if (have_counter) {
			/* Decoded instructions == the independent count.  A
			 * process killed by a signal has no counter line: QEMU
			 * 7.2 dumps core without running the plugins' exit
			 * callbacks (tests/tools/insn_compare.py says more). */
			long long c = counter_of(count, t->tid);
			/* abort() ends in system calls after which the counter
			 * says its counts (tests/tools/insn_count.c): exact; a
			 * fault (SIGSEGV) ends between two, uncounted */
			int sig = WIFEXITED(st) && WEXITSTATUS(st) > 128 ? WEXITSTATUS(st) - 128 : 0;
			CHECK(sig != SIGABRT || c >= 0);
			if (sig == SIGSEGV && c >= 0 && c < (long long)b.n) {
				/* the count up to the last system call: a lower bound */
				printf("note: %s tid %u killed by SIGSEGV: %lld instructions counted up to its last system call, "
				       "%zu decoded\n", name, t->tid, c, b.n);
			} else if (c < 0 && sig) {
				printf("note: %s tid %u killed by signal %d: no independent count\n", name, t->tid,
				       WEXITSTATUS(st) - 128);
			} else {
				if (c != (long long)b.n)
					printf("%s tid %u: decoded %zu instructions, independent counter %lld\n", name,
					       t->tid, b.n, c);
				CHECK_EQ(c, b.n + faults);
				CHECK_EQ(c, t->gt_n + faults);
			}
		}
		ipvec_free(&b);
	}
	printf("%s: %d threads, %llu instructions, %llu PT bytes (%.4f bytes/insn)\n", name, r.nt,
	       (unsigned long long)total, (unsigned long long)r.pt_bytes,
	       total ? (double)r.pt_bytes / (double)total : 0.0);
	if (keep)
		*keep = r;
	else
		free_rec(&r);
	unlink(out);
	unlink(gt);
	unlink(count);
	return total;
}

/* Asynchronous signals: each FUP (async event) must name the instruction
 * at which the thread resumes after the handler (the first enable after
 * it, the handler having no system call but rt_sigreturn).  A signal that
 * is pending when the handler returns is delivered by the kernel as
 * rt_sigreturn returns: as on hardware, that is an enable at the handler
 * (TIP.PGE, no FUP: the thread never ran user code in between), and the
 * resume that counts is the enable after that handler's rt_sigreturn. */
struct asyncchk {
	int in_async, want_to;
	uint64_t from;
	uint64_t handler[8];   /* targets of asynchronous branches seen */
	int n_handler;
	int n, ok, nested;
};

static int ac_branch(void *ctx, const struct btr_branch *b)
{
	struct asyncchk *a = ctx;
	if (b->kind == BTR_KIND_ASYNC && b->to) {
		int known = 0;
		for (int i = 0; i < a->n_handler; i++)
			known |= a->handler[i] == b->to;
		if (!known && a->n_handler < 8)
			a->handler[a->n_handler++] = b->to;
	}
	return 0;
}

static int ac_event(void *ctx, const struct btr_flow_event *ev)
{
	struct asyncchk *a = ctx;
	if (ev->type == BTR_FLOW_ASYNC) {
		a->in_async = 1;
		a->from = ev->ip;
	} else if (ev->type == BTR_FLOW_ENABLE && a->in_async) {
		int at_handler = 0;
		for (int i = 0; i < a->n_handler; i++)
			at_handler |= ev->ip == a->handler[i] && ev->ip != a->from;
		if (at_handler) {
			a->nested++;   /* delivered as rt_sigreturn returned: wait on */
			return 0;
		}
		a->in_async = 0;
		a->n++;
		a->ok += ev->ip == a->from;
	}
	return 0;
}

static void check_async_resume(char *const cmd[])
{
	const char *out = "qemu_test_async_resume.btr";
	int st = run_record(out, NULL, 0, cmd, NULL);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct rec r;
	load_modules_and_streams(out, &r);
	struct asyncchk a = { 0 };
	for (int i = 0; i < r.nt; i++) {
		struct btr_ptflow *f;
		struct btr_ptflow_config cfg = { .sz = sizeof(cfg), .tid = r.t[i].tid };
		struct btr_ptflow_callbacks cb = { .branch = ac_branch, .event = ac_event, .ctx = &a };
		CHECK_EQ(btr_ptflow_new(r.img, &cfg, &f), 0);
		CHECK(btr_ptflow_decode(f, r.t[i].pt, r.t[i].pt_n, &cb) >= 0);
		btr_ptflow_free(f);
	}
	printf("async: %d signals, %d with the FUP at the resume address, %d delivered as a handler returned\n", a.n,
	       a.ok, a.nested);
	CHECK(a.n >= 5);
	CHECK_EQ(a.ok, a.n);
	free_rec(&r);
	unlink(out);
}

/* Built with AddressSanitizer (make asan builds the test programs so)?
 * Such a guest reserves terabytes of shadow memory, which QEMU 7.2 user
 * mode backs with page tables of its own: it gets OOM-killed. */
static int is_asan(const char *p)
{
	FILE *f = fopen(p, "rb");
	if (!f)
		return 0;
	static char buf[1 << 16];
	size_t n;
	int found = 0;
	while (!found && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		found = memmem(buf, n, "__asan_init", 11) != NULL;
	fclose(f);
	return found;
}

static int have(const char *p)
{
	if (access(p, X_OK))
		return 0;
	if (is_asan(p)) {
		printf("note: %s is built with ASan, not run under QEMU\n", p);
		return 0;
	}
	return 1;
}

int main(void)
{
	char bin_demo[] = BTR_BINARY_DIR "/example_demo";
	if (access(BTR, X_OK) || access(BTR_BINARY_DIR "/btr-qemu.so", R_OK))
		check_skip("btr or btr-qemu.so not built");
	if (system("command -v qemu-x86_64 >/dev/null 2>&1") != 0)
		check_skip("qemu-x86_64 absent");

	/* loops, recursion, indirect calls, a jump table */
	if (have(bin_demo)) {
		char *cmd[] = { bin_demo, "12", NULL };
		CHECK(check_exact("demo", cmd, 0, 0, 1, 0, NULL) > 1000);
		CHECK(check_exact("demo_noretcomp", cmd, 1, 0, 1, 0, NULL) > 1000);
	}
	static const char *const progs[] = { "flow_loops", "flow_signals", "flow_except", "flow_threads",
					     "qemu_async", "qemu_mt" };
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		char path[512];
		snprintf(path, sizeof(path), BTR_BINARY_DIR "/prog_%s", progs[i]);
		if (!have(path)) {
			printf("note: %s not built or not usable, skipped\n", path);
			continue;
		}
		if (!check_sampled())   /* (BTR_SAMPLE_STEP: make asan records one in K) */
			continue;
		char *cmd[] = { path, NULL };
		int threads = !strcmp(progs[i], "flow_threads") ? 3 : !strcmp(progs[i], "qemu_mt") ? 4 : 1;
		/* flow_signals: one store through NULL, its SIGSEGV handled */
		int faults = !strcmp(progs[i], "flow_signals");
		CHECK(check_exact(progs[i], cmd, 0, 0, threads, faults, NULL) > 100);
		if (!strcmp(progs[i], "qemu_async"))
			check_async_resume(cmd);
	}

	/* run-time loading: module_load and module_unload of libm, flow in it */
	char dl[] = BTR_BINARY_DIR "/prog_qemu_dlopen";
	if (have(dl)) {
		struct rec r;
		char *cmd[] = { dl, NULL };
		CHECK(check_exact("dlopen", cmd, 0, 0, 1, 0, &r) > 1000);
		CHECK(r.n_modules >= 4);    /* program, ld.so, libc, libm */
		CHECK_EQ(r.n_unload, 1);
		CHECK(strstr(r.unloaded, "libm") != NULL);
		free_rec(&r);
	}

	/* crashes: the trace holds everything up to the fault (exactly), and
	 * the exit record names the signal and the faulting instruction */
	char crash[] = BTR_BINARY_DIR "/prog_qemu_crash";
	if (have(crash)) {
		struct rec r;
		char *cmd[] = { crash, NULL };
		CHECK(check_exact("crash", cmd, 0, 128 + SIGSEGV, 1, 1, &r) > 1000);
		CHECK_EQ(r.exit.signo, SIGSEGV);
		struct btr_image *img;
		struct btr_symbol sym = { 0 };
		CHECK_EQ(btr_image_new(&img), 0);
		CHECK_EQ(btr_image_add_elf(img, crash, r.exe_bias, 0), 0);
		CHECK_EQ(btr_image_symbol(img, r.exit.ip, &sym), 0);
		CHECK_STR(sym.name, "crash_here");
		/* the faulting instruction is the store through the NULL pointer */
		uint8_t code[16];
		char text[128] = "";
		CHECK(btr_image_read(img, r.exit.ip, code, sizeof(code)) > 0);
		btr_insn_format(code, sizeof(code), r.exit.ip, BTR_MODE_64, text, sizeof(text));
		CHECK(strstr(text, "mov") && strstr(text, "], r"));
		printf("crash at 0x%llx %s+0x%llx: %s\n", (unsigned long long)r.exit.ip, sym.name,
		       (unsigned long long)(r.exit.ip - sym.addr), text);
		btr_image_free(img);
		free_rec(&r);

		char *cmd2[] = { crash, "abort", NULL };
		CHECK(check_exact("abort", cmd2, 0, 128 + SIGABRT, 1, 0, &r) > 1000);
		CHECK_EQ(r.exit.signo, SIGABRT);
		CHECK(r.exit.ip != 0);
		free_rec(&r);
	}

	/* a real tool: gzip over a small file */
	if (have("/bin/gzip")) {
		FILE *f = fopen("qemu_test_input.txt", "w");
		for (int i = 0; i < 4000; i++)
			fprintf(f, "line %d of the btr qemu test, %x\n", i, i * 2654435761u);
		fclose(f);
		char *cmd[] = { "/bin/gzip", "-c", "qemu_test_input.txt", NULL };
		uint64_t n = check_exact("gzip", cmd, 0, 0, 1, 0, NULL);
		CHECK(n > 100000);
		unlink("qemu_test_input.txt");
	}
	return check_done();
}
