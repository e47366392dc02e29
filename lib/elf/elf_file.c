/* elf_file.c - ELF files as such: opening through libelf, build-ids,
 * load biases of mappings, finding files by build-id (btr_elf_* in
 * btr/image.h) or by .gnu_debuglink (btr__elf_find_debuglink).  Split from image.c, which places files into images. */
#include "btr/image.h"
#include "btr/file.h"
#include "elf_priv.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Opens @path as an ELF file read through libelf's own mapping.  The
 * descriptor is closed before returning: images may hold hundreds of
 * shared objects, and a descriptor per module would exhaust the limit. */
int btr__elf_open(const char *path, Elf **out)
{
	elf_version(EV_CURRENT);
	/* A name from a trace or a debug link: never a FIFO or device. */
	int fd = btr_file_open_named(path, BTR__NAMED_FILE_MAX, 0, 0);
	if (fd < 0)
		return fd == -BTR_ERR_UNSUPPORTED || fd == -BTR_ERR_ISDIR || fd == -BTR_ERR_FBIG ? -BTR_ERR_BAD_ELF : fd;
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_cntl(elf, ELF_C_FDREAD) != 0) {
		btr_debug("%s: not an ELF file (%s)", path, elf_errmsg(-1));
		if (elf)
			elf_end(elf);
		close(fd);
		return -BTR_ERR_BAD_ELF;
	}
	elf_cntl(elf, ELF_C_FDDONE);
	close(fd);
	*out = elf;
	return 0;
}

/* ---- ELF helpers ------------------------------------------------- */

/* Build-id from the notes of an open ELF: PT_NOTE segments (what the
 * loader sees), else SHT_NOTE sections (files without program headers,
 * e.g. some separate debug files). */
static int note_build_id(Elf_Data *d, uint8_t *buf, size_t size)
{
	size_t off = 0, noff, doff;
	GElf_Nhdr nh;
	while (d && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz &&
		    !memcmp((const char *)d->d_buf + noff, "GNU", 4)) {
			size_t n = nh.n_descsz < size ? nh.n_descsz : size;
			if (n)
				memcpy(buf, (const char *)d->d_buf + doff, n);
			return nh.n_descsz > INT_MAX ? -BTR_ERR_BAD_ELF : (int)nh.n_descsz;
		}
	}
	return -BTR_ERR_NOT_FOUND;
}

int btr__elf_build_id(Elf *elf, uint8_t *buf, size_t size)
{
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
				continue;
			/* Notes are 4-aligned, or 8 in .note.gnu.property segments. */
			Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
							   ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
			int n = note_build_id(d, buf, size);
			if (n != -BTR_ERR_NOT_FOUND)
				return n;
		}
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		int n = note_build_id(elf_getdata(scn, NULL), buf, size);
		if (n != -BTR_ERR_NOT_FOUND)
			return n;
	}
	return -BTR_ERR_NOT_FOUND;
}

int btr_elf_build_id(const char *path, uint8_t *buf, size_t size)
{
	if (!path || (!buf && size))
		return -BTR_ERR_INVAL;
	Elf *elf;
	int err = btr__elf_open(path, &elf);
	if (err)
		return err;
	err = btr__elf_build_id(elf, buf, size);
	elf_end(elf);
	return err;
}

int btr_elf_load_bias(const char *path, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	return btr_elf_load_bias_prot(path, start, pgoff, -1, bias);
}

/* The rule of btr_elf_load_bias_prot, and with @copy, for an ET_EXEC
 * mapped where no PT_LOAD places it, of that copy (see elf_priv.h): *@fixed
 * 1 when the bias is 0 whatever the mapping's start, else it is start -
 * *@k.  @start matters only with @copy. */
static int bias_rule(const char *path, uint64_t start, uint64_t pgoff, int prot, int copy, int *fixed, uint64_t *k)
{
	if (!path)
		return -BTR_ERR_INVAL;
	Elf *elf;
	int err = btr__elf_open(path, &elf);
	if (err)
		return err;
	GElf_Ehdr eh;
	size_t nph;
	err = -BTR_ERR_NOT_FOUND;
	if (!gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &nph) != 0) {
		err = -BTR_ERR_BAD_ELF;
		goto out;
	}
	int best = -1, away = copy && eh.e_type == ET_EXEC;
	for (size_t i = 0; away && i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && start >= (ph.p_vaddr & ~(uint64_t)0xfff) &&
		    start < ph.p_vaddr + ph.p_memsz)
			away = 0;   /* where its headers place it */
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* The loader maps from the page holding p_offset, so the mapping's
		 * pgoff is p_offset rounded down to a page (p_vaddr and p_offset
		 * are congruent modulo the page size, which keeps this exact).
		 * Two segments can start in one file page (.text's last page is
		 * .data's first without -z separate-code, or the RELRO data after
		 * .rodata): the protection tells them apart. */
		uint64_t pstart = ph.p_offset & ~(uint64_t)0xfff;
		uint64_t pend = ph.p_offset + (ph.p_filesz ? ph.p_filesz : 1);
		if (pgoff < pstart || pgoff >= pend)
			continue;
		int score;
		if (prot >= 0)
			score = (!!(prot & PROT_EXEC) == !!(ph.p_flags & PF_X)) * 2 +
				(!!(prot & PROT_WRITE) == !!(ph.p_flags & PF_W));
		else  /* unknown: code is what decoders need */
			score = !!(ph.p_flags & PF_X);
		if (score <= best)
			continue;
		best = score;
		*fixed = eh.e_type == ET_EXEC && !away;
		*k = ph.p_vaddr - ph.p_offset + pgoff;
		err = 0;
	}
