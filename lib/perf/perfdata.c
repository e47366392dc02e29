/* perfdata.c - a streaming perf.data reader producing btr records.
 *
 * Sources for every layout used here: the kernel's
 * tools/perf/Documentation/perf.data-file-format.txt (file header, attr
 * and feature sections, pipe mode), include/uapi/linux/perf_event.h
 * (perf_event_attr, PERF_SAMPLE_* layout, perf_branch_entry, record
 * types 1..21), tools/lib/perf/include/perf/event.h (user record types
 * 64..82: AUXTRACE_INFO, AUXTRACE, TIME_CONV, HEADER_ATTR ...) and
 * tools/perf/util/intel-pt.h (AUXTRACE_INFO priv[] for Intel PT).
 *
 * Design: the whole input is one read-only byte range (an mmap of the
 * file, or the caller's buffer).  Every field is read with explicit
 * bounds checks and byte order, never by casting the input to a struct,
 * so any input is safe to feed.  Nothing is allocated per record: LBR
 * entries go into a buffer sized for the largest possible branch stack
 * (a record's size is a u16), paths and names into fixed buffers; only
 * compressed files (perf record -z) need a decompression buffer, sized
 * once to the recording's ring buffer and grown only if a compressed
 * record expands beyond it.
 */
#include "btr/perfdata.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "perfdata_priv.h"

/* ---- attribute and id look-up ---- */

