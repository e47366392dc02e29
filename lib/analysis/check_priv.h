/* check_priv.h - internals of the `btr check` analysis (check.c uses
 * check_model.c, check_allow.c and check_findings.c; none calls back).
 * Not installed. */
#ifndef BTR_CHECK_PRIV_H
#define BTR_CHECK_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "btr/check.h"
#include "btr/stream.h"
#include "pairmap.h"

/* What check needs to know about one ELF file, in link-time addresses
 * (add the mapping's load bias).  Everything here grows with the file's
 * code and symbol count, never with the trace. */
struct check_mod {
	char *path;
	char *soname;            /* DT_SONAME, or NULL */
	char **needed;           /* DT_NEEDED names */
	size_t n_needed;
	int is_main;             /* ET_EXEC or has PT_INTERP: a program */
	int ok;                  /* the file could be read as ELF */
	/* Legitimate indirect-call targets: function symbols (.symtab,
	 * .dynsym), .eh_frame FDE starts, PLT entries, the entry point;
	 * sorted, unique. */
	uint64_t *entries;
	size_t n_entries;
	/* Split functions known by name (gcc's f.cold, f.part.N, f.isra.N,
	 * f.constprop.N parts of f): entry of the part -> entry of the
	 * parent (or of the lowest part when the parent has no symbol),
	 * sorted by part.  Parts and parent are one function for the
	 * indirect-jump rules. */
	uint64_t *split_at, *split_rep;
	size_t n_split;
	/* .eh_frame FDE ranges [fde_lo, fde_hi), sorted by start: function
	 * extents, also of stripped files (split parts have their own). */
	uint64_t *fde_lo, *fde_hi;
	size_t n_fde;
	/* Address-taken code: code addresses stored in the file's data
	 * (RELATIVE relocation addends; for ET_EXEC, aligned words of the
	 * data sections), e.g. computed-goto tables; sorted, unique.
	 * Legitimate indirect-jump targets. */
	uint64_t *taken;
	size_t n_taken;
	/* GOT slots of functions imported through JUMP_SLOT / GLOB_DAT
	 * relocations (slot address and symbol name) and IRELATIVE slots
	 * (name NULL, got_res the IFUNC resolver), sorted by slot. */
	uint64_t *got_slot;
	const char **got_name;
	uint64_t *got_res;
	size_t n_got;
	/* What the IFUNC resolvers of IRELATIVE slots may return: (resolver,
	 * target) pairs, sorted (the addresses each resolver's code takes). */
	uint64_t *ifn_res, *ifn_tgt;
	size_t n_ifn;
	/* PLT sections (.plt, .plt.sec, .plt.got): [lo, hi) */
	uint64_t plt_lo[3], plt_hi[3];
	/* Defined global function symbols of .dynsym (what the module
	 * exports to the dynamic linker), sorted by strcmp. */
	const char **exports;
	size_t n_exports;
	char *strings;           /* storage of the export names */
};

/* Reads the legitimate-transfer model of ELF file @path into @m (zeroed
 * by the caller).  This is the one place that knows where function
 * entries come from: when the image module offers FDE boundaries and
 * symbol enumeration (lib/image/image.c), point this function at that API.
 * Returns 0, or a negative enum btr_error (@m->ok stays 0; the module is
 * then treated as unknown code and its transfers are not judged). */
int check_mod_load(const char *path, struct check_mod *m);
void check_mod_free(struct check_mod *m);

/* Nonzero if link address @a is a recorded entry of @m. */
int check_mod_is_entry(const struct check_mod *m, uint64_t a);
/* The greatest entry <= @a, or UINT64_MAX if none: two addresses with
 * the same value lie in the same function (as far as the model knows). */
uint64_t check_mod_func_of(const struct check_mod *m, uint64_t a);
/* The function @a belongs to, split parts folded into their parent
 * (check_mod_func_of, then the split_at table); UINT64_MAX if none. */
