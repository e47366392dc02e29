/* cov.c - coverage files from the blocks analysis (btr/cov.h).
 *
 * drcov: DynamoRIO's drcov version 2 layout - a text header, the module
 * table ("Module Table: version 2, count N", "Columns: id, base, end,
 * entry, checksum, timestamp, path" and one line per module), then
 * "BB Table: N bbs" and N binary entries {u32 start, u16 size, u16 mod_id}
 * (little endian), start relative to the module's base.  Lighthouse,
 * bncov and Cartographer read exactly that.
 *
 * lcov and Cobertura go through DWARF: the line-table rows of a module are
 * the lines that generated code; each row's count is the executions of the
 * instruction at its address (from the executed blocks, decoded), a line's
 * count the maximum over its rows.  Branches: every conditional branch
 * that ran, with its taken and not-taken counts from the edges, and every
 * indirect jump that ran to targets inside its function (a switch's jump
 * table) with one entry per target that ran, so that a switch shows its
 * case arcs as gcov does.  Functions sit on their DWARF declaration line
 * (DW_AT_decl_line, as gcov and lcov), else on the line of their entry.
 * A Cobertura <method> lists every line of its function (the line-table
 * rows in its address range) and its branches.
 */
#include "btr/cov.h"
#include "btr/blocks.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/insn.h"
#include "btr/text.h"

#include "elf/elf_priv.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cov {
	struct btr_analysis *blocks;
	char *module;   /* only this module (path or base name), or NULL */
};

static int want_module(const struct cov *c, const struct btr_blocks_module *m)
{
	return !c->module || !strcmp(c->module, m->path) || !strcmp(c->module, m->name);
}

static uint64_t count_at(const struct btr_insn_count *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].addr == addr ? v[lo].count : 0;
}

/* One coverage record; sorted by file, kind, line. */
enum { R_FN = 0, R_BR = 1, R_LINE = 2 };
struct rec {
	const char *file;     /* owned by a module image */
	int kind, line;
	uint64_t count, count2;  /* R_BR: taken, not taken; R_BR with
				  * to != 0: one target of an indirect jump
				  * (count) */
	const char *name;     /* R_FN (owned by a module image) */
	uint64_t addr;        /* R_FN: start; R_BR: the branch; R_LINE: the row */
	uint64_t end;         /* R_FN: end of the function */
	uint64_t to;          /* R_BR: the indirect jump's target, else 0 */
};

/* DWARF declaration line of a function, by link address of its entry. */
struct decl {
	uint64_t addr;
	int line;
	const char *file;     /* owned by the module's Dwarf (recs.dw) */
};

struct recs {
	struct rec *v;
	size_t n, cap;
	int nomem;
	struct rec *rows;     /* every line-table row, by address (Cobertura
			       * methods), rows[0..n_rows) */
	size_t n_rows;
	struct decl *decl;    /* while collecting a module: its functions' */
	size_t n_decl, cap_decl;
	/* while collecting */
	const struct btr_insn_count *ac;
	size_t n_ac;
	struct btr_image *img;
	uint64_t lo, hi;
};

static void push(struct recs *rs, struct rec r)
{
	if (rs->n == rs->cap) {
		size_t ncap = rs->cap ? rs->cap * 2 : 1024;
		struct rec *nv = realloc(rs->v, ncap * sizeof(*nv));
		if (!nv) {
			rs->nomem = 1;
			return;
		}
		rs->v = nv;
		rs->cap = ncap;
	}
	rs->v[rs->n++] = r;
}

static int on_row(void *ctx, uint64_t addr, const char *file, int line)
{
	struct recs *rs = ctx;
	push(rs, (struct rec){ .file = file, .kind = R_LINE, .line = line,
			       .count = count_at(rs->ac, rs->n_ac, addr), .addr = addr });
	return rs->nomem;
}

static void decl_push(struct recs *rs, uint64_t addr, int line, const char *file)
{
	if (rs->n_decl == rs->cap_decl) {
		size_t nc = rs->cap_decl ? rs->cap_decl * 2 : 256;
		struct decl *nd = realloc(rs->decl, nc * sizeof(*nd));
		if (!nd) {
			rs->nomem = 1;
			return;
		}
		rs->decl = nd;
		rs->cap_decl = nc;
	}
	rs->decl[rs->n_decl++] = (struct decl){ addr, line, file };
}

