/* report_html.c - `btr report FILE --html DIR [--diff B]` (docs/report.md):
 * one self-contained offline page (inline CSS and SVG, no scripts, no
 * network fetches): summary, threads, hot functions and blocks, each hot
 * function's CFG heat map (Graphviz) and annotated source, coverage per
 * source file.  One pass over the trace feeds the report, blocks and
 * coverage analyses.  The page is assembled here rather than in lib/
 * because the CFGs are rendered by running Graphviz `dot`. */
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

#define MAX_CFGS 6

/* The C runtime every dynamic program runs through: the loader and the
 * base libraries.  On a short program they hold most instructions and
 * would hide the program's own code, so the page lists them after it,
 * folded. */
static int is_runtime(const char *module)
{
	static const char *const prefixes[] = { "ld-linux", "ld64.so", "libc.so", "libm.so", "libpthread.so",
						"libdl.so", "librt.so", "libgcc_s.so", "libstdc++.so", "libresolv.so" };
	if (!module)
		return 0;
	const char *b = strrchr(module, '/');
	b = b ? b + 1 : module;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(b, prefixes[i], strlen(prefixes[i])))
			return 1;
	return 0;
}

/* The module of the top-level address @a, or NULL. */
static const char *module_at(const struct btr_report_result *r, uint64_t a)
{
	for (size_t i = 0; i < r->n_modules; i++)
		if (a >= r->modules[i].start && a - r->modules[i].start < r->modules[i].size)
			return r->modules[i].path;
	return NULL;
}

/* Whether the page may show @file: readable here, and by the rule of the
 * trace's sources (cli_source_rule; a refusal is one warning per file). */