uint64_t check_mod_group_of(const struct check_mod *m, uint64_t a);
/* The FDE range holding link address @a: 1 and [*lo, *hi), or 0. */
int check_mod_fde_of(const struct check_mod *m, uint64_t a, uint64_t *lo, uint64_t *hi);
/* Nonzero if no FDE range holds link address @a; *@end is then the end of
 * the nearest range below @a (UINT64_MAX if none). */
int check_mod_fde_gap(const struct check_mod *m, uint64_t a, uint64_t *end);
/* Nonzero if link address @a is stored somewhere in @m's data. */
int check_mod_is_taken(const struct check_mod *m, uint64_t a);
/* The GOT slot at link address @slot: 1 and the imported function's name
 * in *@name - or NULL for an IRELATIVE slot, whose IFUNC resolver is then
 * in *@resolver; 0 if no relocation fills that slot. */
int check_mod_got(const struct check_mod *m, uint64_t slot, const char **name, uint64_t *resolver);
/* Nonzero if IFUNC resolver @resolver of @m may return link address
 * @target (an address its code takes; a resolver whose code takes none:
 * any entry of @m). */
int check_mod_ifunc_target(const struct check_mod *m, uint64_t resolver, uint64_t target);
/* Nonzero if @a lies in one of @m's PLT sections. */
int check_mod_in_plt(const struct check_mod *m, uint64_t a);
/* Nonzero if @m exports function @name. */
int check_mod_exports(const struct check_mod *m, const char *name);

/* One `--allow` rule (check_allow.c): KIND PATTERN. */
struct check_allow_rule {
	char kind[32];     /* "" = any */
	int type;          /* 0 any, 1 range [lo, hi], 2 text */
	uint64_t lo, hi;
	char *text;
};

/* Parses the rules of @text (one a line, '#' comments) onto *@rules
 * (*@n_rules of them; the caller frees them with check_allow_free, also
 * after an error).  @kinds: the @n_kinds finding kinds a rule may name.
 * Returns 0, -BTR_ERR_BAD_FILTER (logged with the line number) or
 * -BTR_ERR_NOMEM. */
int check_allow_parse(const char *text, const char *const *kinds, size_t n_kinds, struct check_allow_rule **rules,
		      size_t *n_rules);
/* Nonzero if a rule allows the finding of @kind from @from to @to with
 * those texts. */
int check_allow_match(const struct check_allow_rule *rules, size_t n_rules, const char *kind, uint64_t from,
		      uint64_t to, const char *detail, const char *from_sym, const char *to_sym);
void check_allow_free(struct check_allow_rule *rules, size_t n_rules);

/* ---- the analysis' state (check.c judges the transfers; check_findings.c
 * keeps, names and prints what it found and never calls back) ---- */

#define MAX_FINDINGS 4096     /* unique findings kept; more are counted as dropped */
#define MAX_DEPTH (1u << 16)  /* shadow stack entries per thread; the oldest half goes when full */
#define GADGET_BYTES 32       /* a "short block" between two returns of a chain */
#define DEEP_SEARCH 4096      /* frames searched below the top for a return target */
#define SYM_LEN 160
#define SPLIT_SCAN (256u << 10)  /* bytes of an FDE range searched for jumps into another */

/* ---- processes, mappings, threads ---- */

struct mapping {
	uint64_t start, end, bias;
	int mod;          /* index into st->mods, -1: no model */
	int backed;       /* a regular file backs it */
	char *path;
};

#define MAX_INJECTED 8
struct proc {
	uint32_t pid;
	struct mapping *maps;
	size_t n_maps, cap_maps;
	int new_ctx;        /* a context-restoring routine entered a function (makecontext, a goroutine's start) */
	uint64_t injected[MAX_INJECTED];   /* functions a signal handler's sigreturn entered (Go's asyncPreempt) */
	size_t n_injected;
};

