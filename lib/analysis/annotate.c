/* annotate.c - a function's code with counts (btr/annotate.h), printed
 * from its CFG (btr_funcgraph_build), so that annotate, cfg and the HTML
 * report agree on every count. */
#include "btr/annotate.h"
#include "btr/blocks.h"
#include "btr/error.h"
#include "btr/file.h"
#include "internal.h"
#include "registry.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ann {
	struct btr_analysis *blocks;
	const char *function;
	struct btr_annotate_opts o;
};

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static const char *base(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : p;
}

static void write_asm(const struct btr_funcgraph *g, FILE *f)
{
	fprintf(f, "%s  (%s+0x%" PRIx64 "..0x%" PRIx64 ")  entered %" PRIu64 " times\n", g->fn.name,
		g->module_name, g->fn.start, g->fn.end, g->entries);
	fprintf(f, "%12s  %-10s  %-40s  %-34s  %s\n", "count", "address", "instruction", "branch", "source");
	size_t bi = 0;
	for (size_t i = 0; i < g->n_insns; i++) {
		const struct btr_fg_insn *x = &g->insns[i];
		if (bi < g->n_blocks && g->blocks[bi].first == i) {
			if (i)
				fputc('\n', f);
			bi++;
		}
		char br[64] = "";
		int cond = btr_branch_kind_class((enum btr_branch_kind)x->kind) == BTR_LBR_JCC;
		if (cond && x->count)
			snprintf(br, sizeof(br), "taken %" PRIu64 " (%.1f%%) not %" PRIu64 " (%.1f%%)", x->taken,
				 pct(x->taken, x->taken + x->not_taken), x->not_taken,
				 pct(x->not_taken, x->taken + x->not_taken));
		else if (x->kind != BTR_KIND_NONE && x->taken)
			snprintf(br, sizeof(br), "%s %" PRIu64, btr_branch_kind_name((enum btr_branch_kind)x->kind),
				 x->taken);
		char cnt[24];
		if (x->count)
			snprintf(cnt, sizeof(cnt), "%" PRIu64, x->count);
		else
			snprintf(cnt, sizeof(cnt), "-");
		fprintf(f, "%12s  0x%-8" PRIx64 "  %-40s  %-34s", cnt, x->addr, x->text, br);
		if (x->file)
			fprintf(f, "  %s:%d", base(x->file), x->line);
		fputc('\n', f);
	}
}

struct srcline {
	const char *file;
	int line;
	uint64_t count;
	int has_code;
};

static int cmp_src(const void *a, const void *b)
{
	const struct srcline *x = a, *y = b;
	int c = strcmp(x->file, y->file);
	return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int write_source(const struct ann *a, const struct btr_funcgraph *g, FILE *f)
{
	struct srcline *v = calloc(g->n_insns + 1, sizeof(*v));
	if (!v)
		return -BTR_ERR_NOMEM;
	size_t n = 0;
	for (size_t i = 0; i < g->n_insns; i++)
		if (g->insns[i].file)
			v[n++] = (struct srcline){ g->insns[i].file, g->insns[i].line, g->insns[i].count, 1 };
	if (n)
		qsort(v, n, sizeof(*v), cmp_src);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && v[k - 1].line == v[i].line && !strcmp(v[k - 1].file, v[i].file)) {
			if (v[i].count > v[k - 1].count)
				v[k - 1].count = v[i].count;
		} else {
			v[k++] = v[i];
		}
	}
	fprintf(f, "%s  (%s+0x%" PRIx64 ")  entered %" PRIu64 " times\n", g->fn.name, g->module_name, g->fn.start,
		g->entries);
	for (size_t i = 0; i < k;) {
		const char *file = v[i].file;
		size_t j = i;
		int lo = v[i].line, hi = v[i].line;
		while (j < k && !strcmp(v[j].file, file)) {
			hi = v[j].line;
			j++;
		}
		fprintf(f, "\n%s\n", file);
		/* The one opener of files that data names: never a FIFO or
		 * device, and, with the source rule, no file the trace's
		 * owner could not read (a refusal is one warning). */
		int sfd = btr_file_open_source(file, a->o.source_rule, a->o.source_owner, a->o.source_roots, 0);
		FILE *src = sfd >= 0 ? fdopen(sfd, "r") : NULL;
		if (!src && sfd >= 0)
			close(sfd);
		char buf[1024];
		int ln = 0;
		size_t q = i;
		/* Every line from the first to the last with code: context. */
		for (int line = lo; line <= hi; line++) {
			const char *text = "";
			if (src) {
				while (ln < line && fgets(buf, sizeof(buf), src))
					ln++;
				if (ln == line) {
					buf[strcspn(buf, "\n")] = 0;
					text = buf;
				}
			}
			while (q < j && v[q].line < line)
				q++;
			if (q < j && v[q].line == line) {
				if (v[q].count)
					fprintf(f, "%12" PRIu64 "  %6d  %s\n", v[q].count, line, text);
				else
					fprintf(f, "%12s  %6d  %s\n", "#####", line, text);
			} else {
				fprintf(f, "%12s  %6d  %s\n", "", line, text);
			}
		}
		if (src)
			fclose(src);
		i = j;
	}
	free(v);
	return 0;
}

static int ann_write(void *state, FILE *f, const char *format)
{
	struct ann *a = state;
	if (format && strcmp(format, "asm") && strcmp(format, "source"))
		return -BTR_ERR_INVAL;
	struct btr_funcgraph *g;
	int rc = btr_funcgraph_build(a->blocks, a->function, &g);
	if (rc < 0)
		return rc;
	if (format && !strcmp(format, "source"))
		rc = write_source(a, g, f);
	else
		write_asm(g, f);
	btr_funcgraph_free(g);
	return rc < 0 ? rc : ferror(f) ? -BTR_ERR_IO : 0;
}

static void ann_destroy(void *state)
{
	free(state);
}

static const char *const annotate_formats[] = { "asm", "source", NULL };

const struct btr_analysis_ops btr__annotate_ops = {
	.name = "annotate",
	.write = ann_write,
	.destroy = ann_destroy,
	.formats = annotate_formats,
};

int btr_annotate_new(struct btr_analysis *blocks, const char *function, struct btr_analysis **out)
{
	return btr_annotate_new_opts(blocks, function, NULL, out);
}

int btr_annotate_new_opts(struct btr_analysis *blocks, const char *function, const struct btr_annotate_opts *opts,
			  struct btr_analysis **out)
{
	if (!blocks || !function || !out)
		return -BTR_ERR_INVAL;
	if (!BTR_OPTS_VALID(opts, BTR_OFFSETOFEND(struct btr_annotate_opts, source_roots)))
		return -BTR_ERR_INVAL;
	struct ann *a = calloc(1, sizeof(*a));
	if (!a)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&a->o, opts);
	a->blocks = blocks;
	a->function = function;
	return btr__analysis_new_view(&btr__annotate_ops, a, blocks, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__annotate_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	return btr_annotate_new(a->blocks, a->function, out);
}
