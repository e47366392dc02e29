/* elf_file.c - ELF files as such: opening through libelf, build-ids,
 * load biases of mappings, finding files by build-id (btr_elf_* in
 * btr/image.h).  Split from image.c, which places files into images. */
#include "btr/image.h"
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

/* Opens @path as an ELF file read through libelf's own mapping.  The
 * descriptor is closed before returning: images may hold hundreds of
 * shared objects, and a descriptor per module would exhaust the limit. */
int btr__elf_open(const char *path, Elf **out)
{
	elf_version(EV_CURRENT);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return btr_err_from_errno(errno);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int err = btr_err_from_errno(errno);
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		btr_debug("%s: not a regular file", path);
		return -BTR_ERR_BAD_ELF;
	}
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

int btr_elf_load_bias_prot(const char *path, uint64_t start, uint64_t pgoff, int prot,
			   uint64_t *bias)
{
	if (!path || !bias)
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
	int best = -1;
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
		*bias = eh.e_type == ET_EXEC ? 0 : start - (ph.p_vaddr - ph.p_offset + pgoff);
		err = 0;
	}
out:
	elf_end(elf);
	return err;
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
