/* blocks.c - basic blocks and edges with counts by module-relative
 * address (btr/blocks.h), and one function's CFG from its code.
 *
 * Hot path: per branch one thread lookup (a one-entry cache answers most:
 * branches come in runs per thread) and two updates of open-addressing
 * tables keyed by run-time addresses and pid.  Nothing is symbolized per
 * branch: the raw tables are resolved to (module, link address) keys at
 * EXEC (the process's image is about to go) and at the end, so the cost of
 * module lookups is per distinct block, not per branch.
 */
#include "btr/blocks.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/insn.h"
#include "image/image_code.h"
#include "internal.h"
#include "elf/elf_priv.h"

#include <stdlib.h>
#include <string.h>

#define MAX_BLOCK_BYTES (1u << 20)
#define MOD_BITS 24
#define MOD_NONE ((1u << MOD_BITS) - 1)

/* One table entry: a 4-word key and two counters.  count 0 = empty.
 * succ (raw table only): indexes + 1 of the last two entries that came
 * right after this one in a thread (0: none), so that the next branch of
 * a thread is found without hashing: a block's branch has one or two
 * successors (JCC taken or not), and the walk repeats them.  One cache
 * line per entry. */
struct ent {
	uint64_t k[4];
	uint64_t count, insns;
	uint32_t succ[2];
	uint64_t pad;
};

struct table {
	struct ent *v;
	size_t n, cap;     /* cap: power of two */
	uint32_t gen;      /* changes whenever entries move or go (grow, clear) */
};

static inline size_t hash3(const uint64_t k[4], size_t cap)
{
	uint64_t h = (k[0] * 0xff51afd7ed558ccdull) ^ k[1];
	h = (h * 0x9e3779b97f4a7c15ull) ^ k[2];
	h = (h * 0xff51afd7ed558ccdull) ^ k[3];
	h *= 0xc4ceb9fe1a85ec53ull;
	return (size_t)(h >> 17) & (cap - 1);
}

static int table_grow(struct table *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 1024;
	struct ent *nv = aligned_alloc(64, ncap * sizeof(*nv));
	if (!nv)
		return -BTR_ERR_NOMEM;
	memset(nv, 0, ncap * sizeof(*nv));
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->v[i].count)
			continue;
		size_t j = hash3(t->v[i].k, ncap);
		while (nv[j].count)
			j = (j + 1) & (ncap - 1);
		nv[j] = t->v[i];
		nv[j].succ[0] = nv[j].succ[1] = 0;   /* indexes changed */
	}
	free(t->v);
	t->v = nv;
	t->cap = ncap;
	t->gen++;
	return 0;
}

/* Adds @count and @insns to the entry of key (a, b, c, d).  Returns its
 * index, or -BTR_ERR_NOMEM. */
static inline long table_add(struct table *t, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
			     uint64_t count, uint64_t insns)
{
	uint64_t k[4] = { a, b, c, d };
	if (btr_likely(t->cap)) {
		size_t j = hash3(k, t->cap);
		while (t->v[j].count) {
			struct ent *e = &t->v[j];
			if (e->k[0] == a && e->k[1] == b && e->k[2] == c && e->k[3] == d) {
				e->count += count;
				e->insns += insns;
				return (long)j;
			}
			j = (j + 1) & (t->cap - 1);
		}
	}
	if ((t->n + 1) * 2 > t->cap && table_grow(t) < 0)
		return -BTR_ERR_NOMEM;
	size_t j = hash3(k, t->cap);
	while (t->v[j].count)
		j = (j + 1) & (t->cap - 1);
	t->v[j] = (struct ent){ { a, b, c, d }, count, insns, { 0, 0 }, 0 };
	t->n++;
	return (long)j;
}

static void table_clear(struct table *t)
{
	if (t->v)
		memset(t->v, 0, t->cap * sizeof(*t->v));
	t->n = 0;
	t->gen++;
}

struct thr {
	uint32_t tid, used;
	uint64_t prev_to;
	int prev_valid;
	/* index + 1 of the raw entry of this thread's last branch (0: none),
	 * valid while the raw table's gen is @gen; its key's target is
	 * prev_to whenever set */
	uint32_t cur, gen;
	/* the branches of the open TSX transaction, until it ends */
	struct btr_branch *tx;
	size_t ntx, cap_tx;
};

