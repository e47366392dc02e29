/* report.c - counts, hot functions and hot blocks over a branch stream.
 *
 * Hot path (btr_report_branch): counters, one per-thread lookup and one
 * block-table update per branch; nothing is symbolized until the end (or
 * an EXEC, when the old image is about to go away).  Every table grows
 * with what it has seen (threads, distinct blocks, functions), so memory
 * does not depend on the trace's length.
 *
 * The report is an analysis like any other (btr/analysis.h): the adapter
 * at the end of this file routes the driver's callbacks to the counting
 * below and writes the result as text or JSON (report_write.c), so every
 * caller - btr report, btr_report_trace, the fuzz targets - runs it
 * through the one driver, btr_analysis_run.
 */
#include "btr/report.h"
#include "btr/analysis.h"
#include "registry.h"
#include "internal.h"
#include "report_priv.h"
#include "btr/image.h"
#include "elf/elf_priv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Blocks longer than this are not real blocks: their start came from a
 * different context (kernel target before a user branch, a bogus LBR
 * entry).  They still count for their function, not as top blocks. */
#define MAX_BLOCK_BYTES (1u << 20)

struct thr {
	struct btr_report_thread pub;
	uint32_t pid;
	uint64_t prev_to;   /* target of the previous branch */
	int prev_valid;
	int used;
};

struct blk {
	uint64_t start, end;
	uint64_t count, insns;     /* count 0: empty slot */
	uint32_t pid;              /* blocks of different processes never mix */
};

struct proc {
	struct btr_report_process pub;
	char *path, *command, *reason, *lost_reason;
	char *programs;            /* "sh -> rm" (btr_report_process.programs) */
	int started;               /* a START record was seen */
	struct btr_image *img;     /* the stream's image of this process */
};

struct fn {
	struct btr_report_func pub;
	char *name, *module, *file;
	uint64_t hash;
};

struct btr_report {
	struct btr_report_opts o;
	struct btr_report_result res;
	char backend[32];

	struct thr *thr;           /* open addressing by tid */
	size_t n_thr, cap_thr;
	struct thr *last_thr;      /* one-entry cache: branches come in runs per thread */
	/* btr_branch_kind_class precomputed: slot = class, or BTR_LBR__COUNT
	 * for kinds without one; counted in cls_count, folded into the
	 * result by btr_report_finish. */
	uint8_t cls_slot[BTR_KIND__COUNT];
	uint64_t cls_count[BTR_LBR__COUNT + 1];

	struct blk *blk;           /* open addressing by (start, end) */
	size_t n_blk, cap_blk;
	unsigned blk_shift;        /* 64 - log2(cap_blk) */

	struct fn *fn;             /* array */
	size_t n_fn, cap_fn;
	size_t *fn_idx;            /* open addressing: index+1 into fn, 0 empty */
	size_t cap_fn_idx;

	struct btr_report_block *kept; /* symbolized candidates for top_blocks */
	size_t n_kept, cap_kept;
	size_t n_blocks_total;     /* distinct blocks over all phases */

	struct btr_report_gap *gaps;
	size_t n_gaps;

	struct btr_report_module *mods;
	size_t n_mods, cap_mods;

	struct proc *procs;        /* start order */
	size_t n_procs, cap_procs;
	size_t last_proc;
	uint32_t root_pid;         /* the first process: its exit is res.exit */
	struct btr_report_process *procs_out;

