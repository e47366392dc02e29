/* btr/image.h - memory images of traced programs, symbols and source lines.
 *
 * An image is a set of non-overlapping sections: ELF PT_LOAD segments of
 * executables and shared objects placed at a load base, or raw byte files
 * at an address.  Decoders read code through it; reports name addresses
 * with it (function+offset, file:line through elfutils libdwfl).
 *
 * Images share ELF files: every image that adds the same file (same path,
 * device, inode, size and modification time, same debug directories)
 * refers to one open copy with one symbol table and one DWARF reader,
 * whatever the load bias; the last image to drop it frees it.  A trace of
 * a thousand processes that all map libc holds libc once.
 */
#ifndef BTR_IMAGE_H
#define BTR_IMAGE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

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
 * (@size 0: to end of file), mapped read-only, not copied.  Returns 0,
 * -BTR_ERR_NOENT, -BTR_ERR_PERM, -BTR_ERR_INVAL (not a regular file, the
 * range is beyond the file's end or wraps), -BTR_ERR_NOMEM, -BTR_ERR_IO. */
int btr_image_add_file(struct btr_image *img, const char *path, uint64_t offset,
		       uint64_t size, uint64_t addr);

/* Adds a copy of @size bytes at @addr (the image owns the copy; @bytes
 * stays the caller's).  Returns 0, -BTR_ERR_INVAL (@size 0, the range
 * wraps) or -BTR_ERR_NOMEM. */
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

/* Returns the number of successful changes (additions and removals;
 * sections may be several per ELF): a generation number that changes
 * whenever the image changes. */
unsigned btr_image_generation(const struct btr_image *img);

struct btr_symbol {
	const char *name;    /* function name (owned by the image) */
	uint64_t addr;       /* start address (load base applied) */
	uint64_t size;
	const char *module;  /* file path of the module (owned by the image) */
};

/* Finds the function symbol containing @addr (the nearest preceding
 * function symbol within the same module if sizes are missing).  Returns
 * 0 and fills @sym, or -BTR_ERR_NOT_FOUND.  Symbols come from .symtab and
 * .dynsym (STT_FUNC, STT_GNU_IFUNC, names not demangled) plus synthetic
 * "name@plt" entries for PLT stubs; a symbol of size 0 reports the extent
 * up to the next symbol or the end of its section in @sym->size. */
int btr_image_symbol(struct btr_image *img, uint64_t addr, struct btr_symbol *sym);

/* Finds the function symbol named @name (exact match, the first module
 * added that has it; "name@plt" names the PLT stub).  Returns 0 and fills
 * @sym (strings owned by the image), -BTR_ERR_NOT_FOUND, -BTR_ERR_INVAL. */
int btr_image_lookup(struct btr_image *img, const char *name, struct btr_symbol *sym);

/* Formats @addr as "name+0xoff" (or "name" at offset 0, or "module+0xoff"
 * without a symbol, or "0x..." outside every module) into @buf,
 * truncated to @bufsize.  "module" is the file's base name and the offset
 * is relative to its link addresses (file offset for raw files).  C++
 * names are demangled (btr_image_symbol keeps linkage names). */
void btr_image_symbolize(struct btr_image *img, uint64_t addr, char *buf, size_t bufsize);

/* Source line of @addr through DWARF.  On success stores a pointer to the
 * file name (owned by the image) in *@file and the line in *@line, and
 * returns 0; -BTR_ERR_NO_DEBUGINFO, -BTR_ERR_NOT_FOUND otherwise. */
int btr_image_line(struct btr_image *img, uint64_t addr, const char **file, int *line);

/* Reads the GNU build-id of ELF file @path into @buf (at most @size
 * bytes, caller-owned; NULL with @size 0 to ask for the length).  Returns
 * its full length (which may exceed @size: then only @size bytes were
 * copied), -BTR_ERR_NOT_FOUND if the file has none, or -BTR_ERR_NOENT,
 * -BTR_ERR_PERM, -BTR_ERR_BAD_ELF. */
int btr_elf_build_id(const char *path, uint8_t *buf, size_t size);

/* ---- additions (engineer "image") ----
 *
 * Overlap rule: every addition (add_elf, add_file, add_bytes) replaces
 * whatever the image held at the addresses it covers; older sections are
 * trimmed or split, so the newest addition wins for the overlapped range
 * and older bytes stay visible elsewhere.
 *
 * Threads: btr_image_map/btr_image_read/btr_image_generation may be called
 * from several threads at once on an image nobody changes; the other
 * functions need exclusive access (symbols and DWARF load lazily). */

/* Removes every byte in [@addr, @addr+@size) from the image (a module
 * unload, munmap).  Symbols of an ELF module whose address range is
 * removed completely are dropped too.  Returns the number of bytes that
 * were mapped and are now gone (0 if none), or -BTR_ERR_INVAL (@size 0 or
 * the range wraps). */
int64_t btr_image_remove(struct btr_image *img, uint64_t addr, uint64_t size);

/* Directories with separate debug files (DIR/.build-id/xx/rest.debug, as
 * installed by Debian's -dbg packages; for lines also the file named by
 * .gnu_debuglink, as DIR/<the file's directory>/NAME), copied.  They supply .symtab for
 * stripped modules (which only have .dynsym) and DWARF for lines; @ndirs 0
 * restores the default, /usr/lib/debug.  Affects the modules added after
 * the call (set it right after btr_image_new).  Returns 0, -BTR_ERR_INVAL
 * or -BTR_ERR_NOMEM. */
int btr_image_set_debug_dirs(struct btr_image *img, const char *const *dirs, size_t ndirs);

/* Load bias of ELF file @path mapped at @start from file offset @pgoff (a
 * perf MMAP record, a /proc/PID/maps line): start - (p_vaddr - p_offset +
 * pgoff) of the PT_LOAD segment that contains file offset @pgoff.  The
 * result is the @base to pass to btr_image_add_elf (0 for ET_EXEC).
 * Two segments can share a file page (text and data of -z noseparate-code
 * binaries, .rodata and RELRO data); this form prefers an executable
 * segment then, btr_elf_load_bias_prot() decides by the protection.
 * Returns 0 and stores the bias in *@bias, -BTR_ERR_NOT_FOUND if no
 * PT_LOAD holds @pgoff, -BTR_ERR_NOENT, -BTR_ERR_PERM, -BTR_ERR_BAD_ELF.
 * (Stable signature: lib/stream/stream.c uses it.) */
int btr_elf_load_bias(const char *path, uint64_t start, uint64_t pgoff, uint64_t *bias);

/* Same, with @prot (PROT_* bits of the mapping, -1 if unknown) picking the
 * segment whose PF_X/PF_W flags match among those sharing the file page.
 * Note that /proc/PID/maps shows the RELRO part of the data segment as
 * r--p while perf MMAP records carry the mmap-time rw-. */
int btr_elf_load_bias_prot(const char *path, uint64_t start, uint64_t pgoff, int prot,
			   uint64_t *bias);

/* Finds a file whose GNU build-id is @id (@len bytes).  For every
 * directory D of @dirs (@ndirs entries; NULL/0 means {"/usr/lib/debug"})
 * in order it tries D/.build-id/xx/rest.debug, D/.build-id/xx/rest
 * (xx = first byte in hex, rest = the others), then every regular file
 * directly in D (not recursive).  Note that .debug files from
 * /usr/lib/debug hold DWARF and symbols but no code.  Returns 0 and writes
 * the NUL-terminated path into @path (@pathsize bytes, caller-owned),
 * -BTR_ERR_NOT_FOUND, -BTR_ERR_INVAL (@len 0, or the path does not fit). */
int btr_elf_find_build_id(const uint8_t *id, size_t len, const char *const *dirs, size_t ndirs,
			  char *path, size_t pathsize);


/* ---- functions, modules, line tables (engineer "views") ----
 *
 * Every lookup above names code only where a symbol does.  The views,
 * profiles and checks need a function for every address of a module,
 * stripped or not, so the image also delimits functions that have no
 * symbol by their .eh_frame FDEs (the unwind table, which stripping keeps)
 * and names them "module+0xOFF" (OFF: the link address of the function's
 * start, the form btr_image_symbolize prints, stable across runs of a
 * PIE).  C++ names are demangled for display; linkage names stay
 * available.  Addresses are run-time addresses (load bias applied). */

enum btr_func_source {
	BTR_FUNC_SYMBOL = 1,  /* a .symtab or .dynsym STT_FUNC/IFUNC symbol */
	BTR_FUNC_PLT = 2,     /* a synthetic "name@plt" stub */
	BTR_FUNC_FDE = 3,     /* no symbol: delimited by an .eh_frame FDE */
};

struct btr_function {
	const char *name;        /* display name: demangled C++ ("ns::f(int)"),
				  * the symbol's name, or "module+0xOFF" for
				  * FDE functions (owned by the image) */
	const char *raw_name;    /* linkage name ("_ZN2ns1fEi"); = name for
				  * FDE functions (owned by the image) */
	uint64_t start, end;     /* [start, end), run-time addresses */
	const char *module;      /* module file path (owned by the image) */
	const char *module_name; /* its base name (owned by the image) */
	uint64_t bias;           /* the module's load bias: start - bias is the
				  * link address */
	int source;              /* enum btr_func_source */
};

/* The function containing @addr: the symbol btr_image_symbol would find,
 * else the FDE range containing @addr in a module without a symbol there.
 * Returns 0 and fills @fn (strings valid until the image is freed or the
 * module removed), -BTR_ERR_NOT_FOUND (outside every module, or a module
 * with neither symbol nor FDE there), -BTR_ERR_INVAL.  Legitimate
 * indirect-call targets: fn.start == target for every source kind. */
int btr_image_function(struct btr_image *img, uint64_t addr, struct btr_function *fn);

/* The first function, in module load order, whose linkage name (also
 * without a symbol version: "__libc_start_main" for
 * "__libc_start_main@@GLIBC_2.34", as the stack views name it; not without
 * "@plt"), demangled name, or demangled name without its parameter list
 * equals @name; or
 * "module+0xOFF" (the function containing that link address of module
 * base name "module").  Returns 0, -BTR_ERR_NOT_FOUND, -BTR_ERR_INVAL,
 * -BTR_ERR_NOMEM (not found, and a module's symbols could not be loaded
 * for lack of memory). */
int btr_image_function_by_name(struct btr_image *img, const char *name, struct btr_function *fn);

/* Calls @cb for every function (symbols, PLT stubs, FDE functions) that
 * starts in [@lo, @hi), module by module in address order.  Stops when @cb
 * returns nonzero and returns that value; 0 after all, -BTR_ERR_INVAL. */
int btr_image_foreach_function(struct btr_image *img, uint64_t lo, uint64_t hi,
			       int (*cb)(void *ctx, const struct btr_function *fn), void *ctx);

struct btr_image_module {
	const char *path;   /* file path (owned by the image) */
	const char *name;   /* base name (owned by the image) */
	uint64_t bias;      /* load bias (0 for ET_EXEC and raw files) */
	uint64_t start, end;/* run-time range of all its PT_LOAD segments */
	int is_elf;         /* 0: a raw file or bytes */
};

/* The module (ELF or raw file added with a path) whose range holds @addr.
 * Returns 0 and fills @mi, -BTR_ERR_NOT_FOUND, -BTR_ERR_INVAL. */
int btr_image_module_at(struct btr_image *img, uint64_t addr, struct btr_image_module *mi);

/* Calls @cb(ctx, addr, file, line) for every row of the DWARF line tables
 * of the module containing @lo whose address is in [@lo, @hi) (rows in
 * table order, which is address order within a sequence; end-of-sequence
 * rows left out; @file owned by the image).  Lines that generated code,
 * so the denominator of line coverage.  Returns 0, @cb's nonzero value,
 * -BTR_ERR_NOT_FOUND (no module at @lo), -BTR_ERR_NO_DEBUGINFO,
 * -BTR_ERR_INVAL. */
int btr_image_foreach_line(struct btr_image *img, uint64_t lo, uint64_t hi,
			   int (*cb)(void *ctx, uint64_t addr, const char *file, int line), void *ctx);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
