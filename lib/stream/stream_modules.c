/* stream_modules.c - the common branch stream's process images and module
 * map: which module file is placed where in which process's image (the
 * stream's --elf files included).  The bookkeeping only: the MODULE_LOAD and
 * MODULE_UNLOAD events and the records that move modules are stream.c's,
 * which calls into this file, never the other way. */
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "btr/image.h"
#include "stream_modules.h"
#include "stream_priv.h"

int stream_mod_add(struct btr_stream *s, const char *file, uint64_t bias, uint64_t start, uint64_t size,
		      uint32_t pid)
{
	if (s->n_mods == s->cap_mods) {
		size_t ncap = s->cap_mods ? s->cap_mods * 2 : 16;
		struct loaded_module *nm = realloc(s->mods, ncap * sizeof(*nm));
		if (!nm)
			return -BTR_ERR_NOMEM;
		s->mods = nm;
		s->cap_mods = ncap;
	}
	char *f = strdup(file);
	if (!f)
		return -BTR_ERR_NOMEM;
	s->mods[s->n_mods++] = (struct loaded_module){ .file = f, .bias = bias, .start = start, .size = size,
					       .pid = pid };
	return 0;
}

int stream_mod_is_loaded(const struct btr_stream *s, const char *file, uint64_t bias, uint32_t pid)
{
	for (size_t i = 0; i < s->n_mods; i++)
		if (s->mods[i].bias == bias && s->mods[i].pid == pid && !strcmp(s->mods[i].file, file))
			return 1;
	return 0;
}

void stream_mod_drop(struct btr_stream *s, size_t i)
{
	free(s->mods[i].file);
	s->mods[i] = s->mods[--s->n_mods];
}

/* The image of process @pid: the first image for pid 0 and for the first
 * process named; with @create a new one for another process (NULL only
 * when out of memory), else the first image for a process not seen. */
struct btr_image *stream_img_of(struct btr_stream *s, uint32_t pid, int create)
{
	if (!pid)
		return s->img;
	if (s->last_proc < s->n_procs && s->procs[s->last_proc].pid == pid)
		return s->procs[s->last_proc].img;
	for (size_t i = 0; i < s->n_procs; i++)
		if (s->procs[i].pid == pid) {
			s->last_proc = i;
			return s->procs[i].img;
		}
	if (!create && s->n_procs)
		return s->img;
	if (s->n_procs == s->cap_procs) {
		size_t nc = s->cap_procs ? s->cap_procs * 2 : 8;
		struct proc_image *np = realloc(s->procs, nc * sizeof(*np));
		if (!np)
			return NULL;
		s->procs = np;
		s->cap_procs = nc;
	}
	struct btr_image *img = s->img;
	if (s->n_procs) {
		if (btr_image_new(&img) < 0)
			return NULL;
		if (stream_add_user_elfs(s, img, pid) < 0) {
			btr_image_free(img);
			return NULL;
		}
	}
	s->procs[s->n_procs] = (struct proc_image){ .pid = pid, .img = img };
	s->last_proc = s->n_procs++;
	return img;
}

/* Adds the user ELFs whose place is known (explicit base, or ET_EXEC) to
 * process @pid's image @img: they apply to every process. */
int stream_add_user_elfs(struct btr_stream *s, struct btr_image *img, uint32_t pid)
{
	for (unsigned i = 0; i < s->n_uelfs; i++) {
		struct user_elf *u = &s->uelfs[i];
		if (!u->has_base && !u->is_exec)
			continue;
		uint64_t base = u->has_base ? u->base : 0;
		if (stream_mod_is_loaded(s, u->path, base, pid))
			continue;
		int rc = btr_image_add_elf(img, u->path, base, 0);
		if (rc < 0) {
			btr_info("%s: %s", u->path, btr_errstr(rc));
			return rc;
		}
		rc = stream_mod_add(s, u->path, base, 0, 0, pid);
		if (rc < 0)
			return rc;
	}
	return 0;
}
