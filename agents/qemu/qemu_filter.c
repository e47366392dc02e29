/* qemu_filter.c - IP filtering in software (`btr record -b qemu
 * --ip-filter SPEC`): the trace holds the flow inside the ranges only,
 * written as Intel PT's IP filtering writes it (SDM Vol. 3C 32.2.4.3
 * "Filtering by IP", 32.2.5.5 "Filter Enable"): TIP.PGD where the flow
 * leaves the ranges, with the target IP for a direct jump or call, an
 * indirect branch or a return, and the IP of the side taken for a
 * conditional branch; MODE.Exec + TIP.PGE with the IP where it enters
 * them again.
 *
 * Plugin argument: filter=0xLO-0xHI@FILE (repeatable), LO..HI inclusive
 * offsets in FILE, as btr_ip_filter_parse gives them for -b pt.  Every
 * executable mapping of FILE (add_module) turns them into guest address
 * ranges.
 *
 * Why code outside runs at QEMU's speed: only blocks that start inside a
 * range get the TB-exec callback (qemu_plugin.c's tb_exec, through
 * flt_tb_exec).  A block outside gets one inline add to flt_out (a few
 * host instructions, no call), so the next block inside can tell that the
 * thread was out meanwhile.  Where the flow went when it left is known
 * without a callback outside:
 *  - a direct jump or call: its target;
 *  - a return or an indirect branch: the block it went to, when that block
 *    is translated then (QEMU translates a block as a thread is about to
 *    run it): such a block gets an exit callback (flt_exit), so that this
 *    branch and later ones to the same place (returns to one caller) say
 *    where they went;
 *  - a conditional branch with one side outside: that side, when the
 *    thread ran code outside before it came back (flt_out moved);
 *  - a system call made outside: the block before it was not the system
 *    call's, so the thread left after it.
 * Limits (docs/record.md): flt_out is shared by the threads, so a thread
 * that runs a conditional branch with one side outside while another
 * thread runs code outside may show a leave and re-entry (TIP.PGD,
 * TIP.PGE) where it went straight on (the same instructions); a
 * register-indirect jump or call that leaves writes TIP.PGD without IP
 * (its target is not known); a signal handler outside the ranges shows as
 * FUP + TIP.PGD at the place the thread resumes when it comes back; a
 * block is inside or outside by its first instruction.
 */
#include "qemu_plugin.h"

#define FLT_SPECS 8
#define FLT_RANGES 64

int flt_on;
static struct { uint64_t lo, hi; char *path; } spec[FLT_SPECS];
static unsigned n_spec;
static struct { uint64_t lo, hi; } range[FLT_RANGES];   /* guest addresses, inclusive */
static unsigned n_range;                                /* published with release */

/* --start/--stop: start=0xOFF@FILE, stop=0xOFF@FILE, mapped like the
 * ranges (start_va, stop_va). */
int flt_start_on;
static struct { uint64_t off; char *path; } sspec[2];   /* [0] start, [1] stop */
static uint64_t start_va[8], stop_va[8];
static unsigned n_start_va, n_stop_va;

static uint64_t flt_out;     /* blocks run outside the ranges (inline add) */
static uint64_t flt_ncb;     /* TB-exec callbacks made (inline add, BTR_QEMU_STATS only) */
static int stats;

/* Per guest thread (vcpu index). */
static struct flt_thr {
	uint64_t out;            /* flt_out when the thread entered its last block inside */
	struct tbinfo *ld_tb;    /* the block whose branch... */
	uint64_t ld;             /* ... went here (flt_exit) */
	struct tbinfo *mwant;    /* the block whose target read flt_mem waits for */
	struct tbinfo *mld_tb;   /* the block whose return or memory-indirect branch... */
	uint64_t mld;            /* ... loaded this target (flt_mem) */
	struct tbinfo *pend;     /* left without a branch that says where: resolved at re-entry */
	struct tbinfo *armed;    /* the block ending in a return or indirect branch it entered last */
	uint64_t n_exit;         /* flt_exit calls (BTR_QEMU_STATS) */
	int on;                  /* --start: tracing is on for this thread */
	int64_t depth;           /* calls and handlers entered since the start function was */
} ft[MAX_VCPUS];

