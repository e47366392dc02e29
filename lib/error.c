/* error.c - error strings and the log hook. */
#include "btr/error.h"
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

static const char *const errstr[BTR_ERR__COUNT] = {
	[BTR_OK] = "success",
	[BTR_ERR_INTERNAL] = "internal error",
	[BTR_ERR_INVAL] = "invalid argument",
	[BTR_ERR_NOMEM] = "out of memory",
	[BTR_ERR_IO] = "input/output error",
	[BTR_ERR_NOENT] = "no such file or directory",
	[BTR_ERR_PERM] = "permission denied",
	[BTR_ERR_EOS] = "end of stream",
	[BTR_ERR_AGAIN] = "more input needed",
	[BTR_ERR_BAD_MAGIC] = "not a btr trace (bad magic)",
	[BTR_ERR_BAD_VERSION] = "unsupported trace format version",
	[BTR_ERR_CHECKSUM] = "checksum mismatch",
	[BTR_ERR_TRUNCATED] = "truncated input",
	[BTR_ERR_BAD_RECORD] = "malformed record",
	[BTR_ERR_COMPRESS] = "compression error",
	[BTR_ERR_BAD_ELF] = "invalid ELF file",
	[BTR_ERR_NO_DEBUGINFO] = "no debug information",
	[BTR_ERR_NOT_FOUND] = "not found",
	[BTR_ERR_BAD_PACKET] = "bad PT packet",
	[BTR_ERR_NOSYNC] = "not synchronized to the PT stream",
	[BTR_ERR_NOMAP] = "no code image at address",
	[BTR_ERR_BAD_INSN] = "undecodable instruction",
	[BTR_ERR_BAD_CONTEXT] = "trace does not match the code",
	[BTR_ERR_OVERFLOW] = "trace buffer overflow",
	[BTR_ERR_BAD_FILTER] = "bad filter expression",
	[BTR_ERR_BAD_FORMAT] = "unrecognized file format",
	[BTR_ERR_UNSUPPORTED] = "not supported",
	[BTR_ERR_NODEV] = "tracing backend not available",
	[BTR_ERR_CHILD] = "cannot start traced program",
	[BTR_ERR_INTERRUPTED] = "interrupted",
	[BTR_ERR_ISDIR] = "is a directory",
	[BTR_ERR_LIMIT] = "limit reached",
	[BTR_ERR_NOSPACE] = "no space left on device",
	[BTR_ERR_FBIG] = "file size limit exceeded (ulimit -f)",
	[BTR_ERR_DATA_LOST] = "trace data was lost",
};

const char *btr_errstr(int err)
{
	/* the magnitude as unsigned: -INT_MIN is not an int */
	unsigned code = err < 0 ? 0u - (unsigned)err : (unsigned)err;

	if (code >= BTR_ERR__COUNT || !errstr[code])
		return "unknown error";
	return errstr[code];
}

int btr_err_from_errno(int e)
{
	switch (e) {
	case 0: return BTR_OK;
	case ENOENT: case ENOTDIR: return -BTR_ERR_NOENT;
	case EACCES: case EPERM: case EROFS: return -BTR_ERR_PERM;
	case ENOMEM: return -BTR_ERR_NOMEM;
	case EINVAL: return -BTR_ERR_INVAL;
	case EINTR: return -BTR_ERR_INTERRUPTED;
	case EISDIR: return -BTR_ERR_ISDIR;
	case ENOSPC: case EDQUOT: return -BTR_ERR_NOSPACE;
	case EFBIG: return -BTR_ERR_FBIG;
	case ENODEV: case EOPNOTSUPP: case ENOSYS: return -BTR_ERR_NODEV;
	default: return -BTR_ERR_IO;
	}
}

static btr_log_fn log_fn;
static void *log_ctx;
static enum btr_log_level log_max = BTR_LOG_WARN;

void btr_log_set(btr_log_fn fn, void *ctx, enum btr_log_level max_level)
{
	log_fn = fn;
	log_ctx = ctx;
	log_max = max_level;
}

/* The calling thread's messages go to @divert_fn instead (a decoder thread
 * of a parallel stream run: lib/stream/stream_par.c). */
static _Thread_local btr_log_fn divert_fn;
static _Thread_local void *divert_ctx;

void btr__log_divert(btr_log_fn fn, void *ctx)
{
	divert_fn = fn;
	divert_ctx = ctx;
}

void btr__log(enum btr_log_level level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!log_fn || level > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (divert_fn)
		divert_fn(divert_ctx, level, buf);
	else
		log_fn(log_ctx, level, buf);
}
