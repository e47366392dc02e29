/* btr/diff.h - what differs between two runs: blocks and edges only in
 * one, and those whose counts changed most, by module-relative address
 * (modules matched by base name, so two runs of a PIE, or of copies of a
 * program in different directories, compare).  docs/diff.md. */
#ifndef BTR_DIFF_H
#define BTR_DIFF_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/blocks.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_diff_item {
	const char *module;      /* base name (owned by the A or B result) */
	uint64_t start, end;     /* block: first and last instruction; edge:
				  * from, to (to in @to_module) */
	const char *to_module;   /* edges: the target's module (base name) or NULL */
	uint64_t count_a, count_b;
	int64_t delta;           /* count_b - count_a */
	uint8_t taken;           /* edges */
};

struct btr_diff {
	struct btr_diff_item *blocks_only_a; size_t n_blocks_only_a;   /* by module, start */
	struct btr_diff_item *blocks_only_b; size_t n_blocks_only_b;
	struct btr_diff_item *blocks_changed; size_t n_blocks_changed; /* in both, counts
									* differ; largest |delta| first */
	struct btr_diff_item *edges_only_a; size_t n_edges_only_a;
	struct btr_diff_item *edges_only_b; size_t n_edges_only_b;
	size_t n_blocks_same;    /* in both with equal counts */
};

/* Compares results @a and @b (borrowed; must outlive the diff: names
 * point into them).  Returns 0 and *@out (free with btr_diff_free),
 * -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
int btr_diff_compute(const struct btr_blocks_result *a, const struct btr_blocks_result *b,
		     struct btr_diff **out);
void btr_diff_free(struct btr_diff *d);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
