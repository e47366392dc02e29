/* test_perfattr.c - perf_event_attr construction (btr/perfattr.h): PMU
 * descriptions from the sample sysfs trees in tests/data/, the exact PT
 * config bits of every option, IP filter strings (address ranges and
 * symbols of the suite's test programs, checked against nm), BTS
 * exclusion and its DEBUGCTL, and the exact branch_sample_type and
 * MSR_LBR_SELECT of every LBR filter class. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "btr/perfattr.h"
#include "check.h"

#define DATA BTR_SOURCE_DIR "/tests/data"

static void test_format_parse(void)
{
	struct btr_pmu_format f;
	CHECK_EQ(btr_pmu_format_parse("config:10", &f), 0);
	CHECK_EQ(f.word, 0);
	CHECK_EQ(f.mask, 1u << 10);
	CHECK_EQ(btr_pmu_format_parse("config:14-17\n", &f), 0);
	CHECK_EQ(f.mask, 0xfu << 14);
	CHECK_EQ(btr_pmu_format_parse("config1:0-7,32-35", &f), 0);
	CHECK_EQ(f.word, 1);
	CHECK(f.mask == (0xffull | (0xfull << 32)));
	CHECK_EQ(btr_pmu_format_parse("config2:63", &f), 0);
	CHECK_EQ(f.word, 2);
	CHECK(f.mask == 1ull << 63);
	CHECK_EQ(btr_pmu_format_parse("config:64", &f), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_pmu_format_parse("config:5-3", &f), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_pmu_format_parse("config3:1", &f), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_pmu_format_parse("cfg:1", &f), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_pmu_format_parse("config:1x", &f), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_pmu_format_parse("config:", &f), -BTR_ERR_BAD_FORMAT);
}

static void test_pmu_load(void)
{
	struct btr_pmu *p = malloc(sizeof(*p));
	uint64_t v;
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-skl", "intel_pt", p), 0);
	CHECK_EQ(p->present, 1);
	CHECK_EQ(p->type, 8);
	CHECK_EQ(p->n_formats, 14);
	CHECK_EQ(p->max_nonturbo_ratio, 12);
	CHECK_EQ(p->tsc_art_num, 188);
	CHECK_EQ(p->tsc_art_den, 2);
	CHECK(btr_pmu_cap(p, "mtc_periods", &v));
	CHECK_EQ(v, 0x249);
	CHECK(btr_pmu_cap(p, "num_address_ranges", &v));
	CHECK_EQ(v, 2);
	CHECK(btr_pmu_cap(p, "ptwrite", &v));
	CHECK_EQ(v, 0);
	CHECK(!btr_pmu_cap(p, "nosuchcap", &v));
	/* absent PMU: not an error */
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-nomtc", "intel_bts", p), 0);
	CHECK_EQ(p->present, 0);
	CHECK_EQ(p->type, -1);
	CHECK_EQ(btr_pmu_load(DATA "/no-such-root", "intel_pt", p), 0);
	CHECK_EQ(p->present, 0);
	/* btr_pmu_set spreads values over non-contiguous masks */
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-alt", "intel_pt", p), 0);
	uint64_t cfg[3] = { 0, 0, 0 };
	CHECK_EQ(btr_pmu_set(p, "mtc_period", 0xb, cfg), 0);   /* 1011b over bits 44,46,48,50 */
	CHECK(cfg[0] == ((1ull << 44) | (1ull << 46) | (1ull << 50)));
	CHECK_EQ(btr_pmu_set(p, "mtc_period", 16, cfg), -BTR_ERR_INVAL);
	CHECK_EQ(btr_pmu_set(p, "mtc_period", 0, cfg), 0);     /* cleared again */
	CHECK(cfg[0] == 0);
	CHECK_EQ(btr_pmu_set(p, "nosuch", 1, cfg), -BTR_ERR_NOT_FOUND);
	free(p);
}

