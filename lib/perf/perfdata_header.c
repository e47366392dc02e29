/* perfdata_header.c - the perf.data file header and its feature sections
 * (build-ids, cmdline, CPU description, event descriptions), and the
 * attribute and id tables they and the records fill; split from perfdata.c
 * along that seam (perfdata.c calls this file, never the other way); the
 * layouts are those of tools/perf/Documentation/perf.data-file-format.txt. */
#include "perfdata_priv.h"

#include <stdlib.h>
#include <string.h>

/* ---- attribute and id tables ---- */

int btr__perf_add_attr(struct btr_perf_reader *r, const uint8_t *p, uint64_t avail, uint32_t *idx)
{
	if (avail < ATTR_SIZE_VER0)
		return -BTR_ERR_BAD_RECORD;
	if (r->nr_attrs == r->cap_attrs) {
		uint32_t cap = r->cap_attrs ? r->cap_attrs * 2 : 8;
		if (cap > 65536)
			return -BTR_ERR_BAD_FORMAT;
		void *n = realloc(r->attrs, cap * sizeof(*r->attrs));
		if (!n)
			return -BTR_ERR_NOMEM;
		r->attrs = n;
		r->cap_attrs = cap;
	}
	struct attr_ent *e = &r->attrs[r->nr_attrs];
	memset(e, 0, sizeof(*e));
	/* struct perf_event_attr: type@0 size@4 config@8 period@16
	 * sample_type@24 read_format@32 bitfield@40 ... branch_sample_type@72
	 * (present from PERF_ATTR_SIZE_VER2 = 80 bytes). */
	e->a.type = rd32(r, p);
	e->a.size = rd32(r, p + 4);
	e->a.config = rd64(r, p + 8);
	e->a.sample_period = rd64(r, p + 16);
	e->a.sample_type = rd64(r, p + 24);
	e->a.read_format = rd64(r, p + 32);
	e->a.flags = rd64(r, p + 40);
	if (avail >= 80)
		e->a.branch_sample_type = rd64(r, p + 72);
	e->a.name = "";
	*idx = r->nr_attrs++;
	return 0;
}

