/* perf_bts.c - the "bts" backend: Branch Trace Store through the
 * intel_bts PMU, docs/record.md.
 *
 * The kernel programs IA32_DEBUGCTL (TR | BTS, BTS_OFF_OS when the kernel
 * is excluded, BTS_OFF_USR when user space is: btr_bts_debugctl) and the
 * DS save area, and copies the 24-byte {from, to, flags} records into the
 * AUX area, which lib/capture/perf_event.c writes as BTS records.
 */
#include "perf_event.h"
#include "perf_ops.h"
#include "btr/error.h"
#include "internal.h"
#include "output.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_AUX (4u << 20)

int btr_bts_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	if (!opts || !BTR_OPTS_VALID(opts, BTR_CAPTURE_OPTS_V1) || !res)
		return -BTR_ERR_INVAL;
	struct btr_capture_probe pr;
	memset(&pr, 0, sizeof(pr));
	btr_probe_bts(&pr);
	if (!pr.usable)
		return btr_perf_refuse("bts", pr.reason);
	if (opts->n_ip_filters || opts->pt_config) {
		btr_err("bts: --ip-filter and --pt-config are Intel PT options");
		return -BTR_ERR_INVAL;
	}
	struct btr_pmu *pmu = calloc(1, sizeof(*pmu));
	struct btr_perf_capture *pc = calloc(1, sizeof(*pc));
	int rc = -BTR_ERR_NOMEM;
	if (!pmu || !pc)
		goto out;
	if ((rc = btr_pmu_load(opts->sysfs_root ? opts->sysfs_root : btr_perf_ops_get()->sysfs_root, "intel_bts", pmu)) < 0)
		goto out;
	int user, kernel;
	btr_perf_privilege(opts, &user, &kernel);
	if ((rc = btr_bts_attr(pmu, user, kernel, &pc->attr)) < 0) {
		btr_perf_refuse("bts", "the intel_bts PMU has no readable type");
		goto out;
	}
	uint64_t aux = opts->aux_size ? opts->aux_size : DEFAULT_AUX;
	if (aux & (aux - 1)) {
		btr_err("bts: the AUX size %llu is not a power of two", (unsigned long long)aux);
		rc = -BTR_ERR_INVAL;
		goto out;
	}
	pc->backend = "bts";
	pc->aux_type = BTR_REC_BTS;
	pc->aux_size = aux;
	pc->snapshot = opts->snapshot;
	if (user && !kernel)
		pc->machine_flags |= BTR_MACHINE_USER_ONLY;
	else if (kernel && !user)
		pc->machine_flags |= BTR_MACHINE_KERNEL_ONLY;
	rc = btr_perf_capture_run(opts, pc, res);
out:
	free(pmu);
	free(pc);
	return rc;
}
