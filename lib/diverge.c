/* diverge.c - the first divergence of two runs (btr/diverge.h,
 * docs/diverge.md).
 *
 * For each pair of matching threads, two decoder threads run one stream
 * each (btr_stream with a tid selection) and put the thread's branches,
 * placed as (module, link address), into a bounded queue; the caller's
 * thread takes from both queues in step and compares.  Memory: two queues,
 * the context rings, the call stacks (capped) and, with --all, the
 * re-synchronisation window.  Names and lines come from images of the
 * module files loaded here (link addresses, bias 0), so they do not depend
 * on where the decoders are.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "btr/diverge.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/trace.h"
#include "internal.h"

#define QCAP (1u << 16)       /* queue entries per side */
#define BATCH 1024            /* entries moved per lock */
#define MAX_STACK 512         /* call stack frames kept */

enum { E_BRANCH = 0, E_GAP = 1, E_END = 2 };

struct ent {
	uint64_t from, to;            /* run-time addresses */
	uint64_t from_off, to_off;    /* link addresses (or run-time without a module) */
	uint64_t insns;               /* instructions since the previous branch (this one's included) */
	uint64_t index, total;        /* set when first taken: number and cumulative instructions */
	uint32_t from_mod, to_mod;    /* interned module + 1, 0: none */
	int32_t rdepth;               /* --all: call depth after it, relative to the divergence */
	uint8_t kind, taken, type, seen;
};

/* Module paths, shared by both sides (ids are comparable). */
struct intern {
	pthread_mutex_t mu;
	char **v;
	size_t n, cap;
	int nomem;
};

static uint32_t intern_id(struct intern *in, const char *path)
{
	pthread_mutex_lock(&in->mu);
	uint32_t id = 0;
	for (size_t i = 0; i < in->n; i++)
		if (!strcmp(in->v[i], path)) {
			id = (uint32_t)i + 1;
			break;
		}
	if (!id) {
		if (in->n == in->cap) {
			size_t nc = in->cap ? in->cap * 2 : 16;
			char **nv = realloc(in->v, nc * sizeof(*nv));
			if (nv) {
				in->v = nv;
				in->cap = nc;
			}
		}
		char *d = in->n < in->cap ? strdup(path) : NULL;
		if (d) {
			in->v[in->n++] = d;
			id = (uint32_t)in->n;
		} else {
			in->nomem = 1;
		}
	}
	pthread_mutex_unlock(&in->mu);
	return id;
}

/* One decoder thread and its queue. */
struct side {
	const char *path;
	struct btr_stream_opts so;
	struct btr_stream *s;
	struct intern *in;
	pthread_t th;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ent *q;                /* ring of QCAP */
	size_t head, count;
	int stop;                     /* the consumer wants no more */
	int status;                   /* the stream's result */
	/* the producer's batch */
	struct ent out[BATCH];
	size_t nout;
	/* module cache (producer) */
	struct btr_image *img;
	unsigned gen;
	uint64_t mlo, mhi, mbias;
	uint32_t mid;
	/* consumer side: taken batch, pushed-back entries (--all replay) */
	struct ent in_b[BATCH];
	size_t in_n, in_i;
	struct ent *back;
	size_t back_n, back_i, back_cap;
	uint64_t index, total;        /* branches and instructions taken so far */
	int lost;
	/* progress: the bytes this side's stream has read of its file, and the
	 * pair's shared state (side_progress) */
	uint64_t pg_done, pg_total;
	struct pair_progress *pg;
};

/* The progress of a pair of traces read side by side: the caller's
 * callback (btr_stream_opts.progress of btr_diverge_opts.sopts) is called
 * from the two reader threads, one call at a time (@mu), with the bytes
 * read of both files together. */
struct pair_progress {
	pthread_mutex_t mu;
	void (*fn)(void *ctx, uint64_t done, uint64_t total);
	void *ctx;
	struct side *side[2];
};

static void side_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct side *sd = ctx;
	struct pair_progress *pg = sd->pg;
	pthread_mutex_lock(&pg->mu);
	sd->pg_done = done;
	sd->pg_total = total;
	uint64_t d = 0, t = 0;
	for (int i = 0; i < 2; i++)
		if (pg->side[i]) {
			d += pg->side[i]->pg_done;
			t += pg->side[i]->pg_total;
		}
	pg->fn(pg->ctx, d, t);
	pthread_mutex_unlock(&pg->mu);
}

