/* btr/hwinfo.h - what this machine offers for branch tracing, decoded
 * from raw facts (`btr info`).
 *
 * The facts are gathered by lib/capture/probe.c (CPUID, sysfs, /proc);
 * the decoding here is pure, so tests feed it register values from the
 * Intel SDM and sample sysfs trees (tests/data/).
 *
 * Sources: Intel SDM Vol. 2A CPUID (leaf 1 ECX[31] hypervisor present,
 * EDX[21] DS; leaf 7 EBX[25] Intel PT; leaf 0x14 the PT capabilities;
 * leaf 0x1C architectural LBR), Vol. 3B 17.4.8.1 (LBR format in
 * IA32_PERF_CAPABILITIES[5:0]), the kernel's sysfs ABI for event sources.
 */
#ifndef BTR_HWINFO_H
#define BTR_HWINFO_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdint.h>
#include "btr/perfattr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPUID leaf 0x14 (Intel PT capabilities), decoded. */
struct btr_pt_cpuid {
	int valid;                  /* leaf 0x14 present and PT supported */
	uint32_t max_subleaf;       /* leaf 0x14.0 EAX */
	/* 0x14.0 EBX */
	int cr3_filtering, psb_cyc, ip_filtering, mtc, ptwrite, power_event_trace, psb_pmi_preserve,
		event_trace, tnt_disable;
	/* 0x14.0 ECX */
	int topa, topa_multiple, single_range, trace_transport, lip;
	/* 0x14.1 (when max_subleaf >= 1) */
	unsigned num_address_ranges;  /* EAX[2:0] */
	uint32_t mtc_periods;         /* EAX[31:16]: bit n = MTC period n supported */
	uint32_t cycle_thresholds;    /* EBX[15:0] */
	uint32_t psb_periods;         /* EBX[31:16] */
};

/* Decodes leaf 0x14 from its registers: @sub0 = {eax, ebx, ecx, edx} of
 * subleaf 0, @sub1 of subleaf 1 (may be NULL).  @pt_supported is
 * CPUID.(7,0):EBX[25].  Never fails. */
void btr_pt_cpuid_decode(int pt_supported, const uint32_t sub0[4], const uint32_t sub1[4], struct btr_pt_cpuid *out);

/* Decodes the processor signature CPUID.1:EAX (SDM Vol. 2A, CPUID, "Version
 * Information"): the family is the base family, plus the extended family
 * when the base is 0xF; the model is the base model, with the extended
 * model as its high nibble for families 6 and 0xF and up.  Stores them and
 * the stepping; any pointer may be NULL.  Never fails. */
void btr_cpuid_signature_decode(uint32_t eax, unsigned *family, unsigned *model, unsigned *stepping);

/* The CPU and its tracing facilities. */
struct btr_hwinfo {
	char vendor[13];            /* CPUID.0 "GenuineIntel" */
	unsigned family, model, stepping;
	int hypervisor;             /* CPUID.1:ECX[31] */
	char hypervisor_vendor[13]; /* CPUID.0x40000000 EBX,ECX,EDX, "" if none */
	int ds;                     /* CPUID.1:EDX[21]: debug store (BTS, PEBS) */
	int pdcm;                   /* CPUID.1:ECX[15]: IA32_PERF_CAPABILITIES exists */
	int arch_lbr;               /* CPUID.(7,0):EDX[19] */
	unsigned arch_lbr_depths;   /* CPUID.0x1C EAX[7:0]: bit n = depth 8*(n+1) */
	int lbr_format;             /* IA32_PERF_CAPABILITIES[5:0], -1 if unreadable */
	unsigned lbr_depth;         /* sysfs cpu/caps/branches (what perf uses), 0 if unknown */
	char pmu_name[32];          /* sysfs cpu/caps/pmu_name, "" if none */
	struct btr_pt_cpuid pt;
	struct btr_pmu intel_pt, intel_bts;
	int paranoid;               /* kernel.perf_event_paranoid, -100 if unreadable */
};

/* Fills the sysfs part of @out (intel_pt, intel_bts, cpu caps) from
 * @sysfs_root (NULL: /sys/bus/event_source/devices).  Returns 0, or
 * -BTR_ERR_BAD_FORMAT if a PMU format file does not parse. */
int btr_hwinfo_sysfs(const char *sysfs_root, struct btr_hwinfo *out);

/* Reads kernel.perf_event_paranoid from @path (NULL: /proc/sys/kernel/
 * perf_event_paranoid): returns the value, or -100 if unreadable. */
int btr_hwinfo_paranoid(const char *path);

/* What a paranoid level allows, in one phrase ("user-space profiling of
 * own processes only", ...). */
const char *btr_hwinfo_paranoid_text(int level);

/* The name of an LBR format (IA32_PERF_CAPABILITIES[5:0]: 0 "32-bit",
 * 1 "64-bit LIP", 2 "64-bit EIP", 3 "64-bit EIP + flags", 4 "+ TSX",
 * 5 "+ LBR_INFO", 6 "LBR_INFO, no TSX"), or "unknown". */
const char *btr_lbr_format_name(int format);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
