/* btr/branch.h - the branch event model shared by every trace source.
 *
 * PT, BTS, LBR and software capture all end up as a stream of struct
 * btr_branch.  Kinds map exactly onto the LBR_SELECT filter classes
 * (Intel SDM Vol. 3B, "Filtering of Last Branch Records"), with finer
 * kinds below them.
 */
#ifndef BTR_BRANCH_H
#define BTR_BRANCH_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The nine MSR_LBR_SELECT classes; the value is the bit number in the MSR.
 * CPL_EQ_0 and CPL_NEQ_0 select by privilege, the others by branch type. */
enum btr_lbr_class {
	BTR_LBR_CPL_EQ_0 = 0,
	BTR_LBR_CPL_NEQ_0 = 1,
	BTR_LBR_JCC = 2,
	BTR_LBR_NEAR_REL_CALL = 3,
	BTR_LBR_NEAR_IND_CALL = 4,
	BTR_LBR_NEAR_RET = 5,
	BTR_LBR_NEAR_IND_JMP = 6,
	BTR_LBR_NEAR_REL_JMP = 7,
	BTR_LBR_FAR_BRANCH = 8,
	BTR_LBR__COUNT
};

/* Fine branch kinds.  btr_branch_kind_class() gives the LBR class. */
enum btr_branch_kind {
	BTR_KIND_NONE = 0,   /* not a branch */
	BTR_KIND_JCC,        /* Jcc rel8/rel32                    -> JCC */
	BTR_KIND_LOOP,       /* LOOP, LOOPE, LOOPNE               -> JCC */
	BTR_KIND_JRCXZ,      /* JCXZ, JECXZ, JRCXZ                -> JCC */
	BTR_KIND_CALL,       /* CALL rel                          -> NEAR_REL_CALL */
	BTR_KIND_CALL_IND,   /* CALL r/m                          -> NEAR_IND_CALL */
	BTR_KIND_RET,        /* RET, RET imm16                    -> NEAR_RET */
	BTR_KIND_JMP_IND,    /* JMP r/m                           -> NEAR_IND_JMP */
	BTR_KIND_JMP,        /* JMP rel8/rel32                    -> NEAR_REL_JMP */
	BTR_KIND_FAR_CALL,   /* CALL ptr16:32 / m16:64            -> FAR_BRANCH */
	BTR_KIND_FAR_JMP,    /* JMP ptr16:32 / m16:64             -> FAR_BRANCH */
	BTR_KIND_FAR_RET,    /* RETF, RETF imm16                  -> FAR_BRANCH */
	BTR_KIND_SYSCALL,    /* SYSCALL, SYSENTER                 -> FAR_BRANCH */
	BTR_KIND_SYSRET,     /* SYSRET, SYSEXIT                   -> FAR_BRANCH */
	BTR_KIND_INT,        /* INT n, INTO, INT1, UD-style traps -> FAR_BRANCH */
	BTR_KIND_INT3,       /* INT3                              -> FAR_BRANCH */
	BTR_KIND_IRET,       /* IRET, IRETD, IRETQ                -> FAR_BRANCH */
	BTR_KIND_ASYNC,      /* exception, interrupt, signal delivery (no instruction) -> FAR_BRANCH */
	BTR_KIND__COUNT
};

/* Flags of struct btr_branch. */
enum {
	BTR_BF_TAKEN = 1u << 0,    /* the branch was taken (always set for unconditional kinds) */
	BTR_BF_KERNEL = 1u << 1,   /* the source is kernel code (CPL 0) */
	BTR_BF_TSC = 1u << 2,      /* .tsc is valid */
	BTR_BF_CYCLES = 1u << 3,   /* .cycles is valid */
	BTR_BF_MISPRED = 1u << 4,  /* LBR: the branch was mispredicted */
	BTR_BF_PREDICTED = 1u << 5,/* LBR: the branch was predicted (LBR has both bits) */
	BTR_BF_INSNS = 1u << 6,    /* .insns is valid */
	BTR_BF_TSX_ABORT = 1u << 7,/* LBR/PT: transaction abort */
	BTR_BF_TO_KERNEL = 1u << 8,/* the target is kernel code */
	/* PT: the branch ran inside a TSX transaction (speculatively).  The
	 * run of such branches of a thread that a BTR_BF_TSX_ABORT branch
	 * ends was rolled back (aborted); one that a branch without this
	 * flag ends was committed. */
	BTR_BF_IN_TX = 1u << 9,
};

