/* jitsyms.c - perf maps and jitdump files as trace records (jitsyms.h). */
#include "jitsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btr/file.h"
#include "codepages.h"
#include "internal.h"
#include "trace/trace_format.h"

/* @path opened by the one opener of files that data names (btr/file.h). */
static FILE *open_named(const char *path, uint64_t max, unsigned flags, uid_t uid, int *err)
{
	int fd = btr_file_open_named(path, max, flags, uid);
	FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	if (!f && fd >= 0)
		close(fd);
	*err = fd < 0 ? fd : -BTR_ERR_NOMEM;
	return f;
}

int jit_perf_map_read(const char *path, uint32_t pid, uid_t uid, jit_rec_fn cb, void *ctx)
{
	int err;
	FILE *f = open_named(path, JIT_PERF_MAP_MAX, BTR_NAMED_NOFOLLOW | BTR_NAMED_OWNER, uid, &err);
	if (!f)
		return err;
	char line[8192];
	int n = 0, rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		unsigned long long start, size;
		int pos = 0;
		if (sscanf(line, "%llx %llx %n", &start, &size, &pos) < 2 || !pos || !line[pos])
			continue;
		char *name = line + pos;
		name[strcspn(name, "\n")] = 0;
		if (!*name || start + size < start)
			continue;
		struct btr_record r = { .type = BTR_REC_SYMBOL };
		r.u.sym = (struct btr_rec_symbol){ pid, BTR_SYM_PERF_MAP, start, size, name };
		rc = cb(ctx, &r);
		n++;
	}
	fclose(f);
	return rc ? rc : n;
}

int jit_dump_path(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	unsigned pid;
	int end = 0;
	return sscanf(b, "jit-%u.dump%n", &pid, &end) == 1 && end && !b[end];
}

#define JITDUMP_MAGIC 0x4A695444u
#define JIT_CODE_LOAD 0
#define JIT_CODE_MOVE 1
#define JIT_CODE_CLOSE 3
#define LOAD_FIXED 56u   /* record header 16 + pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_FIXED 64u   /* record header 16 + pid, tid, vma, old, new, code_size, code_index */

/* One code load of the file: its name and bytes (pointers into the file). */
struct load {
	uint64_t index, size;
	const char *name;
	const uint8_t *code;
};

static int emit(jit_rec_fn cb, void *ctx, uint32_t pid, uint64_t addr, const struct load *l, int with_code)
{
	struct btr_record r = { .type = BTR_REC_SYMBOL };
	r.u.sym = (struct btr_rec_symbol){ pid, BTR_SYM_JITDUMP, addr, l->size, l->name };
	int rc = cb(ctx, &r);
	if (rc || !with_code || !l->size || l->size > BTR_TRACE_MAX_CODE)
		return rc;
	r = (struct btr_record){ .type = BTR_REC_CODE };
	r.u.code = (struct btr_rec_code){ .pid = pid, .addr = addr, .hash = codeblobs_hash(l->code, (size_t)l->size),
					 .size = (uint32_t)l->size, .data = l->code };
	return cb(ctx, &r);
}

/* jit_dump_read, reading at most @max bytes (else -BTR_ERR_LIMIT); their
 * number is added to *@used */
