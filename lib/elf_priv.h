/* elf_priv.h - ELF helpers shared inside lib/ (lib/elf_file.c). */
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

#endif
