/* stream_par.c - btr_stream_run, in the caller's thread or in several
 * (btr_stream_opts.jobs).
 *
 * Threads of a trace are independent streams: N decoder threads each open
 * the trace again and decode the per-thread data of their share of its
 * threads (a thread's whole data goes to one decoder thread, so its
 * decoder state carries from chunk to chunk as in one thread); every
 * decoder thread also reads the other records (modules, threads, code),
 * so that its images are what the trace says at each point.  The calling
 * thread reads the trace too, does everything but the data records
 * itself, and at each data record hands on what the decoder thread that
 * owns it decoded there: the consumer sees the branches and events of one
 * thread's run, in its order, with the images of its point in the trace.
 *
 * Who owns a data record is decided from the records alone, the same way
 * in every thread (they all read the same records in the same order): a
 * (thread, or CPU for per-CPU data) seen for the first time goes to the
 * decoder thread with the fewest data bytes so far.
 *
 * One long thread (or CPU) of PT is cut into segments at PSBs, so that
 * its data are decoded in several threads: after about seg_max bytes of
 * a segment, at the next place where decoding can be taken over (a PSB,
 * tracing enabled after it, a branch, the next PSB: btr__ptflow_seam), a
 * new segment begins and goes to the decoder thread with the fewest
 * bytes.  The old segment's thread decodes up to that second PSB; the new
 * one's starts its decoder at the first PSB and decodes to the second
 * without output (btr__stream_cut), which gives it the state there of a
 * decoder of the whole stream: the branches, counts and events are those
 * of one decoder, and the consumer sees one thread's run.  A record may
 * hold several seams, each of its parts going to another thread; the
 * calling thread hands on the parts of a record in order.
 *
 * A decoder thread's output for a record is a list of blocks (items:
 * branches, counts, events); at most QUEUE_MAX bytes of them wait, the
 * decoder thread waits beyond that; the calling thread gives read blocks
 * back for reuse. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "stream_par.h"

#define AUTO_MIN_BYTES (4u << 20)    /* jobs 0: a trace this large gains */
#define AUTO_MAX_JOBS 8
#define AUTO_JOBS 0                  /* jobs 0 means the cores (1) or one thread (0) */
#define MAX_JOBS 64
/* Blocks small and few, so that what a decoder thread writes is still in
 * the shared cache when the calling thread reads it, and reused (no page
 * faults, no allocator traffic per block). */
#define BLOCK_BYTES (64u << 10)
#define QUEUE_MAX (1u << 20)
/* PT bytes of a segment of one thread's data (see above); a decoder
 * thread with segments may hold the output of one ahead (a branch is 48
 * bytes, PT holds one to a few per byte). */
#define SEG_MAX (64u << 10)           /* the trace's bytes / (8 x threads), within these */
#define SEG_MIN (8u << 10)
#define SEG_QUEUE_MAX (4u << 20)
#define FINISH_REC UINT64_MAX        /* the block of btr_stream_finish's output */

/* ---- ownership of data records ---- */

struct owner_ent {
	uint64_t key;                /* (tid or cpu) + 1 in the low 32 bits, kind bit 32; 0: empty */
	unsigned w;
	uint64_t seg;                /* PT bytes of its segment so far */
	int cut;                     /* its data have been cut into segments */
};
struct owners {
	struct owner_ent *t;
	size_t n, cap;               /* cap: a power of two */
	unsigned nw;
	uint64_t *bytes;             /* data bytes given to each decoder thread */
	uint64_t seams;              /* segments begun in a thread's data */
	uint64_t seg_max;            /* PT bytes of a segment (about) */
};

/* Where a data record goes: its bytes [@from[i], @from[i + 1]) (the last
 * to its end) to decoder thread @w[i]; @from[0] is 0, the parts after the
 * first are new segments of the record's thread, whose decoders start at
 * @warm[i] (btr__stream_cut).  Each part goes to another thread. */
struct place {
	int cut;                  /* the thread's data have been cut (in this record or before) */
	unsigned n;
	unsigned w[MAX_JOBS];
	size_t from[MAX_JOBS], warm[MAX_JOBS];
};

