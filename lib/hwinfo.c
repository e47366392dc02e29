/* hwinfo.c - decoding what the machine offers for tracing (btr/hwinfo.h).
 * Pure: registers and files in, facts out. */
#include "btr/hwinfo.h"
#include "btr/error.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define BIT(v, n) (((v) >> (n)) & 1u)

void btr_cpuid_signature_decode(uint32_t eax, unsigned *family, unsigned *model, unsigned *stepping)
{
	unsigned fam = (eax >> 8) & 0xf, mod = (eax >> 4) & 0xf;
	if (fam == 0xf)
		fam += (eax >> 20) & 0xff;
	if (fam == 6 || fam >= 0xf)
		mod |= ((eax >> 16) & 0xf) << 4;
	if (family)
		*family = fam;
	if (model)
		*model = mod;
	if (stepping)
		*stepping = eax & 0xf;
}

void btr_pt_cpuid_decode(int pt_supported, const uint32_t sub0[4], const uint32_t sub1[4], struct btr_pt_cpuid *out)
{
	memset(out, 0, sizeof(*out));
	if (!pt_supported || !sub0)
		return;
	out->valid = 1;
	out->max_subleaf = sub0[0];
	uint32_t b = sub0[1], c = sub0[2];
	out->cr3_filtering = BIT(b, 0);
	out->psb_cyc = BIT(b, 1);
	out->ip_filtering = BIT(b, 2);
	out->mtc = BIT(b, 3);
	out->ptwrite = BIT(b, 4);
	out->power_event_trace = BIT(b, 5);
	out->psb_pmi_preserve = BIT(b, 6);
	out->event_trace = BIT(b, 7);
	out->tnt_disable = BIT(b, 8);
	out->topa = BIT(c, 0);
	out->topa_multiple = BIT(c, 1);
	out->single_range = BIT(c, 2);
	out->trace_transport = BIT(c, 3);
	out->lip = BIT(c, 31);
	if (sub1 && out->max_subleaf >= 1) {
		out->num_address_ranges = sub1[0] & 7;
		out->mtc_periods = sub1[0] >> 16;
		out->cycle_thresholds = sub1[1] & 0xffff;
		out->psb_periods = sub1[1] >> 16;
	}
}

int btr_hwinfo_sysfs(const char *root, struct btr_hwinfo *out)
{
	int rc = btr_pmu_load(root, "intel_pt", &out->intel_pt);
	int rc2 = btr_pmu_load(root, "intel_bts", &out->intel_bts);
	/* cpu/caps: the core PMU's facts perf exposes (branches = LBR depth) */
	char path[4096], line[64];
	snprintf(path, sizeof(path), "%s/cpu/caps/branches", root ? root : "/sys/bus/event_source/devices");
	FILE *f = fopen(path, "re");
	out->lbr_depth = 0;
	if (f) {
		if (fgets(line, sizeof(line), f))
			sscanf(line, "%u", &out->lbr_depth);
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/cpu/caps/pmu_name", root ? root : "/sys/bus/event_source/devices");
	out->pmu_name[0] = 0;
	if ((f = fopen(path, "re"))) {
		if (fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(out->pmu_name, sizeof(out->pmu_name), "%.31s", line);
		}
		fclose(f);
	}
	return rc < 0 ? rc : rc2;
}

int btr_hwinfo_paranoid(const char *path)
{
	FILE *f = fopen(path ? path : "/proc/sys/kernel/perf_event_paranoid", "re");
	int v;
	if (!f)
		return -100;
	if (fscanf(f, "%d", &v) != 1)
		v = -100;
	fclose(f);
	return v;
}

const char *btr_hwinfo_paranoid_text(int level)
{
	/* Documentation/admin-guide/sysctl/kernel.rst, perf_event_paranoid;
	 * Debian's kernels add 3 (no perf_event_open without CAP_PERFMON) */
	if (level == -100)
		return "unknown (the file cannot be read)";
	if (level >= 3)
		return "perf_event_open is denied to unprivileged users (needs CAP_PERFMON or root)";
	if (level == 2)
		return "unprivileged users may trace their own processes in user space only";
	if (level == 1)
		return "unprivileged users may trace their own processes in user and kernel space";
	if (level == 0)
		return "unprivileged users may also trace per CPU (-a), without raw tracepoints";
	return "no restrictions";
}

const char *btr_lbr_format_name(int format)
{
	switch (format) {
	case 0: return "32-bit addresses";
	case 1: return "64-bit LIP";
	case 2: return "64-bit EIP";
	case 3: return "64-bit EIP with flags (mispredict)";
	case 4: return "64-bit EIP with flags and TSX";
	case 5: return "64-bit EIP, LBR_INFO (mispredict, TSX, cycles)";
	case 6: return "64-bit LIP, LBR_INFO without TSX";
	default: return "unknown";
	}
}