static void test_pt_attr(void)
{
	struct btr_pmu *p = malloc(sizeof(*p));
	struct btr_pt_opts *o = malloc(sizeof(*o));
	struct btr_perf_event_attr a;
	char why[256];
	CHECK_EQ(sizeof(struct btr_perf_event_attr), BTR_PERF_ATTR_SIZE);
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-skl", "intel_pt", p), 0);

	/* defaults: pt, branch, tsc, mtc with period 3 (perf's default),
	 * user only, retcomp on (noretcomp clear) */
	btr_pt_opts_default(o);
	CHECK_EQ(btr_pt_attr(p, o, 4 << 20, &a, why, sizeof(why)), 0);
	CHECK_EQ(a.type, 8);
	CHECK_EQ(a.size, 128);
	CHECK_EQ(a.config, (1u << 0) | (1u << 13) | (1u << 10) | (1u << 9) | (3u << 14));
	CHECK_EQ(a.config1, 0);
	CHECK_EQ(a.sample_period, 1);
	CHECK_EQ(a.flags, BTR_PA_DISABLED | BTR_PA_EXCLUDE_KERNEL | BTR_PA_EXCLUDE_HV | BTR_PA_MMAP | BTR_PA_COMM |
			   BTR_PA_ENABLE_ON_EXEC | BTR_PA_TASK | BTR_PA_SAMPLE_ID_ALL | BTR_PA_MMAP2 |
			   BTR_PA_COMM_EXEC | BTR_PA_CONTEXT_SWITCH);
	/* the exact kernel bit positions of the flags word */
	CHECK_EQ(a.flags, 0x5843361ull);
	CHECK_EQ(a.sample_type, BTR_PS_TID | BTR_PS_TIME | BTR_PS_CPU | BTR_PS_IDENTIFIER);
	CHECK_EQ(a.sample_type, 0x10086);
	CHECK_EQ(a.aux_watermark, 1 << 20);

	/* --kernel alone, --user --kernel */
	o->user = 0;
	o->kernel = 1;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK(!(a.flags & BTR_PA_EXCLUDE_KERNEL) && (a.flags & BTR_PA_EXCLUDE_USER));
	o->user = 1;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK(!(a.flags & (BTR_PA_EXCLUDE_KERNEL | BTR_PA_EXCLUDE_USER)));

	/* no return compression, no TSC, no MTC */
	btr_pt_opts_default(o);
	o->no_retcomp = 1;
	o->tsc = 0;
	o->mtc = 0;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK_EQ(a.config, (1u << 0) | (1u << 13) | (1u << 11));

	/* CYC with a threshold, MTC period 6, PSB period 5 */
	btr_pt_opts_default(o);
	o->cyc = 1;
	o->cyc_thresh = 7;
	o->mtc_period = 6;
	o->psb_period = 5;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK_EQ(a.config, (1u << 0) | (1u << 13) | (1u << 10) | (1u << 9) | (6u << 14) | (1u << 1) | (7u << 19) |
				   (5u << 24));
	/* an MTC period the CPU lacks (caps/mtc_periods 0x249: 0,3,6,9) */
	o->mtc_period = 2;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_UNSUPPORTED);
	CHECK(strstr(why, "mtc_periods") != NULL);
	/* a PSB period beyond caps/psb_periods 0x3f */
	o->mtc_period = 3;
	o->psb_period = 6;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_UNSUPPORTED);
	CHECK(strstr(why, "psb_periods") != NULL);
	/* cyc_thresh without cyc */
	btr_pt_opts_default(o);
	o->cyc_thresh = 1;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_INVAL);
	/* PTWRITE: a format but no cap on this CPU */
	btr_pt_opts_default(o);
	o->ptwrite = 1;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_UNSUPPORTED);
	CHECK(strstr(why, "ptwrite") != NULL);
	/* timing only (branch=0) */
	btr_pt_opts_default(o);
	o->branch_off = 1;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK_EQ(a.config & (1u << 13), 0);
	/* IP filters: 2 ranges on this CPU, a third is refused */
	btr_pt_opts_default(o);
	o->n_filters = 2;
	strcpy(o->filters[0].module, "/bin/true");
	strcpy(o->filters[1].module, "/bin/true");
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	o->n_filters = 3;
	strcpy(o->filters[2].module, "/bin/true");
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_UNSUPPORTED);
	CHECK(strstr(why, "num_address_ranges") != NULL);
	/* a kernel range needs --kernel */
	o->n_filters = 1;
	o->filters[0].module[0] = 0;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_INVAL);

	/* the bits come from the format files: the same options on a PMU
	 * whose formats sit elsewhere */
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-alt", "intel_pt", p), 0);
	btr_pt_opts_default(o);
	o->no_retcomp = 1;
	o->cyc = 1;
	o->cyc_thresh = 5;
	o->psb_period = 9;
	o->mtc_period = 0xb;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK_EQ(a.type, 42);
	CHECK(a.config == ((1ull << 1) | (1ull << 2) | (1ull << 40) | (1ull << 41) | (1ull << 42) | (1ull << 43) |
			   (1ull << 44) | (1ull << 46) | (1ull << 50)));
	CHECK_EQ(a.config1, 5);
	CHECK(a.config2 == 9ull << 60);

	/* a PMU without MTC and CYC: MTC (a default) is left out, CYC refused */
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-nomtc", "intel_pt", p), 0);
	btr_pt_opts_default(o);
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), 0);
	CHECK_EQ(a.type, 9);
	CHECK_EQ(a.config, (1u << 0) | (1u << 13) | (1u << 10));
	o->cyc = 1;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_UNSUPPORTED);
	CHECK(strstr(why, "psb_cyc") != NULL);
	btr_pt_opts_default(o);
	o->mtc_period = 3;
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_UNSUPPORTED);

	/* no PMU at all */
	CHECK_EQ(btr_pmu_load(DATA "/no-such-root", "intel_pt", p), 0);
	CHECK_EQ(btr_pt_attr(p, o, 0, &a, why, sizeof(why)), -BTR_ERR_NODEV);
	CHECK(strstr(why, "intel_pt") != NULL);
	free(p);
	free(o);
}