int flt_arg(const char *arg)
{
	unsigned long long lo, hi;
	int n = 0;
	if (n_spec == FLT_SPECS || sscanf(arg, "%llx-%llx@%n", &lo, &hi, &n) != 2 || !n || !arg[n] || lo > hi)
		return -1;
	spec[n_spec].lo = lo;
	spec[n_spec].hi = hi;
	if (!(spec[n_spec].path = strdup(arg + n)))
		return -1;
	n_spec++;
	flt_on = 1;
	return 0;
}

/* start=0xOFF@FILE / stop=0xOFF@FILE (@which 0 / 1). */
int flt_start_arg(const char *arg, int which)
{
	unsigned long long off;
	int n = 0;
	if (sscanf(arg, "%llx@%n", &off, &n) != 1 || !n || !arg[n] || sspec[which].path)
		return -1;
	sspec[which].off = off;
	if (!(sspec[which].path = strdup(arg + n)))
		return -1;
	flt_start_on = 1;
	return 0;
}

static void (*tb_exec_fn)(unsigned, void *);
static struct thr *(*thr_first_fn)(unsigned, uint64_t);

void flt_init(void (*exec)(unsigned, void *), struct thr *(*first)(unsigned, uint64_t))
{
	tb_exec_fn = exec;
	thr_first_fn = first;
	const char *s = getenv("BTR_QEMU_STATS");
	stats = s && *s;
}

/* A mapping of @path: the ranges it holds. */
void flt_module(const char *path, uint64_t start, uint64_t size, uint64_t pgoff, uint32_t prot)
{
	if ((!flt_on && !flt_start_on) || !(prot & PROT_EXEC))
		return;
	char real[PATH_MAX];
	if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	for (int w = 0; w < 2; w++) {
		uint64_t *va = w ? stop_va : start_va;
		unsigned *nv = w ? &n_stop_va : &n_start_va;
		if (!sspec[w].path || (strcmp(sspec[w].path, real) && strcmp(sspec[w].path, path)) ||
		    sspec[w].off < pgoff || sspec[w].off >= pgoff + size || *nv == 8)
			continue;
		va[*nv] = start + (sspec[w].off - pgoff);
		__atomic_store_n(nv, *nv + 1, __ATOMIC_RELEASE);
	}
	for (unsigned i = 0; i < n_spec; i++) {
		if (strcmp(spec[i].path, real) && strcmp(spec[i].path, path))
			continue;
		uint64_t lo = spec[i].lo > pgoff ? spec[i].lo : pgoff;
		uint64_t hi = spec[i].hi < pgoff + size - 1 ? spec[i].hi : pgoff + size - 1;
		unsigned k = __atomic_load_n(&n_range, __ATOMIC_ACQUIRE);
		if (lo > hi || k == FLT_RANGES)
			continue;
		range[k].lo = start + (lo - pgoff);
		range[k].hi = start + (hi - pgoff);
		__atomic_store_n(&n_range, k + 1, __ATOMIC_RELEASE);
	}
}

static inline int flt_in(uint64_t pc)
{
	unsigned k = __atomic_load_n(&n_range, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < k; i++)
		if (pc >= range[i].lo && pc <= range[i].hi)
			return 1;
	return 0;
}

/* An exit block ran (see flt_trans): when its thread's last block inside
 * ended in a return or an indirect branch, and nothing ran in between,
 * that branch went here. */
static void flt_exit(unsigned vcpu, void *ud)
{
	if (vcpu >= MAX_VCPUS)
		return;
	struct flt_thr *f = &ft[vcpu];
	const struct thr *t = g.thr[vcpu];
	f->n_exit++;
	if (!f->armed || !t || t->prev != f->armed)
		return;   /* not right after its branch: it entered no block inside since */
	if (__atomic_load_n(&flt_out, __ATOMIC_RELAXED) != f->out + 1)
		return;   /* other blocks outside ran since the branch (this one's add
			   * comes first): it went to one of those, translated before
			   * and so without this callback (or another thread ran some) */
	f->ld = (uint64_t)(uintptr_t)ud;
	f->ld_tb = f->armed;
	f->armed = NULL;
}