struct mod {
	struct btr_blocks_module pub;
	char *path;
	struct btr_image *img;   /* btr_blocks_module_image, lazily */
	int img_failed;
	struct btr_image *jit_src;  /* during resolve: the stream's image of this
				     * module of generated code (no file), to copy */
};

struct blocks {
	struct btr_stream *s;
	struct thr *thr;
	size_t n_thr, cap_thr;
	struct thr *last;
	/* Run-time addresses, one entry per (block start, branch, target):
	 * (start or 0 if unknown, from, to, pid | taken << 32 | kind << 40).
	 * Why one table for both blocks and edges: one hash update per branch
	 * instead of two; the block and edge counts are its sums, taken at
	 * resolve time (distinct entries are few: blocks x successors). */
	struct table raw;
	struct table blk;        /* (start, end, module) link addresses */
	struct table edge;       /* (from, to, from_mod | to_mod << 24 | taken << 48 | kind << 56) */
	struct mod *mods;
	size_t n_mods, cap_mods;
	struct btr_blocks_result res;
	struct btr_blocks_module *mods_out;
	struct btr_block *blocks_out;
	struct btr_edge *edges_out;
	struct btr_blocks_range *filter;
	size_t n_filter;
	int nomem;
	int ended;
};

static struct thr *thr_get(struct blocks *b, uint32_t tid)
{
	if (btr_likely(b->last && b->last->tid == tid))
		return b->last;
	if ((b->n_thr + 1) * 2 > b->cap_thr) {
		size_t ncap = b->cap_thr ? b->cap_thr * 2 : 16;
		struct thr *nt = calloc(ncap, sizeof(*nt));
		if (!nt)
			return NULL;
		for (size_t i = 0; i < b->cap_thr; i++) {
			if (!b->thr[i].used)
				continue;
			size_t j = (b->thr[i].tid * 2654435761u) & (ncap - 1);
			while (nt[j].used)
				j = (j + 1) & (ncap - 1);
			nt[j] = b->thr[i];
		}
		free(b->thr);
		b->thr = nt;
		b->cap_thr = ncap;
	}
	size_t j = (tid * 2654435761u) & (b->cap_thr - 1);
	while (b->thr[j].used) {
		if (b->thr[j].tid == tid)
			return b->last = &b->thr[j];
		j = (j + 1) & (b->cap_thr - 1);
	}
	b->thr[j] = (struct thr){ .tid = tid, .used = 1 };
	b->n_thr++;
	return b->last = &b->thr[j];
}

static int on_begin(void *state, struct btr_stream *s)
{
	struct blocks *b = state;
	b->s = s;
	return 0;
}

/* Counts @x after the thread state (*@prev_to, *@prev_valid, *@cur: the
 * index + 1 of the raw entry of the thread's last branch, or 0).  The hot
 * path: most branches are one of the last two that followed the previous
 * one, found without hashing.  Always inlined: its state pointers are
 * then the caller's registers. */
static inline __attribute__((always_inline)) int
add_one(struct blocks *b, const struct btr_branch *x, uint64_t *prev_to, int *prev_valid, uint32_t *cur)
{
	uint64_t insns = (x->flags & BTR_BF_INSNS) ? x->insns : 0;
	uint64_t c = x->pid | (uint64_t)(x->flags & BTR_BF_TAKEN) << 32 | (uint64_t)x->kind << 40;
	long j = -1;
	struct ent *v = b->raw.v, *prev = NULL;
	if (btr_likely(*cur)) {
		/* the entries that followed the thread's last one (their
		 * start is its target: *prev_to) */
		prev = &v[*cur - 1];
		uint32_t s0 = prev->succ[0], s1 = prev->succ[1];
		if (s0 && v[s0 - 1].k[1] == x->from && v[s0 - 1].k[2] == x->to && v[s0 - 1].k[3] == c)
			j = s0 - 1;
		else if (s1 && v[s1 - 1].k[1] == x->from && v[s1 - 1].k[2] == x->to && v[s1 - 1].k[3] == c)
			j = s1 - 1;
	}
	if (btr_likely(j >= 0)) {
		v[j].count++;
		v[j].insns += insns;
	} else {
		uint32_t gen = b->raw.gen;
		j = table_add(&b->raw, *prev_valid ? *prev_to : 0, x->from, x->to, c, 1, insns);
		if (j < 0) {
			*cur = 0;
			return -BTR_ERR_NOMEM;
		}
		if (prev && gen == b->raw.gen) {
			prev->succ[1] = prev->succ[0];
			prev->succ[0] = (uint32_t)j + 1;
		}
	}
	*cur = (uint32_t)j + 1;
	*prev_to = x->to;
	*prev_valid = 1;
	return 0;
}

