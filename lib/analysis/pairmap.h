/* pairmap.h - a small open-addressing hash map from a pair of 64-bit keys
 * to a 32-bit value, shared by the analyses (private to lib/analysis/).
 *
 * Why its own header: call stacks, check and others key tables by
 * (address, process) or (from, to) pairs; one careful implementation
 * (linear probing, power-of-two capacity, grown at half load) serves
 * them all.  Values are stored + 1 so that 0 marks an empty slot; a map
 * is zero-initialized and freed with pairmap_clear. */
#ifndef BTR_PAIRMAP_H
#define BTR_PAIRMAP_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "btr/error.h"

struct pairmap_ent {
	uint64_t a, b;
	uint32_t v;   /* 0: empty slot; stored value + 1 */
};

struct pairmap {
	struct pairmap_ent *t;
	size_t cap, n;   /* cap is 0 or a power of two */
};

static inline size_t pairmap_hash(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ (h >> 29));
}

/* Returns 1 and the value in *@v if (@a, @b) is present, else 0. */
static inline int pairmap_get(const struct pairmap *m, uint64_t a, uint64_t b, uint32_t *v)
{
	if (!m->cap)
		return 0;
	for (size_t i = pairmap_hash(a, b) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		const struct pairmap_ent *e = &m->t[i];
		if (!e->v)
			return 0;
		if (e->a == a && e->b == b) {
			*v = e->v - 1;
			return 1;
		}
	}
}

/* Sets (@a, @b) to @v (< UINT32_MAX).  Returns 0 or -BTR_ERR_NOMEM (the
 * map is then unchanged). */
static inline int pairmap_put(struct pairmap *m, uint64_t a, uint64_t b, uint32_t v)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 256;
		struct pairmap_ent *nt = calloc(nc, sizeof(*nt));
		if (!nt)
			return -BTR_ERR_NOMEM;
		for (size_t i = 0; i < m->cap; i++) {
			const struct pairmap_ent *e = &m->t[i];
			if (!e->v)
				continue;
			size_t j = pairmap_hash(e->a, e->b) & (nc - 1);
			while (nt[j].v)
				j = (j + 1) & (nc - 1);
			nt[j] = *e;
		}
		free(m->t);
		m->t = nt;
		m->cap = nc;
	}
	size_t i = pairmap_hash(a, b) & (m->cap - 1);
	while (m->t[i].v && !(m->t[i].a == a && m->t[i].b == b))
		i = (i + 1) & (m->cap - 1);
	if (!m->t[i].v)
		m->n++;
	m->t[i] = (struct pairmap_ent){ a, b, v + 1 };
	return 0;
}

/* Frees the table; the map is empty and reusable afterwards. */
static inline void pairmap_clear(struct pairmap *m)
{
	free(m->t);
	memset(m, 0, sizeof(*m));
}

/* FNV-1a of string @s: for maps keyed by a string, as (hash, probe) pairs
 * whose values index the strings (compared on a hit). */
static inline uint64_t pairmap_str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

#endif
