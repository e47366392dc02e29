/* eh_frame.c - FDE ranges from an .eh_frame section (eh_frame.h).
 *
 * Layout (LSB "Exception Frame", DWARF 4 section 6.4.1 with the GNU
 * augmentations): a sequence of CIEs and FDEs, each `u32 length` (or
 * 0xffffffff + u64 length), then `u32 id` (0 for a CIE; for an FDE the
 * distance back from this field to its CIE).  A CIE's augmentation string
 * "zR..." says how the FDEs encode addresses (the 'R' byte, a DW_EH_PE_*
 * value); an FDE then holds pc_begin in that encoding and pc_range in its
 * value format.  We only need those two, so the instructions are skipped.
 */
#include "eh_frame.h"
#include "internal.h"

#include <string.h>

#define PE_OMIT 0xff

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_bytes(struct rd *r, size_t n)
{
	if ((size_t)(r->end - r->p) < n) {
		r->bad = 1;
		r->p = r->end;
		return 0;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint64_t rd_uleb(struct rd *r)
{
	int done;
	uint64_t v = btr__uleb128(&r->p, r->end, &done);
	r->bad |= !done;
	return done ? v : 0;
}

static int64_t rd_sleb(struct rd *r)
{
	int done;
	int64_t v = btr__sleb128(&r->p, r->end, &done);
	r->bad |= !done;
	return done ? v : 0;
}

/* Reads a value of encoding @enc; @base is the section's link address
 * and @sec the section start (for pc-relative values). */
static uint64_t rd_enc(struct rd *r, uint8_t enc, const uint8_t *sec, uint64_t base, int apply)
{
	const uint8_t *at = r->p;
	uint64_t v;
	switch (enc & 0x0f) {
	case 0x00: v = rd_bytes(r, 8); break;
	case 0x01: v = rd_uleb(r); break;
	case 0x02: v = rd_bytes(r, 2); break;
	case 0x03: v = rd_bytes(r, 4); break;
	case 0x04: v = rd_bytes(r, 8); break;
	case 0x09: v = (uint64_t)rd_sleb(r); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_bytes(r, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_bytes(r, 4); break;
	case 0x0c: v = rd_bytes(r, 8); break;
	default: r->bad = 1; return 0;
	}
	if (apply && (enc & 0x70) == 0x10)   /* DW_EH_PE_pcrel */
		v += base + (uint64_t)(at - sec);
	return v;
}

/* The FDE pointer encoding of the CIE at @cie, or -1 if malformed. */
static int cie_encoding(const uint8_t *cie, const uint8_t *end, const uint8_t *sec, uint64_t base)
{
	struct rd r = { cie, end, 0 };
	uint64_t len = rd_bytes(&r, 4);
	if (len == 0xffffffffu)
		len = rd_bytes(&r, 8);
	if (r.bad || len > (uint64_t)(r.end - r.p))
		return -1;
	r.end = r.p + len;
	uint64_t id = rd_bytes(&r, 4);
	if (id != 0)
		return -1;
	uint8_t version = (uint8_t)rd_bytes(&r, 1);
	const char *aug = (const char *)r.p;
	const uint8_t *nul = memchr(r.p, 0, (size_t)(r.end - r.p));
	if (!nul)
		return -1;
	r.p = nul + 1;
	if (aug[0] == 'e' && aug[1] == 'h')
		rd_bytes(&r, 8);
	rd_uleb(&r);                        /* code alignment */
	rd_sleb(&r);                        /* data alignment */
	if (version == 1)
		rd_bytes(&r, 1);            /* return address register */
	else
		rd_uleb(&r);
	int enc = 0x00;                     /* absptr unless 'R' says otherwise */
	if (aug[0] == 'z') {
		rd_uleb(&r);                /* augmentation data length */
		for (const char *a = aug + 1; *a && !r.bad; a++) {
			if (*a == 'R') {
				enc = (int)rd_bytes(&r, 1);
			} else if (*a == 'P') {
				uint8_t penc = (uint8_t)rd_bytes(&r, 1);
				rd_enc(&r, penc & 0x0f, sec, base, 0);
			} else if (*a == 'L') {
				rd_bytes(&r, 1);
			} else if (*a != 'S' && *a != 'B' && *a != 'G') {
				break;              /* unknown: 'R' is usually first anyway */
			}
		}
	}
	return r.bad ? -1 : enc;
}

int btr__eh_frame_fdes(const uint8_t *data, size_t size, uint64_t addr,
		       int (*cb)(void *ctx, uint64_t start, uint64_t end), void *ctx)
{
	const uint8_t *end = data + size;
	const uint8_t *last_cie = NULL;
	int last_enc = -1;
	struct rd r = { data, end, 0 };
	while (r.p + 4 <= end) {
		const uint8_t *entry = r.p;
		uint64_t len = rd_bytes(&r, 4);
		if (len == 0)
			break;                      /* terminator */
		if (len == 0xffffffffu)
			len = rd_bytes(&r, 8);
		if (r.bad || len < 4 || len > (uint64_t)(end - r.p))
			break;
		const uint8_t *next = r.p + len;
		const uint8_t *idp = r.p;
		uint32_t id = (uint32_t)rd_bytes(&r, 4);
		if (id != 0) {                      /* an FDE */
			if ((uint64_t)(idp - data) < id)
				break;
			const uint8_t *cie = idp - id;
			if (cie != last_cie) {
				last_cie = cie;
				last_enc = cie_encoding(cie, end, data, addr);
			}
			if (last_enc < 0 || last_enc == PE_OMIT) {
				r.p = next;
				continue;
			}
			struct rd f = { r.p, next, 0 };
			uint64_t start = rd_enc(&f, (uint8_t)last_enc, data, addr, 1);
			uint64_t range = rd_enc(&f, (uint8_t)(last_enc & 0x0f), data, addr, 0);
			if (!f.bad && start && range && start + range > start) {
				int rc = cb(ctx, start, start + range);
				if (rc)
					return rc;
			}
		}
		(void)entry;
		r.p = next;
	}
	return 0;
}
