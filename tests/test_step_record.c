/* test_step_record.c - trap-flag tracing (`btr record -b step`) end to
 * end: the branch stream decoded from a step trace (BTS records + the
 * instruction-count side stream) equals the one decoded from a qemu trace
 * (Intel PT) of the same deterministic program, branch for branch, with
 * exact instruction counts; both go through the same reader
 * (btr_stream).  PT reports not-taken conditional branches, BTS only taken
 * ones: the not-taken ones' instructions are added to the next taken
 * branch, as a BTS reader sees them. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "btr/capture.h"
#include "btr/branch.h"
#include "btr/error.h"
#include "btr/stream.h"
#include "btr/trace.h"

#define BTR BTR_BINARY_DIR "/btr"
#define MAXT 16

struct br {
	uint64_t from, to, insns;
	uint8_t kind;
	char where[160];      /* dynamic: "from -> to" symbolized */
};

struct thr {
	uint32_t tid;
	struct br *b;
	size_t n, cap;
	uint64_t pending;     /* insns of not-taken branches */
	uint64_t insns;       /* total */
	int insns_valid;
};

struct col {
	struct thr t[MAXT];
	int nt;
	int exits, signo;
	uint64_t exit_ip, exit_addr;
	uint32_t exit_tid;
	int procs, execs, thread_starts;
	char backend[16];
	struct btr_stream *s;
	const char *only_module; /* keep only branches from this module (base name) */
};

static const char *base(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : p ? p : "?";
}

static struct thr *thr_of(struct col *c, uint32_t tid)
{
	for (int i = 0; i < c->nt; i++)
		if (c->t[i].tid == tid)
			return &c->t[i];
	if (c->nt == MAXT)
		abort();
	struct thr *t = &c->t[c->nt++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->insns_valid = 1;
	return t;
}

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct col *c = ctx;
	struct thr *t = thr_of(c, b->tid);
	uint64_t n = (b->flags & BTR_BF_INSNS) ? b->insns : 0;
	if (!(b->flags & BTR_BF_INSNS))
		t->insns_valid = 0;
	t->insns += n;
	if (!(b->flags & BTR_BF_TAKEN)) {
		t->pending += n;
		return 0;
	}
	char where[160] = "";
	if (c->only_module) {
		/* Addresses differ between runs (ASLR, QEMU's guest base):
		 * compare symbolized places inside the program, and only the
		 * module of a target outside it (glibc's ifuncs pick string
		 * functions by CPUID, which QEMU emulates differently). */
		struct btr_image *img = btr_stream_image_pid(c->s, b->pid);
		struct btr_symbol sym;
		if (btr_image_symbol(img, b->from, &sym) < 0 || strcmp(base(sym.module), c->only_module))
			return 0;
		char f[64], to[64];
		btr_image_symbolize(img, b->from, f, sizeof(f));
		if (btr_image_symbol(img, b->to, &sym) == 0 && !strcmp(base(sym.module), c->only_module))
			btr_image_symbolize(img, b->to, to, sizeof(to));
		else
			snprintf(to, sizeof(to), "[%s]", b->to ? (btr_image_symbol(img, b->to, &sym) == 0 ? base(sym.module) : "?") : "0");
		snprintf(where, sizeof(where), "%s -> %s", f, to);
	}
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1024;
		t->b = realloc(t->b, t->cap * sizeof(*t->b));
	}
	t->b[t->n] = (struct br){ b->from, b->to, n + t->pending, b->kind, "" };
	memcpy(t->b[t->n++].where, where, sizeof(where));
	t->pending = 0;
	return 0;
}

static int on_event(void *ctx, const struct btr_stream_event *ev)
{
	struct col *c = ctx;
	if (ev->type == BTR_SEV_MACHINE)
		snprintf(c->backend, sizeof(c->backend), "%s", ev->rec->u.machine.backend);
	if (ev->type == BTR_SEV_PROCESS_EXIT) {
		c->exits++;
		c->signo = ev->rec->u.exit.signo;
		c->exit_ip = ev->rec->u.exit.ip;
		c->exit_addr = ev->rec->u.exit.addr;
		c->exit_tid = ev->rec->u.exit.tid;
	}
	if (ev->type == BTR_SEV_PROCESS)
		c->procs++;
	if (ev->type == BTR_SEV_EXEC)
		c->execs++;
	if (ev->type == BTR_SEV_THREAD_START) {
		c->thread_starts++;
		thr_of(c, ev->tid);
	}
	return 0;
}