	struct btr_report_thread *threads_out;
	struct btr_report_func *funcs_out;
	char *exit_where;
	struct btr_report_range *ranges;
	size_t n_ranges;
	int nomem;
	int finished;
};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint64_t str_hash(const char *s, uint64_t h)
{
	for (; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

int btr_report_new(const struct btr_report_opts *opts, struct btr_report **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	if (!BTR_OPTS_VALID(opts, BTR_OFFSETOFEND(struct btr_report_opts, top)))
		return -BTR_ERR_INVAL;
	struct btr_report *r = calloc(1, sizeof(*r));
	if (!r)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&r->o, opts);
	if (!r->o.top)
		r->o.top = 10;
	if (!r->o.max_gaps)
		r->o.max_gaps = 8;
	r->gaps = calloc(r->o.max_gaps, sizeof(*r->gaps));
	if (!r->gaps) {
		free(r);
		return -BTR_ERR_NOMEM;
	}
	r->res.backend = r->backend;
	for (int k = 0; k < BTR_KIND__COUNT; k++) {
		int c = btr_branch_kind_class((enum btr_branch_kind)k);
		r->cls_slot[k] = (uint8_t)(c >= BTR_LBR_JCC && c < BTR_LBR__COUNT ? c : BTR_LBR__COUNT);
	}
	*out = r;
	return 0;
}

/* ---- threads ---- */

static struct thr *thr_lookup(struct btr_report *r, uint32_t tid) __attribute__((noinline));

/* Branches come in runs per thread: the last one found answers most. */
static inline struct thr *thr_get(struct btr_report *r, uint32_t tid)
{
	if (btr_likely(r->last_thr && r->last_thr->pub.tid == tid))
		return r->last_thr;
	return thr_lookup(r, tid);
}

static struct thr *thr_lookup(struct btr_report *r, uint32_t tid)
{
	if ((r->n_thr + 1) * 2 > r->cap_thr) {
		size_t ncap = r->cap_thr ? r->cap_thr * 2 : 16;
		struct thr *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return NULL;
		for (size_t i = 0; i < r->cap_thr; i++) {
			if (!r->thr[i].used)
				continue;
			size_t j = mix64(r->thr[i].pub.tid) & (ncap - 1);
			while (nt[j].used)
				j = (j + 1) & (ncap - 1);
			nt[j] = r->thr[i];
		}
		free(r->thr);
		r->thr = nt;
		r->cap_thr = ncap;
		r->last_thr = NULL;
	}
	size_t j = mix64(tid) & (r->cap_thr - 1);
	while (r->thr[j].used) {
		if (r->thr[j].pub.tid == tid)
			return r->last_thr = &r->thr[j];
		j = (j + 1) & (r->cap_thr - 1);
	}
	memset(&r->thr[j], 0, sizeof(r->thr[j]));
	r->thr[j].used = 1;
	r->thr[j].pub.tid = tid;
	r->n_thr++;
	return r->last_thr = &r->thr[j];
}

/* ---- blocks ---- */

/* Block hash: two multiplies, top bits (Fibonacci hashing).  Cheaper than
 * mix64 on the per-branch path; mixing @start before the xor keeps loops
 * (many blocks sharing low address bits) from clustering. */
static inline size_t blk_hash(uint64_t start, uint64_t end, uint32_t pid, unsigned shift)
{
	return (size_t)((((start * 0xff51afd7ed558ccdull) ^ end ^ pid) * 0x9e3779b97f4a7c15ull) >> shift);
}

static int blk_grow(struct btr_report *r)
{
	size_t ncap = r->cap_blk ? r->cap_blk * 2 : 1024;
	struct blk *nb = calloc(ncap, sizeof(*nb));
	if (!nb)
		return -BTR_ERR_NOMEM;
	unsigned nshift = 64;
	for (size_t c = ncap; c > 1; c >>= 1)
		nshift--;
	for (size_t i = 0; i < r->cap_blk; i++) {
		if (!r->blk[i].count)
			continue;
		size_t j = blk_hash(r->blk[i].start, r->blk[i].end, r->blk[i].pid, nshift);
		while (nb[j].count)
			j = (j + 1) & (ncap - 1);
		nb[j] = r->blk[i];
	}
	free(r->blk);
	r->blk = nb;
	r->cap_blk = ncap;
	r->blk_shift = nshift;
	return 0;
}

/* Counts @cnt executions of block [start, end] (@insns in all): the
 * per-branch hot path. */
static inline int blk_add(struct btr_report *r, uint64_t start, uint64_t end, uint32_t pid, uint64_t insns,
			  uint64_t cnt)
{
	if (btr_likely(r->blk)) {
		size_t j = blk_hash(start, end, pid, r->blk_shift);
		while (r->blk[j].count) {
			if (r->blk[j].start == start && r->blk[j].end == end && r->blk[j].pid == pid) {
				r->blk[j].count += cnt;
				r->blk[j].insns += insns;
				return 0;
			}
			j = (j + 1) & (r->cap_blk - 1);
		}
	}
	/* A new block: grow at 50% load (sized by the blocks seen). */
	if ((r->n_blk + 1) * 2 > r->cap_blk && blk_grow(r) < 0)
		return -BTR_ERR_NOMEM;
	size_t j = blk_hash(start, end, pid, r->blk_shift);
	while (r->blk[j].count)
		j = (j + 1) & (r->cap_blk - 1);
	r->blk[j] = (struct blk){ .start = start, .end = end, .count = cnt, .insns = insns, .pid = pid };
	r->n_blk++;
	return 0;
}

/* Counts @cnt executions of @b after the run from @start into thread @t
 * (the hot path of btr_report_branch[es] with @cnt 1, and of counts). */
static inline __attribute__((always_inline)) int
count_run(struct btr_report *r, struct thr *t, const struct btr_branch *b, uint64_t start, uint64_t cnt)
{
	struct btr_report_result *res = &r->res;
	/* Branch-free counting: taken/not-taken and kinds are random to the
	 * predictor, and this runs once per branch. */
	unsigned f = b->flags;
	unsigned k = b->kind < BTR_KIND__COUNT ? b->kind : BTR_KIND_NONE;
	res->branches += cnt;
	t->pub.branches += cnt;
	res->taken += cnt * ((f & BTR_BF_TAKEN) != 0);
	res->mispredicted += cnt * ((f & BTR_BF_MISPRED) != 0);
	res->by_kind[k] += cnt;
	r->cls_count[r->cls_slot[k]] += cnt;
	res->by_class[(f & BTR_BF_KERNEL) ? BTR_LBR_CPL_EQ_0 : BTR_LBR_CPL_NEQ_0] += cnt;
	uint64_t n = 0;
	if (b->flags & BTR_BF_INSNS) {
		n = b->insns * cnt;
		res->has_insns = 1;
		res->insns += n;
		t->pub.insns += n;
	}
	if (btr_unlikely(b->pid != t->pid) && b->pid)
		t->pid = b->pid;
	if (blk_add(r, start, b->from, t->pid, n, cnt) < 0) {
		r->nomem = 1;
		return 1;
	}
	return 0;
}

/* Counts @b into thread @t (the hot path of btr_report_branch[es]). */
static inline int count_branch(struct btr_report *r, struct thr *t, const struct btr_branch *b)
{
	if (count_run(r, t, b, t->prev_valid ? t->prev_to : 0, 1))
		return 1;
	t->prev_to = b->to;
	t->prev_valid = 1;
	return 0;
}

/* The counted form (btr_analysis_ops.counts): each record's run start is
 * given. */
static int report_counts(struct btr_report *r, const struct btr_branch_count *c, size_t n)
{
	struct thr *t = NULL;
	uint32_t tid = 0;
	for (size_t i = 0; i < n; i++) {
		if (r->nomem)
			return 1;
		if (!t || c[i].b.tid != tid) {
			tid = c[i].b.tid;
			if (!(t = thr_get(r, tid))) {
				r->nomem = 1;
				return 1;
			}
		}
		if (count_run(r, t, &c[i].b, c[i].start, c[i].count))
			return 1;
		/* (for branches that may follow in order) */
		t->prev_to = c[i].b.to;
		t->prev_valid = 1;
	}
	return 0;
}

int btr_report_branch(void *report, const struct btr_branch *b)
{
	struct btr_report *r = report;
	if (r->nomem)
		return 1;
	struct thr *t = thr_get(r, b->tid);
	if (!t) {
		r->nomem = 1;
		return 1;
	}
	return count_branch(r, t, b);
}

int btr_report_branches(void *report, const struct btr_branch *b, size_t n)
{
	struct btr_report *r = report;
	struct thr *t = NULL;
	uint32_t tid = 0;
	for (size_t i = 0; i < n; i++) {
		if (r->nomem)
			return 1;
		if (!t || b[i].tid != tid) {
			/* (a thread table that grows moves the threads: look
			 * up again after every new thread) */
			tid = b[i].tid;
			if (!(t = thr_get(r, tid))) {
				r->nomem = 1;
				return 1;
			}
		}
		if (count_branch(r, t, &b[i]))
			return 1;
	}
	return 0;
}

/* ---- functions ---- */

/* Finds or adds function @name of @module; a new one gets the source
 * line of its entry from @img (once per distinct function). */
static struct fn *fn_get(struct btr_report *r, const char *name, const char *module, uint64_t addr,
			 struct btr_image *img)
{
	uint64_t h = str_hash(module, str_hash(name, 0xcbf29ce484222325ull));
	if ((r->n_fn + 1) * 2 > r->cap_fn_idx) {
		size_t ncap = r->cap_fn_idx ? r->cap_fn_idx * 2 : 256;
		size_t *ni = calloc(ncap, sizeof(*ni));
		if (!ni)
			return NULL;
		for (size_t i = 0; i < r->n_fn; i++) {
			size_t j = r->fn[i].hash & (ncap - 1);
			while (ni[j])
				j = (j + 1) & (ncap - 1);
			ni[j] = i + 1;
		}
		free(r->fn_idx);
		r->fn_idx = ni;
		r->cap_fn_idx = ncap;
	}
	size_t j = h & (r->cap_fn_idx - 1);
	while (r->fn_idx[j]) {
		struct fn *f = &r->fn[r->fn_idx[j] - 1];
		if (f->hash == h && !strcmp(f->name, name) &&
		    ((!f->module && !module) || (f->module && module && !strcmp(f->module, module))))
			return f;
		j = (j + 1) & (r->cap_fn_idx - 1);
	}
	if (r->n_fn == r->cap_fn) {
		size_t ncap = r->cap_fn ? r->cap_fn * 2 : 64;
		struct fn *nf = realloc(r->fn, ncap * sizeof(*nf));
		if (!nf)
			return NULL;
		r->fn = nf;
		r->cap_fn = ncap;
	}
	struct fn *f = &r->fn[r->n_fn];
	memset(f, 0, sizeof(*f));
	f->name = strdup(name);
	f->module = module ? strdup(module) : NULL;
	if (!f->name || (module && !f->module)) {
		free(f->name);
		free(f->module);
		return NULL;
	}
	f->hash = h;
	f->pub.addr = addr;
	const char *file = NULL;
	int line = 0;
	if (img && addr && btr_image_line(img, addr, &file, &line) == 0 && file) {
		f->file = strdup(file);
		if (!f->file) {   /* out of memory: an error, not a missing line */
			free(f->name);
			free(f->module);
			return NULL;
		}
		f->pub.line = line;
	}
	r->fn_idx[j] = ++r->n_fn;
	return f;
}

static int valid_block(const struct blk *b)
{
	return b->start && b->start <= b->end && b->end - b->start < MAX_BLOCK_BYTES;
}

/* Orderings: rank descending (instructions, or branches/executions for
 * traces without instruction counts), then address.  One comparator per
 * ranking instead of a context pointer, because qsort has none and a
 * global would make concurrent reports race. */
static int cmp_u64_desc(uint64_t x, uint64_t y)
{
	return x > y ? -1 : x < y;
}

#define DEFINE_BLK_CMP(NAME, TYPE, DEREF, FIELD)                                     \
	static int NAME(const void *a, const void *b)                                \
	{                                                                            \
		const TYPE *x = DEREF(a), *y = DEREF(b);                             \
		int c = cmp_u64_desc(x->FIELD, y->FIELD);                            \
		if (c)                                                               \
			return c;                                                    \
		if (x->start != y->start)                                            \
			return x->start < y->start ? -1 : 1;                         \
		return x->end < y->end ? -1 : x->end > y->end;                       \
	}
#define PTR_DEREF(p) (*(const struct blk *const *)(p))
#define VAL_DEREF(p) ((const struct btr_report_block *)(p))
DEFINE_BLK_CMP(cmp_blk_insns, struct blk, PTR_DEREF, insns)
DEFINE_BLK_CMP(cmp_blk_count, struct blk, PTR_DEREF, count)
DEFINE_BLK_CMP(cmp_kept_insns, struct btr_report_block, VAL_DEREF, insns)
DEFINE_BLK_CMP(cmp_kept_count, struct btr_report_block, VAL_DEREF, count)

static int cmp_fn_tail(const struct btr_report_func *x, const struct btr_report_func *y)
{
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_fn_insns(const void *a, const void *b)
{
	const struct btr_report_func *x = a, *y = b;
	int c = cmp_u64_desc(x->insns, y->insns);
	return c ? c : cmp_fn_tail(x, y);
}

static int cmp_fn_branches(const void *a, const void *b)
{
	const struct btr_report_func *x = a, *y = b;
	int c = cmp_u64_desc(x->branches, y->branches);
	return c ? c : cmp_fn_tail(x, y);
}

static int cmp_thread(const void *a, const void *b)
{
	const struct btr_report_thread *x = a, *y = b;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static struct proc *proc_find(struct btr_report *r, uint32_t pid);

/* The image to symbolize process @pid's code with: the one the stream
 * gave with its events, else @def. */
static struct btr_image *img_for(struct btr_report *r, uint32_t pid, struct btr_image *def)
{
	struct proc *p = pid ? proc_find(r, pid) : NULL;
	return p && p->img ? p->img : def;
}

/* Moves the blocks seen so far into function totals and keeps the top
 * blocks of this phase, each symbolized with its process's image (@def
 * when unknown).  Called at the end and on EXEC (an image is about to
 * change): at that moment every process's image still holds the program
 * its blocks in the table ran, since an earlier EXEC emptied the table.
 * Keeping each phase's top N is enough for an exact overall top N. */
static int resolve(struct btr_report *r, struct btr_image *def)
{
	struct blk **cand = NULL;
	size_t n_cand = 0;
	if (r->n_blk) {
		cand = malloc(r->n_blk * sizeof(*cand));
		if (!cand)
			return -BTR_ERR_NOMEM;
	}
	for (size_t i = 0; i < r->cap_blk; i++) {
		struct blk *b = &r->blk[i];
		if (!b->count)
			continue;
		struct btr_image *img = img_for(r, b->pid, def);
		struct btr_function sym;
		struct fn *f;
		/* Functions without a symbol (stripped code) are delimited by
		 * their FDEs and named module+0xOFF (btr_image_function). */
		if (img && btr_image_function(img, b->end, &sym) == 0 && sym.name) {
			f = fn_get(r, sym.name, sym.module, sym.start, img);
		} else {
			/* No symbol: group by module ("[libfoo.so]" from the
			 * "module+0xoff" form), or "[unknown]" outside modules. */
			char buf[512] = "0x";
			if (img)
				btr_image_symbolize(img, b->end, buf, sizeof(buf));
			char *plus = strstr(buf, "+0x");
			if (strncmp(buf, "0x", 2) && plus && plus - buf < (long)sizeof(buf) - 3) {
				memmove(buf + 1, buf, (size_t)(plus - buf));
				buf[0] = '[';
				buf[plus - buf + 1] = ']';
				buf[plus - buf + 2] = 0;
				f = fn_get(r, buf, NULL, 0, NULL);
			} else {
				f = fn_get(r, "[unknown]", NULL, 0, NULL);
			}
		}
		if (!f) {
			free(cand);
			return -BTR_ERR_NOMEM;
		}
		f->pub.insns += b->insns;
		f->pub.branches += b->count;
		if (valid_block(b))
			cand[n_cand++] = b;
	}
	r->n_blocks_total += r->n_blk;
	if (n_cand)
		qsort(cand, n_cand, sizeof(*cand), r->res.has_insns ? cmp_blk_insns : cmp_blk_count);
	size_t keep = n_cand < r->o.top ? n_cand : r->o.top;
	if (r->n_kept + keep > r->cap_kept) {
		size_t ncap = r->n_kept + keep;
		struct btr_report_block *nk = realloc(r->kept, ncap * sizeof(*nk));
		if (!nk) {
			free(cand);
			return -BTR_ERR_NOMEM;
		}
		r->kept = nk;
		r->cap_kept = ncap;
	}
	for (size_t i = 0; i < keep; i++) {
		struct btr_report_block *k = &r->kept[r->n_kept];
		char buf[512];
		const char *file = NULL;
		int line = 0;
		memset(k, 0, sizeof(*k));
		k->start = cand[i]->start;
		k->end = cand[i]->end;
		k->count = cand[i]->count;
		k->insns = cand[i]->insns;
		struct btr_image *img = img_for(r, cand[i]->pid, def);
		if (img) {
			btr_image_symbolize(img, k->start, buf, sizeof(buf));
			if (btr_image_line(img, k->start, &file, &line) < 0)
				file = NULL;
		} else {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, k->start);
		}
		k->sym = strdup(buf);
		k->file = file ? strdup(file) : NULL;
		k->line = file ? line : 0;
		if (!k->sym || (file && !k->file)) {
			free((char *)k->sym);
			free((char *)k->file);
			free(cand);
			return -BTR_ERR_NOMEM;
		}
		r->n_kept++;
	}
	free(cand);
	if (r->blk)
		memset(r->blk, 0, r->cap_blk * sizeof(*r->blk));
	r->n_blk = 0;
	return 0;
}

/* ---- processes ---- */

static struct proc *proc_find(struct btr_report *r, uint32_t pid)
{
	if (r->last_proc < r->n_procs && r->procs[r->last_proc].pub.pid == pid)
		return &r->procs[r->last_proc];
	for (size_t i = r->n_procs; i-- > 0;)
		if (r->procs[i].pub.pid == pid) {
			r->last_proc = i;
			return &r->procs[i];
		}
	return NULL;
}

static struct proc *proc_get(struct btr_report *r, uint32_t pid)
{
	struct proc *p = proc_find(r, pid);
	if (p)
		return p;
	if (r->n_procs == r->cap_procs) {
		size_t nc = r->cap_procs ? r->cap_procs * 2 : 16;
		struct proc *np = realloc(r->procs, nc * sizeof(*np));
		if (!np)
			return NULL;
		r->procs = np;
		r->cap_procs = nc;
	}
	p = &r->procs[r->n_procs];
	memset(p, 0, sizeof(*p));
	p->pub.pid = pid;
	if (!r->n_procs)
		r->root_pid = pid;
	r->last_proc = r->n_procs++;
	return p;
}

/* Sets *@dst to a copy of @src (NULL stays NULL); 0 or -1. */
static int set_str(char **dst, const char *src)
{
	char *c = src ? strdup(src) : NULL;
	if (src && !c)
		return -1;
	free(*dst);
	*dst = c;
	return 0;
}

static int on_process(struct btr_report *r, const struct btr_rec_process *pr)
{
	struct proc *p = proc_get(r, pr->pid);
	if (!p)
		return -1;
	if (pr->event == BTR_PROC_START) {
		p->pub.ppid = pr->ppid;
		p->pub.lost = 0;
		p->started = 1;
	}
	if (pr->event == BTR_PROC_LOST) {
		/* No START before: the process has no trace at all. */
		p->pub.lost = p->started ? 1 : 2;
		if (!p->pub.ppid)
			p->pub.ppid = pr->ppid;
		char why[256];
		snprintf(why, sizeof(why), "%s%s%s", pr->detail ? pr->detail : "", pr->detail && pr->detail[0] ? ": " : "",
			 btr_errstr(pr->reason));
		if (set_str(&p->lost_reason, why) < 0)
			return -1;
	}
	if (pr->event == BTR_PROC_EXEC)
		p->pub.execs++;
	if (pr->event == BTR_PROC_UNTRACED) {
		p->pub.untraced = 1;
		r->res.untraced++;
		if (set_str(&p->reason, pr->detail && pr->detail[0] ? pr->detail : btr_errstr(pr->reason)) < 0)
			return -1;
	}
	if (pr->path && pr->path[0] && set_str(&p->path, pr->path) < 0)
		return -1;
	if (pr->path && pr->path[0] && (pr->event == BTR_PROC_START || pr->event == BTR_PROC_EXEC)) {
		/* The exec chain: each program's file name. */
		const char *b = strrchr(pr->path, '/');
		b = b && b[1] ? b + 1 : pr->path;
		size_t have = p->programs ? strlen(p->programs) : 0;
		if (have < 200) {
			char *n = realloc(p->programs, have + strlen(b) + 5);
			if (!n)
				return -1;
			snprintf(n + have, strlen(b) + 5, "%s%s", have ? " -> " : "", b);
			p->programs = n;
		} else if (strcmp(p->programs + have - 3, "...")) {
			char *n = realloc(p->programs, have + 8);
			if (!n)
				return -1;
			memcpy(n + have, " -> ...", 8);
			p->programs = n;
		}
	}
	if (pr->args_len) {
		/* argv, each NUL-terminated -> one line joined by spaces. */
		char *c = malloc(pr->args_len + 1);
		if (!c)
			return -1;
		memcpy(c, pr->args, pr->args_len);
		c[pr->args_len] = 0;
		size_t n = pr->args_len;
		while (n && !c[n - 1])
			n--;
		for (size_t i = 0; i < n; i++)
			if (!c[i])
				c[i] = ' ';
		c[n] = 0;
		free(p->command);
		p->command = c;
	}
	return 0;
}

static void add_gap(struct btr_report *r, uint32_t tid, int reason, uint64_t offset, int from_flow)
{
	r->res.gaps++;
	if (r->n_gaps < r->o.max_gaps)
		r->gaps[r->n_gaps++] = (struct btr_report_gap){ .tid = tid, .reason = reason,
								.offset = offset, .from_flow = from_flow };
}

static void invalidate(struct btr_report *r, uint32_t tid, int all)
{
	if (all) {
		for (size_t i = 0; i < r->cap_thr; i++)
			r->thr[i].prev_valid = 0;
		return;
	}
	struct thr *t = thr_get(r, tid);
	if (t)
		t->prev_valid = 0;
	else
		r->nomem = 1;
}

/* One --ip-filter range (BTR_REC_IP_FILTER): its link addresses and the
 * function it starts with, named through the file's symbols. */
static void add_range(struct btr_report *r, const struct btr_rec_module *m)
{
	struct btr_report_range *nv = realloc(r->ranges, (r->n_ranges + 1) * sizeof(*nv));
	if (!nv) {
		r->nomem = 1;
		return;
	}
	r->ranges = nv;
	struct btr_report_range *x = &nv[r->n_ranges];
	memset(x, 0, sizeof(*x));
	const char *path = m->path ? m->path : "";
	char name[512] = "";
	if (!path[0]) {
		x->start = m->start;
		x->end = m->start + (m->size ? m->size - 1 : 0);
	} else if (btr__elf_offsets_link(path, m->pgoff, m->size, &x->start, &x->end) == 0) {
		struct btr_image *img;
		struct btr_function fn;
		if (btr_image_new(&img) == 0) {
			if (btr_image_add_elf(img, path, 0, 0) == 0 && btr_image_function(img, x->start, &fn) == 0 &&
			    fn.start == x->start)
				snprintf(name, sizeof(name), "%s", fn.name);
			btr_image_free(img);
		}
	} else {
		x->start = m->pgoff;
		x->end = m->pgoff + (m->size ? m->size - 1 : 0);
		x->offsets = 1;
	}
	x->path = strdup(path);
	x->function = strdup(name);
	if (!x->path || !x->function) {
		free((char *)x->path);
		free((char *)x->function);
		r->nomem = 1;
		return;
	}
	r->n_ranges++;
	r->res.ip_ranges = r->ranges;
	r->res.n_ip_ranges = r->n_ranges;
}

static int add_module(struct btr_report *r, const struct btr_rec_module *m, const char *loaded)
{
	if (r->n_mods == r->cap_mods) {
		size_t ncap = r->cap_mods ? r->cap_mods * 2 : 16;
		struct btr_report_module *nm = realloc(r->mods, ncap * sizeof(*nm));
		if (!nm)
			return -BTR_ERR_NOMEM;
		r->mods = nm;
		r->cap_mods = ncap;
	}
	struct btr_report_module *x = &r->mods[r->n_mods];
	x->start = m->start;
	x->size = m->size;
	x->pgoff = m->pgoff;
	x->pid = m->pid;
	const char *prog = "";
	for (size_t i = 0; i < r->n_procs; i++)
		if (r->procs[i].pub.pid == m->pid && r->procs[i].path) {
			const char *b = strrchr(r->procs[i].path, '/');
			prog = b && b[1] ? b + 1 : r->procs[i].path;
		}
	x->program = strdup(prog);
	x->path = strdup(m->path ? m->path : "");
	x->loaded = loaded ? strdup(loaded) : NULL;
	if (!x->path || !x->program || (loaded && !x->loaded)) {
		free((char *)x->path);
		free((char *)x->program);
		free((char *)x->loaded);
		return -BTR_ERR_NOMEM;
	}
	r->n_mods++;
	return 0;
}

int btr_report_event(void *report, const struct btr_stream_event *ev)
{
	struct btr_report *r = report;
	if (r->nomem)
		return 1;
	const struct btr_record *rec = ev->rec;
	struct thr *t;
	if (ev->pid && ev->pid != UINT32_MAX && ev->type != BTR_SEV_MACHINE) {
		/* Every process met gets a row; remember its image for
		 * symbolizing its blocks at the end. */
		struct proc *p = proc_get(r, ev->pid);
		if (!p) {
			r->nomem = 1;
			return 1;
		}
		if (ev->image)
			p->img = ev->image;
		if ((ev->type == BTR_SEV_THREAD_START || ev->type == BTR_SEV_THREAD_EXIT ||
		     ev->type == BTR_SEV_THREAD_NAME) && ev->tid && (t = thr_get(r, ev->tid)))
			t->pid = ev->pid;
	}
	switch (ev->type) {
	case BTR_SEV_MACHINE:
		snprintf(r->backend, sizeof(r->backend), "%.*s", (int)sizeof(rec->u.machine.backend),
			 rec->u.machine.backend);
		r->res.ip_filtered = !!(rec->u.machine.flags & BTR_MACHINE_IP_FILTER);
		break;
	case BTR_SEV_IP_FILTER:
		add_range(r, &rec->u.module);
		break;
	case BTR_SEV_MODULE_LOAD:
		if (add_module(r, &rec->u.module, ev->path) < 0)
			r->nomem = 1;
		break;
	case BTR_SEV_EXEC:
		if (resolve(r, ev->image) < 0)
			r->nomem = 1;
		invalidate(r, 0, 1);
		break;
	case BTR_SEV_MODULE_UNLOAD:
		/* The module leaves the image after this event (another one
		 * takes its addresses): name what ran in it now. */
		if (r->n_blk && resolve(r, ev->image) < 0)
			r->nomem = 1;
		break;
	case BTR_SEV_PROCESS:
		if (on_process(r, &rec->u.process) < 0)
			r->nomem = 1;
		break;
	case BTR_SEV_THREAD_START:
		if (!(t = thr_get(r, ev->tid))) {
			r->nomem = 1;
			break;
		}
		/* the same tid again (after an exec): it has not ended yet */
		t->pub.exited = 0;
		t->pub.exit_code = 0;
		t->pub.end = BTR_THREAD_END_UNKNOWN;
		t->pub.signo = 0;
		break;
	case BTR_SEV_THREAD_EXIT:
		t = thr_get(r, ev->tid);
		if (!t) {
			r->nomem = 1;
			break;
		}
		t->pub.exited = 1;
		t->pub.exit_code = rec->u.thread.exit_code;
		t->pub.end = rec->u.thread.end <= BTR_THREAD_END_RUNNING ? rec->u.thread.end : BTR_THREAD_END_UNKNOWN;
		t->pub.signo = rec->u.thread.signo;
		t->prev_valid = 0;
		break;
	case BTR_SEV_THREAD_NAME:
		t = thr_get(r, ev->tid);
		if (!t) {
			r->nomem = 1;
			break;
		}
		if (rec->u.thread.name) {
			char *n = strdup(rec->u.thread.name);
			if (!n) {
				r->nomem = 1;
				break;
			}
			free((char *)t->pub.name);
			t->pub.name = n;
		}
		break;
	case BTR_SEV_PROCESS_EXIT: {
		/* A phase ends: the blocks so far (keyed by process) become
		 * function totals, so that the table does not grow with the
		 * number of processes.  Blocks of the process that come later
		 * are still named with its image (the stream keeps it). */
		if (r->n_blk && resolve(r, ev->image) < 0)
			r->nomem = 1;
		struct proc *p = rec->u.exit.pid ? proc_get(r, rec->u.exit.pid) : NULL;
		if (p) {
			p->pub.exited = 1;
			p->pub.code = rec->u.exit.code;
			p->pub.signo = rec->u.exit.signo;
		} else if (rec->u.exit.pid) {
			r->nomem = 1;
			break;
		}
		/* The report's exit is the recorded command's. */
		if (r->res.exit.valid && rec->u.exit.pid != r->root_pid)
			break;
		struct btr_report_exit *x = &r->res.exit;
		x->valid = 1;
		x->pid = rec->u.exit.pid;
		x->tid = rec->u.exit.tid;
		x->code = rec->u.exit.code;
		x->signo = rec->u.exit.signo;
		x->ip = rec->u.exit.ip;
		x->addr = rec->u.exit.addr;
		free(r->exit_where);
		r->exit_where = NULL;
		if (x->ip && ev->image) {
			char buf[512];
			btr_image_symbolize(ev->image, x->ip, buf, sizeof(buf));
			r->exit_where = strdup(buf);
			if (!r->exit_where)
				r->nomem = 1;
		}
		x->where = r->exit_where;
		break;
	}
	case BTR_SEV_FLOW:
		switch (ev->flow->type) {
		case BTR_FLOW_ENABLE:
			/* Tracing resumes at .ip: the next block starts there. */
			t = thr_get(r, ev->tid);
			if (!t) {
				r->nomem = 1;
				break;
			}
			t->prev_to = ev->flow->ip;
			t->prev_valid = ev->flow->ip != 0;
			break;
		case BTR_FLOW_DISABLE:
			invalidate(r, ev->tid, 0);
			break;
		case BTR_FLOW_OVERFLOW:
			r->res.overflows++;
			add_gap(r, ev->tid, -BTR_ERR_OVERFLOW, ev->flow->offset, 1);
			invalidate(r, ev->tid, 0);
			break;
		case BTR_FLOW_GAP:
			add_gap(r, ev->tid, ev->flow->reason, ev->flow->offset, 1);
			invalidate(r, ev->tid, 0);
			break;
		case BTR_FLOW_TSX_ABORT:
			r->res.tsx_aborts++;
			r->res.aborted_insns += ev->flow->payload;
			break;
		default:
			break;
		}
		break;
	case BTR_SEV_GAP:
		add_gap(r, ev->tid, ev->reason, ev->offset, 0);
		invalidate(r, ev->tid, ev->tid == 0);
		break;
	case BTR_SEV_DISCONTINUITY:
		if (ev->rec && ev->rec->type == BTR_REC_WINDOW)
			r->res.windows++;
		invalidate(r, ev->tid, 0);
		break;
	default:
		break;
	}
	return r->nomem ? 1 : 0;
}

int btr_report_finish(struct btr_report *r, struct btr_image *img, const char *backend)
{
	if (!r)
		return -BTR_ERR_INVAL;
	if (r->nomem)
		return -BTR_ERR_NOMEM;
	if (r->finished)
		return 0;
	if (backend && backend[0])
		snprintf(r->backend, sizeof(r->backend), "%s", backend);
	int rc = resolve(r, img);
	if (rc < 0)
		return rc;
	struct btr_report_result *res = &r->res;
	res->rank_by_insns = res->has_insns;
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++)
		res->by_class[c] = r->cls_count[c];
	res->unclassified = r->cls_count[BTR_LBR__COUNT];

	/* Threads, by tid. */
	r->threads_out = calloc(r->n_thr ? r->n_thr : 1, sizeof(*r->threads_out));
	if (!r->threads_out)
		return -BTR_ERR_NOMEM;
	size_t k = 0;
	for (size_t i = 0; i < r->cap_thr; i++) {
		if (!r->thr[i].used)
			continue;
		struct btr_report_thread *o = &r->threads_out[k++];
		*o = r->thr[i].pub;
		if (o->end == BTR_THREAD_END_KILLED && !o->signo && r->thr[i].pid) {
			/* the thread record does not say which signal */
			struct proc *p = proc_find(r, r->thr[i].pid);
			if (p && p->pub.exited)
				o->signo = p->pub.signo;
		}
	}
	if (k)
		qsort(r->threads_out, k, sizeof(*r->threads_out), cmp_thread);
	res->threads = r->threads_out;
	res->n_threads = k;

	/* Processes: their threads' counts. */
	for (size_t i = 0; i < r->cap_thr; i++) {
		struct proc *p = r->thr[i].used && r->thr[i].pid ? proc_get(r, r->thr[i].pid) : NULL;
		if (!p) {
			if (r->thr[i].used && r->thr[i].pid)
				return -BTR_ERR_NOMEM;
			continue;
		}
		p->pub.insns += r->thr[i].pub.insns;
		p->pub.branches += r->thr[i].pub.branches;
		p->pub.threads++;
	}
	r->procs_out = calloc(r->n_procs ? r->n_procs : 1, sizeof(*r->procs_out));
	if (!r->procs_out)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < r->n_procs; i++) {
		struct proc *p = &r->procs[i];
		r->procs_out[i] = p->pub;
		r->procs_out[i].path = p->path ? p->path : "";
		r->procs_out[i].command = p->command ? p->command : "";
		r->procs_out[i].untraced_reason = p->reason;
		r->procs_out[i].lost_reason = p->lost_reason;
		r->procs_out[i].programs = p->programs ? p->programs : "";
	}
	res->processes = r->procs_out;
	res->n_processes = r->n_procs;

	/* Functions. */
	r->funcs_out = calloc(r->n_fn ? r->n_fn : 1, sizeof(*r->funcs_out));
	if (!r->funcs_out)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < r->n_fn; i++) {
		r->funcs_out[i] = r->fn[i].pub;
		r->funcs_out[i].name = r->fn[i].name;
		r->funcs_out[i].module = r->fn[i].module;
		r->funcs_out[i].file = r->fn[i].file;
	}
	if (r->n_fn)
		qsort(r->funcs_out, r->n_fn, sizeof(*r->funcs_out),
		      res->rank_by_insns ? cmp_fn_insns : cmp_fn_branches);
	res->top_functions = r->funcs_out;
	res->n_top_functions = r->n_fn < r->o.top ? r->n_fn : r->o.top;
	res->n_functions = r->n_fn;

	/* Blocks: the union of every phase's top N, ranked again. */
	if (r->n_kept)
		qsort(r->kept, r->n_kept, sizeof(*r->kept), res->rank_by_insns ? cmp_kept_insns : cmp_kept_count);
	res->top_blocks = r->kept;
	res->n_top_blocks = r->n_kept < r->o.top ? r->n_kept : r->o.top;
	res->n_blocks = r->n_blocks_total;

	res->gap_list = r->gaps;
	res->n_gap_list = r->n_gaps;
	res->modules = r->mods;
	res->n_modules = r->n_mods;
	r->finished = 1;
	return 0;
}

