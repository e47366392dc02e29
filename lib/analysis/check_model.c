/* check_model.c - the legitimate-transfer model of one ELF file for
 * `btr check`: function entries (symbols, .eh_frame FDE starts, PLT
 * entries, the entry point, DT_INIT/DT_FINI and the init/fini arrays), PLT ranges, exported functions, DT_NEEDED
 * and DT_SONAME.
 *
 * Why FDE starts: stripped programs and libraries (every Debian binary)
 * have no .symtab, and their static functions - qsort comparators,
 * callbacks - are legitimate targets of indirect calls.  Every function
 * compiled with unwind tables has an FDE, and .eh_frame_hdr lists their
 * start addresses sorted, so one table read gives them all.
 *
 * Why split parts: gcc moves the unlikely code of a function f into
 * f.cold (placed apart, in .text.unlikely, with its own symbol and FDE),
 * and a switch table of f may send its cases there; f.part.N,
 * f.isra.N and f.constprop.N are further pieces and clones of f.  Their
 * symbol names tie them to f (split_at/split_rep); for stripped files
 * check.c links a part to its parent through the direct jumps between
 * their FDE ranges (fde_lo/fde_hi).
 *
 * ENDBR64 sites are not collected here: check reads the four bytes at an
 * indirect call's target instead (cheaper than scanning all code, and
 * exact for the bytes the image holds).
 */
#include "check_priv.h"
#include "elf/elf_priv.h"
#include "btr/error.h"
#include "btr/insn.h"
#include "elf/eh_frame.h"
#include "internal.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct u64vec {
	uint64_t *v;
	size_t n, cap;
};

static int push(struct u64vec *vec, uint64_t x)
{
	if (vec->n == vec->cap) {
		size_t nc = vec->cap ? vec->cap * 2 : 1024;
		uint64_t *nv = realloc(vec->v, nc * sizeof(*nv));
		if (!nv)
			return -BTR_ERR_NOMEM;
		vec->v = nv;
		vec->cap = nc;
	}
	vec->v[vec->n++] = x;
	return 0;
}

/* Appends @name to the string blob *@strings (*@strbytes bytes) and its
 * offset there to @offs. */
static int add_name(char **strings, size_t *strbytes, const char *name, struct u64vec *offs)
{
	size_t len = strlen(name) + 1;
	char *ns = realloc(*strings, *strbytes + len);
	if (!ns)
		return -BTR_ERR_NOMEM;
	*strings = ns;
	memcpy(ns + *strbytes, name, len);
	int r = push(offs, *strbytes);
	if (r < 0)
		return r;
	*strbytes += len;
	return 0;
}

static int u64cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct slotname {
	uint64_t slot, name;   /* GOT slot, offset of its name in the blob (UINT64_MAX: IRELATIVE) */
	uint64_t res;          /* IRELATIVE: the IFUNC resolver */
};

static int slotcmp(const void *a, const void *b)
{
	uint64_t x = ((const struct slotname *)a)->slot, y = ((const struct slotname *)b)->slot;
	return x < y ? -1 : x > y;
}

static int strpcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int32_t rd_s32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* .eh_frame_hdr (LSB "Exception Frame Header"): version 1, the encodings
 * of eh_frame_ptr, fde_count and the table, then the binary-search table
 * of (initial location, FDE address) pairs.  Only the encodings every
 * GNU toolchain writes are read (fde_count udata4, table datarel|sdata4);
 * others leave the FDE starts out. */
static int read_eh_frame_hdr(Elf *e, struct u64vec *ent)
{
	GElf_Shdr sh;
	Elf_Scn *scn = btr__elf_find_scn(e, ".eh_frame_hdr", &sh);
	if (!scn || sh.sh_type == SHT_NOBITS)
		return 0;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 12)
		return 0;
	const uint8_t *p = d->d_buf;
	if (p[0] != 1 || p[2] != 0x03 || p[3] != 0x3b)
		return 0;
	size_t ptrlen;
	switch (p[1] & 0x0f) {
	case 0x03: case 0x0b: ptrlen = 4; break;
	case 0x04: case 0x0c: ptrlen = 8; break;
	default: return 0;
	}
	size_t off = 4 + ptrlen;
	if (off + 4 > d->d_size)
		return 0;
	uint32_t count;
	memcpy(&count, p + off, 4);
	off += 4;
	if (count > (d->d_size - off) / 8)
		count = (uint32_t)((d->d_size - off) / 8);
	for (uint32_t i = 0; i < count; i++) {
		int r = push(ent, sh.sh_addr + (uint64_t)(int64_t)rd_s32(p + off + 8 * i));
		if (r < 0)
			return r;
	}
	return 0;
}

