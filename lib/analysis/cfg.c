/* cfg.c - a function's CFG as Graphviz dot, coloured by executions or by
 * the difference between two runs (btr/cfg.h). */
#include "btr/cfg.h"
#include "btr/blocks.h"
#include "btr/error.h"
#include "registry.h"
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cfg {
	struct btr_analysis *blocks;
	struct btr_cfg_opts o;
	long collapsed;
};

/* Heat scale (ColorBrewer YlOrRd): light yellow for rarely run blocks to
 * dark red for the hottest, on a log scale so that loops do not wash out
 * everything else. */
static const char *const heat[] = { "#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c",
				    "#fc4e2a", "#e31a1c", "#bd0026", "#800026" };
#define NHEAT (sizeof(heat) / sizeof(heat[0]))
#define GREY "#e0e0e0"

static const char *heat_colour(uint64_t count, uint64_t max)
{
	if (!count)
		return GREY;
	double t = max > 1 ? log((double)count) / log((double)max) : 1.0;
	size_t i = (size_t)(t * (NHEAT - 1) + 0.5);
	return heat[i < NHEAT ? i : NHEAT - 1];
}

/* sRGB channel (0..255) to linear light (WCAG 2 relative luminance). */
static double lin(unsigned v)
{
	double c = v / 255.0;
	return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4);
}

/* ` fillcolor="#RRGGBB" fontcolor=...`: black or white text, whichever
 * contrasts more with the fill (WCAG AA asks for 4.5:1; on this scale's
 * darkest reds black text has about 2:1). */
static void put_fill(FILE *f, const char *fill)
{
	unsigned r = 0, g = 0, b = 0;
	sscanf(fill, "#%2x%2x%2x", &r, &g, &b);
	double l = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
	/* contrast with black (l+0.05)/0.05 against with white 1.05/(l+0.05) */
	int white = (l + 0.05) * (l + 0.05) < 0.05 * 1.05;
	fprintf(f, " fillcolor=\"%s\" fontcolor=\"%s\"", fill, white ? "#ffffff" : "#000000");
}

/* Difference scale: blue when B ran a block less, red when more. */
static const char *diff_colour(int64_t d, uint64_t maxabs)
{
	static const char *const up[] = { "#fee0d2", "#fc9272", "#de2d26" };
	static const char *const down[] = { "#deebf7", "#9ecae1", "#3182bd" };
	if (!d)
		return "#ffffff";
	double t = maxabs ? (double)(d < 0 ? -d : d) / (double)maxabs : 1.0;
	size_t i = t > 0.66 ? 2 : t > 0.33 ? 1 : 0;
	return d > 0 ? up[i] : down[i];
}

static void dot_str(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, f);
	}
}

/* Count of the block of @g2 starting at @start, 0 if none. */
static uint64_t count_in(const struct btr_funcgraph *g2, uint64_t start)
{
	for (size_t i = 0; g2 && i < g2->n_blocks; i++)
		if (g2->blocks[i].start == start)
			return g2->blocks[i].count;
	return 0;
}

static int cmp_desc(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a > b ? -1 : a < b;
}

