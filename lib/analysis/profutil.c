/* profutil.c - small helpers of the profile analyses: temporary files, subtree weights, a protobuf writer/reader and gzip (zlib). */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "btr/error.h"
#include "btr/text.h"
#include "profutil.h"

FILE *prof_tmpfile(void)
{
	return tmpfile();
}

uint64_t *prof_subtree(const struct btr_callstack *cs, enum btr_profile_weight w)
{
	size_t n = btr_callstack_nnodes(cs);
	uint64_t *sub = malloc((n ? n : 1) * sizeof(*sub));
	if (!sub)
		return NULL;
	for (size_t i = 0; i < n; i++)
		sub[i] = prof_node_weight(btr_callstack_node(cs, (uint32_t)i), w);
	/* children come after their parents: one backward sweep sums up */
	for (size_t i = n; i-- > 1;)
		sub[btr_callstack_node(cs, (uint32_t)i)->parent] += sub[i];
	return sub;
}

int prof_weight_ok(const struct btr_callstack *cs, enum btr_profile_weight w)
{
	if (w == BTR_PROFILE_TIME && !btr_callstack_has_time(cs))
		return -BTR_ERR_UNSUPPORTED;
	return 0;
}

const char *prof_unit(const struct btr_callstack *cs, enum btr_profile_weight w)
{
	if (w == BTR_PROFILE_TIME)
		return "ticks";
	return btr_callstack_has_insns(cs) ? "instructions" : "branches";
}

/* ---- protobuf ---- */
void pb_free(struct pbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void pb_raw(struct pbuf *b, const void *data, size_t n)
{
	if (b->nomem)
		return;
	if (b->len + n > b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 256;
		while (nc < b->len + n)
			nc *= 2;
		uint8_t *q = realloc(b->p, nc);
		if (!q) {
			b->nomem = 1;
			return;
		}
		b->p = q;
		b->cap = nc;
	}
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
}

void pb_varint(struct pbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;
	do {
		tmp[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			tmp[n] |= 0x80;
		n++;
	} while (v);
	pb_raw(b, tmp, n);
}

void pb_tag(struct pbuf *b, unsigned field, unsigned wt)
{
	pb_varint(b, (uint64_t)field << 3 | wt);
}

void pb_uint(struct pbuf *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_tag(b, field, 0);
	pb_varint(b, v);
}

void pb_uint_always(struct pbuf *b, unsigned field, uint64_t v)
{
	pb_tag(b, field, 0);
	pb_varint(b, v);
}

void pb_sint(struct pbuf *b, unsigned field, int64_t v)
{
	if (!v)
		return;
	pb_tag(b, field, 0);
	pb_varint(b, (uint64_t)v);
}

void pb_bytes(struct pbuf *b, unsigned field, const void *data, size_t n)
{
	pb_tag(b, field, 2);
	pb_varint(b, n);
	pb_raw(b, data, n);
}

void pb_str(struct pbuf *b, unsigned field, const char *s)
{
	pb_bytes(b, field, s, strlen(s));
}

void pb_msg(struct pbuf *b, unsigned field, const struct pbuf *m)
{
	if (m->nomem)
		b->nomem = 1;
	pb_bytes(b, field, m->p, m->len);
}

static int pbr_varint(struct pbr *r, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned s = 0; s < 64; s += 7) {
		if (r->p >= r->end)
			return -1;
		uint8_t c = *r->p++;
		x |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

int pbr_next(struct pbr *r, unsigned *field, unsigned *wt, uint64_t *v, const uint8_t **data, size_t *n)
{
	uint64_t key;
	if (r->p >= r->end)
		return 0;
	if (pbr_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		goto bad;
	*field = (unsigned)(key >> 3);
	*wt = (unsigned)(key & 7);
	*v = 0;
	*data = NULL;
	*n = 0;
	switch (*wt) {
	case 0:
		if (pbr_varint(r, v))
			goto bad;
		return 1;
	case 1:
		if (r->end - r->p < 8)
			goto bad;
		memcpy(v, r->p, 8);
		r->p += 8;
		return 1;
	case 5: {
		uint32_t x;
		if (r->end - r->p < 4)
			goto bad;
		memcpy(&x, r->p, 4);
		*v = x;
		r->p += 4;
		return 1;
	}
	case 2: {
		uint64_t len;
		if (pbr_varint(r, &len) || len > (uint64_t)(r->end - r->p))
			goto bad;
		*data = r->p;
		*n = (size_t)len;
		r->p += len;
		return 1;
	}
	default:
		goto bad;
	}
bad:
	r->bad = 1;
	return -1;
}

void pbr_fields(const uint8_t *data, size_t n, uint64_t *out, unsigned nout)
{
	struct pbr q = { data, data + n, 0 };
	unsigned f, wt;
	uint64_t v;
	const uint8_t *d;
	size_t dn;
	memset(out, 0, nout * sizeof(*out));
	while (pbr_next(&q, &f, &wt, &v, &d, &dn) > 0)
		if (f >= 1 && f <= nout)
			out[f - 1] = v;
}

/* ---- gzip ---- */
int prof_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outn)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -BTR_ERR_COMPRESS;
	size_t cap = deflateBound(&z, (uLong)n) + 64;
	uint8_t *buf = malloc(cap);
	if (!buf) {
		deflateEnd(&z);
		return -BTR_ERR_NOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = buf;
	z.avail_out = (uInt)cap;
	int rc = deflate(&z, Z_FINISH);
	size_t len = cap - z.avail_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -BTR_ERR_COMPRESS;
	}
	*out = buf;
	*outn = len;
	return 0;
}

int prof_gunzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outn)
{
	if (n < 2 || in[0] != 0x1f || in[1] != 0x8b) {
		uint8_t *c = malloc(n ? n : 1);
		if (!c)
			return -BTR_ERR_NOMEM;
		memcpy(c, in, n);
		*out = c;
		*outn = n;
		return 0;
	}
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return -BTR_ERR_COMPRESS;
	size_t cap = n * 4 + 1024, len = 0;
	uint8_t *buf = malloc(cap);
	if (!buf) {
		inflateEnd(&z);
		return -BTR_ERR_NOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	int rc;
	do {
		if (len == cap) {
			uint8_t *q = realloc(buf, cap * 2);
			if (!q) {
				free(buf);
				inflateEnd(&z);
				return -BTR_ERR_NOMEM;
			}
			buf = q;
			cap *= 2;
		}
		z.next_out = buf + len;
		z.avail_out = (uInt)(cap - len);
		rc = inflate(&z, Z_NO_FLUSH);
		len = cap - z.avail_out;
	} while (rc == Z_OK);
	inflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -BTR_ERR_COMPRESS;
	}
	*out = buf;
	*outn = len;
	return 0;
}

int prof_is_program(const char *path)
{
	size_t l = path ? strlen(path) : 0;
	return l && path[0] == '/' && !(l > 3 && !strcmp(path + l - 3, ".ko"));
}