/* A function symbol and its name (pointing into the ELF's string table:
 * valid until elf_end). */
struct namesym {
	uint64_t addr;
	const char *name;
	size_t base;   /* length of the name without a split suffix */
};

struct symvec {
	struct namesym *v;
	size_t n, cap;
};

static int cmp_u64pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The extents [value, value + size) of the sized function symbols of
 * every symbol table, as (lo, hi) pairs sorted by lo in @ext. */
static int func_extents(Elf *e, struct u64vec *ext)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 1; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s))
				break;
			int r;
			if (GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_size && s.st_shndx != SHN_UNDEF &&
			    ((r = push(ext, s.st_value)) < 0 || (r = push(ext, s.st_value + s.st_size)) < 0))
				return r;
		}
	}
	if (ext->n)
		qsort(ext->v, ext->n / 2, 2 * sizeof(uint64_t), cmp_u64pair);
	return 0;
}

/* Nonzero if @a lies inside (past the start of) a function of @ext. */
static int inside_func(const struct u64vec *ext, uint64_t a)
{
	size_t lo = 0, hi = ext->n / 2;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ext->v[2 * mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* pairs [0, lo) start below @a; functions do not nest, but a few
	 * back cover aliases and overlaps */
	for (size_t k = lo; k-- > 0 && k + 8 > lo;)
		if (a < ext->v[2 * k + 1])
			return 1;
	return 0;
}

static int read_symbols(Elf *e, struct u64vec *ent, struct u64vec *exp, char **strings, size_t *strbytes,
			struct symvec *syms)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	struct u64vec ext = {0};
	int r = func_extents(e, &ext);
	while (!r && (scn = elf_nextscn(e, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 1; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s))
				break;
			int t = GELF_ST_TYPE(s.st_info);
			if (s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			/* A global label of hand-written assembly without .type
			 * (Ruby's coroutine_transfer) is STT_NOTYPE: a function
			 * when its section holds code and no sized function
			 * holds it (a label inside one is a label). */
			if (t == STT_NOTYPE && GELF_ST_BIND(s.st_info) != STB_LOCAL) {
				GElf_Shdr tsh;
				Elf_Scn *ts = s.st_shndx < SHN_LORESERVE ? elf_getscn(e, s.st_shndx) : NULL;
				if (!ts || !gelf_getshdr(ts, &tsh) || !(tsh.sh_flags & SHF_EXECINSTR) ||
				    inside_func(&ext, s.st_value))
					continue;
			} else if (t != STT_FUNC && t != STT_GNU_IFUNC) {
				continue;
			}
			if ((r = push(ent, s.st_value)) < 0)
				goto out;
			const char *sname = elf_strptr(e, sh.sh_link, s.st_name);
			if (sname && *sname) {
				if (syms->n == syms->cap) {
					size_t nc = syms->cap ? syms->cap * 2 : 1024;
					struct namesym *nv = realloc(syms->v, nc * sizeof(*nv));
					if (!nv)
						{ r = -BTR_ERR_NOMEM; goto out; }
					syms->v = nv;
					syms->cap = nc;
				}
				syms->v[syms->n++] = (struct namesym){ s.st_value, sname, 0 };
			}
			int bind = GELF_ST_BIND(s.st_info);
			/* IFUNC names count as provided by the module even when
			 * local: its PLT slot gets whatever the resolver picks */
			if (t != STT_GNU_IFUNC &&
			    (sh.sh_type != SHT_DYNSYM || (bind != STB_GLOBAL && bind != STB_WEAK)))
				continue;
			const char *name = elf_strptr(e, sh.sh_link, s.st_name);
			if (!name || !*name)
				continue;
			/* names are copied into one blob below; keep offsets now */
			if ((r = add_name(strings, strbytes, name, exp)) < 0)
				goto out;
		}
	}
out:
	free(ext.v);
	return r;
}

