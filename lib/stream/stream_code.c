/* stream_code.c - see stream_code.h. */
#include "stream_code.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/image_code.h"
#include "internal.h"

static struct codepages *proc_pages(struct stream_code *c, uint32_t pid, int create)
{
	for (size_t i = 0; i < c->n_p; i++)
		if (c->p[i].pid == pid)
			return c->p[i].cp;
	if (!create)
		return NULL;
	if (c->n_p == c->cap_p) {
		size_t nc = c->cap_p ? 2 * c->cap_p : 8;
		struct sc_proc *np = realloc(c->p, nc * sizeof(*np));
		if (!np)
			return NULL;
		c->p = np;
		c->cap_p = nc;
	}
	struct codepages *cp;
	if (codepages_new(&cp) < 0)
		return NULL;
	c->p[c->n_p++] = (struct sc_proc){ pid, cp };
	return cp;
}

int stream_code_record(struct stream_code *c, struct btr_image *img, const struct btr_rec_code *r)
{
	const uint8_t *bytes = r->data;
	c->records++;
	if (!c->blobs && codeblobs_new(&c->blobs) < 0)
		return -BTR_ERR_NOMEM;
	if (bytes) {
		if (codeblobs_put(c->blobs, r->hash, r->size, bytes) < 0)
			return -BTR_ERR_NOMEM;
		c->bytes += r->size;
	} else {
		bytes = codeblobs_get(c->blobs, r->hash, r->size);
		if (!bytes) {
			if (!c->unknown++)
				btr_warn("code record at 0x%llx repeats bytes the trace does not hold (a damaged trace?): "
					 "ignored", (unsigned long long)r->addr);
			return 1;
		}
	}
	struct codepages *cp = img ? proc_pages(c, r->pid, 1) : NULL;
	if (!cp)
		return -BTR_ERR_NOMEM;
	return image_code_put(img, cp, r->addr, bytes, r->size);
}

int stream_code_symbol(struct stream_code *c, struct btr_image *img, const struct btr_rec_symbol *r)
{
	char source[64];
	snprintf(source, sizeof(source), r->source == BTR_SYM_JITDUMP ? "jit-%u.dump" : "perf-%u.map", r->pid);
	c->symbols++;
	int rc = image_code_symbol(img, r->addr, r->size, r->name, source);
	return rc == -BTR_ERR_INVAL ? 0 : rc;
}

int stream_code_on(struct stream_code *c, struct btr_image *img, const struct btr_record *rec)
{
	if (!img)
		return -BTR_ERR_NOMEM;
	if (rec->type == BTR_REC_SYMBOL)
		return stream_code_symbol(c, img, &rec->u.sym);
	int rc = stream_code_record(c, img, &rec->u.code);
	return rc > 0 ? 0 : rc;
}

void stream_code_clear(struct stream_code *c, struct btr_image *img, uint32_t pid)
{
	struct codepages *cp = proc_pages(c, pid, 0);
	if (cp && img)
		image_code_clear(img, cp);
}

void stream_code_mapped(struct stream_code *c, uint32_t pid, uint64_t start, uint64_t size)
{
	struct codepages *cp = proc_pages(c, pid, 0);
	if (cp && size && start + size > start)
		codepages_drop(cp, start, start + size);
}

void stream_code_free(struct stream_code *c)
{
	for (size_t i = 0; i < c->n_p; i++)
		codepages_free(c->p[i].cp);
	codeblobs_free(c->blobs);
	free(c->p);
	memset(c, 0, sizeof(*c));
}
