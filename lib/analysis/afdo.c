/* afdo.c - an LLVM sample profile (AutoFDO) of one module from a blocks
 * analysis: the text format llvm-profdata reads and clang's
 * -fprofile-sample-use takes (docs/pgo.md).
 *
 *     function:total_samples:head_samples
 *      line_offset[.discriminator]: samples [callee:count ...]
 *      line_offset[.discriminator]: inlined_callee:total_samples
 *       line_offset[.discriminator]: samples ...
 *
 * Built as llvm-profgen builds it from LBR ranges, with exact counts in
 * place of sampled ones:
 *  - every executed instruction of the module is placed by its DWARF inline
 *    stack (dwarf_getscopes: the DW_TAG_inlined_subroutine chain up to the
 *    DW_TAG_subprogram): the outermost function is the profile's top-level
 *    entry, each inlined frame a nested callsite at the DW_AT_call_line
 *    (and DW_AT_GNU_discriminator) of its caller;
 *  - a location is (line - the frame function's DW_AT_decl_line) & 0xffff
 *    and the base discriminator of the line-table row (LLVM's prefix
 *    encoding without duplication factor and copy id);
 *  - a location's samples are the largest execution count of its
 *    instructions (llvm-profgen: "the maximum count of samples with same
 *    line location"); a frame's total is the sum of its instructions'
 *    counts, its inlined callees' included;
 *  - a call's location lists its taken targets (direct and indirect
 *    calls, callee named by its symbol in the module) with their counts;
 *    a function's head samples are the calls that entered it.
 * Names are linkage names (C++ mangled), as the compiler looks them up.
 * Nothing is sampled or scaled: counts are executions.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btr/blocks.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/image.h"
#include "btr/profile.h"
#include "internal.h"
#include "afdo_tree.h"
#include "profutil.h"

#ifndef DW_AT_GNU_discriminator
#define DW_AT_GNU_discriminator 0x2136
#endif

struct afdo {
	struct btr_analysis *blocks;
	char *module;        /* wanted module (path or base name), NULL: the program */
	char *program;       /* the first file module loaded (the default) */
	struct afdo_prof p;  /* while writing */
};

/* ---- DWARF: the inline stack of an address ----------------------------- */

#define MAX_FRAMES 64

struct frame {
	const char *name;     /* linkage name of the frame's function */
	int start;            /* its DW_AT_decl_line */
	int call_line;        /* inlined frames: where the caller called it */
	unsigned call_disc;
};

/* LLVM's base discriminator: the prefix-encoded low component
 * (DILocation::getBaseDiscriminatorFromDiscriminator without FS). */
static uint32_t base_disc(unsigned d)
{
	if (d & 1)
		return 0;
	d >>= 1;
	return (d & 0x20) ? (((d >> 1) & 0xfe0) | (d & 0x1f)) : (d & 0x1f);
}

static const char *die_linkage_name(Dwarf_Die *d)
{
	Dwarf_Attribute at;
	if (dwarf_attr_integrate(d, DW_AT_linkage_name, &at) || dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &at))
		return dwarf_formstring(&at);
	if (dwarf_attr_integrate(d, DW_AT_name, &at))
		return dwarf_formstring(&at);
	return NULL;
}

static int die_int(Dwarf_Die *d, unsigned attr, Dwarf_Word *v)
{
	Dwarf_Attribute at;
	return dwarf_attr(d, attr, &at) && dwarf_formudata(&at, v) == 0 ? 0 : -1;
}

/* The address ranges of a module's compile units: dwarf_addrdie needs
 * .debug_aranges, which clang does not emit. */
struct cu_range {
	uint64_t lo, hi;
	Dwarf_Off off;      /* the CU DIE */
};

struct dw {
	Dwarf *dw;
	int fd;
	struct cu_range *r;
	size_t n, cap;
	Dwarf_Die sub;      /* the last subprogram found (frames_at) */
	int have_sub;
};

static int cmp_cu_range(const void *x, const void *y)
{
	const struct cu_range *a = x, *b = y;
	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static int cu_index(struct dw *d, int *nomem)
{
	Dwarf_Off off = 0, next;
	size_t hsize;
	while (dwarf_nextcu(d->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		if (dwarf_offdie(d->dw, off + hsize, &cu)) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t ro = 0;
			while ((ro = dwarf_ranges(&cu, ro, &base, &lo, &hi)) > 0) {
				if (d->n == d->cap) {
					size_t nc = d->cap ? d->cap * 2 : 16;
					struct cu_range *nr = realloc(d->r, nc * sizeof(*nr));
					if (!nr) {
						*nomem = 1;
						return -BTR_ERR_NOMEM;
					}
					d->r = nr;
					d->cap = nc;
				}
				struct cu_range *nr = d->r;
				nr[d->n++] = (struct cu_range){ lo, hi, off + hsize };
			}
		}
		off = next;
	}
	if (d->n > 1)
		qsort(d->r, d->n, sizeof(*d->r), cmp_cu_range);
	return 0;
}

static int cu_at(struct dw *d, uint64_t addr, Dwarf_Die *cu)
{
	size_t lo = 0, hi = d->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->r[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ranges of different CUs do not overlap; the candidate is lo-1 */
	return lo && addr < d->r[lo - 1].hi && dwarf_offdie(d->dw, d->r[lo - 1].off, cu) ? 0 : -1;
}

static void frame_of(Dwarf_Die *die, struct frame *f)
{
	f->name = die_linkage_name(die);
	if (dwarf_decl_line(die, &f->start) != 0)
		f->start = 0;
	f->call_line = 0;
	f->call_disc = 0;
	Dwarf_Word v;
	if (dwarf_tag(die) == DW_TAG_inlined_subroutine) {
		if (die_int(die, DW_AT_call_line, &v) == 0)
			f->call_line = (int)v;
		if (die_int(die, DW_AT_GNU_discriminator, &v) == 0)
			f->call_disc = base_disc((unsigned)v);
	}
}

/* Descends from @parent into the child holding @addr: inlined
 * subroutines and lexical blocks nest, namespaces and classes hold
 * definitions (GCC's C++).  Appends the inlined frames, outermost first,
 * to @fr (@n so far). */
static int inlined_frames(Dwarf_Die *parent, uint64_t addr, struct frame *fr, int n)
{
	Dwarf_Die child;
	if (n >= MAX_FRAMES || dwarf_child(parent, &child) != 0)
		return n;
	do {
		int tag = dwarf_tag(&child);
		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) {
			if (dwarf_haspc(&child, addr) != 1)
				continue;
			if (tag == DW_TAG_inlined_subroutine)
				frame_of(&child, &fr[n++]);
			return inlined_frames(&child, addr, fr, n);
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return n;
}

/* The subprogram holding @addr below @parent (a CU, namespace, class). */
static int find_subprogram(Dwarf_Die *parent, uint64_t addr, Dwarf_Die *out, int depth)
{
	Dwarf_Die child;
	if (depth > 8 || dwarf_child(parent, &child) != 0)
		return -1;
	do {
		int tag = dwarf_tag(&child);
		if (tag == DW_TAG_subprogram) {
			if (dwarf_haspc(&child, addr) == 1) {
				*out = child;
				return 0;
			}
		} else if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
			   tag == DW_TAG_module) {
			if (find_subprogram(&child, addr, out, depth + 1) == 0)
				return 0;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return -1;
}

/* Frames of @addr, innermost first, and its line and discriminator.
 * Returns the number of frames (0: no DWARF for it).  Addresses come in
 * ascending order: the last subprogram found is tried first. */
static int frames_at(struct dw *d, uint64_t addr, struct frame *fr, int *line, uint32_t *disc)
{
	Dwarf_Die cu;
	if (cu_at(d, addr, &cu))
		return 0;
	Dwarf_Line *l = dwarf_getsrc_die(&cu, addr);
	if (!l || dwarf_lineno(l, line) != 0 || *line <= 0)
		return 0;
	unsigned dv = 0;
	dwarf_linediscriminator(l, &dv);
	*disc = base_disc(dv);
	if (!d->have_sub || dwarf_haspc(&d->sub, addr) != 1) {
		d->have_sub = find_subprogram(&cu, addr, &d->sub, 0) == 0;
		if (!d->have_sub)
			return 0;
	}
	struct frame outer[MAX_FRAMES];
	frame_of(&d->sub, &outer[0]);
	int n = inlined_frames(&d->sub, addr, outer, 1);
	for (int i = 0; i < n; i++) {
		if (!outer[i].name)
			return 0;
		fr[n - 1 - i] = outer[i];
	}
	return n;
}

static uint32_t loc_off(int line, int start)
{
	return (uint32_t)(line - start) & 0xffff;
}

/* The profile node of the innermost frame of @fr (@n frames), created
 * along the way; adds @count to every frame's total. */
static struct afdo_fs *leaf_of(struct afdo_prof *p, const struct frame *fr, int n, uint64_t count)
{
	struct afdo_fs *f = afdo_top(p, fr[n - 1].name);
	if (!f)
		return NULL;
	f->total += count;
	for (int k = n - 2; k >= 0; k--) {
		/* frame k was inlined into frame k+1 at its call line */
		f = afdo_site(p, f, loc_off(fr[k].call_line, fr[k + 1].start), fr[k].call_disc, fr[k].name);
		if (!f)
			return NULL;
		f->total += count;
	}
	return f;
}

/* ---- building ----------------------------------------------------------- */

/* The callee named for a call to link address @to of module @m: its
 * symbol's linkage name if @to starts a symbol function, else NULL. */
static const char *callee_name(struct btr_analysis *bl, uint32_t m, uint64_t to)
{
	struct btr_image *img = btr_blocks_module_image(bl, m);
	struct btr_function fn;
	if (!img || btr_image_function(img, to, &fn) || fn.start != to || fn.source != BTR_FUNC_SYMBOL)
		return NULL;
	return fn.raw_name;
}

static void dw_close(struct dw *d)
{
	if (d->dw)
		dwarf_end(d->dw);
	if (d->fd >= 0)
		close(d->fd);
	free(d->r);
}

static int dw_open(struct dw *d, const char *path, int *nomem)
{
	*d = (struct dw){ .fd = open(path, O_RDONLY | O_CLOEXEC) };
	if (d->fd < 0)
		return -BTR_ERR_NO_DEBUGINFO;
	d->dw = dwarf_begin(d->fd, DWARF_C_READ);
	int rc = d->dw ? cu_index(d, nomem) : -BTR_ERR_NO_DEBUGINFO;
	if (rc == 0 && !d->n)
		rc = -BTR_ERR_NO_DEBUGINFO;
	if (rc)
		dw_close(d);
	return rc;
}

static int build(struct afdo *a, const struct btr_blocks_result *r, uint32_t m, struct btr_image *img, struct dw *dw)
{
	struct afdo_prof *p = &a->p;
	struct btr_insn_count *ic = NULL;
	size_t nic = 0;
	int rc = btr_blocks_insn_counts(r, m, img, &ic, &nic);
	if (rc < 0)
		return rc;
	struct frame fr[MAX_FRAMES];
	for (size_t i = 0; i < nic && !p->nomem; i++) {
		int line;
		uint32_t disc;
		int n = ic[i].count ? frames_at(dw, ic[i].addr, fr, &line, &disc) : 0;
		if (n <= 0)
			continue;
		struct afdo_fs *f = leaf_of(p, fr, n, ic[i].count);
		struct afdo_body *b = f ? afdo_line(p, f, loc_off(line, fr[0].start), disc) : NULL;
		if (b && b->count < ic[i].count)
			b->count = ic[i].count;
	}
	free(ic);
	/* calls: targets at the call's location, head samples of the callee */
	for (size_t i = 0; i < r->n_edges && !p->nomem; i++) {
		const struct btr_edge *e = &r->edges[i];
		if ((e->kind != BTR_KIND_CALL && e->kind != BTR_KIND_CALL_IND) || !e->taken || e->to_module != m)
			continue;
		const char *callee = callee_name(a->blocks, m, e->to);
		if (!callee)
			continue;
		struct afdo_fs *cf = afdo_top(p, callee);
		if (cf)
			cf->head += e->count;
		if (e->from_module != m)
			continue;
		int line;
		uint32_t disc;
		int n = frames_at(dw, e->from, fr, &line, &disc);
		if (n <= 0)
			continue;
		struct afdo_fs *f = leaf_of(p, fr, n, 0);
		struct afdo_body *b = f ? afdo_line(p, f, loc_off(line, fr[0].start), disc) : NULL;
		if (b)
			afdo_target(p, b, callee, e->count);
	}
	return p->nomem ? -BTR_ERR_NOMEM : 0;
}

static int want(const struct afdo *a, const struct btr_blocks_module *bm)
{
	const char *w = a->module ? a->module : a->program;
	return w && (!strcmp(w, bm->path) || !strcmp(w, bm->name));
}

static int a_write(void *state, FILE *out, const char *format)
{
	struct afdo *a = state;
	if (format && strcmp(format, "text"))
		return -BTR_ERR_INVAL;
	const struct btr_blocks_result *r = btr_blocks_get(a->blocks);
	if (!r)
		return -BTR_ERR_INVAL;
	uint32_t m = 0;
	while (m < r->n_modules && !want(a, &r->modules[m]))
		m++;
	if (m == r->n_modules)
		return -BTR_ERR_NOT_FOUND;
	struct btr_image *img = btr_blocks_module_image(a->blocks, m);
	if (!img)
		return -BTR_ERR_NOENT;
	afdo_free(&a->p);
	struct dw dw;
	int rc = dw_open(&dw, r->modules[m].path, &a->p.nomem);
	if (rc)
		return rc;
	rc = build(a, r, m, img, &dw);
	if (rc == 0)
		rc = afdo_write(&a->p, out);
	afdo_free(&a->p);
	dw_close(&dw);
	return rc;
}

static int afdo_event(void *state, const struct btr_stream_event *ev)
{
	struct afdo *a = state;
	if (ev->type != BTR_SEV_MODULE_LOAD || a->program || a->module)
		return 0;
	const struct btr_rec_module *m = &ev->rec->u.module;
	const char *path = ev->path ? ev->path : m->path;
	if (m->pid == UINT32_MAX || !prof_is_program(path))
		return 0;
	a->program = strdup(path);
	return a->program ? 0 : -BTR_ERR_NOMEM;
}

static void afdo_destroy(void *state)
{
	struct afdo *a = state;
	if (!a)
		return;
	afdo_free(&a->p);
	free(a->module);
	free(a->program);
	free(a);
}

static const char *const afdo_formats[] = { "text", NULL };

const struct btr_analysis_ops btr__afdo_ops = {
	.name = "afdo",
	.event = afdo_event,
	.write = a_write,
	.destroy = afdo_destroy,
	.formats = afdo_formats,
};

int btr_afdo_new(struct btr_analysis *blocks, const struct btr_profile_opts *opts, struct btr_analysis **out)
{
	if (!blocks || !out || !BTR_OPTS_VALID(opts, sizeof(size_t)))
		return -BTR_ERR_INVAL;
	struct afdo *a = calloc(1, sizeof(*a));
	if (!a)
		return -BTR_ERR_NOMEM;
	a->blocks = blocks;
	const char *module = opts ? BTR_OPTS_GET(opts, module, NULL) : NULL;
	if (module && !(a->module = strdup(module))) {
		free(a);
		return -BTR_ERR_NOMEM;
	}
	return btr_analysis_new(&btr__afdo_ops, a, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__afdo_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_profile_opts o = { .sz = sizeof(o), .module = a->module };
	return btr_afdo_new(a->blocks, &o, out);
}
