/* trace.c - the .btr trace container: streaming writer and reader.
 *
 * The byte layout is specified in docs/format.md; this file is its only
 * implementation.  Everything is serialized field by field in little
 * endian (never a struct dump), so the format does not depend on the
 * compiler's padding or the host's byte order.
 *
 * Memory: the writer holds one chunk buffer (opts.chunk_size, plus the
 * zstd output buffer); the reader holds one stored chunk and one
 * decompressed chunk, both bounded by BTR_TRACE_CHUNK_MAX, whatever the
 * file size.
 */
#include "btr/trace.h"
#include "btr/error.h"
#include "btr/perfdata.h"
#include "crc32c.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#ifndef BTR_VERSION
#define BTR_VERSION "0"
#endif

/* ---- format constants (docs/format.md) ---- */

#define FILE_MAGIC "BTRTRACE"
#define PERF_MAGIC "PERFILE2"
#define FILE_HDR_FIXED 38u   /* bytes before the creator string */
#define FILE_HDR_MAX 4096u   /* header_size above this is corruption */
#define CHUNK_MAGIC 0x43525442u /* "BTRC" read as a little-endian u32 */
#define CHUNK_HDR 32u
#define CF_ZSTD 1u
#define CF_END 2u
#define REC_HDR 8u
#define END_PAYLOAD 16u
#define SCAN_WINDOW 65536u

/* Fixed body sizes (without strings / arrays / data). */
#define MACHINE_FIXED 108u   /* + 2 + backend + 2 + vendor */
#define MODULE_FIXED 43u     /* + build_id_len + path */
#define THREAD_FIXED 26u     /* + name */
#define DATA_FIXED 24u       /* + size */
#define LBR_FIXED 32u        /* + 24 * count */
#define LBR_ENTRY 24u
#define BRANCHES_FIXED 8u    /* + 44 * count */
#define BRANCH_SIZE 44u
#define EXIT_FIXED 40u
#define SWITCH_FIXED 24u     /* pid, tid, cpu, flags, tsc */
#define PROCESS_FIXED 30u    /* + path + args + detail (u16 length each) */

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static const char *const type_names[BTR_REC__MAX] = {
	[BTR_REC_MACHINE] = "machine",
	[BTR_REC_MODULE_LOAD] = "module_load",
	[BTR_REC_MODULE_UNLOAD] = "module_unload",
	[BTR_REC_THREAD_START] = "thread_start",
	[BTR_REC_THREAD_EXIT] = "thread_exit",
	[BTR_REC_THREAD_NAME] = "thread_name",
	[BTR_REC_PT] = "pt",
	[BTR_REC_BTS] = "bts",
	[BTR_REC_LBR] = "lbr",
	[BTR_REC_BRANCHES] = "branches",
	[BTR_REC_PROCESS_EXIT] = "process_exit",
	[BTR_REC_EXEC] = "exec",
	[BTR_REC_PROCESS] = "process",
	[BTR_REC_BTS_INSNS] = "bts_insns",
	[BTR_REC_SWITCH] = "switch",
};

const char *btr_rec_type_name(enum btr_rec_type type)
{
	if ((unsigned)type >= BTR_REC__MAX || !type_names[type])
		return "unknown";
	return type_names[type];
}

/* ===================================================================== */
/* Writer                                                                */
/* ===================================================================== */

struct btr_trace_writer {
	int fd;
	int err;                /* sticky: once set, every call returns it */
	char *path, *tmp;
	uint8_t *buf;           /* current chunk payload */
	size_t cap, used;       /* cap >= chunk_size (grows only for a huge unsplittable record) */
	size_t chunk_size;
	uint32_t nrec;          /* records in the current chunk */
	int level;              /* zstd level, 0: store */
	int no_sync;            /* opts.no_sync */
	int stream;             /* 1: writing through fd (a device, FIFO, stdout): no tmp, no rename */
	int own_fd;             /* 0: fd is the caller's (btr_trace_writer_new_fd) */
	ZSTD_CCtx *cctx;
	uint8_t *zbuf;
	size_t zcap;
	uint64_t chunks, records; /* totals, written into the end chunk */
};

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return btr_err_from_errno(errno);
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void chunk_header(uint8_t h[CHUNK_HDR], uint32_t flags, uint32_t raw, uint32_t stored,
			 uint32_t nrec, uint32_t payload_crc)
{
	put32(h, CHUNK_MAGIC);
	put32(h + 4, flags);
	put32(h + 8, raw);
	put32(h + 12, stored);
	put32(h + 16, nrec);
	put32(h + 20, payload_crc);
	put32(h + 24, 0);
	put32(h + 28, btr_crc32c(0, h, 28));
}

static int emit_chunk(struct btr_trace_writer *w, uint32_t flags, const uint8_t *payload,
		      uint32_t raw, uint32_t stored, uint32_t nrec)
{
	uint8_t h[CHUNK_HDR];
	int rc;

	chunk_header(h, flags, raw, stored, nrec, btr_crc32c(0, payload, stored));
	rc = write_all(w->fd, h, sizeof(h));
	if (!rc)
		rc = write_all(w->fd, payload, stored);
	if (rc) {
		btr_debug("trace: writing %s: %s", w->tmp, btr_errstr(rc));
		w->err = rc;
	}
	return rc;
}

/* Writes the buffered records as one chunk (compressed if that helps). */
static int flush_chunk(struct btr_trace_writer *w)
{
	int rc;

	if (w->err)
		return w->err;
	if (!w->nrec)
		return 0;
	if (w->level) {
		size_t n = ZSTD_compressCCtx(w->cctx, w->zbuf, w->zcap, w->buf, w->used, w->level);
		/* Incompressible data (already-dense PT) is stored raw: the
		 * reader then needs no decompression pass for it. */
		if (!ZSTD_isError(n) && n < w->used) {
			rc = emit_chunk(w, CF_ZSTD, w->zbuf, (uint32_t)w->used, (uint32_t)n, w->nrec);
			goto out;
		}
	}
	rc = emit_chunk(w, 0, w->buf, (uint32_t)w->used, (uint32_t)w->used, w->nrec);
out:
	if (rc)
		return rc;
	w->chunks++;
	w->records += w->nrec;
	w->used = 0;
	w->nrec = 0;
	return 0;
}

/* Makes room for @need bytes in the current chunk: flushes it if full,
 * and grows the buffer (once, for an unsplittable record larger than
 * chunk_size; bounded by BTR_TRACE_MAX_LBR / BTR_TRACE_MAX_STRING). */
