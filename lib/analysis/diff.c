/* diff.c - blocks and edges that differ between two blocks results
 * (btr/diff.h).  Both results are sorted by (module index, address); the
 * module indices of two runs differ, so items are re-keyed by module base
 * name, sorted again and merged. */
#include "btr/diff.h"
#include "btr/error.h"

#include <stdlib.h>
#include <string.h>

struct item {
	const char *mod, *to_mod;
	uint64_t a, b;
	uint64_t count;
	uint8_t taken;
};

static const char *mname(const struct btr_blocks_result *r, uint32_t m)
{
	return m == BTR_BLOCKS_NO_MODULE || m >= r->n_modules ? "" : r->modules[m].name;
}

static int cmp_item(const void *x, const void *y)
{
	const struct item *p = x, *q = y;
	int c = strcmp(p->mod, q->mod);
	if (c)
		return c;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	c = strcmp(p->to_mod ? p->to_mod : "", q->to_mod ? q->to_mod : "");
	if (c)
		return c;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	return p->taken < q->taken ? -1 : p->taken > q->taken;
}

static struct item *items(const struct btr_blocks_result *r, int edges, size_t *n)
{
	*n = edges ? r->n_edges : r->n_blocks;
	struct item *v = calloc(*n + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < *n; i++) {
		if (edges) {
			const struct btr_edge *e = &r->edges[i];
			v[i] = (struct item){ mname(r, e->from_module), mname(r, e->to_module), e->from, e->to,
					      e->count, e->taken };
		} else {
			const struct btr_block *b = &r->blocks[i];
			v[i] = (struct item){ mname(r, b->module), NULL, b->start, b->end, b->count, 0 };
		}
	}
	qsort(v, *n, sizeof(*v), cmp_item);
	return v;
}

struct vec {
	struct btr_diff_item *v;
	size_t n, cap;
};

static int push(struct vec *x, const struct item *it, uint64_t ca, uint64_t cb)
{
	if (x->n == x->cap) {
		size_t ncap = x->cap ? x->cap * 2 : 64;
		struct btr_diff_item *nv = realloc(x->v, ncap * sizeof(*nv));
		if (!nv)
			return -1;
		x->v = nv;
		x->cap = ncap;
	}
	x->v[x->n++] = (struct btr_diff_item){ it->mod, it->a, it->b, it->to_mod, ca, cb,
					       (int64_t)(cb - ca), it->taken };
	return 0;
}

static int cmp_delta(const void *x, const void *y)
{
	const struct btr_diff_item *p = x, *q = y;
	uint64_t dp = (uint64_t)(p->delta < 0 ? -p->delta : p->delta);
	uint64_t dq = (uint64_t)(q->delta < 0 ? -q->delta : q->delta);
	if (dp != dq)
		return dp > dq ? -1 : 1;
	int c = strcmp(p->module, q->module);
	return c ? c : p->start < q->start ? -1 : p->start > q->start;
}

static int merge(const struct btr_blocks_result *a, const struct btr_blocks_result *b, int edges,
		 struct vec *only_a, struct vec *only_b, struct vec *changed, size_t *same)
{
	size_t na, nb;
	struct item *va = items(a, edges, &na), *vb = items(b, edges, &nb);
	int err = -BTR_ERR_NOMEM;
	if (!va || !vb)
		goto out;
	size_t i = 0, j = 0;
	while (i < na || j < nb) {
		int c = i == na ? 1 : j == nb ? -1 : cmp_item(&va[i], &vb[j]);
		if (c < 0) {
			if (push(only_a, &va[i], va[i].count, 0))
				goto out;
			i++;
		} else if (c > 0) {
			if (push(only_b, &vb[j], 0, vb[j].count))
				goto out;
			j++;
		} else {
			if (va[i].count != vb[j].count) {
				if (changed && push(changed, &va[i], va[i].count, vb[j].count))
					goto out;
			} else if (same) {
				(*same)++;
			}
			i++;
			j++;
		}
	}
	err = 0;
out:
	free(va);
	free(vb);
	return err;
}

int btr_diff_compute(const struct btr_blocks_result *a, const struct btr_blocks_result *b,
		     struct btr_diff **out)
{
	if (!a || !b || !out)
		return -BTR_ERR_INVAL;
	struct btr_diff *d = calloc(1, sizeof(*d));
	if (!d)
		return -BTR_ERR_NOMEM;
	struct vec boa = { 0 }, bob = { 0 }, bc = { 0 }, eoa = { 0 }, eob = { 0 };
	int rc = merge(a, b, 0, &boa, &bob, &bc, &d->n_blocks_same);
	if (!rc)
		rc = merge(a, b, 1, &eoa, &eob, NULL, NULL);
	if (bc.n)
		qsort(bc.v, bc.n, sizeof(*bc.v), cmp_delta);
	d->blocks_only_a = boa.v;
	d->n_blocks_only_a = boa.n;
	d->blocks_only_b = bob.v;
	d->n_blocks_only_b = bob.n;
	d->blocks_changed = bc.v;
	d->n_blocks_changed = bc.n;
	d->edges_only_a = eoa.v;
	d->n_edges_only_a = eoa.n;
	d->edges_only_b = eob.v;
	d->n_edges_only_b = eob.n;
	if (rc) {
		btr_diff_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void btr_diff_free(struct btr_diff *d)
{
	if (!d)
		return;
	free(d->blocks_only_a);
	free(d->blocks_only_b);
	free(d->blocks_changed);
	free(d->edges_only_a);
	free(d->edges_only_b);
	free(d);
}
