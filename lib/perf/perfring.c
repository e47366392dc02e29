/* perfring.c - walking a perf_event data ring and AUX area in memory
 * (btr/perfring.h).
 *
 * The ordering rules are those of include/uapi/linux/perf_event.h and
 * tools/lib/perf/mmap.c: read the head with acquire semantics (the
 * kernel's smp_wmb() before publishing data_head pairs with it), and
 * store the tail with release semantics after the data is consumed (so
 * the reads of the records cannot move after the store that frees
 * them).  Everything else is arithmetic on free-running positions.
 */
#include "btr/perfring.h"
#include "btr/error.h"
#include "internal.h"

#include <string.h>

static inline uint64_t load_acq(const uint8_t *page, unsigned off)
{
	return __atomic_load_n((const uint64_t *)(const void *)(page + off), __ATOMIC_ACQUIRE);
}

static inline uint64_t load_relaxed(const uint8_t *page, unsigned off)
{
	return __atomic_load_n((const uint64_t *)(const void *)(page + off), __ATOMIC_RELAXED);
}

static inline void store_rel(uint8_t *page, unsigned off, uint64_t v)
{
	__atomic_store_n((uint64_t *)(void *)(page + off), v, __ATOMIC_RELEASE);
}

static inline int pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int btr_perf_ring_init(struct btr_perf_ring *r, void *page, void *data, uint64_t data_size, void *aux,
		       uint64_t aux_size, int aux_overwrite)
{
	if (!r || !page || !data || !pow2(data_size) || data_size < 8)
		return -BTR_ERR_INVAL;
	if ((aux && !pow2(aux_size)) || (!aux && aux_size))
		return -BTR_ERR_INVAL;
	/* the control fields are u64s accessed atomically */
	if ((uintptr_t)page & 7)
		return -BTR_ERR_INVAL;
	memset(r, 0, offsetof(struct btr_perf_ring, scratch));
	r->page = page;
	r->data = data;
	r->data_size = data_size;
	r->aux = aux;
	r->aux_size = aux_size;
	r->aux_overwrite = aux_overwrite;
	r->tail = load_relaxed(r->page, BTR_PERF_PAGE_DATA_TAIL);
	r->head = r->tail;
	if (aux) {
		r->aux_tail = load_relaxed(r->page, BTR_PERF_PAGE_AUX_TAIL);
		r->aux_head = r->aux_tail;
	}
	return 0;
}

int btr_perf_ring_init_mmap(struct btr_perf_ring *r, void *base, uint64_t len, uint64_t page_size)
{
	if (!r || !base || len < BTR_PERF_PAGE_MIN || ((uintptr_t)base & 7))
		return -BTR_ERR_INVAL;
	uint8_t *b = base;
	uint64_t off = load_relaxed(b, BTR_PERF_PAGE_DATA_OFFSET);
	uint64_t size = load_relaxed(b, BTR_PERF_PAGE_DATA_SIZE);
	if (!off && !size) {
		/* before Linux 4.1 the fields were reserved (zero): the data
		 * follows the first page */
		if (page_size < BTR_PERF_PAGE_MIN || page_size >= len)
			return -BTR_ERR_INVAL;
		off = page_size;
		size = len - page_size;
	}
	if (off < BTR_PERF_PAGE_MIN || off > len || size > len - off)
		return -BTR_ERR_INVAL;
	return btr_perf_ring_init(r, b, b + off, size, NULL, 0, 0);
}

int btr_perf_ring_set_aux(struct btr_perf_ring *r, void *aux, uint64_t aux_size, int overwrite)
{
	if (!r || !aux || !pow2(aux_size))
		return -BTR_ERR_INVAL;
	r->aux = aux;
	r->aux_size = aux_size;
	r->aux_overwrite = overwrite;
	r->aux_tail = load_relaxed(r->page, BTR_PERF_PAGE_AUX_TAIL);
	r->aux_head = r->aux_tail;
	return 0;
}

int64_t btr_perf_ring_begin(struct btr_perf_ring *r)
{
	if (!r || !r->page)
		return -BTR_ERR_INVAL;
	uint64_t head = load_acq(r->page, BTR_PERF_PAGE_DATA_HEAD);
	/* unsigned distance: a head behind the tail shows up as huge */
	if (head - r->tail > r->data_size) {
		btr_warn("perf ring: data_head 0x%llx is not within one ring (%llu bytes) of the tail 0x%llx; "
			 "skipping to the head",
			 (unsigned long long)head, (unsigned long long)r->data_size, (unsigned long long)r->tail);
		if (head > r->tail)
			r->bad_bytes += head - r->tail;
		r->tail = head;
		r->head = head;
		return -BTR_ERR_OVERFLOW;
	}
	r->head = head;
	return (int64_t)(head - r->tail);
}

/* Copies @len bytes at ring position @pos into @dst (wrapping). */
static void ring_copy(const struct btr_perf_ring *r, uint64_t pos, void *dst, uint64_t len)
{
	uint64_t mask = r->data_size - 1, off = pos & mask;
	uint64_t first = r->data_size - off;
	if (first >= len) {
		memcpy(dst, r->data + off, len);
	} else {
		memcpy(dst, r->data + off, first);
		memcpy((uint8_t *)dst + first, r->data, len - first);
	}
}

