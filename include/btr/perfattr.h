/* btr/perfattr.h - perf_event_attr construction for Intel PT, BTS and LBR,
 * as pure, testable code.
 *
 * lib/capture/ opens the events; everything that decides WHAT is opened
 * lives here: the PMU's sysfs description (type, format, caps), the
 * config bits of each option, the IP filter string for
 * PERF_EVENT_IOC_SET_FILTER, the branch_sample_type of an LBR --filter and
 * the MSR_LBR_SELECT value the kernel derives from it.  The sysfs root is
 * a parameter, so tests use sample trees under tests/data/.
 *
 * Sources: include/uapi/linux/perf_event.h (perf_event_attr, the
 * PERF_SAMPLE_BRANCH_* bits), arch/x86/events/intel/pt.c (format and caps
 * attributes), arch/x86/events/intel/bts.c and ds.c (DEBUGCTL for BTS),
 * arch/x86/events/intel/lbr.c (the LBR_SELECT map), the kernel's
 * perf_event_parse_addr_filter (filter syntax), Intel SDM Vol. 3C ch. 32
 * (IA32_RTIT_CTL) and Vol. 3B 17.4 (LBR, BTS).
 */
#ifndef BTR_PERFATTR_H
#define BTR_PERFATTR_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* struct perf_event_attr, PERF_ATTR_SIZE_VER7 (128 bytes), with the
 * bitfield word as one u64 (@flags, BTR_PA_* bits).  The layout is the
 * kernel's on every x86-64 (fixed-size members, natural alignment);
 * lib/capture/perf_event.c checks it against <linux/perf_event.h> at
 * compile time and passes it to perf_event_open as is. */
struct btr_perf_event_attr {
	uint32_t type;
	uint32_t size;
	uint64_t config;
	uint64_t sample_period;      /* or sample_freq with BTR_PA_FREQ */
	uint64_t sample_type;
	uint64_t read_format;
	uint64_t flags;              /* BTR_PA_* */
	uint32_t wakeup_events;      /* or wakeup_watermark with BTR_PA_WATERMARK */
	uint32_t bp_type;
	uint64_t config1;            /* PT: unused (IP filters go through SET_FILTER) */
	uint64_t config2;
	uint64_t branch_sample_type; /* PERF_SAMPLE_BRANCH_* */
	uint64_t sample_regs_user;
	uint32_t sample_stack_user;
	int32_t clockid;
	uint64_t sample_regs_intr;
	uint32_t aux_watermark;
	uint16_t sample_max_stack;
	uint16_t reserved_2;
	uint32_t aux_sample_size;
	uint32_t reserved_3;
	uint64_t sig_data;
};
#define BTR_PERF_ATTR_SIZE 128

/* Bits of the perf_event_attr bitfield word (in declaration order).  Macros,
 * not enumerators: bits 31 and above do not fit an int, which ISO C requires
 * of enumerators (the header stays clean under -std=c99 -pedantic). */
#define BTR_PA_DISABLED (1ull << 0)
#define BTR_PA_INHERIT (1ull << 1)
#define BTR_PA_PINNED (1ull << 2)
#define BTR_PA_EXCLUSIVE (1ull << 3)
#define BTR_PA_EXCLUDE_USER (1ull << 4)
#define BTR_PA_EXCLUDE_KERNEL (1ull << 5)
#define BTR_PA_EXCLUDE_HV (1ull << 6)
#define BTR_PA_EXCLUDE_IDLE (1ull << 7)
#define BTR_PA_MMAP (1ull << 8)
#define BTR_PA_COMM (1ull << 9)
#define BTR_PA_FREQ (1ull << 10)
#define BTR_PA_INHERIT_STAT (1ull << 11)
#define BTR_PA_ENABLE_ON_EXEC (1ull << 12)
#define BTR_PA_TASK (1ull << 13)
#define BTR_PA_WATERMARK (1ull << 14)
#define BTR_PA_PRECISE_IP_SHIFT 15   /* 2 bits */
#define BTR_PA_MMAP_DATA (1ull << 17)
#define BTR_PA_SAMPLE_ID_ALL (1ull << 18)
#define BTR_PA_EXCLUDE_HOST (1ull << 19)
#define BTR_PA_EXCLUDE_GUEST (1ull << 20)
#define BTR_PA_EXCLUDE_CALLCHAIN_KERNEL (1ull << 21)
#define BTR_PA_EXCLUDE_CALLCHAIN_USER (1ull << 22)
#define BTR_PA_MMAP2 (1ull << 23)
#define BTR_PA_COMM_EXEC (1ull << 24)
#define BTR_PA_USE_CLOCKID (1ull << 25)
#define BTR_PA_CONTEXT_SWITCH (1ull << 26)
#define BTR_PA_WRITE_BACKWARD (1ull << 27)
#define BTR_PA_NAMESPACES (1ull << 28)
#define BTR_PA_KSYMBOL (1ull << 29)
#define BTR_PA_BPF_EVENT (1ull << 30)
#define BTR_PA_AUX_OUTPUT (1ull << 31)
#define BTR_PA_CGROUP (1ull << 32)
#define BTR_PA_TEXT_POKE (1ull << 33)
#define BTR_PA_BUILD_ID (1ull << 34)

