/* bolt.c - BOLT's branch profile of one module: the fdata format perf2bolt
 * writes, or the pre-aggregated format llvm-bolt reads with -pa
 * (btr/profile.h, docs/bolt.md).
 *
 * fdata lines: "1 FUNC OFF 1 FUNC OFF MISPREDS COUNT" (hex offsets from
 * the function's start; "0 [unknown] 0" for the side outside the module),
 * one per taken branch, plus one per not-taken conditional branch going
 * to its fall-through (BOLT's intra-function fall-through edge).
 * Pre-aggregated lines: "B FROM TO COUNT MISPREDS" for taken branches and
 * "F START END COUNT" for the straight-line ranges between them (from a
 * branch target to the next taken branch of the thread), addresses as hex
 * offsets from the module's load base.
 *
 * Counted branches (btr_analysis_ops.counts, the PT decoder's aggregated
 * runs: docs/pt-decode.md) give the same taken and not-taken counts, so the
 * same fdata.  Their runs end at every branch, so the pre-aggregated ranges
 * become finer: a run ending in a not-taken conditional is the range from
 * its start to the conditional's fall-through address (the next block's
 * start), one ending in a taken branch the range up to that branch.  BOLT
 * turns a range into the fall-through edges between the consecutive basic
 * blocks it covers (llvm-bolt's DataAggregator::doTrace/recordTrace), and
 * the finer ranges of one straight-line stretch cover exactly the edges of
 * the whole one, each once: the same profile (tests/cli_bolt_counts.sh
 * compares BOLT's profiles of both forms).
 *
 * Function names in fdata are BOLT's: a local (STB_LOCAL) symbol is
 * "name/N", where N numbers the local symbols of that name in the
 * module's .symtab - every type, FILE symbols and those at address 0 or
 * outside allocated sections left out - in address order from 1
 * (llvm-bolt's RewriteInstance::discoverFileObjects and NameResolver:
 * perf2bolt writes "sq/1" for `static int sq(int)`, and llvm-bolt matches
 * no other spelling of a local's primary name).  Only the stream's branches are
 * needed, not the call stacks; the tables grow with the distinct branches
 * seen (code size), never with the trace.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "registry.h"
#include "btr/image.h"
#include "btr/profile.h"
#include "elf/elf_priv.h"
#include "internal.h"
#include "profutil.h"

#include <gelf.h>

struct bent {
	uint64_t a, b;       /* from, to (B); start, end (F) */
	uint64_t count, mispred;
	uint8_t type;        /* 0 empty, 'B' taken, 'N' not-taken jcc, 'F' range */
};

struct bthread {
	uint32_t tid;
	uint64_t start;      /* where the current straight-line range began, 0 if unknown */
};

struct module {
	uint64_t start, end, bias;
	uint32_t pid;
	int found;
	char *path;          /* the file, for its local symbols */
};

/* A local symbol of the module and its BOLT number (the N of "name/N"). */
struct local {
	uint64_t addr;       /* link address */
	const char *name;    /* in the ELF's string table (bolt.elf) */
	unsigned func;       /* STT_FUNC/IFUNC: first among equal addresses */
	size_t index;        /* .symtab order, the last tie-break */
	unsigned n;
};

struct bolt {
	struct btr_profile_opts o;
	struct btr_stream *s;
	struct bent *t;
	size_t cap, n;
	struct bthread *th;
	size_t nth, capth;
	struct module m;
	char *lines;         /* the formatted output (end) */
	size_t lines_len;
	uint64_t outside;    /* branches with neither end in the module */
	int nomem;
	int counted;         /* counts came since the last ordered batch */
	Elf *elf;            /* the module's file while formatting (b_end) */
	struct local *loc;   /* its local symbols, by address */
	size_t nloc;
};

static uint64_t bhash(uint64_t a, uint64_t b, uint8_t type)
{
	uint64_t h = (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full) ^ type;
	return h ^ (h >> 31);
}