int btr_perf_ring_next(struct btr_perf_ring *r, struct btr_perf_ring_rec *out)
{
	if (!r || !out)
		return -BTR_ERR_INVAL;
	uint64_t avail = r->head - r->tail;
	if (!avail)
		return 0;
	uint8_t hdr[8];
	int err = 0;
	if (avail < 8) {
		err = -BTR_ERR_TRUNCATED;
	} else {
		ring_copy(r, r->tail, hdr, 8);
		uint16_t size;
		memcpy(&size, hdr + 6, 2);
		if (size < 8 || (size & 7))
			err = -BTR_ERR_BAD_RECORD;
		else if (size > avail)
			err = -BTR_ERR_TRUNCATED;
		else if (size > r->data_size)
			err = -BTR_ERR_BAD_RECORD;
	}
	if (err) {
		/* Records are published whole, so this is corruption: the
		 * rest of the batch cannot be framed. */
		btr_warn("perf ring: %s at position 0x%llx; skipping %llu bytes",
			 err == -BTR_ERR_TRUNCATED ? "record runs past data_head" : "malformed record header",
			 (unsigned long long)r->tail, (unsigned long long)avail);
		r->bad_bytes += avail;
		r->tail = r->head;
		return err;
	}
	uint32_t type;
	uint16_t misc, size;
	memcpy(&type, hdr, 4);
	memcpy(&misc, hdr + 4, 2);
	memcpy(&size, hdr + 6, 2);
	uint64_t off = r->tail & (r->data_size - 1);
	if (off + size <= r->data_size) {
		out->rec = r->data + off;
	} else {
		/* split at the end of the ring: reassemble */
		ring_copy(r, r->tail, r->scratch, size);
		out->rec = r->scratch;
	}
	out->type = type;
	out->misc = misc;
	out->size = size;
	out->pos = r->tail;
	r->tail += size;
	r->records++;
	/* PERF_RECORD_LOST { u64 id, lost }; LOST_SAMPLES { u64 lost } */
	if (type == BTR_PERF_RECORD_LOST && size >= 24) {
		uint64_t n;
		memcpy(&n, out->rec + 16, 8);
		r->lost_events += n;
	} else if (type == BTR_PERF_RECORD_LOST_SAMPLES && size >= 16) {
		uint64_t n;
		memcpy(&n, out->rec + 8, 8);
		r->lost_samples += n;
	}
	return 1;
}

void btr_perf_ring_end(struct btr_perf_ring *r)
{
	if (r && r->page)
		store_rel(r->page, BTR_PERF_PAGE_DATA_TAIL, r->tail);
}

int btr_perf_ring_aux_read(struct btr_perf_ring *r, struct btr_perf_aux_span spans[2], uint64_t *lost)
{
	return btr_perf_ring_aux_read_to(r, UINT64_MAX, spans, lost);
}

int btr_perf_ring_aux_read_to(struct btr_perf_ring *r, uint64_t end, struct btr_perf_aux_span spans[2],
			      uint64_t *lost)
{
	if (lost)
		*lost = 0;
	if (!r || !spans || !r->aux)
		return -BTR_ERR_INVAL;
	uint64_t head = load_acq(r->page, BTR_PERF_PAGE_AUX_HEAD);
	uint64_t tail = r->aux_tail;
	/* stop at @end if it lies in (tail, head]; nothing if it is behind */
	if (end != UINT64_MAX) {
		if (end - tail > (uint64_t)1 << 62) {
			r->aux_head = tail;
			return 0;
		}
		if (end - tail < head - tail)
			head = end;
	}
	r->aux_head = head;
	if (head == tail)
		return 0;
	if (head - tail > r->aux_size) {
		/* overwritten before it was read (or a head behind the tail,
		 * which only corrupt memory gives): keep the newest bytes */
		if (lost)
			*lost = head > tail ? head - tail - r->aux_size : 0;
		tail = head - (head >= r->aux_size ? r->aux_size : head);
	}
	uint64_t mask = r->aux_size - 1, len = head - tail, off = tail & mask;
	uint64_t first = r->aux_size - off;
	if (first >= len) {
		spans[0] = (struct btr_perf_aux_span){ r->aux + off, len, tail };
		return 1;
	}
	spans[0] = (struct btr_perf_aux_span){ r->aux + off, first, tail };
	spans[1] = (struct btr_perf_aux_span){ r->aux, len - first, tail + first };
	return 2;
}

void btr_perf_ring_aux_done(struct btr_perf_ring *r)
{
	if (!r || !r->aux)
		return;
	r->aux_tail = r->aux_head;
	if (!r->aux_overwrite)
		store_rel(r->page, BTR_PERF_PAGE_AUX_TAIL, r->aux_head);
}

int btr_perf_ring_aux_snapshot(const struct btr_perf_ring *r, uint64_t head, struct btr_perf_aux_span spans[2],
			       int *wrapped)
{
	if (wrapped)
		*wrapped = 0;
	if (!r || !spans || !r->aux)
		return -BTR_ERR_INVAL;
	if (!head)
		return 0;
	uint64_t len = head < r->aux_size ? head : r->aux_size;
	if (wrapped)
		*wrapped = head > r->aux_size;
	uint64_t start = head - len, mask = r->aux_size - 1, off = start & mask;
	uint64_t first = r->aux_size - off;
	if (first >= len) {
		spans[0] = (struct btr_perf_aux_span){ r->aux + off, len, start };
		return 1;
	}
	spans[0] = (struct btr_perf_aux_span){ r->aux + off, first, start };
	spans[1] = (struct btr_perf_aux_span){ r->aux, len - first, start + first };
	return 2;
}

int btr_perf_parse_aux(const struct btr_perf_ring_rec *rec, struct btr_perf_aux_rec *out)
{
	if (!rec || !out || !rec->rec)
		return -BTR_ERR_INVAL;
	if (rec->size < 8 + 24)
		return -BTR_ERR_BAD_RECORD;
	memcpy(&out->offset, rec->rec + 8, 8);
	memcpy(&out->size, rec->rec + 16, 8);
	memcpy(&out->flags, rec->rec + 24, 8);
	return 0;
}
