/* image_code.h - code without a file in an image (lib/image/image_code.c):
 * bytes from the trace's CODE records, kept in a struct codepages that
 * the image reads in place.  Not a public header. */
#ifndef BTR_IMAGE_CODE_H
#define BTR_IMAGE_CODE_H

#include <stddef.h>
#include <stdint.h>

#include "btr/image.h"
#include "codepages.h"

/* lib/image/image.c: [@start, @end) -> @p in @img, replacing what was there;
 * @own (or NULL) is a malloc'ed block the image frees with itself.
 * Returns 0 or -BTR_ERR_NOMEM. */
int image_insert_bytes(struct btr_image *img, const uint8_t *p, uint64_t start, uint64_t end, void *own);

/* Stores @n bytes of code at @addr in @cp and makes @img read them from
 * there (every page's run of known bytes is one section).  Returns 0 or
 * -BTR_ERR_NOMEM. */
int image_code_put(struct btr_image *img, struct codepages *cp, uint64_t addr, const uint8_t *bytes, size_t n);

/* Everything of @cp leaves @img and @cp (the process execs). */
void image_code_clear(struct btr_image *img, struct codepages *cp);

/* Names [@addr, @addr+@size) of @img @name (a perf map line, a jitdump
 * code load): a function for every lookup where no module symbol is (code
 * without a file); the same @addr again gives the later name and the
 * larger extent.  The first call
 * names the module that holds them @source.  Returns 0, -BTR_ERR_INVAL or
 * -BTR_ERR_NOMEM. */
int image_code_symbol(struct btr_image *img, uint64_t addr, uint64_t size, const char *name, const char *source);

/* 1 if a symbol of generated code (image_code_symbol) holds @addr: code
 * its runtime named in a perf map or jitdump. */
int image_code_named(struct btr_image *img, uint64_t addr);

/* Copies @src's symbols of generated code, and the bytes it holds under
 * them, into @dst, if @path names the module that holds them (the views
 * keep a module's code after the stream is gone).  Returns 0,
 * -BTR_ERR_NOT_FOUND (@path is another module) or -BTR_ERR_NOMEM. */
int image_code_copy(struct btr_image *dst, struct btr_image *src, const char *path);

#endif