static struct bent *bget(struct bolt *bo, uint64_t a, uint64_t b, uint8_t type)
{
	if ((bo->n + 1) * 2 > bo->cap) {   /* at most half full: short probes */
		size_t nc = bo->cap ? bo->cap * 2 : 1024;
		struct bent *nt = calloc(nc, sizeof(*nt));
		if (!nt) {
			bo->nomem = 1;
			return NULL;
		}
		for (size_t i = 0; i < bo->cap; i++) {
			if (!bo->t[i].type)
				continue;
			size_t j = bhash(bo->t[i].a, bo->t[i].b, bo->t[i].type) & (nc - 1);
			while (nt[j].type)
				j = (j + 1) & (nc - 1);
			nt[j] = bo->t[i];
		}
		free(bo->t);
		bo->t = nt;
		bo->cap = nc;
	}
	size_t i = bhash(a, b, type) & (bo->cap - 1);
	while (bo->t[i].type && !(bo->t[i].a == a && bo->t[i].b == b && bo->t[i].type == type))
		i = (i + 1) & (bo->cap - 1);
	if (!bo->t[i].type) {
		bo->t[i] = (struct bent){ .a = a, .b = b, .type = type };
		bo->n++;
	}
	return &bo->t[i];
}

static struct bthread *thread_of(struct bolt *bo, uint32_t tid)
{
	for (size_t i = 0; i < bo->nth; i++)
		if (bo->th[i].tid == tid)
			return &bo->th[i];
	if (bo->nth == bo->capth) {
		size_t nc = bo->capth ? bo->capth * 2 : 8;
		struct bthread *nt = realloc(bo->th, nc * sizeof(*nt));
		if (!nt) {
			bo->nomem = 1;
			return NULL;
		}
		bo->th = nt;
		bo->capth = nc;
	}
	bo->th[bo->nth] = (struct bthread){ .tid = tid };
	return &bo->th[bo->nth++];
}

static int in_mod(const struct bolt *bo, uint64_t a)
{
	return bo->m.found && a >= bo->m.start && a < bo->m.end;
}

static int b_begin(void *p, struct btr_stream *s)
{
	((struct bolt *)p)->s = s;
	return 0;
}

static int b_branches(void *p, const struct btr_branch *b, size_t n)
{
	struct bolt *bo = p;
	struct bthread *t = NULL;
	if (bo->counted) {
		/* ordered branches after counted ones: where each thread's
		 * range began is not known */
		for (size_t i = 0; i < bo->nth; i++)
			bo->th[i].start = 0;
		bo->counted = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const struct btr_branch *x = &b[i];
		if (!t || t->tid != x->tid)
			t = thread_of(bo, x->tid);
		if (!t)
			return -BTR_ERR_NOMEM;
		int taken = (x->flags & BTR_BF_TAKEN) != 0;
		int fin = in_mod(bo, x->from), tin = in_mod(bo, x->to);
		if (!fin && !tin) {
			bo->outside++;
			if (taken)
				t->start = 0;
			continue;
		}
		if (!taken) {
			if (x->kind == BTR_KIND_JCC || x->kind == BTR_KIND_LOOP || x->kind == BTR_KIND_JRCXZ) {
				struct bent *e = bget(bo, x->from, x->to, 'N');
				if (!e)
					return -BTR_ERR_NOMEM;
				e->count++;
			}
			continue;
		}
		/* the range that ran straight up to this branch (fdata has no ranges) */
		if (bo->o.pre_aggregated && t->start && fin && t->start <= x->from) {
			struct bent *e = bget(bo, t->start, x->from, 'F');
			if (!e)
				return -BTR_ERR_NOMEM;
			e->count++;
		}
		struct bent *e = bget(bo, fin ? x->from : 0, tin ? x->to : 0, 'B');
		if (!e)
			return -BTR_ERR_NOMEM;
		e->count++;
		if (x->flags & BTR_BF_MISPRED)
			e->mispred++;
		t->start = tin ? x->to : 0;
	}
	return 0;
}

/* The counted form: the run from c->start to c->b, c->count times.  The
 * same B and N counts as b_branches; ranges end at every branch, a
 * not-taken one's at its fall-through address (the file comment). */
