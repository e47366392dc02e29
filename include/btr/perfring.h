/* btr/perfring.h - reading a perf_event ring buffer and its AUX area from
 * plain memory.
 *
 * perf_event_open + mmap give a metadata page (struct perf_event_mmap_page
 * of linux/perf_event.h), a data ring of 2^n pages with the records the
 * kernel writes (MMAP2, COMM, SAMPLE, AUX, LOST, ...) and, for PT and BTS,
 * an AUX area with the raw trace bytes.  This module walks them starting
 * from a plain pointer, so everything here is pure code that tests drive
 * with simulated buffers; lib/capture/ owns the file descriptors and the
 * mmaps.
 *
 * Protocol (perf_event.h, "Control data for the mmap() data buffer"):
 *   - data_head is written by the kernel; read it, then a read barrier
 *     (acquire), then the records in [data_tail, data_head);
 *   - store data_tail after the records are consumed (release), so the
 *     kernel can reuse the space (btr maps the data ring PROT_WRITE: the
 *     kernel never overwrites unread records, it drops new ones and says
 *     so with a PERF_RECORD_LOST);
 *   - positions are free-running byte counts; the byte at position p is at
 *     data[p & (data_size - 1)]; a record may wrap around the end.
 * The AUX area has the same head/tail pair (aux_head, aux_tail); mapped
 * read-only it is in overwrite ("snapshot") mode: the hardware writes
 * round and round and aux_tail is never stored.
 *
 * A ring is used from one thread at a time.
 */
#ifndef BTR_PERFRING_H
#define BTR_PERFRING_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Offsets of the control fields in struct perf_event_mmap_page (they are
 * ABI: the page is 1 KiB of self-monitoring fields, then these). */
#define BTR_PERF_PAGE_DATA_HEAD 1024
#define BTR_PERF_PAGE_DATA_TAIL 1032
#define BTR_PERF_PAGE_DATA_OFFSET 1040
#define BTR_PERF_PAGE_DATA_SIZE 1048
#define BTR_PERF_PAGE_AUX_HEAD 1056
#define BTR_PERF_PAGE_AUX_TAIL 1064
#define BTR_PERF_PAGE_AUX_OFFSET 1072
#define BTR_PERF_PAGE_AUX_SIZE 1080
#define BTR_PERF_PAGE_MIN 1088   /* the metadata page is at least this long */

/* perf record types seen in a live ring (linux/perf_event.h). */
enum btr_perf_rec_type {
	BTR_PERF_RECORD_MMAP = 1,
	BTR_PERF_RECORD_LOST = 2,
	BTR_PERF_RECORD_COMM = 3,
	BTR_PERF_RECORD_EXIT = 4,
	BTR_PERF_RECORD_THROTTLE = 5,
	BTR_PERF_RECORD_UNTHROTTLE = 6,
	BTR_PERF_RECORD_FORK = 7,
	BTR_PERF_RECORD_READ = 8,
	BTR_PERF_RECORD_SAMPLE = 9,
	BTR_PERF_RECORD_MMAP2 = 10,
	BTR_PERF_RECORD_AUX = 11,
	BTR_PERF_RECORD_ITRACE_START = 12,
	BTR_PERF_RECORD_LOST_SAMPLES = 13,
	BTR_PERF_RECORD_SWITCH = 14,
	BTR_PERF_RECORD_SWITCH_CPU_WIDE = 15,
	BTR_PERF_RECORD_NAMESPACES = 16,
	BTR_PERF_RECORD_KSYMBOL = 17,
	BTR_PERF_RECORD_BPF_EVENT = 18,
	BTR_PERF_RECORD_CGROUP = 19,
	BTR_PERF_RECORD_TEXT_POKE = 20,
	BTR_PERF_RECORD_AUX_OUTPUT_HW_ID = 21,
};

/* PERF_RECORD_AUX flags. */
enum {
	BTR_PERF_AUX_TRUNCATED = 0x01,  /* the AUX data was truncated to fit the buffer */
	BTR_PERF_AUX_OVERWRITE = 0x02,  /* snapshot from overwrite mode */
	BTR_PERF_AUX_PARTIAL = 0x04,    /* the record contains gaps */
	BTR_PERF_AUX_COLLISION = 0x08,  /* the sample collided with another */
};