static int collect(const char *path, struct col *c, const char *only_module)
{
	memset(c, 0, sizeof(*c));
	c->only_module = only_module;
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event, .ctx = c };
	struct btr_stream *s;
	int rc = btr_stream_open(path, &so, &s);
	CHECK_EQ(rc, 0);
	if (rc)
		return rc;
	c->s = s;
	rc = btr_stream_run(s);
	CHECK_EQ(rc, 0);
	CHECK(!btr_stream_data_lost(s));
	btr_stream_free(s);
	return rc;
}

static void free_col(struct col *c)
{
	for (int i = 0; i < c->nt; i++)
		free(c->t[i].b);
}

/* Runs btr with @args (NULL-terminated); the command's stdout goes to
 * @out_file (NULL: /dev/null).  Returns the wait status. */
static int run_btr(const char *out_file, const char *const *args)
{
	const char *argv[64];
	int n = 0;
	argv[n++] = BTR;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(out_file ? out_file : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		execv(BTR, (char *const *)argv);
		_exit(126);
	}
	int st;
	waitpid(pid, &st, 0);
	return st;
}

/* The step trace and the qemu trace of one thread agree branch for
 * branch (@sym: by symbolized place, without instruction counts). */
static void compare_thread(const char *what, const struct thr *s, const struct thr *q, int sym)
{
	size_t n = s->n < q->n ? s->n : q->n, bad = n;
	for (size_t i = 0; i < n; i++) {
		const struct br *a = &s->b[i], *b = &q->b[i];
		if (sym ? strcmp(a->where, b->where) || a->kind != b->kind :
			  a->from != b->from || a->to != b->to || a->kind != b->kind || a->insns != b->insns) {
			bad = i;
			break;
		}
	}
	if (bad < n || s->n != q->n) {
		fprintf(stderr, "%s: step %zu branches, qemu %zu; first difference at %zu\n", what, s->n, q->n, bad);
		for (size_t i = bad > 3 ? bad - 3 : 0; i < bad + 3 && i < n; i++)
			fprintf(stderr, "  %zu step %#" PRIx64 " -> %#" PRIx64 " k%u n%" PRIu64 " %s | qemu %#" PRIx64
					" -> %#" PRIx64 " k%u n%" PRIu64 " %s\n", i, s->b[i].from, s->b[i].to, s->b[i].kind,
				s->b[i].insns, s->b[i].where, q->b[i].from, q->b[i].to, q->b[i].kind, q->b[i].insns,
				q->b[i].where);
	}
	CHECK_EQ(s->n, q->n);
	CHECK_EQ(bad, n);
	CHECK(s->insns_valid);
	if (!sym)
		CHECK_EQ(s->insns, q->insns);
}

static void same_as_qemu(const char *prog, int dynamic)
{
	char path[512];
	snprintf(path, sizeof(path), BTR_BINARY_DIR "/%s", prog);
	const char *sa[] = { "record", "-q", "-b", "step", "-o", "step_cmp_s.btr", "--", path, NULL };
	const char *qa[] = { "record", "-q", "-b", "qemu", "-o", "step_cmp_q.btr", "--", path, NULL };
	int st = run_btr(NULL, sa);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	st = run_btr(NULL, qa);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct col s, q;
	collect("step_cmp_s.btr", &s, dynamic ? prog : NULL);
	collect("step_cmp_q.btr", &q, dynamic ? prog : NULL);
	CHECK_STR(s.backend, "step");
	CHECK_STR(q.backend, "qemu");
	CHECK_EQ(s.nt, q.nt);
	CHECK(s.nt >= 1);
	for (int i = 0; i < s.nt && i < q.nt; i++)
		compare_thread(prog, &s.t[i], &q.t[i], dynamic);
	/* The syscalls are there, as {syscall, 0}. */
	size_t sys = 0;
	for (size_t i = 0; s.nt && i < s.t[0].n; i++)
		sys += s.t[0].b[i].kind == BTR_KIND_SYSCALL && s.t[0].b[i].to == 0;
	CHECK(sys >= (dynamic ? 0u : 2u));
	printf("%s: %zu branches, %" PRIu64 " instructions, %zu syscalls: step == qemu\n", prog,
	       s.nt ? s.t[0].n : 0, s.nt ? s.t[0].insns : 0, sys);
	if (dynamic) {
		/* --inproc (the preloaded agent) sees the same program branches
		 * as ptrace; it starts in its constructor, after the loader. */
		const char *ia[] = { "record", "-q", "-b", "step", "--inproc", "-o", "step_cmp_i.btr", "--", path, NULL };
		st = run_btr(NULL, ia);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		struct col in;
		collect("step_cmp_i.btr", &in, prog);
		CHECK_EQ(in.nt, 1);
		if (in.nt == 1 && s.nt >= 1) {
			CHECK(in.t[0].n > 100);
			compare_thread("--inproc", &in.t[0], &s.t[0], 1);
			CHECK(in.t[0].insns < s.t[0].insns);   /* no loader start-up */
		}
		free_col(&in);
		unlink("step_cmp_i.btr");
	}
	free_col(&s);
	free_col(&q);
	unlink("step_cmp_s.btr");
	unlink("step_cmp_q.btr");
}

