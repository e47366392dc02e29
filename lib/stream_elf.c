/* stream_elf.c - ELF files on disk as the common branch stream places
 * recorded modules (see stream_elf.h). */
#include "stream_elf.h"
#include "internal.h"

#include <gelf.h>
#include <libelf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "btr/image.h"

/* Reads the ELF type of @path: 1 for ET_EXEC, 0 for others, negative on
 * error.  Needed because ET_EXEC files can be placed without knowing where
 * the recording mapped them. */
int stream_elf_is_exec(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
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
	int fd = open(path, O_RDONLY | O_CLOEXEC);
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
