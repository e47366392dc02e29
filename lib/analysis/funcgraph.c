/* funcgraph.c - one function's control-flow graph from its code, with the
 * counts of a blocks analysis (btr/blocks.h: btr_funcgraph_build).
 *
 * Why from the code and not only from the executed edges: a CFG that
 * shows what never ran (greyed) is the point of coverage views.  The
 * function's bytes come from the module's ELF (at link addresses), so the
 * graph is the same whatever the trace's address-space layout was.
 *
 * Leaders (block starts): the entry, every direct branch target inside
 * the function, every instruction after a branch, and every executed
 * block start and edge target inside it (indirect jumps through jump
 * tables land there: the trace knows where they went).  Calls end blocks
 * like every branch, as in the trace's blocks; their return is the
 * fall-through edge.  Returns always leave the function: one that lands
 * inside it (the return of a recursive call) is not an edge to the block
 * after that call, which its call's fall-through already enters.
 */
#include "btr/blocks.h"
#include "btr/error.h"
#include "btr/insn.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_FUNC_BYTES (4u << 20)

static int is_branch(uint8_t kind)
{
	return kind != BTR_KIND_NONE;
}

/* Index of the instruction at @addr, or -1. */
static long insn_at(const struct btr_funcgraph *g, uint64_t addr)
{
	size_t lo = 0, hi = g->n_insns;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g->insns[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < g->n_insns && g->insns[lo].addr == addr ? (long)lo : -1;
}

/* Index of the block whose first instruction is @addr, or BTR_FG_OUTSIDE. */
static size_t block_at(const struct btr_funcgraph *g, uint64_t addr)
{
	size_t lo = 0, hi = g->n_blocks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g->blocks[mid].start < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < g->n_blocks && g->blocks[lo].start == addr ? lo : BTR_FG_OUTSIDE;
}

static int add_edge(struct btr_funcgraph *g, size_t *cap, struct btr_fg_edge e)
{
	if (g->n_edges == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct btr_fg_edge *ne = realloc(g->edges, ncap * sizeof(*ne));
		if (!ne)
			return -BTR_ERR_NOMEM;
		g->edges = ne;
		*cap = ncap;
	}
	g->edges[g->n_edges++] = e;
	return 0;
}

static int build(struct btr_analysis *a, const struct btr_blocks_result *r, uint32_t module,
		 struct btr_image *img, const struct btr_function *fn, struct btr_funcgraph **out)
{
	if (fn->end <= fn->start || fn->end - fn->start > MAX_FUNC_BYTES)
		return -BTR_ERR_INVAL;
	struct btr_funcgraph *g = calloc(1, sizeof(*g));
	size_t span = (size_t)(fn->end - fn->start);
	uint8_t *leader = calloc(span + 1, 1);
	if (!g || !leader) {
		free(g);
		free(leader);
		return -BTR_ERR_NOMEM;
	}
	g->fn = *fn;
	g->module = module;
	g->module_name = r->modules[module].name;
	int err = -BTR_ERR_NOMEM;
	size_t cap = 0;
	/* Decode linearly; bytes that do not decode become 1-byte "(bad)". */
	for (uint64_t ip = fn->start; ip < fn->end;) {
		if (g->n_insns == cap) {
			cap = cap ? cap * 2 : 256;
			struct btr_fg_insn *ni = realloc(g->insns, cap * sizeof(*ni));
			if (!ni)
				goto fail;
			g->insns = ni;
		}
		struct btr_fg_insn *x = &g->insns[g->n_insns++];
		memset(x, 0, sizeof(*x));
		x->addr = ip;
		struct btr_insn in;
		uint8_t bytes[16];
		int nb = btr_image_read(img, ip, bytes, sizeof(bytes));
		if (nb > 0 && btr_insn_decode(bytes, (size_t)nb, ip, BTR_MODE_64, &in) > 0) {
			x->len = in.len;
			x->kind = in.kind;
			x->target = (in.flags & BTR_INSN_DIRECT) ? in.target : 0;
			btr_insn_format(bytes, (size_t)nb, ip, BTR_MODE_64, x->text, sizeof(x->text));
			if (is_branch(in.kind) || (in.flags & BTR_INSN_STOPS))
				leader[ip + in.len - fn->start] = 1;
			if (x->target >= fn->start && x->target < fn->end)
				leader[x->target - fn->start] = 1;
		} else {
			x->len = 1;
			snprintf(x->text, sizeof(x->text), "(bad)");
		}
		const char *file;
		int line;
		if (btr_image_line(img, ip, &file, &line) == 0) {
			x->file = file;
			x->line = line;
		}
		ip += x->len;
	}
	leader[0] = 1;
	/* Counts: executed blocks starting in the function add to each of
	 * their instructions; edges from its instructions give directions. */
	for (size_t i = btr_blocks_lower_bound(r, module, fn->start);
	     i < r->n_blocks && r->blocks[i].module == module && r->blocks[i].start < fn->end; i++) {
		const struct btr_block *b = &r->blocks[i];
		long k = insn_at(g, b->start);
		if (k < 0)
			continue;   /* not on our decoding's instruction boundary */
		leader[b->start - fn->start] = 1;
		for (size_t j = (size_t)k; j < g->n_insns && g->insns[j].addr <= b->end; j++)
			g->insns[j].count += b->count;
	}
	for (size_t i = btr_edges_lower_bound(r, module, fn->start);
	     i < r->n_edges && r->edges[i].from_module == module && r->edges[i].from < fn->end; i++) {
		const struct btr_edge *e = &r->edges[i];
		long k = insn_at(g, e->from);
		if (k < 0)
			continue;
		if (e->taken)
			g->insns[k].taken += e->count;
		else
			g->insns[k].not_taken += e->count;
		if (e->to_module == module && e->to >= fn->start && e->to < fn->end && insn_at(g, e->to) >= 0)
			leader[e->to - fn->start] = 1;
	}
	/* Blocks. */
	size_t bcap = 0;
	for (size_t i = 0; i < g->n_insns; i++) {
		if (!leader[g->insns[i].addr - fn->start] && i > 0) {
			struct btr_fg_block *b = &g->blocks[g->n_blocks - 1];
			b->n++;
			b->end = g->insns[i].addr;
			continue;
		}
		if (g->n_blocks == bcap) {
			bcap = bcap ? bcap * 2 : 64;
			struct btr_fg_block *nb = realloc(g->blocks, bcap * sizeof(*nb));
			if (!nb)
				goto fail;
			g->blocks = nb;
		}
		struct btr_fg_block *b = &g->blocks[g->n_blocks++];
		*b = (struct btr_fg_block){ .start = g->insns[i].addr, .end = g->insns[i].addr, .first = i,
					    .n = 1, .count = g->insns[i].count, .file = g->insns[i].file,
					    .line = g->insns[i].line };
		if (b->count > g->max_count)
			g->max_count = b->count;
	}
	if (g->n_blocks)
		g->entries = g->blocks[0].count;
	/* Edges. */
	size_t ecap = 0;
	for (size_t bi = 0; bi < g->n_blocks; bi++) {
		const struct btr_fg_block *b = &g->blocks[bi];
		const struct btr_fg_insn *last = &g->insns[b->first + b->n - 1];
		uint64_t next = last->addr + last->len;
		size_t nexti = bi + 1 < g->n_blocks && g->blocks[bi + 1].start == next ? bi + 1 : BTR_FG_OUTSIDE;
		int cond = btr_branch_kind_class((enum btr_branch_kind)last->kind) == BTR_LBR_JCC;
		int call = last->kind == BTR_KIND_CALL || last->kind == BTR_KIND_CALL_IND;
		int falls = !is_branch(last->kind) || cond || call;
		int ret = last->kind == BTR_KIND_RET || last->kind == BTR_KIND_IRET || last->kind == BTR_KIND_SYSRET;
		if (is_branch(last->kind) && !call) {
			/* Dynamic edges from the branch (taken ones). */
			int have_static = 0;
			uint64_t out_count = 0, out_addr = 0;
			int n_out = 0;
			for (size_t i = btr_edges_lower_bound(r, module, last->addr);
			     i < r->n_edges && r->edges[i].from_module == module && r->edges[i].from == last->addr;
			     i++) {
				const struct btr_edge *e = &r->edges[i];
				if (!e->taken)
					continue;
				/* A return leaves the function even when it lands
				 * inside it (after a recursive call): that block is
				 * entered from its call's fall-through edge. */
				size_t to = e->to_module == module && !ret ? block_at(g, e->to) : BTR_FG_OUTSIDE;
				if (to == BTR_FG_OUTSIDE) {
					out_count += e->count;
					out_addr = e->to_module == module ? e->to : 0;
					n_out++;
					continue;
				}
				if (last->target && e->to == last->target)
					have_static = 1;
				if (add_edge(g, &ecap, (struct btr_fg_edge){ bi, to, e->to, e->count, last->kind, 1 }) < 0)
					goto fail;
			}
			if (n_out && add_edge(g, &ecap, (struct btr_fg_edge){ bi, BTR_FG_OUTSIDE,
					n_out == 1 ? out_addr : 0, out_count, last->kind, 1 }) < 0)
				goto fail;
			/* The direct target, even if never taken. */
			if (last->target && !have_static && last->target >= fn->start && last->target < fn->end) {
				size_t to = block_at(g, last->target);
				if (to != BTR_FG_OUTSIDE &&
				    add_edge(g, &ecap, (struct btr_fg_edge){ bi, to, last->target, 0, last->kind, 1 }) < 0)
					goto fail;
			} else if (last->target && !n_out && (last->target < fn->start || last->target >= fn->end)) {
				if (add_edge(g, &ecap, (struct btr_fg_edge){ bi, BTR_FG_OUTSIDE, last->target, 0,
									    last->kind, 1 }) < 0)
					goto fail;
			}
		}
		if (falls && nexti != BTR_FG_OUTSIDE) {
			/* Not-taken conditionals: the recorded count; calls and
			 * plain instructions: every execution goes on. */
			uint64_t c = cond ? last->not_taken : last->count;
			if (add_edge(g, &ecap, (struct btr_fg_edge){ bi, nexti, next, c,
					cond ? last->kind : BTR_KIND_NONE, 0 }) < 0)
				goto fail;
		}
	}
	free(leader);
	*out = g;
	(void)a;
	return 0;
fail:
	free(leader);
	btr_funcgraph_free(g);
	return err;
}

int btr_funcgraph_build_at(struct btr_analysis *a, uint32_t module, uint64_t addr,
			   struct btr_funcgraph **out)
{
	const struct btr_blocks_result *r = btr_blocks_get(a);
	if (!r || !out || module >= r->n_modules)
		return -BTR_ERR_INVAL;
	struct btr_image *img = btr_blocks_module_image(a, module);
	struct btr_function fn;
	if (!img || btr_image_function(img, addr, &fn) != 0)
		return -BTR_ERR_NOT_FOUND;
	return build(a, r, module, img, &fn, out);
}

int btr_funcgraph_build(struct btr_analysis *a, const char *name, struct btr_funcgraph **out)
{
	const struct btr_blocks_result *r = btr_blocks_get(a);
	if (!r || !name || !out)
		return -BTR_ERR_INVAL;
	long first = -1;
	int nomem = 0;
	struct btr_function ffn;
	for (size_t m = 0; m < r->n_modules; m++) {
		struct btr_image *img = btr_blocks_module_image(a, (uint32_t)m);
		struct btr_function fn;
		int e = img ? btr_image_function_by_name(img, name, &fn) : -BTR_ERR_NOT_FOUND;
		nomem |= e == -BTR_ERR_NOMEM;
		if (e != 0)
			continue;
		size_t i = btr_blocks_lower_bound(r, (uint32_t)m, fn.start);
		if (i < r->n_blocks && r->blocks[i].module == m && r->blocks[i].start < fn.end)
			return build(a, r, (uint32_t)m, img, &fn, out);
		if (first < 0) {
			first = (long)m;
			ffn = fn;
		}
	}
	if (first < 0)
		return nomem ? -BTR_ERR_NOMEM : -BTR_ERR_NOT_FOUND;
	return build(a, r, (uint32_t)first, btr_blocks_module_image(a, (uint32_t)first), &ffn, out);
}

void btr_funcgraph_free(struct btr_funcgraph *g)
{
	if (!g)
		return;
	free(g->insns);
	free(g->blocks);
	free(g->edges);
	free(g);
}
