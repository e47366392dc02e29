/* image.c - memory images of traced programs: code bytes by address,
 * function symbols (ELF .symtab/.dynsym + PLT stubs); source lines are
 * in image_lines.c, code without a file in image_code.c.
 *
 * Layout: a sorted array of non-overlapping sections, each pointing into a
 * backing store that lives as long as the image (libelf's mapping of an ELF
 * file, our own read-only mapping of a raw file, or a malloc'ed copy).
 * Decoders call btr_image_map once per basic block, mostly at addresses
 * near the previous one, so a one-entry "last hit" cache answers most
 * lookups without the binary search.
 *
 * Sharing: what is costly about a module - its libelf handle (a mapping
 * of the whole file), symbol table, FDE functions, separate debug file
 * and DWARF - lives in a struct modfile that every image mapping the same
 * file shares, whatever its load address (symbols are kept at link
 * addresses; a module adds its bias).  A trace of a thousand processes
 * that all map libc thus holds libc once.  The files are found by
 * identity (device, inode, size, modification time) and debug
 * directories, and counted: the last image to drop one frees it.
 */
#include "btr/image.h"
#include "btr/file.h"
#include "elf/eh_frame.h"
#include "elf/dwarf_line.h"
#include "elf/elf_priv.h"
#include "image_code.h"
#include "image_priv.h"
#include "internal.h"

#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */

static int grow(void **arr, size_t *cap, size_t need, size_t elsize)
{
	return btr__grow(arr, cap, need, elsize, 16);
}

int btr_image_new(struct btr_image **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -BTR_ERR_NOMEM;
}

/* ---- shared files -------------------------------------------------- */

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct modfile *files;   /* every modfile alive */

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static void modfile_free(struct modfile *f)
{
	btr__dwline_free(f->dwl);
	if (f->dwfl)
		dwfl_end(f->dwfl);
	if (f->elf)
		elf_end(f->elf);
	if (f->dbg_elf)
		elf_end(f->dbg_elf);
	for (size_t i = 0; i < f->nsyms; i++) {
		free(f->syms[i].dname);
		if (f->own_names)
			free((char *)f->syms[i].name);
	}
	free(f->syms);
	free(f->plt_names);
	free(f->fde_names);
	for (size_t i = 0; i < f->ndebug_dirs; i++)
		free(f->debug_dirs[i]);
	free(f->debug_dirs);
	free(f->dwfl_path);
	free(f->path);
	free(f);
}

static void modfile_put(struct modfile *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&files_lock);
	int last = --f->refs == 0;
	if (last)
		for (struct modfile **pp = &files; *pp; pp = &(*pp)->next)
			if (*pp == f) {
				*pp = f->next;
				break;
			}
	pthread_mutex_unlock(&files_lock);
	if (last)
		modfile_free(f);
}

/* The shared file for ELF @path as image @img would load it: a new
 * reference to the one already open, or a newly opened one.  Returns 0,
 * or the errors of btr__elf_open, -BTR_ERR_NOMEM. */
static int modfile_get(const struct btr_image *img, const char *path, struct modfile **out)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return btr_err_from_errno(errno);
	pthread_mutex_lock(&files_lock);
	for (struct modfile *f = files; f; f = f->next)
		if (f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
		    f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec &&
		    !strcmp(f->path, path) && same_str(f->dwfl_path, img->dwfl_path)) {
			f->refs++;
			pthread_mutex_unlock(&files_lock);
			*out = f;
			return 0;
		}
	pthread_mutex_unlock(&files_lock);
	struct modfile *f = calloc(1, sizeof(*f));
	if (!f)
		return -BTR_ERR_NOMEM;
	f->refs = 1;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = st.st_size;
	f->mtime = st.st_mtim;
	f->path = strdup(path);
	if (!f->path || (img->dwfl_path && !(f->dwfl_path = strdup(img->dwfl_path))))
		goto nomem;
	if (img->ndebug_dirs) {
		if (!(f->debug_dirs = calloc(img->ndebug_dirs, sizeof(*f->debug_dirs))))
			goto nomem;
		f->ndebug_dirs = img->ndebug_dirs;
		for (size_t i = 0; i < img->ndebug_dirs; i++)
			if (!(f->debug_dirs[i] = strdup(img->debug_dirs[i])))
				goto nomem;
	}
	const char *slash = strrchr(f->path, '/');
	f->base_name = slash && slash[1] ? slash + 1 : f->path;
	int err = btr__elf_open(path, &f->elf);
	if (err) {
		modfile_free(f);
		return err;
	}
	pthread_mutex_lock(&files_lock);
	f->next = files;
	files = f;
	pthread_mutex_unlock(&files_lock);
	*out = f;
	return 0;
nomem:
	modfile_free(f);
	return -BTR_ERR_NOMEM;
}

static void module_release(struct module *m)
{
	modfile_put(m->f);
	free(m->path);
	memset(m, 0, sizeof(*m));
}

void btr_image_free(struct btr_image *img)
{
	if (!img)
		return;
	for (size_t i = 0; i < img->nmods; i++)
		module_release(&img->mods[i]);
	for (size_t i = 0; i < img->nbacks; i++) {
		if (img->backs[i].is_mmap)
			munmap(img->backs[i].ptr, img->backs[i].len);
		else
			free(img->backs[i].ptr);
	}
	for (size_t i = 0; i < img->ndebug_dirs; i++)
		free(img->debug_dirs[i]);
	free(img->debug_dirs);
	free(img->dwfl_path);
	free(img->backs);
	free(img->mods);
	free(img->secs);
	free(img);
}

unsigned btr_image_generation(const struct btr_image *img)
{
	return img ? img->generation : 0;
}

/* ---- sections ---------------------------------------------------- */

/* Index of the first section whose end is above @addr (sections do not
 * overlap, so ends are sorted like starts). */
