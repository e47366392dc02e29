/* registry.h - the analyses' ops tables, for the registry (registry.c:
 * btr_analysis_formats).  Each lib/analysis/NAME.c defines its own; only
 * registry.c reads them by name. */
#ifndef BTR_ANALYSIS_REGISTRY_H
#define BTR_ANALYSIS_REGISTRY_H

#include "btr/analysis.h"

#define BTR_ANALYSES(X)                                                        \
	X(report) X(blocks) X(cov) X(annotate) X(cfg) X(check)                  \
	X(callgraph) X(flame) X(timeline) X(bolt) X(pprof) X(afdo)

#define X(n) extern const struct btr_analysis_ops btr__##n##_ops;
BTR_ANALYSES(X)
#undef X

/* btr_analysis_new for a view of another analysis' result (cov, cfg,
 * annotate over a blocks analysis): it takes no branches itself, and it
 * can be written once @source's run has ended (analysis.c). */
int btr__analysis_new_view(const struct btr_analysis_ops *ops, void *state, struct btr_analysis *source,
			   struct btr_analysis **out);

#endif