static int flush(struct side *sd)
{
	size_t i = 0;
	pthread_mutex_lock(&sd->mu);
	while (i < sd->nout && !sd->stop) {
		while (sd->count == QCAP && !sd->stop)
			pthread_cond_wait(&sd->cv, &sd->mu);
		while (i < sd->nout && sd->count < QCAP) {
			sd->q[(sd->head + sd->count) % QCAP] = sd->out[i++];
			sd->count++;
		}
		pthread_cond_broadcast(&sd->cv);
	}
	int stop = sd->stop;
	pthread_mutex_unlock(&sd->mu);
	sd->nout = 0;
	return stop;
}

static int put(struct side *sd, const struct ent *e)
{
	sd->out[sd->nout++] = *e;
	return sd->nout == BATCH ? flush(sd) : 0;
}

static void place(struct side *sd, uint32_t pid, uint64_t addr, uint32_t *mod, uint64_t *off)
{
	struct btr_image *img = btr_stream_image_pid(sd->s, pid);
	if (img && img == sd->img && btr_image_generation(img) == sd->gen && addr >= sd->mlo && addr < sd->mhi) {
		*mod = sd->mid;
		*off = addr - sd->mbias;
		return;
	}
	struct btr_image_module mi;
	if (!img || btr_image_module_at(img, addr, &mi) || !mi.path) {
		*mod = 0;
		*off = addr;
		return;
	}
	sd->img = img;
	sd->gen = btr_image_generation(img);
	sd->mlo = mi.start;
	sd->mhi = mi.end;
	sd->mbias = mi.bias;
	sd->mid = intern_id(sd->in, mi.path);
	*mod = sd->mid;
	*off = addr - mi.bias;
}

static int on_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct side *sd = ctx;
	for (size_t i = 0; i < n; i++) {
		struct ent e = { .from = b[i].from, .to = b[i].to, .kind = b[i].kind,
				 .taken = (b[i].flags & BTR_BF_TAKEN) != 0,
				 .insns = (b[i].flags & BTR_BF_INSNS) ? b[i].insns : 0 };
		place(sd, b[i].pid, b[i].from, &e.from_mod, &e.from_off);
		place(sd, b[i].pid, b[i].to, &e.to_mod, &e.to_off);
		if (put(sd, &e))
			return 1;
	}
	return 0;
}

static int on_event(void *ctx, const struct btr_stream_event *ev)
{
	struct side *sd = ctx;
	if ((ev->type == BTR_SEV_GAP || ev->type == BTR_SEV_DISCONTINUITY) && ev->tid == sd->so.tid) {
		struct ent e = { .type = E_GAP };
		return put(sd, &e);
	}
	return 0;
}

static void *producer(void *arg)
{
	struct side *sd = arg;
	int rc = btr_stream_run(sd->s);
	if (rc == 0)
		rc = btr_stream_finish(sd->s);
	sd->lost = btr_stream_data_lost(sd->s);
	if (rc == -BTR_ERR_DATA_LOST)
		rc = 0;   /* said by sd->lost (lost_a/lost_b of the result) */
	struct ent e = { .type = E_END };
	if (rc >= 0 || !sd->stop)
		put(sd, &e);
	flush(sd);
	pthread_mutex_lock(&sd->mu);
	sd->status = rc;
	pthread_mutex_unlock(&sd->mu);
	return NULL;
}

static int side_start(struct side *sd, const char *path, const struct btr_stream_opts *base, uint32_t pid,
		      uint32_t tid, struct intern *in, struct pair_progress *pg)
{
	memset(sd, 0, sizeof(*sd));
	sd->path = path;
	sd->in = in;
	sd->pg = pg;
	BTR_OPTS_COPY(&sd->so, base);
	sd->so.filter = NULL;
	sd->so.branch = NULL;
	sd->so.insn = NULL;
	sd->so.progress = pg->fn ? side_progress : NULL;
	sd->so.progress_ctx = sd;
	pthread_mutex_lock(&pg->mu);   /* (the other side's reader may be reporting) */
	pg->side[pg->side[0] ? 1 : 0] = sd;
	pthread_mutex_unlock(&pg->mu);
	sd->so.branches = on_branches;
	sd->so.event = on_event;
	sd->so.ctx = sd;
	sd->so.pid = pid;
	sd->so.tid = tid;
	sd->so.skip_unselected = 1;   /* one pass per thread pair: only its data is decoded */
	sd->q = malloc(QCAP * sizeof(*sd->q));
	if (!sd->q)
		return -BTR_ERR_NOMEM;
	int rc = btr_stream_open(path, &sd->so, &sd->s);
	if (rc < 0)
		return rc;
	pthread_mutex_init(&sd->mu, NULL);
	pthread_cond_init(&sd->cv, NULL);
	if (pthread_create(&sd->th, NULL, producer, sd)) {
		pthread_mutex_destroy(&sd->mu);
		pthread_cond_destroy(&sd->cv);
		return -BTR_ERR_NOMEM;
	}
	sd->started = 1;
	return 0;
}

