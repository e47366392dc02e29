/* ptflow_par.c - parallel flow decoding: the stream is cut at PSBs into
 * pieces that worker threads decode with their own decoders (exact,
 * because the return stack is cleared at every PSB); the caller gets the
 * output in stream order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "btr/pt.h"
#include "ptflow_int.h"

/* ---- parallel decoding ------------------------------------------------ */

/* A piece's output: the branch records exactly as the sequential
 * decoder delivers them (the workers' decoders batch them, and a batch
 * is one memcpy here; replay hands them on without conversion, in
 * batches to cb->branches), and the events with the number of branches
 * before each.  Small pieces keep this in the caches. */
struct piece {
	const uint8_t *buf;
	size_t size;         /* bytes of this piece */
	size_t tail;         /* bytes of the next piece's PSB+ to walk to its FUP */
	struct btr_branch *out;
	size_t n, cap;
	struct btr_flow_event *ev;
	size_t *evpos;       /* branches before event k */
	size_t nev, capev;
	int err;
	struct btr_ptflow *f;
	struct btr_ptflow_stats st;
	int tail_phase;
	int want_branch, want_event;
	uint64_t start_off;  /* stream offset of the piece */
	size_t head_len;     /* its leading PSB+ (the previous piece's tail) */
	int tail_on;         /* tracing was on at the end: the next PSB+ FUP is no new enable */
};

static int par_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct piece *pc = ctx;
	if (btr_unlikely(pc->cap - pc->n < n)) {
		size_t nc = pc->cap ? pc->cap : 4096;
		while (nc - pc->n < n)
			nc *= 2;
		struct btr_branch *no = realloc(pc->out, nc * sizeof(*no));
		if (!no) {
			pc->err = -BTR_ERR_NOMEM;
			return 1;
		}
		pc->out = no;
		pc->cap = nc;
	}
	memcpy(pc->out + pc->n, b, n * sizeof(*b));
	pc->n += n;
	return 0;
}

static int par_event(void *ctx, const struct btr_flow_event *e)
{
	struct piece *pc = ctx;
	/* In the tail (the next piece's PSB+) only the walk to its FUP
	 * belongs to us: that piece reports its own events. */
	if (pc->tail_phase)
		return 0;
	if (pc->nev == pc->capev) {
		size_t nc = pc->capev ? pc->capev * 2 : 64;
		struct btr_flow_event *ne = realloc(pc->ev, nc * sizeof(*ne));
		if (ne)
			pc->ev = ne;
		size_t *np = ne ? realloc(pc->evpos, nc * sizeof(*np)) : NULL;
		if (!np) {
			pc->err = -BTR_ERR_NOMEM;
			return 1;
		}
		pc->evpos = np;
		pc->capev = nc;
	}
	/* (the decoder delivered the branches before @e first) */
	pc->evpos[pc->nev] = pc->n;
	pc->ev[pc->nev++] = *e;
	return 0;
}

/* Delivers @n branch records. */
static int deliver(const struct btr_ptflow_callbacks *cb, const struct btr_branch *b, size_t n)
{
	if (cb->branches) {
		while (n) {
			size_t k = n < BTR_PTFLOW_BATCH ? n : BTR_PTFLOW_BATCH;
			if (cb->branches(cb->ctx, b, k))
				return 1;
			b += k;
			n -= k;
		}
		return 0;
	}
	if (cb->branch)
		for (size_t k = 0; k < n; k++)
			if (cb->branch(cb->ctx, &b[k]))
				return 1;
	return 0;
}

/* Delivers piece @pc's records.  With @quiet_head, the ENABLE and MODE
 * events of its leading PSB+ are dropped: the sequential decoder, which
 * was tracing there, reports none; a MODE that restates the mode last
 * reported (@mode, updated) is dropped too.  Returns 0 or 1 if a callback
 * stopped. */
static int replay(const struct piece *pc, const struct btr_ptflow_callbacks *cb, int quiet_head, uint64_t *mode)
{
	size_t k = 0;
	for (size_t e = 0; e <= pc->nev; e++) {
		size_t end = e < pc->nev ? pc->evpos[e] : pc->n;
		if (end > k && deliver(cb, pc->out + k, end - k))
			return 1;
		k = end;
		if (e == pc->nev)
			break;
		const struct btr_flow_event *ev = &pc->ev[e];
		if (quiet_head && (ev->type == BTR_FLOW_ENABLE || ev->type == BTR_FLOW_MODE) &&
		    ev->offset >= pc->start_off && ev->offset < pc->start_off + pc->head_len)
			continue;
		/* A piece's decoder starts in 64-bit mode and learns the mode
		 * from its first PSB+, also where tracing was off: the
		 * sequential decoder reports a MODE only when it changes. */
		if (ev->type == BTR_FLOW_MODE) {
			if (ev->payload == *mode)
				continue;
			*mode = ev->payload;
		}
		if (cb->event && cb->event(cb->ctx, ev))
			return 1;
	}
	return 0;
}

