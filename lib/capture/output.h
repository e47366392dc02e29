/* output.h - a recorder's output (output.c), shared by the capture
 * backends of lib/capture/.  Not public. */
#ifndef BTR_CAPTURE_OUTPUT_H
#define BTR_CAPTURE_OUTPUT_H

#include "btr/capture.h"
#include "internal.h"

/* The fields every caller of a recorder passes (struct btr_capture_opts up
 * to @sysfs_root; later ones are read with BTR_OPTS_GET). */
#define BTR_CAPTURE_OPTS_V1 BTR_OFFSETOFEND(struct btr_capture_opts, sysfs_root)

struct btr_trace_writer;
struct btr_trace_writer_opts;
struct btr_capture_opts;

/* A recorder's write to its output @output failed with @rc: logs one
 * error line naming the output, the cause and, when complete chunks were
 * written, the PATH.partial file that keeps them
 * (btr_trace_writer_abort_keep).  Frees @w.  Returns @rc. */
int btr_capture_output_failed(struct btr_trace_writer *w, const char *output, int rc);
/* The recorder's trace writer for @opts (output or output_fd), logging one
 * line naming the output if it cannot be made. */
int btr_capture_writer_new(const struct btr_capture_opts *opts, const struct btr_trace_writer_opts *wo,
			   struct btr_trace_writer **w);

/* execvp's lookup of @name in $PATH (default /usr/local/bin:/usr/bin:/bin):
 * the first regular executable file, written to @buf.  Returns 0 or
 * -BTR_ERR_NOENT (lib/capture/qemu_select.c). */
int btr__find_in_path(const char *name, char *buf, size_t size);

/* The first of the @n paths @rels ("/file" beside the running program,
 * "/../lib/btr/file" where `make install` puts it) that exists with
 * access @mode, relative to the running program's directory, written to
 * @buf: the one lookup of btr's agents and the QEMU it installs
 * (lib/capture/output.c).  Returns 0 or -BTR_ERR_NOENT. */
int btr__find_beside_exe(const char *const *rels, size_t n, int mode, char *buf, size_t size);

/* btr's cache directory (BTR_QEMU_CACHE, else $XDG_CACHE_HOME/btr, else
 * $HOME/.cache/btr; scripts/build-qemu.sh's builds, --system's kernel
 * symbols), written to @buf; not created.  Returns 0 or -1 (none set, or
 * too long) (lib/capture/qemu_select.c). */
int btr__cache_dir(char *buf, size_t size);

#endif