/* Branches of @c (all threads) whose from/to symbolize to names starting
 * with @from / @to (NULL: any) and of kind @kind (-1: any). */
struct count_ctx {
	struct btr_stream *s;
	const char *from, *to;
	int kind;
	uint32_t tid;             /* 0: any */
	size_t n, total;
	uint32_t tids[MAXT];
	size_t per_tid[MAXT];
	int ntid;
	uint32_t pids[8];
	int npid;
};

static int starts(const char *s, const char *p)
{
	return !p || !strncmp(s, p, strlen(p));
}

static int count_branch(void *ctx, const struct btr_branch *b)
{
	struct count_ctx *c = ctx;
	c->total++;
	int k = 0;
	for (; k < c->npid && c->pids[k] != b->pid; k++)
		;
	if (k == c->npid && k < 8)
		c->pids[c->npid++] = b->pid;
	if (c->kind >= 0 && b->kind != c->kind)
		return 0;
	if (c->tid && b->tid != c->tid)
		return 0;
	struct btr_image *img = btr_stream_image_pid(c->s, b->pid);
	char f[128], t[128];
	btr_image_symbolize(img, b->from, f, sizeof(f));
	btr_image_symbolize(img, b->to, t, sizeof(t));
	if (!starts(f, c->from) || !starts(t, c->to))
		return 0;
	c->n++;
	int i = 0;
	for (; i < c->ntid && c->tids[i] != b->tid; i++)
		;
	if (i == c->ntid && i < MAXT)
		c->tids[c->ntid++] = b->tid;
	if (i < MAXT)
		c->per_tid[i]++;
	return 0;
}

static void count(const char *path, struct count_ctx *c, const char *from, const char *to, int kind)
{
	memset(c, 0, sizeof(*c));
	c->from = from;
	c->to = to;
	c->kind = kind;
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = count_branch, .ctx = c };
	CHECK_EQ(btr_stream_open(path, &so, &c->s), 0);
	if (!c->s)
		return;
	CHECK_EQ(btr_stream_run(c->s), 0);
	btr_stream_free(c->s);
}