static size_t first_ending_after(const struct btr_image *img, uint64_t addr)
{
	size_t lo = 0, hi = img->nsecs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (img->secs[mid].end > addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Removes [start, end) from every section: trims, splits or drops the
 * sections it overlaps.  Needs room for one more section (a split), which
 * the caller reserves.  Returns the number of bytes removed. */
static uint64_t carve(struct btr_image *img, uint64_t start, uint64_t end)
{
	uint64_t removed = 0;
	size_t i = first_ending_after(img, start);
	while (i < img->nsecs && img->secs[i].start < end) {
		struct section *s = &img->secs[i];
		if (s->start < start && s->end > end) {
			/* The new range falls inside s: keep both outer parts. */
			memmove(s + 2, s + 1, (img->nsecs - i - 1) * sizeof(*s));
			img->nsecs++;
			s[1] = *s;
			s[1].data += end - s->start;
			s[1].start = end;
			s->end = start;
			removed += end - start;
			break;
		} else if (s->start < start) {
			removed += s->end - start;
			s->end = start;
			i++;
		} else if (s->end > end) {
			removed += end - s->start;
			s->data += end - s->start;
			s->start = end;
			break;
		} else {
			removed += s->end - s->start;
			memmove(s, s + 1, (img->nsecs - i - 1) * sizeof(*s));
			img->nsecs--;
		}
	}
	return removed;
}

static int reserve_secs(struct btr_image *img, size_t more)
{
	return grow((void **)&img->secs, &img->capsecs, img->nsecs + more, sizeof(*img->secs));
}

/* Adds [start, end) -> data, replacing anything there.  The caller has
 * reserved room for two more sections. */
static void insert_section(struct btr_image *img, uint64_t start, uint64_t end,
			   const uint8_t *data, uint32_t module)
{
	carve(img, start, end);
	size_t i = first_ending_after(img, start);
	memmove(&img->secs[i + 1], &img->secs[i], (img->nsecs - i) * sizeof(img->secs[0]));
	img->secs[i] = (struct section){ start, end, data, module };
	img->nsecs++;
	__atomic_store_n(&img->last, 0, __ATOMIC_RELAXED);
}

static int add_backing(struct btr_image *img, void *ptr, size_t len, int is_mmap)
{
	int err = grow((void **)&img->backs, &img->capbacks, img->nbacks + 1, sizeof(*img->backs));
	if (err)
		return err;
	img->backs[img->nbacks++] = (struct backing){ ptr, len, is_mmap };
	return 0;
}

static const struct section *find_section(const struct btr_image *img, uint64_t addr)
{
	size_t n = img->nsecs;
	size_t i = __atomic_load_n(&img->last, __ATOMIC_RELAXED);
	if (btr_likely(i < n && img->secs[i].start <= addr && addr < img->secs[i].end))
		return &img->secs[i];
	/* Neighbouring section first: straight-line code crossing a boundary. */
	if (i + 1 < n && img->secs[i + 1].start <= addr && addr < img->secs[i + 1].end) {
		__atomic_store_n((size_t *)&img->last, i + 1, __ATOMIC_RELAXED);
		return &img->secs[i + 1];
	}
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (img->secs[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= img->secs[lo - 1].end)
		return NULL;
	/* The cache is a hint only; a racing store of another valid index is
	 * harmless, which is why relaxed atomics suffice. */
	__atomic_store_n((size_t *)&img->last, lo - 1, __ATOMIC_RELAXED);
	return &img->secs[lo - 1];
}

int btr_image_map(const struct btr_image *img, uint64_t addr, const uint8_t **ptr, size_t *avail)
{
	const struct section *s = find_section(img, addr);
	if (!s)
		return -BTR_ERR_NOMAP;
	*ptr = s->data + (addr - s->start);
	uint64_t n = s->end - addr;
	*avail = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
	return 0;
}

int btr_image_read(const struct btr_image *img, uint64_t addr, void *buf, size_t size)
{
	const uint8_t *p;
	size_t avail;
	int err = btr_image_map(img, addr, &p, &avail);
	if (err)
		return err;
	if (size > avail)
		size = avail;
	if (size > INT_MAX)
		size = INT_MAX;
	memcpy(buf, p, size);
	return (int)size;
}

/* ---- modules ----------------------------------------------------- */

/* image_priv.h */
int image_add_module(struct btr_image *img, const char *path, uint32_t *idx)
{
	int err = grow((void **)&img->mods, &img->capmods, img->nmods + 1, sizeof(*img->mods));
	if (err)
		return err;
	struct module *m = &img->mods[img->nmods];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	if (!m->path)
		return -BTR_ERR_NOMEM;
	const char *slash = strrchr(m->path, '/');
	m->base_name = slash && slash[1] ? slash + 1 : m->path;
	*idx = (uint32_t)img->nmods++;
	return 0;
}

int btr_image_add_elf(struct btr_image *img, const char *path, uint64_t base, int all_segments)
{
	if (!img || !path)
		return -BTR_ERR_INVAL;
	struct modfile *f = NULL;
	int err = modfile_get(img, path, &f);
	if (err)
		return err;
	Elf *elf = f->elf;

	GElf_Ehdr eh;
	size_t rawsize, nph;
	const uint8_t *raw = (const uint8_t *)elf_rawfile(elf, &rawsize);
	if (!gelf_getehdr(elf, &eh) || !raw || elf_getphdrnum(elf, &nph) != 0 ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)) {
		btr_debug("%s: not an executable or shared object", path);
		modfile_put(f);
		return -BTR_ERR_BAD_ELF;
	}
	/* ET_EXEC runs at its link addresses whatever the caller thinks the
	 * base is; ET_DYN (PIE, .so) is shifted by the load bias. */
	uint64_t bias = eh.e_type == ET_DYN ? base : 0;

	/* Validate everything first so that a bad file leaves the image as it
	 * was (no half-added ELF). */
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t nadd = 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			goto bad;
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		uint64_t start = ph.p_vaddr + bias;
		if (ph.p_filesz > ph.p_memsz || start < bias || start + ph.p_memsz < start ||
		    ph.p_offset > rawsize || ph.p_filesz > rawsize - ph.p_offset) {
			btr_debug("%s: PT_LOAD %zu outside the file or the address space", path, i);
			goto bad;
		}
		lo = start < lo ? start : lo;
		hi = start + ph.p_memsz > hi ? start + ph.p_memsz : hi;
		/* Up to two insertions (file part, zero part), and each can
		 * split an older section: four more entries at most. */
		if ((ph.p_flags & PF_X) || all_segments)
			nadd += 4;
	}
	if (lo >= hi) {
		btr_debug("%s: no loadable segment", path);
		goto bad;
	}

	uint32_t midx;
	if ((err = reserve_secs(img, nadd + 2)) != 0 || (err = image_add_module(img, path, &midx)) != 0) {
		modfile_put(f);
		return err;
	}
	struct module *m = &img->mods[midx];
	m->f = f;
	m->bias = bias;
	m->lo = lo;
	m->hi = hi;
	f->lo = lo - bias;   /* the same for every bias */
	f->hi = hi - bias;

	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		gelf_getphdr(elf, (int)i, &ph);
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (!(ph.p_flags & PF_X) && !all_segments)
			continue;
		uint64_t start = ph.p_vaddr + bias;
		if (ph.p_filesz)
			insert_section(img, start, start + ph.p_filesz, raw + ph.p_offset, midx);
		/* The part of p_memsz beyond p_filesz is zero-filled memory
		 * (.bss).  It is only data: code never lives there, so it is
		 * added only with all_segments.  An anonymous mapping reads
		 * as zeros and costs no memory until touched (never: the
		 * image is read-only), whatever the size. */
		if (ph.p_memsz > ph.p_filesz && all_segments) {
			uint64_t zlen = ph.p_memsz - ph.p_filesz;
			void *z = zlen <= SIZE_MAX / 2 ? mmap(NULL, (size_t)zlen, PROT_READ,
							       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
							       -1, 0)
						       : MAP_FAILED;
			if (z == MAP_FAILED || add_backing(img, z, (size_t)zlen, 1) != 0) {
				if (z != MAP_FAILED)
					munmap(z, (size_t)zlen);
				btr_warn("%s: no room for the %llu zero bytes of segment %zu, left out",
					 path, (unsigned long long)zlen, i);
				continue;
			}
			insert_section(img, start + ph.p_filesz, start + ph.p_memsz, z, midx);
		}
	}
	img->generation++;
	return 0;
bad:
	modfile_put(f);
	return -BTR_ERR_BAD_ELF;
}