static int b_counts(void *p, const struct btr_branch_count *c, size_t n)
{
	struct bolt *bo = p;
	bo->counted = 1;
	for (size_t i = 0; i < n; i++) {
		const struct btr_branch *x = &c[i].b;
		uint64_t cnt = c[i].count, start = c[i].start;
		int taken = (x->flags & BTR_BF_TAKEN) != 0;
		int fin = in_mod(bo, x->from), tin = in_mod(bo, x->to);
		if (!fin && !tin) {
			bo->outside += cnt;
			continue;
		}
		struct bent *e;
		if (!taken) {
			if (x->kind != BTR_KIND_JCC && x->kind != BTR_KIND_LOOP && x->kind != BTR_KIND_JRCXZ)
				continue;
			if (!(e = bget(bo, x->from, x->to, 'N')))
				return -BTR_ERR_NOMEM;
			e->count += cnt;
			if (bo->o.pre_aggregated && start && tin && in_mod(bo, start) && start <= x->from) {
				if (!(e = bget(bo, start, x->to, 'F')))
					return -BTR_ERR_NOMEM;
				e->count += cnt;
			}
			continue;
		}
		if (bo->o.pre_aggregated && start && fin && in_mod(bo, start) && start <= x->from) {
			if (!(e = bget(bo, start, x->from, 'F')))
				return -BTR_ERR_NOMEM;
			e->count += cnt;
		}
		if (!(e = bget(bo, fin ? x->from : 0, tin ? x->to : 0, 'B')))
			return -BTR_ERR_NOMEM;
		e->count += cnt;
		if (x->flags & BTR_BF_MISPRED)
			e->mispred += cnt;
	}
	return 0;
}

static int module_wanted(const struct bolt *bo, const char *path)
{
	if (!path)
		return 0;
	if (!bo->o.module) {
		return !bo->m.found && prof_is_program(path);
	}
	if (!strcmp(path, bo->o.module))
		return 1;
	const char *base = strrchr(path, '/');
	return !strcmp(base ? base + 1 : path, bo->o.module);
}

static int b_event(void *p, const struct btr_stream_event *ev)
{
	struct bolt *bo = p;
	switch (ev->type) {
	case BTR_SEV_MODULE_LOAD: {
		const struct btr_rec_module *m = &ev->rec->u.module;
		if (bo->m.found && bo->o.module)
			break;
		if (m->pid == UINT32_MAX || (!module_wanted(bo, m->path) && !module_wanted(bo, ev->path)))
			break;
		if (bo->m.found)
			break;
		uint64_t bias = 0;
		const char *file = ev->path ? ev->path : m->path;
		if (btr_elf_load_bias(file, m->start, m->pgoff, &bias))
			bias = m->start - m->pgoff;
		bo->m = (struct module){ .start = m->start, .end = m->start + m->size, .bias = bias, .pid = ev->pid,
					 .found = 1, .path = strdup(file) };
		if (!bo->m.path)
			bo->nomem = 1;
		break;
	}
	case BTR_SEV_GAP:
	case BTR_SEV_DISCONTINUITY:
	case BTR_SEV_THREAD_START:
	case BTR_SEV_FLOW:
		/* a range must not be joined across lost or disabled flow */
		for (size_t i = 0; i < bo->nth; i++)
			if (!ev->tid || bo->th[i].tid == ev->tid)
				bo->th[i].start = 0;
		break;
	default:
		break;
	}
	return 0;
}

static int cmp_local(const void *x, const void *y)
{
	const struct local *a = x, *b = y;
	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	if (a->func != b->func)
		return a->func ? -1 : 1;
	return a->index < b->index ? -1 : a->index > b->index;
}

static int cmp_local_name(const void *x, const void *y)
{
	const struct local *a = *(const struct local *const *)x, *b = *(const struct local *const *)y;
	int c = strcmp(a->name, b->name);
	if (c)
		return c;
	return a < b ? -1 : a > b;
}

/* Reads the module's local symbols and numbers them as BOLT does (the
 * file comment).  A module without a .symtab has none; an unreadable
 * file leaves the names plain. */