static int add_branch(struct blocks *b, struct thr *t, const struct btr_branch *x)
{
	b->res.unknown_start += !t->prev_valid;
	uint32_t cur = t->gen == b->raw.gen ? t->cur : 0;
	int rc = add_one(b, x, &t->prev_to, &t->prev_valid, &cur);
	t->cur = cur;
	t->gen = b->raw.gen;
	return rc;
}

/* The open transaction of @t committed (or its outcome is unknown): its
 * branches are blocks and edges like any. */
static int tx_commit(struct blocks *b, struct thr *t)
{
	for (size_t i = 0; i < t->ntx; i++)
		if (add_branch(b, t, &t->tx[i]) < 0)
			return -BTR_ERR_NOMEM;
	t->ntx = 0;
	return 0;
}

/* A branch inside a TSX transaction, or the one that ends it: held until
 * the transaction's outcome is known (blocks.h). */
static int tx_branch(struct blocks *b, struct thr *t, const struct btr_branch *x)
{
	if (x->flags & BTR_BF_IN_TX) {
		if (t->ntx == t->cap_tx) {
			size_t ncap = t->cap_tx ? 2 * t->cap_tx : 64;
			struct btr_branch *nt = realloc(t->tx, ncap * sizeof(*nt));
			if (!nt)
				return -BTR_ERR_NOMEM;
			t->tx = nt;
			t->cap_tx = ncap;
		}
		t->tx[t->ntx++] = *x;
		return 0;
	}
	if (!(x->flags & BTR_BF_TSX_ABORT))
		return tx_commit(b, t) < 0 ? -BTR_ERR_NOMEM : add_branch(b, t, x);
	/* Aborted: the transaction's instructions, up to the abort's source
	 * (which did not execute), were rolled back; the flow goes on at the
	 * abort's target. */
	t->ntx = 0;
	t->prev_to = x->to;
	t->prev_valid = 1;
	t->cur = 0;
	return 0;
}

static int on_branches(void *state, const struct btr_branch *br, size_t n)
{
	struct blocks *b = state;
	/* The thread's state and the totals live in locals over each run of
	 * one thread's branches (stores to the table could alias them). */
	uint64_t branches = 0, insns_sum = 0, unknown = 0, has_insns = 0;
	int rc = 0;
	for (size_t i = 0; i < n && rc >= 0;) {
		struct thr *t = thr_get(b, br[i].tid);
		if (!t) {
			rc = -BTR_ERR_NOMEM;
			break;
		}
		uint32_t tid = br[i].tid;
		uint64_t prev_to = t->prev_to;
		int prev_valid = t->prev_valid;
		uint32_t cur = t->gen == b->raw.gen ? t->cur : 0;
		for (; i < n && br[i].tid == tid; i++) {
			const struct btr_branch *x = &br[i];
			branches++;
			insns_sum += (x->flags & BTR_BF_INSNS) ? x->insns : 0;
			has_insns |= x->flags & BTR_BF_INSNS;
			/* (an abort without instruction counts - LBR - ends no
			 * transaction btr saw) */
			if (btr_unlikely((x->flags & BTR_BF_IN_TX) || t->ntx ||
					 (x->flags & (BTR_BF_TSX_ABORT | BTR_BF_INSNS)) ==
						 (BTR_BF_TSX_ABORT | BTR_BF_INSNS))) {
				t->prev_to = prev_to;
				t->prev_valid = prev_valid;
				t->cur = cur;
				t->gen = b->raw.gen;
				rc = tx_branch(b, t, x);
				prev_to = t->prev_to;
				prev_valid = t->prev_valid;
				cur = t->gen == b->raw.gen ? t->cur : 0;
			} else {
				unknown += !prev_valid;
				rc = add_one(b, x, &prev_to, &prev_valid, &cur);
			}
			if (rc < 0)
				break;
		}
		t->prev_to = prev_to;
		t->prev_valid = prev_valid;
		t->cur = cur;
		t->gen = b->raw.gen;
	}
	b->res.branches += branches;
	b->res.insns += insns_sum;
	b->res.has_insns |= has_insns != 0;
	b->res.unknown_start += unknown;
	return rc;
}