static int write_dot(struct cfg *c, FILE *f)
{
	struct btr_funcgraph *g = NULL, *g2 = NULL;
	int rc = btr_funcgraph_build(c->blocks, c->o.function, &g);
	if (rc < 0)
		return rc;
	if (c->o.diff && btr_funcgraph_build(c->o.diff, c->o.function, &g2) < 0)
		g2 = NULL;   /* not in B: every block ran less there */
	/* Collapse: nodes beyond the limit merge runs of consecutive cold
	 * blocks (below the limit-th hottest count) into one node each. */
	size_t nb = g->n_blocks;
	size_t *node = calloc(nb + 1, sizeof(*node));   /* block -> node id */
	uint64_t *tmp = calloc(nb + 1, sizeof(*tmp));
	if (!node || !tmp) {
		free(node);
		free(tmp);
		btr_funcgraph_free(g);
		btr_funcgraph_free(g2);
		return -BTR_ERR_NOMEM;
	}
	uint64_t threshold = 0;
	unsigned limit = c->o.max_blocks ? c->o.max_blocks : 300;
	if (nb > limit) {
		for (size_t i = 0; i < nb; i++)
			tmp[i] = g->blocks[i].count;
		qsort(tmp, nb, sizeof(*tmp), cmp_desc);
		threshold = tmp[limit / 2] + 1;   /* half the budget for hot blocks */
	}
	size_t nn = 0;
	long collapsed = 0;
	for (size_t i = 0; i < nb; i++) {
		int cold = threshold && g->blocks[i].count < threshold;
		int prev_cold = i && threshold && g->blocks[i - 1].count < threshold;
		if (cold && prev_cold) {
			node[i] = node[i - 1];
			collapsed++;
		} else {
			node[i] = nn++;
		}
	}
	uint64_t maxe = 1, maxabs = 0;
	for (size_t i = 0; i < g->n_edges; i++)
		maxe = g->edges[i].count > maxe ? g->edges[i].count : maxe;
	for (size_t i = 0; g2 && i < nb; i++) {
		int64_t d = (int64_t)(count_in(g2, g->blocks[i].start) - g->blocks[i].count);
		uint64_t a = (uint64_t)(d < 0 ? -d : d);
		maxabs = a > maxabs ? a : maxabs;
	}
	fprintf(f, "digraph \"");
	dot_str(f, g->fn.name);
	fprintf(f, "\" {\n  graph [fontname=\"monospace\" labelloc=t label=\"");
	dot_str(f, g->fn.name);
	fprintf(f, " (%s+0x%" PRIx64 "): %zu blocks, entered %" PRIu64 " times%s", g->module_name, g->fn.start,
		nb, g->entries, c->o.diff ? "; colour: B - A (red more, blue less)" : "");
	if (collapsed)
		fprintf(f, "\\n%ld cold blocks collapsed (limit %u nodes)", collapsed, limit);
	fprintf(f, "\"];\n  node [shape=box fontname=\"monospace\" fontsize=10 style=filled];\n");
	for (size_t i = 0; i < nb;) {
		size_t j = i + 1;
		while (j < nb && node[j] == node[i])
			j++;
		const struct btr_fg_block *b = &g->blocks[i];
		const char *file = b->file ? strrchr(b->file, '/') : NULL;
		file = file ? file + 1 : b->file;
		if (j - i > 1) {
			uint64_t mx = 0;
			for (size_t k = i; k < j; k++)
				mx = g->blocks[k].count > mx ? g->blocks[k].count : mx;
			fprintf(f, "  n%zu [id=\"n%zu\" shape=folder label=\"%zu cold blocks\\n0x%" PRIx64 "-0x%" PRIx64
				   "\\nmax x%" PRIu64 "\"",
				node[i], node[i], j - i, b->start, g->blocks[j - 1].end, mx);
			put_fill(f, heat_colour(mx, g->max_count));
			fprintf(f, "];\n");
			i = j;
			continue;
		}
		fprintf(f, "  n%zu [id=\"b%zu\" label=\"0x%" PRIx64 "  ", node[i], i, b->start);
		dot_str(f, g->fn.name);
		fprintf(f, "+0x%" PRIx64, b->start - g->fn.start);
		if (file) {
			fprintf(f, "\\n");
			dot_str(f, file);
			fprintf(f, ":%d", b->line);
		}
		if (g2) {
			uint64_t cb = count_in(g2, b->start);
			fprintf(f, "\\nA x%" PRIu64 "  B x%" PRIu64 "\"", b->count, cb);
			put_fill(f, diff_colour((int64_t)(cb - b->count), maxabs));
		} else if (!b->count) {
			/* never run: grey and dashed, text still 6:1 */
			fprintf(f, "\\nx0\" fillcolor=\"%s\" fontcolor=\"#505050\" color=\"#a0a0a0\" "
				   "style=\"filled,dashed\"", GREY);
		} else {
			fprintf(f, "\\nx%" PRIu64 "\"", b->count);
			put_fill(f, heat_colour(b->count, g->max_count));
		}
		fprintf(f, "];\n");
		i = j;
	}
	int have_out = 0;
	for (size_t i = 0; i < g->n_edges; i++)
		have_out |= g->edges[i].to == BTR_FG_OUTSIDE;
	if (have_out)
		fprintf(f, "  out [id=\"out\" shape=oval label=\"leave\" fillcolor=\"#ffffff\"];\n");
	for (size_t i = 0; i < g->n_edges; i++) {
		const struct btr_fg_edge *e = &g->edges[i];
		size_t a = node[e->from];
		if (e->to != BTR_FG_OUTSIDE && node[e->to] == a && e->from != e->to)
			continue;   /* inside a collapsed region */
		double w = 1.0 + 5.0 * (double)e->count / (double)maxe;
		if (e->to == BTR_FG_OUTSIDE)
			fprintf(f, "  n%zu -> out", a);
		else
			fprintf(f, "  n%zu -> n%zu", a, node[e->to]);
		fprintf(f, " [label=\"%" PRIu64 "\" penwidth=%.1f%s%s];\n", e->count, w,
			e->count ? "" : " style=dashed color=\"#a0a0a0\"",
			e->taken ? "" : " arrowhead=empty");
	}
	fprintf(f, "}\n");
	c->collapsed = collapsed;
	free(node);
	free(tmp);
	btr_funcgraph_free(g);
	btr_funcgraph_free(g2);
	return ferror(f) ? -BTR_ERR_IO : 0;
}

static int cfg_write(void *state, FILE *out, const char *format)
{
	struct cfg *c = state;
	if (format && strcmp(format, "dot"))
		return -BTR_ERR_INVAL;
	return write_dot(c, out);
}

static void cfg_destroy(void *state)
{
	free(state);
}

static const char *const cfg_formats[] = { "dot", NULL };

const struct btr_analysis_ops btr__cfg_ops = {
	.name = "cfg",
	.write = cfg_write,
	.destroy = cfg_destroy,
	.formats = cfg_formats,
};

int btr_cfg_new(struct btr_analysis *blocks, const struct btr_cfg_opts *opts, struct btr_analysis **out)
{
	if (!blocks || !opts || !BTR_OPTS_VALID(opts, sizeof(*opts)) || !opts->function || !out)
		return -BTR_ERR_INVAL;
	struct cfg *c = calloc(1, sizeof(*c));
	if (!c)
		return -BTR_ERR_NOMEM;
	c->blocks = blocks;
	BTR_OPTS_COPY(&c->o, opts);
	c->collapsed = -1;
	return btr__analysis_new_view(&btr__cfg_ops, c, blocks, out);
}

long btr_cfg_collapsed(const struct btr_analysis *a)
{
	if (btr_analysis_ops(a) != &btr__cfg_ops)
		return -1;
	return ((const struct cfg *)btr_analysis_state(a))->collapsed;
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__cfg_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_cfg_opts o = { .sz = sizeof(o), .function = a->function };
	return btr_cfg_new(a->blocks, &o, out);
}