int btr_image_add_file(struct btr_image *img, const char *path, uint64_t offset,
		       uint64_t size, uint64_t addr)
{
	if (!img || !path)
		return -BTR_ERR_INVAL;
	int fd = btr_file_open_named(path, BTR__NAMED_FILE_MAX, 0, 0);
	if (fd < 0)
		return fd == -BTR_ERR_UNSUPPORTED || fd == -BTR_ERR_ISDIR ? -BTR_ERR_INVAL : fd;
	struct stat st;
	int err = 0;
	if (fstat(fd, &st) < 0) {
		err = btr_err_from_errno(errno);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		btr_debug("%s: not a regular file", path);
		err = -BTR_ERR_INVAL;
		goto out;
	}
	uint64_t fsize = (uint64_t)st.st_size;
	if (offset >= fsize || (size && size > fsize - offset)) {
		btr_debug("%s: range 0x%llx+0x%llx beyond the file's %llu bytes", path,
			  (unsigned long long)offset, (unsigned long long)size,
			  (unsigned long long)fsize);
		err = -BTR_ERR_INVAL;
		goto out;
	}
	if (!size)
		size = fsize - offset;
	if (addr + size < addr) {
		err = -BTR_ERR_INVAL;
		goto out;
	}
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t moff = offset & ~(uint64_t)(pg - 1);
	size_t mlen = (size_t)(offset + size - moff);
	/* A read-only private mapping: the page cache shares it with other
	 * images and nothing can scribble on the code. */
	void *map = mmap(NULL, mlen, PROT_READ, MAP_PRIVATE, fd, (off_t)moff);
	if (map == MAP_FAILED) {
		err = btr_err_from_errno(errno);
		goto out;
	}
	uint32_t midx;
	if ((err = reserve_secs(img, 2)) != 0 || (err = add_backing(img, map, mlen, 1)) != 0) {
		munmap(map, mlen);
		goto out;
	}
	if ((err = image_add_module(img, path, &midx)) != 0)
		goto out;  /* the mapping stays in the backing list, freed with the image */
	img->mods[midx].lo = addr;
	img->mods[midx].hi = addr + size;
	/* Raw files name addresses as file+offset-within-file. */
	img->mods[midx].bias = addr - offset;
	insert_section(img, addr, addr + size, (const uint8_t *)map + (offset - moff), midx);
	img->generation++;
out:
	close(fd);
	return err;
}

/* lib/image/image_code.c: [@start, @end) -> @p, replacing what was there; @own
 * (or NULL) is a malloc'ed block the image frees with itself. */
int image_insert_bytes(struct btr_image *img, const uint8_t *p, uint64_t start, uint64_t end, void *own)
{
	int err = reserve_secs(img, 2);
	if (!err && own)
		err = add_backing(img, own, end - start, 0);
	if (err)
		return err;
	insert_section(img, start, end, p, NO_MODULE);
	img->generation++;
	return 0;
}

int64_t btr_image_remove(struct btr_image *img, uint64_t addr, uint64_t size)
{
	if (!img || !size || addr + size < addr)
		return -BTR_ERR_INVAL;
	/* A split needs one more slot. */
	if (reserve_secs(img, 1) != 0)
		return -BTR_ERR_NOMEM;
	uint64_t removed = carve(img, addr, addr + size);
	__atomic_store_n(&img->last, 0, __ATOMIC_RELAXED);
	for (size_t i = 0; i < img->nmods; i++) {
		struct module *m = &img->mods[i];
		if (m->lo >= addr && m->hi <= addr + size)
			m->dead = 1;
	}
	img->generation++;
	return (int64_t)removed;
}