/* The counted form (btr_analysis_ops.counts): each record's run start is
 * given, so no thread state is needed but for TSX (its records come in
 * order, count 1: btr/ptflow.h). */
static int on_counts(void *state, const struct btr_branch_count *c, size_t n)
{
	struct blocks *b = state;
	for (size_t i = 0; i < n; i++) {
		const struct btr_branch *x = &c[i].b;
		uint64_t cnt = c[i].count;
		uint64_t insns = (x->flags & BTR_BF_INSNS) ? x->insns : 0;
		struct thr *t = thr_get(b, x->tid);
		if (!t)
			return -BTR_ERR_NOMEM;
		if (btr_unlikely((x->flags & BTR_BF_IN_TX) || t->ntx ||
				 (x->flags & (BTR_BF_TSX_ABORT | BTR_BF_INSNS)) ==
					 (BTR_BF_TSX_ABORT | BTR_BF_INSNS))) {
			/* in order: the transaction logic of on_branches, the
			 * thread's state from the record's start */
			if (!t->ntx) {
				t->prev_to = c[i].start;
				t->prev_valid = c[i].start != 0;
				t->cur = 0;
			}
			b->res.branches++;
			b->res.insns += insns;
			b->res.has_insns |= (x->flags & BTR_BF_INSNS) != 0;
			if (tx_branch(b, t, x) < 0)
				return -BTR_ERR_NOMEM;
			continue;
		}
		b->res.branches += cnt;
		b->res.insns += insns * cnt;
		b->res.has_insns |= (x->flags & BTR_BF_INSNS) != 0;
		b->res.unknown_start += c[i].start ? 0 : cnt;
		uint64_t k = x->pid | (uint64_t)(x->flags & BTR_BF_TAKEN) << 32 | (uint64_t)x->kind << 40;
		if (table_add(&b->raw, c[i].start, x->from, x->to, k, cnt, insns * cnt) < 0)
			return -BTR_ERR_NOMEM;
		t->prev_to = x->to;
		t->prev_valid = 1;
		t->cur = 0;
	}
	return 0;
}

/* ---- resolution to module-relative keys ---- */

static uint32_t mod_intern(struct blocks *b, const struct btr_image_module *mi)
{
	for (size_t i = b->n_mods; i-- > 0;)
		if (!strcmp(b->mods[i].path, mi->path))
			return (uint32_t)i;
	if (b->n_mods >= MOD_NONE)
		return MOD_NONE;
	if (b->n_mods == b->cap_mods) {
		size_t ncap = b->cap_mods ? b->cap_mods * 2 : 16;
		struct mod *nm = realloc(b->mods, ncap * sizeof(*nm));
		if (!nm)
			return UINT32_MAX;
		b->mods = nm;
		b->cap_mods = ncap;
	}
	struct mod *m = &b->mods[b->n_mods];
	memset(m, 0, sizeof(*m));
	m->path = strdup(mi->path);
	if (!m->path)
		return UINT32_MAX;
	const char *slash = strrchr(m->path, '/');
	m->pub.path = m->path;
	m->pub.name = slash ? slash + 1 : m->path;
	m->pub.base = mi->start - mi->bias;
	m->pub.size = mi->end - mi->start;
	return (uint32_t)b->n_mods++;
}