static int reserve(struct btr_trace_writer *w, size_t need)
{
	int rc;

	if (w->used + need <= w->chunk_size || (w->used == 0 && need <= w->cap))
		return 0;
	if (w->used && (rc = flush_chunk(w)))
		return rc;
	if (need > w->cap) {
		uint8_t *nb = realloc(w->buf, need);
		if (!nb)
			return w->err = -BTR_ERR_NOMEM;
		w->buf = nb;
		w->cap = need;
		if (w->level) {
			size_t zc = ZSTD_compressBound(need);
			uint8_t *nz = realloc(w->zbuf, zc);
			if (!nz)
				return w->err = -BTR_ERR_NOMEM;
			w->zbuf = nz;
			w->zcap = zc;
		}
	}
	return 0;
}

static uint8_t *rec_begin(struct btr_trace_writer *w, enum btr_rec_type type, size_t body)
{
	uint8_t *p = w->buf + w->used;

	put16(p, (uint16_t)type);
	put16(p + 2, 0);
	put32(p + 4, (uint32_t)body);
	w->used += REC_HDR + body;
	w->nrec++;
	return p + REC_HDR;
}

static uint8_t *put_str(uint8_t *p, const char *s, size_t n)
{
	put16(p, (uint16_t)n);
	if (n)
		memcpy(p + 2, s, n);
	return p + 2 + n;
}

static size_t slen(const char *s)
{
	return s ? strlen(s) : 0;
}

/* PT/BTS: split into pieces that fill the current chunk, each piece a
 * record of its own with the right stream_offset (docs/format.md). */
static int write_data(struct btr_trace_writer *w, const struct btr_record *rec)
{
	const struct btr_rec_data *d = &rec->u.data;
	uint64_t done = 0;
	int rc;

	if (d->size && !d->data)
		return -BTR_ERR_INVAL;
	do {
		size_t room = w->chunk_size > w->used ? w->chunk_size - w->used : 0;
		uint64_t left = d->size - done;
		size_t piece;

		/* Start a new chunk rather than write a sliver at the end of
		 * this one: fewer records, same bytes. */
		if (room < REC_HDR + DATA_FIXED + (left < 256 ? left : 256)) {
			if ((rc = flush_chunk(w)))
				return rc;
			room = w->chunk_size;
		}
		piece = room - REC_HDR - DATA_FIXED;
		if (piece > left)
			piece = (size_t)left;
		uint8_t *p = rec_begin(w, rec->type, DATA_FIXED + piece);
		put32(p, d->tid);
		put32(p + 4, (uint32_t)d->cpu);
		put64(p + 8, d->stream_offset + done);
		put64(p + 16, piece);
		if (piece)
			memcpy(p + 24, d->data + done, piece);
		done += piece;
	} while (done < d->size);
	return 0;
}

static void put_branch(uint8_t *p, const struct btr_branch *b)
{
	put64(p, b->from);
	put64(p + 8, b->to);
	put64(p + 16, b->tsc);
	put64(p + 24, b->insns);
	put32(p + 32, b->tid);
	put32(p + 36, b->cycles);
	put16(p + 40, b->flags);
	p[42] = b->kind;
	p[43] = b->reserved;
}

/* Decoded branches: split by count like data records. */
static int write_branches(struct btr_trace_writer *w, const struct btr_record *rec)
{
	const struct btr_rec_branches *b = &rec->u.branches;
	uint32_t done = 0;
	int rc;

	if (b->count && !b->branches)
		return -BTR_ERR_INVAL;
	do {
		size_t room = w->chunk_size > w->used ? w->chunk_size - w->used : 0;
		uint32_t left = b->count - done, n;

		if (room < REC_HDR + BRANCHES_FIXED + (size_t)(left < 8 ? left : 8) * BRANCH_SIZE) {
			if ((rc = flush_chunk(w)))
				return rc;
			room = w->chunk_size;
		}
		n = (uint32_t)((room - REC_HDR - BRANCHES_FIXED) / BRANCH_SIZE);
		if (n > left)
			n = left;
		uint8_t *p = rec_begin(w, BTR_REC_BRANCHES, BRANCHES_FIXED + (size_t)n * BRANCH_SIZE);
		put32(p, b->tid);
		put32(p + 4, n);
		for (uint32_t i = 0; i < n; i++)
			put_branch(p + BRANCHES_FIXED + (size_t)i * BRANCH_SIZE, &b->branches[done + i]);
		done += n;
	} while (done < b->count);
	return 0;
}

