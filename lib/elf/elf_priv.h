/* elf_priv.h - ELF helpers shared inside lib/ (lib/elf/elf_file.c). */
#ifndef BTR_ELF_PRIV_H
#define BTR_ELF_PRIV_H

#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

/* Opens @path as an ELF file read through libelf's own mapping (the
 * descriptor is closed before returning).  Returns 0 and *@out (free with
 * elf_end), or a negative btr_error (-BTR_ERR_NOENT, -BTR_ERR_BAD_ELF, ...). */
int btr__elf_open(const char *path, Elf **out);

/* The GNU build-id of @elf into @buf (up to @size bytes).  Returns its
 * length, or -BTR_ERR_NOT_FOUND / -BTR_ERR_BAD_ELF. */
int btr__elf_build_id(Elf *elf, uint8_t *buf, size_t size);

/* The section of @elf named @want (its header into *@out), or NULL. */
Elf_Scn *btr__elf_find_scn(Elf *elf, const char *want, GElf_Shdr *out);

/* Whether @elf has a section libdw's dwarf_begin_elf takes for DWARF
 * (.debug_info, .debug_line, .debug_frame; also compressed as .zdebug_*,
 * split as *.dwo or LTO's .gnu.debuglto_*), empty or not. */
int btr__elf_has_dwarf(Elf *elf);

/* The separate debug file of ELF file @path (open as @elf) named by its
 * .gnu_debuglink, searched as elfutils' dwfl_standard_find_debuginfo
 * searches by name (libdwfl/find-debuginfo.c): the entries of @dwfl_path,
 * a libdwfl debuginfo_path (NULL: its default ":.debug:/usr/lib/debug"),
 * in order; then the same for the file's realpath if that differs.  A
 * candidate is valid if its build-id equals @elf's, or, when @elf has
 * none, if its CRC32 is the debuglink's.  Without .gnu_debuglink the name
 * is "<basename>.debug" (and the basename, in non-empty entries), as
 * libdwfl invents it.  Returns 0 and the file's name in @out,
 * -BTR_ERR_NOT_FOUND, -BTR_ERR_INVAL (@out too small), or the error that
 * ended the search (a candidate that could not be opened for another
 * reason than its absence, as libdwfl ends it; -BTR_ERR_NOMEM). */
int btr__elf_find_debuglink(Elf *elf, const char *path, const char *dwfl_path, char *out,
			    size_t outsize);

/* As btr_elf_load_bias_prot, but an ET_EXEC mapped where none of its
 * PT_LOAD segments lies (node maps a copy of its embedded builtins at
 * 0x7f...) gets the bias of that copy, start - (p_vaddr - p_offset +
 * pgoff), instead of 0: the copy's code is the file's code at link address
 * (addr - bias).  Returns as btr_elf_load_bias_prot. */
int btr__elf_copy_bias(const char *path, uint64_t start, uint64_t pgoff, int prot, uint64_t *bias);

/* The rule btr_elf_load_bias_prot applies to a mapping of @path's file
 * offset @pgoff (protection @prot, -1 unknown), whatever its start: *@fixed
 * 1 if the bias is 0 (ET_EXEC), else it is start - *@k.  Returns as
 * btr_elf_load_bias_prot.  For callers that place one file many times. */
int btr__elf_bias_rule(const char *path, uint64_t pgoff, int prot, int *fixed, uint64_t *k);

/* The link addresses [*@lo, *@hi] of the code at file offsets [@off,
 * @off + @size) of @path (an --ip-filter range, BTR_REC_IP_FILTER).
 * Returns 0 or as btr__elf_bias_rule. */
int btr__elf_offsets_link(const char *path, uint64_t off, uint64_t size, uint64_t *lo, uint64_t *hi);

/* One GOT slot with a dynamic relocation (btr__elf_got_slots). */
struct btr__elf_got {
	uint64_t slot;          /* the slot's link-time address (r_offset) */
	int irelative;          /* R_X86_64_IRELATIVE: @addend is the IFUNC resolver, no @name */
	uint64_t addend;
	const char *name;       /* JUMP_SLOT / GLOB_DAT: the symbol (libelf's string, non-empty) */
	int defined;            /* the symbol is defined in the file (st_shndx != SHN_UNDEF) */
	int typed;              /* STT_FUNC or STT_GNU_IFUNC (else STT_NOTYPE) */
};
/* Calls @fn for each GOT slot of @elf's SHT_RELA sections that holds a
 * function address: IRELATIVE slots (which need no symbol table: static
 * binaries have none) and JUMP_SLOT / GLOB_DAT relocations of a function
 * (STT_FUNC, STT_GNU_IFUNC) or untyped (STT_NOTYPE) symbol of .dynsym.
 * The one reader of GOT slots: the image's PLT names and check's GOT
 * model.  Stops at @fn's first nonzero return and returns it; else 0. */
int btr__elf_got_slots(Elf *elf, int (*fn)(void *ctx, const struct btr__elf_got *g), void *ctx);

#endif
