/* flowdiff.h - test helpers: decode a PT stream into the executed
 * instruction addresses with btr_ptflow and (when built with libipt)
 * with libipt's instruction decoder, for differential tests. */
#ifndef BTR_TEST_FLOWDIFF_H
#define BTR_TEST_FLOWDIFF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/image.h"
#include "btr/ptflow.h"
#ifdef BTR_HAVE_LIBIPT
#include <intel-pt.h>
#endif

struct ipvec {
	uint64_t *v;
	size_t n, cap;
	size_t gaps, events, branches;
	uint64_t last_tsc;
	int tsc_backwards;
};

static inline void ipvec_push(struct ipvec *a, uint64_t ip)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 65536;
		uint64_t *v = realloc(a->v, nc * sizeof(*v));
		if (!v)
			abort();
		a->v = v;
		a->cap = nc;
	}
	a->v[a->n++] = ip;
}

static inline int fd_insn(void *ctx, uint64_t ip, const struct btr_insn *in)
{
	(void)in;
	ipvec_push(ctx, ip);
	return 0;
}

static inline int fd_event(void *ctx, const struct btr_flow_event *ev)
{
	struct ipvec *a = ctx;
	a->events++;
	if (ev->type == BTR_FLOW_GAP)
		a->gaps++;
	return 0;
}

static inline int fd_branch(void *ctx, const struct btr_branch *b)
{
	struct ipvec *a = ctx;
	a->branches++;
	if (b->flags & BTR_BF_TSC) {
		if (b->tsc < a->last_tsc)
			a->tsc_backwards = 1;
		a->last_tsc = b->tsc;
	}
	return 0;
}

/* Decodes with btr, feeding the stream in pieces of @piece bytes (0: all
 * at once).  Returns btr_ptflow_decode's last result. */
static inline int flow_btr(struct btr_image *img, const struct btr_ptflow_config *cfg,
		    const uint8_t *buf, size_t size, size_t piece, struct ipvec *out)
{
	struct btr_ptflow *f;
	int r = btr_ptflow_new(img, cfg, &f);
	if (r)
		return r;
	struct btr_ptflow_callbacks cb = { .branch = fd_branch, .insn = fd_insn, .event = fd_event, .ctx = out };
	if (!piece)
		piece = size ? size : 1;
	for (size_t i = 0; i < size && r == 0; i += piece)
		r = btr_ptflow_decode(f, buf + i, size - i < piece ? size - i : piece, &cb);
	btr_ptflow_free(f);
	return r;
}

#ifdef BTR_HAVE_LIBIPT
static inline int ipt_read_cb(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip, void *ctx)
{
	(void)asid;
	int n = btr_image_read(ctx, ip, buffer, size);
	return n < 0 ? -pte_nomap : n;
}

/* Decodes with libipt's instruction decoder (resyncing at the next PSB
 * after an error).  Returns the number of decode errors. */
static inline int flow_ipt(struct btr_image *img, const uint8_t *buf, size_t size, struct ipvec *out)
{
	struct pt_config c;
	pt_config_init(&c);
	c.begin = (uint8_t *)buf;
	c.end = (uint8_t *)buf + size;
	struct pt_insn_decoder *d = pt_insn_alloc_decoder(&c);
	if (!d)
		return -1;
	pt_image_set_callback(pt_insn_get_image(d), ipt_read_cb, img);
	int errors = 0;
	for (;;) {
		int st = pt_insn_sync_forward(d);
		if (st < 0)
			break;
		for (;;) {
			while (st & pts_event_pending) {
				struct pt_event ev;
				st = pt_insn_event(d, &ev, sizeof(ev));
				if (st < 0)
					break;
				if (ev.type == ptev_overflow)
					out->gaps++;
			}
			if (st < 0)
				break;
			struct pt_insn in;
			st = pt_insn_next(d, &in, sizeof(in));
			if (st < 0)
				break;
			ipvec_push(out, in.ip);
		}
		if (st == -pte_eos)
			break;
		uint64_t off = 0;
		pt_insn_get_offset(d, &off);
		fprintf(stderr, "libipt: %s at offset 0x%llx\n", pt_errstr(pt_errcode(st)), (unsigned long long)off);
		errors++;
	}
	pt_insn_free_decoder(d);
	return errors;
}
#endif

/* Index of the first difference, or -1 if equal. */
static inline long ipvec_diff(const struct ipvec *a, const uint64_t *b, size_t nb)
{
	size_t n = a->n < nb ? a->n : nb;
	for (size_t i = 0; i < n; i++)
		if (a->v[i] != b[i])
			return (long)i;
	return a->n == nb ? -1 : (long)n;
}

static inline void ipvec_report(const char *what, const struct ipvec *a, const uint64_t *b, size_t nb, long at)
{
	fprintf(stderr, "%s: differ at %ld (sizes %zu vs %zu)\n", what, at, a->n, nb);
	for (long i = at - 3; i < at + 4; i++) {
		if (i < 0)
			continue;
		fprintf(stderr, "  [%ld] %016llx %016llx\n", i,
			(size_t)i < a->n ? (unsigned long long)a->v[i] : 0ull,
			(size_t)i < nb ? (unsigned long long)b[i] : 0ull);
	}
}

static inline void ipvec_free(struct ipvec *a)
{
	free(a->v);
	memset(a, 0, sizeof(*a));
}

#endif
