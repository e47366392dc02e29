/* btr/blocks.h - basic blocks and edges with counts, by module-relative
 * address: the shared base of every view (coverage, annotate, CFG, diff,
 * HTML report) and of profiles.
 *
 * The blocks analysis (an analysis, btr/analysis.h) counts, per thread:
 *
 *   block  [start, end]: the code between the target of the thread's
 *          previous branch (start) and the source of its next branch
 *          (end, the address of the branch instruction), executed .count
 *          times - exactly btr report's blocks (lib/report.c).  A block
 *          whose start is unknown (first branch after an enable, a gap,
 *          an LBR snapshot start) is not a block; its branch still is an
 *          edge.
 *   edge   from -> to of each branch: .from is the branch instruction,
 *          .to its target; a not-taken conditional branch is an edge to
 *          its fall-through (.taken 0).
 *
 * Keys are (module, link address): a run-time address minus its module's
 * load bias, the address objdump shows.  So two runs of a PIE, or of a
 * program whose libraries moved, compare directly, and results outlive
 * the trace's images.  Code outside every module (JIT, vdso without a
 * file) keeps its run-time address under module BTR_BLOCKS_NO_MODULE.
 * Modules are identified by their path: the same file in two processes
 * is one module.
 *
 * Memory grows with the distinct blocks and edges (the code), never with
 * the trace's length.  Use:
 *
 *     struct btr_analysis *bl;
 *     btr_blocks_new(&bl);
 *     btr_analysis_run(path, &sopts, &bl, 1, &info);   (with others too)
 *     const struct btr_blocks_result *r = btr_blocks_get(bl);
 *
 * and for one function's control-flow graph built from its code and
 * annotated with the counts, btr_funcgraph_build().
 */
#ifndef BTR_BLOCKS_H
#define BTR_BLOCKS_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/analysis.h"
#include "btr/image.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BTR_BLOCKS_NO_MODULE UINT32_MAX

struct btr_blocks_module {
	const char *path;   /* the file loaded for it (owned by the analysis) */
	const char *name;   /* base name of @path (owned by the analysis) */
	uint64_t base;      /* lowest link address of its PT_LOAD segments */
	uint64_t size;      /* extent of its PT_LOAD segments */
};

/* An --ip-filter range of a trace: link addresses [start, end] of @path
 * (as recorded; "" for kernel addresses), or, if the file could not be
 * read, file offsets with @offsets 1. */
struct btr_blocks_range {
	const char *path;   /* owned by the analysis */
	uint64_t start, end;
	int offsets;
};

struct btr_block {
	uint32_t module;    /* index into modules, or BTR_BLOCKS_NO_MODULE */
	uint64_t start;     /* link address of the first instruction */
	uint64_t end;       /* link address of the last one (the branch) */
	uint64_t count;     /* executions */
	uint64_t insns;     /* instructions executed in it, all executions
			     * (0 for sources without instruction counts) */
};

struct btr_edge {
	uint32_t from_module, to_module;
	uint64_t from;      /* link address of the branch instruction */
	uint64_t to;        /* link address of the target (fall-through if
			     * not taken) */
	uint64_t count;
	uint8_t kind;       /* enum btr_branch_kind */
	uint8_t taken;      /* 0: a not-taken conditional */
};

struct btr_blocks_result {
	/* Sorted by path (not by when they were met: the same for counted
	 * and ordered branches). */
	const struct btr_blocks_module *modules; size_t n_modules;
	/* Sorted by (module, start, end); blocks that cross a module's end
	 * or are longer than 1 MiB (starts from another context) left out. */
	const struct btr_block *blocks; size_t n_blocks;
	/* Sorted by (from_module, from, to_module, to, taken). */
	const struct btr_edge *edges; size_t n_edges;
	uint64_t branches;       /* branches seen */
	uint64_t insns;          /* instructions (sum of .insns) */
	int has_insns;           /* the source counts instructions (PT, qemu, step) */
	uint64_t unknown_start;  /* branches whose block start was unknown */
	/* TSX (PT): the branches of a transaction that aborted (a run of a
	 * thread's BTR_BF_IN_TX branches ended by a BTR_BF_TSX_ABORT one, and
	 * that one) are not blocks or edges: their effects were rolled back
	 * (@branches and @insns include them).  A transaction still open at
	 * the end of the trace counts as committed.  The aborts and their
	 * instructions are counted from the BTR_FLOW_TSX_ABORT events. */
	uint64_t tsx_aborts, aborted_insns;
	/* appended: the trace's --ip-filter ranges (BTR_REC_IP_FILTER): only
	 * the flow inside them was traced.  None: the whole program was. */
	const struct btr_blocks_range *filter; size_t n_filter;
};

