/* stream_elf.h - questions the common branch stream (lib/stream.c) asks
 * of ELF files on disk while placing recorded modules: is it ET_EXEC, how
 * large is its code segment, can it be the file that ran.  Not a public
 * header. */
#ifndef BTR_STREAM_ELF_H
#define BTR_STREAM_ELF_H

#include <stdint.h>

#include "btr/trace.h"

/* ELF type of @path: 1 for ET_EXEC, 0 for others, negative on error. */
int stream_elf_is_exec(const char *path);

/* The part of @p after its last '/'. */
const char *stream_base_name(const char *p);

/* Nonzero if @p is readable. */
int stream_file_exists(const char *p);

/* @len bytes of @id as hex into @out (2 * @len + 1 bytes). */
void stream_hex_id(const uint8_t *id, int len, char *out);

/* Size of the mapping an executable segment of ELF @path would get when
 * mapped from file offset @pgoff; 0 if unknown, 1 if no executable
 * segment holds @pgoff. */
uint64_t stream_elf_code_span(const char *path, uint64_t pgoff);

/* 1 if @file exists and can be the file of module record @m (build-ids
 * match, or code segment size fits without one), 0 if it exists but its
 * build-id differs, -1 if it does not exist or cannot be it. */
int stream_candidate_matches(const char *file, const struct btr_rec_module *m);

#endif
