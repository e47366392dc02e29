/* capture.c - the table of capture backends and the "-b auto" choice. */
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/trace.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* A backend whose record function does not exist yet refuses to record,
 * so that "auto" never picks it. */
static int record_unsupported(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	(void)opts;
	(void)res;
	return -BTR_ERR_UNSUPPORTED;
}

static const struct btr_capture_backend backends[] = {
	{ "pt", "Intel Processor Trace (perf intel_pt PMU)", btr_probe_pt, btr_pt_record },
	{ "bts", "Branch Trace Store (perf intel_bts PMU)", btr_probe_bts, btr_bts_record },
	{ "lbr", "Last Branch Records sampled through perf", btr_probe_lbr, btr_lbr_record },
	{ "qemu", "QEMU TCG plugin emitting Intel PT (software)", btr_probe_qemu, btr_qemu_record },
	{ "step", "trap-flag stepping with ptrace", btr_probe_step, btr_step_record },
};

void btr_capture_probe_backend(const struct btr_capture_backend *b, struct btr_capture_probe *out)
{
	memset(out, 0, sizeof(*out));
	b->probe(out);
	/* "usable" promises that `btr record -b NAME` works: a backend whose
	 * mechanism works here but which btr cannot record with yet is not. */
	if (out->usable && b->record == record_unsupported) {
		size_t n = strlen(out->reason);
		snprintf(out->reason + n, sizeof(out->reason) - n, ", but btr has no %s recorder yet", b->name);
		out->usable = false;
	}
}

size_t btr_capture_count(void)
{
	return BTR_ARRAY_SIZE(backends);
}

const struct btr_capture_backend *btr_capture_get(size_t i)
{
	return i < BTR_ARRAY_SIZE(backends) ? &backends[i] : NULL;
}

const struct btr_capture_backend *btr_capture_find(const char *name)
{
	for (size_t i = 0; name && i < BTR_ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i].name, name))
			return &backends[i];
	return NULL;
}

int btr_capture_auto(const struct btr_capture_backend **out, char *why, size_t why_size)
{
	struct btr_capture_probe pr;
	char hw[900] = "";
	size_t hn = 0;

	for (size_t i = 0; i < 3; i++) {   /* pt, bts, lbr in order of preference */
		backends[i].probe(&pr);
		if (pr.usable && backends[i].record != record_unsupported) {
			*out = &backends[i];
			snprintf(why, why_size, "%s: %s", backends[i].name, pr.reason);
			return 0;
		}
		/* every hardware backend's reason: the user sees why each one
		 * was passed over */
		int k = snprintf(hw + hn, sizeof(hw) - hn, "%s%s: %s", hn ? "; " : "", backends[i].name, pr.reason);
		if (k > 0 && (size_t)k < sizeof(hw) - hn)
			hn += (size_t)k;
	}
	btr_probe_qemu(&pr);
	if (!pr.usable) {
		snprintf(why, why_size, "no backend usable (%s; qemu: %s)", hw, pr.reason);
		return -BTR_ERR_NODEV;
	}
	*out = btr_capture_find("qemu");
	snprintf(why, why_size, "qemu, no hardware tracing (%s)", hw);
	return 0;
}