static void *par_worker(void *arg)
{
	struct piece *pc = arg;
	/* Buffer only what the caller wants: without a branch callback
	 * (statistics only) the workers run at full decoding speed. */
	struct btr_ptflow_callbacks cb = { .branches = pc->want_branch ? par_branches : NULL,
					   .event = pc->want_event ? par_event : NULL, .ctx = pc };
	struct btr_ptflow *f = pc->f;
	int r = btr_ptflow_decode(f, pc->buf, pc->size, &cb);
	pc->tail_on = f->en == EN_ON;
	if (r >= 0 && !pc->err && pc->tail) {
		/* Walk to the next piece's PSB+ FUP so that the direct jumps
		 * between the last branch and the PSB are not lost; then stop
		 * at the PSBEND (feed it packet by packet). */
		pc->tail_phase = 1;
		btr_ptflow_decode(f, pc->buf + pc->size, pc->tail, &cb);
	}
	btr_ptflow_stats(f, &pc->st);
	pc->st.bytes = pc->size;
	return NULL;
}

int btr__ptflow_seam(const uint8_t *p, size_t n, size_t *warm, size_t *at)
{
	size_t i = 0;
	while (i < n) {
		size_t a = i + ptf_find_psb(p + i, n - i);
		if (a >= n)
			return 0;
		struct btr_pt_pkt_decoder d;
		struct btr_pt_packet k;
		int in_psb = 1, mode = 0, on = 0, ok = 0;
		size_t next = a + PT_SIZE_PSB;
		btr_pt_pkt_init(&d, p + a, n - a, 0);
		while (btr_pt_pkt_next(&d, &k) > 0) {
			if (k.type == BTR_PT_PSB && k.offset) {
				if (ok) {
					*warm = a;
					*at = a + k.offset;
					return 1;
				}
				next = a + k.offset;
				break;
			}
			if (k.type == BTR_PT_OVF)
				break;   /* (from the next PSB on) */
			mode |= k.type == BTR_PT_MODE_EXEC;
			if (in_psb) {
				on |= mode && k.type == BTR_PT_FUP;
				in_psb = k.type != BTR_PT_PSBEND;
			} else if (k.type == BTR_PT_TIP_PGE)
				on = mode;
			else if (k.type == BTR_PT_TIP_PGD)
				on = ok;
			else if (on && (k.type == BTR_PT_TNT || k.type == BTR_PT_TIP))
				ok = 1;
		}
		i = next;
	}
	return 0;
}

/* Pipelined parallel decoding: worker threads claim pieces in stream
 * order and decode them into slots (2 per worker); the calling thread
 * delivers the slots' buffered output in order and frees them.  Memory
 * is bounded by the slots. */
enum { SLOT_FREE, SLOT_BUSY, SLOT_DONE };

struct par {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const uint8_t *buf;
	size_t size, chunk, next_pos;
	uint64_t next_idx;
	struct piece *slots;
	int want_branch, want_event;
	uint64_t *slot_idx;
	int *slot_state;
	unsigned nslots;
	int abort;
};

struct par_thread {
	struct par *p;
	struct btr_ptflow *f;
	pthread_t th;
	int started;
};