/* FR_RESUME: rt_sigreturn resumed a function entry, not the interrupted
 * pc @ret: an injected call (returns to @ret) or the handler of a signal
 * pending at that rt_sigreturn (returns into the sigreturn trampoline) */
enum { FR_CALL = 0, FR_SIGNAL, FR_WILD, FR_RESUME };

struct frame {
	uint64_t ret;
	uint8_t type;
};

#define CHAIN_MAX 8
struct thr {
	uint32_t tid, pid;
	struct frame *st;
	size_t n, cap;
	/* a run of hijacked returns (one finding when it ends) */
	unsigned chain;
	uint64_t chain_to[CHAIN_MAX];
	uint64_t chain_from, chain_last_to, chain_pos, chain_tsc;
	int cand;                   /* a held-back return-hijack (end_chain) */
	int chain_first_mismatch;   /* the first return went to a call-preceded site */
	/* sampled mode: consecutive short return blocks */
	unsigned gchain;
	uint64_t glast_to, gfirst_from, gfirst_to;
	/* the trace stopped matching the code: finding waits for the resume ip */
	int pending_mod;
	uint64_t pm_from, pm_pos, pm_tsc;
	int pm_reason;
	uint64_t sys_next;   /* after a SYSCALL branch: where the thread resumes */
	uint64_t sig_ret;    /* where the signal frame a handler just left interrupted the thread */
	int desync;          /* the PT decoder lost the flow once: returns into frames of
			      * before (compressed against a return stack the decoder no
			      * longer has) are not evidence */
	int code_mod_seen;
	uint64_t last_to;
	uint64_t blk;        /* start of the block that ends at the branch being judged
			      * (the thread's previous branch target), 0: unknown */
	uint64_t sig_at_ret; /* a signal interrupted the thread right at a suspicious
			      * return's target, before anything ran there */
};

/* A transfer on_branch judged clean before: a conditional or direct
 * jump, a direct call or a return that enters code a file backs (or that
 * its runtime names) from an instruction of the recorded kind, a direct
 * one to the target its encoding names.  Valid for one process and one
 * image generation; forget_code() drops all when mappings change.  What
 * a hit still has to do: nothing (jumps), push @ret (calls), the shadow
 * stack's check (returns).  Sampled data keeps no returns (the gadget
 * rule counts them). */
#define EC_SIZE 16384
struct ec_ent {
	uint64_t key;    /* ec_key(): from, kind, flags; 0: empty */
	uint64_t to;
	uint64_t tag;    /* process index << 32 | image generation */
	uint64_t ret;    /* a call's return address */
	uint32_t cg;     /* check's code generation (forget_code) */
};

struct finding {
	struct btr_check_finding pub;
	char from_sym[SYM_LEN], to_sym[SYM_LEN];
	char *detail;
};

struct check {
	struct btr_stream *s;
	struct check_mod *mods;
	size_t n_mods;
	struct proc *procs;
	size_t n_procs;
	struct thr **thr;
	size_t n_thr;
	struct pairmap insn;       /* (proc<<48|addr, 0) -> kind | len << 8 | flags << 16; ~0u: no code */
	struct pairmap callpre;    /* (proc<<48|addr, 1) -> 0/1 */
	struct pairmap ctxret;     /* (proc<<48|addr, 0) -> 0/1: a return of a context-restoring routine */
	struct {                   /* in front of insn: most branches repeat (key + 1, 0: empty), */
		uint64_t key;      /* with the target a direct branch encodes */
		uint64_t target;
		uint32_t v;
		uint32_t cg;       /* valid while it is code_gen */
	} ic[32768];               /* (python3's interpreter missed 2048 often) */
	struct ec_ent ec[EC_SIZE]; /* transfers judged clean (ec_put) */
	uint32_t code_gen;         /* ic and ec entries of another are stale (from 1) */
	uint32_t gen;              /* generation of the image of the run being read */
	size_t last_proc;          /* index of proc_get's last answer */
	struct thr *last_thr;
	struct pairmap edges;      /* (from, to) of indirect transfers already judged */
	struct pairmap links;      /* (mod << 48 | FDE start, FDE start) -> 1: one split function */
	struct pairmap layout;     /* (mod << 48 | link address, 0) -> 0/1: starts a function by layout;
				    * (..., 1) -> 0/1: a label its function takes (lea_taken) */
	struct pairmap dedup;      /* (kind id << 56 ^ from, to) -> finding index */
	struct pairmap jit;        /* (area, process index) -> 1: a JIT engine's code (jit_code) */
	struct finding *f;
	size_t n_f, cap_f;
	struct btr_check_finding *pubs;
	struct check_allow_rule *rules;
	size_t n_rules;
	uint64_t pos;
	int ended;
	int ip_filtered;           /* the trace holds only --ip-filter ranges (BTR_MACHINE_IP_FILTER) */
	struct btr_check_stats stats;
};