/* Length of @name without gcc's split suffix (".cold", ".cold.N",
 * ".part.N", ".isra.N", ".constprop.N", the first of them and all that
 * follows), or 0 if it has none. */
static size_t split_base(const char *name)
{
	static const char *const sfx[] = { ".part.", ".isra.", ".constprop." };
	for (const char *d = strchr(name, '.'); d && d > name; d = strchr(d + 1, '.')) {
		if (!strncmp(d, ".cold", 5) && (d[5] == 0 || d[5] == '.'))
			return (size_t)(d - name);
		for (size_t k = 0; k < BTR_ARRAY_SIZE(sfx); k++)
			if (!strncmp(d, sfx[k], strlen(sfx[k])))
				return (size_t)(d - name);
	}
	return 0;
}

static int namecmp(const void *a, const void *b)
{
	const struct namesym *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (x->addr < y->addr ? -1 : x->addr > y->addr);
}

/* Parts ordered by their base name, then address. */
static int basecmp(const void *a, const void *b)
{
	const struct namesym *x = a, *y = b;
	size_t n = x->base < y->base ? x->base : y->base;
	int c = strncmp(x->name, y->name, n);
	if (!c && x->base != y->base)
		c = x->base < y->base ? -1 : 1;
	return c ? c : (x->addr < y->addr ? -1 : x->addr > y->addr);
}

struct addrpair {
	uint64_t a, b;
};

static int paircmp(const void *a, const void *b)
{
	const struct addrpair *x = a, *y = b;
	return x->a < y->a ? -1 : x->a > y->a ? 1 : (x->b < y->b ? -1 : x->b > y->b);
}

