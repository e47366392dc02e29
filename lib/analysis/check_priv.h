/* check_priv.h - internals of the `btr check` analysis (check.c uses
 * check_model.c and check_allow.c; neither calls back).  Not installed. */
#ifndef BTR_CHECK_PRIV_H
#define BTR_CHECK_PRIV_H

#include <stddef.h>
#include <stdint.h>

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
	 * relocations: slot address and symbol name, sorted by slot. */
	uint64_t *got_slot;
	const char **got_name;
	size_t n_got;
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
 * symbol enumeration (lib/image.c), point this function at that API.
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
/* Nonzero if link address @a is stored somewhere in @m's data. */
int check_mod_is_taken(const struct check_mod *m, uint64_t a);
/* The imported function whose GOT slot is at link address @slot, or NULL. */
const char *check_mod_got_name(const struct check_mod *m, uint64_t slot);
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

#endif