/* The subprograms with code under @die (namespaces and classes
 * included): their entry address and declaration line. */
static void decl_walk(struct recs *rs, Dwarf_Die *die, int depth)
{
	Dwarf_Die child;
	if (depth > 16 || dwarf_child(die, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);
		if (tag == DW_TAG_subprogram) {
			int line;
			const char *file = dwarf_decl_file(&child);
			if (dwarf_decl_line(&child, &line) != 0 || line <= 0 || !file)
				continue;
			/* its entry; a function in parts (DW_AT_ranges: a hot
			 * and a .cold part) at the start of each */
			Dwarf_Addr lo, base, start, end;
			ptrdiff_t off = 0;
			if (dwarf_lowpc(&child, &lo) == 0)
				decl_push(rs, lo, line, file);
			else
				while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0)
					decl_push(rs, start, line, file);
		} else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
			   tag == DW_TAG_module) {
			decl_walk(rs, &child, depth + 1);
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

static int cmp_decl(const void *x, const void *y)
{
	const struct decl *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* Declaration lines of the functions of ELF file @path (its own DWARF;
 * none from a separate debug file: functions then sit on their entry's
 * line).  Returns the Dwarf that owns the file names (dwarf_end, then
 * elf_end *@elf), or NULL. */
static Dwarf *decl_lines(struct recs *rs, const char *path, Elf **elf)
{
	rs->n_decl = 0;
	*elf = NULL;
	if (!path || btr__elf_open(path, elf) < 0)
		return NULL;
	Dwarf *dw = dwarf_begin_elf(*elf, DWARF_C_READ, NULL);
	if (!dw) {
		elf_end(*elf);
		*elf = NULL;
		return NULL;
	}
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		if (dwarf_offdie(dw, off + hsize, &cu))
			decl_walk(rs, &cu, 0);
		off = next;
	}
	if (rs->n_decl)
		qsort(rs->decl, rs->n_decl, sizeof(*rs->decl), cmp_decl);
	return dw;
}

static const struct decl *decl_at(const struct recs *rs, uint64_t addr)
{
	size_t lo = 0, hi = rs->n_decl;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rs->decl[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < rs->n_decl && rs->decl[lo].addr == addr ? &rs->decl[lo] : NULL;
}

static int same_file(const char *a, const char *b)
{
	if (!strcmp(a, b))
		return 1;
	const char *x = strrchr(a, '/'), *y = strrchr(b, '/');
	return !strcmp(x ? x + 1 : a, y ? y + 1 : b);
}

static int on_fn(void *ctx, const struct btr_function *fn)
{
	struct recs *rs = ctx;
	const char *file;
	int line;
	if (fn->source == BTR_FUNC_PLT || btr_image_line(rs->img, fn->start, &file, &line) != 0)
		return 0;
	/* gcov's line: the declaration's, when it is in the same file */
	const struct decl *d = decl_at(rs, fn->start - fn->bias);
	if (d && same_file(d->file, file))
		line = d->line;
	push(rs, (struct rec){ .file = file, .kind = R_FN, .line = line,
			       .count = count_at(rs->ac, rs->n_ac, fn->start), .name = fn->name,
			       .addr = fn->start, .end = fn->end });
	return rs->nomem;
}

static int cmp_addr(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int cmp_rec(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;
	int c = strcmp(a->file, b->file);
	if (c)
		return c;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	return a->to < b->to ? -1 : a->to > b->to;
}

static void recs_free(struct recs *rs)
{
	free(rs->v);
	free(rs->rows);
	free(rs->decl);
}

/* Branch entries of record @r: valid and covered. */
static unsigned br_valid(const struct rec *r)
{
	return r->to ? 1 : 2;
}

static unsigned br_covered(const struct rec *r)
{
	return r->to ? r->count > 0 : (r->count > 0) + (r->count2 > 0);
}

/* Collects records of every module with DWARF; sorted, lines merged
 * (max). */
static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

#define MAX_SPANS 16

/* The link-address spans of module @m that coverage covers: the whole
 * module, or in a trace recorded with --ip-filter only its ranges (the
 * rest was not traced: neither covered nor uncovered).  Returns the
 * number of spans in @span (0: nothing of @m). */
static size_t spans_of(const struct btr_blocks_result *r, const struct btr_blocks_module *m, uint64_t span[][2])
{
	uint64_t lo = m->base, hi = m->base + m->size;
	if (!r->n_filter) {
		span[0][0] = lo;
		span[0][1] = hi;
		return 1;
	}
	size_t n = 0;
	for (size_t i = 0; i < r->n_filter && n < MAX_SPANS; i++) {
		const struct btr_blocks_range *f = &r->filter[i];
		if (f->offsets || !f->path[0] ||
		    (strcmp(f->path, m->path) && strcmp(base_name(f->path), m->name)))
			continue;
		uint64_t a = f->start > lo ? f->start : lo, b = f->end + 1 < hi ? f->end + 1 : hi;
		if (a < b) {
			span[n][0] = a;
			span[n][1] = b;
			n++;
		}
	}
	return n;
}

static int in_spans(uint64_t a, uint64_t span[][2], size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a >= span[i][0] && a < span[i][1])
			return 1;
	return 0;
}

static int collect(const struct cov *c, struct recs *rs)
{
	struct btr_analysis *bl = c->blocks;
	const struct btr_blocks_result *r = btr_blocks_get(bl);
	if (!r)
		return -BTR_ERR_INVAL;
	for (uint32_t m = 0; m < r->n_modules; m++) {
		struct btr_image *img = want_module(c, &r->modules[m]) ? btr_blocks_module_image(bl, m) : NULL;
		if (!img)
			continue;
		uint64_t span[MAX_SPANS][2];
		size_t n_span = spans_of(r, &r->modules[m], span);
		if (!n_span)
			continue;
		size_t n_ac = 0;
		struct btr_insn_count *ac = NULL;
		if (btr_blocks_insn_counts(r, m, img, &ac, &n_ac) < 0)
			return -BTR_ERR_NOMEM;
		rs->ac = ac;
		rs->n_ac = n_ac;
		rs->img = img;
		size_t row0 = rs->n;
		int rc = 0;
		for (size_t k = 0; k < n_span && rc == 0; k++)
			rc = btr_image_foreach_line(img, span[k][0], span[k][1], on_row, rs);
		if (rc == 0 && !rs->nomem) {
			/* keep the rows by address for the methods of Cobertura */
			size_t nr = rs->n - row0;
			struct rec *nv = realloc(rs->rows, (rs->n_rows + nr) * sizeof(*nv));
			if (!nv) {
				free(ac);
				return -BTR_ERR_NOMEM;
			}
			rs->rows = nv;
			memcpy(rs->rows + rs->n_rows, rs->v + row0, nr * sizeof(*nv));
			rs->n_rows += nr;
			Elf *elf;
			Dwarf *dw = decl_lines(rs, r->modules[m].path, &elf);
			for (size_t k = 0; k < n_span; k++)
				btr_image_foreach_function(img, span[k][0], span[k][1], on_fn, rs);
			if (dw)
				dwarf_end(dw);
			if (elf)
				elf_end(elf);
			/* Conditional branches that ran; indirect jumps that
			 * ran to targets in their own function. */
			for (size_t i = btr_edges_lower_bound(r, m, 0);
			     i < r->n_edges && r->edges[i].from_module == m;) {
				uint64_t from = r->edges[i].from, t = 0, nt = 0;
				size_t first = i;
				int kind = r->edges[i].kind;
				int cond = btr_branch_kind_class((enum btr_branch_kind)kind) == BTR_LBR_JCC;
				for (; i < r->n_edges && r->edges[i].from_module == m && r->edges[i].from == from; i++) {
					if (r->edges[i].taken)
						t += r->edges[i].count;
					else
						nt += r->edges[i].count;
				}
				const char *file;
				int line;
				if ((!cond && kind != BTR_KIND_JMP_IND) || !in_spans(from, span, n_span) ||
				    btr_image_line(img, from, &file, &line) != 0)
					continue;
				if (cond) {
					push(rs, (struct rec){ .file = file, .kind = R_BR, .line = line, .count = t,
							       .count2 = nt, .addr = from });
					continue;
				}
				struct btr_function fn;
				if (btr_image_function(img, from, &fn) != 0)
					continue;
				/* edges are sorted by target: one entry per target */
				for (size_t k = first; k < i; k++) {
					const struct btr_edge *e = &r->edges[k];
					if (e->taken && e->to_module == m && e->to >= fn.start && e->to < fn.end && e->to)
						push(rs, (struct rec){ .file = file, .kind = R_BR, .line = line,
								       .count = e->count, .addr = from, .to = e->to });
				}
			}
		}
		free(ac);
		if (rs->nomem)
			return -BTR_ERR_NOMEM;
	}
	free(rs->decl);
	rs->decl = NULL;
	if (rs->n_rows)
		qsort(rs->rows, rs->n_rows, sizeof(*rs->rows), cmp_addr);
	if (rs->n)
		qsort(rs->v, rs->n, sizeof(*rs->v), cmp_rec);
	/* Merge line records: one per (file, line), the max count. */
	size_t k = 0;
	for (size_t i = 0; i < rs->n; i++) {
		struct rec *x = &rs->v[i];
		if (k && x->kind == R_LINE && rs->v[k - 1].kind == R_LINE && rs->v[k - 1].line == x->line &&
		    !strcmp(rs->v[k - 1].file, x->file)) {
			if (x->count > rs->v[k - 1].count)
				rs->v[k - 1].count = x->count;
			continue;
		}
		/* Functions: one per name and file (aliases, cold parts). */
		if (k && x->kind == R_FN && rs->v[k - 1].kind == R_FN && !strcmp(rs->v[k - 1].name, x->name) &&
		    !strcmp(rs->v[k - 1].file, x->file))
			continue;
		rs->v[k++] = *x;
	}
	rs->n = k;
	return 0;
}

/* ---- drcov ---- */

static int write_drcov(const struct cov *c, FILE *out)
{
	struct btr_analysis *bl = c->blocks;
	const struct btr_blocks_result *r = btr_blocks_get(bl);
	if (!r)
		return -BTR_ERR_INVAL;
	size_t nbb = 0;
	for (size_t i = 0; i < r->n_blocks; i++)
		nbb += r->blocks[i].module != BTR_BLOCKS_NO_MODULE && r->blocks[i].module < 0xffff &&
		       want_module(c, &r->modules[r->blocks[i].module]);
	fprintf(out, "DRCOV VERSION: 2\nDRCOV FLAVOR: btr\n");
	fprintf(out, "Module Table: version 2, count %zu\n", r->n_modules);
	fprintf(out, "Columns: id, base, end, entry, checksum, timestamp, path\n");
	for (size_t m = 0; m < r->n_modules; m++) {
		fprintf(out, "%3zu, 0x%016" PRIx64 ", 0x%016" PRIx64 ", 0x%016" PRIx64 ", 0x%08x, 0x%08x, ", m,
			r->modules[m].base, r->modules[m].base + r->modules[m].size, (uint64_t)0, 0u, 0u);
		btr_text_field(out, r->modules[m].path, NULL);
		fputc('\n', out);
	}
	fprintf(out, "BB Table: %zu bbs\n", nbb);
	for (size_t i = 0; i < r->n_blocks; i++) {
		const struct btr_block *b = &r->blocks[i];
		if (b->module == BTR_BLOCKS_NO_MODULE || b->module >= 0xffff ||
		    !want_module(c, &r->modules[b->module]))
			continue;
		/* size: through the end of the block's last instruction */
		struct btr_image *img = btr_blocks_module_image(bl, b->module);
		struct btr_insn in;
		uint64_t len = 1;
		if (img && btr_insn_decode_image(img, b->end, BTR_MODE_64, &in) > 0)
			len = in.len;
		uint64_t size = b->end - b->start + len;
		uint32_t start = (uint32_t)(b->start - r->modules[b->module].base);
		uint16_t sz = size > 0xffff ? 0xffff : (uint16_t)size, id = (uint16_t)b->module;
		uint8_t e[8] = { (uint8_t)start, (uint8_t)(start >> 8), (uint8_t)(start >> 16), (uint8_t)(start >> 24),
				 (uint8_t)sz, (uint8_t)(sz >> 8), (uint8_t)id, (uint8_t)(id >> 8) };
		fwrite(e, 1, sizeof(e), out);
	}
	return ferror(out) ? -BTR_ERR_IO : 0;
}

/* ---- lcov ---- */

/* lcov reads a function's name up to the next comma (genhtml's
 * FN:(\\d+),([^,]+)): a comma in a name becomes `?` too (docs/cov.md) */
#define LCOV_NAME_SPECIAL ","

static int write_lcov(const struct cov *c, FILE *out)
{
	struct recs rs = { 0 };
	int rc = collect(c, &rs);
	if (rc < 0) {
		recs_free(&rs);
		return rc;
	}
	fprintf(out, "TN:\n");
	for (size_t i = 0; i < rs.n;) {
		const char *file = rs.v[i].file;
		size_t j = i;
		while (j < rs.n && !strcmp(rs.v[j].file, file))
			j++;
		fputs("SF:", out);
		btr_text_field(out, file, NULL);
		fputc('\n', out);
		unsigned fnf = 0, fnh = 0, brf = 0, brh = 0, lf = 0, lh = 0, blk = 0;
		for (size_t k = i; k < j; k++)
			if (rs.v[k].kind == R_FN)
			{
				fprintf(out, "FN:%d,", rs.v[k].line);
				btr_text_field(out, rs.v[k].name, LCOV_NAME_SPECIAL);
				fputc('\n', out);
			}
		for (size_t k = i; k < j; k++)
			if (rs.v[k].kind == R_FN) {
				fprintf(out, "FNDA:%" PRIu64 ",", rs.v[k].count);
				btr_text_field(out, rs.v[k].name, LCOV_NAME_SPECIAL);
				fputc('\n', out);
				fnf++;
				fnh += rs.v[k].count > 0;
			}
		fprintf(out, "FNF:%u\nFNH:%u\n", fnf, fnh);
		unsigned arm = 0;
		int first = 1;
		for (size_t k = i; k < j; k++) {
			const struct rec *b = &rs.v[k];
			if (b->kind != R_BR)
				continue;
			/* blocks numbered from 0 on each line, as geninfo
			 * numbers gcov's, so that `lcov -a` adds up the
			 * branches of lines both have alike.  An indirect
			 * jump: one branch per target (address order), all in
			 * one block.  Records of a kind are adjacent, so
			 * rs.v[k - 1] is a branch unless first. */
			int newline = first || rs.v[k - 1].line != b->line;
			int same = !newline && b->to && rs.v[k - 1].to && rs.v[k - 1].addr == b->addr;
			if (newline)
				blk = 0;
			else if (!same)
				blk++;
			arm = same ? arm + 1 : 0;
			first = 0;
			if (b->to)
				fprintf(out, "BRDA:%d,%u,%u,%" PRIu64 "\n", b->line, blk, arm, b->count);
			else
				fprintf(out, "BRDA:%d,%u,0,%" PRIu64 "\nBRDA:%d,%u,1,%" PRIu64 "\n", b->line, blk,
					b->count, b->line, blk, b->count2);
			brf += br_valid(b);
			brh += br_covered(b);
		}
		fprintf(out, "BRF:%u\nBRH:%u\n", brf, brh);
		for (size_t k = i; k < j; k++)
			if (rs.v[k].kind == R_LINE) {
				fprintf(out, "DA:%d,%" PRIu64 "\n", rs.v[k].line, rs.v[k].count);
				lf++;
				lh += rs.v[k].count > 0;
			}
		fprintf(out, "LF:%u\nLH:%u\nend_of_record\n", lf, lh);
		i = j;
	}
	recs_free(&rs);
	return ferror(out) ? -BTR_ERR_IO : 0;
}

/* ---- Cobertura ---- */

static double rate(unsigned a, unsigned b)
{
	return b ? (double)a / b : 1.0;
}

/* A <line> element; its branches: those of records [i, j) on @line with
 * addresses in [lo, hi). */
static void write_line(FILE *out, const struct recs *rs, size_t i, size_t j, int line, uint64_t hits, uint64_t lo,
		       uint64_t hi, const char *indent)
{
	unsigned tb = 0, cb = 0;
	for (size_t q = i; q < j; q++)
		if (rs->v[q].kind == R_BR && rs->v[q].line == line && rs->v[q].addr >= lo && rs->v[q].addr < hi) {
			tb += br_valid(&rs->v[q]);
			cb += br_covered(&rs->v[q]);
		}
	fprintf(out, "%s<line number=\"%d\" hits=\"%" PRIu64 "\"", indent, line, hits);
	if (tb)
		fprintf(out, " branch=\"true\" condition-coverage=\"%u%% (%u/%u)\"", cb * 100 / tb, cb, tb);
	else
		fprintf(out, " branch=\"false\"");
	fprintf(out, "/>\n");
}

struct lcount {
	int line;
	uint64_t count;
};

static int cmp_lcount(const void *x, const void *y)
{
	const struct lcount *a = x, *b = y;
	return a->line < b->line ? -1 : a->line > b->line;
}

/* A <method>: every line of the function @f (the rows of its file in its
 * address range, a line's hits the maximum over them) and its branches
 * (records [i, j) of its file). */
static int write_method(FILE *out, const struct recs *rs, size_t i, size_t j, const struct rec *f)
{
	size_t lo = 0, hi = rs->n_rows, n = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rs->rows[mid].addr < f->addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t first = lo;
	for (size_t q = first; q < rs->n_rows && rs->rows[q].addr < f->end; q++)
		n++;
	struct lcount *lc = malloc((n ? n : 1) * sizeof(*lc));
	if (!lc)
		return -BTR_ERR_NOMEM;
	size_t nl = 0;
	for (size_t q = first; q < first + n; q++)
		if (!strcmp(rs->rows[q].file, f->file))
			lc[nl++] = (struct lcount){ rs->rows[q].line, rs->rows[q].count };
	qsort(lc, nl, sizeof(*lc), cmp_lcount);
	size_t k = 0;
	for (size_t q = 0; q < nl; q++) {
		if (k && lc[k - 1].line == lc[q].line) {
			if (lc[q].count > lc[k - 1].count)
				lc[k - 1].count = lc[q].count;
			continue;
		}
		lc[k++] = lc[q];
	}
	nl = k;
	unsigned lv = (unsigned)nl, lcov = 0, bv = 0, bc = 0;
	for (size_t q = 0; q < nl; q++)
		lcov += lc[q].count > 0;
	for (size_t q = i; q < j; q++)
		if (rs->v[q].kind == R_BR && rs->v[q].addr >= f->addr && rs->v[q].addr < f->end) {
			bv += br_valid(&rs->v[q]);
			bc += br_covered(&rs->v[q]);
		}
	fprintf(out, "            <method name=\"");
	btr_xml_str(out, f->name);
	fprintf(out, "\" signature=\"\" line-rate=\"%.4f\" branch-rate=\"%.4f\" complexity=\"0\">\n"
		     "              <lines>\n", rate(lcov, lv), rate(bc, bv));
	for (size_t q = 0; q < nl; q++)
		write_line(out, rs, i, j, lc[q].line, lc[q].count, f->addr, f->end, "                ");
	fprintf(out, "              </lines>\n            </method>\n");
	free(lc);
	return 0;
}

static int write_cobertura(const struct cov *c, FILE *out)
{
	struct recs rs = { 0 };
	int rc = collect(c, &rs);
	if (rc < 0) {
		recs_free(&rs);
		return rc;
	}
	unsigned lv = 0, lc = 0, bv = 0, bc = 0;
	for (size_t k = 0; k < rs.n; k++) {
		if (rs.v[k].kind == R_LINE) {
			lv++;
			lc += rs.v[k].count > 0;
		} else if (rs.v[k].kind == R_BR) {
			bv += br_valid(&rs.v[k]);
			bc += br_covered(&rs.v[k]);
		}
	}
	fprintf(out, "<?xml version=\"1.0\" ?>\n"
		     "<!DOCTYPE coverage SYSTEM \"http://cobertura.sourceforge.net/xml/coverage-04.dtd\">\n");
	fprintf(out, "<coverage line-rate=\"%.4f\" branch-rate=\"%.4f\" lines-covered=\"%u\" lines-valid=\"%u\" "
		     "branches-covered=\"%u\" branches-valid=\"%u\" complexity=\"0\" version=\"btr\" "
		     "timestamp=\"%lld\">\n",
		rate(lc, lv), rate(bc, bv), lc, lv, bc, bv, (long long)time(NULL));
	fprintf(out, "  <sources>\n    <source>/</source>\n  </sources>\n  <packages>\n");
	fprintf(out, "    <package name=\"btr\" line-rate=\"%.4f\" branch-rate=\"%.4f\" complexity=\"0\">\n"
		     "      <classes>\n", rate(lc, lv), rate(bc, bv));
	for (size_t i = 0; i < rs.n;) {
		const char *file = rs.v[i].file;
		size_t j = i;
		unsigned flv = 0, flc = 0, fbv = 0, fbc = 0;
		while (j < rs.n && !strcmp(rs.v[j].file, file)) {
			if (rs.v[j].kind == R_LINE) {
				flv++;
				flc += rs.v[j].count > 0;
			} else if (rs.v[j].kind == R_BR) {
				fbv += br_valid(&rs.v[j]);
				fbc += br_covered(&rs.v[j]);
			}
			j++;
		}
		const char *base = strrchr(file, '/');
		fprintf(out, "        <class name=\"");
		btr_xml_str(out, base ? base + 1 : file);
		fprintf(out, "\" filename=\"");
		btr_xml_str(out, file[0] == '/' ? file + 1 : file);
		fprintf(out, "\" line-rate=\"%.4f\" branch-rate=\"%.4f\" complexity=\"0\">\n          <methods>\n",
			rate(flc, flv), rate(fbc, fbv));
		for (size_t k = i; k < j; k++)
			if (rs.v[k].kind == R_FN && write_method(out, &rs, i, j, &rs.v[k]) < 0) {
				recs_free(&rs);
				return -BTR_ERR_NOMEM;
			}
		fprintf(out, "          </methods>\n          <lines>\n");
		for (size_t k = i; k < j; k++)
			if (rs.v[k].kind == R_LINE)
				write_line(out, &rs, i, j, rs.v[k].line, rs.v[k].count, 0, UINT64_MAX, "            ");
		fprintf(out, "          </lines>\n        </class>\n");
		i = j;
	}
	fprintf(out, "      </classes>\n    </package>\n  </packages>\n</coverage>\n");
	recs_free(&rs);
	return ferror(out) ? -BTR_ERR_IO : 0;
}

static int cov_write(void *state, FILE *out, const char *format)
{
	struct cov *c = state;
	if (!format || !strcmp(format, "drcov"))
		return write_drcov(c, out);
	if (!strcmp(format, "lcov"))
		return write_lcov(c, out);
	if (!strcmp(format, "cobertura"))
		return write_cobertura(c, out);
	return -BTR_ERR_INVAL;
}

static void cov_destroy(void *state)
{
	struct cov *c = state;
	if (c)
		free(c->module);
	free(c);
}

static const char *const cov_formats[] = { "drcov", "lcov", "cobertura", NULL };

const struct btr_analysis_ops btr__cov_ops = {
	.name = "cov",
	.write = cov_write,
	.destroy = cov_destroy,
	.formats = cov_formats,
};

int btr_cov_new(struct btr_analysis *blocks, struct btr_analysis **out)
{
	if (!blocks || !out)
		return -BTR_ERR_INVAL;
	struct cov *c = calloc(1, sizeof(*c));
	if (!c)
		return -BTR_ERR_NOMEM;
	c->blocks = blocks;
	return btr__analysis_new_view(&btr__cov_ops, c, blocks, out);
}

int btr_cov_set_module(struct btr_analysis *a, const char *module)
{
	if (btr_analysis_ops(a) != &btr__cov_ops)
		return -BTR_ERR_INVAL;
	struct cov *c = btr_analysis_state(a);
	char *m = module ? strdup(module) : NULL;
	if (module && !m)
		return -BTR_ERR_NOMEM;
	free(c->module);
	c->module = m;
	return 0;
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__cov_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	int rc = btr_cov_new(a->blocks, out);
	if (rc == 0 && a->module && (rc = btr_cov_set_module(*out, a->module)) < 0) {
		btr_analysis_free(*out);
		*out = NULL;
	}
	return rc;
}
