/* btr/perfdata.h - read perf.data recordings as btr records.
 *
 * A streaming reader for the files `perf record` writes (file mode,
 * "PERFILE2" with the 104-byte header, and pipe mode, "PERFILE2" with a
 * 16-byte header), in either byte order.  The layout follows the kernel's
 * tools/perf/Documentation/perf.data-file-format.txt and
 * include/uapi/linux/perf_event.h; docs/perf-data.md lists what becomes
 * which record.
 *
 * btr_perf_read() produces the same struct btr_record as the .btr reader
 * (btr/trace.h): first one BTR_REC_MACHINE, then, in file order,
 *   MMAP, MMAP2                  -> BTR_REC_MODULE_LOAD
 *   COMM with the exec flag      -> BTR_REC_EXEC, then BTR_REC_THREAD_NAME
 *   COMM                         -> BTR_REC_THREAD_NAME
 *   FORK                         -> BTR_REC_THREAD_START
 *   EXIT                         -> BTR_REC_THREAD_EXIT
 *   AUXTRACE (payload)           -> BTR_REC_PT (Intel PT AUX data only)
 *   SAMPLE with a branch stack   -> BTR_REC_LBR
 * Every other perf record is skipped (and counted, see
 * btr_perf_reader_count).  Records are not re-sorted by time.  The
 * records inside PERF_RECORD_COMPRESSED (perf record -z) are decompressed
 * and delivered like the others.
 *
 * Memory: the input is mapped (or borrowed, for _new_mem) and records
 * point into it, so reading is constant-memory apart from the attribute
 * table and the HEADER_BUILD_ID table read at open, and for compressed
 * files one decompression buffer of the recording's ring-buffer size.
 */
#ifndef BTR_PERFDATA_H
#define BTR_PERFDATA_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/trace.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_perf_reader;

/* Opens the perf.data file @path (mapped read-only).  Returns 0 and sets
 * *@out, or -BTR_ERR_INVAL (NULL argument), -BTR_ERR_NOENT, -BTR_ERR_PERM,
 * -BTR_ERR_IO, -BTR_ERR_NOMEM, -BTR_ERR_BAD_FORMAT (not a perf.data file:
 * no "PERFILE2" magic in either byte order, or an impossible header),
 * -BTR_ERR_TRUNCATED (the file ends inside its header or attribute
 * section). */
int btr_perf_reader_new(const char *path, struct btr_perf_reader **out);

/* Like btr_perf_reader_new on @size bytes at @buf.  @buf stays owned by
 * the caller and must outlive the reader (records point into it). */
int btr_perf_reader_new_mem(const void *buf, size_t size, struct btr_perf_reader **out);

/* Reads the next record into @rec.  Pointers inside @rec are owned by the
 * reader: paths, names and LBR entries stay valid until the next call,
 * PT/BTS payload (which points into the mapped file) until
 * btr_perf_reader_free.
 * Returns 0, -BTR_ERR_EOS at the clean end of the data section,
 * -BTR_ERR_TRUNCATED if the file stops inside the data (every complete
 * record before the cut has been returned) or before the header's
 * feature sections, -BTR_ERR_BAD_RECORD for a malformed record (size 0,
 * smaller than its fixed fields, or running past the end of the data
 * section), -BTR_ERR_COMPRESS (undecodable zstd data in a
 * PERF_RECORD_COMPRESSED of `perf record -z`), -BTR_ERR_NOMEM.  Errors
 * are sticky: later calls return the same error. */
int btr_perf_read(struct btr_perf_reader *r, struct btr_record *rec);

/* One branch-stack entry exactly as perf recorded it (struct
 * perf_branch_entry of linux/perf_event.h, bitfields unpacked). */