static int dump_read(const char *path, uint32_t pid, int with_code, jit_rec_fn cb, void *ctx, uint64_t max,
		     uint64_t *used)
{
	/* The path comes from the trace (a perf.data MMAP): opened the one
	 * way a file that data names is opened (btr_file_open_named: without
	 * blocking, a regular file only), and read only if it has at most
	 * @max bytes (not a file that grows without end). */
	if (!max)
		return -BTR_ERR_LIMIT;
	int fd = btr_file_open_named(path, max < JIT_DUMP_MAX ? max : JIT_DUMP_MAX, 0, 0);
	if (fd < 0)
		return fd == -BTR_ERR_FBIG ? -BTR_ERR_LIMIT : fd;
	struct stat st = { 0 };
	if (fstat(fd, &st) < 0) {
		int err = errno;
		close(fd);
		return btr_err_from_errno(err);
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	ssize_t k;
	uint8_t *buf = malloc(cap);
	/* at most the size fstat gave (a file growing meanwhile is cut there) */
	while (buf && len < cap - 1 && (k = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)k;
	close(fd);
	if (!buf)
		return -BTR_ERR_NOMEM;
	*used += len;
	int rc = 0;
	struct load *loads = NULL;
	size_t n = 0;
	if (len < 40 || get32(buf) != JITDUMP_MAGIC || get32(buf + 8) < 40 || get32(buf + 8) > len) {
		rc = -BTR_ERR_BAD_FORMAT;
		goto out;
	}
	for (size_t off = get32(buf + 8); !rc && off + 16 <= len;) {
		uint32_t id = get32(buf + off), total = get32(buf + off + 4);
		if (total < 16 || total > len - off || id == JIT_CODE_CLOSE)
			break;   /* cut short, damaged, or the end */
		const uint8_t *p = buf + off;
		off += total;
		if (id == JIT_CODE_LOAD && total > LOAD_FIXED) {
			struct load l = { get64(p + 48), get64(p + 40), (const char *)p + LOAD_FIXED, NULL };
			size_t nl = strnlen(l.name, total - LOAD_FIXED);
			if (nl == total - LOAD_FIXED || l.size > total - LOAD_FIXED - nl - 1)
				continue;
			l.code = p + LOAD_FIXED + nl + 1;
			if (n % 1024 == 0) {
				struct load *nv = realloc(loads, (n + 1024) * sizeof(*nv));
				if (!nv) {
					rc = -BTR_ERR_NOMEM;
					break;
				}
				loads = nv;
			}
			loads[n++] = l;
			rc = emit(cb, ctx, pid, get64(p + 32), &l, with_code);
		} else if (id == JIT_CODE_MOVE && total >= MOVE_FIXED) {
			uint64_t index = get64(p + 56);
			for (size_t i = n; i-- > 0;)
				if (loads[i].index == index) {
					rc = emit(cb, ctx, pid, get64(p + 40), &loads[i], with_code);
					break;
				}
		}
	}
out:
	free(loads);
	free(buf);
	return rc ? rc : (int)n;
}

int jit_dump_read(const char *path, uint32_t pid, int with_code, jit_rec_fn cb, void *ctx)
{
	uint64_t used = 0;
	return dump_read(path, pid, with_code, cb, ctx, JIT_DUMP_MAX, &used);
}

static int queue_push(void *ctx, const struct btr_record *rec)
{
	struct jit_queue *q = ctx;
	if (q->n == q->cap) {
		size_t nc = q->cap ? 2 * q->cap : 64;
		struct btr_record *nv = realloc(q->v, nc * sizeof(*nv));
		if (!nv)
			return -BTR_ERR_NOMEM;
		q->v = nv;
		q->cap = nc;
	}
	struct btr_record c = *rec;
	void *own = rec->type == BTR_REC_SYMBOL ? (void *)strdup(rec->u.sym.name) : malloc(rec->u.code.size);
	if (!own)
		return -BTR_ERR_NOMEM;
	if (rec->type == BTR_REC_SYMBOL) {
		c.u.sym.name = own;
	} else {
		memcpy(own, rec->u.code.data, rec->u.code.size);
		c.u.code.data = own;
	}
	q->v[q->n++] = c;
	return 0;
}

int jit_queue_load(struct jit_queue *q, const char *path, uint32_t pid)
{
	/* JIT_DUMP_MAX in all: a perf.data naming one jitdump in many MMAPs
	 * does not get it read again and again */
	return dump_read(path, pid, 1, queue_push, q, q->read < JIT_DUMP_MAX ? JIT_DUMP_MAX - q->read : 0, &q->read);
}

void jit_queue_free(struct jit_queue *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->v[i].type == BTR_REC_SYMBOL ? (void *)q->v[i].u.sym.name : (void *)q->v[i].u.code.data);
	free(q->v);
	memset(q, 0, sizeof(*q));
}

int jit_queue_pop(struct jit_queue *q, struct btr_record *rec)
{
	if (q->next < q->n) {
		*rec = q->v[q->next++];
		return 1;
	}
	if (q->n) {
		uint64_t total = q->read;
		jit_queue_free(q);
		q->read = total;   /* what this reader has read in all */
	}
	return 0;
}
