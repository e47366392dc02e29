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

#endif