/* ---- symbols ----------------------------------------------------- */

/* The module that owns @addr: the one whose section holds it (so that
 * newer additions hide older modules), else the newest live module whose
 * address range covers it (addresses in segments that were not added,
 * e.g. data when only code was loaded). */
struct module *image_module_at(struct btr_image *img, uint64_t addr)
{
	const struct section *s = find_section(img, addr);
	if (s && s->module != NO_MODULE)
		return &img->mods[s->module];
	if (s) {   /* bytes without a file: named by the symbols of generated code */
		struct module *j = img->jit ? &img->mods[img->jit - 1] : NULL;
		return j && j->lo <= addr && addr < j->hi ? j : NULL;
	}
	if (img->last_mod < img->nmods) {
		struct module *m = &img->mods[img->last_mod];
		if (!m->dead && m->lo <= addr && addr < m->hi)
			return m;
	}
	for (size_t i = img->nmods; i-- > 0;) {
		struct module *m = &img->mods[i];
		if (!m->dead && m->lo <= addr && addr < m->hi) {
			img->last_mod = (uint32_t)i;
			return m;
		}
	}
	return NULL;
}

struct symvec {
	struct sym *v;
	size_t n, cap;
};

static int symvec_push(struct symvec *sv, uint64_t addr, uint64_t size, uint64_t secend,
		       const char *name, uint8_t rank)
{
	int err = grow((void **)&sv->v, &sv->cap, sv->n + 1, sizeof(*sv->v));
	if (err)
		return err;
	/* end temporarily holds the section end; fixed up after sorting. */
	sv->v[sv->n++] = (struct sym){ .addr = addr, .size = size, .end = secend, .name = name,
				       .rank = rank };
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	/* Like perf: fewer leading underscores names the public entry
	 * (printf rather than _IO_printf), then the shorter name. */
	size_t ux = strspn(x->name, "_"), uy = strspn(y->name, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	size_t lx = strlen(x->name), ly = strlen(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int read_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, struct symvec *sv)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	if (!data || !sh->sh_entsize)
		return 0;
	size_t n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(data, (int)i, &s))
			break;
		int type = GELF_ST_TYPE(s.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
			continue;
		if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE || s.st_value == 0)
			continue;
		const char *name = elf_strptr(elf, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		GElf_Shdr tsh;
		Elf_Scn *tscn = elf_getscn(elf, s.st_shndx);
		uint64_t secend = UINT64_MAX;
		int exec = 0;
		if (tscn && gelf_getshdr(tscn, &tsh)) {
			secend = tsh.sh_addr + tsh.sh_size;
			exec = (tsh.sh_flags & SHF_EXECINSTR) != 0;
		}
		/* Untyped symbols: the labels of hand-written assembly (ld.so's
		 * and a static program's _start, _dl_start_user) name code when
		 * they sit in an executable section; not local labels, not the
		 * linker's end-of-text markers. */
		if (type == STT_NOTYPE && (!exec || name[0] == '.' || name[0] == '$' || !strcmp(name, "etext") ||
					   !strcmp(name, "_etext") || !strcmp(name, "__etext")))
			continue;
		/* Prefer, among aliases at one address: typed over untyped,
		 * sized over sizeless, global over weak over local, .symtab over
		 * .dynsym. */
		int bind = GELF_ST_BIND(s.st_info);
		uint8_t rank = (type == STT_NOTYPE ? SYM_RANK_NOTYPE : 0) | (s.st_size ? 0 : 8) |
			       (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 2 : 4) | (sh->sh_type == SHT_SYMTAB ? 0 : 1);
		int err = symvec_push(sv, s.st_value, s.st_size, secend, name, rank);
		if (err)
			return err;
	}
	return 0;
}

struct gotref {
	uint64_t got;          /* GOT slot address (link-time) */
	const char *name;
};

static int gotref_cmp(const void *a, const void *b)
{
	const struct gotref *x = a, *y = b;
	return x->got < y->got ? -1 : x->got > y->got;
}

/* Synthesizes "name@plt" symbols.  PLT stubs have no symbols of their own;
 * like binutils' synthetic symtab we decode each stub's `jmp *disp(%rip)`
 * (opcode ff 25, possibly after endbr64 and/or a bnd prefix) to find the
 * GOT slot it jumps through, and name the stub after the dynamic
 * relocation (JUMP_SLOT or GLOB_DAT) of that slot.  Covers .plt (lazy
 * binding), .plt.sec (IBT-enabled binaries, whose .plt stubs only push)
 * and .plt.got (-z now style). */
struct plt_refs {
	struct gotref *refs;
	size_t n, cap, namebytes;
	const struct symvec *sv;
};

/* One GOT slot (btr__elf_got_slots) as a stub's name. */
static int plt_ref(void *ctx, const struct btr__elf_got *g)
{
	struct plt_refs *p = ctx;
	const char *name = g->name;
	if (g->irelative) {
		/* The slot gets the IFUNC resolver's result; the addend is
		 * the resolver, best named by the IFUNC symbol (global)
		 * rather than the resolver's own (usually local) one. */
		unsigned best = 16;
		for (size_t k = 0; k < p->sv->n; k++)
			if (p->sv->v[k].addr == g->addend && p->sv->v[k].rank < best) {
				name = p->sv->v[k].name;
				best = p->sv->v[k].rank;
			}
		if (!name)
			return 0;
	}
	int err = grow((void **)&p->refs, &p->cap, p->n + 1, sizeof(*p->refs));
	if (err)
		return err;
	p->refs[p->n++] = (struct gotref){ g->slot, name };
	p->namebytes += strlen(name) + 5;
	return 0;
}