static int read_locals(struct bolt *bo)
{
	if (!bo->m.path || btr__elf_open(bo->m.path, &bo->elf) < 0)
		return 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(bo->elf, scn)) != NULL)
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_entsize)
			break;
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	if (!d)
		return 0;
	size_t n = sh.sh_size / sh.sh_entsize, cap = 0;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			break;
		int type = GELF_ST_TYPE(s.st_info);
		if (GELF_ST_BIND(s.st_info) != STB_LOCAL || type == STT_FILE || s.st_shndx == SHN_UNDEF ||
		    s.st_value == 0)
			continue;
		if (s.st_shndx != SHN_ABS) {
			GElf_Shdr tsh;
			Elf_Scn *t = s.st_shndx < SHN_LORESERVE ? elf_getscn(bo->elf, s.st_shndx) : NULL;
			if (!t || !gelf_getshdr(t, &tsh) || !(tsh.sh_flags & SHF_ALLOC))
				continue;
		}
		const char *name = elf_strptr(bo->elf, sh.sh_link, s.st_name);
		if (!name || !*name)
			continue;
		if (bo->nloc == cap) {
			cap = cap ? cap * 2 : 256;
			struct local *nv = realloc(bo->loc, cap * sizeof(*nv));
			if (!nv)
				return -BTR_ERR_NOMEM;
			bo->loc = nv;
		}
		bo->loc[bo->nloc++] = (struct local){ .addr = s.st_value, .name = name, .index = i,
						      .func = type == STT_FUNC || type == STT_GNU_IFUNC };
	}
	if (!bo->nloc)
		return 0;
	qsort(bo->loc, bo->nloc, sizeof(*bo->loc), cmp_local);
	/* N: rank among the locals of the same name, in that order */
	struct local **by = malloc(bo->nloc * sizeof(*by));
	if (!by)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < bo->nloc; i++)
		by[i] = &bo->loc[i];
	qsort(by, bo->nloc, sizeof(*by), cmp_local_name);
	for (size_t i = 0; i < bo->nloc; i++)
		by[i]->n = i && !strcmp(by[i - 1]->name, by[i]->name) ? by[i - 1]->n + 1 : 1;
	free(by);
	return 0;
}

/* BOLT's number of the local symbol @name (@len bytes) at link address
 * @addr, 0 if it is not a local symbol. */
static unsigned local_n(const struct bolt *bo, uint64_t addr, const char *name, size_t len)
{
	size_t lo = 0, hi = bo->nloc;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bo->loc[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < bo->nloc && bo->loc[lo].addr == addr; lo++)
		if (!strncmp(bo->loc[lo].name, name, len) && !bo->loc[lo].name[len])
			return bo->loc[lo].n;
	return 0;
}