const struct btr_report_result *btr_report_get(const struct btr_report *r)
{
	return r ? &r->res : NULL;
}

void btr_report_free(struct btr_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->cap_thr; i++)
		if (r->thr[i].used)
			free((char *)r->thr[i].pub.name);
	free(r->thr);
	free(r->blk);
	for (size_t i = 0; i < r->n_fn; i++) {
		free(r->fn[i].name);
		free(r->fn[i].module);
		free(r->fn[i].file);
	}
	free(r->fn);
	free(r->fn_idx);
	for (size_t i = 0; i < r->n_kept; i++) {
		free((char *)r->kept[i].sym);
		free((char *)r->kept[i].file);
	}
	free(r->kept);
	free(r->gaps);
	for (size_t i = 0; i < r->n_mods; i++) {
		free((char *)r->mods[i].path);
		free((char *)r->mods[i].program);
		free((char *)r->mods[i].loaded);
	}
	free(r->mods);
	for (size_t i = 0; i < r->n_procs; i++) {
		free(r->procs[i].path);
		free(r->procs[i].command);
		free(r->procs[i].programs);
		free(r->procs[i].reason);
		free(r->procs[i].lost_reason);
	}
	free(r->procs);
	free(r->procs_out);
	free(r->threads_out);
	free(r->funcs_out);
	free(r->exit_where);
	for (size_t i = 0; i < r->n_ranges; i++) {
		free((char *)r->ranges[i].path);
		free((char *)r->ranges[i].function);
	}
	free(r->ranges);
	free(r);
}


