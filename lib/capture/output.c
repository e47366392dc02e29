/* output.c - a recorder's output: the trace writer every capture backend
 * writes through, and the one error line when writing fails.  Below every
 * backend (perf_event.c, qemu.c, step.c); calls none of them. */
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/trace.h"
#include "internal.h"
#include "output.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

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
	int fd = BTR_OPTS_GET(opts, output_fd, 0);
	int rc = fd > 0 ? btr_trace_writer_new_fd(fd, opts->output, &o, w) : btr_trace_writer_new(opts->output, &o, w);
	if (rc < 0)
		btr_err("%s: cannot %s: %s", opts->output,
			rc == -BTR_ERR_NOSPACE || rc == -BTR_ERR_IO ? "write" : "create", btr_errstr(rc));
	return rc;
}

int btr__find_beside_exe(const char *const *rels, size_t n, int mode, char *buf, size_t size)
{
	char exe[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (k <= 0)
		return -BTR_ERR_NOENT;
	exe[k] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -BTR_ERR_NOENT;
	*slash = 0;
	for (size_t i = 0; i < n; i++)
		if ((size_t)snprintf(buf, size, "%s%s", exe, rels[i]) < size && access(buf, mode) == 0)
			return 0;
	return -BTR_ERR_NOENT;
}
