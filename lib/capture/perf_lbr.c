/* perf_lbr.c - the "lbr" backend: Last Branch Record stacks sampled
 * through perf (PERF_SAMPLE_BRANCH_STACK on the cycles event),
 * docs/record.md.
 *
 * --lbr-filter maps onto branch_sample_type (btr_lbr_filter_parse), from
 * which the kernel programs MSR_LBR_SELECT (btr_lbr_select_from_branch_type
 * documents the value); every sample's stack becomes an LBR record.
 */
#include "perf_event.h"
#include "perf_ops.h"
#include "btr/error.h"
#include "internal.h"
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int btr_lbr_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	if (!opts || !BTR_OPTS_VALID(opts, BTR_CAPTURE_OPTS_V1) || !res)
		return -BTR_ERR_INVAL;
	struct btr_capture_probe pr;
	memset(&pr, 0, sizeof(pr));
	btr_probe_lbr(&pr);
	if (!pr.usable)
		return btr_perf_refuse("lbr", pr.reason);
	if (opts->n_ip_filters || opts->pt_config || opts->snapshot) {
		btr_err("lbr: --ip-filter, --pt-config and --snapshot do not apply to LBR sampling");
		return -BTR_ERR_INVAL;
	}
	struct btr_perf_capture *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -BTR_ERR_NOMEM;
	/* --user / --kernel add to the filter's privilege terms */
	char expr[512];
	snprintf(expr, sizeof(expr), "%s%s%s", opts->lbr_filter ? opts->lbr_filter : "",
		 opts->user ? ",user" : "", opts->kernel ? ",kernel" : "");
	uint64_t bst;
	int rc = btr_lbr_filter_parse(expr, &bst);
	uint32_t msr;
	if (rc == 0 && (rc = btr_lbr_select_from_branch_type(bst, &msr)) < 0)
		btr_err("lbr: the filter needs software filtering the LBR cannot do");
	if (rc == 0 && (rc = btr_lbr_attr(bst, opts->period, &pc->attr)) < 0)
		btr_err("lbr: the filter selects no privilege level");
	if (rc < 0) {
		free(pc);
		return rc;
	}
	btr_debug("lbr: branch_sample_type 0x%llx -> MSR_LBR_SELECT 0x%x", (unsigned long long)bst, msr);
	char path[4096];
	snprintf(path, sizeof(path), "%s/cpu/caps/branches",
		 opts->sysfs_root ? opts->sysfs_root : btr_perf_ops_get()->sysfs_root);
	FILE *f = fopen(path, "re");
	unsigned depth = 0;
	if (f) {
		if (fscanf(f, "%u", &depth) != 1)
			depth = 0;
		fclose(f);
	}
	pc->backend = "lbr";
	pc->lbr_depth = (uint16_t)depth;
	if ((bst & 3) == 1)
		pc->machine_flags |= BTR_MACHINE_USER_ONLY;
	else if ((bst & 3) == 2)
		pc->machine_flags |= BTR_MACHINE_KERNEL_ONLY;
	rc = btr_perf_capture_run(opts, pc, res);
	free(pc);
	return rc;
}