/* The last instruction of a block inside that ends in a return or a
 * memory-indirect jump or call loaded its target from @vaddr (a memory
 * callback comes after the access, which succeeded): where the branch
 * goes, whether or not the block it lands in has an exit callback. */
static void flt_mem(unsigned vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
	if (vcpu >= MAX_VCPUS || qemu_plugin_mem_is_store(info))
		return;
	struct flt_thr *f = &ft[vcpu];
	if (f->mwant != ud)
		return;   /* only the first read after the block's start: QEMU 7.2
			   * leaves the callback armed for the reads of blocks that
			   * run next without instrumentation (seen at a process's
			   * exit) */
	f->mwant = NULL;
	uint64_t v;
	memcpy(&v, (const void *)(uintptr_t)(vaddr + g.guest_base), sizeof(v));
	f->mld = v;
	f->mld_tb = ud;
}

/* Translation of a block starting at @pc: returns 1 when it is to be
 * traced (inside, or no filter); for one outside, registers the inline
 * add and returns 0. */
int flt_trans(struct qemu_plugin_tb *tb, uint64_t pc)
{
	if (!flt_on || !g.exe_mapped || flt_in(pc))
		return 1;   /* the first block starts the process's records (thr_first) */
	struct qemu_plugin_insn *first = qemu_plugin_tb_get_insn(tb, 0);
	qemu_plugin_register_vcpu_insn_exec_inline(first, QEMU_PLUGIN_INLINE_ADD_U64, &flt_out, 1);
	/* QEMU translates a block when a thread is about to run it: the
	 * thread whose return or indirect branch just left the ranges is
	 * about to run it now.  Its exit callback says where such a branch
	 * went, each time (a return to the same caller, say). */
	int v = code_vcpu;
	if (v >= 0 && v < MAX_VCPUS && ft[v].armed && g.thr[v] && g.thr[v]->prev == ft[v].armed)
		qemu_plugin_register_vcpu_insn_exec_cb(first, flt_exit, QEMU_PLUGIN_CB_NO_REGS,
						       (void *)(uintptr_t)pc);
	return 0;
}

/* A block to be traced, @b its information: its callback, and what it
 * needs besides. */
void flt_trans_in(struct qemu_plugin_tb *tb, size_t n, struct tbinfo *b, void (*cb)(unsigned, void *))
{
	if (stats)
		qemu_plugin_register_vcpu_insn_exec_inline(qemu_plugin_tb_get_insn(tb, 0), QEMU_PLUGIN_INLINE_ADD_U64,
							   &flt_ncb, 1);
	if (flt_start_on) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, flt_start_exec, QEMU_PLUGIN_CB_NO_REGS, b);
		return;
	}
	if (!flt_on) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, cb, QEMU_PLUGIN_CB_NO_REGS, b);
		return;
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, flt_tb_exec, QEMU_PLUGIN_CB_NO_REGS, b);
	if (n && (b->kind == BTR_KIND_RET || b->kind == BTR_KIND_JMP_IND || b->kind == BTR_KIND_CALL_IND))
		/* A return (and `jmp *mem`, `call *mem`) reads its target: the
		 * read says where it goes.  A register-indirect branch reads
		 * nothing (flt_exit then); the push of a call is a write. */
		qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, n - 1), flt_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, b);
}

/* TIP.PGD: the branch ending the thread's last block went to @x outside
 * (@have_ip 0: a register-indirect branch, its target unknown). */
static void leave(struct thr *t, uint64_t x, int have_ip)
{
	ensure_space(t);
	if (have_ip) {
		tnt_flush(t);
		btr_pt_enc_ip(&t->enc, BTR_PT_TIP_PGD, x);
		t->enabled = 0;
		t->rs_n = 0;
	} else {
		emit_pgd(t);
	}
}

static int is_cond(unsigned k)
{
	return k == BTR_KIND_JCC || k == BTR_KIND_LOOP || k == BTR_KIND_JRCXZ;
}

/* Did thread @t leave the ranges after its last block inside, p?  @pc: the
 * block it enters now (inside), or 0 when it makes a system call outside
 * (@at_sys: it did leave).  Writes the leave and returns 1, or returns 0
 * (nothing said: either it stayed, or the leave is resolved when it comes
 * back, f->pend). */