/* PERF_SAMPLE_* bits used here. */
enum {
	BTR_PS_IP = 1u << 0, BTR_PS_TID = 1u << 1, BTR_PS_TIME = 1u << 2, BTR_PS_ID = 1u << 6,
	BTR_PS_CPU = 1u << 7, BTR_PS_PERIOD = 1u << 8, BTR_PS_BRANCH_STACK = 1u << 11,
	BTR_PS_IDENTIFIER = 1u << 16,
};

/* PERF_SAMPLE_BRANCH_* bits (branch_sample_type). */
enum {
	BTR_PSB_USER = 1u << 0,
	BTR_PSB_KERNEL = 1u << 1,
	BTR_PSB_HV = 1u << 2,
	BTR_PSB_ANY = 1u << 3,
	BTR_PSB_ANY_CALL = 1u << 4,
	BTR_PSB_ANY_RETURN = 1u << 5,
	BTR_PSB_IND_CALL = 1u << 6,
	BTR_PSB_ABORT_TX = 1u << 7,
	BTR_PSB_IN_TX = 1u << 8,
	BTR_PSB_NO_TX = 1u << 9,
	BTR_PSB_COND = 1u << 10,
	BTR_PSB_CALL_STACK = 1u << 11,
	BTR_PSB_IND_JUMP = 1u << 12,
	BTR_PSB_CALL = 1u << 13,
	BTR_PSB_NO_FLAGS = 1u << 14,
	BTR_PSB_NO_CYCLES = 1u << 15,
	BTR_PSB_TYPE_SAVE = 1u << 16,
	BTR_PSB_HW_INDEX = 1u << 17,
};

/* ---- PMU description from sysfs ---- */

#define BTR_PMU_MAX_FORMATS 32
#define BTR_PMU_MAX_CAPS 32

/* One `format` file: NAME holds "configN:LO[-HI][,LO[-HI]...]". */
struct btr_pmu_format {
	char name[32];
	uint8_t word;        /* 0: config, 1: config1, 2: config2 */
	uint64_t mask;       /* the bits the value is spread over, low to high */
};

/* A PMU as /sys/bus/event_source/devices/NAME describes it. */
struct btr_pmu {
	char name[32];
	int present;                      /* the directory exists */
	int type;                         /* the `type` file; -1 if unreadable */
	unsigned n_formats;
	struct btr_pmu_format formats[BTR_PMU_MAX_FORMATS];
	unsigned n_caps;
	struct {
		char name[40];
		uint64_t value;           /* the file's number (hex, as the kernel prints caps) */
	} caps[BTR_PMU_MAX_CAPS];
	uint64_t max_nonturbo_ratio;      /* intel_pt: the file of that name, 0 if none */
	uint32_t tsc_art_num, tsc_art_den;/* intel_pt: tsc_art_ratio "N:D", 0 if none */
};

/* Parses one format specification ("config:14-17", "config1:0-7,32-35").
 * Returns 0 or -BTR_ERR_BAD_FORMAT (unknown word, bit > 63, lo > hi). */
int btr_pmu_format_parse(const char *spec, struct btr_pmu_format *out);

/* Reads PMU @name under @sysfs_root (NULL: "/sys/bus/event_source/devices")
 * into @out: `type`, every file of `format/` and `caps/`, and the intel_pt
 * timing files.  A missing directory is not an error: @out->present is 0.
 * Returns 0, or -BTR_ERR_BAD_FORMAT for a format file that does not parse
 * (named in the log), -BTR_ERR_INVAL on NULL arguments. */
int btr_pmu_load(const char *sysfs_root, const char *name, struct btr_pmu *out);

/* The cap @name of @pmu: returns 1 and sets *@value, or 0 if the PMU has
 * no such cap file. */
int btr_pmu_cap(const struct btr_pmu *pmu, const char *name, uint64_t *value);

/* Sets format @name to @value in @config[3] (config, config1, config2):
 * the value's bits are spread over the format's mask from low to high,
 * as perf's pmu_format_value() does; the old bits are cleared first.
 * Returns 0, -BTR_ERR_NOT_FOUND (the PMU has no such format; the kernel
 * predates the feature) or -BTR_ERR_INVAL (@value does not fit). */
