/* codepages.h - a sparse copy of code bytes by address, page by page,
 * with which bytes are known: the QEMU plugin's record of the code it
 * has put into the trace (so it writes a version only when it differs)
 * and the stream's store of a process's code without a file (whose pages
 * the image reads in place, lib/image/image_code.c).  Not a public header. */
#ifndef BTR_CODEPAGES_H
#define BTR_CODEPAGES_H

#include <stddef.h>
#include <stdint.h>

#define CODEPAGE_SIZE 4096u

struct codepages;

/* Creates an empty store.  Returns 0 or -BTR_ERR_NOMEM. */
int codepages_new(struct codepages **out);
void codepages_free(struct codepages *cp);

/* The number of pages held (each costs sizeof a page: CODEPAGE_COST). */
size_t codepages_count(const struct codepages *cp);
#define CODEPAGE_COST (CODEPAGE_SIZE + CODEPAGE_SIZE / 8 + 16)

/* 1 if every byte of [@addr, @addr+@n) is known and equals @bytes. */
int codepages_same(const struct codepages *cp, uint64_t addr, const uint8_t *bytes, size_t n);

/* Stores @n bytes at @addr (known from now on).  Returns 0 or
 * -BTR_ERR_NOMEM (then nothing is stored). */
int codepages_put(struct codepages *cp, uint64_t addr, const uint8_t *bytes, size_t n);

/* Forgets [@lo, @hi) (the bytes become unknown; pages stay allocated, so
 * pointers given out before stay valid). */
void codepages_drop(struct codepages *cp, uint64_t lo, uint64_t hi);

/* The run of known bytes around @addr within its page: stores its bounds
 * in *@lo, *@hi and returns a pointer to the byte at *@lo (valid until
 * the store is freed), or NULL if @addr is not known. */
const uint8_t *codepages_run(const struct codepages *cp, uint64_t addr, uint64_t *lo, uint64_t *hi);

/* Calls @cb(ctx, addr, bytes, n) for every run of known bytes (at most a
 * page each), in no particular order; stops at @cb's nonzero value and
 * returns it, else 0. */
int codepages_foreach(const struct codepages *cp, int (*cb)(void *ctx, uint64_t addr, const uint8_t *bytes, size_t n),
		      void *ctx);

/* ---- code versions by content ----
 * A set of byte strings keyed by (hash, size): the distinct versions of
 * code a trace holds, each stored once (struct btr_rec_code). */
struct codeblobs;

int codeblobs_new(struct codeblobs **out);   /* 0 or -BTR_ERR_NOMEM */
void codeblobs_free(struct codeblobs *cb);

/* The writer's content key of @n bytes (64-bit FNV-1a).  Readers check
 * it before they store bytes under it (lib/stream/stream_code.c). */
uint64_t codeblobs_hash(const uint8_t *bytes, size_t n);

/* The bytes stored under (@hash, @size), or NULL (owned by @cb). */
const uint8_t *codeblobs_get(const struct codeblobs *cb, uint64_t hash, size_t size);

/* Stores a copy of @bytes under (@hash, @size), replacing what was
 * there.  Returns 0 or -BTR_ERR_NOMEM. */
int codeblobs_put(struct codeblobs *cb, uint64_t hash, size_t size, const uint8_t *bytes);

#endif
