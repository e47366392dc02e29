/* perfdata_priv.h - the perf.data reader's constants, state and byte
 * access, shared by lib/perf/perfdata.c (records) and lib/perf/perfdata_header.c
 * (file header and feature sections).  Private to lib/. */
#ifndef BTR_PERFDATA_PRIV_H
#define BTR_PERFDATA_PRIV_H

#include "btr/perfdata.h"
#include "image/jitsyms.h"
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <zstd.h>

/* ---- constants from the perf ABI ---- */

#define PERF_MAGIC2_LE 0x32454c4946524550ULL /* "PERFILE2" read as LE u64 */
#define PERF_MAGIC2_BE 0x50455246494c4532ULL
#define FILE_HEADER_SIZE 104 /* struct perf_file_header */
#define PIPE_HEADER_SIZE 16  /* struct perf_pipe_file_header */
#define ATTR_SIZE_VER0 64

enum {
	REC_MMAP = 1, REC_LOST = 2, REC_COMM = 3, REC_EXIT = 4, REC_FORK = 7,
	REC_SAMPLE = 9, REC_MMAP2 = 10, REC_SWITCH = 14, REC_SWITCH_CPU_WIDE = 15,
	REC_HEADER_ATTR = 64, REC_HEADER_BUILD_ID = 67, REC_AUXTRACE_INFO = 70,
	REC_AUXTRACE = 71, REC_TIME_CONV = 79, REC_HEADER_FEATURE = 80,
	REC_COMPRESSED = 81,  /* { header; zstd data[] } (perf record -z) */
	REC_COMPRESSED2 = 83, /* { header; u64 data_size; zstd data[] } (perf 6.16+) */
};

enum {
	MISC_MMAP_DATA = 1u << 13,
	MISC_COMM_EXEC = 1u << 13,
	MISC_MMAP_BUILD_ID = 1u << 14,
	MISC_BUILD_ID_SIZE = 1u << 15, /* HEADER_BUILD_ID entries */
	MISC_SWITCH_OUT = 1u << 13,
	MISC_SWITCH_OUT_PREEMPT = 1u << 14,
};

enum {
	S_IP = 1u << 0, S_TID = 1u << 1, S_TIME = 1u << 2, S_ADDR = 1u << 3,
	S_READ = 1u << 4, S_CALLCHAIN = 1u << 5, S_ID = 1u << 6, S_CPU = 1u << 7,
	S_PERIOD = 1u << 8, S_STREAM_ID = 1u << 9, S_RAW = 1u << 10,
	S_BRANCH_STACK = 1u << 11, S_IDENTIFIER = 1u << 16,
};

enum { RF_TOTAL_TIME_ENABLED = 1, RF_TOTAL_TIME_RUNNING = 2, RF_ID = 4, RF_GROUP = 8, RF_LOST = 16 };

enum {
	BR_USER = 1u << 0, BR_KERNEL = 1u << 1,
	BR_HW_INDEX = 1u << 17, /* PERF_SAMPLE_BRANCH_HW_INDEX: u64 hw_idx before the entries */
};

enum { /* feature bits (tools/perf/util/header.h) */
	F_BUILD_ID = 2, F_HOSTNAME = 3, F_OSRELEASE = 4, F_VERSION = 5,
	F_CPUDESC = 8, F_CPUID = 9, F_EVENT_DESC = 12, F_COMPRESSED = 27, F_MAX = 256,
};

enum { AUXTRACE_INTEL_PT = 1, AUXTRACE_INTEL_BTS = 2 };

/* tools/perf/util/intel-pt.h: indexes into AUXTRACE_INFO priv[]. */
enum {
	PT_PMU_TYPE, PT_TIME_SHIFT, PT_TIME_MULT, PT_TIME_ZERO, PT_CAP_USER_TIME_ZERO,
	PT_TSC_BIT, PT_NORETCOMP_BIT, PT_HAVE_SCHED_SWITCH, PT_SNAPSHOT_MODE,
	PT_PER_CPU_MMAPS, PT_MTC_BIT, PT_MTC_FREQ_BITS, PT_TSC_CTC_N, PT_TSC_CTC_D,
	PT_CYC_BIT, PT_MAX_NONTURBO_RATIO, PT_FILTER_STR_LEN, PT_PRIV_MIN = PT_MAX_NONTURBO_RATIO + 1,
};

/* The largest branch stack a record can hold: header.size is a u16. */
#define MAX_LBR ((65535 - 8 - 8) / 24 + 1)
/* How many records open() looks at for AUXTRACE_INFO, TIME_CONV, pipe
 * attributes and the first branch stack (perf writes the first three
 * before any sample). */
#define PRESCAN_RECORDS 65536

#define PROT_R 1
#define PROT_X 4

struct attr_ent {
	struct btr_perf_attr a;
	char *name;
};

struct id_ent {
	uint64_t id;
	uint32_t attr;
};

struct bid_ent {
	char *path;
	uint8_t id[20];
	uint8_t len;
};