int btr_trace_write(struct btr_trace_writer *w, const struct btr_record *rec)
{
	size_t body, n1 = 0, n2 = 0;
	uint8_t *p;
	int rc;

	if (!w || !rec)
		return -BTR_ERR_INVAL;
	if (w->err)
		return w->err;

	/* Size the body first; invalid records are refused before anything
	 * is buffered (-BTR_ERR_INVAL does not poison the writer). */
	switch (rec->type) {
	case BTR_REC_PT:
	case BTR_REC_BTS:
	case BTR_REC_BTS_INSNS:
		return write_data(w, rec);
	case BTR_REC_BRANCHES:
		return write_branches(w, rec);
	case BTR_REC_MACHINE:
		n1 = strnlen(rec->u.machine.backend, sizeof(rec->u.machine.backend));
		n2 = strnlen(rec->u.machine.cpu_vendor, sizeof(rec->u.machine.cpu_vendor));
		body = MACHINE_FIXED + 4 + n1 + n2;
		break;
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_EXEC:
		n1 = slen(rec->u.module.path);
		if (n1 > BTR_TRACE_MAX_STRING || rec->u.module.build_id_len > sizeof(rec->u.module.build_id))
			return -BTR_ERR_INVAL;
		body = MODULE_FIXED + rec->u.module.build_id_len + n1;
		break;
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME:
		n1 = slen(rec->u.thread.name);
		if (n1 > BTR_TRACE_MAX_STRING)
			return -BTR_ERR_INVAL;
		body = THREAD_FIXED + n1;
		break;
	case BTR_REC_LBR:
		if (rec->u.lbr.count > BTR_TRACE_MAX_LBR || (rec->u.lbr.count && !rec->u.lbr.entries))
			return -BTR_ERR_INVAL;
		body = LBR_FIXED + (size_t)rec->u.lbr.count * LBR_ENTRY;
		break;
	case BTR_REC_PROCESS_EXIT:
		body = EXIT_FIXED;
		break;
	case BTR_REC_SWITCH:
		body = SWITCH_FIXED;
		break;
	case BTR_REC_PROCESS:
		n1 = slen(rec->u.process.path);
		n2 = slen(rec->u.process.detail);
		if (n1 > BTR_TRACE_MAX_STRING || n2 > BTR_TRACE_MAX_STRING ||
		    rec->u.process.args_len > BTR_TRACE_MAX_STRING ||
		    (rec->u.process.args_len && !rec->u.process.args))
			return -BTR_ERR_INVAL;
		body = PROCESS_FIXED + n1 + rec->u.process.args_len + n2;
		break;
	default:
		return -BTR_ERR_INVAL;
	}
	if ((rc = reserve(w, REC_HDR + body)))
		return rc;
	p = rec_begin(w, rec->type, body);

	switch (rec->type) {
	case BTR_REC_MACHINE: {
		const struct btr_rec_machine *m = &rec->u.machine;
		p = put_str(p, m->backend, n1);
		p = put_str(p, m->cpu_vendor, n2);
		put16(p, m->cpu_family);
		put16(p + 2, m->cpu_model);
		put16(p + 4, m->cpu_stepping);
		put16(p + 6, m->lbr_depth);
		put32(p + 8, m->flags);
		p[12] = m->mtc_freq;
		p[13] = m->cyc_thresh;
		p[14] = m->addr_filter_cfg;
		p[15] = m->reserved;
		put32(p + 16, m->nom_freq);
		put32(p + 20, m->cpuid15_eax);
		put32(p + 24, m->cpuid15_ebx);
		put64(p + 28, m->tsc_hz);
		for (int i = 0; i < 4; i++) {
			put64(p + 36 + 16 * i, m->addr_filter[i][0]);
			put64(p + 44 + 16 * i, m->addr_filter[i][1]);
		}
		put64(p + 100, m->start_time_ns);
		break;
	}
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_EXEC: {
		const struct btr_rec_module *m = &rec->u.module;
		put32(p, m->pid);
		put32(p + 4, m->prot);
		put64(p + 8, m->start);
		put64(p + 16, m->size);
		put64(p + 24, m->pgoff);
		put64(p + 32, m->tsc);
		p[40] = m->build_id_len;
		memcpy(p + 41, m->build_id, m->build_id_len);
		put_str(p + 41 + m->build_id_len, m->path, n1);
		break;
	}
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME: {
		const struct btr_rec_thread *t = &rec->u.thread;
		put32(p, t->pid);
		put32(p + 4, t->tid);
		put32(p + 8, t->parent_tid);
		put32(p + 12, (uint32_t)t->exit_code);
		put64(p + 16, t->tsc);
		put_str(p + 24, t->name, n1);
		break;
	}
	case BTR_REC_LBR: {
		const struct btr_rec_lbr *l = &rec->u.lbr;
		put32(p, l->pid);
		put32(p + 4, l->tid);
		put32(p + 8, (uint32_t)l->cpu);
		put32(p + 12, l->count);
		put64(p + 16, l->tsc);
		put64(p + 24, l->ip);
		for (uint32_t i = 0; i < l->count; i++) {
			uint8_t *e = p + LBR_FIXED + (size_t)i * LBR_ENTRY;
			put64(e, l->entries[i].from);
			put64(e + 8, l->entries[i].to);
			put32(e + 16, l->entries[i].flags);
			put32(e + 20, l->entries[i].cycles);
		}
		break;
	}
	case BTR_REC_PROCESS_EXIT: {
		const struct btr_rec_exit *x = &rec->u.exit;
		put32(p, x->pid);
		put32(p + 4, x->tid);
		put32(p + 8, (uint32_t)x->code);
		put32(p + 12, (uint32_t)x->signo);
		put64(p + 16, x->ip);
		put64(p + 24, x->addr);
		put64(p + 32, x->tsc);
		break;
	}
	case BTR_REC_SWITCH: {
		const struct btr_rec_switch *x = &rec->u.sw;
		put32(p, x->pid);
		put32(p + 4, x->tid);
		put32(p + 8, (uint32_t)x->cpu);
		put32(p + 12, x->flags);
		put64(p + 16, x->tsc);
		break;
	}
	case BTR_REC_PROCESS: {
		const struct btr_rec_process *x = &rec->u.process;
		put32(p, x->pid);
		put32(p + 4, x->ppid);
		put32(p + 8, x->event);
		put32(p + 12, (uint32_t)x->reason);
		put64(p + 16, x->tsc);
		p = put_str(p + 24, x->path, n1);
		p = put_str(p, x->args, x->args_len);
		put_str(p, x->detail, n2);
		break;
	}
	default:
		break;
	}
	return 0;
}

int btr_trace_flush(struct btr_trace_writer *w)
{
	if (!w)
		return -BTR_ERR_INVAL;
	return flush_chunk(w);
}

static void writer_free(struct btr_trace_writer *w)
{
	if (w->fd >= 0 && w->own_fd)
		close(w->fd);
	ZSTD_freeCCtx(w->cctx);
	free(w->zbuf);
	free(w->buf);
	free(w->path);
	free(w->tmp);
	free(w);
}

/* Where @path leads: 0 for a file to create through a temporary name
 * (@real: the file itself, a symlink followed), 1 for a device, FIFO or
 * socket to write through (never replaced), or a negative error. */
static int output_kind(const char *path, char **real, int *mode)
{
	struct stat st, lst;
	*real = NULL;
	*mode = -1;
	if (stat(path, &st) < 0) {
		if (errno != ENOENT)
			return btr_err_from_errno(errno);
		/* A dangling symlink would be replaced by the rename. */
		if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
			return -BTR_ERR_NOENT;
		*real = strdup(path);
		return *real ? 0 : -BTR_ERR_NOMEM;
	}
	if (S_ISDIR(st.st_mode))
		return -BTR_ERR_ISDIR;
	if (!S_ISREG(st.st_mode)) {
		*real = strdup(path);
		return *real ? 1 : -BTR_ERR_NOMEM;
	}
	*mode = (int)(st.st_mode & 07777);   /* the replacement keeps the file's permissions */
	if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
		*real = realpath(path, NULL);   /* the target is replaced, the link kept */
	else
		*real = strdup(path);
	return *real ? 0 : -BTR_ERR_NOMEM;
}

/* The common part of the constructors: @w->fd is open (or -1 with
 * @w->tmp to create); writes the file header. */
static int writer_start(const char *path, int fd, const struct btr_trace_writer_opts *opts,
			struct btr_trace_writer **out)
{
	struct btr_trace_writer_opts o = { 0 };
	struct btr_trace_writer *w;
	uint8_t hdr[FILE_HDR_FIXED + 64];
	char creator[] = "btr " BTR_VERSION;
	struct timespec ts = { 0 };
	size_t clen = strlen(creator), hlen;
	int rc, kind = 1, mode = -1;
	char *real = NULL;