static int read_plt(struct modfile *m, struct symvec *sv)
{
	struct plt_refs pr = { .sv = sv };
	int err = btr__elf_got_slots(m->elf, plt_ref, &pr);
	struct gotref *refs = pr.refs;
	size_t nrefs = pr.n, namebytes = pr.namebytes;
	GElf_Shdr sh;
	if (err)
		goto out;
	if (!nrefs)
		goto out;
	qsort(refs, nrefs, sizeof(*refs), gotref_cmp);
	m->plt_names = malloc(namebytes);
	if (!m->plt_names) {
		err = -BTR_ERR_NOMEM;
		goto out;
	}
	char *np = m->plt_names;

	static const char *const pltnames[] = { ".plt", ".plt.sec", ".plt.got" };
	for (size_t k = 0; k < BTR_ARRAY_SIZE(pltnames); k++) {
		Elf_Scn *pscn = btr__elf_find_scn(m->elf, pltnames[k], &sh);
		Elf_Data *pd;
		if (!pscn || sh.sh_type != SHT_PROGBITS || !(pd = elf_rawdata(pscn, NULL)) ||
		    pd->d_size < sh.sh_size)
			continue;
		uint64_t esz = sh.sh_entsize >= 8 ? sh.sh_entsize : 16;
		const uint8_t *b = pd->d_buf;
		for (uint64_t off = 0; off + 6 <= sh.sh_size; off += esz) {
			/* Instruction boundaries where the jmp can start:
			 * plain, after bnd (f2), after endbr64, after both. */
			static const uint8_t starts[] = { 0, 1, 4, 5 };
			for (size_t j = 0; j < sizeof(starts); j++) {
				uint64_t p = off + starts[j];
				if (p + 6 > sh.sh_size || p + 6 > off + esz)
					break;
				if (b[p] != 0xff || b[p + 1] != 0x25)
					continue;
				int32_t disp;
				memcpy(&disp, b + p + 2, 4);
				uint64_t got = sh.sh_addr + p + 6 + (uint64_t)(int64_t)disp;
				size_t lo = 0, hi = nrefs;
				while (lo < hi) {
					size_t mid = (lo + hi) / 2;
					if (refs[mid].got < got)
						lo = mid + 1;
					else
						hi = mid;
				}
				if (lo < nrefs && refs[lo].got == got && refs[lo].name) {
					int len = sprintf(np, "%s@plt", refs[lo].name);
					refs[lo].name = NULL;  /* one stub per slot */
					uint64_t a = sh.sh_addr + off;
					err = symvec_push(sv, a, esz, sh.sh_addr + sh.sh_size,
							  np, 16);
					np += len + 1;
					if (err)
						goto out;
				}
				break;
			}
		}
	}
out:
	free(refs);
	return err;
}


static int has_symtab(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)) != NULL)
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB && sh.sh_size)
			return 1;
	return 0;
}

/* Stripped binaries (libc.so.6 on Debian) keep only .dynsym, which lacks
 * every internal function; their .symtab lives in a separate debug file
 * (libc6-dbg: /usr/lib/debug/.build-id/xx/rest.debug).  It has the same
 * addresses, so the same bias applies. */
static Elf *find_debug_elf(struct modfile *m)
{
	uint8_t id[64];
	char path[PATH_MAX];
	int n = btr__elf_build_id(m->elf, id, sizeof(id));
	if (n <= 0 || n > (int)sizeof(id))
		return NULL;
	if (btr_elf_find_build_id(id, (size_t)n, (const char *const *)m->debug_dirs,
				  m->ndebug_dirs, path, sizeof(path)) != 0)
		return NULL;
	Elf *dbg;
	if (btr__elf_open(path, &dbg) != 0)
		return NULL;
	if (!has_symtab(dbg)) {
		elf_end(dbg);
		return NULL;
	}
	btr_debug("%s: symbols from %s", m->path, path);
	return dbg;
}

/* The symbol of @syms (@n, sorted, maxend set) containing @addr. */
static const struct sym *sym_find(const struct sym *syms, size_t n, uint64_t addr, int with_fde)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Usually the nearest preceding symbol contains addr; a nested or
	 * overlapping one further back can too, and maxend says when to stop. */
	for (size_t i = lo; i-- > 0 && syms[i].maxend > addr;)
		if (addr < syms[i].end && (with_fde || !syms[i].fde))
			return &syms[i];
	return NULL;
}

struct fdevec {
	uint64_t *v;    /* start, end pairs (link addresses) */
	size_t n, cap;
};

static int fde_collect(void *ctx, uint64_t start, uint64_t end)
{
	struct fdevec *fv = ctx;
	if (grow((void **)&fv->v, &fv->cap, fv->n + 2, sizeof(*fv->v)))
		return -1;
	fv->v[fv->n++] = start;
	fv->v[fv->n++] = end;
	return 0;
}

/* Adds a function entry, named "module+0xOFF" (OFF = link address, the
 * form btr_image_symbolize prints), for every .eh_frame FDE whose start no
 * symbol covers.  Why FDEs: stripped executables (Debian's python3.11)
 * keep only .dynsym, which names a fraction of the code; the unwind table
 * names none but delimits every function exactly (each .cold part too),
 * and it is never stripped because the unwinder needs it. */