struct btr_perf_branch {
	uint64_t from, to;
	uint16_t cycles;      /* cycles since the previous entry, 0: unknown */
	uint8_t mispred, predicted, in_tx, abort;
	uint8_t type;         /* PERF_BR_* (0 unknown; 15 = EXTEND_ABI: see new_type) */
	uint8_t spec;         /* PERF_BR_SPEC_* */
	uint8_t new_type;     /* PERF_BR_NEW_* */
	uint8_t priv;         /* PERF_BR_PRIV_* */
};

/* One PERF_RECORD_SAMPLE, the fields perf script prints. */
struct btr_perf_sample {
	uint32_t attr;              /* index of its attribute (btr_perf_reader_attr) */
	uint16_t misc;              /* header.misc (PERF_RECORD_MISC_*: cpumode) */
	uint64_t sample_type;       /* the attribute's PERF_SAMPLE_* bits */
	uint64_t ip, time, addr, id, period;  /* 0 where the sample has none */
	uint32_t pid, tid;
	int32_t cpu;                /* -1 without PERF_SAMPLE_CPU */
	uint64_t nr_callchain;      /* PERF_SAMPLE_CALLCHAIN entries (context markers included) */
	const uint64_t *callchain;  /* reader-owned, valid until the next call */
	int has_branch_stack;       /* PERF_SAMPLE_BRANCH_STACK present (even with nr 0) */
	int has_hw_index;           /* PERF_SAMPLE_BRANCH_HW_INDEX: @hw_index valid */
	uint64_t hw_index;
	uint64_t nr_branches;       /* entries, newest first, all of them (empty all-zero
				     * slots included, unlike btr_perf_read) */
	const struct btr_perf_branch *branches; /* reader-owned, valid until the next call */
};

/* Reads forward to the next PERF_RECORD_SAMPLE (of any event, with or
 * without a branch stack) and fills @out; every other record is skipped
 * (and counted).  Shares the position with btr_perf_read: use one or the
 * other on a reader.  Returns 0, -BTR_ERR_EOS at the clean end, or the
 * errors of btr_perf_read (-BTR_ERR_TRUNCATED, -BTR_ERR_BAD_RECORD,
 * -BTR_ERR_COMPRESS, -BTR_ERR_NOMEM), -BTR_ERR_INVAL on NULL. */
int btr_perf_read_sample(struct btr_perf_reader *r, struct btr_perf_sample *out);

/* A converter for records that do not come from a file: the records a
 * recorder reads from a live perf ring (btr/perfring.h), all of one event
 * whose perf_event_attr is @attr (@attr_size bytes, the kernel's layout,
 * host byte order; copied).  Free it with btr_perf_reader_free; reading
 * it with btr_perf_read gives -BTR_ERR_EOS.  Returns 0, -BTR_ERR_INVAL,
 * -BTR_ERR_NOMEM. */
int btr_perf_conv_new(const void *attr, size_t attr_size, struct btr_perf_reader **out);

/* Makes the converter turn perf clock times into TSC values, as
 * TIME_CONV does for a file: the perf_event_mmap_page's time_shift,
 * time_mult and time_zero (valid with cap_user_time_zero).  Returns 0 or
 * -BTR_ERR_INVAL (@mult 0, @shift >= 64). */
int btr_perf_conv_set_time(struct btr_perf_reader *r, uint16_t shift, uint32_t mult, uint64_t zero);

/* Converts one perf record (@rec, @size bytes, header included) as
 * btr_perf_read would: MMAP/MMAP2 -> MODULE_LOAD, COMM -> THREAD_NAME
 * (with exec: EXEC, then THREAD_NAME), FORK -> THREAD_START, EXIT ->
 * THREAD_EXIT, SAMPLE with a branch stack -> LBR.  Fills @out[0] (and
 * @out[1]) and returns the number of records made (0: a record btr does
 * not turn into one, e.g. AUX or ITRACE_START, which the caller handles),
 * or -BTR_ERR_BAD_RECORD / -BTR_ERR_INVAL.  Pointers in @out are owned by
 * @r and valid until the next call. */