/* The key and size of data record @rec; 0 if it is not one. */
static int data_key(const struct btr_record *rec, uint64_t *key, uint64_t *size)
{
	uint32_t tid;
	int32_t cpu;
	switch (rec->type) {
	case BTR_REC_PT:
	case BTR_REC_BTS:
	case BTR_REC_BTS_INSNS:
		tid = rec->u.data.tid, cpu = rec->u.data.cpu, *size = rec->u.data.size;
		break;
	case BTR_REC_LBR:
		tid = rec->u.lbr.tid, cpu = rec->u.lbr.cpu, *size = rec->u.lbr.count * 16u + 32;
		break;
	case BTR_REC_BRANCHES:
		tid = rec->u.branches.tid, cpu = -1, *size = rec->u.branches.count * sizeof(struct btr_branch);
		break;
	default:
		return 0;
	}
	/* A thread's data, whatever CPU it names, stays together (its
	 * decoder, its filtered instructions); a CPU's data names no thread. */
	if (tid && tid != UINT32_MAX)
		*key = (uint64_t)tid + 1;
	else
		*key = ((uint64_t)1 << 32) | ((uint64_t)(uint32_t)cpu + 1);
	return 1;
}

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	return k ^ (k >> 33);
}

static unsigned least_bytes(const struct owners *o)
{
	unsigned best = 0;
	for (unsigned w = 1; w < o->nw; w++)
		if (o->bytes[w] < o->bytes[best])
			best = w;
	return best;
}

/* Where data record @rec with @key goes (assigned now if new), in *@pl;
 * 0 or -BTR_ERR_NOMEM. */
static int place_of(struct owners *o, const struct btr_record *rec, uint64_t key, uint64_t size, struct place *pl)
{
	if (2 * (o->n + 1) > o->cap) {
		size_t nc = o->cap ? 2 * o->cap : 64;
		struct owner_ent *nt = calloc(nc, sizeof(*nt));
		if (!nt)
			return -BTR_ERR_NOMEM;
		for (size_t i = 0; i < o->cap; i++)
			if (o->t[i].key) {
				size_t j = mix(o->t[i].key) & (nc - 1);
				while (nt[j].key)
					j = (j + 1) & (nc - 1);
				nt[j] = o->t[i];
			}
		free(o->t);
		o->t = nt;
		o->cap = nc;
	}
	size_t j = mix(key) & (o->cap - 1);
	while (o->t[j].key && o->t[j].key != key)
		j = (j + 1) & (o->cap - 1);
	struct owner_ent *e = &o->t[j];
	if (!e->key) {
		e->key = key;
		e->w = least_bytes(o);
		o->n++;
	}
	pl->n = 1;
	pl->cut = e->cut;
	pl->w[0] = e->w;
	pl->from[0] = pl->warm[0] = 0;
	if (rec->type != BTR_REC_PT) {
		o->bytes[e->w] += size;
		return 0;
	}
	/* new segments: where the current one has seg_max bytes, at the next
	 * place to take over, to a thread with fewer bytes than it that has
	 * no part of the record yet */
	const uint8_t *data = rec->u.data.data;
	uint64_t used = (uint64_t)1 << e->w;
	size_t start = 0, pos = e->seg >= o->seg_max ? 0 : o->seg_max - e->seg, warm, at;
	while (pos < size && pl->n < o->nw) {
		unsigned cur = pl->w[pl->n - 1], nx = o->nw;
		for (unsigned w = 0; w < o->nw; w++)
			if (!(used >> w & 1) && (nx == o->nw || o->bytes[w] < o->bytes[nx]))
				nx = w;
		if (nx == o->nw || o->bytes[nx] >= o->bytes[cur] + (pos - start) ||
		    !btr__ptflow_seam(data + pos, (size_t)size - pos, &warm, &at))
			break;
		o->bytes[cur] += pos + at - start;
		pl->w[pl->n] = nx;
		pl->warm[pl->n] = pos + warm;
		pl->from[pl->n] = start = pos + at;
		pl->n++;
		used |= (uint64_t)1 << nx;
		e->seg = 0;
		o->seams++;
		pos = start + o->seg_max;
	}
	e->w = pl->w[pl->n - 1];
	e->cut |= pl->n > 1;
	pl->cut = e->cut;
	o->bytes[e->w] += size - start;
	e->seg += size - start;
	return 0;
}

static int owners_init(struct owners *o, unsigned nw, uint64_t seg_max)
{
	memset(o, 0, sizeof(*o));
	o->nw = nw;
	o->seg_max = seg_max;
	o->bytes = calloc(nw, sizeof(*o->bytes));
	return o->bytes ? 0 : -BTR_ERR_NOMEM;
}

static void owners_free(struct owners *o)
{
	free(o->t);
	free(o->bytes);
}

/* ---- a decoder thread's output ---- */

enum { IT_BRANCHES = 1, IT_COUNTS, IT_EVENT, IT_EVENT_FLOW, IT_LOG };

struct item {                /* followed by its payload, 8-byte aligned */
	uint32_t type, n;
	uint64_t size;           /* of the payload */
};

struct block {
	struct block *next;
	uint64_t rec;            /* record index, FINISH_REC */
	int last;                /* the record's output ends here */
	size_t len, cap;
	uint8_t *data;
};

struct par;

struct worker {
	struct par *p;
	unsigned idx;
	pthread_t th;
	int started;
	struct btr_stream *s;
	struct owners own;
	/* shared, under p->mu */
	struct block *head, *tail;
	struct block *spare;     /* read blocks of BLOCK_BYTES, for reuse */
	size_t queued;
	int done, err;
	/* the decoder thread's own */
	struct block *cur;
	uint64_t nrec;           /* records seen */
	int owned;               /* the record being processed is ours */
	size_t qmax;             /* queued bytes at most: QUEUE_MAX, SEG_QUEUE_MAX once it has a segment */
	uint64_t parts;          /* parts of records of data cut into segments it decoded */
	double cpu;              /* its CPU seconds (for the debug log) */
	int finishing;           /* btr_stream_finish runs */
};

struct par {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned n;
	struct worker *w;
	struct btr_stream *s;    /* the caller's */
	struct owners own;
	uint64_t nrec;
	int abort;
	int waiting;             /* threads in pthread_cond_wait (signal only then) */
	/* The messages said for data cut into segments (hashes): each
	 * segment's decoder thread says what a decoder says once per thread
	 * or CPU (the warning that no context switch names a CPU's threads),
	 * the calling thread once. */
	int cut;                 /* the record handed on is of such data */
	uint64_t *said;
	size_t nsaid, capsaid;
};

/* With p->cut, whether message @msg was said before; remembers it (the
 * first SAID_MAX messages; on NOMEM not: said twice rather than lost). */
#define SAID_MAX 4096
static int said_before(struct par *p, const char *msg)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const char *c = msg; *c; c++)
		h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
	for (size_t i = 0; p->cut && i < p->nsaid; i++)
		if (p->said[i] == h)
			return 1;
	if (p->nsaid == SAID_MAX)
		return 0;
	if (p->nsaid == p->capsaid) {
		size_t nc = p->capsaid ? 2 * p->capsaid : 16;
		uint64_t *n = realloc(p->said, nc * sizeof(*n));
		if (!n)
			return 0;
		p->said = n;
		p->capsaid = nc;
	}
	p->said[p->nsaid++] = h;
	return 0;
}

