/* check.c - `btr check`: recorded transfers against the transfers the
 * loaded code allows (btr/check.h, docs/check.md).
 *
 * One streaming pass.  State: per process the executable mappings (from
 * the module records) and their ELF models (check_model.c, shared by
 * path); per thread a shadow stack and the state of a ROP chain being
 * followed; caches keyed by code address (decoded instruction, "is
 * preceded by a call", indirect edges already judged).  All of it grows
 * with the code seen and the stack depth, never with the trace's length.
 *
 * Why the shadow stack tolerates so much: a return that does not match
 * the top is legitimate when it matches a deeper frame (frames skipped by
 * unwinding), when it comes from the C++ unwinder (_Unwind_* returns into
 * a landing pad), when it reaches the sigreturn trampoline from a signal
 * frame, or when the stack is empty because the trace began mid-stack or
 * after a gap - then the kBouncer rule (the target must follow a call
 * instruction) is all that can be checked.  longjmp is an indirect jump
 * to the instruction after a setjmp call: it unwinds the shadow stack to
 * the frame of the function it lands in.  User-level context switches
 * (Go's gogo, setcontext/swapcontext) may land on another stack: they
 * empty it (ctx_resume).
 */
#include "btr/check.h"
#include "btr/text.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "check_priv.h"
#include "elf/elf_priv.h"
#include "internal.h"
#include "image/image_code.h"
#include "pairmap.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static struct proc *proc_get(struct check *c, uint32_t pid, size_t *idx)
{
	if (btr_likely(c->last_proc < c->n_procs && c->procs[c->last_proc].pid == pid)) {
		if (idx)
			*idx = c->last_proc;
		return &c->procs[c->last_proc];
	}
	for (size_t i = 0; i < c->n_procs; i++)
		if (c->procs[i].pid == pid) {
			if (idx)
				*idx = i;
			c->last_proc = i;
			return &c->procs[i];
		}
	struct proc *np = realloc(c->procs, (c->n_procs + 1) * sizeof(*np));
	if (!np)
		return NULL;
	c->procs = np;
	memset(&np[c->n_procs], 0, sizeof(*np));
	np[c->n_procs].pid = pid;
	if (idx)
		*idx = c->n_procs;
	return &np[c->n_procs++];
}

static struct thr *thr_get(struct check *c, uint32_t tid, uint32_t pid)
{
	if (btr_likely(c->last_thr && c->last_thr->tid == tid)) {
		c->last_thr->pid = pid;
		return c->last_thr;
	}
	for (size_t i = 0; i < c->n_thr; i++)
		if (c->thr[i]->tid == tid) {
			c->thr[i]->pid = pid;
			return c->last_thr = c->thr[i];
		}
	struct thr **nt = realloc(c->thr, (c->n_thr + 1) * sizeof(*nt));
	if (!nt)
		return NULL;
	c->thr = nt;
	struct thr *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->tid = tid;
	t->pid = pid;
	nt[c->n_thr++] = t;
	return t;
}

static int push_frame(struct check *c, struct thr *t, uint64_t ret, uint8_t type)
{
	if (t->n == t->cap) {
		if (t->cap >= MAX_DEPTH) {
			/* Deep recursion: forget the oldest half (returns into it
			 * are then checked as if the trace began mid-stack). */
			memmove(t->st, t->st + t->cap / 2, (t->cap - t->cap / 2) * sizeof(*t->st));
			t->n = t->cap - t->cap / 2;
		} else {
			size_t nc = t->cap ? t->cap * 2 : 64;
			struct frame *ns = realloc(t->st, nc * sizeof(*ns));
			if (!ns)
				return -BTR_ERR_NOMEM;
			t->st = ns;
			t->cap = nc;
		}
	}
	t->st[t->n++] = (struct frame){ ret, type };
	if (t->n > c->stats.max_depth)
		c->stats.max_depth = (unsigned)t->n;
	return 0;
}

/* ---- findings ---- */

/* ---- code queries ---- */

#define INSN_NOCODE UINT32_MAX

/* Decodes the instruction at @a in process @pi (cached). */
/* The same, and the target a direct branch there encodes in *@target
 * (NULL: not wanted). */
static uint32_t insn_target_at(struct check *c, size_t pi, uint32_t pid, uint64_t a, uint64_t *target)
{
	uint32_t v;
	uint64_t key = a | ((uint64_t)pi << 48);
	size_t h = (size_t)(a ^ (a >> 11)) & (BTR_ARRAY_SIZE(c->ic) - 1);
	if (btr_likely(c->ic[h].key == key + 1 && c->ic[h].cg == c->code_gen)) {
		if (target)
			*target = c->ic[h].target;
		return c->ic[h].v;
	}
	struct btr_insn in = { 0 };
	int known = pairmap_get(&c->insn, key, 0, &v);
	int direct = known && v != INSN_NOCODE && ((v >> 16) & BTR_INSN_DIRECT);
	if (!known || direct) {
		/* (a direct branch's target is not in the pairmap) */
		int r = btr_insn_decode_image(btr_stream_image_pid(c->s, pid), a, BTR_MODE_64, &in);
		v = r > 0 ? (uint32_t)in.kind | (uint32_t)in.len << 8 | (in.flags & 0xff) << 16 : INSN_NOCODE;
		if (!known)
			pairmap_put(&c->insn, key, 0, v);
	}
	c->ic[h].key = key + 1;
	c->ic[h].target = in.target;
	c->ic[h].v = v;
	c->ic[h].cg = c->code_gen;
	if (target)
		*target = in.target;
	return v;
}

static uint32_t insn_at(struct check *c, size_t pi, uint32_t pid, uint64_t a)
{
	return insn_target_at(c, pi, pid, a, NULL);
}

/* New code at some addresses: forget what was decoded. */
static void forget_code(struct check *c)
{
	pairmap_clear(&c->insn);
	pairmap_clear(&c->callpre);
	pairmap_clear(&c->ctxret);
	/* (the caches are too big to clear at each module load) */
	if (++c->code_gen == 0) {
		memset(c->ic, 0, sizeof(c->ic));
		memset(c->ec, 0, sizeof(c->ec));
		c->code_gen = 1;
	}
}

/* Nonzero if an instruction that ends at @a is a call (kBouncer's
 * "call-preceded" return target). */
static int call_preceded(struct check *c, size_t pi, uint32_t pid, uint64_t a)
{
	uint32_t v;
	uint64_t key = a | ((uint64_t)pi << 48);
	if (pairmap_get(&c->callpre, key, 1, &v))
		return (int)v;
	const struct btr_image *img = btr_stream_image_pid(c->s, pid);
	uint8_t buf[16];
	v = 0;
	static const int lens[] = { 5, 2, 3, 6, 7, 4, 8, 9 };
	for (size_t i = 0; i < BTR_ARRAY_SIZE(lens) && !v; i++) {
		int k = lens[i];
		if (a < (uint64_t)k || btr_image_read(img, a - (uint64_t)k, buf, (size_t)k) != k)
			continue;
		struct btr_insn in;
		if (btr_insn_decode(buf, (size_t)k, a - (uint64_t)k, BTR_MODE_64, &in) == k &&
		    (in.kind == BTR_KIND_CALL || in.kind == BTR_KIND_CALL_IND))
			v = 1;
	}
	pairmap_put(&c->callpre, key, 1, v);
	return (int)v;
}

static int bytes_are(struct check *c, uint32_t pid, uint64_t a, const uint8_t *want, size_t n)
{
	uint8_t buf[16];
	return btr_image_read(btr_stream_image_pid(c->s, pid), a, buf, n) == (int)n && !memcmp(buf, want, n);
}