static const struct attr_ent *attr_by_id(const struct btr_perf_reader *r, uint64_t id)
{
	size_t lo = 0, hi = r->nr_ids;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->ids[mid].id == id)
			return &r->attrs[r->ids[mid].attr];
		if (r->ids[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return &r->attrs[0];
}

/* The attr a SAMPLE body (@p, @n bytes after the header) belongs to.
 * perf needs the sample id at a position common to all attrs: first u64
 * with PERF_SAMPLE_IDENTIFIER, else after IP/TID/TIME/ADDR with ID. */
static const struct attr_ent *sample_attr(const struct btr_perf_reader *r, const uint8_t *p, uint64_t n)
{
	if (r->nr_attrs == 1 || !r->nr_ids)
		return &r->attrs[0];
	uint64_t st = r->attrs[0].a.sample_type, pos;
	if (st & S_IDENTIFIER)
		pos = 0;
	else if (st & S_ID)
		pos = 8 * (!!(st & S_IP) + !!(st & S_TID) + !!(st & S_TIME) + !!(st & S_ADDR));
	else
		return &r->attrs[0];
	if (pos + 8 > n)
		return &r->attrs[0];
	return attr_by_id(r, rd64(r, p + pos));
}

/* Size of the sample_id_all trailer of non-sample records for @st. */
static unsigned trailer_size(uint64_t st)
{
	return 8 * (!!(st & S_TID) + !!(st & S_TIME) + !!(st & S_ID) + !!(st & S_STREAM_ID) +
		    !!(st & S_CPU) + !!(st & S_IDENTIFIER));
}

struct sample_id {
	uint64_t time;
	int32_t cpu;
	uint32_t pid, tid;
	bool have_time, have_tid;
};

/* Locates the sample_id_all trailer at the end of a non-sample record
 * body (@p, @n bytes) and returns the usable body length (without the
 * trailer).  @fixed is the size of the record's fixed fields. */
static uint64_t parse_trailer(const struct btr_perf_reader *r, const uint8_t *p, uint64_t n,
			      uint64_t fixed, struct sample_id *sid)
{
	sid->time = 0;
	sid->cpu = -1;
	sid->pid = sid->tid = 0;
	sid->have_time = sid->have_tid = false;
	if (!r->nr_attrs)
		return n;
	const struct attr_ent *a = &r->attrs[0];
	uint64_t st0 = a->a.sample_type;
	/* With IDENTIFIER the last u64 names the attr, whose sample_type
	 * then fixes the trailer layout (attrs may differ, e.g. intel_pt
	 * has CPU and cycles has not). */
	if (r->nr_attrs > 1 && r->nr_ids && (st0 & S_IDENTIFIER) && n >= fixed + 8)
		a = attr_by_id(r, rd64(r, p + n - 8));
	else if (r->nr_attrs > 1 && r->nr_ids && (st0 & S_ID)) {
		unsigned back = 8 * (1 + !!(st0 & S_STREAM_ID) + !!(st0 & S_CPU));
		if (n >= fixed + back)
			a = attr_by_id(r, rd64(r, p + n - back));
	}
	if (!(a->a.flags & BTR_PERF_ATTR_SAMPLE_ID_ALL))
		return n;
	uint64_t st = a->a.sample_type;
	unsigned ts = trailer_size(st);
	if (n < fixed + ts)
		return n; /* no room: synthesized by a perf that wrote none */
	const uint8_t *q = p + n - ts;
	if (st & S_TID) {
		sid->pid = rd32(r, q);
		sid->tid = rd32(r, q + 4);
		sid->have_tid = true;
		q += 8;
	}
	if (st & S_TIME) {
		sid->time = rd64(r, q);
		sid->have_time = true;
		q += 8;
	}
	if (st & S_ID)
		q += 8;
	if (st & S_STREAM_ID)
		q += 8;
	if (st & S_CPU)
		sid->cpu = (int32_t)rd32(r, q);
	return n - ts;
}

/* ---- samples ---- */

struct sample {
	uint64_t ip, time, addr, id, period;
	uint32_t pid, tid;
	int32_t cpu;
	uint64_t nr_callchain;
	const uint8_t *callchain; /* nr_callchain * 8 bytes */
	bool has_branch_stack, has_hw_index;
	uint64_t hw_index;
	uint64_t nr;              /* branch stack entries, 0 if none */
	const uint8_t *entries;   /* nr * 24 bytes */
};

/* Parses a SAMPLE body (perf_event.h, PERF_RECORD_SAMPLE) up to and
 * including the branch stack; later fields are not needed.  Returns 0,
 * 1 if the sample has no branch stack, or -BTR_ERR_BAD_RECORD. */
static int parse_sample(const struct btr_perf_reader *r, const struct attr_ent *a, const uint8_t *p,
			uint64_t n, struct sample *s)
{
	uint64_t st = a->a.sample_type, off = 0, v;
	memset(s, 0, sizeof(*s));
	s->cpu = -1;
#define NEED(k) do { if ((uint64_t)(k) > n - off) return -BTR_ERR_BAD_RECORD; } while (0)
	if (st & S_IDENTIFIER) { NEED(8); s->id = rd64(r, p + off); off += 8; }
	if (st & S_IP) { NEED(8); s->ip = rd64(r, p + off); off += 8; }
	if (st & S_TID) { NEED(8); s->pid = rd32(r, p + off); s->tid = rd32(r, p + off + 4); off += 8; }
	if (st & S_TIME) { NEED(8); s->time = rd64(r, p + off); off += 8; }
	if (st & S_ADDR) { NEED(8); s->addr = rd64(r, p + off); off += 8; }
	if (st & S_ID) { NEED(8); s->id = rd64(r, p + off); off += 8; }
	if (st & S_STREAM_ID) { NEED(8); off += 8; }
	if (st & S_CPU) { NEED(8); s->cpu = (int32_t)rd32(r, p + off); off += 8; }
	if (st & S_PERIOD) { NEED(8); s->period = rd64(r, p + off); off += 8; }
	if (st & S_READ) {
		uint64_t rf = a->a.read_format;
		unsigned times = 8 * (!!(rf & RF_TOTAL_TIME_ENABLED) + !!(rf & RF_TOTAL_TIME_RUNNING));
		if (rf & RF_GROUP) {
			NEED(8);
			v = rd64(r, p + off);
			off += 8;
			NEED(times);
			off += times;
			uint64_t per = 8 + 8 * (!!(rf & RF_ID) + !!(rf & RF_LOST));
			if (v > n / per)
				return -BTR_ERR_BAD_RECORD;
			NEED(v * per);
			off += v * per;
		} else {
			uint64_t k = 8 + times + 8 * (!!(rf & RF_ID) + !!(rf & RF_LOST));
			NEED(k);
			off += k;
		}
	}
	if (st & S_CALLCHAIN) {
		NEED(8);
		v = rd64(r, p + off);
		off += 8;
		if (v > n / 8)
			return -BTR_ERR_BAD_RECORD;
		NEED(v * 8);
		s->nr_callchain = v;
		s->callchain = p + off;
		off += v * 8;
	}
	if (st & S_RAW) {
		NEED(4);
		v = rd32(r, p + off);
		off += 4;
		NEED(v);
		off += v;
	}
	if (!(st & S_BRANCH_STACK))
		return 1;
	NEED(8);
	v = rd64(r, p + off);
	off += 8;
	if (a->a.branch_sample_type & BR_HW_INDEX) {
		NEED(8);
		s->has_hw_index = true;
		s->hw_index = rd64(r, p + off);
		off += 8;
	}
	if (v > n / 24 || v > MAX_LBR)
		return -BTR_ERR_BAD_RECORD;
	NEED(v * 24);
	s->has_branch_stack = true;
	s->nr = v;
	s->entries = p + off;
#undef NEED
	return 0;
}

/* struct perf_branch_entry flags word: mispred:1 predicted:1 in_tx:1
 * abort:1 cycles:16 type:4 ...  Bitfields are allocated from the least
 * significant bit on little-endian hosts and from the most significant on
 * big-endian ones, so a file written on a big-endian host has mispred in
 * bit 63 of the (byte-order corrected) u64. */
static void decode_branch_flags(const struct btr_perf_reader *r, uint64_t f, struct btr_lbr_entry *e)
{
	unsigned mispred, predicted, abort_, cycles;
	bool writer_be = r->swap != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
	if (!writer_be) {
		mispred = f & 1;
		predicted = (f >> 1) & 1;
		abort_ = (f >> 3) & 1;
		cycles = (f >> 4) & 0xffff;
	} else {
		mispred = (f >> 63) & 1;
		predicted = (f >> 62) & 1;
		abort_ = (f >> 60) & 1;
		cycles = (f >> 44) & 0xffff;
	}
	e->flags = 0;
	if (mispred)
		e->flags |= BTR_BF_MISPRED;
	if (predicted)
		e->flags |= BTR_BF_PREDICTED;
	if (abort_)
		e->flags |= BTR_BF_TSX_ABORT;
	/* LBR_INFO.CYC_CNT_VALID is not exported by perf: a count of 0 means
	 * "not valid" (and pre-Skylake LBRs have no count at all). */
	e->cycles = cycles;
	if (cycles)
		e->flags |= BTR_BF_CYCLES;
}

/* The whole flags word of a perf_branch_entry (perf_event.h: mispred:1
 * predicted:1 in_tx:1 abort:1 cycles:16 type:4 spec:2 new_type:4 priv:3),
 * bit positions mirrored for files from big-endian hosts as above. */
static void decode_branch_full(const struct btr_perf_reader *r, const uint8_t *e, struct btr_perf_branch *b)
{
	uint64_t f = rd64(r, e + 16);
	bool writer_be = r->swap != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
#define FIELD(lo, w) (writer_be ? (f >> (64 - (lo) - (w))) & ((1ull << (w)) - 1) : (f >> (lo)) & ((1ull << (w)) - 1))
	b->from = rd64(r, e);
	b->to = rd64(r, e + 8);
	b->mispred = (uint8_t)FIELD(0, 1);
	b->predicted = (uint8_t)FIELD(1, 1);
	b->in_tx = (uint8_t)FIELD(2, 1);
	b->abort = (uint8_t)FIELD(3, 1);
	b->cycles = (uint16_t)FIELD(4, 16);
	b->type = (uint8_t)FIELD(20, 4);
	b->spec = (uint8_t)FIELD(24, 2);
	b->new_type = (uint8_t)FIELD(26, 4);
	b->priv = (uint8_t)FIELD(30, 3);
#undef FIELD
}

/* ---- record walking ---- */

/* Checks the record at r->pos.  Returns 0 and its size (and for AUXTRACE
 * the payload size) or a negative error. */
static int record_at(const struct btr_perf_reader *r, uint64_t pos, uint32_t *type, uint16_t *misc,
		     uint64_t *total)
{
	uint64_t left = r->data_end - pos;
	if (left < 8)
		return r->data_cut ? -BTR_ERR_TRUNCATED : -BTR_ERR_BAD_RECORD;
	const uint8_t *p = r->buf + pos;
	uint32_t t = rd32(r, p);
	uint16_t sz = rd16(r, p + 6);
	if (sz < 8)
		return -BTR_ERR_BAD_RECORD;
	uint64_t tot = sz;
	if (t == REC_AUXTRACE) {
		if (sz < 8 + 40)
			return -BTR_ERR_BAD_RECORD;
		if (left >= 16) {
			uint64_t psz = rd64(r, p + 8);
			if (psz > UINT64_MAX / 4)
				return -BTR_ERR_BAD_RECORD;
			tot += psz;
		}
	}
	if (tot > left) {
		/* past the readable end: a cut file, or a record running past
		 * the end of the data section */
		if (r->data_cut)
			return -BTR_ERR_TRUNCATED;
		return -BTR_ERR_BAD_RECORD;
	}
	*type = t;
	*misc = rd16(r, p + 4);
	*total = tot;
	return 0;
}

/* Decompresses the body (@p, @n bytes) of a COMPRESSED/COMPRESSED2
 * record behind the not yet delivered rest of the previous one, as
 * perf_session__process_compressed_event() does.  The output of one
 * record is at most HEADER_COMPRESSED's mmap_len (the ring buffer size);
 * the buffer grows to a bounded size so that a zstd bomb cannot take all
 * memory. */
static int decompress(struct btr_perf_reader *r, uint32_t t, const uint8_t *p, uint64_t n)
{
	const uint8_t *src = p;
	uint64_t len = n;
	if (t == REC_COMPRESSED2) {
		if (n < 8 || rd64(r, p) > n - 8)
			return -BTR_ERR_BAD_RECORD;
		len = rd64(r, p);
		src = p + 8;
	}
	if (!r->zd && !(r->zd = ZSTD_createDCtx()))
		return -BTR_ERR_NOMEM;
	size_t rest = r->dlen - r->dpos;
	if (rest && r->dpos)
		memmove(r->dbuf, r->dbuf + r->dpos, rest);
	r->dlen = rest;
	r->dpos = 0;
	size_t limit = (size_t)r->comp_mmap_len * 2 + (1u << 20);
	if (limit < (64u << 20))
		limit = 64u << 20;
	if (limit > (512u << 20))
		limit = 512u << 20;
	ZSTD_inBuffer in = { src, (size_t)len, 0 };
	for (;;) {
		if (r->dcap - r->dlen < 65536) {
			size_t cap = r->dcap ? r->dcap * 2 : (size_t)r->comp_mmap_len + (1u << 20);
			if (cap > limit || cap < r->dcap) {
				btr_debug("perf.data: compressed record expands beyond %zu bytes", limit);
				return -BTR_ERR_COMPRESS;
			}
			void *nb = realloc(r->dbuf, cap);
			if (!nb)
				return -BTR_ERR_NOMEM;
			r->dbuf = nb;
			r->dcap = cap;
		}
		ZSTD_outBuffer out = { r->dbuf, r->dcap, r->dlen };
		size_t ret = ZSTD_decompressStream(r->zd, &out, &in);
		if (ZSTD_isError(ret)) {
			btr_debug("perf.data: zstd: %s", ZSTD_getErrorName(ret));
			return -BTR_ERR_COMPRESS;
		}
		r->dlen = out.pos;
		/* done when all input is consumed and zstd had room left
		 * (a full output buffer may hide more pending output) */
		if (in.pos == in.size && out.pos < out.size)
			break;
	}
	return 0;
}

/* Looks for the first branch-stack sample in the record at @p (body of
 * @n bytes); sets first_lbr_nr. */
static bool prescan_sample(struct btr_perf_reader *r, const uint8_t *p, uint64_t n)
{
	struct sample s;
	if (!r->nr_attrs)
		return false;
	const struct attr_ent *a = sample_attr(r, p, n);
	if (parse_sample(r, a, p, n, &s) != 0)
		return false;
	r->first_lbr_nr = (uint32_t)s.nr;
	r->lbr_attr = (int32_t)(a - r->attrs);
	return true;
}

/* open-time look at the first records: pipe-mode attrs and features,
 * time conversion, AUXTRACE_INFO, the first branch stack (LBR depth). */
static int prescan(struct btr_perf_reader *r)
{
	uint64_t pos = r->data_start;
	bool lbr_found = false;
	unsigned compressed = 0;
	for (unsigned i = 0; i < PRESCAN_RECORDS && pos < r->data_end; i++) {
		uint32_t t;
		uint16_t misc;
		uint64_t tot;
		if (record_at(r, pos, &t, &misc, &tot))
			break;
		const uint8_t *p = r->buf + pos + 8;
		uint64_t n = rd16(r, r->buf + pos + 6) - 8;
		int err = 0;
		switch (t) {
		case REC_HEADER_ATTR: {
			/* pipe mode: { attr (attr.size bytes); u64 id[]; } */
			if (n < ATTR_SIZE_VER0)
				break;
			uint64_t asz = rd32(r, p + 4);
			if (!asz)
				asz = ATTR_SIZE_VER0;
			if (asz > n)
				break;
			uint32_t idx;
			if ((err = btr__perf_add_attr(r, p, asz, &idx)))
				return err;
			/* perf before 6.4 put the ids after its own
			 * sizeof(struct perf_event_attr), which may exceed
			 * attr.size (perf 6.1 writes size 112 and ids at
			 * 128); the gap is zero and ids are never 0. */
			for (uint64_t k = asz; k + 8 <= n; k += 8) {
				uint64_t id = rd64(r, p + k);
				if (!id)
					continue;
				if ((err = btr__perf_add_id(r, id, idx)))
					return err;
				r->attrs[idx].a.nr_ids++;
			}
			btr__perf_sort_ids(r);
			break;
		}
		case REC_HEADER_FEATURE:
			/* pipe mode: { u64 feat_id; data[] } */
			if (n >= 8 && rd64(r, p) < F_MAX) {
				unsigned f = (unsigned)rd64(r, p);
				if (f < 64)
					r->features |= 1ull << f;
				if ((err = btr__perf_parse_feature(r, f, p + 8, n - 8)))
					return err;
			}
			break;
		case REC_HEADER_BUILD_ID:
			if ((err = btr__perf_parse_build_ids(r, r->buf + pos, tot)))
				return err;
			break;
		case REC_TIME_CONV:
			/* { u64 time_shift, time_mult, time_zero; ... } */
			if (n >= 24 && !r->have_conv && rd64(r, p + 8) && rd64(r, p) < 64) {
				r->time_shift = (uint16_t)rd64(r, p);
				r->time_mult = rd64(r, p + 8);
				r->time_zero = rd64(r, p + 16);
				r->have_conv = true;
			}
			break;
		case REC_AUXTRACE_INFO:
			/* { u32 type; u32 reserved; u64 priv[]; } */
			if (n >= 8 && !r->auxtrace_type) {
				r->auxtrace_type = rd32(r, p);
				if (r->auxtrace_type == AUXTRACE_INTEL_PT && n >= 8 + 8 * PT_PRIV_MIN) {
					for (int k = 0; k < PT_PRIV_MIN; k++)
						r->pt_priv[k] = rd64(r, p + 8 + 8 * k);
					r->have_pt_priv = true;
					if (!r->have_conv && r->pt_priv[PT_CAP_USER_TIME_ZERO] &&
					    r->pt_priv[PT_TIME_MULT] && r->pt_priv[PT_TIME_SHIFT] < 64) {
						r->time_shift = (uint16_t)r->pt_priv[PT_TIME_SHIFT];
						r->time_mult = r->pt_priv[PT_TIME_MULT];
						r->time_zero = r->pt_priv[PT_TIME_ZERO];
						r->have_conv = true;
					}
				} else if (r->auxtrace_type == AUXTRACE_INTEL_BTS && n >= 8 + 8 * 5) {
					/* tools/perf/util/intel-bts.h: priv[] = PMU type,
					 * time_shift, time_mult, time_zero,
					 * cap_user_time_zero, snapshot mode */
					r->bts_pmu_type = rd64(r, p + 8);
					r->have_bts_priv = true;
					uint64_t sh = rd64(r, p + 16), mu = rd64(r, p + 24), ze = rd64(r, p + 32);
					if (!r->have_conv && rd64(r, p + 40) && mu && sh < 64) {
						r->time_shift = (uint16_t)sh;
						r->time_mult = mu;
						r->time_zero = ze;
						r->have_conv = true;
					}
				}
			}
			break;
		case REC_SAMPLE:
			if (!lbr_found)
				lbr_found = prescan_sample(r, p, n);
			break;
		case REC_COMPRESSED:
		case REC_COMPRESSED2:
			/* samples of perf record -z are inside; look into the
			 * first few for the LBR depth */
			if (lbr_found || ++compressed > 8 || decompress(r, t, p, n))
				break;
			while (!lbr_found && r->dlen - r->dpos >= 8) {
				const uint8_t *h = r->dbuf + r->dpos;
				uint16_t sz = rd16(r, h + 6);
				if (sz < 8 || sz > r->dlen - r->dpos)
					break;
				if (rd32(r, h) == REC_SAMPLE)
					lbr_found = prescan_sample(r, h + 8, sz - 8u);
				r->dpos += sz;
			}
			break;
		default:
			break;
		}
		pos += tot;
	}
	/* btr_perf_read decompresses from the start again */
	if (r->zd)
		ZSTD_DCtx_reset(r->zd, ZSTD_reset_session_only);
	r->dlen = r->dpos = 0;
	return 0;
}

static void parse_cpuid(struct btr_perf_reader *r, struct btr_rec_machine *m)
{
	/* x86: "GenuineIntel,6,78,3" = vendor,family,model,stepping */
	const char *s = r->cpuid, *c = strchr(s, ',');
	if (!*s)
		return;
	size_t vl = c ? (size_t)(c - s) : strlen(s);
	if (vl >= sizeof(m->cpu_vendor))
		vl = sizeof(m->cpu_vendor) - 1;
	memcpy(m->cpu_vendor, s, vl);
	m->cpu_vendor[vl] = 0;
	uint16_t *dst[3] = { &m->cpu_family, &m->cpu_model, &m->cpu_stepping };
	for (int i = 0; i < 3 && c; i++) {
		char *end;
		unsigned long v = strtoul(c + 1, &end, 10);
		if (end == c + 1 || v > 0xffff)
			break;
		*dst[i] = (uint16_t)v;
		c = strchr(c + 1, ',');
	}
}

static unsigned ctz64(uint64_t v)
{
	return v ? (unsigned)__builtin_ctzll(v) : 0;
}

static void build_machine(struct btr_perf_reader *r)
{
	struct btr_rec_machine *m = &r->machine;
	memset(m, 0, sizeof(*m));
	strcpy(m->backend, "perf");
	parse_cpuid(r, m);
	m->lbr_depth = (uint16_t)(r->first_lbr_nr > 0xffff ? 0xffff : r->first_lbr_nr);
	if (r->have_conv && r->time_mult)
		m->tsc_hz = (uint64_t)(((unsigned __int128)1000000000u << r->time_shift) / r->time_mult);

	const struct attr_ent *flag_attr = NULL;
	if (r->have_pt_priv) {
		const uint64_t *pv = r->pt_priv;
		const struct attr_ent *pt = NULL;
		for (uint32_t i = 0; i < r->nr_attrs; i++)
			if (r->attrs[i].a.type == pv[PT_PMU_TYPE]) {
				pt = &r->attrs[i];
				break;
			}
		m->nom_freq = (uint32_t)pv[PT_MAX_NONTURBO_RATIO];
		/* CPUID.15H: EAX = denominator, EBX = numerator of TSC/"core
		 * crystal clock" (perf's TSC:CTC ratio) */
		m->cpuid15_eax = (uint32_t)pv[PT_TSC_CTC_D];
		m->cpuid15_ebx = (uint32_t)pv[PT_TSC_CTC_N];
		if (pt) {
			uint64_t cfg = pt->a.config;
			if (!(cfg & pv[PT_NORETCOMP_BIT]) || !pv[PT_NORETCOMP_BIT])
				m->flags |= BTR_MACHINE_PT_RETCOMP;
			if (pv[PT_CYC_BIT] && (cfg & pv[PT_CYC_BIT])) {
				m->flags |= BTR_MACHINE_PT_CYC;
				/* intel_pt PMU format: cyc_thresh = config:19-22 */
				m->cyc_thresh = (uint8_t)((cfg >> 19) & 0xf);
			}
			if (pv[PT_MTC_BIT] && (cfg & pv[PT_MTC_BIT])) {
				m->flags |= BTR_MACHINE_PT_MTC;
				m->mtc_freq = (uint8_t)((cfg & pv[PT_MTC_FREQ_BITS]) >> ctz64(pv[PT_MTC_FREQ_BITS]));
			}
			if (pv[PT_TSC_BIT] && (cfg & pv[PT_TSC_BIT]))
				m->flags |= BTR_MACHINE_PT_TSC;
			flag_attr = pt;
		}
	} else if (r->have_bts_priv) {
		/* BTS: privilege from the intel_bts event's exclude bits */
		for (uint32_t i = 0; i < r->nr_attrs; i++)
			if (r->attrs[i].a.type == r->bts_pmu_type) {
				flag_attr = &r->attrs[i];
				break;
			}
	} else if (r->lbr_attr >= 0) {
		const struct attr_ent *a = &r->attrs[r->lbr_attr];
		uint64_t b = a->a.branch_sample_type;
		if ((b & (BR_USER | BR_KERNEL)) == BR_USER)
			m->flags |= BTR_MACHINE_USER_ONLY;
		else if ((b & (BR_USER | BR_KERNEL)) == BR_KERNEL)
			m->flags |= BTR_MACHINE_KERNEL_ONLY;
		else
			flag_attr = a;
	}
	if (flag_attr) {
		uint64_t f = flag_attr->a.flags;
		if ((f & BTR_PERF_ATTR_EXCLUDE_KERNEL) && !(f & BTR_PERF_ATTR_EXCLUDE_USER))
			m->flags |= BTR_MACHINE_USER_ONLY;
		else if ((f & BTR_PERF_ATTR_EXCLUDE_USER) && !(f & BTR_PERF_ATTR_EXCLUDE_KERNEL))
			m->flags |= BTR_MACHINE_KERNEL_ONLY;
	}
}

int btr_perf_probe(const void *buf, size_t size)
{
	uint64_t m;
	if (!buf || size < 8)
		return 0;
	memcpy(&m, buf, 8);
	return m == PERF_MAGIC2_LE || m == PERF_MAGIC2_BE;
}

static int reader_init(struct btr_perf_reader *r)
{
	uint64_t magic;
	if (r->size < 8)
		return -BTR_ERR_BAD_FORMAT;
	memcpy(&magic, r->buf, 8);
	/* The magic is the number 0x32454c4946524550 written in the
	 * writer's byte order: read natively it is either that number (same
	 * order as ours) or its byte swap. */
	if (magic == PERF_MAGIC2_LE)
		r->swap = false;
	else if (magic == PERF_MAGIC2_BE)
		r->swap = true;
	else
		return -BTR_ERR_BAD_FORMAT;
	if (r->size < 16)
		return -BTR_ERR_TRUNCATED;
	uint64_t hsize = rd64(r, r->buf + 8);
	int err;
	r->lbr_attr = -1;
	if (hsize == PIPE_HEADER_SIZE) {
		r->pipe = true;
		r->data_start = PIPE_HEADER_SIZE;
		r->data_end = r->size;
	} else if (hsize == FILE_HEADER_SIZE) {
		if ((err = btr__perf_parse_file_header(r)))
			return err;
	} else {
		return -BTR_ERR_BAD_FORMAT;
	}
	if ((err = prescan(r)))
		return err;
	r->pos = r->data_start;
	build_machine(r);
	return 0;
}

int btr_perf_reader_new_mem(const void *buf, size_t size, struct btr_perf_reader **out)
{
	if (!out || (!buf && size))
		return -BTR_ERR_INVAL;
	*out = NULL;
	struct btr_perf_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -BTR_ERR_NOMEM;
	r->buf = buf;
	r->size = size;
	int err = reader_init(r);
	if (err) {
		btr_perf_reader_free(r);
		return err;
	}
	*out = r;
	return 0;
}

int btr_perf_reader_new(const char *path, struct btr_perf_reader **out)
{
	if (!path || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return btr_err_from_errno(errno);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = btr_err_from_errno(errno);
		close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		btr_debug("%s: not a regular file", path);
		return -BTR_ERR_IO;
	}
	void *map = NULL;
	size_t size = (size_t)st.st_size;
	if (size) {
		map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			int e = btr_err_from_errno(errno);
			close(fd);
			return e;
		}
	}
	close(fd);
	struct btr_perf_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		if (map)
			munmap(map, size);
		return -BTR_ERR_NOMEM;
	}
	r->map = map;
	r->map_size = size;
	r->buf = map;
	r->size = size;
	int err = reader_init(r);
	if (err) {
		if (err == -BTR_ERR_BAD_FORMAT)
			btr_debug("%s: not a perf.data file", path);
		btr_perf_reader_free(r);
		return err;
	}
	*out = r;
	return 0;
}

