/* trace_write.c - the .btr trace container: the streaming writer
 * (docs/format.md; the reader is trace.c, the shared layout
 * trace_format.h).  Memory: one chunk buffer (opts.chunk_size) plus the
 * zstd output buffer.  Where the output leads (a new or existing file
 * through a temporary name, a symlink's target, a device, FIFO or fd
 * written through) is decided in writer_start. */
#include "btr/trace.h"
#include "btr/version.h"
#include "btr/error.h"
#include "btr/file.h"
#include "crc32c.h"
#include "internal.h"
#include "trace_format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>


/* ===================================================================== */
/* Writer                                                                */
/* ===================================================================== */

struct btr_trace_writer {
	int fd;
	int err;                /* sticky: once set, every call returns it */
	char *path;             /* where close puts the trace (retarget changes it) */
	struct btr_outfile *of; /* the temporary file (NULL when streaming) */
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
		btr_debug("trace: writing %s: %s", w->path, btr_errstr(rc));
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
	case BTR_REC_IP_FILTER:
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
		body = THREAD_FIXED + n1 + (rec->type == BTR_REC_THREAD_EXIT ? THREAD_EXIT_MORE : 0);
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
	case BTR_REC_WINDOW:
		body = WINDOW_FIXED;
		break;
	case BTR_REC_CODE:
		if (!rec->u.code.size || rec->u.code.size > BTR_TRACE_MAX_CODE)
			return -BTR_ERR_INVAL;
		body = CODE_FIXED + (rec->u.code.data ? rec->u.code.size : 0);
		break;
	case BTR_REC_SYMBOL:
		n1 = slen(rec->u.sym.name);
		if (n1 > BTR_TRACE_MAX_STRING)
			return -BTR_ERR_INVAL;
		body = SYMBOL_FIXED + n1;
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
	case BTR_REC_IP_FILTER:
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
		if (rec->type == BTR_REC_THREAD_EXIT) {   /* format 1.4 */
			put32(p + 26 + n1, t->end);
			put32(p + 30 + n1, (uint32_t)t->signo);
		}
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
	case BTR_REC_CODE: {
		const struct btr_rec_code *x = &rec->u.code;
		put32(p, x->pid);
		put32(p + 4, x->flags);
		put64(p + 8, x->addr);
		put64(p + 16, x->hash);
		put32(p + 24, x->size);
		put32(p + 28, x->data ? x->size : 0);
		if (x->data)
			memcpy(p + CODE_FIXED, x->data, x->size);
		break;
	}
	case BTR_REC_WINDOW: {
		const struct btr_rec_window *x = &rec->u.win;
		put32(p, x->pid);
		put32(p + 4, x->tid);
		put32(p + 8, x->reason);
		put32(p + 12, x->index);
		put64(p + 16, x->stream_offset);
		put64(p + 24, x->size);
		put64(p + 32, x->ip);
		break;
	}
	case BTR_REC_SYMBOL: {
		const struct btr_rec_symbol *x = &rec->u.sym;
		put32(p, x->pid);
		put32(p + 4, x->source);
		put64(p + 8, x->addr);
		put64(p + 16, x->size);
		put_str(p + 24, x->name, n1);
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
	if (w->of) {
		if (w->of->fd != w->fd && w->fd >= 0)
			close(w->fd);
		btr_outfile_discard(w->of);   /* removes the temporary file */
		free(w->of);
	} else if (w->fd >= 0 && w->own_fd) {
		close(w->fd);
	}
	ZSTD_freeCCtx(w->cctx);
	free(w->zbuf);
	free(w->buf);
	free(w->path);
	free(w);
}

/* Where @path leads: 0 for a file to create through a temporary file
 * (btr_outfile_open), 1 for a device, FIFO or socket the user named, to
 * write through (never replaced), or a negative error. */
static int output_kind(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : btr_err_from_errno(errno);
	if (S_ISDIR(st.st_mode))
		return -BTR_ERR_ISDIR;
	return !S_ISREG(st.st_mode);
}

/* The common part of the constructors: @fd is the caller's (or -1: @path
 * is created); writes the file header. */
static int writer_start(const char *path, int fd, const struct btr_trace_writer_opts *opts,
			struct btr_trace_writer **out)
{
	struct btr_trace_writer_opts o = { 0 };
	struct btr_trace_writer *w;
	uint8_t hdr[FILE_HDR_FIXED + 64];
	char creator[] = "btr " BTR_VERSION_STRING;
	struct timespec ts = { 0 };
	size_t clen = strlen(creator), hlen;
	int rc, kind = 1;

