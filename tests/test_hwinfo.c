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

int main(void)
{
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
