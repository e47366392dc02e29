/* stream_elf.h - questions the common branch stream (lib/stream/stream.c) asks
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

/* A user ELF (btr_stream_opts.elfs, --elf) as the stream keeps it. */
struct user_elf {
	const char *path;
	const char *base_name;
	uint64_t base;
	int has_base;
	int is_exec;              /* ET_EXEC */
	uint8_t build_id[20];
	int build_id_len;         /* <= 0: none */
};

/* Finds the file to load for module record @m into @out (@outsz bytes).
 * Order: a user ELF of @uelfs (@n_uelfs) without a base, matching by
 * build-id or file name, ROOT/path (@root may be NULL), path, the
 * NULL-terminated @debug_dirs (may be NULL) by build-id, then
 * DIR/basename.  The first candidate whose build-id matches wins; if
 * none matches, the first existing one is used and *@mismatch set (its
 * code is not what ran).  Returns 0 or -BTR_ERR_NOENT. */
int stream_find_module_file(const struct user_elf *uelfs, unsigned n_uelfs, const char *root,
			    const char *const *debug_dirs, const struct btr_rec_module *m, char *out, size_t outsz,
			    int *mismatch);

/* What a module record was placed with: the file found for it and the
 * rule of its load bias. */
struct stream_placed {
	int found;        /* stream_find_module_file found a file */
	int mismatch;     /* ... whose build-id differs from the record's */
	char *file;       /* its path (owned by the memo) */
	int bias_err;     /* 0, or btr__elf_bias_rule's error */
	int fixed;        /* the bias is 0 (ET_EXEC), else start - k */
	uint64_t k;
};

/* Module records resolved so far, by (path, build-id, file offset, size):
 * the same file mapped by many processes (a shell loop's /bin/true, libc
 * in every process of a make) is searched for, opened and measured once
 * per stream.  Zero-initialized; files are taken not to change while a
 * stream reads. */
struct stream_place_memo {
	struct stream_place_ent *v;
	size_t n, cap;
	uint32_t *slot;   /* open addressing: index + 1, 0 empty */
	size_t nslot;
};

/* The placement of module record @m, searched (stream_find_module_file
 * with the other arguments, then btr__elf_bias_rule) the first time its
 * key is seen.  NULL only when memory ran out. */
const struct stream_placed *stream_place(struct stream_place_memo *mm, const struct user_elf *uelfs,
					 unsigned n_uelfs, const char *root, const char *const *debug_dirs,
					 const struct btr_rec_module *m);
void stream_place_memo_free(struct stream_place_memo *mm);

#endif
