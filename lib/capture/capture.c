/* capture.c - the table of capture backends and the "-b auto" choice. */
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/trace.h"
#include "internal.h"

#include <limits.h>
#include <sys/resource.h>

#include <stdio.h>
#include <string.h>

int btr_capture_output_failed(struct btr_trace_writer *w, const char *output, int rc)
{
	char kept[PATH_MAX];
	if (btr_trace_writer_error(w) < 0)
		rc = btr_trace_writer_error(w);
	if (btr_trace_writer_abort_keep(w, kept, sizeof(kept)))
		btr_err("%s: cannot write: %s; what was recorded up to then is kept in %s", output, btr_errstr(rc),
			kept);
	else
		btr_err("%s: cannot write: %s", output, btr_errstr(rc));
	return rc;
}

int btr_capture_writer_new(const struct btr_capture_opts *opts, const struct btr_trace_writer_opts *wo,
			   struct btr_trace_writer **w)
{
	/* Under a file size limit (`ulimit -f`) the trace stops growing at
	 * the limit, and what is kept (OUTPUT.partial) is its complete
	 * chunks: chunks of a sixteenth of the limit keep most of it, where
	 * 1 MiB chunks would keep nothing below 1 MiB. */
	struct btr_trace_writer_opts o = *wo;
	struct rlimit fl;
	size_t chunk = o.chunk_size ? o.chunk_size : BTR_TRACE_CHUNK_DEFAULT;
	if (getrlimit(RLIMIT_FSIZE, &fl) == 0 && fl.rlim_cur != RLIM_INFINITY && fl.rlim_cur / 16 < chunk)
		o.chunk_size = fl.rlim_cur / 16 > BTR_TRACE_CHUNK_MIN ? (size_t)(fl.rlim_cur / 16) : BTR_TRACE_CHUNK_MIN;
	int rc = opts->output_fd > 0 ? btr_trace_writer_new_fd(opts->output_fd, opts->output, &o, w)
				     : btr_trace_writer_new(opts->output, &o, w);
	if (rc < 0)
		btr_err("%s: cannot %s: %s", opts->output,
			rc == -BTR_ERR_NOSPACE || rc == -BTR_ERR_IO ? "write" : "create", btr_errstr(rc));
	return rc;
}

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