/* Puts w->cur on the queue (waits while the queue is full). */
static void publish(struct worker *w, int last)
{
	struct par *p = w->p;
	struct block *b = w->cur;
	w->cur = NULL;
	b->last = last;
	pthread_mutex_lock(&p->mu);
	while (w->queued >= w->qmax && !p->abort) {
		p->waiting++;
		pthread_cond_wait(&p->cv, &p->mu);
		p->waiting--;
	}
	if (p->abort) {
		pthread_mutex_unlock(&p->mu);
		free(b->data);
		free(b);
		return;
	}
	if (w->tail)
		w->tail->next = b;
	else
		w->head = b;
	w->tail = b;
	w->queued += b->cap;
	if (p->waiting)
		pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static struct block *block_new(uint64_t rec, size_t cap)
{
	struct block *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->rec = rec;
	b->cap = cap;
	if (cap && !(b->data = malloc(cap))) {
		free(b);
		return NULL;
	}
	return b;
}

/* Room for an item of @size payload bytes in w->cur: returns where its
 * payload goes, NULL on NOMEM (w->err set). */
static void *item_add(struct worker *w, uint32_t type, uint32_t n, size_t size)
{
	size_t need = sizeof(struct item) + ((size + 7) & ~(size_t)7);
	uint64_t rec = w->finishing ? FINISH_REC : w->nrec - 1;
	if (w->cur && w->cur->cap - w->cur->len < need && w->cur->len)
		publish(w, 0);
	if (!w->cur && need <= BLOCK_BYTES) {
		pthread_mutex_lock(&w->p->mu);
		if ((w->cur = w->spare) != NULL) {
			w->spare = w->cur->next;
			w->cur->next = NULL;
			w->cur->rec = rec;
			w->cur->len = 0;
		}
		pthread_mutex_unlock(&w->p->mu);
	}
	if (!w->cur && !(w->cur = block_new(rec, need > BLOCK_BYTES ? need : BLOCK_BYTES))) {
		w->err = -BTR_ERR_NOMEM;
		return NULL;
	}
	struct item *it = (struct item *)(void *)(w->cur->data + w->cur->len);
	it->type = type;
	it->n = n;
	it->size = size;
	w->cur->len += need;
	return it + 1;
}

static int cap_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct worker *w = ctx;
	if (!w->owned)
		return 0;
	void *d = item_add(w, IT_BRANCHES, (uint32_t)n, n * sizeof(*b));
	if (!d)
		return 1;
	memcpy(d, b, n * sizeof(*b));
	return 0;
}

static int cap_branch(void *ctx, const struct btr_branch *b)
{
	return cap_branches(ctx, b, 1);
}

static int cap_counts(void *ctx, const struct btr_branch_count *c, size_t n)
{
	struct worker *w = ctx;
	if (!w->owned)
		return 0;
	void *d = item_add(w, IT_COUNTS, (uint32_t)n, n * sizeof(*c));
	if (!d)
		return 1;
	memcpy(d, c, n * sizeof(*c));
	return 0;
}

static int cap_event(void *ctx, const struct btr_stream_event *ev)
{
	struct worker *w = ctx;
	/* Events of the other records are the caller's thread's to give;
	 * btr_stream_finish's own output is its module unloads (the caller's
	 * stream gives those) and the gaps of BTS records cut at the end. */
	if (w->finishing ? ev->type != BTR_SEV_GAP : !w->owned)
		return 0;
	size_t fsz = ev->flow ? sizeof(*ev->flow) : 0;
	uint8_t *d = item_add(w, ev->flow ? IT_EVENT_FLOW : IT_EVENT, 1, sizeof(*ev) + fsz);
	if (!d)
		return 1;
	memcpy(d, ev, sizeof(*ev));
	if (fsz)
		memcpy(d + sizeof(*ev), ev->flow, fsz);
	return 0;
}

/* The decoder thread's log messages: those of its own records are said
 * where the records' output is handed on (the others, of records every
 * thread reads, the calling thread says itself). */
static void cap_log(void *ctx, enum btr_log_level level, const char *msg)
{
	struct worker *w = ctx;
	if (w->finishing || !w->owned)
		return;
	size_t n = strlen(msg) + 1;
	char *d = item_add(w, IT_LOG, (uint32_t)level, n);
	if (d)
		memcpy(d, msg, n);
}

static void drop_log(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)ctx, (void)level, (void)msg;
}

/* What decoder thread @idx (with stream @s) does with data record @rec
 * (the hook's return: 0 decode it, 1 skip it, 2 its part, which
 * btr__stream_cut was given); @w (may be NULL) counts its segments. */
static int part_of(struct owners *o, struct btr_stream *s, unsigned idx, const struct btr_record *rec, uint64_t key,
		   uint64_t size, struct worker *w)
{
	struct place pl;
	int rc = place_of(o, rec, key, size, &pl);
	if (rc < 0)
		return rc;
	if (pl.n == 1)
		return pl.w[0] == idx ? 0 : 1;
	/* a record cut into segments: this thread's part, if any */
	unsigned i = 0;
	while (i < pl.n && pl.w[i] != idx)
		i++;
	if (i == pl.n)
		return 1;
	btr__stream_cut(s, pl.warm[i], pl.from[i], i + 1 < pl.n ? pl.from[i + 1] : (size_t)size);
	if (w) {
		w->parts++;
		w->qmax = SEG_QUEUE_MAX;
	}
	return 2;
}