static void side_stop(struct side *sd)
{
	if (sd->started) {
		pthread_mutex_lock(&sd->mu);
		sd->stop = 1;
		pthread_cond_broadcast(&sd->cv);
		pthread_mutex_unlock(&sd->mu);
		pthread_join(sd->th, NULL);
		pthread_mutex_destroy(&sd->mu);
		pthread_cond_destroy(&sd->cv);
	}
	btr_stream_free(sd->s);
	free(sd->q);
	free(sd->back);
	sd->s = NULL;
	sd->q = NULL;
	sd->back = NULL;
	sd->started = 0;
}

/* The next entry of @sd: pushed-back ones first, then the queue.  Sets
 * the entry's index and total the first time it is taken. */
static struct ent *take(struct side *sd)
{
	struct ent *e;
	if (sd->back_i < sd->back_n) {
		e = &sd->back[sd->back_i++];
	} else {
		if (sd->in_i == sd->in_n) {
			pthread_mutex_lock(&sd->mu);
			while (!sd->count)
				pthread_cond_wait(&sd->cv, &sd->mu);
			size_t n = 0;
			while (n < BATCH && sd->count) {
				sd->in_b[n++] = sd->q[sd->head];
				sd->head = (sd->head + 1) % QCAP;
				sd->count--;
			}
			pthread_cond_broadcast(&sd->cv);
			pthread_mutex_unlock(&sd->mu);
			sd->in_n = n;
			sd->in_i = 0;
		}
		e = &sd->in_b[sd->in_i++];
		if (e->type == E_END)
			sd->in_i--;   /* the end stays: every later take sees it */
	}
	if (!e->seen && e->type == E_BRANCH) {
		sd->index++;
		sd->total += e->insns;
		e->index = sd->index;
		e->total = sd->total;
		e->seen = 1;
	}
	return e;
}

/* ---- the comparison ------------------------------------------------- */

struct ring {
	struct ent *v;
	size_t cap, n, head;
};

static void ring_put(struct ring *r, const struct ent *e)
{
	if (!r->cap)
		return;
	r->v[(r->head + r->n) % r->cap] = *e;
	if (r->n < r->cap)
		r->n++;
	else
		r->head = (r->head + 1) % r->cap;
}

struct cstack {
	struct ent f[MAX_STACK];   /* the calls */
	size_t n;
	uint64_t over;             /* calls beyond MAX_STACK */
};

static void stack_step(struct cstack *st, const struct ent *e)
{
	if (e->kind == BTR_KIND_CALL || e->kind == BTR_KIND_CALL_IND || e->kind == BTR_KIND_FAR_CALL) {
		if (st->n < MAX_STACK)
			st->f[st->n++] = *e;
		else
			st->over++;
	} else if (e->kind == BTR_KIND_RET || e->kind == BTR_KIND_FAR_RET) {
		if (st->over)
			st->over--;
		else if (st->n)
			st->n--;
	}
}

static int same(const struct ent *a, const struct ent *b)
{
	return a->type == b->type && a->from_mod == b->from_mod && a->from_off == b->from_off &&
	       a->to_mod == b->to_mod && a->to_off == b->to_off && a->kind == b->kind && a->taken == b->taken;
}

/* Names and lines: an image per module file at link addresses. */
struct names {
	struct intern *in;
	struct btr_image **img;    /* by module id - 1 */
	char *failed;
	size_t n;
};

static struct btr_image *names_image(struct names *nm, uint32_t mod)
{
	if (!mod)
		return NULL;
	if (mod > nm->n) {
		size_t nn = nm->in->n;
		struct btr_image **ni = realloc(nm->img, nn * sizeof(*ni));
		char *nf = ni ? realloc(nm->failed, nn) : NULL;
		if (ni)
			nm->img = ni;
		if (!nf)
			return NULL;
		nm->failed = nf;
		for (size_t i = nm->n; i < nn; i++) {
			nm->img[i] = NULL;
			nm->failed[i] = 0;
		}
		nm->n = nn;
	}
	if (mod > nm->n || nm->failed[mod - 1])
		return NULL;
	if (!nm->img[mod - 1]) {
		struct btr_image *img;
		if (btr_image_new(&img) < 0)
			return NULL;
		if (btr_image_add_elf(img, nm->in->v[mod - 1], 0, 0) < 0) {
			btr_image_free(img);
			nm->failed[mod - 1] = 1;
			return NULL;
		}
		nm->img[mod - 1] = img;
	}
	return nm->img[mod - 1];
}

