/* registry.h - the library's analyses: the one list (BTR_ANALYSES) that
 * registry.c serves by name (btr_analysis_name, btr_analysis_formats,
 * btr_analysis_create) to the CLI's --format checks, the fuzz targets and
 * the Python package.  Each lib/analysis/NAME.c defines its ops table
 * btr__NAME_ops and its constructor by name btr__NAME_create (its own
 * public constructor with the arguments of struct btr_analysis_args);
 * only registry.c reads them.
 *
 * X(name, needs): needs is what btr_analysis_create checks for
 * (BTR_ANALYSIS_NEEDS_*).  An analysis that reads another's results comes
 * after it (blocks before the views). */
#ifndef BTR_ANALYSIS_REGISTRY_H
#define BTR_ANALYSIS_REGISTRY_H

#include "btr/analysis.h"

#define BTR_ANALYSES(X)                                                        \
	X(report, 0)                                                            \
	X(blocks, 0)                                                            \
	X(cov, BTR_ANALYSIS_NEEDS_BLOCKS)                                       \
	X(annotate, BTR_ANALYSIS_NEEDS_BLOCKS | BTR_ANALYSIS_NEEDS_FUNCTION)    \
	X(cfg, BTR_ANALYSIS_NEEDS_BLOCKS | BTR_ANALYSIS_NEEDS_FUNCTION)         \
	X(check, 0)                                                             \
	X(callgraph, 0)                                                         \
	X(flame, 0)                                                             \
	X(timeline, 0)                                                          \
	X(bolt, 0)                                                              \
	X(pprof, 0)                                                             \
	X(afdo, BTR_ANALYSIS_NEEDS_BLOCKS)                                      \
	X(crash, 0)                                                             \
	X(script, 0)

#define X(n, needs)                                                            \
	extern const struct btr_analysis_ops btr__##n##_ops;                    \
	int btr__##n##_create(const struct btr_analysis_args *a, struct btr_analysis **out);
BTR_ANALYSES(X)
#undef X

/* btr_analysis_new for a view of another analysis' result (cov, cfg,
 * annotate over a blocks analysis): it takes no branches itself, and it
 * can be written once @source's run has ended (analysis.c). */
int btr__analysis_new_view(const struct btr_analysis_ops *ops, void *state, struct btr_analysis *source,
			   struct btr_analysis **out);

#endif