int btr_perf_convert(struct btr_perf_reader *r, const void *rec, size_t size, struct btr_record out[2]);

/* Frees @r (NULL is allowed) and unmaps the file. */
void btr_perf_reader_free(struct btr_perf_reader *r);

/* One perf_event_attr of the recording (the events that were recorded). */
struct btr_perf_attr {
	uint32_t type;               /* PERF_TYPE_* or a dynamic PMU type (intel_pt) */
	uint32_t size;               /* attr.size as recorded */
	uint64_t config;
	uint64_t sample_period;      /* or sample_freq if freq is set */
	uint64_t sample_type;        /* PERF_SAMPLE_* bits */
	uint64_t read_format;
	uint64_t flags;              /* the bitfield word: disabled, inherit, ... */
	uint64_t branch_sample_type; /* PERF_SAMPLE_BRANCH_* bits, 0 if absent */
	uint32_t nr_ids;             /* sample ids that refer to this attr */
	const char *name;            /* from HEADER_EVENT_DESC, "" if unknown; reader-owned */
};

/* Bits of struct btr_perf_attr.flags (perf_event_attr bitfield). */
enum {
	BTR_PERF_ATTR_EXCLUDE_USER = 1u << 4,
	BTR_PERF_ATTR_EXCLUDE_KERNEL = 1u << 5,
	BTR_PERF_ATTR_FREQ = 1u << 10,
	BTR_PERF_ATTR_SAMPLE_ID_ALL = 1u << 18,
};

/* Number of attributes (events) in the recording. */
unsigned btr_perf_reader_attr_count(const struct btr_perf_reader *r);

/* Copies attribute @idx into *@out.  Returns 0 or -BTR_ERR_INVAL (@idx out
 * of range, NULL argument). */
int btr_perf_reader_attr(const struct btr_perf_reader *r, unsigned idx, struct btr_perf_attr *out);

/* Facts about the file as a whole (for `btr trace info`). */
struct btr_perf_info {
	int pipe_mode;          /* 1: pipe-mode stream (no feature sections) */
	int swapped;            /* 1: written on a host of the other byte order */
	int time_is_tsc;        /* 1: record timestamps were converted to TSC
	                         * (TIME_CONV or Intel PT AUXTRACE_INFO present);
	                         * 0: they are perf clock nanoseconds */
	uint64_t file_size;
	uint64_t data_offset, data_size;
	uint64_t features;      /* adds_features bits 0..63 */
	uint32_t auxtrace_type; /* PERF_AUXTRACE_* of AUXTRACE_INFO, 0 if none (1 = Intel PT) */
	char cpuid[64];         /* HEADER_CPUID, e.g. "GenuineIntel,6,78,3", or "" */
	char cpudesc[96];       /* HEADER_CPUDESC, or "" */
	char hostname[64];      /* HEADER_HOSTNAME, or "" */
	char os_release[64];    /* HEADER_OSRELEASE, or "" */
	char perf_version[64];  /* HEADER_VERSION, or "" */
};

/* Fills *@out.  Returns 0 or -BTR_ERR_INVAL. */
int btr_perf_reader_info(const struct btr_perf_reader *r, struct btr_perf_info *out);

/* Number of perf records of type @perf_type (PERF_RECORD_*, e.g. 9 for
 * SAMPLE, 71 for AUXTRACE) read so far, including skipped ones.  Types
 * >= 128 are counted together under 127. */
uint64_t btr_perf_reader_count(const struct btr_perf_reader *r, uint32_t perf_type);

/* File offset of the perf record most recently read, or of the one that
 * caused the error (for messages).  Records from inside a compressed
 * record report the compressed record's offset. */
uint64_t btr_perf_reader_offset(const struct btr_perf_reader *r);

/* Returns 1 if @buf (of @size bytes) starts like a perf.data file, else 0.
 * Cheap enough to call on the first 8 bytes of any file. */
int btr_perf_probe(const void *buf, size_t size);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