static void *par_thread_main(void *arg)
{
	struct par_thread *t = arg;
	struct par *p = t->p;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->abort || p->next_pos >= p->size)
			break;
		uint64_t idx = p->next_idx;
		unsigned si = (unsigned)(idx % p->nslots);
		if (p->slot_state[si] != SLOT_FREE) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		/* Cut the next piece at a PSB. */
		size_t pos = p->next_pos, end = pos + p->chunk;
		if (end >= p->size)
			end = p->size;
		else
			end += ptf_find_psb(p->buf + end, p->size - end);
		p->next_pos = end;
		p->next_idx++;
		p->slot_state[si] = SLOT_BUSY;
		p->slot_idx[si] = idx;
		struct piece *pc = &p->slots[si];
		pthread_mutex_unlock(&p->mu);

		pc->buf = p->buf + pos;
		pc->size = end - pos;
		pc->tail = end < p->size ? btr__pt_psb_plus_len(p->buf + end, p->size - end) : 0;
		pc->n = 0;
		pc->nev = 0;
		pc->err = 0;
		pc->tail_phase = 0;
		pc->start_off = pos;
		pc->head_len = pos ? btr__pt_psb_plus_len(p->buf + pos, p->size - pos) : 0;
		pc->want_branch = p->want_branch;
		pc->want_event = p->want_event;
		pc->f = t->f;
		ptf_reset_for_piece(t->f, pos);
		par_worker(pc);

		pthread_mutex_lock(&p->mu);
		p->slot_state[si] = SLOT_DONE;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int btr_ptflow_decode_parallel(struct btr_image *img, const struct btr_ptflow_config *cfg,
			       const uint8_t *buf, size_t size, unsigned nthreads, size_t chunk,
			       const struct btr_ptflow_callbacks *cb, struct btr_ptflow_stats *st)
{
	if (!img || (!buf && size) || !cb)
		return -BTR_ERR_INVAL;
	if (cb->insn || cb->counts)
		return -BTR_ERR_UNSUPPORTED;
	if (nthreads < 1)
		nthreads = 1;
	if (nthreads > 64)
		nthreads = 64;
	if (!chunk)
		chunk = 16u << 10;  /* small pieces: their buffered output stays in cache */
	if (st)
		memset(st, 0, sizeof(*st));

	struct par p;
	memset(&p, 0, sizeof(p));
	p.buf = buf;
	p.size = size;
	p.chunk = chunk;
	p.nslots = 2 * nthreads;
	p.want_branch = cb->branch != NULL || cb->branches != NULL;
	p.want_event = cb->event != NULL;
	p.slots = calloc(p.nslots, sizeof(*p.slots));
	p.slot_idx = calloc(p.nslots, sizeof(*p.slot_idx));
	p.slot_state = calloc(p.nslots, sizeof(*p.slot_state));
	struct par_thread *ts = calloc(nthreads, sizeof(*ts));
	int ret = 0;
	if (!p.slots || !p.slot_idx || !p.slot_state || !ts) {
		ret = -BTR_ERR_NOMEM;
		goto out;
	}
	for (unsigned t = 0; t < nthreads; t++) {
		ts[t].p = &p;
		int e = btr_ptflow_new(img, cfg, &ts[t].f);
		if (e) {
			ret = e;
			goto out;
		}
	}
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	unsigned started = 0;
	for (unsigned t = 0; t < nthreads; t++) {
		if (pthread_create(&ts[t].th, NULL, par_thread_main, &ts[t]) == 0) {
			ts[t].started = 1;
			started++;
		}
	}
	if (!started) {
		ret = -BTR_ERR_NOMEM;
		goto out_sync;
	}
	/* Deliver pieces in order. */
	int prev_tail_on = 0;
	uint64_t mode = BTR_MODE_64;   /* the mode last reported (the decoder's first) */
	for (uint64_t idx = 0;; idx++) {
		unsigned si = (unsigned)(idx % p.nslots);
		pthread_mutex_lock(&p.mu);
		while (!(p.slot_state[si] == SLOT_DONE && p.slot_idx[si] == idx)) {
			if (p.next_pos >= p.size && idx >= p.next_idx)
				break;
			pthread_cond_wait(&p.cv, &p.mu);
		}
		int done = !(p.slot_state[si] == SLOT_DONE && p.slot_idx[si] == idx);
		pthread_mutex_unlock(&p.mu);
		if (done)
			break;
		struct piece *pc = &p.slots[si];
		if (pc->err && !ret)
			ret = pc->err;
		if (!ret)
			ret = replay(pc, cb, prev_tail_on, &mode);
		prev_tail_on = pc->tail_on;
		if (st) {
			st->insns += pc->st.insns;
			st->branches += pc->st.branches;
			st->gaps += pc->st.gaps;
			st->bytes += pc->st.bytes;
			st->overflows += pc->st.overflows;
			st->blocks_decoded += pc->st.blocks_decoded;
			st->tsx_aborts += pc->st.tsx_aborts;
			st->tsx_aborted_insns += pc->st.tsx_aborted_insns;
			for (int k = 0; k < BTR_KIND__COUNT; k++)
				st->by_kind[k] += pc->st.by_kind[k];
		}
		pthread_mutex_lock(&p.mu);
		p.slot_state[si] = SLOT_FREE;
		if (ret)
			p.abort = 1;
		pthread_cond_broadcast(&p.cv);
		pthread_mutex_unlock(&p.mu);
		if (ret)
			break;
	}
out_sync:
	pthread_mutex_lock(&p.mu);
	p.abort = 1;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (unsigned t = 0; t < nthreads; t++)
		if (ts[t].started)
			pthread_join(ts[t].th, NULL);
	pthread_cond_destroy(&p.cv);
	pthread_mutex_destroy(&p.mu);
out:
	if (ts)
		for (unsigned t = 0; t < nthreads; t++)
			btr_ptflow_free(ts[t].f);
	if (p.slots)
		for (unsigned k = 0; k < p.nslots; k++) {
			free(p.slots[k].out);
			free(p.slots[k].ev);
			free(p.slots[k].evpos);
		}
	free(p.slots);
	free(p.slot_idx);
	free(p.slot_state);
	free(ts);
	return ret;
}