int btr__perf_add_id(struct btr_perf_reader *r, uint64_t id, uint32_t attr)
{
	if (r->nr_ids == r->cap_ids) {
		uint32_t cap = r->cap_ids ? r->cap_ids * 2 : 64;
		if (cap > (1u << 24))
			return -BTR_ERR_BAD_FORMAT;
		void *n = realloc(r->ids, cap * sizeof(*r->ids));
		if (!n)
			return -BTR_ERR_NOMEM;
		r->ids = n;
		r->cap_ids = cap;
	}
	r->ids[r->nr_ids].id = id;
	r->ids[r->nr_ids].attr = attr;
	r->nr_ids++;
	r->ids_sorted = false;
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	const struct id_ent *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

void btr__perf_sort_ids(struct btr_perf_reader *r)
{
	if (!r->ids_sorted && r->nr_ids > 1)
		qsort(r->ids, r->nr_ids, sizeof(*r->ids), cmp_id);
	r->ids_sorted = true;
}

/* ---- header sections ---- */

static int cmp_bid(const void *a, const void *b)
{
	return strcmp(((const struct bid_ent *)a)->path, ((const struct bid_ent *)b)->path);
}

static int add_build_id(struct btr_perf_reader *r, const uint8_t *id, unsigned len, const uint8_t *name,
			size_t max)
{
	if (r->nr_bids == r->cap_bids) {
		uint32_t cap = r->cap_bids ? r->cap_bids * 2 : 32;
		if (cap > (1u << 20))
			return 0;
		void *n = realloc(r->bids, cap * sizeof(*r->bids));
		if (!n)
			return -BTR_ERR_NOMEM;
		r->bids = n;
		r->cap_bids = cap;
	}
	size_t l = strnlen((const char *)name, max);
	char *s = malloc(l + 1);
	if (!s)
		return -BTR_ERR_NOMEM;
	memcpy(s, name, l);
	s[l] = 0;
	struct bid_ent *e = &r->bids[r->nr_bids++];
	e->path = s;
	e->len = len > 20 ? 20 : (uint8_t)len;
	memcpy(e->id, id, e->len);
	return 0;
}

/* HEADER_BUILD_ID: a sequence of struct perf_record_header_build_id
 * { header; pid_t pid; u8 build_id[24] (or data[20], size, 3 reserved
 * with PERF_RECORD_MISC_BUILD_ID_SIZE); char filename[]; }.  The ancient
 * ABI without pid (perf_header__read_build_ids_abi_quirk, 2.6.35) is not
 * supported. */
int btr__perf_parse_build_ids(struct btr_perf_reader *r, const uint8_t *p, uint64_t n)
{
	uint64_t off = 0;
	while (n - off >= 8 + 4 + 24) {
		uint16_t misc = rd16(r, p + off + 4), sz = rd16(r, p + off + 6);
		if (sz < 8 + 4 + 24 || sz > n - off)
			break;
		const uint8_t *e = p + off + 12;
		unsigned len = 20;
		if (misc & MISC_BUILD_ID_SIZE)
			len = e[20] <= 20 ? e[20] : 20;
		int err = add_build_id(r, e, len, e + 24, sz - 36);
		if (err)
			return err;
		off += sz;
	}
	if (r->nr_bids > 1)
		qsort(r->bids, r->nr_bids, sizeof(*r->bids), cmp_bid);
	return 0;
}

const struct bid_ent *btr__perf_find_build_id(const struct btr_perf_reader *r, const char *path)
{
	struct bid_ent key = { .path = (char *)path };
	/* The kernel's MMAP is named "[kernel.kallsyms]_text" (or _stext),
	 * its build-id entry "[kernel.kallsyms]". */
	if (!strncmp(path, "[kernel.kallsyms]", 17))
		key.path = "[kernel.kallsyms]";
	if (!r->nr_bids)
		return NULL;
	return bsearch(&key, r->bids, r->nr_bids, sizeof(*r->bids), cmp_bid);
}

/* struct perf_header_string { u32 len; char string[len]; } */
static void parse_string(const struct btr_perf_reader *r, const uint8_t *p, uint64_t n, char *dst, size_t cap)
{
	if (n < 4)
		return;
	uint32_t len = rd32(r, p);
	if (len > n - 4)
		len = (uint32_t)(n - 4);
	copy_str(dst, cap, p + 4, len);
}

/* HEADER_EVENT_DESC: u32 nr, u32 attr_size, then per event: attr,
 * u32 nr_ids, perf_header_string name, u64 ids[nr_ids].  Used only for
 * the event names, matched to the attrs by position. */
static int parse_event_desc(struct btr_perf_reader *r, const uint8_t *p, uint64_t n)
{
	if (n < 8)
		return 0;
	uint32_t nr = rd32(r, p), asz = rd32(r, p + 4);
	uint64_t off = 8;
	for (uint32_t i = 0; i < nr && i < r->nr_attrs; i++) {
		if (asz > n - off || n - off - asz < 8)
			break;
		off += asz;
		uint32_t nids = rd32(r, p + off);
		uint32_t slen = rd32(r, p + off + 4);
		off += 8;
		if (slen > n - off)
			break;
		size_t l = strnlen((const char *)p + off, slen);
		char *s = malloc(l + 1);
		if (!s)
			return -BTR_ERR_NOMEM;
		memcpy(s, p + off, l);
		s[l] = 0;
		free(r->attrs[i].name);
		r->attrs[i].name = s;
		r->attrs[i].a.name = s;
		off += slen;
		if (nids > (n - off) / 8)
			break;
		off += (uint64_t)nids * 8;
	}
	return 0;
}

int btr__perf_parse_feature(struct btr_perf_reader *r, unsigned feat, const uint8_t *p, uint64_t n)
{
	switch (feat) {
	case F_BUILD_ID: return btr__perf_parse_build_ids(r, p, n);
	case F_HOSTNAME: parse_string(r, p, n, r->hostname, sizeof(r->hostname)); break;
	case F_OSRELEASE: parse_string(r, p, n, r->os_release, sizeof(r->os_release)); break;
	case F_VERSION: parse_string(r, p, n, r->perf_version, sizeof(r->perf_version)); break;
	case F_CPUDESC: parse_string(r, p, n, r->cpudesc, sizeof(r->cpudesc)); break;
	case F_CPUID: parse_string(r, p, n, r->cpuid, sizeof(r->cpuid)); break;
	case F_EVENT_DESC: return parse_event_desc(r, p, n);
	case F_COMPRESSED:
		/* u32 version, type, level, ratio, mmap_len */
		if (n >= 20)
			r->comp_mmap_len = rd32(r, p + 16);
		break;
	default: break;
	}
	return 0;
}

/* File-mode header: struct perf_file_header { u64 magic, size, attr_size;
 * perf_file_section attrs, data, event_types; u64 adds_features[4]; },
 * attrs = array of attr_size-byte { perf_event_attr; perf_file_section
 * ids; }, feature sections = one perf_file_section per set feature bit,
 * in bit order, starting right after the data section. */
int btr__perf_parse_file_header(struct btr_perf_reader *r)
{
	if (r->size < FILE_HEADER_SIZE)
		return -BTR_ERR_TRUNCATED;
	const uint8_t *h = r->buf;
	uint64_t attr_size = rd64(r, h + 16);
	uint64_t attrs_off = rd64(r, h + 24), attrs_sz = rd64(r, h + 32);
	uint64_t data_off = rd64(r, h + 40), data_sz = rd64(r, h + 48);
	uint64_t feat[4];
	for (int i = 0; i < 4; i++)
		feat[i] = rd64(r, h + 72 + 8 * i);
	r->features = feat[0];

	/* attr_size is sizeof(struct perf_file_attr): the attr plus its ids
	 * section */
	if (attr_size < ATTR_SIZE_VER0 + 16 || attr_size > 4096)
		return -BTR_ERR_BAD_FORMAT;
	uint64_t stride = attr_size;
	attr_size -= 16;
	if (attrs_sz % stride || attrs_sz / stride > 65536)
		return -BTR_ERR_BAD_FORMAT;
	if (data_off < FILE_HEADER_SIZE || data_off > UINT64_MAX / 2 || data_sz > UINT64_MAX / 4)
		return -BTR_ERR_BAD_FORMAT;
	if (!in_file(r, attrs_off, attrs_sz))
		return attrs_off > UINT64_MAX / 2 || attrs_sz > UINT64_MAX / 2 ? -BTR_ERR_BAD_FORMAT
										  : -BTR_ERR_TRUNCATED;
	for (uint64_t o = attrs_off; o < attrs_off + attrs_sz; o += stride) {
		uint32_t idx;
		int err = btr__perf_add_attr(r, r->buf + o, attr_size, &idx);
		if (err)
			return err;
		uint64_t ids_off = rd64(r, r->buf + o + attr_size), ids_sz = rd64(r, r->buf + o + attr_size + 8);
		if (ids_sz % 8)
			return -BTR_ERR_BAD_FORMAT;
		if (!in_file(r, ids_off, ids_sz))
			return ids_off > UINT64_MAX / 2 || ids_sz > UINT64_MAX / 2 ? -BTR_ERR_BAD_FORMAT
										    : -BTR_ERR_TRUNCATED;
		r->attrs[idx].a.nr_ids = (uint32_t)(ids_sz / 8);
		for (uint64_t k = 0; k < ids_sz; k += 8)
			if ((err = btr__perf_add_id(r, rd64(r, r->buf + ids_off + k), idx)))
				return err;
	}
	if (!r->nr_attrs)
		return -BTR_ERR_BAD_FORMAT;
	btr__perf_sort_ids(r);

	/* A perf that died before finishing the file leaves data.size 0: the
	 * data then runs to the end of the file (perf does the same). */
	uint64_t declared_end = data_sz ? data_off + data_sz : r->size;
	if (data_off > r->size)
		return -BTR_ERR_TRUNCATED;
	r->data_start = data_off;
	r->data_end = declared_end <= r->size ? declared_end : r->size;
	r->data_cut = declared_end > r->size;
	if (!data_sz)
		return 0;

	/* feature sections */
	uint64_t tab = declared_end;
	for (unsigned bit = 1; bit < F_MAX; bit++) {
		if (!(feat[bit / 64] >> (bit % 64) & 1))
			continue;
		if (!in_file(r, tab, 16)) {
			r->feat_cut = true;
			break;
		}
		uint64_t off = rd64(r, r->buf + tab), sz = rd64(r, r->buf + tab + 8);
		tab += 16;
		if (!in_file(r, off, sz)) {
			r->feat_cut = true;
			continue;
		}
		int err = btr__perf_parse_feature(r, bit, r->buf + off, sz);
		if (err)
			return err;
	}
	return 0;
}