/* nm's value and size of function @sym in @file. */
static int nm_sym(const char *file, const char *sym, uint64_t *addr, uint64_t *size)
{
	char cmd[512], line[512];
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s' 2>/dev/null", file);
	FILE *f = popen(cmd, "r");
	if (!f)
		return -1;
	int found = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, s;
		char t, name[256];
		if (sscanf(line, "%llx %llx %c %255s", &a, &s, &t, name) == 4 && !strcmp(name, sym)) {
			*addr = a;
			*size = s;
			found = 0;
		}
	}
	pclose(f);
	return found;
}

static void test_ip_filter(void)
{
	struct btr_ip_filter *f = calloc(4, sizeof(*f));
	char buf[8192];
	/* kernel range */
	CHECK_EQ(btr_ip_filter_parse("0xffffffff81000000-0xffffffff81000fff", &f[0]), 0);
	CHECK(f[0].start == 0xffffffff81000000ull && f[0].end == 0xffffffff81000fffull);
	CHECK_STR(f[0].module, "");
	CHECK_EQ(btr_ip_filter_string(f, 1, buf, sizeof(buf)), (int)strlen("filter 0xffffffff81000000/0x1000"));
	CHECK_STR(buf, "filter 0xffffffff81000000/0x1000");
	CHECK_EQ(btr_ip_filter_parse("0x2000-0x1000", &f[1]), -BTR_ERR_INVAL);
	CHECK_EQ(btr_ip_filter_parse("main", &f[1]), -BTR_ERR_INVAL);
	CHECK_EQ(btr_ip_filter_parse("main@", &f[1]), -BTR_ERR_INVAL);
	CHECK_EQ(btr_ip_filter_parse("main@/no/such/file", &f[1]), -BTR_ERR_NOENT);
	CHECK_EQ(btr_ip_filter_parse("main@" BTR_SOURCE_DIR "/README.md", &f[1]), -BTR_ERR_BAD_ELF);

	/* SYM@MODULE and START-END@MODULE on the suite's programs: file
	 * offsets; non-PIE text is linked at 0x400000 + file offset, PIE at
	 * its file offset */
	const char *progs[2] = { "prog_symbols_nopie", "prog_symbols" };
	const uint64_t bias[2] = { 0x400000, 0 };
	for (int i = 0; i < 2; i++) {
		uint64_t addr, size;
		if (nm_sym(progs[i], "main", &addr, &size) < 0) {
			printf("note: nm or %s missing; symbol filter check skipped\n", progs[i]);
			continue;
		}
		char spec[600];
		snprintf(spec, sizeof(spec), "main@%s", progs[i]);
		CHECK_EQ(btr_ip_filter_parse(spec, &f[1]), 0);
		CHECK_EQ(f[1].start, addr - bias[i]);
		CHECK_EQ(f[1].end, addr - bias[i] + size - 1);
		CHECK_STR(f[1].module, progs[i]);
		snprintf(spec, sizeof(spec), "0x%llx-0x%llx@%s", (unsigned long long)addr,
			 (unsigned long long)(addr + size - 1), progs[i]);
		CHECK_EQ(btr_ip_filter_parse(spec, &f[2]), 0);
		CHECK_EQ(f[2].start, f[1].start);
		CHECK_EQ(f[2].end, f[1].end);
		char want[800];
		snprintf(want, sizeof(want), "filter 0x%llx/0x%llx@%s", (unsigned long long)(addr - bias[i]),
			 (unsigned long long)size, progs[i]);
		CHECK_EQ(btr_ip_filter_string(&f[1], 1, buf, sizeof(buf)), (int)strlen(want));
		CHECK_STR(buf, want);
		/* two filters: comma-separated */
		CHECK(btr_ip_filter_string(f, 2, buf, sizeof(buf)) > 0);
		CHECK(!strncmp(buf, "filter 0xffffffff81000000/0x1000,filter ", 40));
		snprintf(spec, sizeof(spec), "no_such_function@%s", progs[i]);
		CHECK_EQ(btr_ip_filter_parse(spec, &f[3]), -BTR_ERR_NOT_FOUND);
		/* an address outside every PT_LOAD */
		snprintf(spec, sizeof(spec), "0x10-0x20@%s", progs[i]);
		CHECK_EQ(btr_ip_filter_parse(spec, &f[3]), i == 0 ? -BTR_ERR_NOT_FOUND : 0);
	}
	CHECK_EQ(btr_ip_filter_string(f, 1, buf, 10), -BTR_ERR_OVERFLOW);
	CHECK_EQ(btr_ip_filter_string(f, 0, buf, sizeof(buf)), -BTR_ERR_INVAL);
	free(f);
}