static void locate(struct names *nm, uint32_t mod, uint64_t addr, uint64_t off, struct btr_dv_loc *l)
{
	*l = (struct btr_dv_loc){ .addr = addr, .offset = off, .module = mod ? nm->in->v[mod - 1] : NULL };
	struct btr_image *img = names_image(nm, mod);
	if (!img)
		return;
	struct btr_function fn;
	if (btr_image_function(img, off, &fn) == 0) {
		l->func = fn.name;
		l->func_off = off - fn.start;
	}
	const char *file;
	int line;
	if (btr_image_line(img, off, &file, &line) == 0) {
		l->file = file;
		l->line = line;
	}
}

static void to_branch(struct names *nm, const struct ent *e, struct btr_dv_branch *b)
{
	locate(nm, e->from_mod, e->from, e->from_off, &b->from);
	locate(nm, e->to_mod, e->to, e->to_off, &b->to);
	b->kind = e->kind;
	b->taken = e->taken;
	b->index = e->index;
	b->insns = e->total;
}

/* Fills @out for a divergence at @e (@ctx: the context ring, @st: the
 * stack before @e). */
static int fill_side(struct names *nm, const struct ent *e, const struct ring *ctx, const struct cstack *st,
		     struct btr_dv_side *out, int full)
{
	memset(out, 0, sizeof(*out));
	out->ended = e->type == E_END;
	out->gap = e->type == E_GAP;
	if (e->type == E_BRANCH)
		to_branch(nm, e, &out->at);
	if (!full)
		return 0;
	if (ctx->n) {
		out->last = calloc(ctx->n, sizeof(*out->last));
		if (!out->last)
			return -BTR_ERR_NOMEM;
		for (size_t i = 0; i < ctx->n; i++)
			to_branch(nm, &ctx->v[(ctx->head + i) % ctx->cap], &out->last[i]);
		out->n_last = ctx->n;
	}
	size_t d = st->n + (e->type == E_BRANCH);
	out->stack = calloc(d ? d : 1, sizeof(*out->stack));
	if (!out->stack)
		return -BTR_ERR_NOMEM;
	size_t k = 0;
	if (e->type == E_BRANCH)
		out->stack[k++] = out->at.from;
	for (size_t i = st->n; i-- > 0;)
		locate(nm, st->f[i].from_mod, st->f[i].from, st->f[i].from_off, &out->stack[k++]);
	out->depth = k;
	return 0;
}

/* Which modules are compared (opts.modules): a decision per module id. */
struct msel {
	const char *const *names;
	size_t n;
	struct intern *in;
	signed char *v;             /* by module id: -1 unknown, 0 no, 1 yes */
	size_t nv;
};

static int msel_want(struct msel *m, uint32_t mod)
{
	if (!m->n)
		return 1;
	if (!mod)
		return 0;
	if (mod > m->nv) {
		signed char *nv = realloc(m->v, mod);
		if (!nv)
			return 1;
		memset(nv + m->nv, -1, mod - m->nv);
		m->v = nv;
		m->nv = mod;
	}
	if (m->v[mod - 1] < 0) {
		pthread_mutex_lock(&m->in->mu);
		const char *path = m->in->v[mod - 1];
		pthread_mutex_unlock(&m->in->mu);
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		m->v[mod - 1] = 0;
		for (size_t i = 0; i < m->n; i++)
			if (!strcmp(m->names[i], path) || !strcmp(m->names[i], base))
				m->v[mod - 1] = 1;
	}
	return m->v[mod - 1];
}

/* The next entry to compare: branches from other modules than the chosen
 * ones only move the stack. */
static struct ent *take_sel(struct side *sd, struct msel *m, struct cstack *st)
{
	for (;;) {
		struct ent *e = take(sd);
		if (e->type != E_BRANCH || msel_want(m, e->from_mod))
			return e;
		stack_step(st, e);
	}
}

/* --all: both runs search forward for a call or return both make at the
 * same depth relative to the divergence (the same function entered from
 * the same call site, or left to the same place); the side that made it
 * earlier reads again what came after it. */
struct seen {
	struct ent *v;       /* entries read since the divergence */
	size_t n, cap;
	int32_t depth;
};

static int seen_add(struct seen *s, const struct ent *e)
{
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 1024;
		struct ent *nv = realloc(s->v, nc * sizeof(*nv));
		if (!nv)
			return -BTR_ERR_NOMEM;
		s->v = nv;
		s->cap = nc;
	}
	struct ent *x = &s->v[s->n++];
	*x = *e;
	if (e->kind == BTR_KIND_CALL || e->kind == BTR_KIND_CALL_IND)
		s->depth++;
	else if (e->kind == BTR_KIND_RET)
		s->depth--;
	x->rdepth = s->depth;
	return 0;
}

