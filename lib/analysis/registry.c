/* registry.c - the analyses by name (btr_analysis_formats): the one list
 * the CLI's --format checks, its help and the fuzz targets take an
 * analysis' output formats from.  Reads the ops tables of the analysis
 * files (registry.h); none of them calls back here. */
#include <string.h>

#include "btr/analysis.h"
#include "registry.h"

static const struct btr_analysis_ops *const all[] = {
#define X(n) &btr__##n##_ops,
	BTR_ANALYSES(X)
#undef X
};

static const struct btr_analysis_ops *find(const char *name)
{
	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

const char *const *btr_analysis_formats(const char *name)
{
	const struct btr_analysis_ops *o = find(name);
	return o ? o->formats : NULL;
}