static int check_left(struct thr *t, struct flt_thr *f, uint64_t pc, int at_sys)
{
	struct tbinfo *p = t->prev;
	int moved = at_sys || __atomic_load_n(&flt_out, __ATOMIC_RELAXED) != f->out;
	uint64_t x = 0;
	int have = 0;
	switch (p->kind) {
	case BTR_KIND_JMP:
	case BTR_KIND_CALL:
		x = p->target;
		have = 1;
		break;
	case BTR_KIND_RET:
	case BTR_KIND_JMP_IND:
	case BTR_KIND_CALL_IND:
		if (f->mld_tb == p) {
			x = f->mld;   /* the target it read (flt_mem) */
			have = 1;
		} else if (f->ld_tb == p) {
			x = f->ld;
			have = 1;
		} else if (moved) {
			leave(t, 0, 0);   /* register-indirect: target unknown */
			return 1;
		}
		break;
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ: {
		int it = flt_in(p->target), ie = flt_in(p->end);
		if (it && ie)
			break;
		if (!at_sys && pc == (it ? p->target : p->end) && !moved)
			return 0;
		x = it ? p->end : p->target;   /* both outside: not told apart, the fall-through said */
		have = 1;
		break;
	}
	case BTR_KIND_NONE:
		if (!flt_in(p->end)) {
			/* Out without a branch: the hardware's TIP.PGD binds to
			 * no instruction here; say it as a disable at the first
			 * address outside. */
			ensure_space(t);
			emit_ip(t, BTR_PT_FUP, p->end);
			emit_pgd(t);
			return 1;
		}
		break;
	default:
		return 0;
	}
	if (have && !flt_in(x)) {
		leave(t, x, 1);
		return 1;
	}
	if (at_sys) {
		f->pend = p;    /* out by a signal: said where it comes back */
		t->enabled = 0;
		return 1;
	}
	return 0;
}

/* Thread @t comes back inside at @pc after leaving block p = f->pend
 * without a branch that says so (a signal handler outside): p's branch
 * towards @pc, then FUP + TIP.PGD there (disabled before @pc ran). */
static void come_back(struct thr *t, struct flt_thr *f, uint64_t pc)
{
	struct tbinfo *p = f->pend;
	f->pend = NULL;
	ensure_space(t);
	int inside = pc - p->pc < p->end - p->pc;
	if (is_cond(p->kind) && !inside && (pc == p->target || pc == p->end)) {
		tnt_flush(t);
		if (tnt_push(t, pc == p->target))
			tnt_flush(t);
	} else if (!inside && !((p->kind == BTR_KIND_NONE && pc == p->end) ||
				((p->kind == BTR_KIND_JMP || p->kind == BTR_KIND_CALL) && pc == p->target))) {
		return;   /* resumes elsewhere (a longjmp out of a handler): not said */
	}
	emit_ip(t, BTR_PT_FUP, pc);
	btr_pt_enc_packet(&t->enc, &(struct btr_pt_packet){ .type = BTR_PT_TIP_PGD, .u.ip.ipc = BTR_PT_IPC_SUPPRESSED });
}

void flt_tb_exec(unsigned vcpu, void *ud)
{
	struct tbinfo *cur = ud;
	struct thr *t = g.thr[vcpu];
	struct flt_thr *f = &ft[vcpu];
	if (UNLIKELY(!flt_in(cur->pc))) {
		if (!t && !g.off)
			thr_first_fn(vcpu, cur->pc);   /* the process's first block: its records, no PT */
		return;
	}
	if (t && !t->done) {
		if (t->prev && check_left(t, f, cur->pc, 0)) {
			t->prev->last = t;
			t->prev = NULL;
		} else if (!t->prev && f->pend) {
			come_back(t, f, cur->pc);
		}
	}
	f->out = __atomic_load_n(&flt_out, __ATOMIC_RELAXED);
	f->ld_tb = NULL;     /* said (check_left), or stale */
	f->mld_tb = NULL;
	f->mwant = cur->kind == BTR_KIND_RET || cur->kind == BTR_KIND_JMP_IND || cur->kind == BTR_KIND_CALL_IND ? cur : NULL;
	f->armed = cur->kind == BTR_KIND_RET || cur->kind == BTR_KIND_JMP_IND || cur->kind == BTR_KIND_CALL_IND ? cur
														  : NULL;
	tb_exec_fn(vcpu, ud);
}

