/* stream_elf.c - ELF files on disk as the common branch stream places
 * recorded modules (see stream_elf.h). */
#include "stream_elf.h"
#include "btr/file.h"
#include "elf/elf_priv.h"
#include "internal.h"

#include <gelf.h>
#include <libelf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btr/image.h"

/* Reads the ELF type of @path: 1 for ET_EXEC, 0 for others, negative on
 * error.  Needed because ET_EXEC files can be placed without knowing where
 * the recording mapped them. */
int stream_elf_is_exec(const char *path)
{
	int fd = btr_file_open_named(path, BTR__NAMED_FILE_MAX, 0, 0);
	if (fd < 0)
		return -BTR_ERR_NOENT;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	int rc = -BTR_ERR_BAD_ELF;
	GElf_Ehdr eh;
	if (e && elf_kind(e) == ELF_K_ELF && gelf_getehdr(e, &eh))
		rc = eh.e_type == ET_EXEC;
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

const char *stream_base_name(const char *p)
{
	const char *b = strrchr(p, '/');
	return b ? b + 1 : p;
}

int stream_file_exists(const char *p)
{
	return access(p, R_OK) == 0;
}

void stream_hex_id(const uint8_t *id, int len, char *out)
{
	for (int i = 0; i < len; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
	out[2 * (len > 0 ? len : 0)] = 0;
}

/* Size of the mapping an executable segment of ELF @path would get when
 * mapped from file offset @pgoff: from @pgoff to the end of the PF_X
 * PT_LOAD that holds it, page-aligned.  0 if unknown (not readable as
 * ELF); 1 if no executable segment holds @pgoff (a code mapping there
 * cannot come from this file). */
uint64_t stream_elf_code_span(const char *path, uint64_t pgoff)
{
	int fd = btr_file_open_named(path, BTR__NAMED_FILE_MAX, 0, 0);
	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	uint64_t span = 0;
	size_t n = 0;
	if (e && elf_kind(e) == ELF_K_ELF && elf_getphdrnum(e, &n) == 0) {
		span = 1;
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
				continue;
			uint64_t lo = ph.p_offset & ~0xfffull, hi = (ph.p_offset + ph.p_filesz + 0xfff) & ~0xfffull;
			if (pgoff >= lo && pgoff < hi) {
				span = hi - pgoff;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return span;
}

/* Candidate check: returns 1 if @file exists and its build-id matches
 * the record's (or either has none), 0 if it exists but its build-id
 * differs, -1 if it does not exist or cannot be the file that ran.
 * Without a recorded build-id the only evidence is the mapping's size: a
 * code segment of another length is another program that happens to have
 * the same path here (old perf.data files name /usr/bin/perf, /lib64/...),
 * and placing its code would be worse than having none. */
int stream_candidate_matches(const char *file, const struct btr_rec_module *m)
{
	if (!stream_file_exists(file))
		return -1;
	if (!m->build_id_len) {
		uint64_t span = m->size ? stream_elf_code_span(file, m->pgoff) : 0;
		if (span == 1) {
			btr_info("%s: no code at file offset 0x%" PRIx64 ": not the file that ran", file, m->pgoff);
			return -1;
		}
		if (span && (span > m->size + 0x1000 || m->size > span + 0x1000)) {
			btr_info("%s: code segment of 0x%" PRIx64 " bytes, the recording mapped 0x%" PRIx64
				 ": not the file that ran", file, span, m->size);
			return -1;
		}
		return 1;
	}
	uint8_t id[64];
	int n = btr_elf_build_id(file, id, sizeof(id));
	if (n < 0)
		return n == -BTR_ERR_NOT_FOUND ? 1 : 0;
	return n == m->build_id_len && !memcmp(id, m->build_id, (size_t)n);
}

/* Finds the file to load for module record @m into @out.  Order: a user
 * ELF (--elf) matching by build-id or file name, ROOT/path, path, the
 * debug directories by build-id, then DIR/basename.  The first candidate
 * whose build-id matches wins; if none matches, the first existing one
 * is used and *@mismatch set (its code is not what ran). */
int stream_find_module_file(const struct user_elf *uelfs, unsigned n_uelfs, const char *root,
			    const char *const *debug_dirs, const struct btr_rec_module *m, char *out, size_t outsz,
			    int *mismatch)
{
	const char *path = m->path;
	const char *bn = stream_base_name(path);
	char first[4096] = "";
	char buf[4096];
	*mismatch = 0;

#define TRY(p)                                                                          \
	do {                                                                            \
		int r_ = stream_candidate_matches((p), m);                                     \
		if (r_ == 1) {                                                          \
			snprintf(out, outsz, "%s", (p));                                \
			return 0;                                                       \
		}                                                                       \
		if (r_ == 0 && !first[0])                                               \
			snprintf(first, sizeof(first), "%s", (p));                      \
	} while (0)

	/* User ELFs by build-id first: an exact match beats any name. */
	if (m->build_id_len) {
		for (unsigned i = 0; i < n_uelfs; i++) {
			const struct user_elf *u = &uelfs[i];
			if (!u->has_base && u->build_id_len == m->build_id_len &&
			    !memcmp(u->build_id, m->build_id, m->build_id_len)) {
				snprintf(out, outsz, "%s", u->path);
				return 0;
			}
		}
	}
	for (unsigned i = 0; i < n_uelfs; i++) {
		const struct user_elf *u = &uelfs[i];
		if (!u->has_base && !strcmp(u->base_name, bn))
			TRY(u->path);
	}
	if (root && path[0] == '/') {
		snprintf(buf, sizeof(buf), "%s%s", root, path);
		TRY(buf);
	}
	TRY(path);
	if (debug_dirs) {
		size_t nd = 0;
		while (debug_dirs[nd])
			nd++;
		if (m->build_id_len && nd &&
		    btr_elf_find_build_id(m->build_id, m->build_id_len, debug_dirs, nd, buf, sizeof(buf)) == 0)
			TRY(buf);
		for (size_t i = 0; i < nd; i++) {
			snprintf(buf, sizeof(buf), "%s/%s", debug_dirs[i], bn);
			TRY(buf);
		}
	}
#undef TRY
	if (first[0]) {
		snprintf(out, outsz, "%s", first);
		*mismatch = 1;
		return 0;
	}
	return -BTR_ERR_NOENT;
}

struct stream_place_ent {
	char *path;
	uint8_t build_id[20];
	uint8_t build_id_len;
	uint64_t pgoff, size;
	uint64_t hash;
	struct stream_placed p;
};

static uint64_t place_hash(const struct btr_rec_module *m)
{
	uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a */
	for (const char *c = m->path; *c; c++)
		h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
	for (unsigned i = 0; i < m->build_id_len && i < sizeof(m->build_id); i++)
		h = (h ^ m->build_id[i]) * 0x100000001b3ull;
	h = (h ^ m->pgoff) * 0x100000001b3ull;
	return (h ^ m->size) * 0x100000001b3ull;
}

static int place_same(const struct stream_place_ent *e, uint64_t h, const struct btr_rec_module *m)
{
	unsigned len = m->build_id_len > sizeof(e->build_id) ? sizeof(e->build_id) : m->build_id_len;
	return e->hash == h && e->pgoff == m->pgoff && e->size == m->size && e->build_id_len == len &&
	       !memcmp(e->build_id, m->build_id, e->build_id_len) && !strcmp(e->path, m->path);
}

static int place_rehash(struct stream_place_memo *mm, size_t nslot)
{
	uint32_t *slot = calloc(nslot, sizeof(*slot));
	if (!slot)
		return -BTR_ERR_NOMEM;
	for (size_t i = 0; i < mm->n; i++) {
		size_t j = mm->v[i].hash & (nslot - 1);
		while (slot[j])
			j = (j + 1) & (nslot - 1);
		slot[j] = (uint32_t)i + 1;
	}
	free(mm->slot);
	mm->slot = slot;
	mm->nslot = nslot;
	return 0;
}

const struct stream_placed *stream_place(struct stream_place_memo *mm, const struct user_elf *uelfs,
					 unsigned n_uelfs, const char *root, const char *const *debug_dirs,
					 const struct btr_rec_module *m)
{
	uint64_t h = place_hash(m);
	size_t j = 0;
	if (mm->nslot) {
		for (j = h & (mm->nslot - 1); mm->slot[j]; j = (j + 1) & (mm->nslot - 1))
			if (place_same(&mm->v[mm->slot[j] - 1], h, m))
				return &mm->v[mm->slot[j] - 1].p;
	}
	if (2 * (mm->n + 1) > mm->nslot) {
		if (place_rehash(mm, mm->nslot ? 2 * mm->nslot : 64) < 0)
			return NULL;
		for (j = h & (mm->nslot - 1); mm->slot[j]; j = (j + 1) & (mm->nslot - 1))
			;
	}
	if (btr__grow((void **)&mm->v, &mm->cap, mm->n + 1, sizeof(*mm->v), 32) < 0)
		return NULL;
	struct stream_place_ent *e = &mm->v[mm->n];
	memset(e, 0, sizeof(*e));
	char file[4096];
	e->path = strdup(m->path);
	if (!e->path)
		return NULL;
	e->build_id_len = m->build_id_len > sizeof(e->build_id) ? sizeof(e->build_id) : m->build_id_len;
	memcpy(e->build_id, m->build_id, e->build_id_len);
	e->pgoff = m->pgoff;
	e->size = m->size;
	e->hash = h;
	if (stream_find_module_file(uelfs, n_uelfs, root, debug_dirs, m, file, sizeof(file), &e->p.mismatch) == 0) {
		e->p.found = 1;
		if (!(e->p.file = strdup(file))) {
			free(e->path);
			return NULL;
		}
		e->p.bias_err = btr__elf_bias_rule(file, m->pgoff, -1, &e->p.fixed, &e->p.k);
	}
	mm->slot[j] = (uint32_t)mm->n + 1;
	mm->n++;
	return &e->p;
}

void stream_place_memo_free(struct stream_place_memo *mm)
{
	for (size_t i = 0; i < mm->n; i++) {
		free(mm->v[i].path);
		free(mm->v[i].p.file);
	}
	free(mm->v);
	free(mm->slot);
	memset(mm, 0, sizeof(*mm));
}