/* glibc's __restore_rt: mov $15, %rax; syscall (rt_sigreturn) */
static int is_sigreturn_stub(struct check *c, uint32_t pid, uint64_t a)
{
	static const uint8_t stub[] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	return bytes_are(c, pid, a, stub, sizeof(stub));
}

static int is_endbr64(struct check *c, uint32_t pid, uint64_t a)
{
	static const uint8_t e[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	return bytes_are(c, pid, a, e, sizeof(e));
}

/* Function identity of @a: (module index, nearest entry); 0 if unknown. */
static int func_id(struct check *c, struct proc *p, uint64_t a, int *mod, uint64_t *fn)
{
	struct mapping *m = check_map_of(p, a);
	const struct check_mod *cm = check_mod_of(c, m);
	if (!cm)
		return 0;
	uint64_t f = check_mod_func_of(cm, a - m->bias);
	if (f == UINT64_MAX)
		return 0;
	*mod = m->mod;
	*fn = f;
	return 1;
}

/* Nonzero if a direct JMP or Jcc in [lo, hi) of process @pid goes into
 * (tlo, thi): past the start of that range (a jump to a range's start may
 * be a tail call to another function; a jump into its middle is not). */
static int jumps_into(struct check *c, uint32_t pid, uint64_t lo, uint64_t hi, uint64_t tlo, uint64_t thi)
{
	size_t n = (size_t)(hi - lo > SPLIT_SCAN ? SPLIT_SCAN : hi - lo);
	uint8_t *buf = malloc(n);
	int got = buf ? btr_image_read(btr_stream_image_pid(c->s, pid), lo, buf, n) : -1;
	int hit = 0;
	for (size_t o = 0; got > 0 && o < (size_t)got && !hit;) {
		struct btr_insn in;
		int l = btr_insn_decode(buf + o, (size_t)got - o, lo + o, BTR_MODE_64, &in);
		if (l <= 0) {
			o++;
			continue;
		}
		hit = (in.kind == BTR_KIND_JMP || in.kind == BTR_KIND_JCC) && (in.flags & BTR_INSN_DIRECT) &&
		      in.target > tlo && in.target < thi;
		o += (size_t)l;
	}
	free(buf);
	return hit;
}

/* Nonzero if @from and @to (the same mapping's module @cm) are code of one
 * function: the same nearest entry, parts of one split function by their
 * symbol names (f and f.cold), or - what stripped files keep - two FDE
 * ranges one of which jumps into the middle of the other (f.cold jumps
 * back into f; f branches into f.cold). */
static int same_function(struct check *c, const struct btr_branch *b, const struct mapping *m,
			 const struct check_mod *cm)
{
	uint64_t fl = b->from - m->bias, tl = b->to - m->bias;
	uint64_t ff = check_mod_func_of(cm, fl), tf = check_mod_func_of(cm, tl);
	if (ff == tf || (ff != UINT64_MAX && check_mod_group_of(cm, fl) == check_mod_group_of(cm, tl)))
		return 1;
	uint64_t flo, fhi, tlo, thi;
	if (!check_mod_fde_of(cm, fl, &flo, &fhi) || !check_mod_fde_of(cm, tl, &tlo, &thi) || flo == tlo)
		return 0;
	uint32_t v;
	uint64_t key = (uint64_t)m->mod << 48 | flo;
	if (pairmap_get(&c->links, key, tlo, &v))
		return (int)v;
	v = jumps_into(c, b->pid, tlo + m->bias, thi + m->bias, flo + m->bias, fhi + m->bias) ||
	    jumps_into(c, b->pid, flo + m->bias, fhi + m->bias, tlo + m->bias, thi + m->bias);
	if (pairmap_put(&c->links, key, tlo, v) < 0)
		return 0;
	return (int)v;
}

/* The name of the function symbol holding @a (owned by the image), or NULL. */
static const char *sym_name(struct check *c, uint32_t pid, uint64_t a)
{
	struct btr_symbol sym;
	if (btr_image_symbol(btr_stream_image_pid(c->s, pid), a, &sym) < 0)
		return NULL;
	return sym.name;
}

/* Pops the shadow stack to the frame of the function @target lies in:
 * the most recent return site in that function and everything above it
 * (longjmp, C++ landing pads).  If no frame is in it, that function's
 * frame lies below what the trace showed (a forked child's thread starts
 * mid-stack, and its exit longjmps to perl_run's setjmp): the stack is
 * emptied, as at a trace's start.  Nothing changes if @target is in no
 * known function. */
static void unwind_to(struct check *c, struct proc *p, struct thr *t, uint64_t target)
{
	int tm, sm;
	uint64_t tf, sf;
	if (!func_id(c, p, target, &tm, &tf))
		return;
	for (size_t i = t->n; i-- > 0;) {
		if (t->st[i].type != FR_CALL)
			continue;
		if (t->st[i].ret == target || (func_id(c, p, t->st[i].ret, &sm, &sf) && sm == tm && sf == tf)) {
			t->n = i;
			return;
		}
	}
	t->n = 0;
}

/* Routines that resume a saved context, possibly on another stack: Go's
 * gogo (an indirect jump to a goroutine's saved pc: after mcall or
 * morestack, a goroutine's first function, a recovery point), glibc's
 * setcontext/swapcontext (a return to the saved rip: after a swapcontext
 * call, or makecontext's function) and Ruby's coroutine_transfer (its
 * fibers: a return to after another fiber's call of it, or to a new
 * fiber's start function, which coroutine_initialize put on the fiber's
 * stack).  Matched on the symbol the transfer leaves from. */
static const char *const CTX_RESTORERS[] = {
	"gogo", "runtime.gogo", "runtime.gogo.abi0",
	"setcontext", "swapcontext", "__setcontext", "__swapcontext",
	"coroutine_transfer", NULL
};

static int is_ctx_restorer(const char *name)
{
	for (size_t i = 0; CTX_RESTORERS[i]; i++)
		if (!strcmp(name, CTX_RESTORERS[i]))
			return 1;
	return 0;
}

/* The return addresses a runtime writes at the bottom of a new context's
 * stack: makecontext's __start_context, and goexit + 1 (PCQuantum) under
 * every goroutine's first function.  A return there is legitimate once a
 * context-restoring routine entered a function in that process. */
static int is_ctx_bottom(struct check *c, uint32_t pid, uint64_t a)
{
	static const struct { const char *name; uint64_t off; } B[] = {
		{ "__start_context", 0 }, { "runtime.goexit", 1 }, { "runtime.goexit.abi0", 1 },
	};
	struct btr_symbol sym;
	if (btr_image_symbol(btr_stream_image_pid(c->s, pid), a, &sym) < 0 || !sym.name)
		return 0;
	for (size_t i = 0; i < sizeof(B) / sizeof(B[0]); i++)
		if (a == sym.addr + B[i].off && !strcmp(sym.name, B[i].name))
			return 1;
	return 0;
}

/* 1 if @a is a function entry of a module process @p maps. */
static int is_entry_at(struct check *c, struct proc *p, uint64_t a)
{
	struct mapping *m = check_map_of(p, a);
	const struct check_mod *cm = check_mod_of(c, m);
	return cm && check_mod_is_entry(cm, a - m->bias);
}

/* A context-restoring routine transferred to @to: the frames on the
 * shadow stack may be another context's (each goroutine, each ucontext
 * has its own stack, which the trace does not show), so it is emptied, as
 * at a trace's start.  Entering a function there starts a new context. */
static void ctx_resume(struct check *c, struct proc *p, struct thr *t, uint64_t to)
{
	t->n = 0;
	if (is_entry_at(c, p, to))
		p->new_ctx = 1;
}

/* 1 if the function @from lies in is one that a sigreturn entered in
 * process @p (a call injected by a signal handler). */
static int in_injected(struct check *c, struct proc *p, uint64_t from)
{
	int mod;
	uint64_t fn;
	if (!p->n_injected || !func_id(c, p, from, &mod, &fn))
		return 0;
	struct mapping *m = check_map_of(p, from);
	for (size_t i = 0; i < p->n_injected; i++)
		if (p->injected[i] == fn + m->bias)
			return 1;
	return 0;
}

/* ---- the checks ---- */

static int emit_cand(struct check *c, struct thr *t)
{
	if (!t->cand)
		return 0;
	t->cand = 0;
	return check_add_finding(c, K_RET_HIJACK, BTR_CHECK_HIGH, t, t->chain_from, t->chain_to[0], t->chain_to[0],
			   t->chain_pos, t->chain_tsc,
			   "the return reaches a function entry that no call instruction precedes and that is "
			   "not on the shadow stack, and that function does not return into the sigreturn "
			   "trampoline (overwritten return address)");
}

/* Ends the run of hijacked returns of @t and reports it.  A single
 * return into a function entry is held back (unless @final): a signal
 * delivered right at a return can reach the trace as that return going
 * to the handler; if the function then returns into the sigreturn
 * trampoline, it was a handler (see check_ret). */
static int end_chain(struct check *c, struct thr *t, int final)
{
	if (!t->chain)
		return 0;
	unsigned n = t->chain;
	t->chain = 0;
	if (n == 1 && !t->chain_first_mismatch) {
		struct proc *p = proc_get(c, t->pid, NULL);
		struct mapping *m = p ? check_map_of(p, t->chain_to[0]) : NULL;
		const struct check_mod *cm = check_mod_of(c, m);
		if (cm && check_mod_is_entry(cm, t->chain_to[0] - m->bias)) {
			t->cand = 1;
			return final ? emit_cand(c, t) : 0;
		}
	}
	char list[CHAIN_MAX * 24 + 8] = "";
	size_t off = 0;
	for (unsigned i = 0; i < n && i < CHAIN_MAX; i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s0x%" PRIx64, i ? ", " : "",
					t->chain_to[i]);
	if (n > CHAIN_MAX)
		snprintf(list + off, sizeof(list) - off, ", ...");
	if (n >= 2)
		return check_add_finding(c, K_ROP, BTR_CHECK_HIGH, t, t->chain_from, t->chain_to[0], t->chain_to[0],
				   t->chain_pos, t->chain_tsc,
				   "%u returns in a row reach addresses that no call precedes and that are not on "
				   "the shadow stack, each after a short block (gadgets: %s)",
				   n, list);
	if (t->chain_first_mismatch)
		return check_add_finding(c, K_RET_MISMATCH, BTR_CHECK_MEDIUM, t, t->chain_from, t->chain_to[0],
				   t->chain_to[0], t->chain_pos, t->chain_tsc,
				   "the return reaches an instruction after a call, but not the return address "
				   "its frame pushed (stack switch or corrupted return address)");
	return check_add_finding(c, K_RET_HIJACK, BTR_CHECK_HIGH, t, t->chain_from, t->chain_to[0], t->chain_to[0],
			   t->chain_pos, t->chain_tsc,
			   "the return reaches an address that no call instruction precedes%s (overwritten "
			   "return address)",
			   t->n ? "" : " and that is not on the shadow stack");
}

static int hijacked_ret(struct check *c, struct thr *t, const struct btr_branch *b, int call_pre)
{
	if (t->chain && b->from >= t->chain_last_to && b->from - t->chain_last_to <= GADGET_BYTES) {
		if (t->chain < CHAIN_MAX)
			t->chain_to[t->chain] = b->to;
		t->chain++;
		t->chain_last_to = b->to;
		return 0;
	}
	int r = end_chain(c, t, 0);
	if (r >= 0)
		r = emit_cand(c, t);
	t->chain = 1;
	t->chain_to[0] = b->to;
	t->chain_from = b->from;
	t->chain_last_to = b->to;
	t->chain_pos = c->pos;
	t->chain_tsc = (b->flags & BTR_BF_TSC) ? b->tsc : 0;
	t->chain_first_mismatch = call_pre;
	return r;
}

static int in_jit_area(struct check *c, size_t pi, uint64_t a);

/* Nonzero if the return at @from leaves a context-restoring routine
 * (is_ctx_restorer).  Such a return goes to another context even when its
 * target equals the top frame's return address: every switch of Ruby's
 * fibers calls coroutine_transfer from the same site, so the fiber
 * resumed returns where the one leaving pushed its frame.  Cached per
 * address (the symbol lookup is too slow for every return). */
static int ret_of_restorer(struct check *c, size_t pi, uint32_t pid, uint64_t from)
{
	uint32_t v;
	uint64_t key = from | ((uint64_t)pi << 48);
	if (pairmap_get(&c->ctxret, key, 0, &v))
		return (int)v;
	const char *name = sym_name(c, pid, from);
	v = name && is_ctx_restorer(name);
	pairmap_put(&c->ctxret, key, 0, v);
	return (int)v;
}

/* Nonzero if the straight-line block [@blk, @from) of process @pid loads
 * the stack pointer from another register or from memory (mov %reg,%rsp,
 * mov mem,%rsp, xchg with %rsp, pop %rsp; not %rbp's epilogue, not lea's
 * realignment): a routine that switches to another stack, whose return
 * goes where that stack says (valgrind's call_on_new_stack pushes the
 * function to start and returns into it, as makecontext's contexts do). */
static int block_switches_stack(struct check *c, uint32_t pid, uint64_t blk, uint64_t from)
{
	if (!blk || blk > from || from - blk > 4096)
		return 0;
	size_t n = (size_t)(from - blk);
	uint8_t *buf = malloc(n + 1);
	int got = buf ? btr_image_read(btr_stream_image_pid(c->s, pid), blk, buf, n) : -1;
	int hit = 0;
	size_t o = 0;
	while (got == (int)n && o < n) {
		struct btr_insn in;
		int l = btr_insn_decode(buf + o, n - o, blk + o, BTR_MODE_64, &in);
		if (l <= 0)
			break;
		const uint8_t *q = buf + o;
		size_t k = 0;
		while (k < (size_t)l && (q[k] == 0x66 || q[k] == 0xf2 || q[k] == 0xf3 || q[k] == 0x2e || q[k] == 0x3e))
			k++;
		unsigned rex = k < (size_t)l && (q[k] & 0xf0) == 0x40 ? q[k++] : 0;
		unsigned op = k < (size_t)l ? q[k] : 0, mrm = k + 1 < (size_t)l ? q[k + 1] : 0;
		unsigned md = mrm >> 6, reg = ((mrm >> 3) & 7) | (rex & 4 ? 8 : 0), rm = (mrm & 7) | (rex & 1 ? 8 : 0);
		if (op == 0x5c && !(rex & 1) && k == (size_t)l - 1)
			hit = 1;   /* pop %rsp */
		else if (rex & 8) {
			if (op == 0x89 && md == 3 && rm == 4 && reg != 4 && reg != 5)
				hit = 1;   /* mov %reg,%rsp */
			else if (op == 0x8b && reg == 4 && (md != 3 || (rm != 4 && rm != 5)))
				hit = 1;   /* mov mem/%reg,%rsp */
			else if (op == 0x87 && md == 3 && (rm == 4 || reg == 4) && rm != reg)
				hit = 1;   /* xchg %reg,%rsp */
			else if (op == 0x94 && !(rex & 1))
				hit = 1;   /* xchg %rax,%rsp */
		}
		o += (size_t)l;
	}
	free(buf);
	return hit && o == n;   /* (the sweep ends at the return: in step) */
}

static int check_ret(struct check *c, size_t pi, struct proc *p, struct thr *t, const struct btr_branch *b)
{
	uint64_t to = b->to;
	if (t->cand && !t->n) {
		/* the function entered by a suspicious return returns */
		if (is_sigreturn_stub(c, b->pid, to)) {
			t->cand = 0;   /* it was a signal handler */
			return 0;
		}
		int rc = emit_cand(c, t);
		if (rc < 0)
			return rc;
	}
	if (t->n) {
		struct frame *top = &t->st[t->n - 1];
		if ((top->type == FR_WILD || ((top->type == FR_CALL || top->type == FR_RESUME) && top->ret == to)) &&
		    !ret_of_restorer(c, pi, b->pid, b->from)) {
			t->n--;
			return 0;
		}
		if (is_sigreturn_stub(c, b->pid, to)) {
			/* a handler returns into the sigreturn trampoline */
			if (top->type == FR_SIGNAL || top->type == FR_RESUME)
				t->sig_ret = t->st[--t->n].ret;
			return 0;
		}
		size_t lim = t->n > DEEP_SEARCH ? t->n - DEEP_SEARCH : 0;
		for (size_t i = t->n - 1; i-- > lim && !ret_of_restorer(c, pi, b->pid, b->from);)
			if (t->st[i].type == FR_CALL && t->st[i].ret == to) {
				t->n = i;   /* frames skipped by an unwinder */
				return 0;
			}
	} else if (is_sigreturn_stub(c, b->pid, to)) {
		return 0;
	}
	/* The C++ unwinder (libgcc's _Unwind_RaiseException and friends)
	 * enters the landing pad with a return (__builtin_eh_return). */
	const char *name = sym_name(c, b->pid, b->from);
	if (name) {
		if (!strncmp(name, "_Unwind_", 8)) {
			unwind_to(c, p, t, to);
			return 0;
		}
		/* setcontext/swapcontext return to the saved rip: into
		 * makecontext's function (an entry), or after a call (judged
		 * below, on the emptied stack) */
		if (is_ctx_restorer(name)) {
			ctx_resume(c, p, t, to);
			if (p->new_ctx && is_entry_at(c, p, to))
				return 0;
		}
	}
	/* A function a signal handler's sigreturn entered (a call it
	 * injected: Go's asyncPreempt) returns to where the signal
	 * interrupted the thread; that frame is gone when the thread switched
	 * contexts in between. */
	if (in_injected(c, p, b->from)) {
		t->n = 0;
		return 0;
	}
	/* A block that loaded the stack pointer from elsewhere returns on
	 * another stack: like setcontext's return (a function entry starts a
	 * new context; any other target is judged on the emptied stack) */
	if (block_switches_stack(c, b->pid, t->blk, b->from)) {
		ctx_resume(c, p, t, to);
		if (p->new_ctx && is_entry_at(c, p, to))
			return 0;
	}
	int pre = call_preceded(c, pi, b->pid, to);
	if (!pre && p->new_ctx && is_ctx_bottom(c, b->pid, to)) {
		t->n = 0;   /* a context's first function returns where its runtime put it */
		return 0;
	}
	if (t->desync && !t->n)
		return 0;
	if (pre && (!t->n || c->stats.sampled)) {
		t->n = 0;   /* began mid-stack, or after a gap */
		return 0;
	}
	if (insn_at(c, pi, b->pid, to) == INSN_NOCODE)
		return 0;   /* no code there to judge (unbacked code is reported apart) */
	t->n = 0;           /* the stack cannot be trusted after this */
	/* Into code a runtime names (perf map, jitdump) or a known JIT engine's
	 * code (jit_code): the runtime enters its
	 * JIT code through return addresses it writes itself (V8's on-stack
	 * replacement and deoptimization), and rebuilds the frames. */
	if (image_code_named(btr_stream_image_pid(c->s, b->pid), to) || in_jit_area(c, pi, to))
		return 0;
	return hijacked_ret(c, t, b, pre);
}

static int check_indirect(struct check *c, size_t pi, struct proc *p, struct thr *t,
			  const struct btr_branch *b)
{
	uint32_t dummy;
	if (pairmap_get(&c->edges, b->from, b->to, &dummy))
		return 0;
	int rc = pairmap_put(&c->edges, b->from, b->to, 0);
	if (rc < 0)
		return rc;
	struct mapping *fmap = check_map_of(p, b->from), *tmap = check_map_of(p, b->to);
	const struct check_mod *fm = check_mod_of(c, fmap), *tm = check_mod_of(c, tmap);
	if (!tm)
		return 0;   /* no model (or no file: reported as unbacked) */
	if (insn_at(c, pi, b->pid, b->to) == INSN_NOCODE)
		return 0;   /* a mapping of the file the image cannot place (an ET_EXEC's
			     * text mapped again elsewhere): no code there to judge */
	uint64_t tl = b->to - tmap->bias;
	uint64_t tsc = (b->flags & BTR_BF_TSC) ? b->tsc : 0;
	if (fm && (rc = check_got_transfer(c, p, t, b, fmap, fm)) != 0)
		return rc < 0 ? rc : 0;   /* through a GOT slot: judged there */
	if (b->kind == BTR_KIND_CALL_IND) {
		if (check_mod_is_entry(tm, tl) || check_mod_in_plt(tm, tl) || is_endbr64(c, b->pid, b->to) ||
		    check_starts_by_layout(c, b->pid, tmap, tm, tl))
			return 0;
		uint64_t fn = check_mod_func_of(tm, tl);
		char fs[SYM_LEN] = "?";
		if (fn != UINT64_MAX)
			check_symbolize(c, b->pid, fn + tmap->bias, fs);
		return check_add_finding(c, K_CALL_NONENTRY, BTR_CHECK_HIGH, t, b->from, b->to, b->to, c->pos, tsc,
				   "the indirect call reaches 0x%" PRIx64 " in %s, %" PRIu64 " bytes into the "
				   "function that starts at %s: not a function entry (no symbol, FDE, ENDBR64 or "
				   "PLT entry there)",
				   b->to, tm->path, fn != UINT64_MAX ? tl - fn : 0, fs);
	}
	/* JMP_IND */
	if (fm && check_mod_in_plt(fm, b->from - fmap->bias))
		return 0;   /* a PLT jump through no known slot (PLT0: to the lazy-binding resolver) */
	if (fmap == tmap && same_function(c, b, fmap, fm))
		return 0;   /* switch table (also into a .cold part), computed goto */
	if (check_mod_is_entry(tm, tl) || check_mod_in_plt(tm, tl) || is_endbr64(c, b->pid, b->to) ||
	    check_mod_is_taken(tm, tl) || check_starts_by_layout(c, b->pid, tmap, tm, tl) ||
	    check_lea_taken(c, b->pid, tmap, tm, tl))
		return 0;   /* tail call, resolver, thunk, computed goto through a label table */
	if (call_preceded(c, pi, b->pid, b->to))
		return 0;   /* longjmp to after setjmp (unwound in on_branch) */
	return check_add_finding(c, K_JMP_NONENTRY, BTR_CHECK_MEDIUM, t, b->from, b->to, b->to, c->pos, tsc,
			   "the indirect jump leaves its function for 0x%" PRIx64 " in %s, which is no "
			   "function entry and follows no call",
			   b->to, tm->path);
}

/* The PT decoder found the trace contradicting the file's code after
 * t->pm_from; @resume is where the flow was found again (0: never). */
static int emit_code_mod(struct check *c, struct thr *t, uint64_t resume)
{
	t->pending_mod = 0;
	uint8_t bytes[12];
	char hex[3 * sizeof(bytes) + 1] = "";
	int n = btr_image_read(btr_stream_image_pid(c->s, t->pid), t->pm_from, bytes, sizeof(bytes));
	size_t off = 0;
	for (int i = 0; i < n; i++)
		off += (size_t)snprintf(hex + off, sizeof(hex) - off, "%s%02x", i ? " " : "", bytes[i]);
	char rs[SYM_LEN + 48] = "";
	if (resume) {
		char sym[SYM_LEN];
		check_symbolize(c, t->pid, resume, sym);
		snprintf(rs, sizeof(rs), "; execution went on at 0x%" PRIx64 " (%s)", resume, sym);
	}
	return check_add_finding(c, K_CODE_MOD, BTR_CHECK_HIGH, t, t->pm_from, resume, resume, t->pm_pos, t->pm_tsc,
			   "the trace stops matching the file's code at 0x%" PRIx64 " (%s)%s: the code that "
			   "ran is not what the file holds there [%s] - an inline hook or code patched at run "
			   "time (the trace holds no bytes of the new code)",
			   t->pm_from, btr_errstr(t->pm_reason), rs, n > 0 ? hex : "no bytes");
}

static int is_user_transfer(const struct btr_branch *b)
{
	if (b->flags & (BTR_BF_KERNEL | BTR_BF_TO_KERNEL))
		return 0;
	if (b->to >= 0x800000000000ull || b->from >= 0x800000000000ull)
		return 0;
	switch (b->kind) {
	case BTR_KIND_SYSCALL: case BTR_KIND_SYSRET: case BTR_KIND_INT: case BTR_KIND_INT3:
	case BTR_KIND_IRET: case BTR_KIND_FAR_CALL: case BTR_KIND_FAR_JMP: case BTR_KIND_FAR_RET:
		return 0;
	default:
		return 1;
	}
}

static inline size_t ec_slot(uint64_t from, uint64_t to)
{
	return (size_t)(from ^ (from >> 9) ^ (to << 3)) & (EC_SIZE - 1);
}

/* The cache key of @b: its source, kind and the flags on_branch reads
 * (taken, kernel source or target); 0 for a source on_branch never
 * judges (not a user address), which no entry holds. */
static inline uint64_t ec_key(const struct btr_branch *b)
{
	uint64_t fl = (uint64_t)(b->flags & (BTR_BF_TAKEN | BTR_BF_KERNEL)) | (b->flags & BTR_BF_TO_KERNEL ? 4u : 0u);
	return b->from >> 47 ? 0 : b->from | (uint64_t)b->kind << 48 | fl << 56;
}

static inline void ec_put(struct check *c, size_t pi, const struct btr_branch *b, uint64_t ret)
{
	struct ec_ent *e = &c->ec[ec_slot(b->from, b->to)];
	e->key = ec_key(b);
	e->to = b->to;
	e->tag = (uint64_t)pi << 32 | c->gen;
	e->cg = c->code_gen;
	e->ret = ret;
}

/* One branch @b of thread @t of process @p (index @pi). */
/* The areas JIT engines' code lies in: 2 MiB-aligned, as an engine's code
 * cache is one reservation whose stubs other libraries call too (libjava's
 * JNI calls reach HotSpot's generated accessors). */
#define JIT_AREA_SHIFT 21

/* Libraries that compile code at run time and call into it without naming
 * it (no perf map): their code is no attack.  Matched on the file name. */
static const char *const JIT_ENGINES[] = {
	"libpcre2-8.so", "libpcre2-16.so", "libpcre2-32.so", "libpcre.so", /* grep -P, PCRE2_JIT */
	"libluajit-5.1.so", "libjvm.so", "libmozjs-", "libjavascriptcoregtk-", "libLLVM", "libgccjit.so",
	"liborc-0.4.so", "luajit-", /* LuaJIT's versioned program, luajit-2.1.0-beta3 */ NULL
};
/* Programs with their JIT engine linked in (V8 in node, LuaJIT in Debian's
 * luajit), by exact name. */
static const char *const JIT_PROGRAMS[] = { "node", "nodejs", "luajit", NULL };

static int jit_engine(const char *path)
{
	const char *base = check_base_name(path);
	for (size_t i = 0; JIT_ENGINES[i]; i++)
		if (!strncmp(base, JIT_ENGINES[i], strlen(JIT_ENGINES[i])))
			return 1;
	for (size_t i = 0; JIT_PROGRAMS[i]; i++)
		if (!strcmp(base, JIT_PROGRAMS[i]))
			return 1;
	/* valgrind's tools (memcheck-amd64-linux, none-amd64-linux, ... in a
	 * directory named valgrind): they run the program as translations in
	 * their own code cache */
	size_t n = strlen(base);
	return n > 12 && !strcmp(base + n - 12, "-amd64-linux") && base - path >= 10 &&
	       !strncmp(base - 10, "/valgrind/", 10);
}

/* 1 if @a lies in an area of JIT engine code (jit_code) of process @pi. */
static int in_jit_area(struct check *c, size_t pi, uint64_t a)
{
	uint32_t v;
	return pairmap_get(&c->jit, a >> JIT_AREA_SHIFT, pi, &v);
}

/* 1 if the transfer @b into code no file backs enters a JIT engine's code:
 * from a JIT_ENGINES library, or from an area of such code, into an area
 * one entered before.  Such areas are remembered and counted as allowed
 * (stats.allowed, one per area).  Negative on error. */
static int jit_code(struct check *c, size_t pi, struct proc *p, const struct btr_branch *b)
{
	uint32_t v;
	uint64_t area = b->to >> JIT_AREA_SHIFT;
	if (pairmap_get(&c->jit, area, pi, &v))
		return 1;
	if (!pairmap_get(&c->jit, b->from >> JIT_AREA_SHIFT, pi, &v)) {
		const struct mapping *fm = check_map_of(p, b->from);
		if (!fm || !fm->backed || !fm->path || !jit_engine(fm->path))
			return 0;
	}
	int rc = pairmap_put(&c->jit, area, pi, 1);
	if (rc < 0)
		return rc;
	c->stats.allowed++;
	return 1;
}

/* 1 if a file holds the code at @a (the code-modified tests compare the
 * recorded branch with the file's bytes).  Code no file backs - JIT code
 * whose bytes the recorder kept - changes legitimately: LuaJIT patches a
 * trace's exit jumps to lead to its side traces, and the decoded-instruction
 * cache holds the version first seen (the image may hold a later one before
 * the branches of the earlier arrive), so there is nothing to compare. */
static int file_code(struct check *c, size_t pi, struct proc *p, uint64_t a)
{
	struct mapping *m = check_map_of(p, a);
	if (m)
		return m->backed;
	struct btr_image_module mi;
	return insn_at(c, pi, p->pid, a) != INSN_NOCODE &&
	       btr_image_module_at(btr_stream_image_pid(c->s, p->pid), a, &mi) == 0 && mi.is_elf;
}

static int on_branch(struct check *c, struct proc *p, size_t pi, struct thr *t, const struct btr_branch *b)
{
	c->stats.branches++;
	t->sys_next = b->kind == BTR_KIND_SYSCALL && b->from ? b->from + 2 : 0;
	if (!is_user_transfer(b))
		return 0;
	int rc = 0;
	uint64_t tsc = (b->flags & BTR_BF_TSC) ? b->tsc : 0;
	int cond = b->kind == BTR_KIND_JCC || b->kind == BTR_KIND_LOOP || b->kind == BTR_KIND_JRCXZ;
	int taken = (b->flags & BTR_BF_TAKEN) || !cond;
	/* a signal that interrupted the thread right at a suspicious return's
	 * target, before anything ran there (see the FLOW_ENABLE event) */
	uint64_t sig_at_ret = b->kind == BTR_KIND_ASYNC && t->chain == 1 && b->from == t->chain_to[0] ? b->from : 0;
	if (t->chain && b->kind != BTR_KIND_RET && (rc = end_chain(c, t, 0)) < 0)
		return rc;
	if (t->pending_mod && (rc = emit_code_mod(c, t, b->from)) < 0)
		return rc;
	t->blk = t->last_to;
	t->last_to = b->to;
	int clean = 1;   /* nothing found on the way */
	/* A transfer into memory no file backs: shellcode, or JIT code -
	 * which its runtime names in a perf map or jitdump (then no finding). */
	if (taken && b->to && p->n_maps) {
		struct mapping *m = check_map_of(p, b->to);
		struct btr_image *img = btr_stream_image_pid(c->s, b->pid);
		/* without a module record the image may still hold a file's code
		 * there (an --elf given by the user); code bytes the recorder
		 * kept (CODE records) are no file */
		struct btr_image_module mi;
		int nocode = insn_at(c, pi, b->pid, b->to) == INSN_NOCODE;
		int unbacked = m ? !m->backed : nocode || btr_image_module_at(img, b->to, &mi) != 0 || !mi.is_elf;
		int jit = unbacked && !image_code_named(img, b->to) ? jit_code(c, pi, p, b) : 0;
		if (jit < 0)
			return jit;
		if (unbacked && !jit && !image_code_named(img, b->to)) {
			clean = 0;
			if ((rc = check_add_finding(c, K_UNBACKED, BTR_CHECK_HIGH, t, b->from, b->to, b->to & ~0xfffull,
					      c->pos, tsc,
					      "control enters 0x%" PRIx64 ", executable memory that no file backs "
					      "(%s%s) and no perf map or jitdump names: shellcode or unnamed JIT code",
					      b->to, m ? "mapping " : "no module record",
					      m ? (m->path && m->path[0] ? m->path : "anonymous") : "")) < 0)
				return rc;
			/* With its bytes (the qemu recorder keeps them) the code's
			 * calls and returns are checked like any other. */
			if (nocode && (b->kind == BTR_KIND_CALL || b->kind == BTR_KIND_CALL_IND))
				return push_frame(c, t, 0, FR_WILD);
			if (nocode)
				return 0;
		}
	}
	if (b->kind == BTR_KIND_ASYNC) {
		/* Sampled LBR has no asynchronous user-to-user entries (CPL
		 * filtering drops the kernel's half), but the LBR classifier
		 * calls a direct branch whose target is not the recorded one
		 * "async": that is code which differs from the file. */
		uint32_t v = c->stats.sampled ? insn_at(c, pi, b->pid, b->from) : INSN_NOCODE;
		if (v != INSN_NOCODE && ((v >> 16) & BTR_INSN_DIRECT)) {
			struct btr_insn in;
			if (btr_insn_decode_image(btr_stream_image_pid(c->s, b->pid), b->from, BTR_MODE_64, &in) > 0 &&
			    in.target != b->to) {
				struct mapping *m = check_map_of(p, b->from);
				return check_add_finding(c, K_CODE_MOD, BTR_CHECK_HIGH, t, b->from, b->to, b->to, c->pos, tsc,
						   "the direct %s at 0x%" PRIx64 " in %s encodes target 0x%" PRIx64
						   ", the branch record goes to 0x%" PRIx64 ": the code that ran is not "
						   "the file's",
						   btr_branch_kind_name((enum btr_branch_kind)in.kind), b->from,
						   m && m->path ? m->path : "the image", in.target, b->to);
			}
		}
		t->sig_at_ret = sig_at_ret;
		return push_frame(c, t, b->from, FR_SIGNAL);
	}
	uint64_t dtarget;
	uint32_t v = insn_target_at(c, pi, b->pid, b->from, &dtarget);
	if (v == INSN_NOCODE) {
		c->stats.unknown_code++;
		if (b->kind == BTR_KIND_CALL || b->kind == BTR_KIND_CALL_IND)
			return push_frame(c, t, 0, FR_WILD);
		if (b->kind == BTR_KIND_RET && t->n)
			t->n--;
		return 0;
	}
	int dkind = (int)(v & 0xff), dlen = (int)((v >> 8) & 0xff);
	uint32_t dflags = v >> 16;
	if (b->kind != BTR_KIND_NONE && dkind != b->kind &&
	    btr_branch_kind_class((enum btr_branch_kind)dkind) !=
		    btr_branch_kind_class((enum btr_branch_kind)b->kind) && file_code(c, pi, p, b->from)) {
		struct mapping *m = check_map_of(p, b->from);
		return check_add_finding(c, K_CODE_MOD, BTR_CHECK_HIGH, t, b->from, b->to, b->to, c->pos, tsc,
				   "the trace records a %s branch at 0x%" PRIx64 ", but the bytes %s holds there "
				   "decode to %s: the code that ran is not the file's (patched at run time)",
				   btr_branch_kind_name((enum btr_branch_kind)b->kind), b->from,
				   m && m->path ? m->path : "the image",
				   dkind ? btr_branch_kind_name((enum btr_branch_kind)dkind) : "no branch");
	}
	int kind = b->kind != BTR_KIND_NONE ? b->kind : dkind;
	if (taken && (dflags & BTR_INSN_DIRECT) && dtarget != b->to) {
		if (file_code(c, pi, p, b->from)) {
			struct mapping *m = check_map_of(p, b->from);
			return check_add_finding(c, K_CODE_MOD, BTR_CHECK_HIGH, t, b->from, b->to, b->to, c->pos,
					   tsc,
					   "the direct %s at 0x%" PRIx64 " in %s encodes target 0x%" PRIx64
					   ", the trace went to 0x%" PRIx64 ": the code that ran is not the file's",
					   btr_branch_kind_name((enum btr_branch_kind)kind), b->from,
					   m && m->path ? m->path : "the image", dtarget, b->to);
		}
		clean = 0;   /* JIT code rewritten in place (see file_code) */
	}
	int cache = clean && b->kind == kind;
	switch (kind) {
	case BTR_KIND_CALL:
		if (cache)
			ec_put(c, pi, b, b->from + (uint64_t)dlen);
		return push_frame(c, t, b->from + (uint64_t)dlen, FR_CALL);
	case BTR_KIND_CALL_IND:
		if ((rc = push_frame(c, t, b->from + (uint64_t)dlen, FR_CALL)) < 0)
			return rc;
		return check_indirect(c, pi, p, t, b);
	case BTR_KIND_RET:
		if (c->stats.sampled) {
			/* kBouncer: many short blocks ending in returns */
			if (t->gchain && b->from >= t->glast_to && b->from - t->glast_to <= GADGET_BYTES) {
				if (++t->gchain == 8 &&
				    (rc = check_add_finding(c, K_GADGETS, BTR_CHECK_MEDIUM, t, t->gfirst_from, t->gfirst_to,
						      t->gfirst_to, c->pos, tsc,
						      "8 returns in a row, each after a block of at most %d bytes "
						      "(a gadget chain; the targets follow calls)",
						      GADGET_BYTES)) < 0)
					return rc;
			} else {
				t->gchain = 1;
				t->gfirst_from = b->from;
				t->gfirst_to = b->to;
			}
			t->glast_to = b->to;
		} else if (cache) {
			ec_put(c, pi, b, 0);
		}
		return check_ret(c, pi, p, t, b);
	case BTR_KIND_JMP_IND: {
		const char *name = sym_name(c, b->pid, b->from);
		if (name) {
			if (!strncmp(name, "_Unwind_", 8)) {
				/* libgcc's unwinder enters a landing pad (uw_install_context) */
				unwind_to(c, p, t, b->to);
				return 0;
			}
			if (is_ctx_restorer(name)) {
				/* Go's gogo resumes a goroutine: not judged, like a
				 * landing pad (a recovery point is neither an entry
				 * nor after a call) */
				ctx_resume(c, p, t, b->to);
				return 0;
			}
		}
		if ((rc = check_indirect(c, pi, p, t, b)) < 0)
			return rc;
		/* longjmp: an indirect jump to the instruction after a call
		 * of another function (within one function it is a switch
		 * table whose case follows a call, as in a recursive
		 * evaluator: no frame ends), or __builtin_longjmp to its
		 * __builtin_setjmp's receiver (a label its function takes) */
		struct mapping *m = check_map_of(p, b->to);
		if (m && check_mod_of(c, m) && !check_mod_is_entry(check_mod_of(c, m), b->to - m->bias) &&
		    !(m == check_map_of(p, b->from) && same_function(c, b, m, check_mod_of(c, m))) &&
		    (call_preceded(c, pi, b->pid, b->to) || check_lea_taken(c, b->pid, m, check_mod_of(c, m), b->to - m->bias)))
			unwind_to(c, p, t, b->to);
		return 0;
	}
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ:
	case BTR_KIND_JMP:
		if (cache)
			ec_put(c, pi, b, 0);
		return 0;
	default:
		return 0;
	}
}

/* ---- analysis callbacks ---- */

static int a_begin(void *state, struct btr_stream *s)
{
	struct check *c = state;
	c->s = s;
	return 0;
}

static int a_branches(void *state, const struct btr_branch *b, size_t n)
{
	struct check *c = state;
	for (size_t i = 0; i < n;) {
		/* a run of one thread's branches shares the lookups */
		uint32_t tid = b[i].tid, pid = b[i].pid;
		size_t pi;
		struct proc *p = proc_get(c, pid, &pi);
		struct thr *t = thr_get(c, tid, pid);
		if (!p || !t)
			return -BTR_ERR_NOMEM;
		c->gen = btr_image_generation(btr_stream_image_pid(c->s, pid));
		/* The fast path: transfers judged clean before (ec) with no
		 * chain of returns or code-modified evidence pending (which the
		 * next branch ends).  Positions and counts are kept here and
		 * stored before anything that may report. */
		uint64_t tag = (uint64_t)pi << 32 | c->gen, pos = c->pos, nb = 0;
		size_t i0 = i;
		int fast = !t->chain && !t->pending_mod, tail = 0;
		for (; i < n && b[i].tid == tid && b[i].pid == pid; i++, pos++) {
			const struct btr_branch *x = &b[i];
			int rc;
			if (btr_likely(fast)) {
				const struct ec_ent *e = &c->ec[ec_slot(x->from, x->to)];
				if (btr_likely(e->key == ec_key(x) && e->to == x->to && e->tag == tag &&
						e->cg == c->code_gen)) {
					nb++;
					tail = 1;
					if (btr_likely(x->kind != BTR_KIND_CALL && x->kind != BTR_KIND_RET))
						continue;
					if (x->kind == BTR_KIND_CALL) {
						if ((rc = push_frame(c, t, e->ret, FR_CALL)) < 0)
							return rc;
						continue;
					}
					c->pos = pos;
					t->blk = i > i0 ? b[i - 1].to : t->last_to;
					if ((rc = check_ret(c, pi, p, t, x)) < 0)
						return rc;
					fast = !t->chain;
					continue;
				}
			}
			c->pos = pos;
			c->stats.branches += nb;
			nb = 0;
			if (tail)
				t->last_to = b[i - 1].to;   /* (on_branch keeps it for kernel branches) */
			tail = 0;
			if ((rc = on_branch(c, p, pi, t, x)) < 0)
				return rc;
			fast = !t->chain && !t->pending_mod;
		}
		c->pos = pos;
		c->stats.branches += nb;
		if (tail) {
			t->sys_next = 0;
			t->last_to = b[i - 1].to;
		}
	}
	return 0;
}

static int mod_index(struct check *c, const char *path)
{
	for (size_t i = 0; i < c->n_mods; i++)
		if (!strcmp(c->mods[i].path, path))
			return (int)i;
	struct check_mod *nm = realloc(c->mods, (c->n_mods + 1) * sizeof(*nm));
	if (!nm)
		return -BTR_ERR_NOMEM;
	c->mods = nm;
	memset(&nm[c->n_mods], 0, sizeof(*nm));
	int r = check_mod_load(path, &nm[c->n_mods]);
	if (r == -BTR_ERR_NOMEM) {
		check_mod_free(&nm[c->n_mods]);
		return r;
	}
	if (r < 0)
		btr_debug("check: no model for %s: %s", path, btr_errstr(r));
	return (int)c->n_mods++;
}

static int file_backed(const char *path)
{
	/* code the kernel provides */
	if (path && (!strcmp(path, "[vdso]") || !strcmp(path, "[vsyscall]") || !strcmp(path, "[uprobes]")))
		return 1;
	if (!path || path[0] != '/' || !strncmp(path, "//anon", 6) || !strncmp(path, "/memfd:", 7) ||
	    btr__path_is_device(path))
		return 0;
	size_t n = strlen(path);
	return !(n > 10 && !strcmp(path + n - 10, " (deleted)"));
}

static int on_module(struct check *c, const struct btr_stream_event *ev)
{
	const struct btr_rec_module *r = &ev->rec->u.module;
	size_t pi;
	struct proc *p = proc_get(c, ev->pid ? ev->pid : r->pid, &pi);
	if (!p)
		return -BTR_ERR_NOMEM;
	/* PROT_EXEC = 4; 0 = unknown (perf MMAP without protection) */
	if (r->prot && !(r->prot & 4))
		return 0;
	/* kernel text and modules (perf): not user mappings */
	if ((r->path && !strncmp(r->path, "[kernel", 7)) || r->start >= 0x800000000000ull ||
	    r->size >= 0x800000000000ull)
		return 0;
	if (p->n_maps == p->cap_maps) {
		size_t nc = p->cap_maps ? p->cap_maps * 2 : 16;
		struct mapping *nm = realloc(p->maps, nc * sizeof(*nm));
		if (!nm)
			return -BTR_ERR_NOMEM;
		p->maps = nm;
		p->cap_maps = nc;
	}
	struct mapping *m = &p->maps[p->n_maps];
	memset(m, 0, sizeof(*m));
	m->start = r->start;
	m->end = r->start + r->size;
	m->mod = -1;
	m->backed = file_backed(r->path);
	if (r->path && !(m->path = strdup(r->path)))
		return -BTR_ERR_NOMEM;
	p->n_maps++;
	const char *file = ev->path;
	uint64_t bias;
	/* (the bias of a copy too: node's builtins run from one at 0x7f...,
	 * and calls into it are judged by the file's functions) */
	if (m->backed && file && btr__elf_copy_bias(file, r->start, r->pgoff, r->prot ? (int)r->prot : -1,
						    &bias) == 0) {
		int mi = mod_index(c, file);
		if (mi < 0)
			return mi;
		m->mod = mi;
		m->bias = bias;
	}
	/* new code at these addresses: forget what was cached */
	forget_code(c);
	return 0;
}

static void drop_maps(struct proc *p, uint64_t start, uint64_t size, int all)
{
	size_t w = 0;
	for (size_t i = 0; i < p->n_maps; i++) {
		struct mapping *m = &p->maps[i];
		if (all || (m->start >= start && m->end <= start + size)) {
			free(m->path);
			continue;
		}
		p->maps[w++] = *m;
	}
	p->n_maps = w;
}

static void reset_thread(struct check *c, struct thr *t)
{
	t->sig_at_ret = 0;
	end_chain(c, t, 1);
	emit_cand(c, t);
	t->n = 0;
	t->gchain = 0;
}

static int a_event(void *state, const struct btr_stream_event *ev)
{
	struct check *c = state;
	struct thr *t = NULL;
	switch (ev->type) {
	case BTR_SEV_MACHINE:
		if (ev->rec && (ev->rec->u.machine.flags & BTR_MACHINE_IP_FILTER))
			c->ip_filtered = 1;
		return 0;
	case BTR_SEV_MODULE_LOAD:
		return on_module(c, ev);
	case BTR_SEV_MODULE_UNLOAD:
		/* Mappings stay: the qemu recorder writes module records as
		 * they happen but PT in large chunks, so an unload can precede
		 * branches that ran before it.  A later load at the same
		 * addresses wins (map_of searches newest first). */
		return 0;
	case BTR_SEV_EXEC: {
		struct proc *p = proc_get(c, ev->pid ? ev->pid : ev->rec->u.module.pid, NULL);
		if (p) {
			drop_maps(p, 0, 0, 1);
			p->new_ctx = 0;
			p->n_injected = 0;
		}
		for (size_t i = 0; i < c->n_thr; i++)
			if (c->thr[i]->pid == ev->pid)
				reset_thread(c, c->thr[i]);
		forget_code(c);
		pairmap_clear(&c->edges);
		pairmap_clear(&c->jit);
		return 0;
	}
	case BTR_SEV_THREAD_EXIT:
		for (size_t i = 0; i < c->n_thr; i++)
			if (c->thr[i]->tid == ev->tid) {
				end_chain(c, c->thr[i], 1);
				emit_cand(c, c->thr[i]);
				if (c->last_thr == c->thr[i])
					c->last_thr = NULL;
				free(c->thr[i]->st);
				free(c->thr[i]);
				c->thr[i] = c->thr[--c->n_thr];
				break;
			}
		return 0;
	case BTR_SEV_DISCONTINUITY:
		if (!c->stats.sampled)
			memset(c->ec, 0, sizeof(c->ec));   /* returns are judged apart there */
		c->stats.sampled = 1;
		/* fall through */
	case BTR_SEV_GAP:
		if (ev->tid && (t = thr_get(c, ev->tid, ev->pid)) != NULL)
			reset_thread(c, t);
		return 0;
	case BTR_SEV_FLOW:
		if (!ev->flow || !ev->tid)
			return 0;
		if (ev->flow->type == BTR_FLOW_ENABLE) {
			if (!(t = thr_get(c, ev->tid, ev->pid)))
				return -BTR_ERR_NOMEM;
			if (c->ip_filtered) {
				/* IP filtering (TIP.PGE): back at a return address of
				 * the shadow stack, the returns to it ran outside the
				 * ranges, untraced */
				for (size_t k = t->n; k-- > 0;)
					if (t->st[k].ret == ev->flow->ip) {
						t->n = k;
						break;
					}
			}
			if (t->pending_mod)
				return emit_code_mod(c, t, ev->flow->ip);
			/* Resuming elsewhere than after the system call: a signal
			 * was delivered on its return (unless it was rt_sigreturn
			 * itself, which resumes the interrupted code). */
			uint64_t next = t->sys_next;
			t->sys_next = 0;
			uint64_t was = t->sig_ret, at_ret = t->sig_at_ret;
			t->sig_ret = 0;
			t->sig_at_ret = 0;
			if (!next || ev->flow->ip == next)
				return 0;
			if (!is_sigreturn_stub(c, ev->pid, next - 9))
				return push_frame(c, t, next, FR_SIGNAL);
			/* rt_sigreturn resumed a function entry, not the code the
			 * signal interrupted: the handler injected a call (Go's
			 * asynchronous preemption pushes the interrupted pc and
			 * enters asyncPreempt), which returns there */
			struct proc *p = proc_get(c, ev->pid, NULL);
			if (!p || !was || !is_entry_at(c, p, ev->flow->ip))
				return 0;
			int injected = ev->flow->ip != was;
			/* The same, when the signal came right after a return: the
			 * recorder takes where rt_sigreturn resumes for the return's
			 * target and for the interrupted pc (docs/record.md), so the
			 * held-back return into this entry went, in truth, to the pc
			 * the handler saved (which the trace does not show) */
			if (!injected && at_ret == was && t->cand && t->chain_to[0] == was) {
				t->cand = 0;
				injected = 1;
			}
			if (!injected)
				return 0;
			size_t k = 0;
			while (k < p->n_injected && p->injected[k] != ev->flow->ip)
				k++;
			if (k == p->n_injected && k < MAX_INJECTED)
				p->injected[p->n_injected++] = ev->flow->ip;
			if (ev->flow->ip == was)
				return 0;
			/* (or a signal pending at this rt_sigreturn is delivered
			 * before the interrupted code runs: the return above then
			 * waits for that handler's rt_sigreturn) */
			t->sig_at_ret = at_ret;
			return push_frame(c, t, was, FR_RESUME);
		}
		if (ev->flow->type != BTR_FLOW_GAP && ev->flow->type != BTR_FLOW_OVERFLOW)
			return 0;
		if (!(t = thr_get(c, ev->tid, ev->pid)))
			return -BTR_ERR_NOMEM;
		reset_thread(c, t);
		t->desync = 1;
		if (ev->flow->type == BTR_FLOW_GAP && ev->flow->reason == -BTR_ERR_BAD_CONTEXT && t->last_to &&
		    !t->code_mod_seen++) {
			t->pending_mod = 1;
			t->pm_from = t->last_to;
			t->pm_pos = c->pos;
			t->pm_tsc = ev->flow->tsc;
			t->pm_reason = ev->flow->reason;
		}
		return 0;
	default:
		return 0;
	}
}

static int a_end(void *state, int status)
{
	struct check *c = state;
	(void)status;
	for (size_t i = 0; i < c->n_thr; i++) {
		struct thr *t = c->thr[i];
		int rc = end_chain(c, t, 1);
		if (rc >= 0)
			rc = emit_cand(c, t);
		if (rc < 0)
			return rc;
		if (t->pending_mod && (rc = emit_code_mod(c, t, 0)) < 0)
			return rc;
	}
	c->ended = 1;
	return 0;
}

static void a_destroy(void *state)
{
	struct check *c = state;
	if (!c)
		return;
	for (size_t i = 0; i < c->n_mods; i++)
		check_mod_free(&c->mods[i]);
	free(c->mods);
	for (size_t i = 0; i < c->n_procs; i++) {
		drop_maps(&c->procs[i], 0, 0, 1);
		free(c->procs[i].maps);
	}
	free(c->procs);
	for (size_t i = 0; i < c->n_thr; i++) {
		free(c->thr[i]->st);
		free(c->thr[i]);
	}
	free(c->thr);
	forget_code(c);
	pairmap_clear(&c->edges);
	pairmap_clear(&c->links);
	pairmap_clear(&c->layout);
	pairmap_clear(&c->dedup);
	pairmap_clear(&c->jit);
	for (size_t i = 0; i < c->n_f; i++)
		free(c->f[i].detail);
	free(c->f);
	free(c->pubs);
	check_allow_free(c->rules, c->n_rules);
	free(c);
}

static const char *const check_formats[] = { "text", "json", NULL };

const struct btr_analysis_ops btr__check_ops = {
	.name = "check",
	.begin = a_begin,
	.branches = a_branches,
	.event = a_event,
	.end = a_end,
	.write = check_write,
	.destroy = a_destroy,
	.formats = check_formats,
};

int btr_check_new(const struct btr_check_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct check *c = calloc(1, sizeof(*c));
	if (!c)
		return -BTR_ERR_NOMEM;
	c->code_gen = 1;
	int rc = opts ? check_allow_parse(opts->allow, btr__check_kinds, btr__check_n_kinds, &c->rules, &c->n_rules) : 0;
	if (rc < 0) {
		a_destroy(c);
		return rc;
	}
	return btr_analysis_new(&btr__check_ops, c, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__check_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	(void)a;
	return btr_check_new(NULL, out);
}