static int is_boundary(const struct ent *e)
{
	return e->type == E_BRANCH &&
	       (e->kind == BTR_KIND_CALL || e->kind == BTR_KIND_CALL_IND || e->kind == BTR_KIND_RET);
}

static int same_boundary(const struct ent *a, const struct ent *b)
{
	if (a->rdepth != b->rdepth || a->to_mod != b->to_mod || a->to_off != b->to_off)
		return 0;
	if (a->kind == BTR_KIND_RET || b->kind == BTR_KIND_RET)
		return a->kind == b->kind;
	return a->from_mod == b->from_mod && a->from_off == b->from_off;
}

/* A boundary of @s equal to @e; its index or -1. */
static long find_boundary(const struct seen *s, const struct ent *e)
{
	for (size_t i = 0; i < s->n; i++)
		if (is_boundary(&s->v[i]) && same_boundary(&s->v[i], e))
			return (long)i;
	return -1;
}

/* Puts entries [@from, n) of @s back in front of @sd's input. */
static int push_back(struct side *sd, const struct seen *s, size_t from)
{
	size_t rest = sd->back_n - sd->back_i, add = s->n - from;
	struct ent *nv = malloc((rest + add + 1) * sizeof(*nv));
	if (!nv)
		return -BTR_ERR_NOMEM;
	memcpy(nv, s->v + from, add * sizeof(*nv));
	if (rest)
		memcpy(nv + add, sd->back + sd->back_i, rest * sizeof(*nv));
	free(sd->back);
	sd->back = nv;
	sd->back_n = rest + add;
	sd->back_i = 0;
	return 0;
}

/* One step of the search on side @sd: reads an entry into @x and looks it
 * up in the other side's @y.  Returns 1 when found (indices in *@ix, *@iy),
 * 0 to go on, -1 at the side's end, or a negative error below -1. */
static int search_step(struct side *sd, struct msel *m, struct cstack *st, struct seen *x, const struct seen *y,
		       long *ix, long *iy)
{
	struct ent *e = take_sel(sd, m, st);
	if (e->type != E_BRANCH)
		return -1;
	if (seen_add(x, e))
		return -BTR_ERR_NOMEM - 1;
	const struct ent *k = &x->v[x->n - 1];
	if (is_boundary(k) && (*iy = find_boundary(y, k)) >= 0) {
		*ix = (long)x->n - 1;
		return 1;
	}
	return 0;
}

/* Returns 1 when the runs met (the region's sizes in @r), 0 if not, or a
 * negative error. */
static int resync(struct side *a, struct side *b, const struct ent *ea, const struct ent *eb,
		  const struct btr_diverge_opts *o, struct btr_dv_region *r, struct names *nm, struct msel *m,
		  struct cstack *sa, struct cstack *sb)
{
	struct seen xa = { 0 }, xb = { 0 };
	int rc = 0, met = 0;
	uint64_t window = o->window ? o->window : (1u << 20);
	long ia = -1, ib = -1;
	int end_a = ea->type != E_BRANCH, end_b = eb->type != E_BRANCH;
	if ((!end_a && seen_add(&xa, ea)) || (!end_b && seen_add(&xb, eb))) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	if (!end_a && !end_b && is_boundary(&xa.v[0]) && same_boundary(&xa.v[0], &xb.v[0]))
		ia = ib = 0;
	while (ia < 0 && xa.n + xb.n < 2 * window && !(end_a && end_b)) {
		int s;
		if (!end_a) {
			s = search_step(a, m, sa, &xa, &xb, &ia, &ib);
			if (s < -1) {
				rc = s + 1;
				goto out;
			}
			end_a = s < 0;
			if (s > 0)
				break;
		}
		if (!end_b) {
			s = search_step(b, m, sb, &xb, &xa, &ib, &ia);
			if (s < -1) {
				rc = s + 1;
				goto out;
			}
			end_b = s < 0;
			if (s > 0)
				break;
		}
	}
	uint64_t a0 = ea->type == E_BRANCH ? ea->total - ea->insns : a->total;
	uint64_t b0 = eb->type == E_BRANCH ? eb->total - eb->insns : b->total;
	uint64_t ai0 = ea->type == E_BRANCH ? ea->index - 1 : a->index;
	uint64_t bi0 = eb->type == E_BRANCH ? eb->index - 1 : b->index;
	if (ia >= 0) {
		/* the region: what each run did before the common boundary */
		const struct ent *sa_e = &xa.v[ia], *sb_e = &xb.v[ib];
		r->a_insns = sa_e->total - sa_e->insns - a0;
		r->b_insns = sb_e->total - sb_e->insns - b0;
		r->a_branches = sa_e->index - 1 - ai0;
		r->b_branches = sb_e->index - 1 - bi0;
		r->resynced = 1;
		locate(nm, sa_e->to_mod, sa_e->to, sa_e->to_off, &r->sync);
		/* the stacks follow each run up to the boundary; what came
		 * after it is read again */
		for (size_t i = 0; i <= (size_t)ia; i++)
			stack_step(sa, &xa.v[i]);
		for (size_t i = 0; i <= (size_t)ib; i++)
			stack_step(sb, &xb.v[i]);
		if (push_back(a, &xa, (size_t)ia + 1) || push_back(b, &xb, (size_t)ib + 1))
			rc = -BTR_ERR_NOMEM;
		met = 1;
	} else {
		/* no meeting: the region runs to where the search stopped */
		r->a_insns = (xa.n ? xa.v[xa.n - 1].total : a->total) - a0;
		r->b_insns = (xb.n ? xb.v[xb.n - 1].total : b->total) - b0;
		r->a_branches = (xa.n ? xa.v[xa.n - 1].index : a->index) - ai0;
		r->b_branches = (xb.n ? xb.v[xb.n - 1].index : b->index) - bi0;
	}
out:
	free(xa.v);
	free(xb.v);
	return rc < 0 ? rc : met;
}

