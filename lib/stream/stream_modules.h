/* stream_modules.h - process images and the module map of the common
 * branch stream (stream_modules.c).  Not a public header. */
#ifndef BTR_STREAM_MODULES_H
#define BTR_STREAM_MODULES_H

#include <stddef.h>
#include <stdint.h>

struct btr_stream;
struct btr_image;

/* Notes that process @pid has @file at @bias (mapped at [@start, @start +
 * @size), 0, 0 when not known); 0 or -BTR_ERR_NOMEM. */
int stream_mod_add(struct btr_stream *s, const char *file, uint64_t bias, uint64_t start, uint64_t size,
		   uint32_t pid);
/* 1 if process @pid has @file at @bias already. */
int stream_mod_is_loaded(const struct btr_stream *s, const char *file, uint64_t bias, uint32_t pid);
/* Forgets module @i (the last takes its place). */
void stream_mod_drop(struct btr_stream *s, size_t i);
/* The image of process @pid (see stream_modules.c); NULL only with @create
 * when out of memory. */
struct btr_image *stream_img_of(struct btr_stream *s, uint32_t pid, int create);
/* Adds the --elf files whose place is known to process @pid's @img. */
int stream_add_user_elfs(struct btr_stream *s, struct btr_image *img, uint32_t pid);

#endif
