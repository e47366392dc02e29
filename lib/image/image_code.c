/* image_code.c - bytes added to an image that no file holds: copies
 * (btr_image_add_bytes) and the code of a trace's CODE records
 * (image_code.h).  Calls into image.c, never the other way. */
#include "image_code.h"
#include "image_priv.h"

#include <stdlib.h>
#include <string.h>

#include "btr/error.h"

int btr_image_add_bytes(struct btr_image *img, const void *bytes, size_t size, uint64_t addr)
{
	if (!img || !bytes || !size || addr + size < addr)
		return -BTR_ERR_INVAL;
	void *copy = malloc(size);
	if (!copy)
		return -BTR_ERR_NOMEM;
	memcpy(copy, bytes, size);
	int err = image_insert_bytes(img, copy, addr, addr + size, copy);
	if (err)
		free(copy);
	return err;
}

int image_code_put(struct btr_image *img, struct codepages *cp, uint64_t addr, const uint8_t *bytes, size_t n)
{
	if (!n || addr + n < addr)
		return -BTR_ERR_INVAL;
	int err = codepages_put(cp, addr, bytes, n);
	/* One section per page run: the pages are rewritten in place by
	 * later versions, and the image is told each time (a new
	 * generation), so decoders drop what they cached of the old code. */
	for (uint64_t a = addr; !err && a < addr + n;) {
		uint64_t lo, hi;
		const uint8_t *p = codepages_run(cp, a, &lo, &hi);
		if (!p)
			break;
		err = image_insert_bytes(img, p, lo, hi, NULL);
		a = hi;
	}
	return err;
}

static int remove_run(void *ctx, uint64_t addr, const uint8_t *bytes, size_t n)
{
	(void)bytes;
	btr_image_remove(ctx, addr, n);
	return 0;
}

void image_code_clear(struct btr_image *img, struct codepages *cp)
{
	codepages_foreach(cp, remove_run, img);
	codepages_drop(cp, 0, UINT64_MAX);
}

/* The module holding @img's symbols of generated code, made on first use
 * (named @source, no file, no sections of its own: image.c's module_at
 * gives it for bytes without a file in its range). */
static struct module *jit_module(struct btr_image *img, const char *source, uint64_t addr)
{
	if (img->jit)
		return &img->mods[img->jit - 1];
	struct modfile *f = calloc(1, sizeof(*f));
	uint32_t idx;
	if (!f || !(f->path = strdup(source)) || image_add_module(img, source, &idx) < 0) {
		if (f)
			free(f->path);
		free(f);
		return NULL;
	}
	f->refs = 1;
	f->base_name = img->mods[idx].base_name;
	f->sym_state = 1;    /* LAZY_OK: the symbols are all here */
	f->dw_state = -1;    /* LAZY_FAIL: no DWARF */
	f->own_names = 1;
	struct module *m = &img->mods[idx];
	m->f = f;
	m->lo = addr;
	m->hi = addr + 1;
	img->jit = idx + 1;
	return m;
}

int image_code_symbol(struct btr_image *img, uint64_t addr, uint64_t size, const char *name, const char *source)
{
	if (!img || !name || addr + size < addr)
		return -BTR_ERR_INVAL;
	struct module *m = jit_module(img, source, addr);
	if (!m)
		return -BTR_ERR_NOMEM;
	struct modfile *f = m->f;
	char *copy = strdup(name);
	if (!copy)
		return -BTR_ERR_NOMEM;
	if (f->nsyms == f->syms_cap) {
		size_t nc = f->syms_cap ? 2 * f->syms_cap : 256;
		struct sym *ns = realloc(f->syms, nc * sizeof(*ns));
		if (!ns) {
			free(copy);
			return -BTR_ERR_NOMEM;
		}
		f->syms = ns;
		f->syms_cap = nc;
	}
	/* Appended: in address order (the usual case) it stays sorted; out of
	 * order or at an address named before (re-JITed, rewritten code: the
	 * later name, the larger extent), the next lookup sorts and merges
	 * what came since (image_syms_settle): no pass over all symbols per
	 * symbol, however a trace orders them. */
	struct sym *x = &f->syms[f->nsyms];
	*x = (struct sym){ .addr = addr, .end = addr + (size ? size : 1), .size = size, .name = copy };
	int in_order = f->sorted == f->nsyms && (!f->nsyms || f->syms[f->nsyms - 1].addr < addr);
	if (in_order) {
		x->maxend = f->nsyms && f->syms[f->nsyms - 1].maxend > x->end ? f->syms[f->nsyms - 1].maxend : x->end;
		f->sorted++;
	} else {
		x->maxend = f->nsyms;   /* its order among the appended (image_syms_settle) */
		__atomic_store_n(&f->sym_state, LAZY_NONE, __ATOMIC_RELEASE);
	}
	f->nsyms++;
	if (addr < m->lo)
		m->lo = addr;
	if (x->end > m->hi)
		m->hi = x->end;
	return 0;
}

int image_code_named(struct btr_image *img, uint64_t addr)
{
	struct btr_function fn;
	return img && img->jit && btr_image_function(img, addr, &fn) == 0 && fn.module == img->mods[img->jit - 1].path;
}

int image_code_copy(struct btr_image *dst, struct btr_image *src, const char *path)
{
	if (!dst || !src || !src->jit || strcmp(src->mods[src->jit - 1].path, path))
		return -BTR_ERR_NOT_FOUND;
	const struct modfile *f = src->mods[src->jit - 1].f;
	for (size_t i = 0; i < f->nsyms; i++) {
		const struct sym *x = &f->syms[i];
		int err = image_code_symbol(dst, x->addr, x->size, x->name, path);
		for (uint64_t a = x->addr; !err && a < x->end;) {
			const uint8_t *p;
			size_t avail;
			if (btr_image_map(src, a, &p, &avail) < 0) {
				a++;
				continue;
			}
			size_t n = avail < x->end - a ? avail : (size_t)(x->end - a);
			err = btr_image_add_bytes(dst, p, n, a);
			a += n;
		}
		if (err)
			return err;
	}
	return 0;
}