out:
	elf_end(elf);
	return err;
}

static int load_bias(const char *path, uint64_t start, uint64_t pgoff, int prot, int copy, uint64_t *bias)
{
	if (!bias)
		return -BTR_ERR_INVAL;
	int fixed = 0;
	uint64_t k = 0;
	int err = bias_rule(path, start, pgoff, prot, copy, &fixed, &k);
	if (!err)
		*bias = fixed ? 0 : start - k;
	return err;
}

int btr__elf_bias_rule(const char *path, uint64_t pgoff, int prot, int *fixed, uint64_t *k)
{
	if (!fixed || !k)
		return -BTR_ERR_INVAL;
	return bias_rule(path, 0, pgoff, prot, 0, fixed, k);
}

int btr_elf_load_bias_prot(const char *path, uint64_t start, uint64_t pgoff, int prot,
			   uint64_t *bias)
{
	return load_bias(path, start, pgoff, prot, 0, bias);
}

int btr__elf_copy_bias(const char *path, uint64_t start, uint64_t pgoff, int prot, uint64_t *bias)
{
	return load_bias(path, start, pgoff, prot, 1, bias);
}

static int id_matches(const char *path, const uint8_t *id, size_t len)
{
	uint8_t got[64];
	int n = btr_elf_build_id(path, got, sizeof(got));
	return n == (int)len && !memcmp(got, id, len);
}

int btr_elf_find_build_id(const uint8_t *id, size_t len, const char *const *dirs, size_t ndirs,
			  char *path, size_t pathsize)
{
	static const char *const defdirs[] = { "/usr/lib/debug" };
	if (!id || !len || len > 64 || !path || !pathsize)
		return -BTR_ERR_INVAL;
	if (!dirs || !ndirs) {
		dirs = defdirs;
		ndirs = 1;
	}
	char hex[2 * 64 + 1];
	for (size_t i = 0; i < len; i++)
		sprintf(hex + 2 * i, "%02x", id[i]);
	char buf[PATH_MAX];
	int toolong = 0;
	for (size_t d = 0; d < ndirs; d++) {
		static const char *const suffixes[] = { ".debug", "" };
		for (size_t k = 0; k < 2; k++) {
			int n = snprintf(buf, sizeof(buf), "%s/.build-id/%.2s/%s%s", dirs[d], hex,
					 hex + 2, suffixes[k]);
			if (n < 0 || (size_t)n >= sizeof(buf))
				continue;
			if (id_matches(buf, id, len))
				goto found;
		}
		DIR *dir = opendir(dirs[d]);
		if (!dir)
			continue;
		struct dirent *de;
		while ((de = readdir(dir)) != NULL) {
			if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
				continue;
			int n = snprintf(buf, sizeof(buf), "%s/%s", dirs[d], de->d_name);
			struct stat st;
			if (n < 0 || (size_t)n >= sizeof(buf) || stat(buf, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			if (id_matches(buf, id, len)) {
				closedir(dir);
				goto found;
			}
		}
		closedir(dir);
	}
	return -BTR_ERR_NOT_FOUND;
found:
	if (strlen(buf) >= pathsize)
		toolong = 1;
	else
		strcpy(path, buf);
	return toolong ? -BTR_ERR_INVAL : 0;
}

Elf_Scn *btr__elf_find_scn(Elf *elf, const char *want, GElf_Shdr *out)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, out))
			continue;
		const char *name = elf_strptr(elf, shstrndx, out->sh_name);
		if (name && !strcmp(name, want))
			return scn;
	}
	return NULL;
}

int btr__elf_has_dwarf(Elf *elf)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 1;  /* unknown: say yes, the caller then asks libdw */
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
		if (!n)
			continue;
		if (!strncmp(n, ".gnu.debuglto_", 14))
			n += 14;
		if (!strncmp(n, ".zdebug_", 8))
			n += 8;
		else if (!strncmp(n, ".debug_", 7))
			n += 7;
		else
			continue;
		if (!strncmp(n, "info", 4) || !strncmp(n, "line", 4) || !strncmp(n, "frame", 5))
			return 1;
	}
	return 0;
}

