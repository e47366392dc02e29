/* dwarf_read.c - attribute forms and the CUs' DW_AT_comp_dir (see
 * dwarf_read.h), read within bounds: damaged bytes end a unit, never a
 * read past a section. */
#include "dwarf_read.h"
#include "btr/error.h"

#include <dwarf.h>

/* ---- forms ------------------------------------------------------------ */

int btr__dwarf_form(struct cur *c, unsigned form, unsigned offsz, unsigned addrsz,
		    const struct btr_dwline_secs *s, int line_strs, const char **str, uint64_t *u,
		    int depth)
{
	uint64_t v = 0, n;
	*str = NULL;
	*u = 0;
	switch (form) {
	case DW_FORM_string: {
		const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
		if (!z)
			return FORM_BAD;
		*str = (const char *)c->p;
		c->p = z + 1;
		return 0;
	}
	case DW_FORM_strp:
	case DW_FORM_line_strp:
		if (fixed(c, offsz, &v))
			return FORM_BAD;
		*u = v;
		*str = form == DW_FORM_strp ? str_at(s->str, s->str_len, v)
					    : str_at(s->line_str, s->line_str_len, v);
		return *str || !line_strs ? 0 : FORM_BAD;
	case DW_FORM_GNU_strp_alt:
	case DW_FORM_strp_sup:
		if (fixed(c, offsz, &v))
			return FORM_BAD;
		return line_strs ? FORM_ALT : 0;
	case DW_FORM_sec_offset:
	case DW_FORM_ref_addr:
	case DW_FORM_GNU_ref_alt:
		if (fixed(c, offsz, &v))
			return FORM_BAD;
		*u = v;
		return 0;
	case DW_FORM_addr:
		if (fixed(c, addrsz, &v))
			return FORM_BAD;
		*u = v;
		return 0;
	case DW_FORM_data1: case DW_FORM_ref1: case DW_FORM_flag: case DW_FORM_strx1:
	case DW_FORM_addrx1:
		n = 1;
		goto fix;
	case DW_FORM_data2: case DW_FORM_ref2: case DW_FORM_strx2: case DW_FORM_addrx2:
		n = 2;
		goto fix;
	case DW_FORM_strx3: case DW_FORM_addrx3:
		n = 3;
		goto fix;
	case DW_FORM_data4: case DW_FORM_ref4: case DW_FORM_strx4: case DW_FORM_addrx4:
	case DW_FORM_ref_sup4:
		n = 4;
		goto fix;
	case DW_FORM_data8: case DW_FORM_ref8: case DW_FORM_ref_sig8: case DW_FORM_ref_sup8:
		n = 8;
	fix:
		if (fixed(c, (unsigned)n, &v))
			return FORM_BAD;
		*u = v;
		return 0;
	case DW_FORM_data16:
		if ((size_t)(c->end - c->p) < 16)
			return FORM_BAD;
		c->p += 16;
		return 0;
	case DW_FORM_udata: case DW_FORM_ref_udata: case DW_FORM_strx: case DW_FORM_addrx:
	case DW_FORM_loclistx: case DW_FORM_rnglistx: case DW_FORM_GNU_addr_index:
	case DW_FORM_GNU_str_index:
		if (c->p >= c->end)
			return FORM_BAD;
		*u = uleb(c);
		return 0;
	case DW_FORM_sdata:
		if (c->p >= c->end)
			return FORM_BAD;
		*u = (uint64_t)sleb(c);
		return 0;
	case DW_FORM_flag_present:
	case DW_FORM_implicit_const:
		return 0;
	case DW_FORM_block1: n = 1; goto blk;
	case DW_FORM_block2: n = 2; goto blk;
	case DW_FORM_block4: n = 4;
	blk:
		if (fixed(c, (unsigned)n, &v))
			return FORM_BAD;
		goto skip;
	case DW_FORM_block:
	case DW_FORM_exprloc:
		if (c->p >= c->end)
			return FORM_BAD;
		v = uleb(c);
	skip:
		if (v > (uint64_t)(c->end - c->p))
			return FORM_BAD;
		c->p += v;
		return 0;
	case DW_FORM_indirect:
		if (c->p >= c->end || depth > 2)
			return FORM_BAD;
		return btr__dwarf_form(c, (unsigned)uleb(c), offsz, addrsz, s, line_strs, str, u, depth + 1);
	default:
		return FORM_BAD;
	}
}

