/* registry.c - the library's analyses by name (registry.h, the one list):
 * their names, output formats and needs, and creating one by name.  The
 * CLI's --format check and help, the fuzz targets and the Python package
 * take their lists from here.  Reads the ops tables and constructors of
 * the analysis files; none of them calls back here. */
#include <string.h>

#include "btr/analysis.h"
#include "btr/error.h"
#include "internal.h"
#include "registry.h"

static const struct entry {
	const struct btr_analysis_ops *ops;
	int (*create)(const struct btr_analysis_args *a, struct btr_analysis **out);
	unsigned needs;
} all[] = {
#define X(n, needs) { &btr__##n##_ops, btr__##n##_create, needs },
	BTR_ANALYSES(X)
#undef X
};

static const struct entry *find(const char *name)
{
	for (size_t i = 0; name && i < BTR_ARRAY_SIZE(all); i++)
		if (!strcmp(all[i].ops->name, name))
			return &all[i];
	return NULL;
}

const char *btr_analysis_name(size_t i)
{
	return i < BTR_ARRAY_SIZE(all) ? all[i].ops->name : NULL;
}

const char *const *btr_analysis_formats(const char *name)
{
	const struct entry *e = find(name);
	return e ? e->ops->formats : NULL;
}

unsigned btr_analysis_needs(const char *name)
{
	const struct entry *e = find(name);
	return e ? e->needs : 0;
}

int btr_analysis_create(const char *name, const struct btr_analysis_args *args, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(args, sizeof(*args)))
		return -BTR_ERR_INVAL;
	*out = NULL;
	const struct entry *e = find(name);
	if (!e)
		return -BTR_ERR_NOT_FOUND;
	struct btr_analysis_args a;
	BTR_OPTS_COPY(&a, args);
	if (((e->needs & BTR_ANALYSIS_NEEDS_BLOCKS) && !a.blocks) ||
	    ((e->needs & BTR_ANALYSIS_NEEDS_FUNCTION) && !a.function))
		return -BTR_ERR_INVAL;
	return e->create(&a, out);
}
