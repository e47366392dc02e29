/* btr/cfg.h - a function's control-flow graph as a Graphviz heat map
 * (docs/cfg.md).  Built from the function's code (btr_funcgraph_build):
 * blocks that never ran are shown greyed; executed blocks are coloured on
 * a heat scale by executions; edges are labelled with their counts and
 * drawn thicker when hot; labels carry address, symbol+offset and source
 * line.  With a second blocks analysis (another run) blocks are coloured
 * by the difference instead. */
#ifndef BTR_CFG_H
#define BTR_CFG_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdio.h>
#include "btr/analysis.h"

#ifdef __cplusplus
extern "C" {
#endif

struct btr_cfg_opts {
	size_t sz;                       /* sizeof(struct btr_cfg_opts) */
	const char *function;            /* name (btr_image_function_by_name forms) */
	unsigned max_blocks;             /* nodes before cold regions collapse; 0: 300 */
	struct btr_analysis *diff;       /* a finished blocks analysis of run B, or
					  * NULL; borrowed */
};

/* Creates a CFG analysis over @blocks (a blocks analysis earlier in the
 * same run; borrowed).  @opts is copied (strings borrowed).  write()
 * format "dot" (the default) writes one digraph; -BTR_ERR_NOT_FOUND if
 * the function is in no module of the trace.  Returns 0, -BTR_ERR_INVAL,
 * -BTR_ERR_NOMEM. */
int btr_cfg_new(struct btr_analysis *blocks, const struct btr_cfg_opts *opts, struct btr_analysis **out);

/* After write(): blocks drawn, and how many were collapsed into cold
 * regions (0: none).  -1 before a successful write. */
long btr_cfg_collapsed(const struct btr_analysis *cfg);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