/* Module of run-time @addr in @img: index and bias; MOD_NONE outside. */
struct lookup {
	struct btr_image *img;
	uint64_t lo, hi, bias;   /* last module found (run-time range) */
	uint32_t mod;
};

static int resolve_addr(struct blocks *b, struct lookup *l, struct btr_image *img, uint64_t addr,
			uint32_t *mod, uint64_t *off)
{
	if (l->img == img && addr >= l->lo && addr < l->hi) {
		*mod = l->mod;
		*off = addr - l->bias;
		return 0;
	}
	struct btr_image_module mi;
	if (!img || btr_image_module_at(img, addr, &mi) != 0) {
		*mod = MOD_NONE;
		*off = addr;
		return 0;
	}
	uint32_t m = mod_intern(b, &mi);
	if (m == UINT32_MAX)
		return -BTR_ERR_NOMEM;
	if (!mi.is_elf)
		b->mods[m].jit_src = img;
	*l = (struct lookup){ img, mi.start, mi.end, mi.bias, m };
	*mod = m;
	*off = addr - mi.bias;
	return 0;
}

static int resolve(struct blocks *b)
{
	struct lookup l = { 0 }, l2 = { 0 };
	uint32_t last_pid = UINT32_MAX;
	struct btr_image *img = NULL;
	for (size_t i = 0; i < b->raw.cap; i++) {
		const struct ent *e = &b->raw.v[i];
		if (!e->count)
			continue;
		uint32_t pid = (uint32_t)e->k[3];
		if (pid != last_pid) {
			img = b->s ? btr_stream_image_pid(b->s, pid) : NULL;
			last_pid = pid;
		}
		uint64_t start = e->k[0], end = e->k[1];
		uint32_t m, fm, tm;
		uint64_t off, fo, to;
		/* The block [start, end], if its start is known and sane. */
		if (start && start <= end && end - start < MAX_BLOCK_BYTES) {
			if (resolve_addr(b, &l, img, start, &m, &off) < 0)
				return -BTR_ERR_NOMEM;
			/* Both ends in one module (else the start came from elsewhere). */
			if ((m == MOD_NONE || end < l.hi) &&
			    table_add(&b->blk, off, off + (end - start), m, 0, e->count, e->insns) < 0)
				return -BTR_ERR_NOMEM;
		}
		/* The edge end -> to. */
		if (resolve_addr(b, &l, img, e->k[1], &fm, &fo) < 0 ||
		    resolve_addr(b, &l2, img, e->k[2], &tm, &to) < 0)
			return -BTR_ERR_NOMEM;
		uint64_t taken = (e->k[3] >> 32) & 1, kind = (e->k[3] >> 40) & 0xff;
		uint64_t c = fm | (uint64_t)tm << MOD_BITS | taken << 48 | kind << 56;
		if (table_add(&b->edge, fo, to, c, 0, e->count, 0) < 0)
			return -BTR_ERR_NOMEM;
	}
	table_clear(&b->raw);
	/* Generated code has no file to read later: a copy of its code and
	 * names as they are now (the stream's image goes with the stream). */
	for (size_t i = 0; i < b->n_mods; i++) {
		struct mod *m = &b->mods[i];
		struct btr_image *copy;
		if (!m->jit_src || btr_image_new(&copy) < 0)
			continue;
		if (image_code_copy(copy, m->jit_src, m->path) == 0) {
			btr_image_free(m->img);
			m->img = copy;
			m->img_failed = 0;
		} else {
			btr_image_free(copy);
		}
		m->jit_src = NULL;
	}
	return 0;
}

static void invalidate(struct blocks *b, uint32_t tid, int all)
{
	if (all) {
		for (size_t i = 0; i < b->cap_thr; i++)
			b->thr[i].prev_valid = 0, b->thr[i].cur = 0;
		return;
	}
	struct thr *t = thr_get(b, tid);
	if (t)
		t->prev_valid = 0, t->cur = 0;
	else
		b->nomem = 1;
}