/* ---- the report as an analysis ---- */

struct rep {
	struct btr_report *r;
	struct btr_stream *s;
	int finished;
	char *name;                       /* the trace's name in the output */
	struct btr_report_run run;        /* what the stream said, at end() */
};

static int rep_begin(void *state, struct btr_stream *s)
{
	((struct rep *)state)->s = s;
	return 0;
}

static int rep_branches(void *state, const struct btr_branch *b, size_t n)
{
	struct rep *x = state;
	return btr_report_branches(x->r, b, n) ? -BTR_ERR_NOMEM : 0;
}

static int rep_counts(void *state, const struct btr_branch_count *c, size_t n)
{
	struct rep *x = state;
	return report_counts(x->r, c, n) ? -BTR_ERR_NOMEM : 0;
}

static int rep_event(void *state, const struct btr_stream_event *ev)
{
	struct rep *x = state;
	return btr_report_event(x->r, ev) ? -BTR_ERR_NOMEM : 0;
}

static int rep_end(void *state, int status)
{
	struct rep *x = state;
	(void)status;
	if (x->s) {
		/* what the output says besides the counts: the stream's
		 * statistics and every cause of lost data */
		btr_stream_get_stats(x->s, &x->run.stats);
		x->run.lost = btr_stream_data_lost(x->s);
		size_t n = btr_stream_losses(x->s, NULL, 0);
		free(x->run.losses);
		x->run.losses = n ? calloc(n, sizeof(*x->run.losses)) : NULL;
		x->run.n_losses = x->run.losses ? btr_stream_losses(x->s, x->run.losses, n) : 0;
	}
	/* The trace's name: the caller's (btr_report_analysis_set_name), else
	 * the path its stream was opened with - the same for `btr report`,
	 * the Python package and any other caller of btr_analysis_run. */
	if (!x->name && x->s && !(x->name = strdup(btr_stream_path(x->s))))
		return -BTR_ERR_NOMEM;
	int rc = btr_report_finish(x->r, x->s ? btr_stream_image(x->s) : NULL,
				   x->s ? btr_stream_backend(x->s) : NULL);
	x->finished = rc == 0;
	return rc;
}