static int add_region(struct btr_dv_thread *t, size_t max)
{
	if (t->n_regions >= max) {
		t->regions_cut = 1;
		return 1;
	}
	struct btr_dv_region *nr = realloc(t->regions, (t->n_regions + 1) * sizeof(*nr));
	if (!nr)
		return -BTR_ERR_NOMEM;
	t->regions = nr;
	memset(&nr[t->n_regions++], 0, sizeof(*nr));
	return 0;
}

/* Compares one pair of threads. */
static int compare(struct side *a, struct side *b, const struct btr_diverge_opts *o, struct names *nm,
		   struct btr_dv_thread *t)
{
	unsigned nctx = o->context ? (o->context > 256 ? 256 : o->context) : 8;
	struct ring ra = { calloc(nctx, sizeof(struct ent)), nctx, 0, 0 };
	struct ring rb = { calloc(nctx, sizeof(struct ent)), nctx, 0, 0 };
	struct cstack *sa = calloc(1, sizeof(*sa)), *sb = calloc(1, sizeof(*sb));
	struct msel m = { o->modules, o->n_modules, a->in, NULL, 0 };
	int rc = 0;
	if (!ra.v || !rb.v || !sa || !sb) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	size_t max_regions = o->max_regions ? o->max_regions : 1000;
	for (;;) {
		struct ent *ea = take_sel(a, &m, sa), *eb = take_sel(b, &m, sb);
		if (ea->type == E_END && eb->type == E_END)
			break;
		if (ea->type == E_GAP && eb->type == E_GAP)
			continue;   /* both lost data (or an LBR sample ended) at the same point */
		if (ea->type == E_BRANCH && same(ea, eb)) {
			if (!t->diverged)
				t->compared++;
			ring_put(&ra, ea);
			ring_put(&rb, eb);
			stack_step(sa, ea);
			stack_step(sb, eb);
			continue;
		}
		/* a divergence */
		t->diverged = 1;
		int ar = add_region(t, max_regions);
		if (ar)
			break;
		struct btr_dv_region *r = &t->regions[t->n_regions - 1];
		int first = t->n_regions == 1;
		if ((rc = fill_side(nm, ea, &ra, sa, &r->a, first)) || (rc = fill_side(nm, eb, &rb, sb, &r->b, first)))
			goto out;
		if (!o->all || ea->type == E_GAP || eb->type == E_GAP)
			break;
		struct ent ca = *ea, cb = *eb;
		int met = resync(a, b, &ca, &cb, o, r, nm, &m, sa, sb);
		if (met < 0) {
			rc = met;
			goto out;
		}
		if (!met)
			break;
		ra.n = rb.n = 0;
	}
	/* the totals: read both to their ends (the counts of what is left) */
	for (struct ent *e; (e = take(a))->type != E_END;)
		;
	for (struct ent *e; (e = take(b))->type != E_END;)
		;
	t->branches_a = a->index;
	t->branches_b = b->index;
	t->insns_a = a->total;
	t->insns_b = b->total;
out:
	free(m.v);
	free(ra.v);
	free(rb.v);
	free(sa);
	free(sb);
	return rc;
}