/* The decoder thread's say over each record of its stream. */
static int worker_hook(void *ctx, const struct btr_record *rec)
{
	struct worker *w = ctx;
	if (w->owned && !w->err) {
		/* the previous record's output is complete */
		if (!w->cur && !(w->cur = block_new(w->nrec - 1, 0))) {
			w->err = -BTR_ERR_NOMEM;
			return w->err;
		}
		publish(w, 1);
	}
	w->owned = 0;
	if (w->err)
		return w->err;
	if (!rec) {
		w->finishing = 1;
		return 0;
	}
	w->nrec++;
	uint64_t key, size;
	if (!data_key(rec, &key, &size))
		return 0;
	int rc = part_of(&w->own, w->s, w->idx, rec, key, size, w);
	if (rc < 0)
		return w->err = rc;
	w->owned = rc != 1;
	return rc;
}

/* ---- a shard (btr_stream_opts.shards): one decoder thread's part, in
 * the caller's thread ---- */

struct shard {
	struct owners own;
	struct btr_stream *s;
	unsigned idx;
};

static int shard_hook(void *ctx, const struct btr_record *rec)
{
	struct shard *sh = ctx;
	uint64_t key, size;
	if (!rec || !data_key(rec, &key, &size))
		return 0;
	return part_of(&sh->own, sh->s, sh->idx, rec, key, size, NULL);
}

static void shard_free(void *ctx)
{
	struct shard *sh = ctx;
	owners_free(&sh->own);
	free(sh);
}

/* The PT bytes of a segment in a run of @n threads over @path. */
static uint64_t seg_bytes(const char *path, unsigned n)
{
	struct stat sb;
	uint64_t seg = path && stat(path, &sb) == 0 ? (uint64_t)sb.st_size / (8 * n) : SEG_MAX;
	return seg < SEG_MIN ? SEG_MIN : seg > SEG_MAX ? SEG_MAX : seg;
}

int btr__stream_shard_start(struct btr_stream *s)
{
	const char *path;
	const struct btr_stream_opts *o = btr__stream_opts(s, &path);
	if (o->shards <= 1 || btr__stream_hooked(s))
		return 0;
	struct shard *sh = calloc(1, sizeof(*sh));
	if (!sh || owners_init(&sh->own, o->shards, seg_bytes(path, o->shards)) < 0) {
		free(sh);
		return -BTR_ERR_NOMEM;
	}
	sh->s = s;
	sh->idx = o->shard;
	btr__stream_hook_owned(s, shard_hook, sh, shard_free);
	return 0;
}