	if (!path || !*path || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	if (opts) {
		/* Older callers pass a smaller struct; sz 0 means "current". */
		size_t n = opts->sz && opts->sz < sizeof(o) ? opts->sz : sizeof(o);
		memcpy(&o, opts, n);
	}
	if (o.compress < 0 || o.compress > ZSTD_maxCLevel())
		return -BTR_ERR_INVAL;
	if (!o.chunk_size)
		o.chunk_size = BTR_TRACE_CHUNK_DEFAULT;
	if (o.chunk_size < BTR_TRACE_CHUNK_MIN)
		o.chunk_size = BTR_TRACE_CHUNK_MIN;
	if (o.chunk_size > BTR_TRACE_CHUNK_MAX)
		o.chunk_size = BTR_TRACE_CHUNK_MAX;
	if (fd < 0 && (kind = output_kind(path, &real, &mode)) < 0)
		return kind;

	w = calloc(1, sizeof(*w));
	if (!w) {
		free(real);
		return -BTR_ERR_NOMEM;
	}
	w->fd = fd;
	w->own_fd = fd < 0;
	w->stream = kind == 1;
	w->chunk_size = w->cap = o.chunk_size;
	w->level = o.compress;
	w->no_sync = o.no_sync;
	w->path = real ? real : strdup(path);
	w->buf = malloc(w->cap);
	if (!w->stream && asprintf(&w->tmp, "%s.tmp.%ld", w->path ? w->path : path, (long)getpid()) < 0)
		w->tmp = NULL;
	if (!w->path || !w->buf || (!w->stream && !w->tmp))
		goto nomem;
	if (w->level) {
		w->cctx = ZSTD_createCCtx();
		w->zcap = ZSTD_compressBound(w->cap);
		w->zbuf = malloc(w->zcap);
		if (!w->cctx || !w->zbuf)
			goto nomem;
	}

	if (fd < 0 && w->stream) {
		/* A device, FIFO or socket: written through, never created,
		 * truncated, unlinked or renamed over. */
		w->fd = open(w->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	} else if (fd < 0) {
		/* O_TRUNC, not O_EXCL: a leftover "<path>.tmp.<our pid>" can
		 * only come from a dead process that had our pid, so it is
		 * garbage. */
		w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (w->fd >= 0 && mode >= 0)
			(void)fchmod(w->fd, (mode_t)mode);
	}
	if (w->fd < 0) {
		rc = btr_err_from_errno(errno);
		btr_debug("trace: cannot create %s: %s", w->stream ? w->path : w->tmp, strerror(errno));
		free(w->tmp);
		w->tmp = NULL;
		writer_free(w);
		return rc;
	}

	clock_gettime(CLOCK_REALTIME, &ts);
	if (clen > 64)
		clen = 64;
	hlen = FILE_HDR_FIXED + clen;
	memcpy(hdr, FILE_MAGIC, 8);
	put16(hdr + 8, BTR_TRACE_VERSION_MAJOR);
	put16(hdr + 10, BTR_TRACE_VERSION_MINOR);
	put32(hdr + 12, w->level ? BTR_TRACE_F_ZSTD : 0);
	put32(hdr + 16, (uint32_t)hlen);
	put32(hdr + 20, 0);
	put64(hdr + 24, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	put32(hdr + 32, (uint32_t)getpid());
	put_str(hdr + 36, creator, clen);
	put32(hdr + 20, btr_crc32c(0, hdr, hlen));
	rc = write_all(w->fd, hdr, hlen);
	if (rc) {
		btr_debug("trace: writing %s: %s", w->stream ? w->path : w->tmp, btr_errstr(rc));
		btr_trace_writer_abort(w);
		return rc;
	}
	*out = w;
	return 0;

nomem:
	writer_free(w);
	return -BTR_ERR_NOMEM;
}

int btr_trace_writer_new(const char *path, const struct btr_trace_writer_opts *opts,
			 struct btr_trace_writer **out)
{
	return writer_start(path, -1, opts, out);
}

int btr_trace_writer_new_fd(int fd, const char *name, const struct btr_trace_writer_opts *opts,
			    struct btr_trace_writer **out)
{
	if (fd < 0)
		return -BTR_ERR_INVAL;
	return writer_start(name, fd, opts, out);
}

int btr_trace_writer_streaming(const struct btr_trace_writer *w)
{
	return w && w->stream;
}

int btr_trace_writer_close(struct btr_trace_writer *w)
{
	uint8_t end[END_PAYLOAD];
	int rc;

	if (!w)
		return -BTR_ERR_INVAL;
	rc = flush_chunk(w);
	if (!rc) {
		put64(end, w->chunks);
		put64(end + 8, w->records);
		rc = emit_chunk(w, CF_END, end, END_PAYLOAD, END_PAYLOAD, 0);
	}
	if (w->stream) {
		/* Written through: nothing to sync or rename; the caller's
		 * descriptor stays open. */
		if (w->own_fd && close(w->fd) < 0 && !rc)
			rc = btr_err_from_errno(errno);
		w->fd = -1;
		writer_free(w);
		return rc;
	}
	/* fsync before rename: otherwise a power loss can leave the new
	 * name pointing at an empty file (the classic ext4 rename race). */
	if (!rc && !w->no_sync && fsync(w->fd) < 0 && errno != EINVAL && errno != EROFS)
		rc = btr_err_from_errno(errno);
	if (!rc) {
		int fd = w->fd;
		w->fd = -1;
		if (close(fd) < 0)
			rc = btr_err_from_errno(errno);
	}
	if (!rc && rename(w->tmp, w->path) < 0) {
		rc = btr_err_from_errno(errno);
		btr_debug("trace: renaming %s to %s: %s", w->tmp, w->path, strerror(errno));
	}
	if (rc) {
		unlink(w->tmp);
		free(w->tmp);
		w->tmp = NULL;
	}
	writer_free(w);
	return rc;
}

int btr_trace_writer_retarget(struct btr_trace_writer *w, const char *path)
{
	if (!w || !path || !*path)
		return -BTR_ERR_INVAL;
	if (w->stream)
		return -BTR_ERR_UNSUPPORTED;   /* what was written is gone already */
	char *p = strdup(path);
	if (!p)
		return -BTR_ERR_NOMEM;
	free(w->path);
	w->path = p;
	return 0;
}

int btr_trace_writer_error(const struct btr_trace_writer *w)
{
	return w ? w->err : -BTR_ERR_INVAL;
}

int btr_trace_writer_abort_keep(struct btr_trace_writer *w, char *kept, size_t kept_size)
{
	if (!w)
		return 0;
	int ok = 0;
	if (w->tmp && w->chunks && kept && kept_size) {
		/* The chunks before the failure are complete and checksummed;
		 * a reader stops at the cut one and says the file was cut. */
		int n = snprintf(kept, kept_size, "%s.partial", w->path);
		ok = n > 0 && (size_t)n < kept_size && rename(w->tmp, kept) == 0;
	}
	if (!ok && w->tmp)
		unlink(w->tmp);
	writer_free(w);
	return ok;
}

void btr_trace_writer_abort(struct btr_trace_writer *w)
{
	if (!w)
		return;
	if (w->tmp)
		unlink(w->tmp);
	writer_free(w);
}

/* ===================================================================== */
/* Reader                                                                */
/* ===================================================================== */

struct btr_trace_reader {
	int fd;                 /* file source, or -1 */
	uint64_t file_size;     /* file source: size at the last fstat */
	const uint8_t *mem;     /* memory source */
	uint64_t mem_size;
	uint64_t off;           /* offset of the next chunk header */
	uint64_t cur_off;       /* offset of the chunk being read */
	int err;                /* sticky error (EOS included) */
	int resync;             /* scan for a chunk header before the next read */
	uint64_t chunk_records; /* sum of record counts of the chunks read */

	const uint8_t *recs;    /* records of the current chunk */
	size_t recs_len, pos;
	uint32_t left;          /* records not yet returned from this chunk */

	uint8_t *sbuf;          /* stored payload (file source) / scan window */
	size_t scap;
	uint8_t *rbuf;          /* decompressed payload */
	size_t rcap;
	ZSTD_DCtx *dctx;
	struct btr_lbr_entry *lbr;
	size_t lbr_cap;
	struct btr_branch *br;
	size_t br_cap;
	char *str;              /* 3 * (BTR_TRACE_MAX_STRING + 1): PROCESS has three strings */

	struct btr_trace_info info;
	/* perf.data input: every call is forwarded to lib/perfdata.c. */
	struct btr_perf_reader *perf;
};

/* Copies up to @len bytes at @off into @dst; returns the count (short only
 * at end of input) or a negative error. */
static int64_t read_at(struct btr_trace_reader *r, uint64_t off, void *dst, size_t len)
{
	if (!r->mem && r->fd < 0)
		return -BTR_ERR_INTERNAL;
	if (r->fd < 0) {
		if (off >= r->mem_size)
			return 0;
		if (len > r->mem_size - off)
			len = (size_t)(r->mem_size - off);
		memcpy(dst, r->mem + off, len);
		return (int64_t)len;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(r->fd, (uint8_t *)dst + got, len - got, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return btr_err_from_errno(errno);
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (int64_t)got;
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 4096;
	while (n < need)
		n *= 2;
	uint8_t *p = realloc(*buf, n);
	if (!p)
		return -BTR_ERR_NOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

/* Returns a pointer to @len bytes at @off (zero-copy for memory input),
 * setting *@got to how many exist. */
static int load(struct btr_trace_reader *r, uint64_t off, size_t len, const uint8_t **p, size_t *got)
{
	if (r->fd < 0) {
		*p = r->mem + (off < r->mem_size ? off : r->mem_size);
		*got = off >= r->mem_size ? 0 : (r->mem_size - off < len ? (size_t)(r->mem_size - off) : len);
		return 0;
	}
	int rc = grow(&r->sbuf, &r->scap, len);
	if (rc)
		return rc;
	int64_t n = read_at(r, off, r->sbuf, len);
	if (n < 0)
		return (int)n;
	*p = r->sbuf;
	*got = (size_t)n;
	return 0;
}

static int chunk_header_ok(const uint8_t *h)
{
	return get32(h) == CHUNK_MAGIC && get32(h + 28) == btr_crc32c(0, h, 28);
}

/* After a damaged chunk header: finds the next offset >= r->off holding a
 * valid chunk header (magic and header CRC).  -BTR_ERR_TRUNCATED if none. */
static int resync(struct btr_trace_reader *r)
{
	uint64_t pos = r->off;
	int rc = grow(&r->sbuf, &r->scap, SCAN_WINDOW);

	if (rc)
		return rc;
	for (;;) {
		int64_t n = read_at(r, pos, r->sbuf, SCAN_WINDOW);
		if (n < 0)
			return (int)n;
		if (n < (int64_t)CHUNK_HDR)
			return -BTR_ERR_TRUNCATED;
		for (size_t i = 0; i + CHUNK_HDR <= (size_t)n; i++) {
			if (r->sbuf[i] == 'B' && chunk_header_ok(r->sbuf + i)) {
				r->off = pos + i;
				r->resync = 0;
				btr_debug("trace: resynchronized at chunk offset %#llx",
					  (unsigned long long)r->off);
				return 0;
			}
		}
		pos += (uint64_t)n - (CHUNK_HDR - 1);
	}
}

/* Loads the next chunk.  0 with r->left/recs set, or a negative error. */
static int next_chunk(struct btr_trace_reader *r)
{
	uint8_t h[CHUNK_HDR];
	const uint8_t *p = NULL;
	size_t got = 0;
	int rc;

	if (r->resync && (rc = resync(r)))
		return rc;
	r->cur_off = r->off;
	int64_t n = read_at(r, r->off, h, CHUNK_HDR);
	if (n < 0)
		return (int)n;
	if (n < (int64_t)CHUNK_HDR) {
		/* n == 0: the file stops between chunks but has no end chunk
		 * (writer killed after a flush); still a truncated file. */
		btr_debug("trace: input ends at %#llx without an end chunk",
			  (unsigned long long)r->off);
		return -BTR_ERR_TRUNCATED;
	}
	if (!chunk_header_ok(h)) {
		btr_debug("trace: damaged chunk header at offset %#llx", (unsigned long long)r->off);
		r->info.bad_chunks++;
		r->resync = 1;
		r->off++;
		return -BTR_ERR_CHECKSUM;
	}
	uint32_t flags = get32(h + 4), raw = get32(h + 8), stored = get32(h + 12);
	uint32_t count = get32(h + 16), pcrc = get32(h + 20);

	if (raw > BTR_TRACE_CHUNK_MAX || stored > ZSTD_compressBound(BTR_TRACE_CHUNK_MAX) ||
	    (!(flags & CF_ZSTD) && stored != raw)) {
		btr_debug("trace: chunk at %#llx has impossible sizes (%u stored, %u raw)",
			 (unsigned long long)r->off, stored, raw);
		return -BTR_ERR_BAD_RECORD;
	}
	/* A file may still be growing (dumping a live recording), so look
	 * again before calling it truncated; and never allocate a buffer
	 * for bytes the file does not have. */
	if (r->fd >= 0 && r->off + CHUNK_HDR + stored > r->file_size) {
		struct stat st;
		if (fstat(r->fd, &st) == 0)
			r->file_size = (uint64_t)st.st_size;
		if (r->off + CHUNK_HDR + stored > r->file_size)
			return -BTR_ERR_TRUNCATED;
	}
	if ((rc = load(r, r->off + CHUNK_HDR, stored, &p, &got)))
		return rc;
	if (got < stored)
		return -BTR_ERR_TRUNCATED;
	if (btr_crc32c(0, p, stored) != pcrc) {
		btr_debug("trace: chunk at offset %#llx fails its checksum, skipped",
			 (unsigned long long)r->off);
		r->info.bad_chunks++;
		r->off += CHUNK_HDR + stored;
		return -BTR_ERR_CHECKSUM;
	}
	r->off += CHUNK_HDR + stored;

	if (flags & CF_END) {
		if (stored != END_PAYLOAD || count || (flags & CF_ZSTD))
			return -BTR_ERR_BAD_RECORD;
		/* The totals prove that no whole chunk went missing (unless we
		 * already reported damage, when they cannot match). */
		if (!r->info.bad_chunks &&
		    (get64(p) != r->info.chunks || get64(p + 8) != r->chunk_records)) {
			btr_debug("trace: end chunk counts %llu chunks/%llu records, file has %llu/%llu",
				 (unsigned long long)get64(p), (unsigned long long)get64(p + 8),
				 (unsigned long long)r->info.chunks,
				 (unsigned long long)r->chunk_records);
			return -BTR_ERR_BAD_RECORD;
		}
		r->info.complete = 1;
		return -BTR_ERR_EOS;
	}

	if (flags & CF_ZSTD) {
		if (!r->dctx && !(r->dctx = ZSTD_createDCtx()))
			return -BTR_ERR_NOMEM;
		if ((rc = grow(&r->rbuf, &r->rcap, raw ? raw : 1)))
			return rc;
		size_t dn = ZSTD_decompressDCtx(r->dctx, r->rbuf, raw, p, stored);
		if (ZSTD_isError(dn) || dn != raw) {
			btr_debug("trace: chunk at %#llx: zstd: %s", (unsigned long long)r->cur_off,
				 ZSTD_isError(dn) ? ZSTD_getErrorName(dn) : "size mismatch");
			return -BTR_ERR_COMPRESS;
		}
		p = r->rbuf;
		r->info.compressed_chunks++;
	}

	/* Walk the record headers once, so a chunk is either returned whole
	 * or not at all (no half chunk followed by BAD_RECORD). */
	size_t pos = 0;
	uint32_t k = 0;
	while (pos < raw) {
		if (raw - pos < REC_HDR || get32(p + pos + 4) > raw - pos - REC_HDR) {
			btr_debug("trace: chunk at %#llx: record %u overruns the chunk",
				 (unsigned long long)r->cur_off, k);
			return -BTR_ERR_BAD_RECORD;
		}
		pos += REC_HDR + get32(p + pos + 4);
		k++;
	}
	if (k != count) {
		btr_debug("trace: chunk at %#llx holds %u records, header says %u",
			 (unsigned long long)r->cur_off, k, count);
		return -BTR_ERR_BAD_RECORD;
	}
	r->recs = p;
	r->recs_len = raw;
	r->pos = 0;
	r->left = count;
	r->info.chunks++;
	r->info.stored_bytes += stored;
	r->info.raw_bytes += raw;
	r->chunk_records += count;
	return 0;
}

/* Bounds-checked little-endian cursor over one record body. */
struct cur {
	const uint8_t *p;
	size_t left;
	int bad;
};

static const uint8_t *take(struct cur *c, size_t n)
{
	if (c->bad || n > c->left) {
		c->bad = 1;
		return NULL;
	}
	const uint8_t *p = c->p;
	c->p += n;
	c->left -= n;
	return p;
}

static uint8_t c8(struct cur *c)
{
	const uint8_t *p = take(c, 1);
	return p ? p[0] : 0;
}

static uint16_t c16(struct cur *c)
{
	const uint8_t *p = take(c, 2);
	return p ? get16(p) : 0;
}

static uint32_t c32(struct cur *c)
{
	const uint8_t *p = take(c, 4);
	return p ? get32(p) : 0;
}

static uint64_t c64(struct cur *c)
{
	const uint8_t *p = take(c, 8);
	return p ? get64(p) : 0;
}

/* Reads a length-prefixed string into @dst (capacity @cap, truncating,
 * always NUL-terminated). */
static void cstr(struct cur *c, char *dst, size_t cap)
{
	uint16_t n = c16(c);
	const uint8_t *p = take(c, n);
	size_t k = n < cap - 1 ? n : cap - 1;

	if (!p)
		k = 0;
	else
		memcpy(dst, p, k);
	dst[k] = 0;
}


/* Makes the reader-owned array @p (capacity *@cap elements of @elem
 * bytes) hold more than @n elements.  Returns the array (moved or not),
 * or NULL when out of memory (@p then stays valid and unchanged). */
static void *grow_array(void *p, size_t *cap, uint32_t n, size_t elem)
{
	if (n < *cap)
		return p;
	void *q = realloc(p, ((size_t)n + 1) * elem);
	if (q)
		*cap = (size_t)n + 1;
	return q;
}

static int decode(struct btr_trace_reader *r, enum btr_rec_type type, const uint8_t *body,
		  size_t len, struct btr_record *rec)
{
	struct cur c = { body, len, 0 };

	memset(rec, 0, sizeof(*rec));
	rec->type = type;
	switch (type) {
	case BTR_REC_MACHINE: {
		struct btr_rec_machine *m = &rec->u.machine;
		cstr(&c, m->backend, sizeof(m->backend));
		cstr(&c, m->cpu_vendor, sizeof(m->cpu_vendor));
		m->cpu_family = c16(&c);
		m->cpu_model = c16(&c);
		m->cpu_stepping = c16(&c);
		m->lbr_depth = c16(&c);
		m->flags = c32(&c);
		m->mtc_freq = c8(&c);
		m->cyc_thresh = c8(&c);
		m->addr_filter_cfg = c8(&c);
		m->reserved = c8(&c);
		m->nom_freq = c32(&c);
		m->cpuid15_eax = c32(&c);
		m->cpuid15_ebx = c32(&c);
		m->tsc_hz = c64(&c);
		for (int i = 0; i < 4; i++) {
			m->addr_filter[i][0] = c64(&c);
			m->addr_filter[i][1] = c64(&c);
		}
		m->start_time_ns = c64(&c);
		break;
	}
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_EXEC: {
		struct btr_rec_module *m = &rec->u.module;
		m->pid = c32(&c);
		m->prot = c32(&c);
		m->start = c64(&c);
		m->size = c64(&c);
		m->pgoff = c64(&c);
		m->tsc = c64(&c);
		m->build_id_len = c8(&c);
		if (m->build_id_len > sizeof(m->build_id)) {
			c.bad = 1;
			break;
		}
		const uint8_t *b = take(&c, m->build_id_len);
		if (b)
			memcpy(m->build_id, b, m->build_id_len);
		cstr(&c, r->str, BTR_TRACE_MAX_STRING + 1);
		m->path = r->str;
		break;
	}
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME: {
		struct btr_rec_thread *t = &rec->u.thread;
		t->pid = c32(&c);
		t->tid = c32(&c);
		t->parent_tid = c32(&c);
		t->exit_code = (int32_t)c32(&c);
		t->tsc = c64(&c);
		cstr(&c, r->str, BTR_TRACE_MAX_STRING + 1);
		t->name = r->str;
		break;
	}
	case BTR_REC_PT:
	case BTR_REC_BTS:
	case BTR_REC_BTS_INSNS: {
		struct btr_rec_data *d = &rec->u.data;
		d->tid = c32(&c);
		d->cpu = (int32_t)c32(&c);
		d->stream_offset = c64(&c);
		d->size = c64(&c);
		d->data = take(&c, d->size > c.left ? c.left + 1 : (size_t)d->size);
		break;
	}
	case BTR_REC_LBR: {
		struct btr_rec_lbr *l = &rec->u.lbr;
		l->pid = c32(&c);
		l->tid = c32(&c);
		l->cpu = (int32_t)c32(&c);
		l->count = c32(&c);
		l->tsc = c64(&c);
		l->ip = c64(&c);
		if (c.bad || l->count > c.left / LBR_ENTRY) {
			c.bad = 1;
			break;
		}
		void *lbr = grow_array(r->lbr, &r->lbr_cap, l->count, sizeof(*r->lbr));
		if (!lbr)
			return -BTR_ERR_NOMEM;
		r->lbr = lbr;
		for (uint32_t i = 0; i < l->count; i++) {
			r->lbr[i].from = c64(&c);
			r->lbr[i].to = c64(&c);
			r->lbr[i].flags = c32(&c);
			r->lbr[i].cycles = c32(&c);
		}
		l->entries = r->lbr;
		break;
	}
	case BTR_REC_BRANCHES: {
		struct btr_rec_branches *b = &rec->u.branches;
		b->tid = c32(&c);
		b->count = c32(&c);
		if (c.bad || b->count > c.left / BRANCH_SIZE) {
			c.bad = 1;
			break;
		}
		void *br = grow_array(r->br, &r->br_cap, b->count, sizeof(*r->br));
		if (!br)
			return -BTR_ERR_NOMEM;
		r->br = br;
		for (uint32_t i = 0; i < b->count; i++) {
			struct btr_branch *x = &r->br[i];
			x->from = c64(&c);
			x->to = c64(&c);
			x->tsc = c64(&c);
			x->insns = c64(&c);
			x->tid = c32(&c);
			x->cycles = c32(&c);
			x->flags = c16(&c);
			x->kind = c8(&c);
			x->reserved = c8(&c);
			x->pid = 0;
		}
		b->branches = r->br;
		break;
	}
	case BTR_REC_PROCESS_EXIT: {
		struct btr_rec_exit *x = &rec->u.exit;
		x->pid = c32(&c);
		x->tid = c32(&c);
		x->code = (int32_t)c32(&c);
		x->signo = (int32_t)c32(&c);
		x->ip = c64(&c);
		x->addr = c64(&c);
		x->tsc = c64(&c);
		break;
	}
	case BTR_REC_SWITCH: {
		struct btr_rec_switch *x = &rec->u.sw;
		x->pid = c32(&c);
		x->tid = c32(&c);
		x->cpu = (int32_t)c32(&c);
		x->flags = c32(&c);
		x->tsc = c64(&c);
		break;
	}
	case BTR_REC_PROCESS: {
		/* Three strings: path, args (NUL-separated), detail; each in
		 * its own third of the string buffer. */
		struct btr_rec_process *x = &rec->u.process;
		const size_t cap = BTR_TRACE_MAX_STRING + 1;
		x->pid = c32(&c);
		x->ppid = c32(&c);
		x->event = c32(&c);
		x->reason = (int32_t)c32(&c);
		x->tsc = c64(&c);
		cstr(&c, r->str, cap);
		x->path = r->str;
		uint16_t an = c16(&c);
		const uint8_t *ap = take(&c, an);
		if (ap)
			memcpy(r->str + cap, ap, an);
		r->str[cap + (ap ? an : 0)] = 0;
		x->args = r->str + cap;
		x->args_len = ap ? an : 0;
		cstr(&c, r->str + 2 * cap, cap);
		x->detail = r->str + 2 * cap;
		break;
	}
	default:
		return 1; /* a type this file does not know yet: skipped */
	}
	/* Trailing bytes (c.left > 0) are fields appended by a newer minor
	 * version: ignored.  Missing bytes are a malformed record. */
	if (c.bad) {
		btr_debug("trace: chunk at %#llx: malformed %s record", (unsigned long long)r->cur_off,
			 btr_rec_type_name(type));
		return -BTR_ERR_BAD_RECORD;
	}
	return 0;
}

int btr_trace_read(struct btr_trace_reader *r, struct btr_record *rec)
{
	int rc;

	if (!r || !rec)
		return -BTR_ERR_INVAL;
	if (r->perf) {
		rc = btr_perf_read(r->perf, rec);
		if (!rc)
			r->info.records++;
		else if (rc == -BTR_ERR_EOS)
			r->info.complete = 1;
		return rc;
	}
	if (r->err)
		return r->err;
	for (;;) {
		if (!r->left) {
			rc = next_chunk(r);
			if (rc == -BTR_ERR_CHECKSUM)
				return rc;
			if (rc) {
				r->err = rc;
				return rc;
			}
			continue;
		}
		const uint8_t *p = r->recs + r->pos;
		uint16_t type = get16(p);
		uint32_t len = get32(p + 4);

		r->pos += REC_HDR + len;
		r->left--;
		if (type == 0 || type >= BTR_REC__MAX) {
			/* Forward compatibility: a newer minor version's record. */
			r->info.unknown_records++;
			continue;
		}
		rc = decode(r, (enum btr_rec_type)type, p + REC_HDR, len, rec);
		if (rc > 0) {
			r->info.unknown_records++;
			continue;
		}
		if (rc) {
			r->err = rc;
			return rc;
		}
		r->info.records++;
		return 0;
	}
}

/* Parses the file header; r->off is then the first chunk. */
static int read_header(struct btr_trace_reader *r)
{
	uint8_t h[FILE_HDR_MAX];
	int64_t n = read_at(r, 0, h, FILE_HDR_FIXED);

	if (n < 0)
		return (int)n;
	if (n < 8) {
		/* An empty file or a prefix of a magic is a cut-off trace;
		 * anything else is some other kind of file. */
		if (!memcmp(h, FILE_MAGIC, (size_t)n) || !memcmp(h, PERF_MAGIC, (size_t)n))
			return -BTR_ERR_TRUNCATED;
		return -BTR_ERR_BAD_MAGIC;
	}
	if (memcmp(h, FILE_MAGIC, 8))
		return -BTR_ERR_BAD_MAGIC;
	if (n < 12)
		return -BTR_ERR_TRUNCATED;
	/* The first 12 bytes (magic, major, minor) are frozen forever, so
	 * the version is checked before anything whose layout it governs. */
	r->info.major = get16(h + 8);
	r->info.minor = get16(h + 10);
	if (r->info.major != BTR_TRACE_VERSION_MAJOR) {
		btr_debug("trace: format version %u.%u, this reader knows %u.x", r->info.major,
			 r->info.minor, BTR_TRACE_VERSION_MAJOR);
		return -BTR_ERR_BAD_VERSION;
	}
	if (n < (int64_t)FILE_HDR_FIXED)
		return -BTR_ERR_TRUNCATED;
	uint32_t hlen = get32(h + 16);
	uint16_t clen = get16(h + 36);
	if (hlen < FILE_HDR_FIXED + clen || hlen > FILE_HDR_MAX) {
		/* Sizes are only trustworthy once the CRC passed; if the CRC
		 * cannot even be computed the header is damaged. */
		return -BTR_ERR_CHECKSUM;
	}
	n = read_at(r, 0, h, hlen);
	if (n < 0)
		return (int)n;
	if (n < (int64_t)hlen)
		return -BTR_ERR_TRUNCATED;
	uint32_t crc = get32(h + 20);
	put32(h + 20, 0);
	if (btr_crc32c(0, h, hlen) != crc)
		return -BTR_ERR_CHECKSUM;
	r->info.flags = get32(h + 12);
	r->info.created_ns = get64(h + 24);
	r->info.writer_pid = get32(h + 32);
	size_t k = clen < sizeof(r->info.creator) - 1 ? clen : sizeof(r->info.creator) - 1;
	memcpy(r->info.creator, h + 38, k);
	r->info.creator[k] = 0;
	r->off = r->cur_off = hlen;
	return 0;
}

static struct btr_trace_reader *reader_alloc(void)
{
	struct btr_trace_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->fd = -1;
	r->info.format = BTR_TRACE_FMT_BTR;
	r->str = malloc(3 * (BTR_TRACE_MAX_STRING + 1));
	if (!r->str) {
		free(r);
		return NULL;
	}
	return r;
}

void btr_trace_reader_free(struct btr_trace_reader *r)
{
	if (!r)
		return;
	btr_perf_reader_free(r->perf);
	if (r->fd >= 0)
		close(r->fd);
	ZSTD_freeDCtx(r->dctx);
	free(r->sbuf);
	free(r->rbuf);
	free(r->lbr);
	free(r->br);
	free(r->str);
	free(r);
}

static int is_perf(struct btr_trace_reader *r)
{
	uint8_t m[8];
	return read_at(r, 0, m, 8) == 8 && btr_perf_probe(m, 8);
}

/* Common tail of the two constructors: a perf.data input goes to the
 * perf.data reader (from @path, or from r->mem when @path is NULL), anything
 * else must start with a btr file header.  Frees @r on failure. */
static int reader_finish_open(struct btr_trace_reader *r, const char *path, struct btr_trace_reader **out)
{
	int rc;

	if (is_perf(r)) {
		if (path) {
			/* The perf.data reader maps the file itself. */
			close(r->fd);
			r->fd = -1;
		}
		rc = path ? btr_perf_reader_new(path, &r->perf)
			  : btr_perf_reader_new_mem(r->mem_size ? r->mem : NULL, r->mem_size, &r->perf);
		if (!rc)
			r->info.format = BTR_TRACE_FMT_PERF;
	} else {
		rc = read_header(r);
	}
	if (rc) {
		btr_trace_reader_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int btr_trace_reader_new(const char *path, struct btr_trace_reader **out)
{
	struct btr_trace_reader *r;
	struct stat st;
	int rc;

	if (!path || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	r = reader_alloc();
	if (!r)
		return -BTR_ERR_NOMEM;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		rc = btr_err_from_errno(errno);
		goto fail;
	}
	if (fstat(r->fd, &st) < 0) {
		rc = btr_err_from_errno(errno);
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -BTR_ERR_ISDIR;
		goto fail;
	}
	/* Pipes and other unsized files: trust pread's short reads instead. */
	r->file_size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : UINT64_MAX / 2;
	return reader_finish_open(r, path, out);
fail:
	btr_trace_reader_free(r);
	return rc;
}

int btr_trace_reader_new_mem(const void *buf, size_t size, struct btr_trace_reader **out)
{
	struct btr_trace_reader *r;

	if ((!buf && size) || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	r = reader_alloc();
	if (!r)
		return -BTR_ERR_NOMEM;
	r->mem = buf ? buf : (const void *)"";
	r->mem_size = size;
	return reader_finish_open(r, NULL, out);
}

uint64_t btr_trace_reader_offset(const struct btr_trace_reader *r)
{
	if (r && r->perf)
		return btr_perf_reader_offset(r->perf);
	return r ? r->cur_off : 0;
}

void btr_trace_reader_info(const struct btr_trace_reader *r, struct btr_trace_info *out)
{
	*out = r->info;
}