void btr_perf_reader_free(struct btr_perf_reader *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->map_size);
	for (uint32_t i = 0; i < r->nr_attrs; i++)
		free(r->attrs[i].name);
	for (uint32_t i = 0; i < r->nr_bids; i++)
		free(r->bids[i].path);
	free(r->attrs);
	free(r->ids);
	free(r->bids);
	free(r->sbr);
	free(r->scc);
	free(r->dbuf);
	jit_queue_free(&r->jit);
	ZSTD_freeDCtx(r->zd);
	free(r);
}

/* Converts the perf record at r->pos (@t, body @p of @n bytes).  Returns
 * 1 if it produced @rec, 0 if skipped, or a negative error. */
static int convert(struct btr_perf_reader *r, uint32_t t, uint16_t misc, const uint8_t *p, uint64_t n,
		   struct btr_record *rec)
{
	struct sample_id sid;
	uint64_t body;

	switch (t) {
	case REC_MMAP:
	case REC_MMAP2: {
		/* MMAP: u32 pid, tid; u64 addr, len, pgoff; char filename[].
		 * MMAP2 adds after pgoff either { u32 maj, min; u64 ino,
		 * ino_generation; } or, with PERF_RECORD_MISC_MMAP_BUILD_ID,
		 * { u8 build_id_size, res, u16 res; u8 build_id[20]; }, then
		 * u32 prot, flags; and the filename. */
		uint64_t fixed = t == REC_MMAP ? 32 : 32 + 24 + 8;
		if (n < fixed)
			return -BTR_ERR_BAD_RECORD;
		body = parse_trailer(r, p, n, fixed, &sid);
		struct btr_rec_module *m = &rec->u.module;
		memset(m, 0, sizeof(*m));
		rec->type = BTR_REC_MODULE_LOAD;
		m->pid = rd32(r, p);
		m->start = rd64(r, p + 8);
		m->size = rd64(r, p + 16);
		m->pgoff = rd64(r, p + 24);
		m->tsc = sid.have_time ? perf_to_tsc(r, sid.time) : 0;
		if (t == REC_MMAP) {
			m->prot = PROT_R | ((misc & MISC_MMAP_DATA) ? 0 : PROT_X);
		} else {
			m->prot = rd32(r, p + 56);
			if (misc & MISC_MMAP_BUILD_ID) {
				uint8_t len = p[32];
				m->build_id_len = len > 20 ? 20 : len;
				memcpy(m->build_id, p + 36, m->build_id_len);
			}
		}
		copy_str(r->path, sizeof(r->path), p + fixed, body - fixed);
		m->path = r->path;
		/* A JIT runtime maps its jitdump so that its name is here: its
		 * functions and their code follow (as `perf inject --jit`). */
		if (jit_dump_path(r->path) && jit_queue_load(&r->jit, r->path, m->pid) < 0)
			btr_warn("%s: cannot read this jitdump: its code cannot be decoded", r->path);
		if (!m->build_id_len) {
			const struct bid_ent *b = btr__perf_find_build_id(r, r->path);
			if (b) {
				memcpy(m->build_id, b->id, b->len);
				m->build_id_len = b->len;
			}
		}
		return 1;
	}
	case REC_COMM: {
		/* u32 pid, tid; char comm[] */
		if (n < 8)
			return -BTR_ERR_BAD_RECORD;
		body = parse_trailer(r, p, n, 8, &sid);
		copy_str(r->comm, sizeof(r->comm), p + 8, body - 8);
		struct btr_rec_thread *th = &rec->u.thread;
		memset(th, 0, sizeof(*th));
		rec->type = BTR_REC_THREAD_NAME;
		th->pid = rd32(r, p);
		th->tid = rd32(r, p + 4);
		th->tsc = sid.have_time ? perf_to_tsc(r, sid.time) : 0;
		th->name = r->comm;
		if (misc & MISC_COMM_EXEC) {
			/* The thread exec'ed: its old mappings are gone (perf's
			 * thread__set_comm(..., exec) does the same).  The new
			 * image's MMAPs follow; the EXEC record carries only the
			 * new comm as its path. */
			r->pending = *rec;
			r->has_pending = true;
			struct btr_rec_module *m = &rec->u.module;
			memset(m, 0, sizeof(*m));
			rec->type = BTR_REC_EXEC;
			m->pid = r->pending.u.thread.pid;
			m->tsc = r->pending.u.thread.tsc;
			m->path = r->comm;
		}
		return 1;
	}
	case REC_FORK:
	case REC_EXIT: {
		/* u32 pid, ppid; u32 tid, ptid; u64 time */
		if (n < 24)
			return -BTR_ERR_BAD_RECORD;
		struct btr_rec_thread *th = &rec->u.thread;
		memset(th, 0, sizeof(*th));
		rec->type = t == REC_FORK ? BTR_REC_THREAD_START : BTR_REC_THREAD_EXIT;
		th->pid = rd32(r, p);
		th->tid = rd32(r, p + 8);
		th->name = ""; /* never NULL, as the btr reader gives it */
		if (t == REC_FORK)
			th->parent_tid = rd32(r, p + 12);
		th->tsc = perf_to_tsc(r, rd64(r, p + 16));
		return 1;
	}
	case REC_SWITCH:
	case REC_SWITCH_CPU_WIDE: {
		/* SWITCH: no body; SWITCH_CPU_WIDE: u32 next_prev_pid,
		 * next_prev_tid.  The sample_id trailer names the thread the
		 * record is about (switching out with MISC_SWITCH_OUT, else
		 * in) and the CPU; without a trailer the record says nothing
		 * usable. */
		uint64_t fixed = t == REC_SWITCH ? 0 : 8;
		if (n < fixed)
			return -BTR_ERR_BAD_RECORD;
		parse_trailer(r, p, n, fixed, &sid);
		if (!sid.have_tid)
			return 0;
		struct btr_rec_switch *w = &rec->u.sw;
		memset(w, 0, sizeof(*w));
		rec->type = BTR_REC_SWITCH;
		w->pid = sid.pid;
		w->tid = sid.tid;
		w->cpu = sid.cpu;
		w->tsc = sid.have_time ? perf_to_tsc(r, sid.time) : 0;
		if (misc & MISC_SWITCH_OUT)
			w->flags |= BTR_SWITCH_OUT;
		if (misc & MISC_SWITCH_OUT_PREEMPT)
			w->flags |= BTR_SWITCH_PREEMPT;
		return 1;
	}
	case REC_AUXTRACE: {
		/* u64 size, offset, reference; u32 idx, tid, cpu, reserved;
		 * then @size payload bytes that header.size does not count */
		if (r->auxtrace_type != AUXTRACE_INTEL_PT && r->auxtrace_type != AUXTRACE_INTEL_BTS)
			return 0;
		struct btr_rec_data *d = &rec->u.data;
		memset(d, 0, sizeof(*d));
		rec->type = r->auxtrace_type == AUXTRACE_INTEL_PT ? BTR_REC_PT : BTR_REC_BTS;
		d->size = rd64(r, p);
		d->stream_offset = rd64(r, p + 8);
		d->tid = rd32(r, p + 28);
		d->cpu = (int32_t)rd32(r, p + 32);
		d->data = p + n;
		return 1;
	}
	case REC_SAMPLE: {
		if (!r->nr_attrs)
			return 0;
		struct sample s;
		const struct attr_ent *a = sample_attr(r, p, n);
		int err = parse_sample(r, a, p, n, &s);
		if (err)
			return err < 0 ? err : 0;
		/* Trailing all-zero entries are empty LBR slots (the kernel
		 * reports the full depth after an LBR reset), not branches. */
		uint64_t cnt = s.nr;
		while (cnt && !rd64(r, s.entries + (cnt - 1) * 24) && !rd64(r, s.entries + (cnt - 1) * 24 + 8))
			cnt--;
		for (uint64_t i = 0; i < cnt; i++) {
			const uint8_t *e = s.entries + i * 24;
			r->lbr[i].from = rd64(r, e);
			r->lbr[i].to = rd64(r, e + 8);
			decode_branch_flags(r, rd64(r, e + 16), &r->lbr[i]);
		}
		struct btr_rec_lbr *l = &rec->u.lbr;
		memset(l, 0, sizeof(*l));
		rec->type = BTR_REC_LBR;
		l->pid = s.pid;
		l->tid = s.tid;
		l->cpu = s.cpu;
		l->count = (uint32_t)cnt;
		l->tsc = perf_to_tsc(r, s.time);
		l->ip = s.ip;
		l->entries = r->lbr;
		return 1;
	}
	default:
		return 0;
	}
}

