/* test_branch.c - branch kinds, LBR classes, names and filters. */
#include <stdint.h>
#include <string.h>

#include "btr/btr.h"
#include "check.h"

#define KB(k) (1u << (k))
#define ALL ((1u << BTR_KIND__COUNT) - 1)

static char last_log[512];
static int nlogs;

static void log_cb(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	snprintf(last_log, sizeof(last_log), "%s", msg);
	nlogs++;
}

static void test_classes(void)
{
	static const struct {
		int kind, cls;
		const char *name;
	} t[] = {
		{BTR_KIND_NONE, -1, "none"},
		{BTR_KIND_JCC, BTR_LBR_JCC, "jcc"},
		{BTR_KIND_LOOP, BTR_LBR_JCC, "loop"},
		{BTR_KIND_JRCXZ, BTR_LBR_JCC, "jrcxz"},
		{BTR_KIND_CALL, BTR_LBR_NEAR_REL_CALL, "call"},
		{BTR_KIND_CALL_IND, BTR_LBR_NEAR_IND_CALL, "call_ind"},
		{BTR_KIND_RET, BTR_LBR_NEAR_RET, "ret"},
		{BTR_KIND_JMP_IND, BTR_LBR_NEAR_IND_JMP, "jmp_ind"},
		{BTR_KIND_JMP, BTR_LBR_NEAR_REL_JMP, "jmp"},
		{BTR_KIND_FAR_CALL, BTR_LBR_FAR_BRANCH, "far_call"},
		{BTR_KIND_FAR_JMP, BTR_LBR_FAR_BRANCH, "far_jmp"},
		{BTR_KIND_FAR_RET, BTR_LBR_FAR_BRANCH, "far_ret"},
		{BTR_KIND_SYSCALL, BTR_LBR_FAR_BRANCH, "syscall"},
		{BTR_KIND_SYSRET, BTR_LBR_FAR_BRANCH, "sysret"},
		{BTR_KIND_INT, BTR_LBR_FAR_BRANCH, "int"},
		{BTR_KIND_INT3, BTR_LBR_FAR_BRANCH, "int3"},
		{BTR_KIND_IRET, BTR_LBR_FAR_BRANCH, "iret"},
		{BTR_KIND_ASYNC, BTR_LBR_FAR_BRANCH, "async"},
	};

	CHECK_EQ(sizeof(t) / sizeof(t[0]), BTR_KIND__COUNT);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK_EQ(btr_branch_kind_class((enum btr_branch_kind)t[i].kind), t[i].cls);
		CHECK_STR(btr_branch_kind_name((enum btr_branch_kind)t[i].kind), t[i].name);
	}
	CHECK_EQ(btr_branch_kind_class(BTR_KIND__COUNT), -1);
	CHECK_EQ(btr_branch_kind_class((enum btr_branch_kind)-1), -1);
	CHECK_STR(btr_branch_kind_name(BTR_KIND__COUNT), "?");
	CHECK_STR(btr_branch_kind_name((enum btr_branch_kind)200), "?");

	static const char *const cls[BTR_LBR__COUNT] = {
		"cpl_eq_0", "cpl_neq_0", "jcc", "near_rel_call", "near_ind_call",
		"near_ret", "near_ind_jmp", "near_rel_jmp", "far_branch",
	};
	for (int c = 0; c < BTR_LBR__COUNT; c++)
		CHECK_STR(btr_lbr_class_name((enum btr_lbr_class)c), cls[c]);
	CHECK_STR(btr_lbr_class_name(BTR_LBR__COUNT), "?");
	CHECK_STR(btr_lbr_class_name((enum btr_lbr_class)-3), "?");
}

static uint32_t parse_kinds(const char *expr, uint8_t *priv)
{
	struct btr_filter f = {0xdead, 0xff};
	int ret = btr_filter_parse(expr, &f);

	CHECK_EQ(ret, 0);
	if (ret)
		fprintf(stderr, "parse '%s' failed: %d\n", expr, ret);
	if (priv)
		*priv = f.priv;
	return f.kinds;
}