/* One range of --ip-filter (BTR_REC_IP_FILTER), kept as link addresses. */
static void add_filter(struct blocks *b, const struct btr_rec_module *m)
{
	struct btr_blocks_range *nf = realloc(b->filter, (b->n_filter + 1) * sizeof(*nf));
	char *path = strdup(m->path ? m->path : "");
	if (!nf || !path) {
		if (nf)
			b->filter = nf;
		free(path);
		b->nomem = 1;
		return;
	}
	b->filter = nf;
	struct btr_blocks_range *f = &nf[b->n_filter++];
	f->path = path;
	f->offsets = 0;
	if (!path[0]) {
		f->start = m->start;
		f->end = m->start + (m->size ? m->size - 1 : 0);
	} else if (btr__elf_offsets_link(path, m->pgoff, m->size, &f->start, &f->end) < 0) {
		f->start = m->pgoff;
		f->end = m->pgoff + (m->size ? m->size - 1 : 0);
		f->offsets = 1;
	}
	b->res.filter = b->filter;
	b->res.n_filter = b->n_filter;
}

static int on_event(void *state, const struct btr_stream_event *ev)
{
	struct blocks *b = state;
	switch (ev->type) {
	case BTR_SEV_IP_FILTER:
		add_filter(b, &ev->rec->u.module);
		break;
	case BTR_SEV_PROCESS_EXIT:
		/* The raw entries (keyed by process) become module-relative
		 * ones, so that the table does not grow with the processes;
		 * flows go on (resolving is no boundary). */
		if (resolve(b) < 0)
			return -BTR_ERR_NOMEM;
		break;
	case BTR_SEV_MODULE_UNLOAD:   /* the module leaves the image after it */
	case BTR_SEV_EXEC:
		/* The old program's image goes away after this event. */
		if (resolve(b) < 0)
			return -BTR_ERR_NOMEM;
		invalidate(b, 0, 1);
		break;
	case BTR_SEV_THREAD_EXIT:
	case BTR_SEV_DISCONTINUITY:
		invalidate(b, ev->tid, 0);
		break;
	case BTR_SEV_GAP:
		invalidate(b, ev->tid, ev->tid == 0);
		break;
	case BTR_SEV_FLOW:
		if (ev->flow->type == BTR_FLOW_TSX_ABORT) {
			b->res.tsx_aborts++;
			b->res.aborted_insns += ev->flow->payload;
		} else if (ev->flow->type == BTR_FLOW_ENABLE) {
			struct thr *t = thr_get(b, ev->tid);
			if (!t)
				return -BTR_ERR_NOMEM;
			t->prev_to = ev->flow->ip;
			t->prev_valid = ev->flow->ip != 0;
			t->cur = 0;
		} else if (ev->flow->type == BTR_FLOW_DISABLE || ev->flow->type == BTR_FLOW_OVERFLOW ||
			   ev->flow->type == BTR_FLOW_GAP) {
			invalidate(b, ev->tid, 0);
		}
		break;
	default:
		break;
	}
	return b->nomem ? -BTR_ERR_NOMEM : 0;
}

static int cmp_block(const void *x, const void *y)
{
	const struct btr_block *a = x, *b = y;
	if (a->module != b->module)
		return a->module < b->module ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->end < b->end ? -1 : a->end > b->end;
}

static int cmp_edge(const void *x, const void *y)
{
	const struct btr_edge *a = x, *b = y;
	if (a->from_module != b->from_module)
		return a->from_module < b->from_module ? -1 : 1;
	if (a->from != b->from)
		return a->from < b->from ? -1 : 1;
	if (a->to_module != b->to_module)
		return a->to_module < b->to_module ? -1 : 1;
	if (a->to != b->to)
		return a->to < b->to ? -1 : 1;
	return a->taken < b->taken ? -1 : a->taken > b->taken;
}

static uint32_t mod_out(const uint32_t *map, uint64_t m)
{
	return m == MOD_NONE ? BTR_BLOCKS_NO_MODULE : map[m];
}

static int cmp_mod_path(const void *x, const void *y)
{
	return strcmp(((const struct mod *)x)->path, ((const struct mod *)y)->path);
}

/* Puts the modules in path order (paths are unique: mod_intern) and
 * returns the map from the old numbers to the new (NULL: no memory).
 * The order they were met in depends on how the branches came (counted
 * runs or one by one), and the result must not. */
