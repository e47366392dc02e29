/* internal.h - helpers shared inside lib/, not part of the public API. */
#ifndef BTR_INTERNAL_H
#define BTR_INTERNAL_H

#include "btr/error.h"

#if defined(__GNUC__)
#define BTR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define btr_likely(x) __builtin_expect(!!(x), 1)
#define btr_unlikely(x) __builtin_expect(!!(x), 0)
#else
#define BTR_PRINTF(a, b)
#define btr_likely(x) (x)
#define btr_unlikely(x) (x)
#endif

void btr__log(enum btr_log_level level, const char *fmt, ...) BTR_PRINTF(2, 3);
#define btr_err(...) btr__log(BTR_LOG_ERROR, __VA_ARGS__)
#define btr_warn(...) btr__log(BTR_LOG_WARN, __VA_ARGS__)
#define btr_info(...) btr__log(BTR_LOG_INFO, __VA_ARGS__)
#define btr_debug(...) btr__log(BTR_LOG_DEBUG, __VA_ARGS__)

#define BTR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct btr_trace_writer;
/* lib/capture/capture.c: a recorder's write to its output @output failed
 * with @rc: logs one error line naming the output, the cause and, when
 * complete chunks were written, the PATH.partial file that keeps them
 * (btr_trace_writer_abort_keep).  Frees @w.  Returns @rc. */
int btr_capture_output_failed(struct btr_trace_writer *w, const char *output, int rc);
struct btr_trace_writer_opts;
struct btr_capture_opts;
/* lib/capture/capture.c: the recorder's trace writer for @opts (output or
 * output_fd), logging one line naming the output if it cannot be made. */
int btr_capture_writer_new(const struct btr_capture_opts *opts, const struct btr_trace_writer_opts *wo,
			   struct btr_trace_writer **w);

#endif