static void test_filter_parse(void)
{
	struct btr_filter f;
	uint8_t priv;

	/* every LBR class name parses, to exactly the kinds of that class */
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++) {
		uint32_t want = 0;

		for (int k = 0; k < BTR_KIND__COUNT; k++)
			if (btr_branch_kind_class((enum btr_branch_kind)k) == c)
				want |= KB(k);
		CHECK(want != 0);
		CHECK_EQ(parse_kinds(btr_lbr_class_name((enum btr_lbr_class)c), &priv), want);
		CHECK_EQ(priv, 3);
	}
	CHECK_EQ(parse_kinds("cpl_eq_0", &priv), ALL);
	CHECK_EQ(priv, 1);
	CHECK_EQ(parse_kinds("cpl_neq_0", &priv), ALL);
	CHECK_EQ(priv, 2);

	/* every fine kind name that is not shadowed by a class/alias */
	for (int k = 0; k < BTR_KIND__COUNT; k++) {
		const char *n = btr_branch_kind_name((enum btr_branch_kind)k);

		if (!strcmp(n, "jcc") || !strcmp(n, "call") || !strcmp(n, "ret") || !strcmp(n, "jmp"))
			continue;
		CHECK_EQ(parse_kinds(n, NULL), KB(k));
	}

	CHECK_EQ(parse_kinds("jcc", NULL), KB(BTR_KIND_JCC) | KB(BTR_KIND_LOOP) | KB(BTR_KIND_JRCXZ));
	CHECK_EQ(parse_kinds("near_ret", NULL), KB(BTR_KIND_RET));
	CHECK_EQ(parse_kinds("call", NULL), KB(BTR_KIND_CALL) | KB(BTR_KIND_CALL_IND) | KB(BTR_KIND_FAR_CALL));
	CHECK_EQ(parse_kinds("ret", NULL), KB(BTR_KIND_RET) | KB(BTR_KIND_FAR_RET));
	CHECK_EQ(parse_kinds("jmp", NULL), KB(BTR_KIND_JMP) | KB(BTR_KIND_JMP_IND) | KB(BTR_KIND_FAR_JMP));
	CHECK_EQ(parse_kinds("any", &priv), ALL);
	CHECK_EQ(priv, 3);
	CHECK_EQ(parse_kinds("all", NULL), ALL);
	CHECK_EQ(parse_kinds("", &priv), ALL);
	CHECK_EQ(priv, 3);
	CHECK_EQ(parse_kinds(" , ,", NULL), ALL);

	/* user / kernel, combined with kinds; case and blanks */
	CHECK_EQ(parse_kinds("user", &priv), ALL);
	CHECK_EQ(priv, 2);
	CHECK_EQ(parse_kinds("kernel", &priv), ALL);
	CHECK_EQ(priv, 1);
	CHECK_EQ(parse_kinds("user,kernel", &priv), ALL);
	CHECK_EQ(priv, 3);
	CHECK_EQ(parse_kinds(" Near_Ind_Call , USER ,syscall", &priv),
		 KB(BTR_KIND_CALL_IND) | KB(BTR_KIND_SYSCALL));
	CHECK_EQ(priv, 2);
	CHECK_EQ(parse_kinds("JCC,loop", NULL), KB(BTR_KIND_JCC) | KB(BTR_KIND_LOOP) | KB(BTR_KIND_JRCXZ));
	CHECK_EQ(parse_kinds("far_branch,kernel", &priv), parse_kinds("far_branch", NULL));
	CHECK_EQ(priv, 1);

	/* errors: unknown term is named in the log; @out unchanged */
	btr_log_set(log_cb, NULL, BTR_LOG_DEBUG);
	f.kinds = 0x1234;
	f.priv = 0x7;
	nlogs = 0;
	CHECK_EQ(btr_filter_parse("jcc,bogus_term,ret", &f), -BTR_ERR_BAD_FILTER);
	CHECK_EQ(f.kinds, 0x1234);
	CHECK_EQ(f.priv, 0x7);
	CHECK_EQ(nlogs, 1);
	CHECK(strstr(last_log, "bogus_term") != NULL);
	CHECK_EQ(btr_filter_parse("jc", &f), -BTR_ERR_BAD_FILTER);
	CHECK(strstr(last_log, "'jc'") != NULL);
	CHECK_EQ(btr_filter_parse("jcc;ret", &f), -BTR_ERR_BAD_FILTER);
	CHECK_EQ(btr_filter_parse("user kernel", &f), -BTR_ERR_BAD_FILTER);
	CHECK_EQ(btr_filter_parse("near_rel_call_and_a_very_long_name_beyond_the_buffer", &f),
		 -BTR_ERR_BAD_FILTER);
	CHECK(strstr(last_log, "near_rel_call_and") != NULL);
	btr_log_set(NULL, NULL, BTR_LOG_WARN);
	CHECK_EQ(btr_filter_parse(NULL, &f), -BTR_ERR_INVAL);
	CHECK_EQ(btr_filter_parse("jcc", NULL), -BTR_ERR_INVAL);
}

static void test_filter_match(void)
{
	struct btr_filter f;
	struct btr_branch b;

	memset(&b, 0, sizeof(b));
	btr_filter_all(&f);
	CHECK_EQ(f.kinds, ALL);
	CHECK_EQ(f.priv, 3);
	for (int k = 0; k < BTR_KIND__COUNT; k++) {
		b.kind = (uint8_t)k;
		b.flags = 0;
		CHECK(btr_filter_match(&f, &b));
		b.flags = BTR_BF_KERNEL;
		CHECK(btr_filter_match(&f, &b));
	}

	CHECK_EQ(btr_filter_parse("near_rel_call,user", &f), 0);
	b.kind = BTR_KIND_CALL;
	b.flags = BTR_BF_TAKEN;
	CHECK(btr_filter_match(&f, &b));
	b.flags = BTR_BF_TAKEN | BTR_BF_KERNEL;
	CHECK(!btr_filter_match(&f, &b));
	b.kind = BTR_KIND_CALL_IND;
	b.flags = BTR_BF_TAKEN;
	CHECK(!btr_filter_match(&f, &b));

	CHECK_EQ(btr_filter_parse("kernel", &f), 0);
	b.kind = BTR_KIND_RET;
	b.flags = BTR_BF_KERNEL;
	CHECK(btr_filter_match(&f, &b));
	b.flags = 0;
	CHECK(!btr_filter_match(&f, &b));

	/* unknown kind only matches a filter without kind terms */
	b.kind = BTR_KIND_NONE;
	CHECK_EQ(btr_filter_parse("far_branch", &f), 0);
	CHECK(!btr_filter_match(&f, &b));
	CHECK_EQ(btr_filter_parse("none", &f), 0);
	CHECK(btr_filter_match(&f, &b));
	b.kind = BTR_KIND_ASYNC;
	CHECK_EQ(btr_filter_parse("far_branch", &f), 0);
	CHECK(btr_filter_match(&f, &b));
}

int main(void)
{
	test_classes();
	test_filter_parse();
	test_filter_match();
	return check_done();
}