/* ---- separate debug files by .gnu_debuglink ---------------------- */

/* The debuglink of @elf as dwelf_elf_gnu_debuglink reads it: a file name
 * (NUL-terminated, padded to 4 bytes), then the file's CRC32 in the last
 * 4 bytes, in the ELF file's byte order. */
static const char *debuglink(Elf *elf, uint32_t *crc)
{
	GElf_Shdr sh;
	GElf_Ehdr eh;
	Elf_Scn *scn = btr__elf_find_scn(elf, ".gnu_debuglink", &sh);
	Elf_Data *d = scn ? elf_rawdata(scn, NULL) : NULL;
	if (!d || !d->d_buf || d->d_size <= 4 || !memchr(d->d_buf, 0, d->d_size - 4) ||
	    !gelf_getehdr(elf, &eh))
		return NULL;
	const uint8_t *p = (const uint8_t *)d->d_buf + d->d_size - 4;
	*crc = eh.e_ident[EI_DATA] == ELFDATA2MSB
	       ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
	       : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
	return d->d_buf;
}

struct dlsearch {
	const char *link;      /* the debuglink name, NULL: none (invent one) */
	uint32_t crc;
	uint8_t id[64];
	int idlen;             /* the file's build-id, or <= 0 */
	dev_t dev;             /* the file itself, never its own debug file */
	ino_t ino;
	char *out;
	size_t outsize;
};

/* libdwfl's try_open: [DIR/][SUB/]FILE unless that is the file itself.
 * Returns an open descriptor, or -errno. */
static int dl_open(const struct dlsearch *s, const char *dir, const char *sub, const char *file,
		   char *name, size_t size)
{
	int n = !dir && !sub ? snprintf(name, size, "%s", file)
	      : !sub ? snprintf(name, size, "%s/%s", dir, file)
	      : !dir ? snprintf(name, size, "%s/%s", sub, file)
	      : snprintf(name, size, "%s/%s/%s", dir, sub, file);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	int fd = btr_file_open_named(name, BTR__NAMED_FILE_MAX, 0, 0);
	if (fd < 0)
		return -ENOENT;
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_ino == s->ino && st.st_dev == s->dev) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