/* ---- DW_AT_comp_dir of DWARF 2-4 line tables ------------------------ */

/* The attribute specs of abbreviation @code in the table at @off. */
static int find_abbrev(const struct btr_dwline_secs *s, uint64_t off, uint64_t code, struct cur *out)
{
	if (!s->abbrev || off >= s->abbrev_len)
		return -1;
	struct cur c = { s->abbrev + off, s->abbrev + s->abbrev_len };
	while (c.p < c.end) {
		uint64_t k = uleb(&c);
		if (!k)
			return -1;
		uleb(&c);              /* tag */
		if (c.p >= c.end)
			return -1;
		c.p++;                 /* children */
		if (k == code) {
			*out = c;
			return 0;
		}
		for (;;) {
			if (c.p >= c.end)
				return -1;
			uint64_t at = uleb(&c), form = uleb(&c);
			if (form == DW_FORM_implicit_const)
				sleb(&c);
			if (!at && !form)
				break;
		}
	}
	return -1;
}

void btr__dwarf_comp_dirs(const struct btr_dwline_secs *s,
			  void (*cb)(void *ctx, uint64_t stmt_list, const char *comp_dir), void *ctx)
{
	if (!s->info)
		return;
	struct cur c = { s->info, s->info + s->info_len };
	while (c.end - c.p >= 4) {
		uint64_t ulen, v;
		unsigned offsz = 4;
		fixed(&c, 4, &ulen);
		if (ulen == 0xffffffff) {
			if (fixed(&c, 8, &ulen))
				return;
			offsz = 8;
		} else if (ulen >= 0xfffffff0) {
			return;
		}
		if (ulen > (uint64_t)(c.end - c.p))
			return;
		struct cur u = { c.p, c.p + ulen };
		c.p += ulen;
		if (fixed(&u, 2, &v))
			continue;
		unsigned version = (unsigned)v, utype = DW_UT_compile, asz;
		uint64_t aoff;
		if (version < 2 || version > 5)
			continue;
		if (version >= 5) {
			if (u.end - u.p < 2)
				continue;
			utype = u.p[0];
			asz = u.p[1];
			u.p += 2;
			if (fixed(&u, offsz, &aoff))
				continue;
			if (utype == DW_UT_skeleton || utype == DW_UT_split_compile)
				u.p += u.end - u.p >= 8 ? 8 : 0;
		} else {
			if (fixed(&u, offsz, &aoff) || u.p >= u.end)
				continue;
			asz = *u.p++;
		}
		if ((utype != DW_UT_compile && utype != DW_UT_partial) || u.p >= u.end)
			continue;
		struct cur a;
		if (find_abbrev(s, aoff, uleb(&u), &a))
			continue;
		const char *dir = NULL;
		uint64_t stmt = UINT64_MAX;
		while (a.p < a.end) {
			uint64_t at = uleb(&a), form = uleb(&a);
			if (form == DW_FORM_implicit_const)
				sleb(&a);
			if (!at && !form)
				break;
			const char *sv;
			uint64_t uv;
			if (btr__dwarf_form(&u, (unsigned)form, offsz, asz, s, 0, &sv, &uv, 0))
				break;
			if (at == DW_AT_comp_dir)
				dir = sv;
			else if (at == DW_AT_stmt_list)
				stmt = uv;
		}
		if (stmt == UINT64_MAX || !dir)
			continue;
		cb(ctx, stmt, dir);
	}
}