static uint32_t *order_modules(struct blocks *b)
{
	uint32_t *map = calloc(b->n_mods + 1, sizeof(*map));
	struct mod *sorted = calloc(b->n_mods + 1, sizeof(*sorted));
	if (!map || !sorted) {
		free(map);
		free(sorted);
		return NULL;
	}
	if (b->n_mods) {
		memcpy(sorted, b->mods, b->n_mods * sizeof(*sorted));
		qsort(sorted, b->n_mods, sizeof(*sorted), cmp_mod_path);
	}
	for (size_t i = 0; i < b->n_mods; i++)
		for (size_t j = 0; j < b->n_mods; j++)
			if (b->mods[j].path == sorted[i].path) {
				map[j] = (uint32_t)i;
				break;
			}
	if (b->n_mods)
		memcpy(b->mods, sorted, b->n_mods * sizeof(*sorted));
	free(sorted);
	return map;
}

static int on_end(void *state, int status)
{
	struct blocks *b = state;
	(void)status;
	for (size_t i = 0; i < b->cap_thr; i++)
		if (b->thr[i].used && b->thr[i].ntx && tx_commit(b, &b->thr[i]) < 0)
			return -BTR_ERR_NOMEM;
	if (resolve(b) < 0)
		return -BTR_ERR_NOMEM;
	uint32_t *map = order_modules(b);
	if (!map)
		return -BTR_ERR_NOMEM;
	b->mods_out = calloc(b->n_mods + 1, sizeof(*b->mods_out));
	b->blocks_out = calloc(b->blk.n + 1, sizeof(*b->blocks_out));
	b->edges_out = calloc(b->edge.n + 1, sizeof(*b->edges_out));
	if (!b->mods_out || !b->blocks_out || !b->edges_out) {
		free(map);
		return -BTR_ERR_NOMEM;
	}
	for (size_t i = 0; i < b->n_mods; i++)
		b->mods_out[i] = b->mods[i].pub;
	size_t n = 0;
	for (size_t i = 0; i < b->blk.cap; i++) {
		const struct ent *e = &b->blk.v[i];
		if (e->count)
			b->blocks_out[n++] = (struct btr_block){ mod_out(map, e->k[2]), e->k[0], e->k[1],
								 e->count, e->insns };
	}
	qsort(b->blocks_out, n, sizeof(*b->blocks_out), cmp_block);
	b->res.blocks = b->blocks_out;
	b->res.n_blocks = n;
	n = 0;
	for (size_t i = 0; i < b->edge.cap; i++) {
		const struct ent *e = &b->edge.v[i];
		if (!e->count)
			continue;
		uint64_t c = e->k[2];
		b->edges_out[n++] = (struct btr_edge){
			.from_module = mod_out(map, c & MOD_NONE), .to_module = mod_out(map, (c >> MOD_BITS) & MOD_NONE),
			.from = e->k[0], .to = e->k[1], .count = e->count,
			.kind = (uint8_t)(c >> 56), .taken = (uint8_t)((c >> 48) & 1) };
	}
	free(map);
	qsort(b->edges_out, n, sizeof(*b->edges_out), cmp_edge);
	b->res.edges = b->edges_out;
	b->res.n_edges = n;
	b->res.modules = b->mods_out;
	b->res.n_modules = b->n_mods;
	/* The resolved tables are in the arrays now. */
	free(b->blk.v);
	free(b->edge.v);
	free(b->raw.v);
	memset(&b->blk, 0, sizeof(b->blk));
	memset(&b->edge, 0, sizeof(b->edge));
	memset(&b->raw, 0, sizeof(b->raw));
	b->s = NULL;
	b->ended = 1;
	return 0;
}

static void on_destroy(void *state)
{
	struct blocks *b = state;
	if (!b)
		return;
	for (size_t i = 0; i < b->n_mods; i++) {
		free(b->mods[i].path);
		btr_image_free(b->mods[i].img);
	}
	free(b->mods);
	for (size_t i = 0; i < b->cap_thr; i++)
		free(b->thr[i].tx);
	free(b->thr);
	free(b->raw.v);
	free(b->blk.v);
	free(b->edge.v);
	free(b->mods_out);
	free(b->blocks_out);
	free(b->edges_out);
	for (size_t i = 0; i < b->n_filter; i++)
		free((char *)b->filter[i].path);
	free(b->filter);
	free(b);
}