/* CPU seconds of the calling thread (POSIX thread CPU clock), 0 if none. */
static double thread_cpu(void)
{
	struct timespec ts;
#ifdef CLOCK_THREAD_CPUTIME_ID
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		return (double)ts.tv_sec + ts.tv_nsec / 1e9;
#endif
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct par *p = w->p;
	btr__log_divert(cap_log, w);
	for (;;) {
		pthread_mutex_lock(&p->mu);
		int ab = p->abort;
		pthread_mutex_unlock(&p->mu);
		if (ab)
			break;
		int end, rc = btr_stream_step(w->s, &end);
		if (w->err || end)
			break;
		if (rc < 0) {
			w->err = rc;
			break;
		}
	}
	if (w->finishing && w->cur && !w->err)
		publish(w, 1);
	btr__log_divert(NULL, NULL);
	w->cpu = thread_cpu();
	pthread_mutex_lock(&p->mu);
	w->done = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- the calling thread ---- */

/* Hands on block @b's items; returns 0, a stop value or an error. */
static int replay(struct par *p, const struct block *b)
{
	struct btr_stream *s = p->s;
	size_t at = 0;
	int rc = 0;
	while (at < b->len && !rc) {
		const struct item *it = (const struct item *)(const void *)(b->data + at);
		const void *d = it + 1;
		at += sizeof(*it) + ((it->size + 7) & ~(uint64_t)7);
		switch (it->type) {
		case IT_BRANCHES:
			rc = btr__stream_replay_branches(s, d, it->n);
			break;
		case IT_COUNTS:
			rc = btr__stream_replay_counts(s, d, it->n);
			break;
		case IT_LOG:
			if (!said_before(p, d))
				btr__log((enum btr_log_level)it->n, "%s", (const char *)d);
			break;
		default: {
			struct btr_stream_event ev;
			memcpy(&ev, d, sizeof(ev));
			ev.rec = NULL;
			ev.path = NULL;
			ev.flow = it->type == IT_EVENT_FLOW ? (const void *)((const uint8_t *)d + sizeof(ev)) : NULL;
			rc = btr__stream_replay_event(s, &ev);
			break;
		}
		}
	}
	return rc;
}

/* Waits for and hands on the output of record @rec of decoder thread @w
 * (FINISH_REC: what it has of btr_stream_finish, if anything). */
static int take(struct par *p, struct worker *w, uint64_t rec)
{
	for (;;) {
		pthread_mutex_lock(&p->mu);
		while (!w->head && !w->done) {
			p->waiting++;
			pthread_cond_wait(&p->cv, &p->mu);
			p->waiting--;
		}
		struct block *b = w->head;
		if (b) {
			w->head = b->next;
			if (!w->head)
				w->tail = NULL;
			w->queued -= b->cap;
			if (p->waiting)
				pthread_cond_broadcast(&p->cv);
		}
		int err = b ? 0 : w->err;   /* (written before done) */
		pthread_mutex_unlock(&p->mu);
		if (!b) {
			if (rec == FINISH_REC)
				return 0;
			/* It stopped before this record: its error. */
			return err ? err : -BTR_ERR_INVAL;
		}
		int rc = b->rec == rec ? replay(p, b) : -BTR_ERR_INVAL;
		int last = b->last;
		if (b->cap == BLOCK_BYTES) {
			pthread_mutex_lock(&p->mu);
			b->next = w->spare;
			w->spare = b;
			pthread_mutex_unlock(&p->mu);
		} else {
			free(b->data);
			free(b);
		}
		if (rc || last)
			return rc;
	}
}

static int main_hook(void *ctx, const struct btr_record *rec)
{
	struct par *p = ctx;
	if (!rec)
		return 0;
	uint64_t idx = p->nrec++, key, size;
	struct place pl;
	if (!data_key(rec, &key, &size))
		return 0;
	int rc = place_of(&p->own, rec, key, size, &pl);
	if (rc < 0)
		return rc;
	p->cut = pl.cut;
	for (unsigned i = 0; i < pl.n && !rc; i++)
		rc = take(p, &p->w[pl.w[i]], idx);
	return rc < 0 ? rc : 1;
}

/* How many threads a run of @s uses (1: the plain loop). */
static unsigned jobs_for(struct btr_stream *s, const char **path)
{
	const struct btr_stream_opts *o = btr__stream_opts(s, path);
	struct btr_stream_stats st;
	btr_stream_get_stats(s, &st);
	struct stat sb;
	/* (@fold_ok asks the consumer's state as the decoder goes: that is
	 * the calling thread's, so such a run decodes there; one thread's
	 * data alone is one decoder's work) */
	if (o->jobs == 1 || o->shards > 1 || o->insn || o->fold_ok || (o->skip_unselected && o->tid) || !*path || st.records ||
	    stat(*path, &sb) < 0 || !S_ISREG(sb.st_mode))
		return 1;
	if (o->jobs)
		return o->jobs > MAX_JOBS ? MAX_JOBS : o->jobs;
	/* 0: one thread until -j pays on a loaded machine too (performance.md) */
	if (!AUTO_JOBS || (uint64_t)sb.st_size < AUTO_MIN_BYTES)
		return 1;
	long nc = sysconf(_SC_NPROCESSORS_ONLN);
	return nc <= 1 ? 1 : nc > AUTO_MAX_JOBS ? AUTO_MAX_JOBS : (unsigned)nc;
}

static int run_seq(struct btr_stream *s)
{
	for (;;) {
		int end, rc = btr_stream_step(s, &end);
		if (rc || end)
			return rc;
	}
}

static int run_par(struct btr_stream *s, const char *path, unsigned n)
{
	struct par p;
	memset(&p, 0, sizeof(p));
	p.s = s;
	p.n = n;
	const struct btr_stream_opts *so = btr__stream_opts(s, &path);
	struct btr_stream_opts wo = *so;
	wo.branch = so->branch ? cap_branch : NULL;
	wo.branches = so->branches ? cap_branches : NULL;
	wo.counts = so->counts ? cap_counts : NULL;
	wo.event = cap_event;
	wo.progress = NULL;
	wo.jobs = 1;
	/* segments: a few for each thread on a trace of one thread */
	uint64_t seg = seg_bytes(path, n);
	int rc = owners_init(&p.own, n, seg);
	if (rc < 0)
		return rc;
	if (!(p.w = calloc(n, sizeof(*p.w)))) {
		owners_free(&p.own);
		return -BTR_ERR_NOMEM;
	}
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	btr__log_divert(drop_log, NULL);   /* (opening says what the caller's opening said) */
	for (unsigned i = 0; i < n && !rc; i++) {
		struct worker *w = &p.w[i];
		w->p = &p;
		w->idx = i;
		w->qmax = QUEUE_MAX;
		wo.ctx = w;
		if ((rc = owners_init(&w->own, n, seg)) < 0 || (rc = btr_stream_open(path, &wo, &w->s)) < 0)
			break;
		btr__stream_hook(w->s, worker_hook, w);
	}
	btr__log_divert(NULL, NULL);
	unsigned started = 0;
	for (unsigned i = 0; i < n && !rc; i++)
		if (pthread_create(&p.w[i].th, NULL, worker_main, &p.w[i]) == 0)
			p.w[i].started = 1, started++;
		else
			rc = -BTR_ERR_NOMEM;
	if (!rc) {
		btr_debug("stream: %u decoder threads started", started);
		double cpu0 = thread_cpu();
		btr__stream_hook(s, main_hook, &p);
		rc = run_seq(s);
		btr__stream_hook(s, NULL, NULL);
		/* What the decoder threads' btr_stream_finish gave (gaps of BTS
		 * records cut at the end), after the caller's. */
		for (unsigned i = 0; i < n && rc >= 0; i++) {
			int r = take(&p, &p.w[i], FINISH_REC);
			if (r && rc == 0)
				rc = r;
		}
		/* what bounds the wall time on an idle machine: the busiest thread */
		double busiest = 0;
		for (unsigned i = 0; i < n; i++)
			busiest = p.w[i].cpu > busiest ? p.w[i].cpu : busiest;
		btr_debug("stream: CPU seconds: calling thread %.3f, busiest decoder thread %.3f", thread_cpu() - cpu0,
			  busiest);
		if (p.own.seams) {
			/* (how one thread's data went: counted by the tests) */
			unsigned with = 0;
			for (unsigned i = 0; i < n; i++)
				with += p.w[i].parts > 0;
			btr_debug("stream: segments of a thread's data after its first: %" PRIu64 ", decoded in %u decoder threads",
				  p.own.seams, with);
		}
	}
	pthread_mutex_lock(&p.mu);
	p.abort = 1;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &p.w[i];
		if (w->started)
			pthread_join(w->th, NULL);
		if (w->s) {
			struct btr_stream_stats st;
			btr_stream_get_stats(w->s, &st);
			btr__stream_add_stats(s, &st);
		}
		struct block *lists[2] = { w->head, w->spare };
		for (int k = 0; k < 2; k++)
			for (struct block *b = lists[k], *nb; b; b = nb) {
				nb = b->next;
				free(b->data);
				free(b);
			}
		if (w->cur) {
			free(w->cur->data);
			free(w->cur);
		}
		btr_stream_free(w->s);
		owners_free(&w->own);
	}
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
	owners_free(&p.own);
	free(p.said);
	free(p.w);
	return rc;
}

int btr_stream_run(struct btr_stream *s)
{
	const char *path;
	if (!s || (btr__stream_opts(s, &path), !path))
		return -BTR_ERR_INVAL;   /* not made by btr_stream_open */
	unsigned n = jobs_for(s, &path);
	if (n == 1) {
		int rc = btr__stream_shard_start(s);
		return rc < 0 ? rc : run_seq(s);
	}
	return run_par(s, path, n);
}
