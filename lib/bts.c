/* bts.c - Branch Trace Store record decoding (see btr/bts.h). */
#include "btr/bts.h"
#include "btr/image.h"
#include "internal.h"
#include "image/insn_priv.h"

#include <stdlib.h>
#include <string.h>

/* Explicit little-endian loads: the records are little-endian whatever
 * the host, and may sit at any alignment inside a container chunk. */
static inline uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

void btr_bts_encode(uint64_t from, uint64_t to, int predicted, uint8_t out[BTR_BTS_RECORD_SIZE])
{
	put_le64(out, from);
	put_le64(out + 8, to);
	put_le64(out + 16, predicted ? BTR_BTS_PREDICTED : 0);
}

int btr_bts_decode(const uint8_t *buf, size_t size, const struct btr_image *img, uint32_t tid,
		   btr_branch_fn cb, void *ctx)
{
	size_t nrec = size / BTR_BTS_RECORD_SIZE;
	int delivered = 0;

	if (!cb || (!buf && size))
		return -BTR_ERR_INVAL;

	for (size_t i = 0; i < nrec; i++) {
		const uint8_t *r = buf + i * BTR_BTS_RECORD_SIZE;
		struct btr_branch b;
		int ret;

		memset(&b, 0, sizeof(b));
		b.from = get_le64(r);
		b.to = get_le64(r + 8);
		if (!b.from && (!b.to || (get_le64(r + 16) & (BTR_BTS_SW_PGD | BTR_BTS_SW_PGE))))
			continue;   /* padding, or a marker of software stepping */
		b.tid = tid;
		if (get_le64(r + 16) & BTR_BTS_PREDICTED)
			b.flags |= BTR_BF_PREDICTED;
		btr__classify_taken(img, &b);

		ret = cb(ctx, &b);
		if (delivered < INT32_MAX)
			delivered++;
		if (ret < 0)
			return ret;
		if (ret > 0)
			return delivered;
	}
	if (size % BTR_BTS_RECORD_SIZE) {
		btr_debug("bts: %zu trailing bytes after %zu records", size % BTR_BTS_RECORD_SIZE, nrec);
		return -BTR_ERR_TRUNCATED;
	}
	return delivered;
}

/* ---- instruction counts side stream ---- */

struct btr_bts_insns {
	uint32_t *v;          /* values of records first .. first + n - 1 */
	size_t n, cap, head;  /* v[head .. head + n) are live */
	uint64_t first;       /* record index of v[head] */
	uint64_t next_off;    /* byte offset expected next in the side stream */
	uint8_t carry[4];     /* a value split across records */
	unsigned carry_len;
};

int btr_bts_insns_new(struct btr_bts_insns **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -BTR_ERR_NOMEM;
}

void btr_bts_insns_free(struct btr_bts_insns *q)
{
	if (q) {
		free(q->v);
		free(q);
	}
}

static int insns_push(struct btr_bts_insns *q, uint32_t val)
{
	if (q->head + q->n == q->cap) {
		if (q->head) {
			/* Reuse the consumed front before growing. */
			memmove(q->v, q->v + q->head, q->n * sizeof(*q->v));
			q->head = 0;
		} else {
			size_t ncap = q->cap ? q->cap * 2 : 1024;
			uint32_t *nv = realloc(q->v, ncap * sizeof(*nv));
			if (!nv)
				return -BTR_ERR_NOMEM;
			q->v = nv;
			q->cap = ncap;
		}
	}
	q->v[q->head + q->n++] = val;
	return 0;
}

int btr_bts_insns_add(struct btr_bts_insns *q, uint64_t stream_offset, const uint8_t *data, size_t size)
{
	if (!q || (!data && size))
		return -BTR_ERR_INVAL;
	if (stream_offset != q->next_off || (!q->n && !q->carry_len)) {
		/* A hole (or the start): restart at the first whole value. */
		uint64_t skip = (4 - stream_offset % 4) % 4;
		q->n = q->head = 0;
		q->carry_len = 0;
		q->first = (stream_offset + skip) / 4;
		if (skip > size)
			skip = size;
		data += skip;
		size -= (size_t)skip;
		stream_offset += skip;
	}
	q->next_off = stream_offset + size;
	while (size) {
		q->carry[q->carry_len++] = *data++;
		size--;
		if (q->carry_len == 4) {
			q->carry_len = 0;
			uint32_t val = (uint32_t)q->carry[0] | (uint32_t)q->carry[1] << 8 |
				       (uint32_t)q->carry[2] << 16 | (uint32_t)q->carry[3] << 24;
			if (insns_push(q, val) < 0)
				return -BTR_ERR_NOMEM;
		}
	}
	return 0;
}

int btr_bts_insns_take(struct btr_bts_insns *q, uint64_t index, uint32_t *out)
{
	if (!q || index < q->first)
		return 0;
	uint64_t skip = index - q->first;
	if (skip >= q->n) {
		q->first += q->n;
		q->head = q->n = 0;
		return 0;
	}
	q->head += (size_t)skip;
	q->n -= (size_t)skip;
	q->first = index;
	*out = q->v[q->head];
	return 1;
}