static void test_bts(void)
{
	struct btr_pmu *p = malloc(sizeof(*p));
	struct btr_perf_event_attr a;
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-skl", "intel_bts", p), 0);
	CHECK_EQ(p->type, 7);
	/* user only (default): exclude_kernel -> BTS_OFF_OS */
	CHECK_EQ(btr_bts_attr(p, 0, 0, &a), 0);
	CHECK_EQ(a.type, 7);
	CHECK_EQ(a.config, 0);
	CHECK(a.flags & BTR_PA_EXCLUDE_KERNEL);
	CHECK(!(a.flags & BTR_PA_EXCLUDE_USER));
	CHECK_EQ(btr_bts_debugctl(&a), 0x40 | 0x80 | 0x200);
	/* kernel only -> BTS_OFF_USR */
	CHECK_EQ(btr_bts_attr(p, 0, 1, &a), 0);
	CHECK(a.flags & BTR_PA_EXCLUDE_USER);
	CHECK_EQ(btr_bts_debugctl(&a), 0x40 | 0x80 | 0x400);
	/* both: neither OFF bit */
	CHECK_EQ(btr_bts_attr(p, 1, 1, &a), 0);
	CHECK_EQ(btr_bts_debugctl(&a), 0xc0);
	CHECK_EQ(a.sample_type, 0x10086);
	CHECK(a.flags & BTR_PA_CONTEXT_SWITCH);
	/* no PMU */
	CHECK_EQ(btr_pmu_load(DATA "/sysfs-nomtc", "intel_bts", p), 0);
	CHECK_EQ(btr_bts_attr(p, 1, 0, &a), -BTR_ERR_NODEV);
	free(p);
}