/* header.misc bits used here. */
enum {
	BTR_PERF_MISC_SWITCH_OUT = 1u << 13,
	BTR_PERF_MISC_SWITCH_OUT_PREEMPT = 1u << 14,
};

/* A ring: the caller's memory, described once by btr_perf_ring_init. */
struct btr_perf_ring {
	uint8_t *page;          /* the metadata page (perf_event_mmap_page) */
	uint8_t *data;          /* the data ring */
	uint64_t data_size;     /* a power of two */
	uint8_t *aux;           /* the AUX area, NULL if none */
	uint64_t aux_size;      /* a power of two, 0 if none */
	int aux_overwrite;      /* 1: AUX mapped read-only (snapshot mode): never store aux_tail */

	/* reading state */
	uint64_t head;          /* data_head as of the last btr_perf_ring_begin */
	uint64_t tail;          /* next position to read */
	uint64_t aux_head, aux_tail;

	/* statistics */
	uint64_t records;       /* records returned */
	uint64_t lost_events;   /* sum of PERF_RECORD_LOST.lost (events the kernel dropped) */
	uint64_t lost_samples;  /* sum of PERF_RECORD_LOST_SAMPLES.lost */
	uint64_t bad_bytes;     /* bytes skipped after a malformed or truncated record */

	/* a record that wraps around the end is copied here (a record is
	 * at most 65535 bytes: header.size is a u16) */
	uint8_t scratch[65536];
};

/* Describes a ring at @page: the data area is @data (@data_size bytes, a
 * power of two of at least 8), the AUX area @aux (@aux_size, a power of
 * two, or NULL/0).  @aux_overwrite: the AUX area is mapped read-only
 * (snapshot mode).  Reading starts at the tails stored in the page.
 * Returns 0 or -BTR_ERR_INVAL (NULL @r, @page or @data, a size that is
 * not a power of two). */
int btr_perf_ring_init(struct btr_perf_ring *r, void *page, void *data, uint64_t data_size, void *aux,
		       uint64_t aux_size, int aux_overwrite);

/* Like btr_perf_ring_init for one mmap of the whole ring as the kernel
 * lays it out: @base (@len bytes) starts with the metadata page; the data
 * area is where data_offset/data_size say (kernel 4.1+), or, when they
 * are 0, from @page_size to @len.  No AUX area (add it with
 * btr_perf_ring_set_aux).  Returns 0 or -BTR_ERR_INVAL (the data area
 * lies outside [@base, @base+@len), or its size is not a power of two). */
int btr_perf_ring_init_mmap(struct btr_perf_ring *r, void *base, uint64_t len, uint64_t page_size);

/* Attaches the AUX area (@aux, @aux_size a power of two; @overwrite as
 * for btr_perf_ring_init).  Returns 0 or -BTR_ERR_INVAL. */
int btr_perf_ring_set_aux(struct btr_perf_ring *r, void *aux, uint64_t aux_size, int overwrite);

/* One record.  @rec points to @size bytes (header included) that stay
 * valid until the next call of btr_perf_ring_next or _end: into the ring,
 * or into r->scratch when the record wraps around the end. */
struct btr_perf_ring_rec {
	uint32_t type;          /* enum btr_perf_rec_type or another PERF_RECORD_* */
	uint16_t misc;
	uint16_t size;
	uint64_t pos;           /* the record's position (free-running) */
	const uint8_t *rec;
};

/* Reads data_head (with acquire ordering) and remembers it: records
 * written after this call are not returned before the next _begin, so a
 * reader sees a consistent batch even while the kernel keeps writing.
 * Returns the number of unread bytes, -BTR_ERR_OVERFLOW if the head is
 * more than data_size ahead of the tail or behind it (impossible with a
 * writable mapping: the memory is corrupt; the unread bytes are skipped
 * and counted in bad_bytes, reading resumes at the head), -BTR_ERR_INVAL
 * on NULL. */
int64_t btr_perf_ring_begin(struct btr_perf_ring *r);