/* CRC32 of the whole file (zlib's crc32 is the debuglink's). */
static int crc_file(int fd, uint32_t *out)
{
	unsigned char buf[16384];
	uLong crc = crc32(0, Z_NULL, 0);
	for (off_t off = 0;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	*out = (uint32_t)crc;
	return 0;
}

/* libdwfl's validate: the same build-id when the file has one, else the
 * debuglink's CRC (if @check).  Returns 1, 0, or -BTR_ERR_NOMEM (libelf
 * failed: the answer is unknown). */
static int dl_valid(const struct dlsearch *s, int fd, int check)
{
	if (s->idlen > 0) {
		Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		if (!e)
			return -BTR_ERR_NOMEM;
		uint8_t got[64];
		int n = elf_kind(e) == ELF_K_ELF ? btr__elf_build_id(e, got, sizeof(got)) : -1;
		elf_end(e);
		return n == s->idlen && !memcmp(got, s->id, (size_t)n);
	}
	uint32_t crc;
	return !check || (crc_file(fd, &crc) == 0 && crc == s->crc);
}

/* libdwfl's find_debuginfo_in_path for the file named @file: every entry
 * of @path in order.  An empty entry is the file's directory; an
 * absolute one D is D/<the file's directory>/, then that directory
 * without its first component, and so on down to D/; a relative one R is
 * <the file's directory>/R/, then (R's components chopped the same way)
 * the file's directory.  A leading '+' or '-' (of the path, or of an
 * entry) turns the CRC check on or off.  Returns 0 (the name in s->out),
 * -BTR_ERR_NOT_FOUND, or the error that ended the search. */
static int dl_search_path(struct dlsearch *s, const char *file, const char *path)
{
	const char *slash = strrchr(file, '/');
	const char *base = slash ? slash + 1 : file;
	char fdir[PATH_MAX], invented[PATH_MAX], ent[PATH_MAX], name[PATH_MAX];
	const char *link = s->link, *dirname = NULL;
	int cancheck = link && s->crc != 0;
	if (slash) {
		if ((size_t)(slash - file) >= sizeof(fdir))
			return -BTR_ERR_INVAL;
		memcpy(fdir, file, (size_t)(slash - file));
		fdir[slash - file] = 0;
		dirname = fdir;
	}
	if (!link) {  /* libdwfl's invented name; the basename is tried too */
		int n = snprintf(invented, sizeof(invented), "%s.debug", base);
		if (n < 0 || (size_t)n >= sizeof(invented))
			return -BTR_ERR_INVAL;
		link = invented;
	}
	int defcheck = 1;
	if (*path == '-' || *path == '+')
		defcheck = *path++ == '+';
	for (const char *p = path; p;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		if (len >= sizeof(ent))
			return -BTR_ERR_INVAL;
		memcpy(ent, p, len);
		ent[len] = 0;
		p = colon ? colon + 1 : NULL;
		char *e = ent;
		int check = defcheck;
		if (*e == '+' || *e == '-')
			check = *e++ == '+';
		check = check && cancheck;
		const char *dir = dirname, *sub = e;
		int explore = 1, try_base = !s->link;
		if (!*e) {
			sub = NULL;
			explore = try_base = 0;
		} else if (*e == '/') {
			if (!dirname || dirname[0] != '/')
				continue;
			dir = e;
			sub = dirname + 1;
		}
		for (;;) {
			if (sub && !*sub)
				break;
			int fd = dl_open(s, dir, sub, link, name, sizeof(name));
			if (fd < 0 && try_base)
				fd = dl_open(s, dir, sub, base, name, sizeof(name));
			if (fd < 0) {
				if (fd != -ENOENT && fd != -ENOTDIR)
					return btr_err_from_errno(-fd);
				if (!explore || !sub)
					break;
				sub = strchr(sub, '/');
				sub = sub ? sub + 1 : NULL;
				continue;
			}
			int ok = dl_valid(s, fd, check);
			close(fd);
			if (ok < 0)
				return ok;
			if (!ok)
				break;
			if (strlen(name) >= s->outsize)
				return -BTR_ERR_INVAL;
			strcpy(s->out, name);
			return 0;
		}
	}
	return -BTR_ERR_NOT_FOUND;
}

int btr__elf_find_debuglink(Elf *elf, const char *path, const char *dwfl_path, char *out,
			    size_t outsize)
{
	struct dlsearch s = { .out = out, .outsize = outsize };
	if (!out || !outsize)
		return -BTR_ERR_INVAL;
	s.link = debuglink(elf, &s.crc);
	s.idlen = btr__elf_build_id(elf, s.id, sizeof(s.id));
	if (s.idlen > (int)sizeof(s.id))
		return -BTR_ERR_UNSUPPORTED;
	struct stat st;
	if (stat(path, &st) == 0) {
		s.dev = st.st_dev;
		s.ino = st.st_ino;
	}
	if (!dwfl_path)
		dwfl_path = ":.debug:/usr/lib/debug";  /* libdwfl's DEFAULT_DEBUGINFO_PATH */
	int err = dl_search_path(&s, path, dwfl_path);
	/* As libdwfl: a symlink's debug file may be named after its target. */
	char canon[PATH_MAX];
	if (err == -BTR_ERR_NOT_FOUND && realpath(path, canon) && strcmp(path, canon))
		err = dl_search_path(&s, canon, dwfl_path);
	return err;
}

int btr__elf_got_slots(Elf *elf, int (*fn)(void *ctx, const struct btr__elf_got *g), void *ctx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		Elf_Scn *symscn = elf_getscn(elf, sh.sh_link);
		GElf_Shdr symsh;
		Elf_Data *rd = elf_getdata(scn, NULL), *sd = NULL;
		if (!rd)
			continue;
		if (symscn && gelf_getshdr(symscn, &symsh) && symsh.sh_type == SHT_DYNSYM)
			sd = elf_getdata(symscn, NULL);
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;
			GElf_Sym s;
			if (!gelf_getrela(rd, (int)i, &r))
				break;
			unsigned type = GELF_R_TYPE(r.r_info);
			struct btr__elf_got g = { .slot = r.r_offset, .addend = (uint64_t)r.r_addend };
			if (type == R_X86_64_IRELATIVE) {
				g.irelative = 1;
			} else {
				if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !sd ||
				    !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &s))
					continue;
				int st = GELF_ST_TYPE(s.st_info);
				if (st != STT_FUNC && st != STT_GNU_IFUNC && st != STT_NOTYPE)
					continue;
				g.name = elf_strptr(elf, symsh.sh_link, s.st_name);
				if (!g.name || !*g.name)
					continue;
				g.defined = s.st_shndx != SHN_UNDEF;
				g.typed = st != STT_NOTYPE;
			}
			int rc = fn(ctx, &g);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int btr__elf_offsets_link(const char *path, uint64_t off, uint64_t size, uint64_t *lo, uint64_t *hi)
{
	int fixed;
	uint64_t k;
	if (!size)
		return -BTR_ERR_INVAL;
	int rc = btr__elf_bias_rule(path, off, PROT_EXEC, &fixed, &k);
	if (rc < 0)
		return rc;
	/* k = p_vaddr - p_offset + off: the link address of @off */
	*lo = k;
	*hi = k + size - 1;
	return 0;
}
