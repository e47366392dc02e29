/* bts.c - Branch Trace Store record decoding (see btr/bts.h). */
#include "btr/bts.h"
#include "btr/image.h"
#include "internal.h"
#include "insn_priv.h"

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
		if (!b.from && !b.to)
			continue;
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
