/* stream_code.h - the common branch stream's (lib/stream/stream.c) code without a
 * file: CODE records applied to each process's image in the trace's
 * order, every version's bytes kept once by content key.  Not a public
 * header. */
#ifndef BTR_STREAM_CODE_H
#define BTR_STREAM_CODE_H

#include <stddef.h>
#include <stdint.h>

#include "btr/image.h"
#include "btr/trace.h"
#include "image/codepages.h"

/* Zero-initialized is empty; owned by the stream. */
struct stream_code {
	struct sc_proc {
		uint32_t pid;
		struct codepages *cp;
	} *p;
	size_t n_p, cap_p;
	struct codeblobs *blobs;   /* every version's bytes by key */
	uint64_t records, bytes, unknown;  /* CODE records, bytes stored, repeats of bytes never seen */
	uint64_t symbols;                  /* SYMBOL records */
	/* What the records may cost (docs/reliability.md, "Bounds"): the
	 * bytes of code hashed, stored and paged in, the symbols kept, and
	 * the strings of module, process and thread name records count
	 * against @limit; past it, records are ignored (said once). */
	uint64_t limit;                    /* 0: STREAM_CODE_BASE */
	uint64_t held;                     /* counted so far */
	uint64_t forged, over;             /* records ignored: bytes not matching their hash; past the limit */
};

/* The limit of a trace file of @file_size bytes: a constant and as much
 * again as the file (a trace holding its code uncompressed stays under
 * it; a compressed bomb does not get further). */
#define STREAM_CODE_BASE (16ull << 20)
void stream_code_limit(struct stream_code *c, uint64_t file_size);

/* 1 if @cost more bytes fit under the limit (they are counted), else 0
 * (said once: the record is to be ignored).  The stream asks it for the
 * records whose strings its consumers keep: module, exec, process,
 * thread name. */
int stream_code_afford(struct stream_code *c, uint64_t cost);

/* What record @rec's strings cost (0: not counted): module, exec, process
 * and thread name records. */
uint64_t stream_code_cost(const struct btr_record *rec);

/* CODE record @r: process @r->pid's image @img reads these bytes at
 * r->addr from now on.  Bytes are kept once per content, checked against
 * their hash first.  Returns 0, 1 if it is ignored (it repeats bytes this
 * stream has not seen, as in a damaged or cut trace; its bytes do not
 * match its hash; or the limit is reached), or -BTR_ERR_NOMEM. */
int stream_code_record(struct stream_code *c, struct btr_image *img, const struct btr_rec_code *r);

/* SYMBOL record @r: a name for generated code in image @img (the module
 * holding these is named perf-PID.map or jit-PID.dump by the first).
 * Returns 0 or -BTR_ERR_NOMEM (a record over wrapping addresses is
 * ignored). */
int stream_code_symbol(struct stream_code *c, struct btr_image *img, const struct btr_rec_symbol *r);

/* A CODE or SYMBOL record of the process whose image is @img (NULL: out
 * of memory): as stream_code_record (a repeat of unknown bytes ignored)
 * or stream_code_symbol.  Returns 0 or -BTR_ERR_NOMEM. */
int stream_code_on(struct stream_code *c, struct btr_image *img, const struct btr_record *rec);

/* Process @pid's code from CODE records leaves image @img (exec, a pid
 * starting over). */
void stream_code_clear(struct stream_code *c, struct btr_image *img, uint32_t pid);

/* A module was mapped over [@start, @start+@size) in process @pid: the
 * code records there no longer hold (the image already has the module). */
void stream_code_mapped(struct stream_code *c, uint32_t pid, uint64_t start, uint64_t size);

void stream_code_free(struct stream_code *c);

#endif
