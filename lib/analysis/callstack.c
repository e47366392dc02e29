/* callstack.c - call stacks per thread from the branch stream, and the
 * calling-context tree (CCT) of the costs (btr/callstack.h,
 * docs/callstack.md).
 *
 * The stack is kept as the CPU's would be if we could see it: a call
 * pushes the function at its target with the address after the call as
 * the expected return address; a return pops down to the frame whose
 * return address it goes to.  Everything that is not a plain call/return
 * pair is recognized by where control lands (a function's first byte, a
 * function lower in the stack, a signal frame's interrupted instruction),
 * because that works the same for PT, BTS, LBR and software traces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/callstack.h"
#include "btr/text.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "internal.h"
#include "pairmap.h"


/* ---- state ---- */
struct btr_callstack {
	struct btr_callstack_opts o;
	struct btr_stream *s;
	struct btr_cs_func *funcs;
	size_t nfuncs, capfuncs;
	struct btr_cs_node *nodes;
	size_t nnodes, capnodes;
	struct btr_cs_thread **threads;
	size_t nthreads, capthreads;
	/* Functions have one identity across processes: the code of a module
	 * file is keyed by (module, entry - load bias), so libc's strlen is
	 * one function in every process (and one CCT path where the paths
	 * coincide).  Code no ELF file backs (JIT, anonymous maps, raw
	 * files) is a function per process, as an address means nothing
	 * beyond it.  Per process, an entry address is a "local" function:
	 * the function and where it starts in that process. */
	struct pairmap mod2func;    /* (entry - bias, module) -> function; kept to the end */
	char **mods;                /* interned module paths (module ids) */
	size_t nmods, capmods;
	struct pairmap modids;      /* (pairmap_str_hash(path), probe) -> module id */
	struct cs_local {
		uint64_t start;         /* the entry in its process */
		uint32_t func;
		uint32_t has_symbol;
	} *locs;
	size_t nlocs, caplocs;
	struct pairmap addr2loc;    /* (addr, pid) -> local function containing addr */
	struct pairmap start2loc;   /* (entry, pid) -> local function */
	struct {                    /* in front of addr2loc (pid + 1: 0 empty) */
		uint64_t addr, pid1;
		uint32_t func;
		uint32_t has_symbol;    /* funcs[func]'s, read here without a second miss */
		uint64_t start;         /* the function's entry in process pid */
	} fc[1024];
	struct {                    /* class_of (pid + 1: 0 empty), for the image's generation */
		uint64_t addr, cls;
		uint32_t pid1, gen;
	} kc[4096];
	/* The image of the last process asked for (forgotten at every event
	 * and batch: images are replaced at exec). */
	struct btr_image *img;
	uint32_t img_pid;
	int img_ok;
	struct {                    /* call instruction lengths (pid + 1: 0 empty) */
		uint64_t addr;
		uint32_t pid1, gen, len;
	} lc[1024];
	struct pairmap cct;         /* (parent << 32 | func, 0) -> node */
	struct {                    /* in front of cct (node 0: empty) */
		uint32_t parent, func, node;
	} cc[4096];
	struct pairmap tid2thread;
	int no_insns, no_time, any;
	int nomem;
};

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	size_t nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	void *q = realloc(p, nc * elem);
	if (q)
		*cap = nc;
	return q;
}

int btr_callstack_new(const struct btr_callstack_opts *opts, struct btr_callstack **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct btr_callstack *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&cs->o, opts);
	if (!cs->o.max_depth)
		cs->o.max_depth = 65536;
	cs->nodes = grow(NULL, &cs->capnodes, 1, sizeof(*cs->nodes));
	if (!cs->nodes) {
		free(cs);
		return -BTR_ERR_NOMEM;
	}
	cs->nodes[0] = (struct btr_cs_node){ .parent = 0, .func = UINT32_MAX };
	cs->nnodes = 1;
	*out = cs;
	return 0;
}

void btr_callstack_free(struct btr_callstack *cs)
{
	if (!cs)
		return;
	for (size_t i = 0; i < cs->nfuncs; i++) {
		free((char *)cs->funcs[i].name);
		free((char *)cs->funcs[i].module);
		free((char *)cs->funcs[i].file);
	}
	for (size_t i = 0; i < cs->nthreads; i++) {
		free(cs->threads[i]->frames);
		free(cs->threads[i]->pending);
		free(cs->threads[i]);
	}
	free(cs->threads);
	free(cs->funcs);
	free(cs->nodes);
	for (size_t i = 0; i < cs->nmods; i++)
		free(cs->mods[i]);
	free(cs->mods);
	free(cs->locs);
	pairmap_clear(&cs->mod2func);
	pairmap_clear(&cs->modids);
	pairmap_clear(&cs->addr2loc);
	pairmap_clear(&cs->start2loc);
	pairmap_clear(&cs->cct);
	pairmap_clear(&cs->tid2thread);
	free(cs);
}

void btr_callstack_begin(struct btr_callstack *cs, struct btr_stream *s)
{
	cs->s = s;
	cs->img_ok = 0;
}

