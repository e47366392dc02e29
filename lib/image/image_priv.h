/* image_priv.h - the inside of struct btr_image (lib/image/image.c), for the
 * files that extend it (lib/image/image_code.c).  Not a public header. */
#ifndef BTR_IMAGE_PRIV_H
#define BTR_IMAGE_PRIV_H

#include <elfutils/libdwfl.h>
#include <libelf.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define NO_MODULE UINT32_MAX

struct section {
	uint64_t start, end;   /* [start, end) */
	const uint8_t *data;   /* bytes of start */
	uint32_t module;       /* index into img->mods, or NO_MODULE */
};

struct sym {
	uint64_t addr, end;    /* end: addr+size, or the computed extent */
	uint64_t size;         /* as reported (the extent for size-0 symbols) */
	uint64_t maxend;       /* max(end) over syms[0..i]: bounds the backward walk */
	const char *name;
	char *dname;           /* demangled name (lazily, malloc'ed), or NULL */
	uint8_t rank;          /* dedup preference among aliases, lower wins; SYM_RANK_NOTYPE: an untyped label */
	uint8_t fde;           /* no symbol: a function delimited by an .eh_frame FDE */
	uint8_t dname_done;    /* dname was computed (NULL: same as name) */
};

enum { LAZY_NONE = 0, LAZY_OK = 1, LAZY_FAIL = -1 };

enum { SYM_RANK_NOTYPE = 16 };   /* below every typed symbol, above FDE functions (32) */

/* An ELF file, shared by the images that map it (see the file comment).
 * Addresses in it are link addresses. */
struct modfile {
	struct modfile *next;  /* the cache list */
	unsigned refs;
	dev_t dev;             /* identity */
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char *path;
	const char *base_name; /* points into path */
	uint64_t lo, hi;       /* link range of all PT_LOADs */
	Elf *elf;
	char **debug_dirs;     /* the adding image's, copied; NULL: the default */
	size_t ndebug_dirs;
	char *dwfl_path;       /* debug_dirs as a libdwfl debuginfo_path (key) */
	Dwfl_Callbacks dwfl_cb;
	Elf *dbg_elf;          /* separate debug file whose .symtab we use, or NULL */
	int sym_state;
	struct sym *syms;      /* link addresses */
	size_t nsyms;
	char *plt_names;       /* storage of the "name@plt" strings */
	char *fde_names;       /* storage of the "module+0xoff" names of FDE functions */
	int dwl_state;
	struct btr_dwline *dwl; /* own line table (lib/elf/dwarf_line.c), or NULL */
	int dwl_err;           /* why it failed (LAZY_FAIL), see load_dwarf_locked */
	int dwl_ask_libdw;     /* a file it read has DWARF, or libdwfl may find another */
	int dw_state;
	Dwfl *dwfl;            /* the module reported at link addresses */
	Dwfl_Module *dwmod;
	int own_names;         /* symbols of generated code: each name malloc'ed (image_code.c) */
	size_t syms_cap;       /* own_names: room in syms */
	size_t sorted;         /* own_names: syms[0..sorted) sorted, maxend set; the rest appended
				* since (maxend: their order), merged by image_syms_settle */
};

/* Symbols of generated code (@f->own_names) appended out of order since
 * the last call: sorted and merged into the sorted ones (a later symbol at
 * the same address replaces the earlier, with the larger extent), so
 * that n symbols cost O(n log n) however they arrive.  Called with
 * files_lock held (through the lazy symbol load).  Returns 0 or
 * -BTR_ERR_NOMEM (the symbols stay as they were). */
int image_syms_settle(struct modfile *f);

/* A module of one image: an ELF file (@f) at its load bias, or a raw file. */
struct module {
	char *path;
	const char *base_name; /* points into path */
	uint64_t bias;         /* added to ELF vaddrs (0 for ET_EXEC, raw files) */
	uint64_t lo, hi;       /* address range of all PT_LOADs / the raw range */
	struct modfile *f;     /* NULL for raw files */
	int dead;              /* removed by btr_image_remove */
};

struct backing {
	void *ptr;
	size_t len;
	int is_mmap;
};

struct btr_image {
	struct section *secs;
	size_t nsecs, capsecs;
	size_t last;           /* "last hit" cache; accessed with relaxed atomics */
	struct module *mods;
	size_t nmods, capmods;
	uint32_t last_mod;     /* module cache for symbol lookups */
	struct backing *backs;
	size_t nbacks, capbacks;
	unsigned generation;
	char **debug_dirs;     /* NULL: the default, /usr/lib/debug */
	size_t ndebug_dirs;
	char *dwfl_path;       /* debug_dirs as a libdwfl debuginfo_path */
	Dwfl_Callbacks dwfl_cb;
	uint32_t jit;          /* 1 + index of the module of generated code's symbols, 0: none */
};

/* lib/image/image.c: appends a module named @path to @img (no sections, no
 * file); stores its index in *@idx.  Returns 0 or -BTR_ERR_NOMEM. */
int image_add_module(struct btr_image *img, const char *path, uint32_t *idx);

/* lib/image/image.c: the module of @img that owns @addr, or NULL. */
struct module *image_module_at(struct btr_image *img, uint64_t addr);

/* lib/image/image.c: runs @load, the loader of one lazily built part of @f
 * whose state is *@state, under the lock of shared files, unless *@state
 * is LAZY_OK (the loader stores it last, with release order).  Returns 0
 * or the loader's error. */
int image_lazy_load(struct modfile *f, int *state, int (*load)(struct modfile *));

#endif