static int is_va(const uint64_t *va, const unsigned *n, uint64_t pc)
{
	unsigned k = __atomic_load_n(n, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < k; i++)
		if (va[i] == pc)
			return 1;
	return 0;
}

/* --start/--stop (TraceStop-like): each thread is traced from an entry of
 * the start function (TIP.PGE) until that entry returns, or the stop
 * address is reached (TIP.PGD with the target, the branch's own: the
 * flow that left).  Every block is translated with this callback (the
 * thread decides, not the block), but a thread that is off writes
 * nothing.  The return is the one that takes the call depth counted since
 * the entry below zero: calls and signal handlers entered add one,
 * returns take one (recursion enters the function again one level down,
 * and only the outermost entry's return stops). */
void flt_start_exec(unsigned vcpu, void *ud)
{
	struct tbinfo *cur = ud;
	struct thr *t = g.thr[vcpu];
	struct flt_thr *f = &ft[vcpu];
	uint64_t pc = cur->pc;
	if (UNLIKELY(!t)) {
		if (g.off)
			return;
		t = thr_first_fn(vcpu, pc);
	}
	if (t->done)
		return;
	if (!f->on) {
		if (!is_va(start_va, &n_start_va, pc))
			return;
		f->on = 1;
		f->depth = 0;
		t->prev = NULL;    /* tb_exec: TIP.PGE at @pc */
		tb_exec_fn(vcpu, ud);
		return;
	}
	struct tbinfo *p = t->prev;
	int stop = is_va(stop_va, &n_stop_va, pc);
	if (p) {
		int regular = pc == p->target || pc == p->end;
		if (!regular && is_handler(pc))
			f->depth++;                      /* a signal: its handler returns */
		else if ((p->kind == BTR_KIND_CALL || p->kind == BTR_KIND_CALL_IND) && pc != p->end)
			f->depth++;
		else if (p->kind == BTR_KIND_RET)
			f->depth--;
		if (f->depth < 0 || stop) {
			f->on = 0;
			ensure_space(t);
			if (p->kind == BTR_KIND_NONE || (pc - p->pc < p->end - p->pc)) {
				emit_ip(t, BTR_PT_FUP, pc);
				emit_pgd(t);
			} else {
				leave(t, pc, 1);
			}
			p->last = t;
			t->prev = NULL;
			return;
		}
	} else if (stop) {
		f->on = 0;
		return;
	}
	tb_exec_fn(vcpu, ud);
}

/* A system call, or the end of the process (@at_exit): a thread whose
 * last block inside does not end in this system call left the ranges. */
void flt_syscall(unsigned vcpu, struct thr *t, int at_exit)
{
	struct flt_thr *f = &ft[vcpu];
	if (!flt_on || !t->prev || t->prev->kind == BTR_KIND_SYSCALL)
		return;
	if (at_exit && __atomic_load_n(&flt_out, __ATOMIC_RELAXED) == f->out)
		return;   /* died inside */
	if (check_left(t, f, 0, 1)) {
		t->prev->last = t;
		t->prev = NULL;
	}
}

/* BTR_QEMU_STATS=FILE: "callbacks N outside M" appended at the end (the
 * tests count the work, never time it). */
void flt_stats(void)
{
	const char *s = getenv("BTR_QEMU_STATS");
	if (!s || !*s)
		return;
	int fd = open(s, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	uint64_t ex = 0;
	for (unsigned i = 0; i < MAX_VCPUS; i++)
		ex += ft[i].n_exit;
	char line[128];
	/* Without inline operations (API v4 here, qemu_plugin_api.h) each
	 * block outside makes a call too. */
	uint64_t emulated = qemu_plugin_register_vcpu_insn_exec_inline ? 0 : flt_out;
	int k = snprintf(line, sizeof(line), "callbacks %" PRIu64 " exit %" PRIu64 " outside %" PRIu64 "\n",
			 flt_ncb + ex + emulated, ex, flt_out);
	if (write(fd, line, (size_t)k) != k)
		(void)0;
	close(fd);
}