/* The split_at/split_rep table of @m from the function symbols @sy. */
static int build_splits(struct symvec *sy, struct check_mod *m)
{
	if (!sy->n)
		return 0;
	qsort(sy->v, sy->n, sizeof(*sy->v), namecmp);
	size_t np = 0;
	for (size_t i = 0; i < sy->n; i++)
		if ((sy->v[i].base = split_base(sy->v[i].name)) != 0)
			np++;
	if (!np)
		return 0;
	struct namesym *parts = malloc(np * sizeof(*parts));
	struct addrpair *map = malloc(np * sizeof(*map));
	char *key = NULL;
	size_t keycap = 0;
	int rc = 0;
	if (!parts || !map) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	np = 0;
	for (size_t i = 0; i < sy->n; i++)
		if (sy->v[i].base)
			parts[np++] = sy->v[i];
	qsort(parts, np, sizeof(*parts), basecmp);
	size_t nm = 0;
	for (size_t i = 0; i < np;) {
		size_t j = i + 1;
		while (j < np && parts[j].base == parts[i].base &&
		       !strncmp(parts[j].name, parts[i].name, parts[i].base))
			j++;
		/* the parent: the symbol named the base (lowest address if
		 * several), else the lowest part */
		if (parts[i].base + 1 > keycap) {
			keycap = parts[i].base + 64;
			char *nk = realloc(key, keycap);
			if (!nk) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			key = nk;
		}
		memcpy(key, parts[i].name, parts[i].base);
		key[parts[i].base] = 0;
		struct namesym probe = { 0, key, 0 };
		size_t lo = 0, hi = sy->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (namecmp(&sy->v[mid], &probe) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		uint64_t rep = lo < sy->n && !strcmp(sy->v[lo].name, key) ? sy->v[lo].addr : parts[i].addr;
		for (; i < j; i++)
			if (parts[i].addr != rep)
				map[nm++] = (struct addrpair){ parts[i].addr, rep };
	}
	qsort(map, nm, sizeof(*map), paircmp);
	if (nm && (!(m->split_at = malloc(nm * sizeof(uint64_t))) || !(m->split_rep = malloc(nm * sizeof(uint64_t))))) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	size_t w = 0;
	for (size_t i = 0; i < nm; i++)
		if (!w || m->split_at[w - 1] != map[i].a) {   /* one parent per part */
			m->split_at[w] = map[i].a;
			m->split_rep[w++] = map[i].b;
		}
	m->n_split = w;
out:
	free(parts);
	free(map);
	free(key);
	return rc;
}

struct fdevec {
	struct addrpair *v;
	size_t n, cap;
	int nomem;
};

static int fde_collect(void *ctx, uint64_t start, uint64_t end)
{
	struct fdevec *fv = ctx;
	if (end <= start)
		return 0;
	if (fv->n == fv->cap) {
		size_t nc = fv->cap ? fv->cap * 2 : 1024;
		struct addrpair *nv = realloc(fv->v, nc * sizeof(*nv));
		if (!nv) {
			fv->nomem = 1;
			return 1;
		}
		fv->v = nv;
		fv->cap = nc;
	}
	fv->v[fv->n++] = (struct addrpair){ start, end };
	return 0;
}

/* FDE ranges of .eh_frame, sorted by start. */
static int read_fdes(Elf *e, struct check_mod *m)
{
	GElf_Shdr sh;
	Elf_Scn *scn = btr__elf_find_scn(e, ".eh_frame", &sh);
	Elf_Data *d;
	if (!scn || sh.sh_type != SHT_PROGBITS || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
		return 0;
	struct fdevec fv = {0};
	btr__eh_frame_fdes(d->d_buf, d->d_size, sh.sh_addr, fde_collect, &fv);
	int rc = fv.nomem ? -BTR_ERR_NOMEM : 0;
	if (!rc && fv.n) {
		qsort(fv.v, fv.n, sizeof(*fv.v), paircmp);
		if (!(m->fde_lo = malloc(fv.n * sizeof(uint64_t))) || !(m->fde_hi = malloc(fv.n * sizeof(uint64_t)))) {
			rc = -BTR_ERR_NOMEM;
		} else {
			for (size_t i = 0; i < fv.n; i++) {
				m->fde_lo[i] = fv.v[i].a;
				m->fde_hi[i] = fv.v[i].b;
			}
			m->n_fde = fv.n;
		}
	}
	free(fv.v);
	return rc;
}

static char *dupstr(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Functions the loader calls through pointers: DT_INIT/DT_FINI and the
 * entries of .init_array/.fini_array/.preinit_array.  Their code has no
 * exported symbol in stripped files (crti's _init has no FDE either).
 * Array slots of position-independent files hold 0 in the file: their
 * values are the addends of RELATIVE relocations at those slots. */
static int read_init_fini(Elf *e, struct u64vec *ent)
{
	static const char *const arrs[] = { ".init_array", ".fini_array", ".preinit_array" };
	uint64_t lo[3] = {0}, hi[3] = {0};
	int r;
	for (int k = 0; k < 3; k++) {
		GElf_Shdr sh;
		Elf_Scn *scn = btr__elf_find_scn(e, arrs[k], &sh);
		if (!scn || sh.sh_type == SHT_NOBITS)
			continue;
		lo[k] = sh.sh_addr;
		hi[k] = sh.sh_addr + sh.sh_size;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t o = 0; d && d->d_buf && o + 8 <= d->d_size; o += 8) {
			uint64_t v;
			memcpy(&v, (const uint8_t *)d->d_buf + o, 8);
			if (v && v != UINT64_MAX && (r = push(ent, v)) < 0)
				return r;
		}
	}
	static const char *const secs[] = { ".init", ".fini" };
	for (int k = 0; k < 2; k++) {
		GElf_Shdr sh;
		if (btr__elf_find_scn(e, secs[k], &sh) && sh.sh_size && (r = push(ent, sh.sh_addr)) < 0)
			return r;
	}
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = d ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela rel;
			if (!gelf_getrela(d, (int)i, &rel))
				break;
			if (GELF_R_TYPE(rel.r_info) != R_X86_64_RELATIVE)
				continue;
			for (int k = 0; k < 3; k++)
				if (rel.r_offset >= lo[k] && rel.r_offset < hi[k] &&
				    (r = push(ent, (uint64_t)rel.r_addend)) < 0)
					return r;
		}
	}
	return 0;
}

/* Code addresses the file stores in its data (see check_priv.h). */
static int read_taken(Elf *e, int is_exec_type, struct u64vec *out)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn)) != NULL)
		if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR) && (sh.sh_flags & SHF_ALLOC)) {
			if (sh.sh_addr < lo)
				lo = sh.sh_addr;
			if (sh.sh_addr + sh.sh_size > hi)
				hi = sh.sh_addr + sh.sh_size;
		}
	if (lo >= hi)
		return 0;
	int r;
	scn = NULL;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		Elf_Data *d;
		if (sh.sh_type == SHT_RELA && sh.sh_entsize && (d = elf_getdata(scn, NULL)) != NULL) {
			size_t n = sh.sh_size / sh.sh_entsize;
			for (size_t i = 0; i < n; i++) {
				GElf_Rela rel;
				if (!gelf_getrela(d, (int)i, &rel))
					break;
				uint64_t v = (uint64_t)rel.r_addend;
				if (GELF_R_TYPE(rel.r_info) == R_X86_64_RELATIVE && v >= lo && v < hi &&
				    (r = push(out, v)) < 0)
					return r;
			}
			continue;
		}
		/* ET_EXEC: absolute addresses, no relocations */
		if (!is_exec_type || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
		    (sh.sh_flags & SHF_EXECINSTR) || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
			continue;
		for (size_t o = 0; o + 8 <= d->d_size; o += 8) {
			uint64_t v;
			memcpy(&v, (const uint8_t *)d->d_buf + o, 8);
			if (v >= lo && v < hi && (r = push(out, v)) < 0)
				return r;
		}
	}
	return 0;
}