static int add_fde_functions(struct modfile *m, struct symvec *sv)
{
	GElf_Shdr sh;
	Elf_Scn *scn;
	Elf_Data *d;
	if (!m->elf || !(scn = btr__elf_find_scn(m->elf, ".eh_frame", &sh)) || sh.sh_type != SHT_PROGBITS ||
	    !(d = elf_rawdata(scn, NULL)) || !d->d_buf)
		return 0;
	struct fdevec fv = { 0 };
	if (btr__eh_frame_fdes(d->d_buf, d->d_size, sh.sh_addr, fde_collect, &fv) < 0) {
		free(fv.v);
		return -BTR_ERR_NOMEM;
	}
	size_t keep = 0, bytes = 0, base_len = strlen(m->base_name);
	for (size_t i = 0; i < fv.n; i += 2) {
		uint64_t a = fv.v[i];
		if (a < m->lo || a >= m->hi || sym_find(sv->v, sv->n, a, 0))
			continue;
		fv.v[keep++] = fv.v[i];
		fv.v[keep++] = fv.v[i + 1];
		bytes += base_len + 20;
	}
	int err = 0;
	if (!keep)
		goto out;
	char *names = malloc(bytes);
	if (!names) {
		err = -BTR_ERR_NOMEM;
		goto out;
	}
	size_t n0 = sv->n;
	char *np = names;
	for (size_t i = 0; i < keep; i += 2) {
		int len = sprintf(np, "%s+0x%llx", m->base_name, (unsigned long long)fv.v[i]);
		uint64_t a = fv.v[i], e = fv.v[i + 1];
		if ((err = symvec_push(sv, a, e - a, e, np, 32)) != 0) {
			sv->n = n0;
			free(names);
			goto out;
		}
		sv->v[sv->n - 1].fde = 1;
		sv->v[sv->n - 1].end = e;
		np += len + 1;
	}
	qsort(sv->v, sv->n, sizeof(*sv->v), sym_cmp);
	uint64_t maxend = 0;
	for (size_t i = 0; i < sv->n; i++) {
		maxend = sv->v[i].end > maxend ? sv->v[i].end : maxend;
		sv->v[i].maxend = maxend;
	}
	m->fde_names = names;
out:
	free(fv.v);
	return err;
}

static int cmp_pending(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (x->maxend > y->maxend) - (x->maxend < y->maxend);   /* their order */
}

int image_syms_settle(struct modfile *f)
{
	size_t n = f->nsyms, s = f->sorted < n ? f->sorted : n;
	if (s == n)
		return 0;
	{
		struct sym *out = malloc(n * sizeof(*out));
		if (!out)
			return -BTR_ERR_NOMEM;
		qsort(f->syms + s, n - s, sizeof(*f->syms), cmp_pending);
		size_t i = 0, j = s, k = 0;
		while (i < s || j < n) {
			/* the older (sorted part first, then appended order) first */
			struct sym x = (j >= n || (i < s && f->syms[i].addr <= f->syms[j].addr)) ? f->syms[i++] : f->syms[j++];
			if (k && out[k - 1].addr == x.addr) {
				struct sym *o = &out[k - 1];   /* the later name, the larger extent */
				if (o->size > x.size)
					x.size = o->size;
				if (o->end > x.end)
					x.end = o->end;
				free((char *)o->name);
				free(o->dname);
				*o = x;
				continue;
			}
			out[k++] = x;
		}
		free(f->syms);
		f->syms = out;
		f->nsyms = k;
		f->syms_cap = n;
	}
	for (size_t i = 0; i < f->nsyms; i++)
		f->syms[i].maxend = i && f->syms[i - 1].maxend > f->syms[i].end ? f->syms[i - 1].maxend : f->syms[i].end;
	f->sorted = f->nsyms;
	return 0;
}

static int load_symbols_locked(struct modfile *m)
{
	if (m->own_names && m->sym_state == LAZY_NONE) {
		if (image_syms_settle(m) < 0)
			return -BTR_ERR_NOT_FOUND;
		__atomic_store_n(&m->sym_state, LAZY_OK, __ATOMIC_RELEASE);
		return 0;
	}
	if (m->sym_state != LAZY_NONE)
		return m->sym_state == LAZY_OK ? 0 : -BTR_ERR_NOT_FOUND;
	m->sym_state = LAZY_FAIL;
	if (!m->elf)
		return -BTR_ERR_NOT_FOUND;
	if (!has_symtab(m->elf))
		m->dbg_elf = find_debug_elf(m);
	struct symvec sv = { 0 };
	int err = 0;
	Elf *elfs[2] = { m->elf, m->dbg_elf };
	for (int k = 0; k < 2 && elfs[k]; k++) {
		Elf_Scn *scn = NULL;
		GElf_Shdr sh;
		while (!err && (scn = elf_nextscn(elfs[k], scn)) != NULL) {
			if (gelf_getshdr(scn, &sh) &&
			    (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM))
				err = read_symtab(elfs[k], scn, &sh, &sv);
		}
	}
	if (!err)
		err = read_plt(m, &sv);
	if (err) {
		/* Said once per module (the state stays LAZY_FAIL): without it a
		 * report would silently show addresses where names belong. */
		btr_warn("%s: symbols not loaded: %s", m->path, btr_errstr(err));
		free(sv.v);
		return err;
	}
	if (sv.n)  /* qsort's array argument must not be NULL, even for 0 */
		qsort(sv.v, sv.n, sizeof(*sv.v), sym_cmp);
	/* Keep one name per address (the best ranked sorts first), and no
	 * untyped label inside a sized function: it would cut the function's
	 * name off where an assembly label happens to stand. */
	size_t n = 0;
	uint64_t sized_end = 0;
	for (size_t i = 0; i < sv.n; i++) {
		if (n && sv.v[n - 1].addr == sv.v[i].addr)
			continue;
		if ((sv.v[i].rank & SYM_RANK_NOTYPE) && sv.v[i].addr < sized_end)
			continue;
		if (sv.v[i].size && sv.v[i].addr + sv.v[i].size > sized_end)
			sized_end = sv.v[i].addr + sv.v[i].size;
		sv.v[n++] = sv.v[i];
	}
	/* Extents: sized symbols end at addr+size; sizeless ones reach to the
	 * next symbol or the end of their section, whichever comes first. */
	uint64_t maxend = 0;
	for (size_t i = 0; i < n; i++) {
		struct sym *s = &sv.v[i];
		if (s->size) {
			s->end = s->addr + s->size;
		} else {
			uint64_t e = s->end;  /* section end */
			if (i + 1 < n && sv.v[i + 1].addr < e)
				e = sv.v[i + 1].addr;
			s->end = e > s->addr ? e : s->addr + 1;
			s->size = s->end - s->addr;
		}
		maxend = s->end > maxend ? s->end : maxend;
		s->maxend = maxend;
	}
	sv.n = n;
	m->syms = sv.v;
	m->nsyms = n;
	/* Functions without a symbol (stripped binaries): FDEs.  A failure
	 * here only loses them, never the symbols: it leaves sv.n as it was,
	 * but a push before it may have moved the array (so sv.v, not the
	 * pointer taken above, whatever the result). */
	add_fde_functions(m, &sv);
	m->syms = sv.v;
	m->nsyms = sv.n;
	__atomic_store_n(&m->sym_state, LAZY_OK, __ATOMIC_RELEASE);
	return 0;
}