/* ---- threads of a trace ---------------------------------------------- */

struct tinfo {
	uint32_t pid, tid;
	size_t proc_rank, thread_rank;   /* position of the process, of the thread in it */
};

struct tlist {
	struct tinfo *v;
	size_t n, cap;
	uint32_t *procs;
	size_t np, capp;
	int cut;        /* the file ends inside a record or chunk */
};

static int tlist_add(struct tlist *l, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].tid == tid && l->v[i].pid == pid)
			return 0;
	size_t pr = 0;
	while (pr < l->np && l->procs[pr] != pid)
		pr++;
	if (pr == l->np) {
		if (l->np == l->capp) {
			size_t nc = l->capp ? l->capp * 2 : 16;
			uint32_t *np = realloc(l->procs, nc * sizeof(*np));
			if (!np)
				return -BTR_ERR_NOMEM;
			l->procs = np;
			l->capp = nc;
		}
		l->procs[l->np++] = pid;
	}
	size_t rank = 0;
	for (size_t i = 0; i < l->n; i++)
		rank += l->v[i].pid == pid;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		struct tinfo *nv = realloc(l->v, nc * sizeof(*nv));
		if (!nv)
			return -BTR_ERR_NOMEM;
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = (struct tinfo){ pid, tid, pr, rank };
	return 0;
}

static int list_threads(const char *path, struct tlist *l)
{
	struct btr_trace_reader *r;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	struct btr_record rec;
	while ((rc = btr_trace_read(r, &rec)) == 0 || rc == -BTR_ERR_CHECKSUM) {
		if (rc)
			continue;
		/* threads in the order they first appear: .btr files say when
		 * they start; perf.data has names, exits, context switches and
		 * LBR samples */
		uint32_t pid = 0, tid = 0;
		switch (rec.type) {
		case BTR_REC_THREAD_START:
		case BTR_REC_THREAD_NAME:
		case BTR_REC_THREAD_EXIT:
			pid = rec.u.thread.pid;
			tid = rec.u.thread.tid;
			break;
		case BTR_REC_PROCESS:
			if (rec.u.process.event == BTR_PROC_START || rec.u.process.event == BTR_PROC_EXEC)
				pid = tid = rec.u.process.pid;
			break;
		case BTR_REC_SWITCH:
			pid = rec.u.sw.pid;
			tid = rec.u.sw.tid;
			break;
		case BTR_REC_LBR:
			pid = rec.u.lbr.pid;
			tid = rec.u.lbr.tid;
			break;
		default:
			break;
		}
		if (tid && tid != UINT32_MAX && pid != UINT32_MAX)
			rc = tlist_add(l, pid, tid);
		if (rc < 0)
			break;
	}
	btr_trace_reader_free(r);
	/* a cut file is compared as far as it goes, and says it lost data
	 * (cut in its first chunk: with none of its threads) */
	l->cut = rc == -BTR_ERR_TRUNCATED;
	return rc == -BTR_ERR_EOS || rc == -BTR_ERR_TRUNCATED ? 0 : rc;
}

static const struct tinfo *tlist_find(const struct tlist *l, size_t pr, size_t tr)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].proc_rank == pr && l->v[i].thread_rank == tr)
			return &l->v[i];
	return NULL;
}

static const struct tinfo *tlist_tid(const struct tlist *l, uint32_t tid)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].tid == tid)
			return &l->v[i];
	return NULL;
}

/* ---- the result ------------------------------------------------------- */

struct owner {                   /* what the result owns beyond its arrays */
	struct btr_diverge_result r;
	struct intern in;
	struct names nm;
};

static void free_side(struct btr_dv_side *s)
{
	free(s->last);
	free(s->stack);
}

void btr_diverge_free(struct btr_diverge_result *res)
{
	if (!res)
		return;
	struct owner *o = (struct owner *)res;
	for (size_t i = 0; i < res->n_threads; i++) {
		struct btr_dv_thread *t = &res->threads[i];
		for (size_t k = 0; k < t->n_regions; k++) {
			free_side(&t->regions[k].a);
			free_side(&t->regions[k].b);
		}
		free(t->regions);
	}
	free(res->threads);
	for (size_t i = 0; i < o->nm.n; i++)
		btr_image_free(o->nm.img[i]);
	free(o->nm.img);
	free(o->nm.failed);
	for (size_t i = 0; i < o->in.n; i++)
		free(o->in.v[i]);
	free(o->in.v);
	pthread_mutex_destroy(&o->in.mu);
	free(o);
}

