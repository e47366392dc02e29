/* jitsyms.h - what JIT runtimes say about their code (docs/record.md,
 * "Code without a file"): perf maps (/tmp/perf-PID.map, one "START SIZE
 * name" line per function, hexadecimal) and jitdump files (jit-PID.dump,
 * tools/perf/Documentation/jitdump-specification.txt: code load records
 * with the code's bytes, code moves).  Both become trace records: SYMBOL
 * for every function, and, from a jitdump, CODE with its bytes.  Used by
 * the qemu recorder at the end of a recording and by the perf.data
 * reader.  Not a public header. */
#ifndef BTR_JITSYMS_H
#define BTR_JITSYMS_H

#include <stdint.h>
#include <sys/types.h>

#include "btr/trace.h"

/* Receives one record (valid during the call); nonzero stops the read
 * and is returned. */
typedef int (*jit_rec_fn)(void *ctx, const struct btr_record *rec);

/* Reads perf map @path of process @pid: one SYMBOL record per valid line
 * (others are skipped).  The map is read only if it is a regular file,
 * not a symlink, of at most JIT_PERF_MAP_MAX bytes, owned by @uid (the
 * traced process's user): /tmp/perf-PID.map is a name anyone can plant
 * (btr_file_open_named warns once when it refuses one).  Returns the
 * number of records, -BTR_ERR_NOENT and the errors of open, or @cb's
 * value. */
#define JIT_PERF_MAP_MAX (256ull << 20)
#define JIT_DUMP_MAX (256ull << 20)
int jit_perf_map_read(const char *path, uint32_t pid, uid_t uid, jit_rec_fn cb, void *ctx);

/* Reads jitdump @path for process @pid: per code load a SYMBOL record
 * and, with @with_code, a CODE record of its bytes; per code move the
 * same at the new address (bytes of the code loaded under that index).
 * Only a regular file of at most JIT_DUMP_MAX bytes is read.
 * Returns the number of code loads, -BTR_ERR_NOENT and the errors of
 * open, -BTR_ERR_BAD_FORMAT (not a jitdump, another byte order, or not a
 * regular file: a FIFO or device is never read, nor waited for),
 * -BTR_ERR_LIMIT (over 256 MiB), or @cb's value.  A file cut short (the runtime still writing) ends the
 * read without an error. */
int jit_dump_read(const char *path, uint32_t pid, int with_code, jit_rec_fn cb, void *ctx);

/* 1 if @path names a jitdump file (base name jit-PID.dump) */
int jit_dump_path(const char *path);

/* Records read from a jitdump, kept (owned copies) to be handed out one
 * by one: the perf.data reader's, which delivers them after the MMAP of
 * the jitdump marker (as `perf inject --jit` reads that file).
 * Zero-initialized is empty. */
struct jit_queue {
	struct btr_record *v;
	size_t n, next, cap;
	uint64_t read;   /* jitdump bytes read so far (256 MiB in all at most) */
};

/* Appends the records of jitdump @path (process @pid; symbols and code)
 * to @q.  Returns the number of code loads or a jit_dump_read error
 * (-BTR_ERR_LIMIT also when @q's jitdumps together pass 256 MiB). */
int jit_queue_load(struct jit_queue *q, const char *path, uint32_t pid);

/* The next record into *@rec (valid until the next call): 1, or 0 when
 * @q is empty (its storage freed). */
int jit_queue_pop(struct jit_queue *q, struct btr_record *rec);

void jit_queue_free(struct jit_queue *q);

#endif