/* Runs @load, the loader of one lazy part of @f whose state is *@state,
 * unless that is done (images in several threads may share @f): the
 * loaders run under files_lock and store LAZY_OK last, with release
 * order, so that a reader seeing it sees what they built. */
int image_lazy_load(struct modfile *f, int *state, int (*load)(struct modfile *))
{
	if (__atomic_load_n(state, __ATOMIC_ACQUIRE) == LAZY_OK)
		return 0;
	pthread_mutex_lock(&files_lock);
	int err = load(f);
	pthread_mutex_unlock(&files_lock);
	return err;
}

/* The symbols of module @m's file.  Returns 0 or -BTR_ERR_NOT_FOUND
 * (none, or failed). */
static int load_symbols(struct module *m)
{
	return m->f ? image_lazy_load(m->f, &m->f->sym_state, load_symbols_locked) : -BTR_ERR_NOT_FOUND;
}

/* The symbol (or, @with_fde, FDE function) of @m containing run-time
 * address @addr; its addresses are link addresses (add m->bias). */
static const struct sym *module_symbol_ex(struct module *m, uint64_t addr, int with_fde)
{
	if (load_symbols(m) != 0 || !m->f->nsyms)
		return NULL;
	return sym_find(m->f->syms, m->f->nsyms, addr - m->bias, with_fde);
}

static const struct sym *module_symbol(struct module *m, uint64_t addr)
{
	return module_symbol_ex(m, addr, 0);
}

int btr_image_symbol(struct btr_image *img, uint64_t addr, struct btr_symbol *sym)
{
	if (!img || !sym)
		return -BTR_ERR_INVAL;
	struct module *m = image_module_at(img, addr);
	const struct sym *s = m ? module_symbol(m, addr) : NULL;
	if (!s)
		return -BTR_ERR_NOT_FOUND;
	sym->name = s->name;
	sym->addr = s->addr + m->bias;
	sym->size = s->size;
	sym->module = m->path;
	return 0;
}

int btr_image_lookup(struct btr_image *img, const char *name, struct btr_symbol *sym)
{
	if (!img || !name || !sym)
		return -BTR_ERR_INVAL;
	/* A linear scan: used to resolve a handful of names given by the user. */
	for (size_t i = 0; i < img->nmods; i++) {
		struct module *m = &img->mods[i];
		if (m->dead || load_symbols(m) != 0)
			continue;
		for (size_t j = 0; j < m->f->nsyms; j++) {
			const struct sym *x = &m->f->syms[j];
			if (strcmp(x->name, name))
				continue;
			sym->name = x->name;
			sym->addr = x->addr + m->bias;
			sym->size = x->size;
			sym->module = m->path;
			return 0;
		}
	}
	return -BTR_ERR_NOT_FOUND;
}

/* ---- demangling ---------------------------------------------------
 *
 * Why __cxa_demangle (libstdc++) rather than libiberty's cplus_demangle:
 * libstdc++ is the C++ runtime every C++ program on the machine already
 * uses and is present wherever g++ is (build-essential); it implements
 * exactly the Itanium ABI that GCC and Clang emit.  libiberty is a
 * static-only -dev package (libiberty-dev) with no stable ABI, one more
 * build dependency for the same demangler. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* The display name of @s: demangled C++ (keeping a "@plt" suffix), else
 * the symbol's own name.  Cached in the symbol. */
static const char *sym_name(struct sym *s)
{
	if (s->dname_done)
		return s->dname ? s->dname : s->name;
	s->dname_done = 1;
	if (s->fde || strncmp(s->name, "_Z", 2) != 0)
		return s->name;
	const char *at = strchr(s->name, '@');
	char tmp[1024];
	const char *in = s->name;
	if (at) {
		if ((size_t)(at - s->name) >= sizeof(tmp))
			return s->name;
		memcpy(tmp, s->name, (size_t)(at - s->name));
		tmp[at - s->name] = 0;
		in = tmp;
	}
	int st = -1;
	char *d = __cxa_demangle(in, NULL, NULL, &st);
	if (!d || st != 0) {
		free(d);
		return s->name;
	}
	if (at) {
		char *x = malloc(strlen(d) + strlen(at) + 1);
		if (!x) {
			free(d);
			return s->name;
		}
		strcpy(x, d);
		strcat(x, at);
		free(d);
		d = x;
	}
	s->dname = d;
	return d;
}

void btr_image_symbolize(struct btr_image *img, uint64_t addr, char *buf, size_t bufsize)
{
	if (!buf || !bufsize)
		return;
	struct module *m = img ? image_module_at(img, addr) : NULL;
	struct sym *s = m ? (struct sym *)module_symbol(m, addr) : NULL;
	if (s && addr - m->bias == s->addr)
		snprintf(buf, bufsize, "%s", sym_name(s));
	else if (s)
		snprintf(buf, bufsize, "%s+0x%llx", sym_name(s), (unsigned long long)(addr - m->bias - s->addr));
	else if (m)
		snprintf(buf, bufsize, "%s+0x%llx", m->base_name, (unsigned long long)(addr - m->bias));
	else
		snprintf(buf, bufsize, "0x%llx", (unsigned long long)addr);
}

/* ---- debug directories ------------------------------------------- */

