/* branch.c - branch kinds, LBR classes and branch filters.
 *
 * The kind -> class table is the single source of truth for the LBR
 * mapping: filters, LBR_SELECT conversion and report grouping all derive
 * from it, so a new kind only needs one line here.
 */
#include "btr/branch.h"
#include "internal.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static const struct {
	const char *name;
	int8_t cls;
} kinds[BTR_KIND__COUNT] = {
	[BTR_KIND_NONE] = {"none", -1},
	[BTR_KIND_JCC] = {"jcc", BTR_LBR_JCC},
	[BTR_KIND_LOOP] = {"loop", BTR_LBR_JCC},
	[BTR_KIND_JRCXZ] = {"jrcxz", BTR_LBR_JCC},
	[BTR_KIND_CALL] = {"call", BTR_LBR_NEAR_REL_CALL},
	[BTR_KIND_CALL_IND] = {"call_ind", BTR_LBR_NEAR_IND_CALL},
	[BTR_KIND_RET] = {"ret", BTR_LBR_NEAR_RET},
	[BTR_KIND_JMP_IND] = {"jmp_ind", BTR_LBR_NEAR_IND_JMP},
	[BTR_KIND_JMP] = {"jmp", BTR_LBR_NEAR_REL_JMP},
	[BTR_KIND_FAR_CALL] = {"far_call", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_FAR_JMP] = {"far_jmp", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_FAR_RET] = {"far_ret", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_SYSCALL] = {"syscall", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_SYSRET] = {"sysret", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_INT] = {"int", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_INT3] = {"int3", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_IRET] = {"iret", BTR_LBR_FAR_BRANCH},
	[BTR_KIND_ASYNC] = {"async", BTR_LBR_FAR_BRANCH},
};

static const char *const class_names[BTR_LBR__COUNT] = {
	[BTR_LBR_CPL_EQ_0] = "cpl_eq_0",
	[BTR_LBR_CPL_NEQ_0] = "cpl_neq_0",
	[BTR_LBR_JCC] = "jcc",
	[BTR_LBR_NEAR_REL_CALL] = "near_rel_call",
	[BTR_LBR_NEAR_IND_CALL] = "near_ind_call",
	[BTR_LBR_NEAR_RET] = "near_ret",
	[BTR_LBR_NEAR_IND_JMP] = "near_ind_jmp",
	[BTR_LBR_NEAR_REL_JMP] = "near_rel_jmp",
	[BTR_LBR_FAR_BRANCH] = "far_branch",
};

#define KBIT(k) (1u << (k))
#define ALL_KINDS ((uint32_t)((1ull << BTR_KIND__COUNT) - 1))
#define PRIV_KERNEL 1u
#define PRIV_USER 2u

int btr_branch_kind_class(enum btr_branch_kind kind)
{
	if ((unsigned)kind >= BTR_KIND__COUNT)
		return -1;
	return kinds[kind].cls;
}

const char *btr_branch_kind_name(enum btr_branch_kind kind)
{
	if ((unsigned)kind >= BTR_KIND__COUNT)
		return "?";
	return kinds[kind].name;
}

const char *btr_lbr_class_name(enum btr_lbr_class cls)
{
	if ((unsigned)cls >= BTR_LBR__COUNT)
		return "?";
	return class_names[cls];
}

/* Kinds mask of one LBR type class (JCC..FAR_BRANCH). */
static uint32_t class_kinds(int cls)
{
	uint32_t m = 0;

	for (int k = 0; k < BTR_KIND__COUNT; k++)
		if (kinds[k].cls == cls)
			m |= KBIT(k);
	return m;
}

void btr_filter_all(struct btr_filter *f)
{
	if (!f)
		return;
	f->kinds = ALL_KINDS;
	f->priv = PRIV_KERNEL | PRIV_USER;
}

/* Resolves one term (already trimmed, NUL-terminated).  Order matters
 * where names collide: "jcc" is the LBR class (Jcc + LOOP + JrCXZ, what
 * the hardware filter means) and "call"/"ret"/"jmp" are the broad aliases;
 * the single fine kinds stay reachable as near_rel_call, near_ret,
 * near_rel_jmp.  Returns 0 and adds to *kmask / *pmask, or -1. */
static int parse_term(const char *t, uint32_t *kmask, uint8_t *pmask)
{
	static const struct {
		const char *name;
		uint32_t kinds;
		uint8_t priv;
	} aliases[] = {
		{"user", 0, PRIV_USER},
		{"kernel", 0, PRIV_KERNEL},
		{"call", KBIT(BTR_KIND_CALL) | KBIT(BTR_KIND_CALL_IND) | KBIT(BTR_KIND_FAR_CALL), 0},
		{"ret", KBIT(BTR_KIND_RET) | KBIT(BTR_KIND_FAR_RET), 0},
		{"jmp", KBIT(BTR_KIND_JMP) | KBIT(BTR_KIND_JMP_IND) | KBIT(BTR_KIND_FAR_JMP), 0},
		{"any", ALL_KINDS, 0},
		{"all", ALL_KINDS, 0},
	};

	if (!strcasecmp(t, class_names[BTR_LBR_CPL_EQ_0])) {
		*pmask |= PRIV_KERNEL;
		return 0;
	}
	if (!strcasecmp(t, class_names[BTR_LBR_CPL_NEQ_0])) {
		*pmask |= PRIV_USER;
		return 0;
	}
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++) {
		if (!strcasecmp(t, class_names[c])) {
			*kmask |= class_kinds(c);
			return 0;
		}
	}
	for (size_t i = 0; i < BTR_ARRAY_SIZE(aliases); i++) {
		if (!strcasecmp(t, aliases[i].name)) {
			*kmask |= aliases[i].kinds;
			*pmask |= aliases[i].priv;
			return 0;
		}
	}
	for (int k = 0; k < BTR_KIND__COUNT; k++) {
		if (!strcasecmp(t, kinds[k].name)) {
			*kmask |= KBIT(k);
			return 0;
		}
	}
	return -1;
}

int btr_filter_parse(const char *expr, struct btr_filter *out)
{
	uint32_t kmask = 0;
	uint8_t pmask = 0;
	const char *p;

	if (!expr || !out)
		return -BTR_ERR_INVAL;

	for (p = expr; *p;) {
		char term[32];
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *s = p, *e = p + n;

		while (s < e && isspace((unsigned char)*s))
			s++;
		while (e > s && isspace((unsigned char)e[-1]))
			e--;
		if (e > s) {
			/* Longer than any name: cannot match; report it cut. */
			if ((size_t)(e - s) >= sizeof(term)) {
				btr_err("filter: unknown term '%.*s...'", 24, s);
				return -BTR_ERR_BAD_FILTER;
			}
			memcpy(term, s, (size_t)(e - s));
			term[e - s] = '\0';
			if (parse_term(term, &kmask, &pmask) < 0) {
				btr_err("filter: unknown term '%s' (expected an LBR class, a branch "
					"kind, user, kernel, call, ret, jmp or any)", term);
				return -BTR_ERR_BAD_FILTER;
			}
		}
		p += n;
		if (*p == ',')
			p++;
	}

	/* No kind term: every kind, including NONE (branches whose kind could
	 * not be determined).  No privilege term: both privileges. */
	out->kinds = kmask ? kmask : ALL_KINDS;
	out->priv = pmask ? pmask : (PRIV_KERNEL | PRIV_USER);
	return 0;
}
