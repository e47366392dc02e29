/* callgraph.c - the call graph of a trace: per function exclusive and
 * inclusive instructions (or time), calls, callers and callees
 * (btr/profile.h, docs/callgraph.md).
 *
 * Everything comes from the calling-context tree of btr/callstack.h at
 * the end: exclusive = the self cost of the function's paths; inclusive =
 * the subtree cost of its outermost activations only (a recursive
 * function's time is not counted once per level); calls = entries of
 * the function's paths (tail calls included, PLT stubs excluded); an edge
 * caller -> callee counts the callee's entries from that caller.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/callstack.h"
#include "btr/error.h"
#include "btr/text.h"
#include "registry.h"
#include "btr/profile.h"
#include "internal.h"
#include "profutil.h"

struct edge {
	uint32_t from, to;
	uint64_t calls, incl;
};

struct fstat {
	uint64_t self, incl, calls, self_t, incl_t;
};

struct cg {
	struct btr_profile_opts o;
	struct btr_callstack *cs;
	/* results, computed once in end() */
	struct fstat *fs;
	size_t nf;
	struct edge *edges;
	size_t ne;
	uint64_t total, total_t;
	int done;
};

static int c_begin(void *p, struct btr_stream *s)
{
	btr_callstack_begin(((struct cg *)p)->cs, s);
	return 0;
}

static int c_branches(void *p, const struct btr_branch *b, size_t n)
{
	return btr_callstack_branches(((struct cg *)p)->cs, b, n);
}

static int c_fold_ok(void *p, uint32_t tid)
{
	return btr_callstack_fold_ok(((struct cg *)p)->cs, tid);
}

static int c_fold_block(void *p, uint32_t pid, uint64_t start, uint64_t from, uint64_t to)
{
	return btr_callstack_fold_block(((struct cg *)p)->cs, pid, start, from, to);
}

static int c_event(void *p, const struct btr_stream_event *ev)
{
	return btr_callstack_event(((struct cg *)p)->cs, ev);
}

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return x->to < y->to ? -1 : x->to > y->to;
}

/* The statistics from the CCT: an iterative depth-first walk keeping how
 * often each function is on the current path. */
static int compute(struct cg *g)
{
	const struct btr_callstack *cs = g->cs;
	size_t nn = btr_callstack_nnodes(cs), nf = btr_callstack_nfuncs(cs);
	uint64_t *sub = prof_subtree(cs, BTR_PROFILE_INSNS), *subt = prof_subtree(cs, BTR_PROFILE_TIME);
	uint32_t *first = malloc(nn * sizeof(*first)), *next = malloc(nn * sizeof(*next));
	uint32_t *onpath = calloc(nf ? nf : 1, sizeof(*onpath)), *stack = malloc(nn * sizeof(*stack));
	uint8_t *state = calloc(nn, 1);
	g->fs = calloc(nf ? nf : 1, sizeof(*g->fs));
	g->edges = malloc(nn * sizeof(*g->edges));
	int rc = 0;
	if (!sub || !subt || !first || !next || !onpath || !stack || !state || !g->fs || !g->edges) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	g->nf = nf;
	g->total = sub[0];
	g->total_t = subt[0];
	for (size_t i = 0; i < nn; i++)
		first[i] = next[i] = UINT32_MAX;
	for (size_t i = nn; i-- > 1;) {
		uint32_t p = btr_callstack_node(cs, (uint32_t)i)->parent;
		next[i] = first[p];
		first[p] = (uint32_t)i;
	}
	size_t sp = 0;
	stack[sp++] = 0;
	while (sp) {
		uint32_t n = stack[sp - 1];
		const struct btr_cs_node *nd = btr_callstack_node(cs, n);
		if (!state[n]) {
			state[n] = 1;
			if (n) {
				struct fstat *f = &g->fs[nd->func];
				f->self += nd->self_cost;
				f->self_t += nd->self_time;
				f->calls += nd->calls;
				if (!onpath[nd->func]) {
					f->incl += sub[n];
					f->incl_t += subt[n];
				}
				if (nd->parent && nd->calls) {
					uint32_t pf = btr_callstack_node(cs, nd->parent)->func;
					g->edges[g->ne++] = (struct edge){ pf, nd->func, nd->calls,
									   onpath[nd->func] ? 0 : sub[n] };
				}
				onpath[nd->func]++;
			}
			for (uint32_t c = first[n]; c != UINT32_MAX; c = next[c])
				stack[sp++] = c;
		} else {
			sp--;
			if (n)
				onpath[nd->func]--;
		}
	}
	/* one edge per (caller, callee) */
	qsort(g->edges, g->ne, sizeof(*g->edges), cmp_edge);
	size_t w = 0;
	for (size_t i = 0; i < g->ne; i++) {
		if (w && g->edges[w - 1].from == g->edges[i].from && g->edges[w - 1].to == g->edges[i].to) {
			g->edges[w - 1].calls += g->edges[i].calls;
			g->edges[w - 1].incl += g->edges[i].incl;
		} else {
			g->edges[w++] = g->edges[i];
		}
	}
	g->ne = w;
	g->done = 1;
out:
	free(sub);
	free(subt);
	free(first);
	free(next);
	free(onpath);
	free(stack);
	free(state);
	return rc;
}

