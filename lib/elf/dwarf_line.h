/* dwarf_line.h - DWARF line tables read from .debug_line alone
 * (lib/elf/dwarf_line.c).  Not a public header.
 *
 * The table of a module file answers the line queries that libdw's
 * dwfl_module_getsrc / dwarf_getsrclines would answer, with the same rows
 * and the same file names, but reads only .debug_line and the string
 * sections its file names use (and, for DWARF 2-4 line tables, the CU DIEs
 * of .debug_info for DW_AT_comp_dir), so that a line query does not inflate
 * every compressed .debug_* section of a separate debug file. */
#ifndef BTR_DWARF_LINE_H
#define BTR_DWARF_LINE_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

struct btr_dwline;

/* The sections a table is built from (bytes, uncompressed).  Only @line
 * is required; @info/@abbrev are read only to find DW_AT_comp_dir for line
 * tables of DWARF 2-4.  @addr_size: 8 (ELFCLASS64) or 4. */
struct btr_dwline_secs {
	const uint8_t *line, *line_str, *str, *info, *abbrev;
	size_t line_len, line_str_len, str_len, info_len, abbrev_len;
	unsigned addr_size;
};

/* Builds every row now (and sorts them all); without it, a table whose
 * sequences lie apart (as compilers and linkers make them) only indexes
 * its sequences, and decodes a sequence's rows at the first lookup in it:
 * the answers are the same (tests/test_dwarf_line.c compares both with
 * libdw), the cost of a table of libc drops from all of its 291,000 rows
 * to those of the functions asked about. */
#define BTR_DWLINE_FULL 1u

/* Builds the table of @s (the bytes must outlive the table).  Returns 0
 * and *@out, -BTR_ERR_NO_DEBUGINFO (no rows at all), -BTR_ERR_UNSUPPORTED
 * (file names in a dwz alt file: DW_FORM_GNU_strp_alt, DW_FORM_strp_sup),
 * -BTR_ERR_NOMEM.  Malformed line programs are skipped (as libdw fails
 * the CU), never read out of bounds. */
int btr__dwline_build(const struct btr_dwline_secs *s, unsigned flags, struct btr_dwline **out);

/* Builds the table of the ELF file @elf: decompresses (SHF_COMPRESSED,
 * zlib or zstd) only the sections it reads.  Takes @elf over (elf_end
 * at btr__dwline_free, or on error).  Errors as btr__dwline_build, and
 * -BTR_ERR_NO_DEBUGINFO when @elf has no .debug_line, -BTR_ERR_COMPRESS. */
int btr__dwline_from_elf(Elf *elf, unsigned flags, struct btr_dwline **out);

void btr__dwline_free(struct btr_dwline *t);

/* The row for link address @addr: the row of greatest address <= @addr
 * (the last of several at one address), as dwfl_module_getsrc picks it.
 * Returns 0 and *@file (full path, valid as long as the table) and
 * *@line; -BTR_ERR_NOT_FOUND in a gap, at an end of sequence, for a line
 * <= 0 or a file index out of range; -BTR_ERR_NOMEM (the joined path). */
int btr__dwline_find(struct btr_dwline *t, uint64_t addr, const char **file, int *line);

/* Calls @cb for every row with an address in [@lo, @hi) that is no end of
 * sequence, has a line > 0 and a file, in libdw's order: line program
 * order (CU order), then each program's rows sorted by address.  Stops at
 * the first nonzero return of @cb and returns it; -BTR_ERR_NOMEM (before
 * any call of @cb). */
int btr__dwline_foreach(struct btr_dwline *t, uint64_t lo, uint64_t hi,
			int (*cb)(void *ctx, uint64_t addr, const char *file, int line), void *ctx);

/* Whether @t indexes its sequences only (built without BTR_DWLINE_FULL,
 * its sequences apart). */
int btr__dwline_lazy(const struct btr_dwline *t);
/* The number of rows (end-of-sequence rows included) of a table built with
 * BTR_DWLINE_FULL (of a lazy one: 0). */
size_t btr__dwline_rows(const struct btr_dwline *t);

/* Row @i in address order: its address, and whether it ends a sequence. */
uint64_t btr__dwline_row_addr(const struct btr_dwline *t, size_t i, int *end_seq);

#endif