static int record(const char *out, const char *const *opts, const char *prog, const char *arg)
{
	const char *a[32];
	int n = 0;
	a[n++] = "record";
	a[n++] = "-q";
	a[n++] = "-b";
	a[n++] = "step";
	a[n++] = "-o";
	a[n++] = out;
	for (int i = 0; opts && opts[i]; i++)
		a[n++] = opts[i];
	a[n++] = "--";
	char path[512];
	snprintf(path, sizeof(path), BTR_BINARY_DIR "/%s", prog);
	a[n++] = path;
	char arg_path[512];
	if (arg) {
		snprintf(arg_path, sizeof(arg_path), BTR_BINARY_DIR "/%s", arg);
		a[n++] = arg_path;
	}
	a[n] = NULL;
	int st = run_btr(NULL, a);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* --start sw: only sw runs stepped, each of its 200 entries, until it returns. */
static void test_region(void)
{
	const char *o[] = { "--start", "sw", NULL };
	CHECK_EQ(record("step_region.btr", o, "prog_nolibc_step", NULL), 0);
	struct count_ctx all, rets, outside;
	count("step_region.btr", &all, NULL, NULL, -1);
	count("step_region.btr", &rets, "sw", "work", BTR_KIND_RET);
	count("step_region.btr", &outside, "sw", NULL, -1);
	CHECK_EQ(rets.n, 200);               /* every entry traced to its return */
	CHECK_EQ(outside.n, all.total);      /* nothing outside sw */
	/* Exactly 440: sw(i) for i = 0..199 - i % 5 takes no branch (a
	 * multiply by 0x6666666666666667), and gcc -O1 compiles the switch
	 * into a compare tree (objdump -d prog_nolibc_step) whose TAKEN
	 * branches per residue are: 0: je, ret (2); 1: ret (1); 2: je, ret
	 * (2); 3: jg, ret (2); 4: jg, jne, jmp, ret (4) - 11 per 5 calls,
	 * 40 rounds of 5: 440 (the call into sw is outside the region, and a
	 * not-taken jcc is no branch record).  nolibc_step is static, with no
	 * libc and no ld.so, so nothing varies between runs; only another
	 * compiler's code for sw could change the number. */
	CHECK_EQ(all.total, 440);
	/* --start/--stop by address: from sw's entry to work's next call. */
	printf("region: %zu branches, %zu returns from sw\n", all.total, rets.n);
	unlink("step_region.btr");
}

/* Signals reach their handlers as without btr; the handler entries are
 * asynchronous branches from the interrupted / faulting instruction. */
static void test_signals(void)
{
	const char *o[] = { "--start", "main", NULL };
	CHECK_EQ(record("step_sig.btr", o, "prog_flow_signals", NULL), 0);
	struct count_ctx usr1, segv, longjmps;
	count("step_sig.btr", &usr1, NULL, "on_usr1", BTR_KIND_ASYNC);
	count("step_sig.btr", &segv, NULL, "on_segv", BTR_KIND_ASYNC);
	count("step_sig.btr", &longjmps, "deep", NULL, -1);
	CHECK_EQ(usr1.n, 1);
	CHECK_EQ(segv.n, 1);
	CHECK(longjmps.n > 10);
	unlink("step_sig.btr");
}

/* Threads: every thread is followed (PTRACE_O_TRACECLONE).  @region:
 * only work() is stepped, entered by three threads at about the same time
 * (no entry may be lost while one thread steps over the breakpoint). */
static void test_threads(int region)
{
	const char *o[] = { "--start", "work", NULL };
	CHECK_EQ(record("step_thr.btr", region ? o : NULL, "prog_flow_threads", NULL), 0);
	struct count_ctx loop;
	count("step_thr.btr", &loop, "work", "work", BTR_KIND_JCC);
	CHECK_EQ(loop.ntid, 3);
	/* work(1500) in main, work(2000) and work(2001) in the workers: one
	 * taken loop branch per iteration but the last. */
	size_t want[3] = { 1499, 1999, 2000 }, got[3] = { 0 };
	for (int i = 0; i < loop.ntid && i < 3; i++)
		got[i] = loop.per_tid[i];
	for (int i = 0; i < 3; i++)
		for (int j = i + 1; j < 3; j++)
			if (got[j] < got[i]) {
				size_t x = got[i];
				got[i] = got[j];
				got[j] = x;
			}
	for (int i = 0; i < 3; i++)
		CHECK(got[i] >= want[i] && got[i] <= want[i] + 2);
	printf("threads%s: %d threads, loop branches %zu %zu %zu\n", region ? " (region)" : "", loop.ntid, got[0],
	       got[1], got[2]);
	unlink("step_thr.btr");
}

/* Thirteen threads enter work() at once, ten runs: while one steps over the
 * lifted start breakpoint the others are parked, and when it is back a
 * parked thread that had hit it starts the next step over.  The threads
 * still parked must wait for that one too (before the fix, about one run in
 * four lost a thread's whole entry: it was resumed with the breakpoint
 * lifted). */
static void test_region_burst(void)
{
	const char *o[] = { "--start", "work", NULL };
	int lost = 0;
	for (int run = 0; run < 10; run++) {
		CHECK_EQ(record("step_burst.btr", o, "prog_step_burst", NULL), 0);
		struct count_ctx loop;
		count("step_burst.btr", &loop, "work", "work", BTR_KIND_JCC);
		size_t least = (size_t)-1;
		for (int i = 0; i < loop.ntid; i++)
			if (loop.per_tid[i] < least)
				least = loop.per_tid[i];
		/* work(50) in main, work(100..111) in the workers */
		if (loop.ntid != 13 || least < 49) {
			printf("region burst, run %d: %d threads entered work, least loop branches %zu\n", run,
			       loop.ntid, least);
			lost++;
		}
	}
	CHECK_EQ(lost, 0);
	printf("region burst: 10 runs of 13 threads, %d with an entry lost\n", lost);
	unlink("step_burst.btr");
}

/* fork + exec: the child is a process of its own, traced through exec. */
static void test_fork_exec(void)
{
	CHECK_EQ(record("step_fork.btr", NULL, "prog_nolibc_fork", "prog_nolibc_step"), 3);
	struct col c;
	collect("step_fork.btr", &c, NULL);
	CHECK_EQ(c.procs, 3);       /* start, child start, child exec */
	CHECK_EQ(c.execs, 1);
	CHECK_EQ(c.exits, 2);
	CHECK_EQ(c.nt, 2);
	free_col(&c);
	struct count_ctx fib;
	count("step_fork.btr", &fib, "fib", "fib", BTR_KIND_CALL);
	CHECK(fib.n > 100);          /* the exec'd program ran stepped */
	CHECK_EQ(fib.ntid, 1);
	CHECK_EQ(fib.npid, 2);
	unlink("step_fork.btr");
}

struct kinds {
	unsigned n, rets;
};

static int count_rets(void *ctx, const struct btr_branch *b)
{
	struct kinds *k = ctx;
	k->n++;
	k->rets += !strcmp(btr_branch_kind_name(b->kind), "ret");
	return 0;
}

/* The flight recorder through the library: a parsed filter
 * (opts->branch_filter, what `btr record --filter` passes) is used as
 * given and the string @filter is then not read; an older caller's string
 * alone is parsed by the backend. */
static void test_ring_filter(void)
{
	char prog[] = BTR_BINARY_DIR "/prog_nolibc_step";
	char *argv[] = { prog, NULL };
	char path[] = "/tmp/btr_test_ringf_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct btr_filter f;
	CHECK_EQ(btr_filter_parse("near_ret", &f), 0);
	for (int pass = 0; pass < 3; pass++) {
		struct btr_capture_opts o = { .sz = sizeof(o), .output = path, .argv = argv, .ring = 8 };
		if (pass == 0) {
			o.branch_filter = &f;
			o.filter = "bogus";   /* not read: branch_filter wins */
		} else {
			o.filter = pass == 1 ? "near_ret" : "bogus";
		}
		struct btr_capture_result res;
		int rc = btr_step_record(&o, &res);
		if (pass == 2) {
			CHECK_EQ(rc, -BTR_ERR_BAD_FILTER);
			continue;
		}
		CHECK_EQ(rc, 0);
		struct kinds k = { 0, 0 };
		struct btr_stream *s = NULL;
		struct btr_stream_opts so = { .sz = sizeof(so), .branch = count_rets, .ctx = &k };
		CHECK_EQ(btr_stream_open(path, &so, &s), 0);
		if (s)
			CHECK_EQ(btr_stream_run(s), 0);
		btr_stream_free(s);
		CHECK(k.n > 0 && k.n <= 8);
		CHECK_EQ(k.rets, k.n);
	}
	unlink(path);
}

int main(int argc, char **argv)
{
	struct btr_capture_probe pr;
	btr_probe_step(&pr);
	if (!pr.usable)
		check_skip(pr.reason);
	const char *only = argc > 1 ? argv[1] : NULL;
	if (!only || !strcmp(only, "static"))
		same_as_qemu("prog_nolibc_step", 0);
	if (!only || !strcmp(only, "dynamic"))
		same_as_qemu("prog_step_dyn", 1);
	if (!only || !strcmp(only, "region"))
		test_region();
	if (!only || !strcmp(only, "signals"))
		test_signals();
	if (!only || !strcmp(only, "threads"))
		test_threads(0);
	if (!only || !strcmp(only, "region-threads"))
		test_threads(1);
	if (!only || !strcmp(only, "region-burst"))
		test_region_burst();
	if (!only || !strcmp(only, "fork"))
		test_fork_exec();
	if (!only || !strcmp(only, "ring-filter"))
		test_ring_filter();
	return check_done();
}
