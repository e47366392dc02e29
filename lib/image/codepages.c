/* codepages.c - see codepages.h.  An open-addressing table of pages, each
 * with its bytes and a bitmap of the known ones. */
#include "codepages.h"

#include <stdlib.h>
#include <string.h>

#include "btr/error.h"

struct cpage {
	uint64_t page;                       /* address / CODEPAGE_SIZE */
	uint64_t known[CODEPAGE_SIZE / 64];  /* bit i: byte i is known */
	uint8_t bytes[CODEPAGE_SIZE];
};

struct codepages {
	struct cpage **tab;                  /* power of two slots */
	size_t cap, n;
};

int codepages_new(struct codepages **out)
{
	struct codepages *cp = calloc(1, sizeof(*cp));
	if (!cp)
		return -BTR_ERR_NOMEM;
	*out = cp;
	return 0;
}

void codepages_free(struct codepages *cp)
{
	if (!cp)
		return;
	for (size_t i = 0; i < cp->cap; i++)
		free(cp->tab[i]);
	free(cp->tab);
	free(cp);
}

size_t codepages_count(const struct codepages *cp)
{
	return cp ? cp->n : 0;
}

static size_t slot_of(uint64_t page, size_t cap)
{
	return (size_t)((page * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static struct cpage *find(const struct codepages *cp, uint64_t page)
{
	if (!cp->cap)
		return NULL;
	for (size_t i = slot_of(page, cp->cap);; i = (i + 1) & (cp->cap - 1)) {
		struct cpage *p = cp->tab[i];
		if (!p || p->page == page)
			return p;
	}
}

static int grow(struct codepages *cp)
{
	size_t nc = cp->cap ? cp->cap * 2 : 64;
	struct cpage **nt = calloc(nc, sizeof(*nt));
	if (!nt)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < cp->cap; i++) {
		struct cpage *p = cp->tab[i];
		if (!p)
			continue;
		size_t j = slot_of(p->page, nc);
		while (nt[j])
			j = (j + 1) & (nc - 1);
		nt[j] = p;
	}
	free(cp->tab);
	cp->tab = nt;
	cp->cap = nc;
	return 0;
}

static struct cpage *get(struct codepages *cp, uint64_t page)
{
	struct cpage *p = find(cp, page);
	if (p)
		return p;
	if ((cp->n + 1) * 4 > cp->cap * 3 && grow(cp) < 0)
		return NULL;
	if (!(p = calloc(1, sizeof(*p))))
		return NULL;
	p->page = page;
	size_t i = slot_of(page, cp->cap);
	while (cp->tab[i])
		i = (i + 1) & (cp->cap - 1);
	cp->tab[i] = p;
	cp->n++;
	return p;
}

static int known(const struct cpage *p, unsigned i)
{
	return (int)(p->known[i / 64] >> (i % 64)) & 1;
}

/* Bytes from @a to the end of its page or to @end, whichever is first. */
static uint64_t piece(uint64_t a, uint64_t end)
{
	uint64_t n = CODEPAGE_SIZE - a % CODEPAGE_SIZE;
	return n < end - a ? n : end - a;
}

int codepages_same(const struct codepages *cp, uint64_t addr, const uint8_t *bytes, size_t n)
{
	for (uint64_t a = addr, end = addr + n, len; a < end; a += len) {
		len = piece(a, end);
		uint64_t off = a % CODEPAGE_SIZE;
		const struct cpage *p = find(cp, a / CODEPAGE_SIZE);
		if (!p || memcmp(p->bytes + off, bytes + (a - addr), len))
			return 0;
		for (uint64_t i = off; i < off + len; i++)
			if (!known(p, (unsigned)i))
				return 0;
	}
	return 1;
}

int codepages_put(struct codepages *cp, uint64_t addr, const uint8_t *bytes, size_t n)
{
	/* Allocate every page first: all or nothing. */
	for (uint64_t a = addr, end = addr + n; a < end; a += piece(a, end))
		if (!get(cp, a / CODEPAGE_SIZE))
			return -BTR_ERR_NOMEM;
	for (uint64_t a = addr, end = addr + n, len; a < end; a += len) {
		len = piece(a, end);
		uint64_t off = a % CODEPAGE_SIZE;
		struct cpage *p = find(cp, a / CODEPAGE_SIZE);
		memcpy(p->bytes + off, bytes + (a - addr), len);
		for (uint64_t i = off; i < off + len; i++)
			p->known[i / 64] |= 1ull << (i % 64);
	}
	return 0;
}

void codepages_drop(struct codepages *cp, uint64_t lo, uint64_t hi)
{
	if (hi <= lo || !cp->n)
		return;
	/* A large range (munmap of a big mapping): walk the pages held. */
	if ((hi - lo) / CODEPAGE_SIZE > cp->n) {
		for (size_t k = 0; k < cp->cap; k++) {
			struct cpage *p = cp->tab[k];
			uint64_t a = p ? p->page * CODEPAGE_SIZE : 0;
			if (!p || a + CODEPAGE_SIZE <= lo || a >= hi)
				continue;
			for (unsigned i = 0; i < CODEPAGE_SIZE; i++)
				if (a + i >= lo && a + i < hi)
					p->known[i / 64] &= ~(1ull << (i % 64));
		}
		return;
	}
	for (uint64_t a = lo, len; a < hi; a += len) {
		len = piece(a, hi);
		uint64_t off = a % CODEPAGE_SIZE;
		struct cpage *p = find(cp, a / CODEPAGE_SIZE);
		for (uint64_t i = off; p && i < off + len; i++)
			p->known[i / 64] &= ~(1ull << (i % 64));
	}
}

const uint8_t *codepages_run(const struct codepages *cp, uint64_t addr, uint64_t *lo, uint64_t *hi)
{
	const struct cpage *p = find(cp, addr / CODEPAGE_SIZE);
	unsigned i = (unsigned)(addr % CODEPAGE_SIZE), a = i, b = i;
	if (!p || !known(p, i))
		return NULL;
	while (a > 0 && known(p, a - 1))
		a--;
	while (b + 1 < CODEPAGE_SIZE && known(p, b + 1))
		b++;
	*lo = p->page * CODEPAGE_SIZE + a;
	*hi = p->page * CODEPAGE_SIZE + b + 1;
	return p->bytes + a;
}

int codepages_foreach(const struct codepages *cp, int (*cb)(void *ctx, uint64_t addr, const uint8_t *bytes, size_t n),
		      void *ctx)
{
	for (size_t k = 0; k < cp->cap; k++) {
		const struct cpage *p = cp->tab[k];
		for (unsigned i = 0; p && i < CODEPAGE_SIZE;) {
			if (!known(p, i)) {
				i++;
				continue;
			}
			unsigned j = i;
			while (j < CODEPAGE_SIZE && known(p, j))
				j++;
			int rc = cb(ctx, p->page * CODEPAGE_SIZE + i, p->bytes + i, j - i);
			if (rc)
				return rc;
			i = j;
		}
	}
	return 0;
}

/* ---- code versions by content ---- */

struct blob {
	uint64_t hash;
	size_t size;
	uint8_t *bytes;     /* NULL: an empty slot */
};

struct codeblobs {
	struct blob *tab;   /* open addressing, power of two */
	size_t cap, n;
};

int codeblobs_new(struct codeblobs **out)
{
	return (*out = calloc(1, sizeof(**out))) ? 0 : -BTR_ERR_NOMEM;
}

void codeblobs_free(struct codeblobs *cb)
{
	if (!cb)
		return;
	for (size_t i = 0; i < cb->cap; i++)
		free(cb->tab[i].bytes);
	free(cb->tab);
	free(cb);
}

uint64_t codeblobs_hash(const uint8_t *bytes, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ bytes[i]) * 0x100000001b3ull;
	return h;
}

static size_t blob_slot(const struct codeblobs *cb, uint64_t hash, size_t size)
{
	size_t i = (size_t)(((hash ^ size) * 0x9e3779b97f4a7c15ull) >> 17) & (cb->cap - 1);
	while (cb->tab[i].bytes && (cb->tab[i].hash != hash || cb->tab[i].size != size))
		i = (i + 1) & (cb->cap - 1);
	return i;
}

const uint8_t *codeblobs_get(const struct codeblobs *cb, uint64_t hash, size_t size)
{
	return cb->cap ? cb->tab[blob_slot(cb, hash, size)].bytes : NULL;
}

int codeblobs_put(struct codeblobs *cb, uint64_t hash, size_t size, const uint8_t *bytes)
{
	if ((cb->n + 1) * 4 > cb->cap * 3) {
		size_t oc = cb->cap, nc = oc ? 2 * oc : 256;
		struct blob *old = cb->tab, *nt = calloc(nc, sizeof(*nt));
		if (!nt)
			return -BTR_ERR_NOMEM;
		cb->tab = nt;
		cb->cap = nc;
		for (size_t i = 0; i < oc; i++)
			if (old[i].bytes)
				cb->tab[blob_slot(cb, old[i].hash, old[i].size)] = old[i];
		free(old);
	}
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		return -BTR_ERR_NOMEM;
	memcpy(copy, bytes, size);
	struct blob *b = &cb->tab[blob_slot(cb, hash, size)];
	if (b->bytes)
		free(b->bytes);
	else
		cb->n++;
	*b = (struct blob){ hash, size, copy };
	return 0;
}