	if (!path || !*path || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	if (!BTR_OPTS_VALID(opts, BTR_OFFSETOFEND(struct btr_trace_writer_opts, compress)))
		return -BTR_ERR_INVAL;
	BTR_OPTS_COPY(&o, opts);
	if (o.compress < 0 || o.compress > ZSTD_maxCLevel())
		return -BTR_ERR_INVAL;
	if (!o.chunk_size)
		o.chunk_size = BTR_TRACE_CHUNK_DEFAULT;
	if (o.chunk_size < BTR_TRACE_CHUNK_MIN)
		o.chunk_size = BTR_TRACE_CHUNK_MIN;
	if (o.chunk_size > BTR_TRACE_CHUNK_MAX)
		o.chunk_size = BTR_TRACE_CHUNK_MAX;
	if (fd < 0 && (kind = output_kind(path)) < 0)
		return kind;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -BTR_ERR_NOMEM;
	w->fd = fd;
	w->own_fd = fd < 0;
	w->stream = kind == 1;
	w->chunk_size = w->cap = o.chunk_size;
	w->level = o.compress;
	w->no_sync = o.no_sync;
	w->path = strdup(path);
	w->buf = malloc(w->cap);
	if (!w->stream)
		w->of = malloc(sizeof(*w->of));
	if (!w->path || !w->buf || (!w->stream && !w->of))
		goto nomem;
	if (w->of)
		w->of->fd = -1, w->of->tmp[0] = 0, w->of->placeholder = 0;
	if (w->level) {
		w->cctx = ZSTD_createCCtx();
		w->zcap = ZSTD_compressBound(w->cap);
		w->zbuf = malloc(w->zcap);
		if (!w->cctx || !w->zbuf)
			goto nomem;
	}

	rc = 0;
	if (fd < 0 && w->stream) {
		/* A device, FIFO or socket the user named: written through,
		 * never created, truncated, unlinked or renamed over. */
		w->fd = open(w->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
		if (w->fd < 0)
			rc = btr_err_from_errno(errno);
	} else if (fd < 0) {
		/* A random name beside the trace, O_EXCL (btr/file.h): never a
		 * name someone else planted.  A visible one, so that a killed
		 * recorder's cut trace can still be read (and the qemu
		 * backend finds its plugins' files). 0600: a trace holds argv,
		 * paths and code bytes (docs/reliability.md). */
		rc = btr_outfile_open(w->of, path, BTR_OUTFILE_PRIVATE, BTR_OUTFILE_NAMED);
		if (!rc) {
			w->fd = w->of->fd;
			char *p = strdup(w->of->path);   /* a symlink's target, resolved by the kernel */
			if (p) {
				free(w->path);
				w->path = p;
			}
		}
	}
	if (w->own_fd && w->fd >= 0 && w->fd < o.min_fd) {
		int hi = fcntl(w->fd, F_DUPFD_CLOEXEC, o.min_fd);
		if (hi >= 0) {
			close(w->fd);
			w->fd = hi;
			if (w->of)
				w->of->fd = hi;
		}
	}
	if (w->fd < 0) {
		if (!rc)
			rc = -BTR_ERR_IO;
		btr_debug("trace: cannot create %s: %s", w->path, btr_errstr(rc));
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
		btr_debug("trace: writing %s: %s", w->path, btr_errstr(rc));
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

int btr_trace_writer_move_fd(struct btr_trace_writer *w, int fd, int min_fd)
{
	if (!w || fd < 0 || min_fd < 0)
		return -BTR_ERR_INVAL;
	if (!w->own_fd || w->fd != fd)
		return 0;
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, min_fd);
	if (hi < 0)
		return btr_err_from_errno(errno);
	close(fd);
	w->fd = hi;
	return hi;
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
	/* fsync, close and rename (btr_outfile_commit); on failure the
	 * temporary file goes (writer_free). */
	if (!rc) {
		rc = btr_outfile_commit(w->of, w->path, w->no_sync);
		w->fd = -1;
		if (rc)
			btr_debug("trace: writing %s: %s", w->path, btr_errstr(rc));
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

const char *btr_trace_writer_tmp_name(const struct btr_trace_writer *w)
{
	return w && w->of && w->of->tmp[0] ? w->of->tmp : NULL;
}

int btr_trace_writer_abort_keep(struct btr_trace_writer *w, char *kept, size_t kept_size)
{
	if (!w)
		return 0;
	int ok = 0;
	if (w->of && w->chunks && kept && kept_size) {
		/* The chunks before the failure are complete and checksummed;
		 * a reader stops at the cut one and says the file was cut. */
		int n = snprintf(kept, kept_size, "%s.partial", w->path);
		if (n > 0 && (size_t)n < kept_size) {
			ok = btr_outfile_commit(w->of, kept, 1) == 0;
			w->fd = -1;   /* closed by the commit either way */
		}
	}
	writer_free(w);
	return ok;
}

void btr_trace_writer_abort(struct btr_trace_writer *w)
{
	if (!w)
		return;
	writer_free(w);
}
