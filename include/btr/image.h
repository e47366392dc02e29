/* btr/image.h - memory images of traced programs, symbols and source lines.
 *
 * An image is a set of non-overlapping sections: ELF PT_LOAD segments of
 * executables and shared objects placed at a load base, or raw byte files
 * at an address.  Decoders read code through it; reports name addresses
 * with it (function+offset, file:line through elfutils libdwfl).
 */
#ifndef BTR_IMAGE_H
#define BTR_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct btr_image;

/* Creates an empty image.  Returns 0 and stores the handle in *@out, or
 * -BTR_ERR_NOMEM.  Free with btr_image_free(). */
int btr_image_new(struct btr_image **out);
void btr_image_free(struct btr_image *img);

/* Adds the loadable segments of ELF file @path.  For ET_DYN (PIE, shared
 * objects) @base is added to every segment's vaddr (the load bias); for
 * ET_EXEC @base must be 0 or equal to the first PT_LOAD's vaddr rounded
 * down to a page and is otherwise ignored.  Only executable segments are
 * added unless @all_segments is set.  Returns 0, -BTR_ERR_NOENT,
 * -BTR_ERR_PERM, -BTR_ERR_BAD_ELF, -BTR_ERR_NOMEM.  Symbols are loaded
 * lazily at the first lookup. */
int btr_image_add_elf(struct btr_image *img, const char *path, uint64_t base, int all_segments);

/* Adds bytes [@offset, @offset+@size) of file @path at address @addr
 * (@size 0: to end of file).  Returns 0 or a negative error. */
int btr_image_add_file(struct btr_image *img, const char *path, uint64_t offset,
		       uint64_t size, uint64_t addr);

/* Adds a copy of @size bytes at @addr (the image owns the copy). */
int btr_image_add_bytes(struct btr_image *img, const void *bytes, size_t size, uint64_t addr);

/* Reads up to @size bytes of code at @addr into @buf.  Stops at the end of
 * the section that holds @addr.  Returns the number of bytes read (> 0),
 * or -BTR_ERR_NOMAP if no section holds @addr. */
int btr_image_read(const struct btr_image *img, uint64_t addr, void *buf, size_t size);

/* Zero-copy access: on success stores a pointer to the bytes at @addr in
 * *@ptr and the number of contiguous bytes available in *@avail; returns
 * 0 or -BTR_ERR_NOMAP.  The pointer stays valid until the image is freed
 * or changed. */
int btr_image_map(const struct btr_image *img, uint64_t addr, const uint8_t **ptr, size_t *avail);

/* Returns the number of successful additions (sections may be several per
 * ELF); a generation number that changes whenever the image changes. */
unsigned btr_image_generation(const struct btr_image *img);

struct btr_symbol {
	const char *name;    /* function name (owned by the image) */
	uint64_t addr;       /* start address (load base applied) */
	uint64_t size;
	const char *module;  /* file path of the module (owned by the image) */
};

/* Finds the function symbol containing @addr (the nearest preceding
 * function symbol within the same module if sizes are missing).  Returns
 * 0 and fills @sym, or -BTR_ERR_NOT_FOUND. */
int btr_image_symbol(struct btr_image *img, uint64_t addr, struct btr_symbol *sym);

/* Formats @addr as "name+0xoff" (or "name" at offset 0, or "module+0xoff"
 * without a symbol, or "0x..." outside every module) into @buf. */
void btr_image_symbolize(struct btr_image *img, uint64_t addr, char *buf, size_t bufsize);

/* Source line of @addr through DWARF.  On success stores a pointer to the
 * file name (owned by the image) in *@file and the line in *@line, and
 * returns 0; -BTR_ERR_NO_DEBUGINFO, -BTR_ERR_NOT_FOUND otherwise. */
int btr_image_line(struct btr_image *img, uint64_t addr, const char **file, int *line);

/* Reads the GNU build-id of ELF file @path into @buf (at most @size
 * bytes).  Returns its length, -BTR_ERR_NOT_FOUND if the file has none,
 * or another negative error. */
int btr_elf_build_id(const char *path, uint8_t *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