int btr_pmu_set(const struct btr_pmu *pmu, const char *name, uint64_t value, uint64_t config[3]);

/* ---- Intel PT ---- */

#define BTR_PT_MAX_FILTERS 8

/* One address range for IP filtering: [start, end] inclusive.  With
 * @module set the addresses are offsets in that file (the kernel maps
 * them onto every mapping of the file, in every process); without, they
 * are kernel addresses. */
struct btr_ip_filter {
	uint64_t start, end;
	char module[4096];   /* "" for a kernel range */
};

/* Parses `--ip-filter SPEC`: "START-END" (kernel addresses), or
 * "START-END@MODULE" and "SYM@MODULE" (MODULE an ELF file; START-END are
 * link-time virtual addresses of that file and SYM a function symbol in
 * its .symtab or .dynsym; both are converted to file offsets through the
 * PT_LOAD program headers, as the kernel wants them).  Returns 0,
 * -BTR_ERR_INVAL (syntax, START > END), -BTR_ERR_NOENT / -BTR_ERR_BAD_ELF
 * (MODULE), -BTR_ERR_NOT_FOUND (SYM is not in MODULE, or an address is
 * not in a PT_LOAD segment).  The cause is logged. */
int btr_ip_filter_parse(const char *spec, struct btr_ip_filter *out);

/* Writes the string for PERF_EVENT_IOC_SET_FILTER into @buf: one
 * "filter 0xSTART/0xSIZE[@MODULE]" per range, separated by ','.
 * Returns the length, -BTR_ERR_INVAL (@n 0 or > BTR_PT_MAX_FILTERS, an
 * empty range) or -BTR_ERR_OVERFLOW (@size too small). */
int btr_ip_filter_string(const struct btr_ip_filter *f, unsigned n, char *buf, size_t size);

/* Options of a PT recording (btr record -b pt). */
struct btr_pt_opts {
	int user, kernel;        /* trace CPL > 0 / CPL 0 (neither: user only) */
	int no_retcomp;          /* disable return compression (noretcomp) */
	int tsc;                 /* TSC packets (default on) */
	int mtc;                 /* MTC packets (default on where the PMU can) */
	int mtc_period;          /* -1: default (3, as perf), else 0..15 (caps/mtc_periods) */
	int cyc;                 /* CYC packets */
	int cyc_thresh;          /* -1: default (0 = every cycle), else 0..15 (caps/cycle_thresholds) */
	int psb_period;          /* -1: default (kernel's), else 0..15 (2K << n bytes; caps/psb_periods) */
	int ptwrite;             /* PTWRITE packets */
	int pwr_evt;             /* power event packets */
	int snapshot;            /* AUX area in overwrite mode (written out on SIGUSR2) */
	int branch_off;          /* 1: no COFI packets (branch=0: timing only) */
	unsigned n_filters;      /* IP filter ranges (caps/num_address_ranges) */
	struct btr_ip_filter filters[BTR_PT_MAX_FILTERS];
};

/* Fills @o with the defaults (user only, TSC, MTC, return compression). */
void btr_pt_opts_default(struct btr_pt_opts *o);

/* Parses a PT configuration string into @o (on top of what @o holds):
 * comma-separated terms cyc, cyc_thresh=N, mtc_period=N, psb_period=N
 * (N 0..15), notsc, nomtc, noretcomp, ptw, pwr_evt, nobranch.  Returns 0
 * or -BTR_ERR_INVAL naming the bad term in the log. */
int btr_pt_opts_parse(const char *s, struct btr_pt_opts *o);

/* Builds the intel_pt event attr for @o on @pmu (btr_pmu_load of
 * "intel_pt"): type from sysfs; config from the format files (pt,
 * branch, tsc, mtc + mtc_period, cyc + cyc_thresh, psb_period,
 * noretcomp, ptw, pwr_evt); exclude_kernel / exclude_user; disabled and
 * enable_on_exec (the recorder enables it at exec); sample_id_all with
 * TID|TIME|CPU|IDENTIFIER so sideband records carry their time and CPU;
 * the sideband bits mmap, mmap2, comm, comm_exec, task, context_switch on
 * the same event (one ring per thread/CPU gives records and AUX data in
 * one place); aux_watermark 1/4 of @aux_size; @snapshot does not change
 * the attr (it is a read-only AUX mapping).  Each option is checked
 * against the PMU's caps: @why (if non-NULL, @why_size bytes) names the
 * missing cap.  Returns 0, -BTR_ERR_NODEV (@pmu not present),
 * -BTR_ERR_UNSUPPORTED (an option the PMU cannot do), -BTR_ERR_INVAL. */
int btr_pt_attr(const struct btr_pmu *pmu, const struct btr_pt_opts *o, uint64_t aux_size,
		struct btr_perf_event_attr *attr, char *why, size_t why_size);

