/* btr/error.h - error codes and the logging hook shared by every module.
 *
 * Every btr function that can fail returns a negative enum btr_error value
 * (for example -BTR_ERR_IO).  Zero or a positive count means success.
 * The library never prints: diagnostics go through the log callback.
 */
#ifndef BTR_ERROR_H
#define BTR_ERROR_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#ifdef __cplusplus
extern "C" {
#endif

enum btr_error {
	BTR_OK = 0,
	BTR_ERR_INTERNAL,      /* a bug in btr */
	BTR_ERR_INVAL,         /* an argument is out of range or NULL */
	BTR_ERR_NOMEM,         /* allocation failed */
	BTR_ERR_IO,            /* read/write failed (errno converted) */
	BTR_ERR_NOENT,         /* no such file or directory (ENOENT, ENOTDIR) */
	BTR_ERR_PERM,          /* permission denied */
	BTR_ERR_EOS,           /* end of stream: no more data (not a failure) */
	BTR_ERR_AGAIN,         /* need more input: feed the next buffer */
	BTR_ERR_BAD_MAGIC,     /* container: not a btr file */
	BTR_ERR_BAD_VERSION,   /* container: unsupported format version */
	BTR_ERR_CHECKSUM,      /* container: chunk checksum mismatch */
	BTR_ERR_TRUNCATED,     /* input ends inside a record or packet */
	BTR_ERR_BAD_RECORD,    /* container or perf.data: malformed record */
	BTR_ERR_COMPRESS,      /* (de)compression failed */
	BTR_ERR_BAD_ELF,       /* not a valid ELF file */
	BTR_ERR_NO_DEBUGINFO,  /* no DWARF line information */
	BTR_ERR_NOT_FOUND,     /* lookup found nothing (symbol, line, module) */
	BTR_ERR_BAD_PACKET,    /* PT: undecodable packet byte */
	BTR_ERR_NOSYNC,        /* PT: no PSB found / decoder not synchronized */
	BTR_ERR_NOMAP,         /* no code image for an address */
	BTR_ERR_BAD_INSN,      /* instruction could not be decoded */
	BTR_ERR_BAD_CONTEXT,   /* trace contradicts the code (e.g. TNT at a non-branch) */
	BTR_ERR_OVERFLOW,      /* hardware buffer overflow, data lost */
	BTR_ERR_BAD_FILTER,    /* unparsable filter expression */
	BTR_ERR_BAD_FORMAT,    /* input file format not recognized (perf.data etc) */
	BTR_ERR_UNSUPPORTED,   /* feature not supported by this input/build */
	BTR_ERR_NODEV,         /* capture backend not available on this machine */
	BTR_ERR_CHILD,         /* traced program could not be started */
	BTR_ERR_INTERRUPTED,   /* stopped by a signal (e.g. SIGINT) */
	BTR_ERR_ISDIR,         /* a directory was given where a file is needed */
	BTR_ERR_LIMIT,         /* a configured limit was reached (--max-processes) */
	BTR_ERR_NOSPACE,       /* no space left on the device (ENOSPC, EDQUOT) */
	BTR_ERR_FBIG,          /* a file reached the file size limit (EFBIG: `ulimit -f`) */
	BTR_ERR_DATA_LOST,     /* the trace was read to its end but data was lost (a damaged
				* chunk, a recorder's loss record): what was delivered is
				* right but incomplete; btr_stream_losses() says what */
	BTR_ERR__COUNT
};

/* Returns a static, human-readable description of @err (positive or
 * negative).  Never returns NULL; any other int (INT_MIN, INT_MAX, ...)
 * gives "unknown error". */
const char *btr_errstr(int err);

/* Converts a positive errno value to a negative enum btr_error. */
int btr_err_from_errno(int errnum);

enum btr_log_level {
	BTR_LOG_ERROR = 0,
	BTR_LOG_WARN,
	BTR_LOG_INFO,
	BTR_LOG_DEBUG,
};

/* Log callback: @msg is a complete line without trailing newline, valid
 * only during the call. */
typedef void (*btr_log_fn)(void *ctx, enum btr_log_level level, const char *msg);

/* Installs the process-wide log callback (NULL disables logging, the
 * default) and the most verbose level that is passed to it. */
void btr_log_set(btr_log_fn fn, void *ctx, enum btr_log_level max_level);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