static int add_thread(struct btr_diverge_result *r, uint32_t pa, uint32_t ta, uint32_t pb, uint32_t tb,
		      struct btr_dv_thread **t)
{
	struct btr_dv_thread *nv = realloc(r->threads, (r->n_threads + 1) * sizeof(*nv));
	if (!nv)
		return -BTR_ERR_NOMEM;
	r->threads = nv;
	*t = &nv[r->n_threads++];
	**t = (struct btr_dv_thread){ .pid_a = pa, .tid_a = ta, .pid_b = pb, .tid_b = tb };
	return 0;
}

static int run_pair(struct owner *ow, const char *pa, const char *pb, const struct btr_diverge_opts *o,
		    const struct tinfo *x, const struct tinfo *y)
{
	struct btr_dv_thread *t;
	int rc = add_thread(&ow->r, x ? x->pid : 0, x ? x->tid : 0, y ? y->pid : 0, y ? y->tid : 0, &t);
	if (rc < 0 || !x || !y) {
		if (rc == 0)
			t->diverged = 1;   /* one run has a thread the other lacks */
		return rc;
	}
	struct side *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	if (!a || !b) {
		free(a);
		free(b);
		return -BTR_ERR_NOMEM;
	}
	struct pair_progress pg = { .fn = NULL };
	if (o->sopts && BTR_OPTS_GET(o->sopts, progress, NULL)) {
		pg.fn = o->sopts->progress;
		pg.ctx = BTR_OPTS_GET(o->sopts, progress_ctx, NULL);
	}
	pthread_mutex_init(&pg.mu, NULL);
	rc = side_start(a, pa, o->sopts, x->pid, x->tid, &ow->in, &pg);
	if (rc == 0)
		rc = side_start(b, pb, o->sopts, y->pid, y->tid, &ow->in, &pg);
	if (rc == 0)
		rc = compare(a, b, o, &ow->nm, t);
	side_stop(a);
	side_stop(b);
	if (rc == 0 && a->status < 0 && a->status != -BTR_ERR_TRUNCATED && a->status != -BTR_ERR_CHECKSUM)
		rc = a->status;
	if (rc == 0 && b->status < 0 && b->status != -BTR_ERR_TRUNCATED && b->status != -BTR_ERR_CHECKSUM)
		rc = b->status;
	pthread_mutex_destroy(&pg.mu);
	ow->r.lost_a |= a->lost || a->status < 0;
	ow->r.lost_b |= b->lost || b->status < 0;
	if (ow->in.nomem && rc == 0)
		rc = -BTR_ERR_NOMEM;
	free(a);
	free(b);
	return rc;
}

int btr_diverge(const char *pa, const char *pb, const struct btr_diverge_opts *opts, struct btr_diverge_result **out)
{
	if (!pa || !pb || !out || !BTR_OPTS_VALID(opts, sizeof(size_t)))
		return -BTR_ERR_INVAL;
	struct btr_diverge_opts o;
	BTR_OPTS_COPY(&o, opts);
	*out = NULL;
	struct owner *ow = calloc(1, sizeof(*ow));
	if (!ow)
		return -BTR_ERR_NOMEM;
	pthread_mutex_init(&ow->in.mu, NULL);
	ow->nm.in = &ow->in;
	struct tlist la = { 0 }, lb = { 0 };
	int rc = list_threads(pa, &la);
	if (rc == 0)
		rc = list_threads(pb, &lb);
	if (rc == 0 && (o.tid_a || o.tid_b)) {
		const struct tinfo *x = tlist_tid(&la, o.tid_a), *y = tlist_tid(&lb, o.tid_b);
		rc = x && y ? run_pair(ow, pa, pb, &o, x, y) : -BTR_ERR_NOT_FOUND;
	} else if (rc == 0) {
		/* every position either trace has */
		for (size_t i = 0; i < la.n && rc == 0; i++)
			rc = run_pair(ow, pa, pb, &o, &la.v[i], tlist_find(&lb, la.v[i].proc_rank, la.v[i].thread_rank));
		for (size_t i = 0; i < lb.n && rc == 0; i++)
			if (!tlist_find(&la, lb.v[i].proc_rank, lb.v[i].thread_rank))
				rc = run_pair(ow, pa, pb, &o, NULL, &lb.v[i]);
	}
	ow->r.lost_a |= la.cut;
	ow->r.lost_b |= lb.cut;
	free(la.v);
	free(la.procs);
	free(lb.v);
	free(lb.procs);
	if (rc < 0) {
		btr_diverge_free(&ow->r);
		return rc;
	}
	*out = &ow->r;
	return 0;
}
