/* trace.c - the .btr trace container: the streaming reader (the writer is
 * trace_write.c; the layout both share is trace_format.h).
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
#include "trace_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>


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
	[BTR_REC_IP_FILTER] = "ip_filter",
	[BTR_REC_PROCESS] = "process",
	[BTR_REC_BTS_INSNS] = "bts_insns",
	[BTR_REC_SWITCH] = "switch",
	[BTR_REC_CODE] = "code",
	[BTR_REC_SYMBOL] = "symbol",
	[BTR_REC_WINDOW] = "window",
};

const char *btr_rec_type_name(enum btr_rec_type type)
{
	if ((unsigned)type >= BTR_REC__MAX || !type_names[type])
		return "unknown";
	return type_names[type];
}

const char *btr_thread_end_name(uint32_t end)
{
	static const char *const names[] = { "unknown", "exited", "killed", "running" };
	return end < BTR_ARRAY_SIZE(names) ? names[end] : names[0];
}

const char *btr_window_reason_name(uint32_t reason)
{
	static const char *const names[] = { "?", "trigger", "request", "end", "killed" };
	return reason < BTR_ARRAY_SIZE(names) ? names[reason] : names[0];
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
	/* perf.data input: every call is forwarded to lib/perf/perfdata.c. */
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
	case BTR_REC_IP_FILTER:   /* format 1.6 */
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
		if (type == BTR_REC_THREAD_EXIT && !c.bad && c.left >= THREAD_EXIT_MORE) {   /* format 1.4 */
			t->end = c32(&c);
			t->signo = (int32_t)c32(&c);
		}
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
	case BTR_REC_CODE: {   /* format 1.5 */
		struct btr_rec_code *x = &rec->u.code;
		x->pid = c32(&c);
		x->flags = c32(&c);
		x->addr = c64(&c);
		x->hash = c64(&c);
		x->size = c32(&c);
		uint32_t dl = c32(&c);
		if (dl && (dl != x->size || dl > c.left))
			c.bad = 1;
		x->data = dl && !c.bad ? take(&c, dl) : NULL;
		if (x->size > BTR_TRACE_MAX_CODE || !x->size)
			c.bad = 1;
		break;
	}
	case BTR_REC_SYMBOL: {   /* format 1.5 */
		struct btr_rec_symbol *x = &rec->u.sym;
		x->pid = c32(&c);
		x->source = c32(&c);
		x->addr = c64(&c);
		x->size = c64(&c);
		cstr(&c, r->str, BTR_TRACE_MAX_STRING + 1);
		x->name = r->str;
		break;
	}
	case BTR_REC_WINDOW: {   /* format 1.6 */
		struct btr_rec_window *x = &rec->u.win;
		x->pid = c32(&c);
		x->tid = c32(&c);
		x->reason = c32(&c);
		x->index = c32(&c);
		x->stream_offset = c64(&c);
		x->size = c64(&c);
		x->ip = c64(&c);
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
	if (btr_file_kind(h, (size_t)n) != BTR_FILE_BTR)
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

enum btr_file_kind btr_file_kind(const void *buf, size_t size)
{
	if (!buf || size < 8)
		return BTR_FILE_OTHER;
	if (!memcmp(buf, FILE_MAGIC, 8))
		return BTR_FILE_BTR;
	return btr_perf_probe(buf, size) ? BTR_FILE_PERF : BTR_FILE_OTHER;
}

static int is_perf(struct btr_trace_reader *r)
{
	uint8_t m[8];
	return read_at(r, 0, m, 8) == 8 && btr_file_kind(m, 8) == BTR_FILE_PERF;
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
	r->info.size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
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
	r->info.size = size;
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