const struct btr_analysis_ops btr__blocks_ops = {
	.name = "blocks",
	.begin = on_begin,
	.branches = on_branches,
	.counts = on_counts,
	.event = on_event,
	.end = on_end,
	.destroy = on_destroy,
};

int btr_blocks_new(struct btr_analysis **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	struct blocks *b = calloc(1, sizeof(*b));
	if (!b)
		return -BTR_ERR_NOMEM;
	return btr_analysis_new(&btr__blocks_ops, b, out);
}

static struct blocks *blocks_of(const struct btr_analysis *a)
{
	return btr_analysis_ops(a) == &btr__blocks_ops ? btr_analysis_state(a) : NULL;
}

const struct btr_blocks_result *btr_blocks_get(const struct btr_analysis *a)
{
	struct blocks *b = blocks_of(a);
	return b && b->ended ? &b->res : NULL;
}

long btr_blocks_module_index(const struct btr_blocks_result *r, const char *name)
{
	if (!r || !name)
		return -1;
	for (size_t i = 0; i < r->n_modules; i++)
		if (!strcmp(r->modules[i].path, name) || !strcmp(r->modules[i].name, name))
			return (long)i;
	return -1;
}

size_t btr_blocks_lower_bound(const struct btr_blocks_result *r, uint32_t module, uint64_t addr)
{
	size_t lo = 0, hi = r->n_blocks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct btr_block *x = &r->blocks[mid];
		if (x->module < module || (x->module == module && x->start < addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t btr_edges_lower_bound(const struct btr_blocks_result *r, uint32_t module, uint64_t from)
{
	size_t lo = 0, hi = r->n_edges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct btr_edge *x = &r->edges[mid];
		if (x->from_module < module || (x->from_module == module && x->from < from))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct btr_image *btr_blocks_module_image(struct btr_analysis *a, uint32_t module)
{
	struct blocks *b = blocks_of(a);
	if (!b || module >= b->n_mods)
		return NULL;
	struct mod *m = &b->mods[module];
	if (m->img || m->img_failed)
		return m->img;
	struct btr_image *img;
	if (btr_image_new(&img) < 0)
		return NULL;
	/* Bias 0: the image's addresses are link addresses. */
	if (btr_image_add_elf(img, m->path, 0, 0) < 0) {
		btr_image_free(img);
		m->img_failed = 1;
		return NULL;
	}
	m->img = img;
	return img;
}

static int cmp_icount(const void *x, const void *y)
{
	const struct btr_insn_count *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

int btr_blocks_insn_counts(const struct btr_blocks_result *r, uint32_t module, struct btr_image *img,
			   struct btr_insn_count **out, size_t *n_out)
{
	if (!r || !img || !out || !n_out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	*n_out = 0;
	size_t n = 0, cap = 0;
	struct btr_insn_count *v = NULL;
	for (size_t i = btr_blocks_lower_bound(r, module, 0); i < r->n_blocks && r->blocks[i].module == module; i++) {
		const struct btr_block *b = &r->blocks[i];
		for (uint64_t ip = b->start; ip <= b->end;) {
			struct btr_insn in;
			if (btr_insn_decode_image(img, ip, BTR_MODE_64, &in) <= 0)
				break;
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				struct btr_insn_count *nv = realloc(v, cap * sizeof(*nv));
				if (!nv) {
					free(v);
					return -BTR_ERR_NOMEM;
				}
				v = nv;
			}
			v[n++] = (struct btr_insn_count){ ip, b->count, in.len };
			ip += in.len;
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_icount);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && v[k - 1].addr == v[i].addr)
			v[k - 1].count += v[i].count;
		else
			v[k++] = v[i];
	}
	*out = v;
	*n_out = k;
	return 0;
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__blocks_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	(void)a;
	return btr_blocks_new(out);
}
