/* perf_pt.c - the "pt" backend: Intel Processor Trace through the
 * intel_pt PMU (perf_event_open + AUX area), docs/record.md.
 *
 * The event is built by btr_pt_attr (lib/perf/perfattr.c) from the PMU's own
 * sysfs description, so the config bits are whatever this kernel says
 * they are; the recorder loop is lib/capture/perf_event.c.
 */
#include "perf_event.h"
#include "perf_ops.h"
#include "btr/error.h"
#include "internal.h"
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_AUX (4u << 20)

int btr_pt_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	if (!opts || !BTR_OPTS_VALID(opts, BTR_CAPTURE_OPTS_V1) || !res)
		return -BTR_ERR_INVAL;
	struct btr_capture_probe pr;
	memset(&pr, 0, sizeof(pr));
	btr_probe_pt(&pr);
	if (!pr.usable)
		return btr_perf_refuse("pt", pr.reason);

	struct btr_pmu *pmu = calloc(1, sizeof(*pmu));
	struct btr_pt_opts *po = calloc(1, sizeof(*po));
	struct btr_perf_capture *pc = calloc(1, sizeof(*pc));
	int rc = -BTR_ERR_NOMEM;
	if (!pmu || !po || !pc)
		goto out;
	if ((rc = btr_pmu_load(opts->sysfs_root ? opts->sysfs_root : btr_perf_ops_get()->sysfs_root, "intel_pt", pmu)) < 0) {
		btr_err("pt: the intel_pt PMU's sysfs description does not parse");
		goto out;
	}
	btr_pt_opts_default(po);
	btr_perf_privilege(opts, &po->user, &po->kernel);
	po->no_retcomp = opts->no_retcomp;
	po->snapshot = opts->snapshot;
	if (opts->pt_config && (rc = btr_pt_opts_parse(opts->pt_config, po)) < 0)
		goto out;
	if (opts->n_ip_filters > BTR_PT_MAX_FILTERS) {
		btr_err("pt: at most %d --ip-filter ranges", BTR_PT_MAX_FILTERS);
		rc = -BTR_ERR_INVAL;
		goto out;
	}
	for (unsigned i = 0; i < opts->n_ip_filters; i++)
		if ((rc = btr_ip_filter_parse(opts->ip_filters[i], &po->filters[i])) < 0)
			goto out;
	po->n_filters = opts->n_ip_filters;
	uint64_t aux = opts->aux_size ? opts->aux_size : DEFAULT_AUX;
	if (aux & (aux - 1)) {
		btr_err("pt: the AUX size %llu is not a power of two", (unsigned long long)aux);
		rc = -BTR_ERR_INVAL;
		goto out;
	}
	char why[256];
	if ((rc = btr_pt_attr(pmu, po, aux, &pc->attr, why, sizeof(why))) < 0) {
		btr_err("pt: %s", why);
		goto out;
	}
	if (po->n_filters && (rc = btr_ip_filter_string(po->filters, po->n_filters, pc->filter,
							sizeof(pc->filter))) < 0) {
		btr_err("pt: the IP filters do not fit in one filter string");
		goto out;
	}
	pc->backend = "pt";
	pc->aux_type = BTR_REC_PT;
	pc->aux_size = aux;
	pc->snapshot = po->snapshot;
	pc->nom_freq = (uint32_t)pmu->max_nonturbo_ratio;
	pc->machine_flags = (po->no_retcomp ? 0 : BTR_MACHINE_PT_RETCOMP) | (po->tsc ? BTR_MACHINE_PT_TSC : 0) |
			    (po->cyc ? BTR_MACHINE_PT_CYC : 0);
	uint64_t cfg[3] = { pc->attr.config, pc->attr.config1, pc->attr.config2 }, probe[3] = { 0, 0, 0 };
	if (btr_pmu_set(pmu, "mtc", 1, probe) == 0 && ((cfg[0] & probe[0]) || (cfg[1] & probe[1]))) {
		pc->machine_flags |= BTR_MACHINE_PT_MTC;
		pc->mtc_freq = (uint8_t)(po->mtc_period < 0 ? 3 : po->mtc_period);
	}
	if (po->cyc && po->cyc_thresh > 0)
		pc->cyc_thresh = (uint8_t)po->cyc_thresh;
	if (po->n_filters)
		pc->machine_flags |= BTR_MACHINE_IP_FILTER;
	if (po->user && !po->kernel)
		pc->machine_flags |= BTR_MACHINE_USER_ONLY;
	else if (po->kernel && !po->user)
		pc->machine_flags |= BTR_MACHINE_KERNEL_ONLY;
	rc = btr_perf_capture_run(opts, pc, res);
out:
	free(pmu);
	free(po);
	free(pc);
	return rc;
}