static int rep_write(void *state, FILE *out, const char *format)
{
	struct rep *x = state;
	if (!x->finished)
		return -BTR_ERR_INVAL;
	x->run.name = x->name ? x->name : "";
	if (!format || !strcmp(format, "text"))
		return btr__report_write_text(out, btr_report_get(x->r), &x->run);
	if (!strcmp(format, "json"))
		return btr__report_write_json(out, btr_report_get(x->r), &x->run);
	return -BTR_ERR_INVAL;
}

static void rep_destroy(void *state)
{
	struct rep *x = state;
	if (x) {
		btr_report_free(x->r);
		free(x->run.losses);
		free(x->name);
	}
	free(x);
}

static const char *const rep_formats[] = { "text", "json", NULL };

const struct btr_analysis_ops btr__report_ops = {
	.name = "report",
	.begin = rep_begin,
	.branches = rep_branches,
	.counts = rep_counts,
	.event = rep_event,
	.end = rep_end,
	.write = rep_write,
	.destroy = rep_destroy,
	.formats = rep_formats,
};

int btr_report_analysis_new(const struct btr_report_opts *opts, struct btr_analysis **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	struct rep *x = calloc(1, sizeof(*x));
	if (!x)
		return -BTR_ERR_NOMEM;
	int rc = btr_report_new(opts, &x->r);
	if (rc < 0) {
		free(x);
		return rc;
	}
	return btr_analysis_new(&btr__report_ops, x, out);
}