static void sort_unique(struct u64vec *v)
{
	if (!v->n)
		return;
	qsort(v->v, v->n, sizeof(*v->v), u64cmp);
	size_t w = 0;
	for (size_t i = 0; i < v->n; i++)
		if (!w || v->v[w - 1] != v->v[i])
			v->v[w++] = v->v[i];
	v->n = w;
}

/* GOT slots of imported functions (JUMP_SLOT, GLOB_DAT of a function or
 * untyped undefined symbol), names appended to the string blob (offset in
 * @names), and IRELATIVE slots (name UINT64_MAX, the IFUNC resolver in
 * @res; 0 for the others).  IRELATIVE needs no symbol table (static-pie
 * files have none). */
struct got_out {
	struct u64vec *slots, *names, *res;
	char **strings;
	size_t *strbytes;
};

static int got_slot(void *ctx, const struct btr__elf_got *g)
{
	struct got_out *o = ctx;
	int rc;
	if (g->irelative) {
		if ((rc = push(o->slots, g->slot)) < 0 || (rc = push(o->names, UINT64_MAX)) < 0 ||
		    (rc = push(o->res, g->addend)) < 0)
			return rc;
		return 0;
	}
	if (!g->typed && g->defined)   /* an untyped symbol counts only when imported */
		return 0;
	if ((rc = push(o->slots, g->slot)) < 0 || (rc = add_name(o->strings, o->strbytes, g->name, o->names)) < 0 ||
	    (rc = push(o->res, 0)) < 0)
		return rc;
	return 0;
}

static int read_got(Elf *e, struct u64vec *slots, struct u64vec *names, struct u64vec *res, char **strings,
		    size_t *strbytes)
{
	struct got_out o = { slots, names, res, strings, strbytes };
	return btr__elf_got_slots(e, got_slot, &o);
}

static int read_dynamic(Elf *e, struct check_mod *m)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			return 0;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Dyn dyn;
			if (!gelf_getdyn(d, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_SONAME)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			if (!name)
				continue;
			if (dyn.d_tag == DT_SONAME) {
				free(m->soname);
				if (!(m->soname = dupstr(name)))
					return -BTR_ERR_NOMEM;
				continue;
			}
			char **nn = realloc(m->needed, (m->n_needed + 1) * sizeof(*nn));
			if (!nn)
				return -BTR_ERR_NOMEM;
			m->needed = nn;
			if (!(nn[m->n_needed] = dupstr(name)))
				return -BTR_ERR_NOMEM;
			m->n_needed++;
		}
		return 0;
	}
	return 0;
}

/* What the IFUNC resolvers of @m's IRELATIVE slots may return, as the
 * dynamic linker stores it in the slot: the code addresses each resolver's
 * code takes - `lea disp(%rip)` (glibc's resolvers pick among their
 * variants so: lea __log1p_fma(%rip), %rdx; cmovne %rdx, %rax), or an
 * absolute `mov $imm32` in an ET_EXEC file - scanned over the resolver's
 * FDE range (else its first 256 bytes).  Appended as (resolver, target)
 * pairs to @pairs (two words each). */
