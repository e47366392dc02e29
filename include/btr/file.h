/* btr/file.h - the one way btr creates its output files and opens the
 * files that data names (docs/reliability.md, "Threat model").
 *
 * Output: btr_outfile_open creates a file for writing beside the file to
 * produce (O_TMPFILE where the file system has it, else a random name from
 * mkostemp, O_EXCL: never a name someone else can plant), and
 * btr_outfile_commit puts it into place with rename(2), which never follows
 * a link at the destination.  A symlink the user named is followed by the
 * kernel (open(2) without O_NOFOLLOW, so fs.protected_symlinks applies),
 * never by hand.
 *
 * Input: btr_file_open_named opens a path that a trace, an ELF file or its
 * DWARF names (module files, debug files, source files, jitdumps, perf
 * maps): O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC, fstat before any read,
 * regular files only, a size limit, and optionally an owner rule.
 */
#ifndef BTR_FILE_H
#define BTR_FILE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The size of the path buffers below: Linux's PATH_MAX, spelled out so that
 * the layout does not depend on the feature macros of the includer (strict
 * -std=c99 has no PATH_MAX; lib/file.c checks that the two agree). */
#define BTR_PATH_MAX 4096

/* A file being written: caller-owned, filled by btr_outfile_open. */
struct btr_outfile {
	int fd;                 /* open for writing (O_WRONLY), close-on-exec */
	int anon;               /* 1: an O_TMPFILE (no name until committed) */
	int placeholder;        /* 1: btr_outfile_open created an empty file at
				 * @path (the target of a dangling symlink the
				 * user named); removed again on discard */
	char path[BTR_PATH_MAX];    /* where commit puts the file: the name given,
				 * or the file a symlink given leads to */
	char tmp[BTR_PATH_MAX];     /* the temporary name ("" for an O_TMPFILE) */
};

/* Modes and flags of btr_outfile_open. */
#define BTR_OUTFILE_PRIVATE 0600   /* traces, ground-truth logs (as perf does) */
#define BTR_OUTFILE_NAMED   1u     /* a visible temporary name (PATH.tmp.XXXXXX,
				    * O_EXCL) even where O_TMPFILE works: for a
				    * file whose cut copy must survive a crash */

/* Creates a temporary file in the directory of @path, to become @path on
 * btr_outfile_commit.  @path may name a new file, an existing regular
 * file (replaced: a file of ours keeps its mode), or a symlink (followed
 * by the kernel; a dangling one creates its target, as open(2) would,
 * subject to fs.protected_symlinks).  @mode: the new file's permissions
 * (BTR_OUTFILE_PRIVATE, or 0666 for "what the umask allows"); @flags:
 * 0 or BTR_OUTFILE_NAMED.
 * Returns 0 or -BTR_ERR_INVAL, -BTR_ERR_ISDIR, -BTR_ERR_UNSUPPORTED (not a
 * regular file: a device or FIFO is the caller's to write through),
 * -BTR_ERR_PERM, -BTR_ERR_NOENT, -BTR_ERR_NOSPACE, -BTR_ERR_IO. */
int btr_outfile_open(struct btr_outfile *of, const char *path, mode_t mode, unsigned flags);

/* Closes the file (after fsync unless @no_sync) and renames it to @dest
 * (NULL: of->path).  On failure the temporary file is removed.  Returns 0
 * or a negative error. */
int btr_outfile_commit(struct btr_outfile *of, const char *dest, int no_sync);

/* Closes and removes the temporary file (and a placeholder). */
void btr_outfile_discard(struct btr_outfile *of);

/* Creates or truncates @path itself for appending by several writers (a
 * ground-truth log): the user named it, so a symlink is followed by the
 * kernel; O_NONBLOCK, so a FIFO cannot block; a regular file only.  A new
 * file gets @mode; an existing file of another user is refused
 * (-BTR_ERR_PERM: someone may have planted it to read what is written).
 * Returns a descriptor or a negative error. */
int btr_outfile_open_inplace(const char *path, mode_t mode);

/* Flags of btr_file_open_named. */
#define BTR_NAMED_NOFOLLOW  1u   /* refuse a symlink as the last component */
#define BTR_NAMED_OWNER     2u   /* the file must belong to @uid */
#define BTR_NAMED_READER    4u   /* the file must be readable by @uid too:
				  * world-readable along its whole path, or
				  * owned by @uid (with its directories) */
#define BTR_NAMED_QUIET     8u   /* no warning when refused */

/* Opens @path, a name that data (a trace, an ELF file, DWARF) gave, for
 * reading: never blocks (FIFOs), never opens devices or directories,
 * refuses files over @max_size bytes (0: no limit), and with the flags
 * above symlinks and files of other users.  A refusal (not a missing file)
 * is logged once per path as a warning naming the file and the reason.
 * Returns a descriptor (blocking mode restored) or -BTR_ERR_NOENT,
 * -BTR_ERR_PERM (refused by the rules), -BTR_ERR_UNSUPPORTED (not a
 * regular file), -BTR_ERR_FBIG (over @max_size), -BTR_ERR_IO. */
int btr_file_open_named(const char *path, uint64_t max_size, unsigned flags, uid_t uid);

/* Opens source file @path, named by a trace's DWARF, for reading: if
 * @rule, only when user @owner (the trace file's owner) could read it too
 * (BTR_NAMED_READER) or it lies under one of @roots (the directories the
 * reader named: --source-root); without @rule any regular file.  Always
 * non-blocking, regular files of at most 64 MiB.  @flags: BTR_NAMED_QUIET
 * or 0.  Returns a descriptor or an error of btr_file_open_named. */
int btr_file_open_source(const char *path, int rule, uid_t owner, const char *const *roots, unsigned flags);

/* Whether @path lies under one of the directories of @roots (a
 * NULL-terminated list; NULL: none).  Both are resolved by realpath(3). */
int btr_file_under_roots(const char *path, const char *const *roots);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif
