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
};

/* CODE record @r: process @r->pid's image @img reads these bytes at
 * r->addr from now on.  Returns 0, 1 if it repeats bytes this stream has
 * not seen (a damaged or cut trace: ignored), or -BTR_ERR_NOMEM. */
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