int btr_report_analysis_set_name(struct btr_analysis *a, const char *name)
{
	if (btr_analysis_ops(a) != &btr__report_ops || !name)
		return -BTR_ERR_INVAL;
	struct rep *x = btr_analysis_state(a);
	char *d = strdup(name);
	if (!d)
		return -BTR_ERR_NOMEM;
	free(x->name);
	x->name = d;
	return 0;
}

const struct btr_report *btr_report_analysis_get(const struct btr_analysis *a)
{
	if (btr_analysis_ops(a) != &btr__report_ops)
		return NULL;
	const struct rep *x = btr_analysis_state(a);
	return x->finished ? x->r : NULL;
}

/* The report of a finished analysis @a, handed to the caller (@a then
 * holds none). */
static struct btr_report *rep_detach(struct btr_analysis *a)
{
	struct rep *x = btr_analysis_state(a);
	struct btr_report *r = x->finished ? x->r : NULL;
	if (r)
		x->r = NULL;
	return r;
}

int btr_report_trace(const char *path, const struct btr_stream_opts *sopts,
		     const struct btr_report_opts *ropts, struct btr_report **out, int *lost)
{
	if (!path || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	if (lost)
		*lost = 0;
	if (!BTR_OPTS_VALID(sopts, BTR_OFFSETOFEND(struct btr_stream_opts, ctx)))
		return -BTR_ERR_INVAL;
	struct btr_stream_opts so;
	BTR_OPTS_COPY(&so, sopts);
	struct btr_analysis *a;
	int rc = btr_report_analysis_new(ropts, &a);
	if (rc < 0)
		return rc;
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	rc = btr_analysis_run(path, &so, &a, 1, &info);
	*out = rep_detach(a);
	btr_analysis_free(a);
	if (lost && *out)
		*lost = info.lost;
	if (!*out)
		return rc < 0 ? rc : -BTR_ERR_NOMEM;
	return rc > 0 ? -BTR_ERR_NOMEM : rc;
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__report_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	(void)a;
	return btr_report_analysis_new(NULL, out);
}
