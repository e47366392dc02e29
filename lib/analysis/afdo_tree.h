/* afdo_tree.h - an LLVM sample profile in memory: functions, their lines'
 * counts and call targets, inlined callees nested at call sites; the text
 * format's writer and reader (lib/analysis/afdo.c builds one from a trace,
 * lib/analysis/merge.c sums many).  Names are copied. */
#ifndef BTR_AFDO_TREE_H
#define BTR_AFDO_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct afdo_target {
	char *name;
	uint64_t count;
};

struct afdo_body {
	uint32_t off, disc;         /* line offset from the function's start, discriminator */
	uint64_t count;
	struct afdo_target *t;      /* call targets */
	size_t nt;
};

struct afdo_site;

struct afdo_fs {
	char *name;                 /* linkage name */
	uint64_t total, head;
	struct afdo_body *b;
	size_t nb;
	struct afdo_site *s;        /* inlined callees */
	size_t ns;
};

struct afdo_site {
	uint32_t off, disc;
	struct afdo_fs f;           /* f.name: the callee */
};

struct afdo_prof {
	struct afdo_fs *top;        /* top-level functions */
	size_t ntop;
	int nomem;                  /* an allocation failed: the tree is incomplete */
};

/* The entries (created zeroed when new); NULL when out of memory (then
 * p->nomem is set). */
struct afdo_fs *afdo_top(struct afdo_prof *p, const char *name);
struct afdo_fs *afdo_site(struct afdo_prof *p, struct afdo_fs *f, uint32_t off, uint32_t disc,
			  const char *callee);
struct afdo_body *afdo_line(struct afdo_prof *p, struct afdo_fs *f, uint32_t off, uint32_t disc);
/* Adds @count to call target @name of line @b.  Returns 0 or -BTR_ERR_NOMEM. */
int afdo_target(struct afdo_prof *p, struct afdo_body *b, const char *name, uint64_t count);

/* Writes @p in the text format, in a canonical order (functions by total
 * descending then name; lines by offset and discriminator; targets by
 * count descending then name), top-level functions without samples left
 * out.  Returns 0 or -BTR_ERR_IO. */
int afdo_write(struct afdo_prof *p, FILE *out);

/* Adds the profile in text format @d (@n bytes) to @p: counts of the same
 * function, line, target and call site add.  Returns 0, -BTR_ERR_BAD_FORMAT
 * (naming the line through btr_err), -BTR_ERR_NOMEM. */
int afdo_parse(struct afdo_prof *p, const char *d, size_t n);

/* Whether @d (@n bytes) starts like the text format ("name:N:N\n"). */
int afdo_looks_like(const char *d, size_t n);

void afdo_free(struct afdo_prof *p);

#endif