/* Creates a blocks analysis.  Returns 0, -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
int btr_blocks_new(struct btr_analysis **out);

/* The result of @a (a blocks analysis) after its end was called; NULL
 * before, or if @a is not a blocks analysis.  Owned by @a. */
const struct btr_blocks_result *btr_blocks_get(const struct btr_analysis *a);

/* Index of the module whose path or base name is @name, or -1. */
long btr_blocks_module_index(const struct btr_blocks_result *r, const char *name);

/* First block of @module whose start is >= @addr (binary search); an
 * index into r->blocks, r->n_blocks if none. */
size_t btr_blocks_lower_bound(const struct btr_blocks_result *r, uint32_t module, uint64_t addr);

/* First edge from @module at link address >= @from; r->n_edges if none. */
size_t btr_edges_lower_bound(const struct btr_blocks_result *r, uint32_t module, uint64_t from);

/* An image holding module @module's ELF at bias 0, so that its addresses
 * are the link addresses of blocks and edges: code, symbols, functions
 * (btr_image_function) and lines of the module after the run.  Created at
 * the first call and owned by @a (valid until btr_analysis_free).
 * Returns NULL if the module has no file that can be opened. */
struct btr_image *btr_blocks_module_image(struct btr_analysis *a, uint32_t module);

/* Per-instruction execution counts of module @module: every instruction
 * of its executed blocks (decoded from @img, normally
 * btr_blocks_module_image()), sorted by link address, one entry per
 * address (blocks that share instructions add up).  On success *@out is
 * a malloc'd array (the caller frees it; NULL when @n_out is 0).
 * Returns 0, -BTR_ERR_INVAL, -BTR_ERR_NOMEM. */
struct btr_insn_count {
	uint64_t addr;      /* link address */
	uint64_t count;     /* executions */
	uint8_t len;        /* instruction length in bytes */
};
int btr_blocks_insn_counts(const struct btr_blocks_result *r, uint32_t module, struct btr_image *img,
			   struct btr_insn_count **out, size_t *n_out);

/* ---- one function's control-flow graph ---- */

struct btr_fg_insn {
	uint64_t addr;      /* link address */
	uint8_t len;
	uint8_t kind;       /* enum btr_branch_kind */
	uint64_t count;     /* executions */
	uint64_t taken;     /* branches: executions that jumped */
	uint64_t not_taken; /* conditionals: executions that fell through */
	uint64_t target;    /* direct branches: link address of the target */
	const char *file;   /* source file (owned by the module image) or NULL */
	int line;
	char text[96];      /* Intel syntax (Zydis formatter) */
};

struct btr_fg_block {
	uint64_t start, end;   /* link addresses: first and last instruction */
	size_t first, n;       /* its instructions: insns[first .. first+n) */
	uint64_t count;        /* executions of its first instruction */
	const char *file;      /* source of @start (owned by the module image) */
	int line;
};

#define BTR_FG_OUTSIDE ((size_t)-1)

struct btr_fg_edge {
	size_t from, to;       /* block indices; @to BTR_FG_OUTSIDE: leaves the
				* function (to_addr says where) */
	uint64_t to_addr;      /* link address (module of the function) or, for
				* an edge into another module, 0 */
	uint64_t count;        /* executions (0: only in the code) */
	uint8_t kind;          /* kind of the branch, BTR_KIND_NONE for falling
				* into the next block */
	uint8_t taken;         /* 0: fall-through / not-taken conditional */
};

struct btr_funcgraph {
	struct btr_function fn;       /* link addresses; strings owned by the
				       * module image */
	uint32_t module;              /* index in the blocks result */
	const char *module_name;
	struct btr_fg_insn *insns; size_t n_insns;
	struct btr_fg_block *blocks; size_t n_blocks;
	struct btr_fg_edge *edges; size_t n_edges;
	uint64_t max_count;           /* hottest block */
	uint64_t entries;             /* executions of the function's entry */
};

/* Builds the CFG of function @name (btr_image_function_by_name forms:
 * linkage, demangled, "module+0xOFF") of the first module of @blocks
 * (a finished blocks analysis) that has it - preferring modules with
 * executed code in it - from its code: blocks split at every branch and
 * every branch target and executed entry inside it, counts from the
 * executed blocks and edges.  Returns 0 and *@out (free with
 * btr_funcgraph_free), -BTR_ERR_NOT_FOUND (no such function),
 * -BTR_ERR_NOMEM, -BTR_ERR_INVAL. */
int btr_funcgraph_build(struct btr_analysis *blocks, const char *name, struct btr_funcgraph **out);

/* The same for the function containing link address @addr of @module. */
int btr_funcgraph_build_at(struct btr_analysis *blocks, uint32_t module, uint64_t addr,
			   struct btr_funcgraph **out);

void btr_funcgraph_free(struct btr_funcgraph *g);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