static void test_lbr(void)
{
	uint64_t t;
	uint32_t msr;
	/* every class: exact branch_sample_type (default privilege user) */
	static const struct {
		const char *expr;
		uint64_t bst;
		uint32_t msr;  /* MSR_LBR_SELECT: set bits suppress (bits 0..8), bit 9 call stack */
	} cases[] = {
		/* any: all types kept, CPL_EQ_0 suppressed (user only) */
		{ "any", 0x1 | 0x8, 0x001 },
		{ "", 0x1 | 0x8, 0x001 },
		{ "call", 0x1 | 0x2000, 0x1f5 },            /* keeps NEAR_REL_CALL (3) and CPL_NEQ_0 (1) */
		{ "any_call", 0x1 | 0x10, 0x0e5 },          /* keeps 1, 3, 4, 8 */
		{ "any_return", 0x1 | 0x20, 0x0dd },        /* keeps 1, 5, 8 */
		{ "ind_call", 0x1 | 0x40, 0x1ed },          /* keeps 4 */
		{ "ind_jump", 0x1 | 0x1000, 0x1bd },        /* keeps 6 */
		{ "cond", 0x1 | 0x400, 0x1fb & ~0x2u },     /* keeps 2 */
		{ "call_stack", 0x1 | 0x800, 0x3c5 },       /* keeps 3, 4, 5 + EN_CALLSTACK */
		{ "any,kernel", 0x2 | 0x8, 0x002 },
		{ "any,user,kernel", 0x3 | 0x8, 0x000 },
		{ "cond,ind_call,user", 0x1 | 0x400 | 0x40, 0x1e9 },
		{ "any,hw_index", 0x1 | 0x8 | 0x20000, 0x001 },
		{ "any,save_type,no_cycles", 0x1 | 0x8 | 0x10000 | 0x8000, 0x001 },
		{ " Cond , KERNEL ", 0x2 | 0x400, 0x1fa },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_EQ(btr_lbr_filter_parse(cases[i].expr, &t), 0);
		if (t != cases[i].bst)
			fprintf(stderr, "filter '%s'\n", cases[i].expr);
		CHECK_EQ(t, cases[i].bst);
		CHECK_EQ(btr_lbr_select_from_branch_type(t, &msr), 0);
		if (msr != cases[i].msr)
			fprintf(stderr, "filter '%s'\n", cases[i].expr);
		CHECK_EQ(msr, cases[i].msr);
	}
	CHECK_EQ(btr_lbr_filter_parse("any,bogus", &t), -BTR_ERR_BAD_FILTER);
	/* software-only filters are not LBR_SELECT classes */
	CHECK_EQ(btr_lbr_select_from_branch_type(0x1 | 0x8 | 0x80, &msr), -BTR_ERR_UNSUPPORTED);

	struct btr_perf_event_attr a;
	CHECK_EQ(btr_lbr_filter_parse("any_call,user", &t), 0);
	CHECK_EQ(btr_lbr_attr(t, 0, &a), 0);
	CHECK_EQ(a.type, 0);
	CHECK_EQ(a.config, 0);
	CHECK_EQ(a.sample_period, 100003);
	CHECK_EQ(a.branch_sample_type, 0x11);
	CHECK_EQ(a.sample_type, 0x10000 | 0x800 | 0x100 | 0x80 | 0x4 | 0x2 | 0x1);
	CHECK(a.flags & BTR_PA_EXCLUDE_KERNEL);
	CHECK(!(a.flags & BTR_PA_EXCLUDE_USER));
	CHECK_EQ(btr_lbr_attr(t, 5000, &a), 0);
	CHECK_EQ(a.sample_period, 5000);
	CHECK_EQ(btr_lbr_attr(0x8, 0, &a), -BTR_ERR_INVAL);   /* no privilege */
}

int main(void)
{
	test_format_parse();
	test_pmu_load();
	test_pt_attr();
	test_ip_filter();
	test_bts();
	test_lbr();
	return check_done();
}