/* The mapping of process @p holding @a (the newest), or NULL. */
static inline struct mapping *check_map_of(struct proc *p, uint64_t a)
{
	for (size_t i = p->n_maps; i-- > 0;)
		if (a >= p->maps[i].start && a < p->maps[i].end)
			return &p->maps[i];
	return NULL;
}

/* The model of mapping @m's file, or NULL (none, or not readable). */
static inline const struct check_mod *check_mod_of(const struct check *c, const struct mapping *m)
{
	return m && m->mod >= 0 && c->mods[m->mod].ok ? &c->mods[m->mod] : NULL;
}

/* The file name of path @p ("?" for NULL). */
static inline const char *check_base_name(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;
	return s ? s + 1 : (p ? p : "?");
}

/* check_got.c: if the indirect transfer @b from module @fm (mapping @fmap)
 * of process @p goes through a GOT slot - a PLT stub's jump, or
 * `call/jmp *slot(%rip)` of -fno-plt code - judges where it went
 * (got-overwrite, interposition; an IRELATIVE slot by what its IFUNC
 * resolver may return) and returns 1; 0 if it is no GOT transfer;
 * negative on error. */
int check_got_transfer(struct check *c, struct proc *p, struct thr *t, const struct btr_branch *b,
		       const struct mapping *fmap, const struct check_mod *fm);

/* Finding kinds: btr__check_kinds[K_*] is the name. */
extern const char *const btr__check_kinds[];
extern const size_t btr__check_n_kinds;
enum { K_RET_HIJACK, K_ROP, K_RET_MISMATCH, K_GADGETS, K_CALL_NONENTRY, K_JMP_NONENTRY,
       K_UNBACKED, K_CODE_MOD, K_GOT, K_INTERPOSE };

/* The symbol of @a in process @pid, "?" for 0 (SYM_LEN bytes at @buf). */
/* check_layout.c: nonzero if link address @tl of module @cm (mapping @m
 * of process @pid) starts a function by its layout in code no FDE covers /
 * is a label its own function takes the address of (lea tl(%rip)).
 * Cached in c->layout. */
int check_starts_by_layout(struct check *c, uint32_t pid, const struct mapping *m, const struct check_mod *cm,
			   uint64_t tl);
int check_lea_taken(struct check *c, uint32_t pid, const struct mapping *m, const struct check_mod *cm, uint64_t tl);
void check_symbolize(struct check *c, uint32_t pid, uint64_t a, char *buf);
/* Records a finding of kind @kind (deduplicated on kind, from and
 * @key_to; an --allow rule counts it as allowed instead).  Returns 0 or
 * -BTR_ERR_NOMEM. */
int check_add_finding(struct check *c, int kind, enum btr_check_severity sev, const struct thr *t, uint64_t from,
		      uint64_t to, uint64_t key_to, uint64_t pos, uint64_t tsc, const char *fmt, ...)
	__attribute__((format(printf, 10, 11)));
/* The findings as text or JSON (btr_analysis_ops.write). */
int check_write(void *state, FILE *out, const char *format);

#endif
