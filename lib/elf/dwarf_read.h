/* dwarf_read.h - bounded reading of DWARF bytes (lib/elf/dwarf_read.c):
 * numbers, attribute forms, and the DW_AT_comp_dir of each CU.  Not a
 * public header; below lib/elf/dwarf_line.c, which reads line programs with
 * it. */
#ifndef BTR_DWARF_READ_H
#define BTR_DWARF_READ_H
#include "dwarf_line.h"
#include "internal.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- bounded reading ------------------------------------------------ */

struct cur {
	const uint8_t *p, *end;
};

/* LEB128 numbers: a truncated one is the value of its bytes, as libdw
 * reads it (the bounds are checked where libdw checks them) */
static inline uint64_t uleb(struct cur *c)
{
	int done;
	return btr__uleb128(&c->p, c->end, &done);
}

static inline int64_t sleb(struct cur *c)
{
	int done;
	return btr__sleb128(&c->p, c->end, &done);
}

static inline uint64_t rd(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = n; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* Reads @n (1..8) bytes little-endian; 0 when they are not there. */
static inline int fixed(struct cur *c, unsigned n, uint64_t *v)
{
	if ((size_t)(c->end - c->p) < n)
		return -1;
	*v = rd(c->p, n);
	c->p += n;
	return 0;
}

/* A NUL-terminated string at @off of a string section, or NULL. */
static inline const char *str_at(const uint8_t *sec, size_t len, uint64_t off)
{
	if (!sec || off >= len || !memchr(sec + off, 0, len - off))
		return NULL;
	return (const char *)sec + off;
}

/* ---- forms ------------------------------------------------------------ */

enum { FORM_BAD = -1, FORM_ALT = -2 };

/* The value of attribute form @form at @c (advanced past it): *@str for
 * string forms (NULL when unresolvable; @line_strs: a string that cannot
 * be resolved is FORM_BAD), *@u for constants and offsets.  Returns 0,
 * FORM_BAD (unknown form, truncated), FORM_ALT (a string in a dwz alt
 * file).  @depth: 0 (DW_FORM_indirect nests). */
int btr__dwarf_form(struct cur *c, unsigned form, unsigned offsz, unsigned addrsz,
		    const struct btr_dwline_secs *s, int line_strs, const char **str, uint64_t *u,
		    int depth);

/* Calls @cb for every compile or partial unit of @s->info that names a
 * line program (DW_AT_stmt_list) and its compilation directory
 * (DW_AT_comp_dir): what libdw passes to read_srclines.  Reads .debug_info
 * and .debug_abbrev of @s; stops at the first unit it cannot read. */
void btr__dwarf_comp_dirs(const struct btr_dwline_secs *s,
			  void (*cb)(void *ctx, uint64_t stmt_list, const char *comp_dir), void *ctx);

#endif