static int read_ifunc_targets(Elf *e, const struct check_mod *m, int is_exec_type, struct u64vec *pairs)
{
	for (size_t i = 0; i < m->n_got; i++) {
		uint64_t rsv = m->got_res[i], lo, hi;
		if (m->got_name[i] || !rsv)
			continue;
		int dup = 0;
		for (size_t k = 0; k < i && !dup; k++)
			dup = !m->got_name[k] && m->got_res[k] == rsv;
		if (dup)
			continue;
		if (!check_mod_fde_of(m, rsv, &lo, &hi) || lo != rsv)
			hi = rsv + 256;
		if (hi - rsv > 4096)
			hi = rsv + 4096;
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;
		const uint8_t *code = NULL;
		size_t avail = 0;
		while (!code && (scn = elf_nextscn(e, scn)) != NULL) {
			Elf_Data *d;
			if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR) && sh.sh_type == SHT_PROGBITS &&
			    rsv >= sh.sh_addr && rsv < sh.sh_addr + sh.sh_size && (d = elf_getdata(scn, NULL)) &&
			    d->d_buf && d->d_size >= sh.sh_size) {
				code = (const uint8_t *)d->d_buf + (rsv - sh.sh_addr);
				avail = (size_t)(sh.sh_addr + sh.sh_size - rsv);
			}
		}
		size_t n = (size_t)(hi - rsv) < avail ? (size_t)(hi - rsv) : avail;
		for (size_t o = 0; code && o < n;) {
			struct btr_insn in;
			int l = btr_insn_decode(code + o, n - o, rsv + o, BTR_MODE_64, &in);
			if (l <= 0)
				break;
			const uint8_t *q = code + o;
			size_t k = 0;
			unsigned rex = (q[k] & 0xf0) == 0x40 ? q[k++] : 0;
			uint64_t t = 0;
			if ((rex & 8) && k + 6 == (size_t)l && q[k] == 0x8d && (q[k + 1] & 0xc7) == 0x05)
				t = rsv + o + (uint64_t)l + (uint64_t)(int64_t)rd_s32(q + k + 2);   /* lea disp(%rip) */
			else if (is_exec_type && k + 5 == (size_t)l && (q[k] & 0xf8) == 0xb8)
				t = (uint32_t)rd_s32(q + k + 1);   /* mov $imm32, %r32 */
			else if (is_exec_type && (rex & 8) && q[k] == 0xc7 && k + 6 == (size_t)l && (q[k + 1] & 0xf8) == 0xc0)
				t = (uint64_t)(int64_t)rd_s32(q + k + 2);   /* mov $imm32, %r64 */
			int rc;
			if (t && (rc = push(pairs, rsv)) < 0)
				return rc;
			if (t && (rc = push(pairs, t)) < 0)
				return rc;
			o += (size_t)l;
		}
	}
	return 0;
}