/* The next raw perf record, from the decompression buffer or the file,
 * COMPRESSED records opened on the way: sets *@t, *@misc, the body @p of
 * *@n bytes.  Returns 0, or a negative error (sticky, stored in r->err). */
static int next_raw(struct btr_perf_reader *r, uint32_t *t, uint16_t *misc, const uint8_t **p,
		    uint64_t *n)
{
	for (;;) {
		if (r->err)
			return r->err;
		while (r->dlen - r->dpos >= 8 && r->dpos < r->dlen) {
			const uint8_t *h = r->dbuf + r->dpos;
			uint32_t ty = rd32(r, h);
			uint16_t sz = rd16(r, h + 6);
			if (sz < 8) {
				btr_debug("perf.data: malformed record in the compressed record at offset 0x%llx",
					 (unsigned long long)r->last_off);
				return r->err = -BTR_ERR_BAD_RECORD;
			}
			if (sz > r->dlen - r->dpos)
				break;
			r->dpos += sz;
			r->counts[ty < 128 ? ty : 127]++;
			/* perf compresses only ring-buffer data: AUXTRACE
			 * payloads and nested COMPRESSED records cannot
			 * occur; skip them */
			if (ty == REC_AUXTRACE || ty == REC_COMPRESSED || ty == REC_COMPRESSED2)
				continue;
			*t = ty;
			*misc = rd16(r, h + 4);
			*p = h + 8;
			*n = sz - 8u;
			r->in_dbuf = true;
			return 0;
		}
		if (r->pos >= r->data_end) {
			/* a record cut at the end of the compressed stream is
			 * a truncation too */
			if (r->data_cut || r->feat_cut || r->dpos < r->dlen)
				r->err = -BTR_ERR_TRUNCATED;
			else
				r->err = -BTR_ERR_EOS;
			return r->err;
		}
		uint64_t tot;
		r->last_off = r->pos;
		int err = record_at(r, r->pos, t, misc, &tot);
		if (err) {
			if (err == -BTR_ERR_BAD_RECORD)
				btr_debug("perf.data: malformed record at offset 0x%llx",
					 (unsigned long long)r->pos);
			return r->err = err;
		}
		r->counts[*t < 128 ? *t : 127]++;
		*p = r->buf + r->pos + 8;
		*n = rd16(r, r->buf + r->pos + 6) - 8u;
		r->pos += tot;
		if (*t == REC_COMPRESSED || *t == REC_COMPRESSED2) {
			if ((err = decompress(r, *t, *p, *n)) < 0)
				return r->err = err;
			continue;
		}
		r->in_dbuf = false;
		return 0;
	}
}

