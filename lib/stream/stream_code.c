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

void stream_code_limit(struct stream_code *c, uint64_t file_size)
{
	c->limit = STREAM_CODE_BASE + file_size;
}

int stream_code_afford(struct stream_code *c, uint64_t cost)
{
	uint64_t limit = c->limit ? c->limit : STREAM_CODE_BASE;
	if (c->held + cost <= limit) {
		c->held += cost;
		return 1;
	}
	if (!c->over++)
		btr_warn("the trace's code, symbol, module, process and thread name records hold more than %llu MiB, "
			 "more than a trace of its size can (a damaged or forged trace?): the records past it are ignored",
			 (unsigned long long)(limit >> 20));
	return 0;
}

/* What a record's strings cost the stream and its consumers (0: nothing
 * counted): twice their bytes (the stream's copy, an analysis' copy) and
 * an entry. */
uint64_t stream_code_cost(const struct btr_record *rec)
{
	switch (rec->type) {
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_EXEC:
		return 64 + 2 * (rec->u.module.path ? strlen(rec->u.module.path) : 0);
	case BTR_REC_PROCESS:
		return 64 + 2 * (strlen(rec->u.process.path ? rec->u.process.path : "") + rec->u.process.args_len +
				 strlen(rec->u.process.detail ? rec->u.process.detail : ""));
	case BTR_REC_THREAD_NAME:
		return 64 + 2 * strlen(rec->u.thread.name ? rec->u.thread.name : "");
	default:
		return 0;
	}
}

/* Pages [addr, addr+n) of @cp would add: at most this many bytes. */
static uint64_t pages_cost(uint64_t addr, uint64_t n)
{
	return ((addr + n - 1) / CODEPAGE_SIZE - addr / CODEPAGE_SIZE + 1) * (uint64_t)CODEPAGE_COST;
}

int stream_code_record(struct stream_code *c, struct btr_image *img, const struct btr_rec_code *r)
{
	const uint8_t *bytes = r->data;
	c->records++;
	if (!r->size || r->addr + r->size < r->addr)
		return 1;
	if (!c->blobs && codeblobs_new(&c->blobs) < 0)
		return -BTR_ERR_NOMEM;
	if (bytes) {
		/* Each content once: bytes equal to those under the same key
		 * are not stored again; new bytes only when they fit under the
		 * limit and are what their key says (the bytes hashed count
		 * whether they are kept or not). */
		const uint8_t *known = codeblobs_get(c->blobs, r->hash, r->size);
		if (known && !memcmp(known, bytes, r->size)) {
			bytes = known;
		} else {
			if (!stream_code_afford(c, r->size))
				return 1;
			if (codeblobs_hash(bytes, r->size) != r->hash) {
				if (!c->forged++)
					btr_warn("code record at 0x%llx: its bytes do not match their hash (a damaged or forged "
						 "trace?): ignored", (unsigned long long)r->addr);
				return 1;
			}
			if (codeblobs_put(c->blobs, r->hash, r->size, bytes) < 0)
				return -BTR_ERR_NOMEM;
			c->bytes += r->size;
			bytes = codeblobs_get(c->blobs, r->hash, r->size);
		}
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
	/* New pages count: what was held before is counted already. */
	size_t before = codepages_count(cp);
	uint64_t charged = pages_cost(r->addr, r->size);
	if (!stream_code_afford(c, charged))
		return 1;
	int rc = image_code_put(img, cp, r->addr, bytes, r->size);
	uint64_t added = (codepages_count(cp) - before) * (uint64_t)CODEPAGE_COST;
	c->held -= charged > added ? charged - added : 0;
	return rc;
}

int stream_code_symbol(struct stream_code *c, struct btr_image *img, const struct btr_rec_symbol *r)
{
	if (!r->name)
		return 0;   /* a record without a name says nothing (btr_stream_record of any record) */
	char source[64];
	snprintf(source, sizeof(source), r->source == BTR_SYM_JITDUMP ? "jit-%u.dump" : "perf-%u.map", r->pid);
	c->symbols++;
	/* a symbol costs its name and its entry (lib/image/image_priv.h: 64 bytes) */
	if (!stream_code_afford(c, strlen(r->name) + 1 + 64))
		return 0;
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