int btr_image_set_debug_dirs(struct btr_image *img, const char *const *dirs, size_t ndirs)
{
	if (!img || (ndirs && !dirs))
		return -BTR_ERR_INVAL;
	char **copy = ndirs ? calloc(ndirs, sizeof(*copy)) : NULL;
	/* ":.debug:" keeps libdwfl's search next to the file by debuglink. */
	size_t plen = sizeof(":.debug");
	for (size_t i = 0; i < ndirs; i++)
		plen += strlen(dirs[i]) + 1;
	char *path = ndirs ? malloc(plen) : NULL;
	if (ndirs && (!copy || !path))
		goto nomem;
	if (path)
		strcpy(path, ":.debug");
	for (size_t i = 0; i < ndirs; i++) {
		if (!(copy[i] = strdup(dirs[i])))
			goto nomem;
		strcat(path, ":");
		strcat(path, dirs[i]);
	}
	for (size_t i = 0; i < img->ndebug_dirs; i++)
		free(img->debug_dirs[i]);
	free(img->debug_dirs);
	free(img->dwfl_path);
	img->debug_dirs = copy;
	img->ndebug_dirs = ndirs;
	img->dwfl_path = path;
	return 0;
nomem:
	for (size_t i = 0; copy && i < ndirs; i++)
		free(copy[i]);
	free(copy);
	free(path);
	return -BTR_ERR_NOMEM;
}

/* ---- functions and modules (btr_image_function & co.) ------------ */

static void fill_function(struct module *m, struct sym *s, struct btr_function *fn)
{
	memset(fn, 0, sizeof(*fn));
	fn->name = sym_name(s);
	fn->raw_name = s->name;
	fn->start = s->addr + m->bias;
	fn->end = s->end + m->bias;
	fn->module = m->path;
	fn->module_name = m->base_name;
	fn->bias = m->bias;
	size_t nl = strlen(s->name);
	fn->source = s->fde ? BTR_FUNC_FDE
		   : (nl > 4 && !strcmp(s->name + nl - 4, "@plt")) ? BTR_FUNC_PLT : BTR_FUNC_SYMBOL;
}

int btr_image_function(struct btr_image *img, uint64_t addr, struct btr_function *fn)
{
	if (!img || !fn)
		return -BTR_ERR_INVAL;
	struct module *m = image_module_at(img, addr);
	struct sym *s = m ? (struct sym *)module_symbol_ex(m, addr, 1) : NULL;
	if (!s)
		return -BTR_ERR_NOT_FOUND;
	fill_function(m, s, fn);
	return 0;
}

/* "name" matches a symbol's linkage name, its demangled name, or the
 * demangled name without its parameter list ("ns::f" for "ns::f(int)"). */
static int name_matches(struct sym *s, const char *name)
{
	if (!strcmp(s->name, name))
		return 1;
	/* "__libc_start_main@@GLIBC_2.34" is __libc_start_main, as the
	 * stack views name it; "memcpy@plt" stays the stub */
	size_t nl = strlen(name);
	if (!strncmp(s->name, name, nl) && s->name[nl] == '@' && strcmp(s->name + nl, "@plt") != 0 &&
	    !strchr(name, '@'))
		return 1;
	const char *d = sym_name(s);
	if (d == s->name)
		return 0;
	if (!strcmp(d, name))
		return 1;
	size_t n = strlen(name);
	return !strncmp(d, name, n) && d[n] == '(';
}

int btr_image_function_by_name(struct btr_image *img, const char *name, struct btr_function *fn)
{
	if (!img || !name || !fn)
		return -BTR_ERR_INVAL;
	int nomem = 0;   /* a module's symbols lacked memory: not "not found" */
	for (size_t i = 0; i < img->nmods; i++) {
		struct module *m = &img->mods[i];
		int e = m->dead ? 1 : load_symbols(m);
		nomem |= e == -BTR_ERR_NOMEM;
		if (e != 0)
			continue;
		for (size_t k = 0; k < m->f->nsyms; k++)
			if (name_matches(&m->f->syms[k], name)) {
				fill_function(m, &m->f->syms[k], fn);
				return 0;
			}
	}
	/* "module+0xOFF": the function containing that link address. */
	const char *plus = strstr(name, "+0x");
	if (plus) {
		char *end;
		unsigned long long off = strtoull(plus + 3, &end, 16);
		if (*end == 0)
			for (size_t i = 0; i < img->nmods; i++) {
				struct module *m = &img->mods[i];
				if (m->dead || strlen(m->base_name) != (size_t)(plus - name) ||
				    strncmp(m->base_name, name, (size_t)(plus - name)))
					continue;
				return btr_image_function(img, off + m->bias, fn);
			}
	}
	return nomem ? -BTR_ERR_NOMEM : -BTR_ERR_NOT_FOUND;
}

int btr_image_foreach_function(struct btr_image *img, uint64_t lo, uint64_t hi,
			       int (*cb)(void *ctx, const struct btr_function *fn), void *ctx)
{
	if (!img || !cb)
		return -BTR_ERR_INVAL;
	for (size_t i = 0; i < img->nmods; i++) {
		struct module *m = &img->mods[i];
		if (m->dead || m->hi <= lo || m->lo >= hi || load_symbols(m) != 0)
			continue;
		for (size_t k = 0; k < m->f->nsyms; k++) {
			uint64_t a = m->f->syms[k].addr + m->bias;
			if (a < lo || a >= hi)
				continue;
			struct btr_function fn;
			fill_function(m, &m->f->syms[k], &fn);
			int rc = cb(ctx, &fn);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int btr_image_module_at(struct btr_image *img, uint64_t addr, struct btr_image_module *mi)
{
	if (!img || !mi)
		return -BTR_ERR_INVAL;
	struct module *m = image_module_at(img, addr);
	if (!m)
		return -BTR_ERR_NOT_FOUND;
	memset(mi, 0, sizeof(*mi));
	mi->path = m->path;
	mi->name = m->base_name;
	mi->bias = m->bias;
	mi->start = m->lo;
	mi->end = m->hi;
	mi->is_elf = m->f && m->f->elf;
	return 0;
}
