/* fuzz_pt.c - libFuzzer target for the Intel PT packet decoder.
 *
 * Decodes the input like `btr pt dump` does (resync at the next PSB after
 * each bad packet), formats every packet, and checks that the decoder
 * gives exactly the same packets and errors when the same bytes arrive in
 * pieces (two random cut points derived from the input, fed through
 * btr_pt_pkt_feed), through btr_pt_pkt_next_batch and btr_pt_pkt_next_compact.  abort() on any
 * difference; the sanitizers catch memory errors.
 */
#include "btr/pt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAXEV = 4096 };

struct ev {
	int err;      /* 0: packet, else the negative error */
	uint64_t off;
	struct btr_pt_packet p;
};

struct evs {
	struct ev v[MAXEV];
	size_t n;
};

static void add(struct evs *e, int err, uint64_t off, const struct btr_pt_packet *p)
{
	if (e->n >= MAXEV)
		return;
	struct ev *x = &e->v[e->n++];
	memset(x, 0, sizeof(*x));
	x->err = err;
	x->off = off;
	if (p) {
		x->p.type = p->type;
		x->p.size = p->size;
		x->p.offset = p->offset;
		x->p.u = p->u;
	}
}

/* Decodes @data in pieces ending at @cuts (ascending, last = size). */
static void run(const uint8_t *data, size_t size, const size_t *cuts, int ncuts, int batch, struct evs *out)
{
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet pk[7];
	size_t start = 0;
	int ci = 0;

	out->n = 0;
	btr_pt_pkt_init(&d, data, cuts[0], 0);
	for (;;) {
		int r;
		/* zeroed, so the bytes a packet type leaves unwritten compare equal */
		memset(pk, 0, sizeof(pk));
		if (batch == 2) {
			/* compact: n >= 64 so the 64-byte block loop (AVX-512
			 * where the CPU has it) is reached */
			static struct btr_pt_cpkt cp[80];
			uint64_t base = 0;
			r = btr_pt_pkt_next_compact(&d, cp, 80, &base);
			for (int i = 0; i < r; i++) {
				struct btr_pt_packet x;
				if (btr_pt_cpkt_expand(&cp[i], base, &x))
					abort();
				add(out, 0, x.offset, &x);
			}
			if (r > 0)
				continue;
		} else if (batch) {
			r = btr_pt_pkt_next_batch(&d, pk, 7);
			for (int i = 0; i < r; i++) {
				char text[128];
				add(out, 0, pk[i].offset, &pk[i]);
				if (btr_pt_pkt_format(&pk[i], text, sizeof(text)) >= (int)sizeof(text))
					abort();
			}
			if (r > 0)
				continue;
		} else {
			r = btr_pt_pkt_next(&d, &pk[0]);
			if (r > 0) {
				char text[128];
				if (r != pk[0].size)
					abort();
				add(out, 0, pk[0].offset, &pk[0]);
				if (btr_pt_pkt_format(&pk[0], text, sizeof(text)) >= (int)sizeof(text))
					abort();
				continue;
			}
		}
		if (r == -BTR_ERR_BAD_PACKET) {
			add(out, r, btr_pt_pkt_offset(&d), NULL);
			if (btr_pt_pkt_sync_forward(&d) == 0)
				continue;
		} else if (r != -BTR_ERR_EOS && r != -BTR_ERR_AGAIN) {
			abort();
		}
		if (ci + 1 >= ncuts)
			break;
		start = cuts[ci++];
		if (btr_pt_pkt_feed(&d, data + start, cuts[ci] - start))
			abort();
	}
	/* the end: a cut packet is reported at its offset */
	add(out, btr_pt_pkt_end(&d), btr_pt_pkt_offset(&d), NULL);
}

static int same(const struct evs *a, const struct evs *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		const struct ev *x = &a->v[i], *y = &b->v[i];
		if (x->err != y->err || x->off != y->off || memcmp(&x->p, &y->p, sizeof(x->p)))
			return 0;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct evs whole, split, batch, compact;
	uint64_t h = 1469598103934665603ull;
	size_t cuts[3];

	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 1099511628211ull;
	cuts[0] = size;
	run(data, size, cuts, 1, 0, &whole);

	/* two random cut points */
	size_t c1 = size ? (size_t)(h % (size + 1)) : 0, c2 = size ? (size_t)((h >> 32) % (size + 1)) : 0;
	if (c1 > c2) {
		size_t t = c1; c1 = c2; c2 = t;
	}
	cuts[0] = c1, cuts[1] = c2, cuts[2] = size;
	run(data, size, cuts, 3, 0, &split);
	if (!same(&whole, &split))
		abort();
	cuts[0] = size;
	run(data, size, cuts, 1, 1, &batch);
	if (!same(&whole, &batch))
		abort();
	run(data, size, cuts, 1, 2, &compact);
	if (!same(&whole, &compact))
		abort();
	cuts[0] = c1, cuts[1] = c2, cuts[2] = size;
	run(data, size, cuts, 3, 2, &compact);
	if (!same(&whole, &compact))
		abort();

	/* Round trip: every decoded packet re-encodes to the same bytes,
	 * except where reserved bits were set in the input. */
	{
		struct btr_pt_encoder e;
		uint8_t out[32];
		for (size_t i = 0; i < whole.n; i++) {
			const struct ev *x = &whole.v[i];
			if (x->err || x->p.type == BTR_PT_INVALID)
				continue;
			btr_pt_enc_init(&e, out, sizeof(out));
			int r = btr_pt_enc_packet(&e, &x->p);
			/* CYC may have been encoded with needless extension bytes */
			if (r <= 0 || (r != x->p.size && x->p.type != BTR_PT_CYC))
				abort();
		}
	}
	return 0;
}