int check_mod_load(const char *path, struct check_mod *m)
{
	if (!(m->path = dupstr(path)))
		return -BTR_ERR_NOMEM;
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -BTR_ERR_NOENT;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	struct u64vec ent = {0}, exp = {0}, gs = {0}, gn = {0}, gr = {0}, ifp = {0};
	struct symvec syms = {0};
	char *strings = NULL;
	size_t strbytes = 0;
	int rc = 0;
	GElf_Ehdr eh;
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
		rc = -BTR_ERR_BAD_ELF;
		goto out;
	}
	m->is_main = eh.e_type == ET_EXEC;
	size_t nph = 0;
	elf_getphdrnum(e, &nph);
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP)
			m->is_main = 1;
	}
	if (eh.e_entry && (rc = push(&ent, eh.e_entry)) < 0)
		goto out;
	if ((rc = read_symbols(e, &ent, &exp, &strings, &strbytes, &syms)) < 0 ||
	    (rc = build_splits(&syms, m)) < 0 || (rc = read_fdes(e, m)) < 0 ||
	    (rc = read_got(e, &gs, &gn, &gr, &strings, &strbytes)) < 0 ||
	    (rc = read_eh_frame_hdr(e, &ent)) < 0 || (rc = read_dynamic(e, m)) < 0 ||
	    (rc = read_init_fini(e, &ent)) < 0)
		goto out;
	/* every FDE start, also of files without .eh_frame_hdr (valgrind's
	 * tools are static programs with .eh_frame but no header) */
	for (size_t i = 0; i < m->n_fde; i++)
		if ((rc = push(&ent, m->fde_lo[i])) < 0)
			goto out;
	static const char *const plts[3] = { ".plt", ".plt.sec", ".plt.got" };
	for (int k = 0; k < 3; k++) {
		GElf_Shdr sh;
		if (!btr__elf_find_scn(e, plts[k], &sh) || !sh.sh_size)
			continue;
		m->plt_lo[k] = sh.sh_addr;
		m->plt_hi[k] = sh.sh_addr + sh.sh_size;
		/* every 16-byte (8 for .plt.got) stub is an entry */
		uint64_t step = sh.sh_entsize ? sh.sh_entsize : 16;
		if (step < 8)
			step = 8;
		for (uint64_t a = sh.sh_addr; a < sh.sh_addr + sh.sh_size; a += step)
			if ((rc = push(&ent, a)) < 0)
				goto out;
	}
	sort_unique(&ent);
	m->entries = ent.v;
	m->n_entries = ent.n;
	ent.v = NULL;
	struct u64vec tk = {0};
	if ((rc = read_taken(e, eh.e_type == ET_EXEC, &tk)) < 0) {
		free(tk.v);
		goto out;
	}
	sort_unique(&tk);
	m->taken = tk.v;
	m->n_taken = tk.n;
	m->strings = strings;
	strings = NULL;
	if (gs.n) {
		if (!(m->got_slot = malloc(gs.n * sizeof(*m->got_slot))) ||
		    !(m->got_name = malloc(gs.n * sizeof(*m->got_name))) ||
		    !(m->got_res = malloc(gs.n * sizeof(*m->got_res)))) {
			rc = -BTR_ERR_NOMEM;
			goto out;
		}
		struct slotname *sn = malloc(gs.n * sizeof(*sn));
		if (!sn) {
			rc = -BTR_ERR_NOMEM;
			goto out;
		}
		for (size_t i = 0; i < gs.n; i++)
			sn[i] = (struct slotname){ gs.v[i], gn.v[i], gr.v[i] };
		qsort(sn, gs.n, sizeof(*sn), slotcmp);
		for (size_t i = 0; i < gs.n; i++) {
			m->got_slot[i] = sn[i].slot;
			m->got_name[i] = sn[i].name == UINT64_MAX ? NULL : m->strings + sn[i].name;
			m->got_res[i] = sn[i].res;
		}
		free(sn);
		m->n_got = gs.n;
		if ((rc = read_ifunc_targets(e, m, eh.e_type == ET_EXEC, &ifp)) < 0)
			goto out;
		if (ifp.n) {
			struct addrpair *pr = (struct addrpair *)ifp.v;   /* (two words each) */
			size_t np = ifp.n / 2;
			qsort(pr, np, sizeof(*pr), paircmp);
			if (!(m->ifn_res = malloc(np * sizeof(uint64_t))) || !(m->ifn_tgt = malloc(np * sizeof(uint64_t)))) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			for (size_t i = 0; i < np; i++) {
				m->ifn_res[i] = pr[i].a;
				m->ifn_tgt[i] = pr[i].b;
			}
			m->n_ifn = np;
		}
	}
	if (exp.n) {
		if (!(m->exports = malloc(exp.n * sizeof(*m->exports)))) {
			rc = -BTR_ERR_NOMEM;
			goto out;
		}
		for (size_t i = 0; i < exp.n; i++)
			m->exports[i] = m->strings + exp.v[i];
		m->n_exports = exp.n;
		qsort(m->exports, m->n_exports, sizeof(*m->exports), strpcmp);
	}
	m->ok = 1;
out:
	free(syms.v);
	free(gs.v);
	free(gn.v);
	free(gr.v);
	free(ifp.v);
	free(ent.v);
	free(exp.v);
	free(strings);
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

