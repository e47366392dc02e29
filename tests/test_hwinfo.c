/* test_hwinfo.c - decoding the machine's tracing facilities
 * (btr/hwinfo.h): CPUID leaf 0x14 as a Skylake client reports it (SDM
 * Vol. 2A, Table 3-8: subleaf 0 EBX 0xf, ECX 0x80000007; subleaf 1 EAX
 * 0x02490002, EBX 0x003f3fff), the sample sysfs trees of tests/data/,
 * the paranoid file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btr/hwinfo.h"
#include "check.h"

#define DATA BTR_SOURCE_DIR "/tests/data"

/* CPUID.1:EAX signatures: Kaby Lake 0x806ec (6/0x8e/0xc), a Pentium 4
 * 0xf29 (0xf/2/9: extended family 0), Zen 3 0xa20f10 (0x19/0x21/0),
 * Goldmont 0x506c9 (6/0x5c/9), a Pentium Pro, a Penryn, a K10. */
static void signatures(void)
{
	static const struct { uint32_t eax; unsigned fam, model, step; } sig[] = {
		{ 0x000806ec, 6, 0x8e, 0xc }, { 0x00000f29, 0xf, 2, 9 },
		{ 0x00a20f10, 0x19, 0x21, 0 }, { 0x000506c9, 6, 0x5c, 9 },
		{ 0x00000633, 6, 3, 3 }, { 0x00010676, 6, 0x17, 6 }, { 0x00100f22, 0x10, 2, 2 },
	};
	for (size_t i = 0; i < sizeof(sig) / sizeof(sig[0]); i++) {
		unsigned f = 0, m = 0, s = 0;
		btr_cpuid_signature_decode(sig[i].eax, &f, &m, &s);
		CHECK_EQ(f, sig[i].fam);
		CHECK_EQ(m, sig[i].model);
		CHECK_EQ(s, sig[i].step);
	}
	btr_cpuid_signature_decode(0x000806ec, NULL, NULL, NULL);   /* any pointer may be NULL */
}

int main(void)
{
	signatures();
	struct btr_pt_cpuid pt;
	const uint32_t s0[4] = { 1, 0xf, 0x80000007, 0 }, s1[4] = { 0x02490002, 0x003f3fff, 0, 0 };
	btr_pt_cpuid_decode(1, s0, s1, &pt);
	CHECK_EQ(pt.valid, 1);
	CHECK_EQ(pt.max_subleaf, 1);
	CHECK(pt.cr3_filtering && pt.psb_cyc && pt.ip_filtering && pt.mtc);
	CHECK(!pt.ptwrite && !pt.power_event_trace && !pt.event_trace && !pt.tnt_disable);
	CHECK(pt.topa && pt.topa_multiple && pt.single_range && !pt.trace_transport && pt.lip);
	CHECK_EQ(pt.num_address_ranges, 2);
	CHECK_EQ(pt.mtc_periods, 0x249);
	CHECK_EQ(pt.cycle_thresholds, 0x3fff);
	CHECK_EQ(pt.psb_periods, 0x3f);
	/* a later core: PTWRITE, power events; subleaf 1 ignored when
	 * max_subleaf is 0 */
	const uint32_t t0[4] = { 0, 0x1ff, 0x7, 0 };
	btr_pt_cpuid_decode(1, t0, s1, &pt);
	CHECK(pt.ptwrite && pt.power_event_trace && pt.event_trace && pt.tnt_disable && !pt.lip);
	CHECK_EQ(pt.num_address_ranges, 0);
	CHECK_EQ(pt.mtc_periods, 0);
	/* no PT: nothing decoded */
	btr_pt_cpuid_decode(0, s0, s1, &pt);
	CHECK_EQ(pt.valid, 0);
	CHECK_EQ(pt.mtc, 0);

	struct btr_hwinfo *hw = calloc(1, sizeof(*hw));
	CHECK_EQ(btr_hwinfo_sysfs(DATA "/sysfs-skl", hw), 0);
	CHECK_EQ(hw->lbr_depth, 32);
	CHECK_STR(hw->pmu_name, "skylake");
	CHECK_EQ(hw->intel_pt.present, 1);
	CHECK_EQ(hw->intel_pt.type, 8);
	CHECK_EQ(hw->intel_bts.present, 1);
	CHECK_EQ(hw->intel_bts.type, 7);
	/* caps come back sorted by name (stable output) */
	CHECK_STR(hw->intel_pt.caps[0].name, "cr3_filtering");
	for (unsigned i = 1; i < hw->intel_pt.n_caps; i++)
		CHECK(strcmp(hw->intel_pt.caps[i - 1].name, hw->intel_pt.caps[i].name) < 0);
	CHECK_EQ(btr_hwinfo_sysfs(DATA "/sysfs-nomtc", hw), 0);
	CHECK_EQ(hw->lbr_depth, 0);
	CHECK_STR(hw->pmu_name, "");
	CHECK_EQ(hw->intel_bts.present, 0);

	/* paranoid */
	char path[] = "/tmp/btr-paranoid-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK(write(fd, "2\n", 2) == 2);
	close(fd);
	CHECK_EQ(btr_hwinfo_paranoid(path), 2);
	unlink(path);
	CHECK_EQ(btr_hwinfo_paranoid("/nonexistent/paranoid"), -100);
	CHECK(strstr(btr_hwinfo_paranoid_text(2), "user space only") != NULL);
	CHECK(strstr(btr_hwinfo_paranoid_text(3), "CAP_PERFMON") != NULL);
	CHECK(strstr(btr_hwinfo_paranoid_text(-1), "no restrictions") != NULL);
	CHECK(strstr(btr_lbr_format_name(5), "LBR_INFO") != NULL);
	CHECK_STR(btr_lbr_format_name(42), "unknown");
	free(hw);
	return check_done();
}