/* One branch.  For a not-taken conditional branch, @to is the fall-through
 * address.  @insns counts the instructions retired since the previous
 * event in the same thread, including the branch itself. */
struct btr_branch {
	uint64_t from;
	uint64_t to;
	uint64_t tsc;      /* timestamp (TSC units), valid with BTR_BF_TSC */
	uint64_t insns;    /* valid with BTR_BF_INSNS */
	uint32_t tid;      /* thread id, 0 if unknown */
	uint32_t cycles;   /* cycles since previous branch, valid with BTR_BF_CYCLES */
	uint16_t flags;    /* BTR_BF_* */
	uint8_t kind;      /* enum btr_branch_kind */
	uint8_t reserved;
	uint32_t pid;      /* process id, 0 if unknown; filled by the common
			    * stream (btr/stream.h) from the trace's thread
			    * records; decoders leave it 0.  Not stored in
			    * .btr BRANCHES records (derived from tid). */
};

/* A branch counted @count times (the aggregated form some decoders can
 * deliver instead of one record per execution; btr/ptflow.h "counts",
 * btr/stream.h, btr/analysis.h).  Every one of the @count executions
 * ran the straight line of instructions from @start (the target of the
 * thread's previous branch, or where tracing resumed; 0 if unknown: after
 * a gap, an overflow or a disable) up to @b.from and then took the branch
 * @b (from, to, kind, flags, tid, pid).  @b.insns (with BTR_BF_INSNS) is
 * the instruction count of one execution of that run, branch included.
 * Timing is not aggregated: a record with @count > 1 has neither
 * BTR_BF_TSC nor BTR_BF_CYCLES. */
struct btr_branch_count {
	struct btr_branch b;
	uint64_t start;
	uint64_t count;
};

/* Returns the LBR type class of @kind (BTR_LBR_JCC..BTR_LBR_FAR_BRANCH), or
 * -1 for BTR_KIND_NONE or an unknown value. */
int btr_branch_kind_class(enum btr_branch_kind kind);

/* Returns the lower-case name of @kind ("jcc", "call_ind", ...), or "?" */
const char *btr_branch_kind_name(enum btr_branch_kind kind);

/* Returns the lower-case name of @cls ("cpl_eq_0", "jcc", "near_ret", ...),
 * as used by the filter syntax and JSON output, or "?". */
const char *btr_lbr_class_name(enum btr_lbr_class cls);

/* A parsed branch filter.  A branch matches when its kind is in @kinds
 * (bit per enum btr_branch_kind) and its privilege is in @priv (bit 0:
 * kernel/CPL_EQ_0, bit 1: user/CPL_NEQ_0).  Build one with btr_filter_parse. */
struct btr_filter {
	uint32_t kinds;
	uint8_t priv;
};

/* Parses a comma-separated filter expression into @out.  Terms are LBR
 * class names (jcc, near_rel_call, near_ind_call, near_ret, near_ind_jmp,
 * near_rel_jmp, far_branch, cpl_eq_0, cpl_neq_0), fine kind names
 * (loop, jrcxz, syscall, int3, none, ...), the aliases user (= cpl_neq_0),
 * kernel (= cpl_eq_0), call (all calls: near rel, near ind, far), ret
 * (near and far returns), jmp (near rel, near ind, far jumps), any/all.
 * Where a class and a kind share a name ("jcc") the class wins; the
 * aliases call/ret/jmp win over the fine kinds of the same name.  Terms
 * accumulate (union) within the kind and the privilege groups; a branch
 * must match both groups.  Without a privilege term both privileges
 * match; without a kind term every kind matches, including BTR_KIND_NONE.
 * Matching is case-insensitive; blanks around terms and empty terms are
 * ignored.  Returns 0, or -BTR_ERR_BAD_FILTER on an unknown term (naming
 * it through the log callback; @out is then unchanged), -BTR_ERR_INVAL if
 * @expr or @out is NULL.  The empty string "" matches everything. */
int btr_filter_parse(const char *expr, struct btr_filter *out);

/* Initializes @f to match everything. */
void btr_filter_all(struct btr_filter *f);

/* Returns true if @b passes @f. */
static inline bool btr_filter_match(const struct btr_filter *f, const struct btr_branch *b)
{
	unsigned priv = (b->flags & BTR_BF_KERNEL) ? 1u : 2u;
	return (f->kinds & (1u << b->kind)) && (f->priv & priv);
}

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