void check_mod_free(struct check_mod *m)
{
	if (!m)
		return;
	free(m->path);
	free(m->soname);
	for (size_t i = 0; i < m->n_needed; i++)
		free(m->needed[i]);
	free(m->needed);
	free(m->entries);
	free(m->taken);
	free(m->split_at);
	free(m->split_rep);
	free(m->fde_lo);
	free(m->fde_hi);
	free(m->got_slot);
	free(m->got_name);
	free(m->got_res);
	free(m->ifn_res);
	free(m->ifn_tgt);
	free(m->exports);
	free(m->strings);
	memset(m, 0, sizeof(*m));
}

/* Index of the greatest element of sorted @v (@n) <= @a, or -1. */
static ptrdiff_t floor_in(const uint64_t *v, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ptrdiff_t)lo - 1;
}

/* Index of the greatest entry <= @a, or -1. */
static ptrdiff_t floor_idx(const struct check_mod *m, uint64_t a)
{
	return floor_in(m->entries, m->n_entries, a);
}

int check_mod_is_entry(const struct check_mod *m, uint64_t a)
{
	ptrdiff_t i = floor_idx(m, a);
	return i >= 0 && m->entries[i] == a;
}

uint64_t check_mod_func_of(const struct check_mod *m, uint64_t a)
{
	ptrdiff_t i = floor_idx(m, a);
	return i >= 0 ? m->entries[i] : UINT64_MAX;
}

uint64_t check_mod_group_of(const struct check_mod *m, uint64_t a)
{
	uint64_t f = check_mod_func_of(m, a);
	ptrdiff_t i = f != UINT64_MAX ? floor_in(m->split_at, m->n_split, f) : -1;
	return i >= 0 && m->split_at[i] == f ? m->split_rep[i] : f;
}

int check_mod_fde_of(const struct check_mod *m, uint64_t a, uint64_t *lo, uint64_t *hi)
{
	ptrdiff_t i = floor_in(m->fde_lo, m->n_fde, a);
	/* FDEs do not nest; an earlier, longer one may still hold @a when
	 * ranges overlap (a few back suffice) */
	for (ptrdiff_t k = i; k >= 0 && k > i - 4; k--)
		if (a < m->fde_hi[k]) {
			*lo = m->fde_lo[k];
			*hi = m->fde_hi[k];
			return 1;
		}
	return 0;
}

int check_mod_fde_gap(const struct check_mod *m, uint64_t a, uint64_t *end)
{
	ptrdiff_t i = floor_in(m->fde_lo, m->n_fde, a);
	uint64_t e = UINT64_MAX;
	for (ptrdiff_t k = i; k >= 0 && k > i - 4; k--) {
		if (a < m->fde_hi[k])
			return 0;
		if (e == UINT64_MAX || m->fde_hi[k] > e)
			e = m->fde_hi[k];
	}
	*end = e;
	return 1;
}

int check_mod_is_taken(const struct check_mod *m, uint64_t a)
{
	size_t lo = 0, hi = m->n_taken;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->taken[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < m->n_taken && m->taken[lo] == a;
}

int check_mod_got(const struct check_mod *m, uint64_t slot, const char **name, uint64_t *resolver)
{
	ptrdiff_t i = floor_in(m->got_slot, m->n_got, slot);
	if (i < 0 || m->got_slot[i] != slot)
		return 0;
	*name = m->got_name[i];
	*resolver = m->got_res[i];
	return 1;
}

int check_mod_ifunc_target(const struct check_mod *m, uint64_t resolver, uint64_t target)
{
	ptrdiff_t i = floor_in(m->ifn_res, m->n_ifn, resolver);
	if (i < 0 || m->ifn_res[i] != resolver)
		return check_mod_is_entry(m, target);   /* its code takes no address */
	for (; i >= 0 && m->ifn_res[i] == resolver; i--)
		if (m->ifn_tgt[i] == target)
			return 1;
	return 0;
}

int check_mod_in_plt(const struct check_mod *m, uint64_t a)
{
	for (int k = 0; k < 3; k++)
		if (a >= m->plt_lo[k] && a < m->plt_hi[k])
			return 1;
	return 0;
}

int check_mod_exports(const struct check_mod *m, const char *name)
{
	return m->n_exports &&
	       bsearch(&name, m->exports, m->n_exports, sizeof(*m->exports), strpcmp) != NULL;
}