struct btr_perf_reader {
	const uint8_t *buf;
	size_t size;
	void *map;          /* mmap'ed region, or NULL */
	size_t map_size;
	bool swap, pipe;

	uint64_t data_start;    /* first record */
	uint64_t data_end;      /* end of the readable data (<= size) */
	bool data_cut;          /* the file ends before the declared data end */
	bool feat_cut;          /* feature sections run past the file */
	uint64_t pos;
	uint64_t last_off;
	int err;                /* sticky error, 0 if none */
	int machine_done;
	struct btr_record pending;
	bool has_pending;
	struct jit_queue jit;   /* a jitdump's records, after its marker's MMAP */

	struct attr_ent *attrs;
	uint32_t nr_attrs, cap_attrs;
	struct id_ent *ids;
	uint32_t nr_ids, cap_ids;
	bool ids_sorted;
	struct bid_ent *bids;
	uint32_t nr_bids, cap_bids;

	/* perf clock -> TSC (perf_time_to_tsc in tools/perf/util/tsc.c) */
	bool have_conv;
	uint16_t time_shift;
	uint64_t time_mult, time_zero;

	uint32_t auxtrace_type;
	uint64_t pt_priv[PT_PRIV_MIN];
	bool have_pt_priv;
	uint64_t bts_pmu_type;
	bool have_bts_priv;
	uint32_t first_lbr_nr;
	int32_t lbr_attr;       /* attr index of the first branch-stack sample, -1 */

	uint64_t features;
	char cpuid[64], cpudesc[96], hostname[64], os_release[64], perf_version[64];

	uint64_t counts[128];
	struct btr_rec_machine machine;
	bool in_dbuf;           /* the last raw record came from dbuf */

	/* perf record -z: the records of COMPRESSED records are one zstd
	 * stream; each COMPRESSED record's output is appended to what is
	 * left of the previous one (a record may span two of them). */
	ZSTD_DCtx *zd;
	uint8_t *dbuf;
	size_t dcap, dlen, dpos;
	uint32_t comp_mmap_len;  /* HEADER_COMPRESSED mmap_len: output per record */

	char path[4096];
	char comm[256];
	struct btr_lbr_entry lbr[MAX_LBR];
	/* btr_perf_read_sample: entries and callchain of the last sample */
	struct btr_perf_branch *sbr;      /* MAX_LBR, allocated on first use */
	uint64_t *scc;                    /* MAX_CALLCHAIN */
};

/* The longest callchain a record can hold (header.size is a u16). */
#define MAX_CALLCHAIN (65535 / 8)

/* ---- byte access ---- */

static inline uint16_t rd16(const struct btr_perf_reader *r, const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return r->swap ? __builtin_bswap16(v) : v;
}

static inline uint32_t rd32(const struct btr_perf_reader *r, const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return r->swap ? __builtin_bswap32(v) : v;
}

static inline uint64_t rd64(const struct btr_perf_reader *r, const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return r->swap ? __builtin_bswap64(v) : v;
}

/* Is [off, off+len) inside the input? (overflow-safe) */
static inline bool in_file(const struct btr_perf_reader *r, uint64_t off, uint64_t len)
{
	return off <= r->size && len <= r->size - off;
}

/* Copies the NUL-terminated (or field-bounded) string at @p of at most
 * @max bytes into @dst of @cap bytes. */
static inline void copy_str(char *dst, size_t cap, const uint8_t *p, size_t max)
{
	size_t n = strnlen((const char *)p, max);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, p, n);
	dst[n] = 0;
}

static inline uint64_t perf_to_tsc(const struct btr_perf_reader *r, uint64_t ns)
{
	if (!r->have_conv || !ns)
		return ns;
	/* tools/perf/util/tsc.c perf_time_to_tsc(): split to avoid overflow */
	uint64_t t = ns - r->time_zero;
	uint64_t quot = t / r->time_mult, rem = t % r->time_mult;
	return (quot << r->time_shift) + (uint64_t)(((unsigned __int128)rem << r->time_shift) / r->time_mult);
}

/* lib/perf/perfdata_header.c (perfdata.c calls it, never the other way): the
 * attribute and id tables, the file header and the feature sections */
int btr__perf_add_attr(struct btr_perf_reader *r, const uint8_t *p, uint64_t avail, uint32_t *idx);
int btr__perf_add_id(struct btr_perf_reader *r, uint64_t id, uint32_t attr);
void btr__perf_sort_ids(struct btr_perf_reader *r);
int btr__perf_parse_file_header(struct btr_perf_reader *r);
int btr__perf_parse_feature(struct btr_perf_reader *r, unsigned feat, const uint8_t *p, uint64_t n);
int btr__perf_parse_build_ids(struct btr_perf_reader *r, const uint8_t *p, uint64_t n);
const struct bid_ent *btr__perf_find_build_id(const struct btr_perf_reader *r, const char *path);

#endif