/* Returns the next record of the batch: 1 and fills @out; 0 when the
 * batch is exhausted; -BTR_ERR_BAD_RECORD for a header with size < 8 or
 * not a multiple of 8, or -BTR_ERR_TRUNCATED for a record that runs past
 * the head (the kernel publishes only whole records, so both mean
 * corrupted memory): the rest of the batch is then skipped (counted in
 * bad_bytes) and the next call returns 0.  PERF_RECORD_LOST and
 * LOST_SAMPLES are returned like the others and also summed into
 * lost_events / lost_samples. */
int btr_perf_ring_next(struct btr_perf_ring *r, struct btr_perf_ring_rec *out);

/* Stores data_tail = the position after the last record returned (with
 * release ordering), so the kernel may reuse the space.  Pointers from
 * _next are invalid afterwards. */
void btr_perf_ring_end(struct btr_perf_ring *r);

/* A piece of the AUX area: @len bytes at @ptr, at AUX stream position
 * @pos (free-running, so consecutive pieces have consecutive positions
 * and a jump is a gap). */
struct btr_perf_aux_span {
	const uint8_t *ptr;
	uint64_t len;
	uint64_t pos;
};

/* Normal (non-snapshot) AUX reading: reads aux_head (acquire) and returns
 * the unread bytes [aux_tail, aux_head) as at most two spans (two when
 * they wrap around the end of the area), oldest first, in @spans[0..1];
 * returns the number of spans (0 if nothing is new).  If the head is more
 * than aux_size ahead (data overwritten before it was read), only the
 * newest aux_size bytes are returned and *@lost (if non-NULL) is set to
 * the number of bytes lost; otherwise *@lost is 0.  Call
 * btr_perf_ring_aux_done afterwards.  -BTR_ERR_INVAL if no AUX area. */
int btr_perf_ring_aux_read(struct btr_perf_ring *r, struct btr_perf_aux_span spans[2], uint64_t *lost);

/* Like btr_perf_ring_aux_read, but returns no byte at or after the
 * free-running position @end: the end (aux_offset + aux_size) of the
 * chunk a PERF_RECORD_AUX told of, so that the bytes of one chunk can be
 * told from those of the next (after a TRUNCATED chunk, the next one does
 * not continue it).  @end behind the last read position gives 0 spans;
 * UINT64_MAX is btr_perf_ring_aux_read. */
int btr_perf_ring_aux_read_to(struct btr_perf_ring *r, uint64_t end, struct btr_perf_aux_span spans[2],
			      uint64_t *lost);

/* Stores aux_tail = the head of the last btr_perf_ring_aux_read (release
 * ordering; not in overwrite mode), releasing the space to the kernel. */
void btr_perf_ring_aux_done(struct btr_perf_ring *r);

/* Snapshot mode (perf record --snapshot, btr record --snapshot): the AUX
 * area is a ring the hardware overwrites continuously, and @head is the
 * free-running position up to which it has been written.  Note that the
 * kernel's aux_head is not that in overwrite mode: intel_pt and intel_bts
 * publish the offset within the area (pt_update_head), so a caller that
 * knows the area has wrapped passes aux_head + aux_size (as perf's
 * intel_pt_find_snapshot does).
 * Returns the last min(@head, aux_size) bytes ending at @head as at most
 * two spans, oldest first (the number of spans); *@wrapped (if non-NULL)
 * is 1 when older data was overwritten (@head > aux_size), so the first
 * bytes are not a packet boundary and a decoder must resynchronize (PT:
 * at the next PSB).  -BTR_ERR_INVAL if no AUX area. */
int btr_perf_ring_aux_snapshot(const struct btr_perf_ring *r, uint64_t head, struct btr_perf_aux_span spans[2],
			       int *wrapped);

/* Fields of a PERF_RECORD_AUX body: { u64 aux_offset, aux_size, flags }.
 * Returns 0 or -BTR_ERR_BAD_RECORD (@rec too short). */
struct btr_perf_aux_rec {
	uint64_t offset, size, flags;
};
int btr_perf_parse_aux(const struct btr_perf_ring_rec *rec, struct btr_perf_aux_rec *out);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