int btr_perf_read(struct btr_perf_reader *r, struct btr_record *rec)
{
	if (!r || !rec)
		return -BTR_ERR_INVAL;
	if (r->has_pending) {
		*rec = r->pending;
		r->has_pending = false;
		return 0;
	}
	if (jit_queue_pop(&r->jit, rec))
		return 0;
	if (r->err)
		return r->err;
	if (!r->machine_done) {
		r->machine_done = 1;
		memset(rec, 0, sizeof(*rec));
		rec->type = BTR_REC_MACHINE;
		rec->u.machine = r->machine;
		return 0;
	}
	for (;;) {
		uint32_t t;
		uint16_t misc;
		const uint8_t *p;
		uint64_t n;
		int err = next_raw(r, &t, &misc, &p, &n);
		if (err)
			return err;
		err = convert(r, t, misc, p, n, rec);
		if (err < 0) {
			btr_debug("perf.data: malformed record (type %u) at offset 0x%llx%s", t,
				 (unsigned long long)r->last_off, r->in_dbuf ? " (compressed)" : "");
			r->err = err;
			return err;
		}
		if (err > 0)
			return 0;
	}
}

int btr_perf_conv_new(const void *attr, size_t attr_size, struct btr_perf_reader **out)
{
	if (!attr || !out || attr_size < ATTR_SIZE_VER0)
		return -BTR_ERR_INVAL;
	struct btr_perf_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -BTR_ERR_NOMEM;
	/* a live ring is in this host's byte order */
	r->swap = false;
	r->lbr_attr = -1;
	r->machine_done = 1;
	r->err = -BTR_ERR_EOS;   /* nothing to read: records come through btr_perf_convert */
	uint32_t idx;
	int rc = btr__perf_add_attr(r, attr, attr_size, &idx);
	if (rc < 0) {
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

int btr_perf_conv_set_time(struct btr_perf_reader *r, uint16_t shift, uint32_t mult, uint64_t zero)
{
	if (!r || !mult || shift >= 64)
		return -BTR_ERR_INVAL;
	r->time_shift = shift;
	r->time_mult = mult;
	r->time_zero = zero;
	r->have_conv = true;
	return 0;
}

int btr_perf_convert(struct btr_perf_reader *r, const void *rec, size_t size, struct btr_record out[2])
{
	if (!r || !rec || !out || size < 8)
		return -BTR_ERR_INVAL;
	const uint8_t *p = rec;
	uint32_t t = rd32(r, p);
	uint16_t misc = rd16(r, p + 4), sz = rd16(r, p + 6);
	if (sz < 8 || sz > size)
		return -BTR_ERR_BAD_RECORD;
	r->counts[t < 128 ? t : 127]++;
	if (t == REC_AUXTRACE)
		return 0;   /* a file-only record: its payload is not in @rec */
	r->has_pending = false;
	int rc = convert(r, t, misc, p + 8, sz - 8u, &out[0]);
	jit_queue_free(&r->jit);   /* live: the runtime is still writing its jitdump */
	if (rc <= 0)
		return rc;
	if (r->has_pending) {
		out[1] = r->pending;
		r->has_pending = false;
		return 2;
	}
	return 1;
}

int btr_perf_read_sample(struct btr_perf_reader *r, struct btr_perf_sample *out)
{
	if (!r || !out)
		return -BTR_ERR_INVAL;
	if (!r->sbr && !(r->sbr = malloc(sizeof(*r->sbr) * MAX_LBR)))
		return -BTR_ERR_NOMEM;
	if (!r->scc && !(r->scc = malloc(sizeof(*r->scc) * MAX_CALLCHAIN)))
		return -BTR_ERR_NOMEM;
	r->machine_done = 1;
	r->has_pending = false;
	for (;;) {
		uint32_t t;
		uint16_t misc;
		const uint8_t *p;
		uint64_t n;
		int err = next_raw(r, &t, &misc, &p, &n);
		if (err)
			return err;
		if (t != REC_SAMPLE || !r->nr_attrs)
			continue;
		struct sample s;
		const struct attr_ent *a = sample_attr(r, p, n);
		err = parse_sample(r, a, p, n, &s);
		if (err < 0) {
			btr_debug("perf.data: malformed sample at offset 0x%llx", (unsigned long long)r->last_off);
			return r->err = err;
		}
		memset(out, 0, sizeof(*out));
		out->attr = (uint32_t)(a - r->attrs);
		out->sample_type = a->a.sample_type;
		out->misc = misc;
		out->ip = s.ip;
		out->pid = s.pid;
		out->tid = s.tid;
		out->time = s.time;
		out->addr = s.addr;
		out->id = s.id;
		out->cpu = s.cpu;
		out->period = s.period;
		out->nr_callchain = s.nr_callchain > MAX_CALLCHAIN ? MAX_CALLCHAIN : s.nr_callchain;
		for (uint64_t i = 0; i < out->nr_callchain; i++)
			r->scc[i] = rd64(r, s.callchain + 8 * i);
		out->callchain = r->scc;
		out->has_branch_stack = s.has_branch_stack;
		out->has_hw_index = s.has_hw_index;
		out->hw_index = s.hw_index;
		out->nr_branches = s.nr;
		for (uint64_t i = 0; i < s.nr; i++)
			decode_branch_full(r, s.entries + 24 * i, &r->sbr[i]);
		out->branches = r->sbr;
		return 0;
	}
}

unsigned btr_perf_reader_attr_count(const struct btr_perf_reader *r)
{
	return r ? r->nr_attrs : 0;
}

int btr_perf_reader_attr(const struct btr_perf_reader *r, unsigned idx, struct btr_perf_attr *out)
{
	if (!r || !out || idx >= r->nr_attrs)
		return -BTR_ERR_INVAL;
	*out = r->attrs[idx].a;
	return 0;
}

int btr_perf_reader_info(const struct btr_perf_reader *r, struct btr_perf_info *out)
{
	if (!r || !out)
		return -BTR_ERR_INVAL;
	memset(out, 0, sizeof(*out));
	out->pipe_mode = r->pipe;
	out->swapped = r->swap;
	out->time_is_tsc = r->have_conv;
	out->file_size = r->size;
	out->data_offset = r->data_start;
	out->data_size = r->data_end - r->data_start;
	out->features = r->features;
	out->auxtrace_type = r->auxtrace_type;
	memcpy(out->cpuid, r->cpuid, sizeof(out->cpuid));
	memcpy(out->cpudesc, r->cpudesc, sizeof(out->cpudesc));
	memcpy(out->hostname, r->hostname, sizeof(out->hostname));
	memcpy(out->os_release, r->os_release, sizeof(out->os_release));
	memcpy(out->perf_version, r->perf_version, sizeof(out->perf_version));
	return 0;
}

uint64_t btr_perf_reader_count(const struct btr_perf_reader *r, uint32_t perf_type)
{
	if (!r)
		return 0;
	return r->counts[perf_type < 128 ? perf_type : 127];
}

uint64_t btr_perf_reader_offset(const struct btr_perf_reader *r)
{
	return r ? r->last_off : 0;
}