/* ---- functions ---- */
static struct btr_image *image_of(struct btr_callstack *cs, uint32_t pid)
{
	if (btr_likely(cs->img_ok && cs->img_pid == pid))
		return cs->img;
	cs->img = cs->s ? btr_stream_image_pid(cs->s, pid) : NULL;
	cs->img_pid = pid;
	cs->img_ok = 1;
	return cs->img;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static inline size_t fc_slot(const struct btr_callstack *cs, uint64_t addr)
{
	return (size_t)(addr ^ (addr >> 10)) & (BTR_ARRAY_SIZE(cs->fc) - 1);
}

/* The id of module file @path (interned at first sight), or UINT32_MAX
 * when out of memory. */
static uint32_t module_id(struct btr_callstack *cs, const char *path)
{
	uint64_t h = pairmap_str_hash(path);
	uint32_t v;
	uint64_t probe = 0;
	for (; pairmap_get(&cs->modids, h, probe, &v); probe++)
		if (!strcmp(cs->mods[v], path))
			return v;
	char **nm = grow(cs->mods, &cs->capmods, cs->nmods + 1, sizeof(*nm));
	if (!nm)
		return UINT32_MAX;
	cs->mods = nm;
	char *p = strdup(path);
	if (!p)
		return UINT32_MAX;
	if (pairmap_put(&cs->modids, h, probe, (uint32_t)cs->nmods)) {
		free(p);
		return UINT32_MAX;
	}
	cs->mods[cs->nmods] = p;
	return (uint32_t)cs->nmods++;
}

/* A new function entered at @start in process @pid (named now: the image
 * may be replaced by an exec later).  Returns its index or UINT32_MAX
 * when out of memory. */
static uint32_t func_new(struct btr_callstack *cs, struct btr_image *img, uint64_t addr, uint64_t start,
			 uint32_t pid, int has, const struct btr_symbol *sym)
{
	struct btr_cs_func *nf = grow(cs->funcs, &cs->capfuncs, cs->nfuncs + 1, sizeof(*nf));
	if (!nf)
		return UINT32_MAX;
	cs->funcs = nf;
	struct btr_cs_func *f = &cs->funcs[cs->nfuncs];
	memset(f, 0, sizeof(*f));
	f->addr = start;
	f->pid = pid;
	f->has_symbol = has;
	char buf[512];
	if (has) {
		f->size = sym->size;
		f->name = strdup(sym->name && *sym->name ? sym->name : "?");
		f->module = dup_or_null(sym->module);
		if (f->name) {
			/* "memcpy@@GLIBC_2.14" and "memcpy@GLIBC_2.2.5" are memcpy;
			 * "puts@plt" stays (a PLT stub) */
			size_t l = strlen(f->name);
			f->plt = l > 4 && !strcmp(f->name + l - 4, "@plt");
			char *at = strchr(f->name, '@');
			if (at && !f->plt && at != f->name)
				*at = 0;
		}
	} else {
		if (img)
			btr_image_symbolize(img, addr, buf, sizeof(buf));
		else
			snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
		f->name = strdup(buf);
	}
	if (!f->name) {
		/* Not counted yet (nfuncs): free what it holds here. */
		free((void *)f->module);
		f->module = NULL;
		return UINT32_MAX;
	}
	if (cs->o.lines && img) {
		const char *file;
		int line;
		if (btr_image_line(img, start, &file, &line) == 0) {
			f->file = dup_or_null(file);
			f->line = line;
		}
	}
	return (uint32_t)cs->nfuncs++;
}

/* The function containing @addr in process @pid, its entry there in
 * *@start (created at first sight).  Returns its index or UINT32_MAX
 * when out of memory. */
static uint32_t func_miss(struct btr_callstack *cs, uint64_t addr, uint32_t pid, uint64_t *start, size_t h);
static inline uint32_t func_of(struct btr_callstack *cs, uint64_t addr, uint32_t pid, uint64_t *start)
{
	size_t h = fc_slot(cs, addr);
	if (btr_likely(cs->fc[h].addr == addr && cs->fc[h].pid1 == (uint64_t)pid + 1)) {
		*start = cs->fc[h].start;
		return cs->fc[h].func;
	}
	return func_miss(cs, addr, pid, start, h);
}

static uint32_t func_miss(struct btr_callstack *cs, uint64_t addr, uint32_t pid, uint64_t *start, size_t h)
{
	uint32_t v;
	if (!pairmap_get(&cs->addr2loc, addr, pid, &v)) {
		struct btr_image *img = image_of(cs, pid);
		struct btr_symbol sym;
		int has = img && btr_image_symbol(img, addr, &sym) == 0 && addr >= sym.addr;
		uint64_t entry = has ? sym.addr : addr;
		if (!pairmap_get(&cs->start2loc, entry, pid, &v)) {
			/* code of an ELF file: the function of every process
			 * that maps the file */
			struct btr_image_module mi;
			uint32_t fi = UINT32_MAX, mod = UINT32_MAX;
			if (img && btr_image_module_at(img, entry, &mi) == 0 && mi.is_elf && mi.path) {
				if ((mod = module_id(cs, mi.path)) == UINT32_MAX)
					goto nomem;
				if (!pairmap_get(&cs->mod2func, entry - mi.bias, mod, &fi))
					fi = UINT32_MAX;
			}
			if (fi == UINT32_MAX) {
				if ((fi = func_new(cs, img, addr, entry, pid, has, &sym)) == UINT32_MAX)
					goto nomem;
				if (mod != UINT32_MAX && pairmap_put(&cs->mod2func, entry - mi.bias, mod, fi))
					goto nomem;
			}
			struct cs_local *nl = grow(cs->locs, &cs->caplocs, cs->nlocs + 1, sizeof(*nl));
			if (!nl)
				goto nomem;
			cs->locs = nl;
			v = (uint32_t)cs->nlocs;
			cs->locs[v] = (struct cs_local){ .start = entry, .func = fi, .has_symbol = (uint32_t)has };
			if (pairmap_put(&cs->start2loc, entry, pid, v))
				goto nomem;
			cs->nlocs++;
		}
		if (pairmap_put(&cs->addr2loc, addr, pid, v))
			goto nomem;
	}
	const struct cs_local *l = &cs->locs[v];
	cs->fc[h].addr = addr;
	cs->fc[h].pid1 = (uint64_t)pid + 1;
	cs->fc[h].func = l->func;
	cs->fc[h].has_symbol = l->has_symbol;
	cs->fc[h].start = l->start;
	*start = l->start;
	return l->func;
nomem:
	cs->nomem = 1;
	*start = addr;
	return UINT32_MAX;
}

/* The class of @addr in process @pid for jumps: the start of its
 * function symbol (as func_of finds it), or NO_SYMBOL: a jump between two
 * addresses of one class changes nothing on the stack (keeps_stack).
 * Creates no function, so that asking (btr_callstack_fold_block, for
 * blocks the decoder caches) changes nothing either. */
#define NO_SYMBOL UINT64_MAX
static uint64_t class_miss(struct btr_callstack *cs, uint64_t addr, uint32_t pid, size_t h, uint32_t gen);
static inline uint64_t class_of(struct btr_callstack *cs, uint64_t addr, uint32_t pid)
{
	/* (new code, a JIT's CODE record say, may bring new symbols: the
	 * decoder asks btr_callstack_fold_block again for the new
	 * generation's blocks, so the answers here follow it too) */
	struct btr_image *img = image_of(cs, pid);
	uint32_t gen = img ? btr_image_generation(img) : 0;
	size_t h = (size_t)(addr ^ (addr >> 12)) & (BTR_ARRAY_SIZE(cs->kc) - 1);
	if (btr_likely(cs->kc[h].addr == addr && cs->kc[h].pid1 == pid + 1u && cs->kc[h].gen == gen))
		return cs->kc[h].cls;
	return class_miss(cs, addr, pid, h, gen);
}

static uint64_t class_miss(struct btr_callstack *cs, uint64_t addr, uint32_t pid, size_t h, uint32_t gen)
{
	struct btr_image *img = image_of(cs, pid);
	struct btr_symbol sym;
	uint64_t c = img && btr_image_symbol(img, addr, &sym) == 0 && addr >= sym.addr ? sym.addr : NO_SYMBOL;
	cs->kc[h].addr = addr;
	cs->kc[h].pid1 = pid + 1u;
	cs->kc[h].gen = gen;
	cs->kc[h].cls = c;
	return c;
}

int btr_callstack_fold_block(struct btr_callstack *cs, uint32_t pid, uint64_t start, uint64_t from, uint64_t to)
{
	if (!cs || !start || !from)
		return 0;
	/* Code that starts a function, or runs into another one, is where
	 * the stack may be out of sync: every branch of it is seen. */
	uint64_t c = class_of(cs, start, pid);
	if (class_of(cs, start - 1, pid) != c || class_of(cs, from, pid) != c)
		return 0;
	return to && class_of(cs, to, pid) == c ? BTR_FOLD_NOT_TAKEN | BTR_FOLD_TAKEN : BTR_FOLD_NOT_TAKEN;
}

/* Nonzero if @addr is the first byte of function @fi, entered at
 * @start in the process. */
static int is_entry(const struct btr_callstack *cs, uint32_t fi, uint64_t start, uint64_t addr)
{
	return fi != UINT32_MAX && cs->funcs[fi].has_symbol && start == addr;
}

/* ---- CCT ---- */
static uint32_t cct_child(struct btr_callstack *cs, uint32_t parent, uint32_t func)
{
	uint32_t v;
	size_t h = (size_t)(parent * 0x9e3779b1u ^ func) & (BTR_ARRAY_SIZE(cs->cc) - 1);
	if (btr_likely(cs->cc[h].node && cs->cc[h].parent == parent && cs->cc[h].func == func))
		return cs->cc[h].node;
	uint64_t key = (uint64_t)parent << 32 | func;
	if (pairmap_get(&cs->cct, key, 0, &v)) {
		cs->cc[h].parent = parent;
		cs->cc[h].func = func;
		cs->cc[h].node = v;
		return v;
	}
	struct btr_cs_node *nn = grow(cs->nodes, &cs->capnodes, cs->nnodes + 1, sizeof(*nn));
	if (!nn) {
		cs->nomem = 1;
		return 0;
	}
	cs->nodes = nn;
	v = (uint32_t)cs->nnodes;
	cs->nodes[v] = (struct btr_cs_node){ .parent = parent, .func = func };
	if (pairmap_put(&cs->cct, key, 0, v)) {
		cs->nomem = 1;
		return 0;
	}
	cs->nnodes++;
	return v;
}

/* ---- threads ---- */
static struct btr_cs_thread *thread_get(struct btr_callstack *cs, uint32_t tid, uint32_t pid)
{
	uint32_t v;
	if (pairmap_get(&cs->tid2thread, tid, 0, &v)) {
		struct btr_cs_thread *t = cs->threads[v];
		if (!t->pid)
			t->pid = pid;
		return t;
	}
	struct btr_cs_thread **nt = grow(cs->threads, &cs->capthreads, cs->nthreads + 1, sizeof(*nt));
	if (!nt)
		goto nomem;
	cs->threads = nt;
	struct btr_cs_thread *t = calloc(1, sizeof(*t));
	if (!t)
		goto nomem;
	t->tid = tid;
	t->pid = pid;
	t->restart = 1;
	if (pairmap_put(&cs->tid2thread, tid, 0, (uint32_t)cs->nthreads)) {
		free(t);   /* (not counted in nthreads: nothing else frees it) */
		goto nomem;
	}
	cs->threads[cs->nthreads++] = t;
	return t;
nomem:
	cs->nomem = 1;
	return NULL;
}

/* Pushes function @fi, entered at @start in @t's process. */
static void push(struct btr_callstack *cs, struct btr_cs_thread *t, uint32_t fi, uint64_t start,
		 enum btr_cs_frame_kind kind, uint64_t ret, uint64_t site, uint64_t resume)
{
	if (fi == UINT32_MAX)
		return;
	if (t->depth >= cs->o.max_depth) {
		t->dropped++;
		return;
	}
	if (t->depth == t->cap_frames) {
		unsigned nc = t->cap_frames ? t->cap_frames * 2 : 16;
		struct btr_cs_frame *nf = realloc(t->frames, nc * sizeof(*nf));
		if (!nf) {
			cs->nomem = 1;
			return;
		}
		t->frames = nf;
		t->cap_frames = nc;
	}
	uint32_t parent = t->depth ? t->frames[t->depth - 1].node : 0;
	uint32_t node = cct_child(cs, parent, fi);
	cs->nodes[node].calls++;
	const struct btr_cs_func *f = &cs->funcs[fi];
	struct btr_cs_frame *fr = &t->frames[t->depth++];
	*fr = (struct btr_cs_frame){
		.func = fi, .node = node, .ret = ret, .site = site, .resume = resume,
		.lo = start, .hi = f->has_symbol && f->size ? start + f->size : start + 1,
		.enter_cost = t->cost, .enter_time = t->time, .kind = (uint8_t)kind,
	};
	if (cs->o.enter)
		cs->o.enter(cs->o.ctx, t);
}

static void pop(struct btr_callstack *cs, struct btr_cs_thread *t, enum btr_cs_leave how)
{
	if (t->dropped) {
		t->dropped--;
		return;
	}
	if (!t->depth)
		return;
	if (cs->o.leave)
		cs->o.leave(cs->o.ctx, t, how);
	t->depth--;
}

/* Pops frames until @keep remain: the lowest popped one is @how, the
 * ones above it were skipped (UNWIND). */
static void pop_to(struct btr_callstack *cs, struct btr_cs_thread *t, unsigned keep, enum btr_cs_leave how)
{
	t->dropped = 0;
	while (t->depth > keep)
		pop(cs, t, t->depth == keep + 1 ? how : BTR_CS_LEAVE_UNWIND);
}

static void reset(struct btr_callstack *cs, struct btr_cs_thread *t)
{
	t->dropped = 0;
	while (t->depth)
		pop(cs, t, BTR_CS_LEAVE_RESET);
	t->restart = 1;
	t->disable_ip = 0;
}

/* The top frame is replaced by function @fi (a tail call, or a jump into
 * another function): it keeps its return address and signal state. */
static void replace_top(struct btr_callstack *cs, struct btr_cs_thread *t, uint32_t fi, uint64_t start)
{
	if (fi == UINT32_MAX)
		return;
	if (!t->depth || t->dropped) {
		if (!t->dropped)
			push(cs, t, fi, start, BTR_CS_ROOT, 0, 0, 0);
		return;
	}
	struct btr_cs_frame old = t->frames[t->depth - 1];
	pop(cs, t, BTR_CS_LEAVE_TAIL);
	if (cs->funcs[old.func].plt && !cs->funcs[fi].has_symbol)
		cs->funcs[fi].plt = 1;   /* PLT0: the lazy-binding entry of the PLT */
	push(cs, t, fi, start, old.kind == BTR_CS_SIGNAL ? BTR_CS_SIGNAL : BTR_CS_TAIL, old.ret, old.site, old.resume);
	if (cs->funcs[old.func].plt && t->depth && t->frames[t->depth - 1].func == fi) {
		/* a PLT stub is part of the call: its instructions go to the
		 * function it jumps to, and the stub's path counts no call */
		struct btr_cs_frame *nf = &t->frames[t->depth - 1];
		struct btr_cs_node *on = &cs->nodes[old.node], *nn = &cs->nodes[nf->node];
		uint64_t dc = t->cost - old.enter_cost, dt = t->time - old.enter_time;
		if (on->self_cost >= dc && on->self_time >= dt) {
			on->self_cost -= dc;
			on->self_time -= dt;
			nn->self_cost += dc;
			nn->self_time += dt;
		}
		if (on->calls)
			on->calls--;
		nf->kind = old.kind;
		nf->enter_cost = old.enter_cost;
		nf->enter_time = old.enter_time;
	}
}

/* The index of the topmost frame below the top running function @fi, or -1. */
static int frame_of_func(const struct btr_cs_thread *t, uint32_t fi)
{
	for (int j = (int)t->depth - 2; j >= 0; j--)
		if (t->frames[j].func == fi)
			return j;
	return -1;
}

/* The length of the instruction at @ip of process @pid, 0 without code
 * there.  Lengths found are cached for the image's generation (new code
 * anywhere in it, a CODE record or a module, starts a new one). */
static unsigned insn_len(struct btr_callstack *cs, uint64_t ip, uint32_t pid)
{
	struct btr_image *img = image_of(cs, pid);
	if (!img)
		return 0;
	uint32_t gen = btr_image_generation(img);
	size_t h = (size_t)(ip ^ (ip >> 10)) & (BTR_ARRAY_SIZE(cs->lc) - 1);
	if (btr_likely(cs->lc[h].addr == ip && cs->lc[h].pid1 == pid + 1u && cs->lc[h].gen == gen))
		return cs->lc[h].len;
	struct btr_insn in;
	if (btr_insn_decode_image(img, ip, BTR_MODE_64, &in) <= 0)
		return 0;   /* not cached: code may appear there */
	cs->lc[h].addr = ip;
	cs->lc[h].pid1 = pid + 1u;
	cs->lc[h].gen = gen;
	cs->lc[h].len = in.len;
	return in.len;
}

static int ret_matches(const struct btr_cs_frame *f, uint64_t to)
{
	if (f->ret)
		return f->ret == to;
	/* no code to decode the call with: a call instruction is 2..15 bytes */
	return f->site && to > f->site + 1 && to - f->site <= 15;
}

static void do_return(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t to)
{
	if (t->dropped) {
		t->dropped--;
		return;
	}
	if (!to) {   /* target unknown: assume a plain return */
		if (t->depth > 1)
			pop(cs, t, BTR_CS_LEAVE_RETURN);
		return;
	}
	for (int i = (int)t->depth - 1; i >= 0; i--) {
		if (ret_matches(&t->frames[i], to)) {
			pop_to(cs, t, (unsigned)i, BTR_CS_LEAVE_RETURN);
			if (!t->depth) {
				uint64_t st;
				uint32_t fi = func_of(cs, to, t->pid, &st);
				push(cs, t, fi, st, BTR_CS_ROOT, 0, 0, 0);
			}
			else
				t->frames[t->depth - 1].returned = 1;
			return;
		}
	}
	uint64_t st;
	uint32_t fi = func_of(cs, to, t->pid, &st);
	if (fi == UINT32_MAX)
		return;   /* out of memory (said at the end) */
	if (t->depth && t->frames[t->depth - 1].kind == BTR_CS_SIGNAL) {
		/* a handler returning into the signal trampoline (__restore_rt):
		 * still the signal frame until sigreturn resumes */
		replace_top(cs, t, fi, st);
		return;
	}
	if (is_entry(cs, fi, st, to)) {   /* push+ret used as a jump (retpolines) */
		replace_top(cs, t, fi, st);
		return;
	}
	int j = cs->funcs[fi].has_symbol ? frame_of_func(t, fi) : -1;
	if (j >= 0) {   /* unwinding to a landing pad further down */
		pop_to(cs, t, (unsigned)j + 1, BTR_CS_LEAVE_RETURN);
		return;
	}
	/* a return past the bottom of what we know: the caller becomes the root */
	pop_to(cs, t, 0, BTR_CS_LEAVE_RETURN);
	push(cs, t, fi, st, BTR_CS_ROOT, 0, 0, 0);
}

static void do_jump(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t to)
{
	uint64_t st;
	uint32_t fi = func_of(cs, to, t->pid, &st);
	if (fi == UINT32_MAX)
		return;
	const struct btr_cs_frame *top = t->depth ? &t->frames[t->depth - 1] : NULL;
	if (top && top->func == fi)
		return;
	if (!cs->funcs[fi].has_symbol) {
		/* into code without symbols: a new function unless we already are
		 * in such code */
		if (!top || cs->funcs[top->func].has_symbol)
			replace_top(cs, t, fi, st);
		return;
	}
	if (is_entry(cs, fi, st, to)) {
		replace_top(cs, t, fi, st);
		return;
	}
	int j = frame_of_func(t, fi);
	if (j >= 0) {   /* longjmp */
		pop_to(cs, t, (unsigned)j + 1, BTR_CS_LEAVE_UNWIND);
		return;
	}
	replace_top(cs, t, fi, st);   /* into the middle of another function (.cold parts) */
}

/* Pops a signal frame that resumes at @ip, if any.  Returns 1 if it did. */
static int sig_resume(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t ip)
{
	for (int i = (int)t->depth - 1; i >= 0; i--) {
		if (t->frames[i].kind == BTR_CS_SIGNAL && t->frames[i].resume == ip) {
			pop_to(cs, t, (unsigned)i, BTR_CS_LEAVE_RETURN);
			return 1;
		}
	}
	return 0;
}

/* Advances @t's clocks by branch @b; returns its weight (instructions,
 * or 1) and its time in *@dt.  The caller charges both to the top node. */
static inline uint64_t tick(struct btr_callstack *cs, struct btr_cs_thread *t, const struct btr_branch *b,
			    uint64_t *dt)
{
	uint64_t w = 1, d = 0;
	if (b->flags & BTR_BF_INSNS)
		w = b->insns;
	else
		cs->no_insns = 1;
	if (b->flags & BTR_BF_TSC) {
		if (t->last_tsc && b->tsc >= t->last_tsc)
			d = b->tsc - t->last_tsc;
		if (!t->first_tsc)
			t->first_tsc = b->tsc;
		t->last_tsc = b->tsc;
	} else {
		cs->no_time = 1;
	}
	cs->any = 1;
	t->cost += w;
	t->time += d;
	t->branches++;
	*dt = d;
	return w;
}

static void charge_top(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t w, uint64_t dt)
{
	uint32_t node = t->depth ? t->frames[t->depth - 1].node : 0;
	cs->nodes[node].self_cost += w;
	cs->nodes[node].self_time += dt;
}

static void charge(struct btr_callstack *cs, struct btr_cs_thread *t, const struct btr_branch *b)
{
	uint64_t dt, w = tick(cs, t, b, &dt);
	charge_top(cs, t, w, dt);
}

/* Nonzero if @b runs in a function other than the top one: code ran into
 * it without a branch (glibc's __strcasecmp_avx2 runs on into
 * __strcasecmp_l_avx2, __memcpy_chk into memcpy).  Code without symbols
 * keeps its frame, and so does code without symbols run into; so does a
 * frame a return came back to (btr_cs_frame.returned: the code after a
 * call is the caller's, whatever label stands there).  sync_from then makes
 * the function of @b the top one.  Whatever btr_callstack_fold_block
 * lets the decoder leave out is never out of sync (docs/callstack.md). */
static inline __attribute__((always_inline)) int out_of_sync(struct btr_callstack *cs, const struct btr_cs_thread *t,
								      const struct btr_branch *b)
{
	if (!b->from || t->dropped || !t->depth)
		return 0;
	const struct btr_cs_frame *top = &t->frames[t->depth - 1];
	if (btr_likely(b->from >= top->lo && b->from < top->hi) || top->returned)
		return 0;
	const struct btr_cs_func *f = &cs->funcs[top->func];
	if (!f->has_symbol || !f->size)
		return 0;
	uint64_t cf = class_of(cs, b->from, b->pid);
	return cf != NO_SYMBOL && cf != top->lo;   /* lo: the entry in this process */
}

static void do_jump(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t to);

static void sync_from(struct btr_callstack *cs, struct btr_cs_thread *t, const struct btr_branch *b)
{
	if (out_of_sync(cs, t, b))
		do_jump(cs, t, b->from);
}

/* Nonzero if @b leaves @t's stack as it is (apply would only charge it):
 * not-taken conditionals, jumps within one function (class_of: the same
 * symbol, or code without symbols on both sides), transfers without a
 * target; but no branch of code that ran into another function
 * (out_of_sync).  Most branches are such.  A jump's answer depends only
 * on its addresses, and the stack is in sync wherever
 * btr_callstack_fold_block lets the decoder leave branches out, so the
 * result is the same with them and without. */
static inline __attribute__((always_inline)) int keeps_stack(struct btr_callstack *cs, const struct btr_cs_thread *t,
								      const struct btr_branch *b)
{
	if (out_of_sync(cs, t, b))
		return 0;
	switch (b->kind) {
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ:
	case BTR_KIND_JMP:
	case BTR_KIND_JMP_IND: {
		if (!(b->flags & BTR_BF_TAKEN) || !b->to || t->dropped)
			return 1;
		if (btr_likely(b->from))
			return class_of(cs, b->from, b->pid) == class_of(cs, b->to, b->pid);
		/* no source address: the target against the top function */
		if (!t->depth)
			return 0;
		const struct btr_cs_frame *top = &t->frames[t->depth - 1];
		if (b->to >= top->lo && b->to < top->hi)
			return 1;
		/* a target func_of placed before: where do_jump finds nothing
		 * to change (the top function, a symbol without size; code
		 * without symbols from code without symbols) */
		size_t h = fc_slot(cs, b->to);
		if (cs->fc[h].addr != b->to || cs->fc[h].pid1 != (uint64_t)t->pid + 1)
			return 0;
		return cs->fc[h].func == top->func ||
		       (!cs->fc[h].has_symbol && !cs->funcs[top->func].has_symbol);
	}
	case BTR_KIND_CALL:
	case BTR_KIND_CALL_IND:
	case BTR_KIND_ASYNC:
	case BTR_KIND_IRET:
	case BTR_KIND_SYSRET:
		return !b->to;
	case BTR_KIND_RET:
	case BTR_KIND_FAR_RET:
		return 0;
	default:
		return 1;
	}
}

/* What branch @b (charged already) does to @t's stack. */
static void act(struct btr_callstack *cs, struct btr_cs_thread *t, const struct btr_branch *b)
{
	sync_from(cs, t, b);
	switch (b->kind) {
	case BTR_KIND_CALL:
	case BTR_KIND_CALL_IND: {
		if (!b->to)
			break;
		unsigned len = insn_len(cs, b->from, t->pid);
		uint64_t ret = len ? b->from + len : 0;
		if (ret && b->to == ret)
			break;   /* call next: a PIC idiom, not a call */
		if (t->dropped) {
			t->dropped++;
			break;
		}
		uint64_t st;
		uint32_t fi = func_of(cs, b->to, t->pid, &st);
		push(cs, t, fi, st, BTR_CS_CALL, ret, b->from, 0);
		break;
	}
	case BTR_KIND_RET:
	case BTR_KIND_FAR_RET:
		do_return(cs, t, b->to);
		break;
	case BTR_KIND_JMP:
	case BTR_KIND_JMP_IND:
	case BTR_KIND_JCC:
	case BTR_KIND_LOOP:
	case BTR_KIND_JRCXZ: {
		if (keeps_stack(cs, t, b))
			break;   /* the common case: a jump inside the function */
		do_jump(cs, t, b->to);
		break;
	}
	case BTR_KIND_ASYNC:
		if (b->to) {
			uint64_t st;
			uint32_t fi = func_of(cs, b->to, t->pid, &st);
			push(cs, t, fi, st, BTR_CS_SIGNAL, 0, 0, b->from);
		}
		break;
	case BTR_KIND_IRET:
	case BTR_KIND_SYSRET:
		if (b->to)
			sig_resume(cs, t, b->to);
		break;
	default:
		break;
	}
}

static void apply(struct btr_callstack *cs, struct btr_cs_thread *t, const struct btr_branch *b)
{
	charge(cs, t, b);
	act(cs, t, b);
}

/* Replays the look-ahead buffer of @t: first the callers that its
 * unmatched returns reveal, then the branches. */
static void flush(struct btr_callstack *cs, struct btr_cs_thread *t)
{
	if (!t->n_pending)
		return;
	uint64_t callers[BTR_CALLSTACK_LOOKAHEAD];
	unsigned k = 0, d = 0;
	for (unsigned i = 0; i < t->n_pending; i++) {
		const struct btr_branch *b = &t->pending[i];
		switch (b->kind) {
		case BTR_KIND_CALL:
		case BTR_KIND_CALL_IND:
		case BTR_KIND_ASYNC:
			if (b->to)
				d++;
			break;
		case BTR_KIND_RET:
		case BTR_KIND_FAR_RET:
			if (d)
				d--;
			else if (b->to)
				callers[k++] = b->to;
			break;
		default:
			break;
		}
	}
	uint64_t st;
	for (unsigned j = k; j >= 1; j--) {
		uint32_t fi = func_of(cs, callers[j - 1], t->pid, &st);
		push(cs, t, fi, st, BTR_CS_ROOT, j < k ? callers[j] : 0, 0, 0);
	}
	const struct btr_branch *b0 = &t->pending[0];
	uint64_t start = b0->from ? b0->from : b0->to;
	if (start) {
		uint32_t fi = func_of(cs, start, t->pid, &st);
		push(cs, t, fi, st, BTR_CS_ROOT, k ? callers[0] : 0, 0, 0);
	}
	t->restart = 0;
	unsigned n = t->n_pending;
	t->n_pending = 0;
	for (unsigned i = 0; i < n; i++)
		apply(cs, t, &t->pending[i]);
}

/* Owes @t the clocks and its top node the cost of @cnt branches that kept
 * the stack (@w instructions, @dt ticks; @fl_and the AND of their flags). */
static void settle(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t w, uint64_t dt, uint64_t cnt,
		   unsigned fl_and)
{
	if (!cnt)
		return;
	cs->any = 1;
	if (!(fl_and & BTR_BF_INSNS))
		cs->no_insns = 1;
	if (!(fl_and & BTR_BF_TSC))
		cs->no_time = 1;
	t->cost += w;
	t->time += dt;
	t->branches += cnt;
	charge_top(cs, t, w, dt);
}

int btr_callstack_branches(struct btr_callstack *cs, const struct btr_branch *b, size_t n)
{
	struct btr_cs_thread *t = NULL;
	cs->img_ok = 0;
	for (size_t i = 0; i < n;) {
		if (!t || t->tid != b[i].tid)
			t = thread_get(cs, b[i].tid, b[i].pid);
		if (!t)
			return -BTR_ERR_NOMEM;
		if (t->restart) {
			if (!t->pending) {
				t->pending = malloc(BTR_CALLSTACK_LOOKAHEAD * sizeof(*t->pending));
				if (!t->pending)
					return -BTR_ERR_NOMEM;
			}
			t->pending[t->n_pending++] = b[i++];
			if (t->n_pending == BTR_CALLSTACK_LOOKAHEAD)
				flush(cs, t);
			continue;
		}
		/* a run of the thread's branches: those that keep the stack
		 * are summed, and the sums settled before one that changes it */
		uint32_t tid = t->tid;
		uint64_t w = 0, dt = 0, cnt = 0;
		unsigned fl_and = ~0u;
		for (; i < n && b[i].tid == tid; i++) {
			const struct btr_branch *x = &b[i];
			unsigned fl = x->flags;
			fl_and &= fl;
			w += (fl & BTR_BF_INSNS) ? x->insns : 1;
			cnt++;
			if (btr_unlikely(fl & BTR_BF_TSC)) {
				if (t->last_tsc && x->tsc >= t->last_tsc)
					dt += x->tsc - t->last_tsc;
				if (!t->first_tsc)
					t->first_tsc = x->tsc;
				t->last_tsc = x->tsc;
			}
			if (btr_likely(keeps_stack(cs, t, x)))
				continue;
			settle(cs, t, w, dt, cnt, fl_and);
			w = dt = cnt = 0;
			fl_and = ~0u;
			act(cs, t, x);
			if (t->restart) {
				i++;
				break;
			}
		}
		settle(cs, t, w, dt, cnt, fl_and);
	}
	return cs->nomem ? -BTR_ERR_NOMEM : 0;
}

int btr_callstack_fold_ok(const struct btr_callstack *cs, uint32_t tid)
{
	/* keeps_stack() is 1 for every not-taken branch, and the sums it
	 * settles are the same when one record carries the instructions of
	 * several; but the look-ahead after a restart counts records, so a
	 * thread not seen yet or restarting needs every one. */
	uint32_t v;
	if (!pairmap_get(&cs->tid2thread, tid, 0, &v))
		return 0;
	const struct btr_cs_thread *t = cs->threads[v];
	return !t->restart && !t->n_pending;
}

static void on_enable(struct btr_callstack *cs, struct btr_cs_thread *t, uint64_t ip)
{
	uint64_t dis = t->disable_ip;
	t->disable_ip = 0;
	if (t->restart || !t->depth || !ip)
		return;
	if (dis && ip > dis && ip - dis <= 15)
		return;   /* back from a system call */
	if (sig_resume(cs, t, ip))
		return;   /* rt_sigreturn */
	uint64_t st;
	uint32_t fi = func_of(cs, ip, t->pid, &st);
	if (fi == UINT32_MAX)
		return;
	if (is_entry(cs, fi, st, ip)) {   /* a signal delivered on the way back */
		unsigned len = dis ? insn_len(cs, dis, t->pid) : 0;
		push(cs, t, fi, st, BTR_CS_SIGNAL, 0, 0, dis ? dis + (len ? len : 2) : 0);
		return;
	}
	int j = cs->funcs[fi].has_symbol ? frame_of_func(t, fi) : -1;
	if (t->depth && t->frames[t->depth - 1].func == fi)
		return;
	if (j >= 0) {
		pop_to(cs, t, (unsigned)j + 1, BTR_CS_LEAVE_UNWIND);
		return;
	}
	reset(cs, t);   /* resumed somewhere we cannot place */
}

/* Forgets what addresses meant in processes (the functions stay): after
 * an exec, a module unload or a process exit they may mean other code,
 * and a table keyed by process must not grow with the processes. */
static void forget_addresses(struct btr_callstack *cs)
{
	pairmap_clear(&cs->addr2loc);
	pairmap_clear(&cs->start2loc);
	cs->nlocs = 0;
	memset(cs->fc, 0, sizeof(cs->fc));
	memset(cs->kc, 0, sizeof(cs->kc));
	memset(cs->lc, 0, sizeof(cs->lc));
}

int btr_callstack_event(struct btr_callstack *cs, const struct btr_stream_event *ev)
{
	struct btr_cs_thread *t = NULL;
	cs->img_ok = 0;
	switch (ev->type) {
	case BTR_SEV_THREAD_START:
	case BTR_SEV_THREAD_EXIT:
	case BTR_SEV_DISCONTINUITY:
		if (!(t = thread_get(cs, ev->tid, ev->pid)))
			break;
		flush(cs, t);
		reset(cs, t);
		break;
	case BTR_SEV_GAP:
		for (size_t i = 0; i < cs->nthreads; i++) {
			t = cs->threads[i];
			if (ev->tid && t->tid != ev->tid)
				continue;
			flush(cs, t);
			reset(cs, t);
		}
		break;
	case BTR_SEV_EXEC:
		for (size_t i = 0; i < cs->nthreads; i++) {
			t = cs->threads[i];
			if (ev->pid && t->pid != ev->pid)
				continue;
			flush(cs, t);
			reset(cs, t);
		}
		/* the process's addresses mean other functions from now on */
		forget_addresses(cs);
		break;
	case BTR_SEV_MODULE_UNLOAD:
	case BTR_SEV_PROCESS_EXIT:
		/* its addresses may hold another module from now on; a cache
		 * keyed by process must not grow with the processes */
		forget_addresses(cs);
		break;
	case BTR_SEV_FLOW:
		if (!ev->flow || !(t = thread_get(cs, ev->tid, ev->pid)))
			break;
		flush(cs, t);
		switch (ev->flow->type) {
		case BTR_FLOW_GAP:
		case BTR_FLOW_OVERFLOW:
			reset(cs, t);
			break;
		case BTR_FLOW_DISABLE:
			t->disable_ip = ev->flow->ip;
			break;
		case BTR_FLOW_ENABLE:
			on_enable(cs, t, ev->flow->ip);
			break;
		default:
			break;
		}
		break;
	default:
		break;
	}
	return cs->nomem ? -BTR_ERR_NOMEM : 0;
}

int btr_callstack_end(struct btr_callstack *cs)
{
	for (size_t i = 0; i < cs->nthreads; i++) {
		flush(cs, cs->threads[i]);
		reset(cs, cs->threads[i]);
	}
	return cs->nomem ? -BTR_ERR_NOMEM : 0;
}

size_t btr_callstack_nfuncs(const struct btr_callstack *cs) { return cs->nfuncs; }
const struct btr_cs_func *btr_callstack_func(const struct btr_callstack *cs, uint32_t i)
{
	return i < cs->nfuncs ? &cs->funcs[i] : NULL;
}
size_t btr_callstack_nnodes(const struct btr_callstack *cs) { return cs->nnodes; }
const struct btr_cs_node *btr_callstack_node(const struct btr_callstack *cs, uint32_t i)
{
	return i < cs->nnodes ? &cs->nodes[i] : NULL;
}
size_t btr_callstack_nthreads(const struct btr_callstack *cs) { return cs->nthreads; }
struct btr_cs_thread *btr_callstack_thread(struct btr_callstack *cs, size_t i)
{
	return i < cs->nthreads ? cs->threads[i] : NULL;
}
int btr_callstack_has_insns(const struct btr_callstack *cs) { return cs->any && !cs->no_insns; }
int btr_callstack_has_time(const struct btr_callstack *cs) { return cs->any && !cs->no_time; }

size_t btr_callstack_path(const struct btr_callstack *cs, uint32_t node, char *buf, size_t size)
{
	/* names from the leaf up, then reversed in place piece by piece */
	uint32_t chain[4096];
	unsigned n = 0;
	while (node && node < cs->nnodes && n < BTR_ARRAY_SIZE(chain)) {
		chain[n++] = node;
		node = cs->nodes[node].parent;
	}
	size_t len = 0, fit = 0;
	int ok = 1;
	for (unsigned i = n; i-- > 0;) {
		const char *name = cs->funcs[cs->nodes[chain[i]].func].name;
		size_t l = strlen(name) + (i ? 1 : 0);
		if (ok && len + l < size) {
			memcpy(buf + len, name, l - (i ? 1 : 0));
			/* the folded format's syntax: `;` between frames, one
			 * stack a line; control characters reach no terminal */
			btr_text_field_fix(buf + len, l - (i ? 1 : 0), ";");
			if (i)
				buf[len + l - 1] = ';';
			fit = len + l;
		} else {
			ok = 0;
		}
		len += l;
	}
	if (size)
		buf[fit] = 0;
	return len;
}