static int source_here(const struct btr_annotate_opts *ao, const char *file)
{
	int fd = file ? btr_file_open_source(file, ao->source_rule, ao->source_owner, ao->source_roots, 0) : -1;
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* Renders the CFG analysis @cfg to SVG with dot; returns the <svg>
 * element (malloc'ed) or NULL. */
static char *render_svg(struct btr_analysis *cfg)
{
	char dotf[] = "/tmp/btr_htmlXXXXXX", svgf[] = "/tmp/btr_htmlsvgXXXXXX";
	int fd = mkstemp(dotf), fd2 = mkstemp(svgf);
	char *ret = NULL;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fd2 < 0)
		goto out;
	int w = btr_analysis_write(cfg, f, "dot");
	if (fclose(f) != 0 || w < 0)
		goto out;
	char *argv[] = { "dot", "-Tsvg", "-o", svgf, dotf, NULL };
	pid_t pid;
	int st;
	if (posix_spawnp(&pid, "dot", NULL, NULL, argv, environ) != 0)
		goto out;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		goto out;
	FILE *s = fopen(svgf, "r");
	if (!s)
		goto out;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	char tmp[8192];
	size_t n;
	while (m && (n = fread(tmp, 1, sizeof(tmp), s)) > 0)
		fwrite(tmp, 1, n, m);
	fclose(s);
	if (m)
		fclose(m);
	char *svg = buf ? strstr(buf, "<svg") : NULL;
	if (svg)
		ret = strdup(svg);
	free(buf);
out:
	if (fd >= 0)
		unlink(dotf);
	if (fd2 >= 0) {
		close(fd2);
		unlink(svgf);
	}
	return ret;
}

/* Text an analysis writes in @format, malloc'ed (NULL on failure). */
static char *write_to_string(struct btr_analysis *a, const char *format)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	int rc = btr_analysis_write(a, m, format);
	fclose(m);
	if (rc < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

struct page {
	const char *file, *diff;
	const struct btr_report_result *res;
	struct btr_analysis *bl, *cov, *bd;
	unsigned top;
	const struct btr_diverge_result *dv;   /* --diff: where the runs parted */
	const char *dv_module;                 /* the program whose branches were compared */
	struct btr_annotate_opts ao;           /* which source files may be read */
};

static void coverage_table(FILE *f, struct page *p)
{
	fprintf(f, "<section id=\"coverage\"><h2>Coverage per source file</h2>\n");
	char *lcov = write_to_string(p->cov, "lcov");
	fprintf(f, "<table id=\"coverage-table\"><tr><th>file</th><th>lines with code</th><th>lines run</th>"
		   "<th>line coverage</th><th>functions run</th></tr>\n");
	int rows = 0;
	char *save = NULL, *file = NULL;
	unsigned lf = 0, lh = 0, fnf = 0, fnh = 0, gone = 0, gone_lf = 0, gone_lh = 0;
	for (char *l = lcov ? strtok_r(lcov, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "SF:", 3))
			file = l + 3;
		else if (!strncmp(l, "LF:", 3))
			lf = (unsigned)atoi(l + 3);
		else if (!strncmp(l, "LH:", 3))
			lh = (unsigned)atoi(l + 3);
		else if (!strncmp(l, "FNF:", 4))
			fnf = (unsigned)atoi(l + 4);
		else if (!strncmp(l, "FNH:", 4))
			fnh = (unsigned)atoi(l + 4);
		else if (!strcmp(l, "end_of_record") && file) {
			/* Files nothing ran in (other functions of libc
			 * sources, ...) would drown the table; files whose
			 * source is not on this machine are one row below. */
			if (lh && !source_here(&p->ao, file)) {
				gone++;
				gone_lf += lf;
				gone_lh += lh;
			} else if (lh) {
				fprintf(f, "<tr><td>");
				btr_xml_str(f, file);
				fprintf(f, "</td><td>%u</td><td>%u</td><td>%.1f%%</td><td>%u of %u</td></tr>\n", lf, lh,
					lf ? 100.0 * lh / lf : 0.0, fnh, fnf);
				rows++;
			}
			file = NULL;
		}
	}
	if (gone)
		fprintf(f, "<tr class=\"nosource\"><td>%u more files whose source is not on this machine "
			   "(the C library, the loader, ...)</td><td>%u</td><td>%u</td><td>%.1f%%</td><td></td></tr>\n",
			gone, gone_lf, gone_lh, gone_lf ? 100.0 * gone_lh / gone_lf : 0.0);
	fprintf(f, "</table>\n");
	if (!rows && !gone)
		fprintf(f, "<p>No source lines: the traced modules have no DWARF line tables.</p>\n");
	fprintf(f, "</section>\n");
	free(lcov);
}

static void function_section(FILE *f, struct page *p, size_t i)
{
	const struct btr_report_func *fn = &p->res->top_functions[i];
	fprintf(f, "<section id=\"fn-%zu\" class=\"function\"><h3>", i);
	btr_xml_str(f, fn->name);
	fprintf(f, "</h3>\n");
	struct btr_cfg_opts o = { .sz = sizeof(o), .function = fn->name, .max_blocks = 120, .diff = p->bd };
	struct btr_analysis *cfg = NULL, *ann = NULL;
	char *svg = NULL, *text = NULL;
	if (btr_cfg_new(p->bl, &o, &cfg) == 0)
		svg = render_svg(cfg);
	if (svg)
		fprintf(f, "<div class=\"cfg\">%s</div>\n", svg);
	else
		fprintf(f, "<p>No control-flow graph (no code for it, or Graphviz dot missing).</p>\n");
	if (btr_annotate_new_opts(p->bl, fn->name, &p->ao, &ann) == 0) {
		/* The source where it is on this machine; else (no line tables,
		 * or a library's source not installed: counts without text) the
		 * disassembly. */
		if (source_here(&p->ao, fn->file))
			text = write_to_string(ann, "source");
		if (!text || !strchr(text, '\n') || !strchr(strchr(text, '\n') + 1, '\n')) {
			free(text);
			if (fn->file && !source_here(&p->ao, fn->file)) {
				fprintf(f, "<p>The source (");
				btr_xml_str(f, fn->file);
				fprintf(f, ") is not on this machine: the disassembly with counts.</p>\n");
			}
			text = write_to_string(ann, "asm");
		}
	}
	if (text) {
		fprintf(f, "<pre class=\"annotate\">");
		btr_xml_str(f, text);
		fprintf(f, "</pre>\n");
	}
	fprintf(f, "<p><a href=\"#functions\">back to the hot functions</a></p></section>\n");
	free(svg);
	free(text);
	btr_analysis_free(cfg);
	btr_analysis_free(ann);
}

/* The rows of the top functions that are (@runtime) or are not part of
 * the C runtime, at most @top; a function links to its section when it
 * gets one (write_page gives the first MAX_CFGS, the program's first). */
static void function_rows(FILE *f, const struct btr_report_result *r, int runtime, unsigned top)
{
	fprintf(f, "<tr><th>function</th><th>module</th><th>%s</th><th>branches</th><th>source</th></tr>\n",
		r->rank_by_insns ? "instructions" : "(no instruction counts)");
	size_t linked_before = 0, shown = 0;
	if (runtime)   /* the program's functions take the first sections */
		for (size_t i = 0; i < r->n_top_functions; i++)
			linked_before += r->top_functions[i].module && !is_runtime(r->top_functions[i].module);
	size_t nlinked = linked_before < MAX_CFGS ? linked_before : MAX_CFGS;
	for (size_t i = 0; i < r->n_top_functions && shown < top; i++) {
		const struct btr_report_func *fn = &r->top_functions[i];
		if (is_runtime(fn->module) != runtime)
			continue;
		int linked = fn->module && nlinked < MAX_CFGS;
		nlinked += linked;
		shown++;
		fprintf(f, "<tr><td>");
		if (linked)
			fprintf(f, "<a href=\"#fn-%zu\">", i);
		btr_xml_str(f, fn->name);
		if (linked)
			fprintf(f, "</a>");
		fprintf(f, "</td><td>");
		const char *m = fn->module ? strrchr(fn->module, '/') : NULL;
		btr_xml_str(f, m ? m + 1 : fn->module ? fn->module : "");
		fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>", fn->insns, fn->branches);
		if (fn->file) {
			btr_xml_str(f, fn->file);
			fprintf(f, ":%d", fn->line);
		}
		fprintf(f, "</td></tr>\n");
	}
}

static void block_rows(FILE *f, const struct btr_report_result *r, int runtime, unsigned top)
{
	fprintf(f, "<tr><th>block</th><th>symbol</th><th>executions</th><th>instructions</th><th>source</th></tr>\n");
	size_t shown = 0;
	for (size_t i = 0; i < r->n_top_blocks && shown < top; i++) {
		const struct btr_report_block *b = &r->top_blocks[i];
		if (is_runtime(module_at(r, b->start)) != runtime)
			continue;
		shown++;
		fprintf(f, "<tr><td>0x%" PRIx64 "-0x%" PRIx64 "</td><td>", b->start, b->end);
		btr_xml_str(f, b->sym);
		fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>", b->count, b->insns);
		if (b->file) {
			btr_xml_str(f, b->file);
			fprintf(f, ":%d", b->line);
		}
		fprintf(f, "</td></tr>\n");
	}
}

/* With --diff B: where the two runs first parted, per thread pair, both
 * sides next to each other (btr diverge's first divergence, the program's
 * own branches compared: docs/diverge.md), and every divergent region. */
static void dv_cell(FILE *f, const struct btr_dv_loc *l)
{
	char buf[1024];
	cli_dv_loc_str(l, buf, sizeof(buf));
	fprintf(f, "<td>");
	btr_xml_str(f, buf);
	fprintf(f, "</td>");
}

static void dv_side_cell(FILE *f, const struct btr_dv_side *s)
{
	char a[1024], b[1024];
	if (s->ended || s->gap) {
		fprintf(f, "<td>%s</td>", s->ended ? "the thread ended" : "trace data lost here");
		return;
	}
	cli_dv_loc_str(&s->at.from, a, sizeof(a));
	cli_dv_loc_str(&s->at.to, b, sizeof(b));
	fprintf(f, "<td>branch %" PRIu64 ", %" PRIu64 " instructions: ", s->at.index, s->at.insns);
	btr_xml_str(f, a);
	fprintf(f, " &rarr; ");
	btr_xml_str(f, b);
	fprintf(f, " (%s%s)</td>", btr_branch_kind_name(s->at.kind), s->at.taken ? "" : ", not taken");
}

static void divergence_section(FILE *f, const struct page *p)
{
	fprintf(f, "<section id=\"divergence\"><h2>Where the runs parted</h2>\n");
	const struct btr_diverge_result *d = p->dv;
	if (!d) {
		fprintf(f, "<p>Not compared (the traces could not be compared branch by branch).</p></section>\n");
		return;
	}
	if (p->dv_module) {
		fprintf(f, "<p>The first branch of ");
		btr_xml_str(f, p->dv_module);
		fprintf(f, " whose outcome differs between ");
		btr_xml_str(f, p->file);
		fprintf(f, " (A) and ");
		btr_xml_str(f, p->diff);
		fprintf(f, " (B), for each pair of matching threads (btr diverge).</p>\n");
	}
	for (size_t i = 0; i < d->n_threads; i++) {
		const struct btr_dv_thread *t = &d->threads[i];
		fprintf(f, "<h3>Thread A %" PRIu32 " / B %" PRIu32 "</h3>\n", t->tid_a, t->tid_b);
		if (!t->tid_a || !t->tid_b) {
			fprintf(f, "<p>Only in %s.</p>\n", t->tid_a ? "A" : "B");
			continue;
		}
		if (!t->diverged) {
			fprintf(f, "<p>The same %" PRIu64 " branches.</p>\n", t->branches_a);
			continue;
		}
		const struct btr_dv_region *g = &t->regions[0];
		fprintf(f, "<table class=\"diverge\"><tr><th>A</th><th>B</th></tr>\n<tr>");
		dv_side_cell(f, &g->a);
		dv_side_cell(f, &g->b);
		fprintf(f, "</tr>\n<tr><th>stack A</th><th>stack B</th></tr>\n");
		size_t depth = g->a.depth > g->b.depth ? g->a.depth : g->b.depth;
		for (size_t k = 0; k < depth; k++) {
			fprintf(f, "<tr>");
			if (k < g->a.depth)
				dv_cell(f, &g->a.stack[k]);
			else
				fprintf(f, "<td></td>");
			if (k < g->b.depth)
				dv_cell(f, &g->b.stack[k]);
			else
				fprintf(f, "<td></td>");
			fprintf(f, "</tr>\n");
		}
		fprintf(f, "</table>\n");
		if (t->n_regions > 1 || g->resynced) {
			fprintf(f, "<table class=\"regions\"><tr><th>region</th><th>A instructions</th>"
				   "<th>B instructions</th><th>met again at</th></tr>\n");
			for (size_t k = 0; k < t->n_regions; k++) {
				const struct btr_dv_region *x = &t->regions[k];
				fprintf(f, "<tr><td>%zu</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td>", k + 1, x->a_insns,
					x->b_insns);
				if (x->resynced)
					dv_cell(f, &x->sync);
				else
					fprintf(f, "<td>did not meet again</td>");
				fprintf(f, "</tr>\n");
			}
			fprintf(f, "</table>\n");
		}
	}
	fprintf(f, "</section>\n");
}

static int write_page(void *ctx, FILE *f)
{
	struct page *p = ctx;
	const struct btr_report_result *r = p->res;
	fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>btr report: ");
	btr_xml_str(f, p->file);
	fprintf(f, "</title>\n<style>\n"
		   "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff}\n"
		   "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:2px 8px;"
		   "text-align:right}th{background:#eee}td:first-child{text-align:left}\n"
		   "nav a{margin-right:1em}pre{background:#f7f7f7;padding:.5em;overflow:auto;font-size:12px}\n"
		   ".cfg svg{max-width:100%%;height:auto}h1{color:#800026}\n</style></head><body>\n");
	fprintf(f, "<h1>btr report</h1>\n<p>");
	btr_xml_str(f, p->file);
	if (p->diff) {
		fprintf(f, " (CFGs coloured by the difference to ");
		btr_xml_str(f, p->diff);
		fprintf(f, ")");
	}
	fprintf(f, "</p>\n<nav><a href=\"#summary\">Summary</a><a href=\"#threads\">Threads</a>"
		   "<a href=\"#functions\">Hot functions</a><a href=\"#blocks\">Hot blocks</a>"
		   "<a href=\"#coverage\">Coverage</a>%s</nav>\n",
		p->diff ? "<a href=\"#divergence\">Where the runs parted</a>" : "");
	fprintf(f, "<section id=\"summary\"><h2>Summary</h2><table id=\"summary-table\">\n");
	fprintf(f, "<tr><td>backend</td><td>");
	btr_xml_str(f, r->backend);
	fprintf(f, "</td></tr>\n<tr><td>instructions</td><td>%" PRIu64 "</td></tr>\n"
		   "<tr><td>branches</td><td>%" PRIu64 "</td></tr>\n<tr><td>taken</td><td>%" PRIu64 "</td></tr>\n",
		r->insns, r->branches, r->taken);
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++)
		fprintf(f, "<tr><td>%s</td><td>%" PRIu64 "</td></tr>\n", btr_lbr_class_name((enum btr_lbr_class)c),
			r->by_class[c]);
	fprintf(f, "<tr><td>gaps</td><td>%" PRIu64 "</td></tr>\n<tr><td>functions</td><td>%zu</td></tr>\n"
		   "<tr><td>blocks</td><td>%zu</td></tr>\n</table></section>\n",
		r->gaps, r->n_functions, r->n_blocks);
	fprintf(f, "<section id=\"threads\"><h2>Threads</h2><table id=\"threads-table\"><tr><th>tid</th>"
		   "<th>name</th><th>instructions</th><th>branches</th><th>exit</th></tr>\n");
	for (size_t i = 0; i < r->n_threads; i++) {
		const struct btr_report_thread *t = &r->threads[i];
		fprintf(f, "<tr><td>%" PRIu32 "</td><td>", t->tid);
		btr_xml_str(f, t->name ? t->name : "");
		fprintf(f, "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>", t->insns, t->branches);
		if (t->exited)
			fprintf(f, "%" PRId32, t->exit_code);
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table></section>\n");
	/* The program's own code first; the runtime (loader, libc) after it,
	 * folded: on a short program it would fill every table. */
	uint64_t rt_insns = 0;
	for (size_t i = 0; i < r->n_top_functions; i++)
		if (is_runtime(r->top_functions[i].module))
			rt_insns += r->top_functions[i].insns;
	fprintf(f, "<section id=\"functions\"><h2>Hot functions</h2><table id=\"functions-table\">");
	function_rows(f, r, 0, p->top);
	fprintf(f, "</table>\n");
	if (rt_insns) {
		fprintf(f, "<details id=\"runtime-functions\"><summary>The C runtime (loader, libc): its hottest "
			   "functions ran %.1f%% of all instructions</summary><table id=\"runtime-functions-table\">",
			r->insns ? 100.0 * (double)rt_insns / (double)r->insns : 0.0);
		function_rows(f, r, 1, p->top);
		fprintf(f, "</table></details>\n");
	}
	fprintf(f, "</section>\n");
	fprintf(f, "<section id=\"blocks\"><h2>Hot blocks</h2><table id=\"blocks-table\">");
	block_rows(f, r, 0, p->top);
	fprintf(f, "</table>\n<details id=\"runtime-blocks\"><summary>Blocks of the C runtime</summary>"
		   "<table id=\"runtime-blocks-table\">");
	block_rows(f, r, 1, p->top);
	fprintf(f, "</table></details></section>\n<section id=\"hot\"><h2>Hot functions in detail</h2>\n");
	/* the program's functions first, then the runtime's */
	size_t ncfg = 0;
	for (int rt = 0; rt < 2; rt++)
		for (size_t i = 0; i < r->n_top_functions && ncfg < MAX_CFGS; i++)
			if (r->top_functions[i].module && is_runtime(r->top_functions[i].module) == rt) {
				function_section(f, p, i);
				ncfg++;
			}
	fprintf(f, "</section>\n");
	coverage_table(f, p);
	if (p->diff)
		divergence_section(f, p);
	fprintf(f, "</body></html>\n");
	return ferror(f) ? -BTR_ERR_IO : 0;
}

int cli_report_html(const char *file, struct cli_stream *cs, const char *dir, const char *diff, unsigned top)
{
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		cli_error("%s: cannot create the directory: %m", dir);
		return EXIT_RUNTIME;
	}
	char path[PATH_MAX];
	if ((size_t)snprintf(path, sizeof(path), "%s/index.html", dir) >= sizeof(path)) {
		cli_error("%s: path too long", dir);
		return EXIT_RUNTIME;
	}
	struct cli_output out;
	int orc = cli_output_check(&out, "report", path, CLI_OUTPUT_NO_STDOUT);
	if (orc != EXIT_OK)
		return orc;
	/* 4x the entries: the page shows up to @top of the program's own and
	 * up to @top of the runtime's, which may rank above all of them. */
	struct btr_report_opts ro = { .sz = sizeof(ro), .top = top * 4 };
	struct btr_analysis *rep = NULL, *bl = NULL, *cov = NULL, *bd = NULL;
	int rc = EXIT_RUNTIME, lost = 0;
	if (btr_report_analysis_new(&ro, &rep) < 0 || btr_blocks_new(&bl) < 0 || btr_cov_new(bl, &cov) < 0 ||
	    (diff && btr_blocks_new(&bd) < 0)) {
		cli_error("out of memory");
		goto out;
	}
	struct btr_analysis *list[3] = { rep, bl, cov };
	rc = cli_views_run("report", file, cs, list, 3);
	if (rc == -EXIT_RUNTIME)
		lost = 1;
	else if (rc != EXIT_OK)
		goto out;
	if (diff) {
		rc = cli_views_run("report", diff, cs, &bd, 1);
		if (rc == -EXIT_RUNTIME)
			lost = 1;
		else if (rc != EXIT_OK)
			goto out;
	}
	const struct btr_report *r = btr_report_analysis_get(rep);
	if (!r) {
		cli_error("%s: the report could not be finished", file);
		rc = EXIT_RUNTIME;
		goto out;
	}
	struct page p = { file, diff, btr_report_get(r), bl, cov, bd, top, NULL, NULL, { 0 } };
	cli_source_rule(cs, file, &p.ao);
	struct btr_diverge_result *dv = NULL;
	if (diff) {
		/* the program's own branches: the loader and libc part ways
		 * by machine and alignment (docs/diverge.md) */
		const struct btr_report_result *res = p.res;
		const char *prog = res->n_processes && res->processes[0].path[0] ? res->processes[0].path : NULL;
		struct btr_diverge_opts dopts = { .sz = sizeof(dopts), .sopts = &cs->so, .all = 1, .max_regions = 20,
						  .modules = prog ? &prog : NULL, .n_modules = prog ? 1 : 0 };
		if (btr_diverge(file, diff, &dopts, &dv) == 0) {
			p.dv = dv;
			p.dv_module = prog;
		}
	}
	rc = cli_write_file(&out, write_page, &p);
	btr_diverge_free(dv);
	if (rc == EXIT_OK && lost)
		rc = EXIT_RUNTIME;
out:
	cli_output_discard(&out);
	btr_analysis_free(cov);
	btr_analysis_free(rep);
	btr_analysis_free(bl);
	btr_analysis_free(bd);
	return rc;
}