/* "1 name off" or "0 [unknown] 0" into @buf. */
static void loc(struct bolt *bo, struct btr_image *img, uint64_t addr, char *buf, size_t size)
{
	struct btr_symbol sym;
	if (addr && img && btr_image_symbol(img, addr, &sym) == 0 && addr >= sym.addr && sym.name && *sym.name) {
		/* symbol versions are not part of BOLT's names; its PLT
		 * functions are "name@PLT"; locals are "name/N" */
		size_t l = strcspn(sym.name, "@ ");
		int plt = !strcmp(sym.name + l, "@plt");
		unsigned n = plt ? 0 : local_n(bo, sym.addr - bo->m.bias, sym.name, l);
		char suffix[24] = "";
		if (plt)
			snprintf(suffix, sizeof(suffix), "@PLT");
		else if (n)
			snprintf(suffix, sizeof(suffix), "/%u", n);
		snprintf(buf, size, "1 %.*s%s %" PRIx64, (int)l, sym.name, suffix, addr - sym.addr);
	} else {
		snprintf(buf, size, "0 [unknown] 0");
	}
}

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Formats every entry now, while the stream's images still live. */
static int b_end(void *p, int status)
{
	struct bolt *bo = p;
	if (bo->nomem)
		return -BTR_ERR_NOMEM;
	struct btr_image *img = bo->s ? btr_stream_image_pid(bo->s, bo->m.pid) : NULL;
	if (!bo->o.pre_aggregated && read_locals(bo) < 0)
		return -BTR_ERR_NOMEM;
	char **lines = calloc(bo->n ? bo->n : 1, sizeof(*lines));
	size_t nl = 0, total = 0;
	if (!lines)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < bo->cap; i++) {
		const struct bent *e = &bo->t[i];
		char a[600], b[600], line[1300];
		if (!e->type)
			continue;
		if (bo->o.pre_aggregated) {
			/* offsets from the load base; X marks an address outside it */
			char fa[40], fb[40];
			if (e->a)
				snprintf(fa, sizeof(fa), "%" PRIx64, e->a - bo->m.bias);
			else
				snprintf(fa, sizeof(fa), "X:0");
			if (e->b)
				snprintf(fb, sizeof(fb), "%" PRIx64, e->b - bo->m.bias);
			else
				snprintf(fb, sizeof(fb), "X:0");
			if (e->type == 'B')
				snprintf(line, sizeof(line), "B %s %s %" PRIu64 " %" PRIu64, fa, fb, e->count, e->mispred);
			else if (e->type == 'F')
				snprintf(line, sizeof(line), "F %s %s %" PRIu64, fa, fb, e->count);
			else
				continue;   /* not-taken branches are inside the F ranges */
		} else {
			if (e->type == 'F')
				continue;
			loc(bo, img, e->a, a, sizeof(a));
			loc(bo, img, e->b, b, sizeof(b));
			if (!strcmp(a, "0 [unknown] 0") && !strcmp(b, "0 [unknown] 0"))
				continue;
			snprintf(line, sizeof(line), "%s %s %" PRIu64 " %" PRIu64, a, b, e->mispred, e->count);
		}
		if (!(lines[nl] = strdup(line))) {
			bo->nomem = 1;
			break;
		}
		total += strlen(line) + 1;
		nl++;
	}
	qsort(lines, nl, sizeof(*lines), cmp_line);
	bo->lines = malloc(total + 1);
	if (bo->lines) {
		size_t off = 0;
		for (size_t i = 0; i < nl; i++) {
			size_t l = strlen(lines[i]);
			memcpy(bo->lines + off, lines[i], l);
			bo->lines[off + l] = '\n';
			off += l + 1;
		}
		bo->lines_len = off;
	} else {
		bo->nomem = 1;
	}
	for (size_t i = 0; i < nl; i++)
		free(lines[i]);
	free(lines);
	/* the tables are no longer needed */
	free(bo->loc);
	bo->loc = NULL;
	bo->nloc = 0;
	if (bo->elf)
		elf_end(bo->elf);
	bo->elf = NULL;
	free(bo->t);
	bo->t = NULL;
	bo->cap = bo->n = 0;
	return bo->nomem ? -BTR_ERR_NOMEM : 0;
}

static int b_write(void *p, FILE *out, const char *format)
{
	struct bolt *bo = p;
	if (format && strcmp(format, "fdata"))
		return -BTR_ERR_INVAL;
	if (!bo->m.found)
		return -BTR_ERR_NOT_FOUND;
	if (!bo->lines)
		return -BTR_ERR_INVAL;
	if (fwrite(bo->lines, 1, bo->lines_len, out) != bo->lines_len)
		return -BTR_ERR_IO;
	return 0;
}

static void b_destroy(void *p)
{
	struct bolt *bo = p;
	free(bo->t);
	free(bo->th);
	free(bo->lines);
	free(bo->loc);
	if (bo->elf)
		elf_end(bo->elf);
	free(bo->m.path);
	free(bo);
}

static const char *const bolt_formats[] = { "fdata", NULL };

const struct btr_analysis_ops btr__bolt_ops = {
	.name = "bolt", .begin = b_begin, .branches = b_branches, .counts = b_counts, .event = b_event,
	.end = b_end, .write = b_write, .destroy = b_destroy,
	.formats = bolt_formats,
};

int btr_bolt_new(const struct btr_profile_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct bolt *bo = calloc(1, sizeof(*bo));
	if (!bo)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&bo->o, opts);
	return btr_analysis_new(&btr__bolt_ops, bo, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__bolt_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_profile_opts o = { .sz = sizeof(o), .events = a->events, .module = a->module };
	return btr_bolt_new(&o, out);
}