static int c_end(void *p, int status)
{
	struct cg *g = p;
	int rc = btr_callstack_end(g->cs);
	return rc ? rc : compute(g);
}

static uint64_t W(const struct cg *g, const struct fstat *f, int incl)
{
	if (g->o.weight == BTR_PROFILE_TIME)
		return incl ? f->incl_t : f->self_t;
	return incl ? f->incl : f->self;
}

/* qsort_r comparator (@ctx: the graph): by inclusive weight, then name;
 * the graph comes as an argument so that two graphs sort at once. */
static int cmp_func(const void *a, const void *b, void *ctx)
{
	const struct cg *g = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint64_t wx = W(g, &g->fs[x], 1), wy = W(g, &g->fs[y], 1);
	if (wx != wy)
		return wx > wy ? -1 : 1;
	return strcmp(btr_callstack_func(g->cs, x)->name, btr_callstack_func(g->cs, y)->name);
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

/* The edges of each function as callee (dir 0) and as caller (dir 1), in
 * their order in g->edges: function f's are at[dir][off[dir][f] ..
 * off[dir][f + 1]) (a stable counting sort; scanning every edge for every
 * function was quadratic, minutes on a build's 200 k functions). */
struct edge_index {
	size_t *off[2];
	uint32_t *at[2];
};

static void edge_index_free(struct edge_index *x)
{
	for (int d = 0; d < 2; d++) {
		free(x->off[d]);
		free(x->at[d]);
	}
}

static int edge_index_build(const struct cg *g, struct edge_index *x)
{
	memset(x, 0, sizeof(*x));
	for (int d = 0; d < 2; d++) {
		x->off[d] = calloc(g->nf + 1, sizeof(*x->off[d]));
		x->at[d] = malloc((g->ne ? g->ne : 1) * sizeof(*x->at[d]));
		if (!x->off[d] || !x->at[d]) {
			edge_index_free(x);
			return -BTR_ERR_NOMEM;
		}
		for (size_t e = 0; e < g->ne; e++)
			x->off[d][(d ? g->edges[e].from : g->edges[e].to) + 1]++;
		for (size_t f = 0; f < g->nf; f++)
			x->off[d][f + 1] += x->off[d][f];
		size_t *fill = x->off[d];   /* advanced while filling, then put back */
		for (size_t e = 0; e < g->ne; e++)
			x->at[d][fill[d ? g->edges[e].from : g->edges[e].to]++] = (uint32_t)e;
		for (size_t f = g->nf; f > 0; f--)
			fill[f] = fill[f - 1];
		fill[0] = 0;
	}
	return 0;
}

/* A name in the text output, escaped (btr/text.h), padded to @width. */
static void name_col(FILE *out, const char *name, int width)
{
	btr_text_str(out, name, 0);
	int n = (int)strlen(name);
	if (n < width)
		fprintf(out, "%*s", width - n, "");
}

static void write_text(const struct cg *g, FILE *out, const uint32_t *order, uint64_t total, const char *unit,
		       const struct edge_index *x)
{
	size_t shown = 0;   /* the functions listed: with calls or cost */
	for (size_t i = 0; i < g->nf; i++)
		shown += g->fs[i].calls || W(g, &g->fs[i], 1);
	fprintf(out, "functions: %zu, %" PRIu64 " %s\n\n", shown, total, unit);
	fprintf(out, "%14s %6s %14s %6s %10s  function\n", "inclusive", "%", "self", "%", "calls");
	for (size_t i = 0; i < g->nf; i++) {
		const struct fstat *f = &g->fs[order[i]];
		if (!f->calls && !W(g, f, 1))
			continue;
		fprintf(out, "%14" PRIu64 " %5.1f%% %14" PRIu64 " %5.1f%% %10" PRIu64 "  ", W(g, f, 1),
			pct(W(g, f, 1), total), W(g, f, 0), pct(W(g, f, 0), total), f->calls);
		name_col(out, btr_callstack_func(g->cs, order[i])->name, 0);
		fputc('\n', out);
	}
	fprintf(out, "\ncall graph (calls per caller and callee):\n");
	for (size_t i = 0; i < g->nf; i++) {
		uint32_t fi = order[i];
		const struct fstat *f = &g->fs[fi];
		if (!f->calls && !W(g, f, 1))
			continue;
		fputc('\n', out);
		name_col(out, btr_callstack_func(g->cs, fi)->name, 0);
		fprintf(out, "  (inclusive %.1f%%, self %.1f%%, %" PRIu64 " calls)\n", pct(W(g, f, 1), total),
			pct(W(g, f, 0), total), f->calls);
		for (size_t k = x->off[0][fi]; k < x->off[0][fi + 1]; k++) {
			const struct edge *ed = &g->edges[x->at[0][k]];
			fputs("    <- ", out);
			name_col(out, btr_callstack_func(g->cs, ed->from)->name, 40);
			fprintf(out, " %10" PRIu64 "\n", ed->calls);
		}
		for (size_t k = x->off[1][fi]; k < x->off[1][fi + 1]; k++) {
			const struct edge *ed = &g->edges[x->at[1][k]];
			fputs("    -> ", out);
			name_col(out, btr_callstack_func(g->cs, ed->to)->name, 40);
			fprintf(out, " %10" PRIu64 "\n", ed->calls);
		}
	}
}

static void write_json(const struct cg *g, FILE *out, const uint32_t *order, uint64_t total, const char *unit,
		       const struct edge_index *x)
{
	int t = btr_callstack_has_time(g->cs);
	fprintf(out, "{\"unit\": \"%s\", \"total\": %" PRIu64 ", \"has_time\": %s", unit, total, t ? "true" : "false");
	if (t)
		fprintf(out, ", \"total_ticks\": %" PRIu64, g->total_t);
	fprintf(out, ", \"functions\": [");
	int first = 1;
	for (size_t i = 0; i < g->nf; i++) {
		uint32_t fi = order[i];
		const struct fstat *f = &g->fs[fi];
		const struct btr_cs_func *fn = btr_callstack_func(g->cs, fi);
		if (!f->calls && !f->incl)
			continue;
		fprintf(out, "%s\n  {\"name\": ", first ? "" : ",");
		first = 0;
		btr_json_str(out, fn->name);
		fprintf(out, ", \"module\": ");
		btr_json_str(out, fn->module);
		fprintf(out, ", \"addr\": \"0x%" PRIx64 "\", \"self\": %" PRIu64 ", \"inclusive\": %" PRIu64
			     ", \"calls\": %" PRIu64,
			fn->addr, f->self, f->incl, f->calls);
		if (t)
			fprintf(out, ", \"self_ticks\": %" PRIu64 ", \"inclusive_ticks\": %" PRIu64, f->self_t, f->incl_t);
		for (int dir = 0; dir < 2; dir++) {
			fprintf(out, dir ? ", \"callees\": [" : ", \"callers\": [");
			int fe = 1;
			for (size_t k = x->off[dir][fi]; k < x->off[dir][fi + 1]; k++) {
				const struct edge *ed = &g->edges[x->at[dir][k]];
				fprintf(out, "%s{\"name\": ", fe ? "" : ", ");
				fe = 0;
				btr_json_str(out, btr_callstack_func(g->cs, dir ? ed->to : ed->from)->name);
				fprintf(out, ", \"calls\": %" PRIu64 "}", ed->calls);
			}
			fputc(']', out);
		}
		fputc('}', out);
	}
	fprintf(out, "\n]}\n");
}

static void write_dot(const struct cg *g, FILE *out, uint64_t total)
{
	fprintf(out, "digraph callgraph {\n  node [shape=box, fontname=\"monospace\"];\n");
	for (size_t i = 0; i < g->nf; i++) {
		const struct fstat *f = &g->fs[i];
		if (!f->calls && !W(g, f, 1))
			continue;
		fprintf(out, "  f%zu [label=", i);
		char buf[1024];
		snprintf(buf, sizeof(buf), "%s\\ninclusive %.1f%%, self %.1f%%\\n%" PRIu64 " calls",
			 btr_callstack_func(g->cs, (uint32_t)i)->name, pct(W(g, f, 1), total), pct(W(g, f, 0), total),
			 f->calls);
		/* a DOT string: escape quotes, keep the \n we wrote */
		fputc('"', out);
		for (const char *c = buf; *c; c++) {
			if (*c == '"')
				fputc('\\', out);
			if ((unsigned char)*c >= 0x20)
				fputc(*c, out);
		}
		fprintf(out, "\"];\n");
	}
	for (size_t e = 0; e < g->ne; e++)
		fprintf(out, "  f%u -> f%u [label=\"%" PRIu64 "\"];\n", g->edges[e].from, g->edges[e].to, g->edges[e].calls);
	fprintf(out, "}\n");
}

static int c_write(void *p, FILE *out, const char *format)
{
	struct cg *g = p;
	int rc = prof_weight_ok(g->cs, g->o.weight);
	if (rc)
		return rc;
	if (!g->done)
		return -BTR_ERR_INVAL;
	uint32_t *order = malloc((g->nf ? g->nf : 1) * sizeof(*order));
	if (!order)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < g->nf; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, g->nf, sizeof(*order), cmp_func, g);
	uint64_t total = g->o.weight == BTR_PROFILE_TIME ? g->total_t : g->total;
	const char *unit = prof_unit(g->cs, g->o.weight);
	struct edge_index x;
	rc = edge_index_build(g, &x);
	if (rc) {
		free(order);
		return rc;
	}
	if (!format || !strcmp(format, "text"))
		write_text(g, out, order, total, unit, &x);
	else if (!strcmp(format, "json"))
		write_json(g, out, order, total, unit, &x);
	else if (!strcmp(format, "dot"))
		write_dot(g, out, total);
	else
		rc = -BTR_ERR_INVAL;
	edge_index_free(&x);
	free(order);
	if (!rc && ferror(out))
		rc = -BTR_ERR_IO;
	return rc;
}

static void c_destroy(void *p)
{
	struct cg *g = p;
	btr_callstack_free(g->cs);
	free(g->fs);
	free(g->edges);
	free(g);
}

static const char *const callgraph_formats[] = { "text", "json", "dot", NULL };

const struct btr_analysis_ops btr__callgraph_ops = {
	.name = "callgraph", .begin = c_begin, .branches = c_branches, .fold_ok = c_fold_ok, .fold_block = c_fold_block, .event = c_event,
	.end = c_end, .write = c_write, .destroy = c_destroy,
	.formats = callgraph_formats,
};

int btr_callgraph_new(const struct btr_profile_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct cg *g = calloc(1, sizeof(*g));
	if (!g)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&g->o, opts);
	struct btr_callstack_opts co = { .sz = sizeof(co) };
	int rc = btr_callstack_new(&co, &g->cs);
	if (rc) {
		free(g);
		return rc;
	}
	return btr_analysis_new(&btr__callgraph_ops, g, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__callgraph_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_profile_opts o = { .sz = sizeof(o), .events = a->events, .module = a->module };
	return btr_callgraph_new(&o, out);
}