/* ---- BTS ---- */

/* IA32_DEBUGCTL bits the kernel's BTS code programs (SDM Vol. 3B 17.4.1). */
enum {
	BTR_DEBUGCTL_TR = 1u << 6,
	BTR_DEBUGCTL_BTS = 1u << 7,
	BTR_DEBUGCTL_BTINT = 1u << 8,
	BTR_DEBUGCTL_BTS_OFF_OS = 1u << 9,
	BTR_DEBUGCTL_BTS_OFF_USR = 1u << 10,
};

/* Builds the intel_bts event attr: type from sysfs, config 0,
 * exclude_kernel unless @kernel, exclude_user unless @user (neither: user
 * only), disabled + enable_on_exec, sample_id_all with TID|TIME|CPU|
 * IDENTIFIER, sideband bits as for PT.  Returns 0, -BTR_ERR_NODEV,
 * -BTR_ERR_INVAL. */
int btr_bts_attr(const struct btr_pmu *pmu, int user, int kernel, struct btr_perf_event_attr *attr);

/* The IA32_DEBUGCTL value the kernel programs for @attr (intel_bts and
 * ds.c: TR | BTS, plus BTS_OFF_OS when the kernel is excluded and
 * BTS_OFF_USR when user space is; intel_bts writes to a buffer without
 * the BTINT interrupt, the AUX code handles the threshold). */
uint32_t btr_bts_debugctl(const struct btr_perf_event_attr *attr);

/* ---- LBR ---- */

/* MSR_LBR_SELECT bits (the classes of btr/branch.h; a set bit SUPPRESSES
 * the class) and EN_CALLSTACK (bit 9). */

/* Parses an LBR `--filter` (comma list) into PERF_SAMPLE_BRANCH_* bits:
 *   any        ANY         every branch type
 *   call       CALL        direct near calls
 *   any_call   ANY_CALL    near direct + indirect calls and far branches
 *   any_return ANY_RETURN  near returns and far branches
 *   ind_call   IND_CALL    near indirect calls
 *   ind_jump   IND_JUMP    near indirect jumps
 *   cond       COND        conditional branches
 *   call_stack CALL_STACK  call-stack mode (Haswell+)
 *   user, kernel           privilege (none given: user)
 *   hw_index   HW_INDEX    save the LBR top-of-stack index
 *   save_type  TYPE_SAVE   save each entry's branch type
 *   no_flags, no_cycles    leave those out
 * No type term: any.  Returns 0, or -BTR_ERR_BAD_FILTER naming the term
 * in the log, -BTR_ERR_INVAL on NULL. */
int btr_lbr_filter_parse(const char *expr, uint64_t *branch_sample_type);

/* The MSR_LBR_SELECT value the kernel programs for @branch_sample_type
 * (arch/x86/events/intel/lbr.c, hsw_lbr_sel_map): each requested class
 * enables LBR_SELECT classes (set bits = suppressed, so the MSR is the
 * complement within bits 0..8):
 *   USER -> CPL_NEQ_0, KERNEL -> CPL_EQ_0,
 *   ANY -> all types, ANY_CALL -> NEAR_REL_CALL|NEAR_IND_CALL|FAR_BRANCH,
 *   ANY_RETURN -> NEAR_RET|FAR_BRANCH, IND_CALL -> NEAR_IND_CALL,
 *   COND -> JCC, IND_JUMP -> NEAR_IND_JMP, CALL -> NEAR_REL_CALL,
 *   CALL_STACK -> NEAR_REL_CALL|NEAR_IND_CALL|NEAR_RET + EN_CALLSTACK.
 * Returns 0 and sets *@msr, or -BTR_ERR_UNSUPPORTED for bits the LBR
 * cannot filter in hardware (HV, ABORT_TX, IN_TX, NO_TX: the kernel
 * filters those in software), -BTR_ERR_INVAL on NULL. */
int btr_lbr_select_from_branch_type(uint64_t branch_sample_type, uint32_t *msr);

/* Builds the LBR sampling attr: PERF_TYPE_HARDWARE cycles (config 0)
 * every @period cycles (0: 100003, perf's odd default avoids lockstep
 * with loops), sample_type IP|TID|TIME|CPU|PERIOD|BRANCH_STACK|IDENTIFIER,
 * @branch_sample_type (exclude_user / exclude_kernel follow its
 * USER/KERNEL bits so the counter and the filter agree), precise_ip 0,
 * disabled + enable_on_exec, sideband bits as for PT.  Returns 0 or
 * -BTR_ERR_INVAL (no privilege bit). */
int btr_lbr_attr(uint64_t branch_sample_type, uint64_t period, struct btr_perf_event_attr *attr);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
