/* btr/trace.h - the .btr trace container (specified in docs/format.md).
 *
 * A .btr file is a header followed by chunks; each chunk carries one or
 * more typed little-endian records and a checksum, optionally compressed
 * with zstd.  The writer and reader stream in constant memory.
 */
#ifndef BTR_TRACE_H
#define BTR_TRACE_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"

#ifdef __cplusplus
extern "C" {
#endif

enum btr_rec_type {
	BTR_REC_MACHINE = 1,       /* struct btr_rec_machine */
	BTR_REC_MODULE_LOAD = 2,   /* struct btr_rec_module */
	BTR_REC_MODULE_UNLOAD = 3, /* struct btr_rec_module (path may be empty) */
	BTR_REC_THREAD_START = 4,  /* struct btr_rec_thread */
	BTR_REC_THREAD_EXIT = 5,   /* struct btr_rec_thread */
	BTR_REC_THREAD_NAME = 6,   /* struct btr_rec_thread (name set) */
	BTR_REC_PT = 7,            /* struct btr_rec_data: raw Intel PT bytes */
	BTR_REC_BTS = 8,           /* struct btr_rec_data: raw 24-byte BTS records */
	BTR_REC_LBR = 9,           /* struct btr_rec_lbr: one LBR stack snapshot */
	BTR_REC_BRANCHES = 10,     /* struct btr_rec_branches: decoded branches */
	BTR_REC_PROCESS_EXIT = 11, /* struct btr_rec_exit */
	BTR_REC_EXEC = 12,         /* struct btr_rec_module: new program image (path), drops old modules */
	BTR_REC_PROCESS = 13,      /* struct btr_rec_process: a process starts, execs, or runs on untraced */
	BTR_REC_BTS_INSNS = 14,    /* struct btr_rec_data: u32 instruction counts, one per BTS
				    * record of the same (tid, cpu) stream (format 1.2) */
	BTR_REC_SWITCH = 15,       /* struct btr_rec_switch: a thread starts / stops running on a CPU */
	BTR_REC_CODE = 16,         /* struct btr_rec_code: code bytes no file holds (format 1.5) */
	BTR_REC_SYMBOL = 17,       /* struct btr_rec_symbol: a function of generated code (format 1.5) */
	BTR_REC_IP_FILTER = 18,    /* struct btr_rec_module: one range of --ip-filter (format 1.6):
				    * file offsets [@pgoff, @pgoff + @size) of @path, or with
				    * @path "" addresses [@start, @start + @size) */
	BTR_REC_WINDOW = 19,       /* struct btr_rec_window: a snapshot window of a thread's PT begins (1.6) */
	BTR_REC__MAX
};

enum {
	BTR_MACHINE_PT_RETCOMP = 1u << 0,  /* PT return compression was enabled */
	BTR_MACHINE_PT_CYC = 1u << 1,
	BTR_MACHINE_PT_MTC = 1u << 2,
	BTR_MACHINE_PT_TSC = 1u << 3,
	BTR_MACHINE_USER_ONLY = 1u << 4,   /* only user-mode (CPL>0) code traced */
	BTR_MACHINE_KERNEL_ONLY = 1u << 5,
	BTR_MACHINE_IP_FILTER = 1u << 6,   /* only the flow inside IP filter ranges (--ip-filter):
					    * TIP.PGD/TIP.PGE at their edges, not gaps */
};

/* Machine and capture description; normally the first record. */
struct btr_rec_machine {
	char backend[16];       /* "qemu", "pt", "bts", "lbr", "step", "perf" */
	char cpu_vendor[16];    /* "GenuineIntel" ... */
	uint16_t cpu_family, cpu_model, cpu_stepping;
	uint16_t lbr_depth;     /* LBR: stack depth */
	uint32_t flags;         /* BTR_MACHINE_* */
	uint8_t mtc_freq;       /* PT: IA32_RTIT_CTL.MTCFreq */
	uint8_t cyc_thresh;     /* PT */
	uint8_t addr_filter_cfg;/* PT: number of address-filter ranges below */
	uint8_t reserved;
	uint32_t nom_freq;      /* PT: nominal frequency ratio (CPUID 0x16 / MSR) */
	uint32_t cpuid15_eax, cpuid15_ebx; /* TSC/core crystal clock ratio */
	uint64_t tsc_hz;        /* TSC frequency, 0 if unknown */
	uint64_t addr_filter[4][2]; /* PT IP filter ranges [start, end] */
	uint64_t start_time_ns; /* wall clock at record start (CLOCK_REALTIME) */
};

/* A mapping of an executable file (or an anonymous code region). */
struct btr_rec_module {
	uint32_t pid;
	uint32_t prot;          /* PROT_* bits */
	uint64_t start;         /* first address */
	uint64_t size;          /* length in bytes */
	uint64_t pgoff;         /* file offset of @start */
	uint64_t tsc;           /* when it happened, 0 if unknown */
	uint8_t build_id[20];
	uint8_t build_id_len;   /* 0: none */
	const char *path;       /* NUL-terminated; reader: owned by the reader */
};

/* How a thread ended (THREAD_EXIT, format 1.4; 0 in older files). */
enum btr_thread_end {
	BTR_THREAD_END_UNKNOWN = 0, /* not said (a writer before 1.4, or not known) */
	BTR_THREAD_END_EXITED = 1,  /* it (or its process) exited with @exit_code */
	BTR_THREAD_END_KILLED = 2,  /* signal @signo killed its process (0: the
				     * process exit record says which) */
	BTR_THREAD_END_RUNNING = 3, /* still running when the recording stopped
				     * (an attached process that was detached) */
};

struct btr_rec_thread {
	uint32_t pid, tid;
	uint32_t parent_tid;    /* THREAD_START: creator, 0 if unknown */
	int32_t exit_code;      /* THREAD_EXIT with @end EXITED */
	uint64_t tsc;
	const char *name;       /* THREAD_NAME; reader-owned; never NULL ("" if none) */
	uint32_t end;           /* THREAD_EXIT: enum btr_thread_end */
	int32_t signo;          /* THREAD_EXIT with @end KILLED */
};

/* Raw hardware/software trace bytes for one thread (or CPU).  Chunks of
 * the same (tid, cpu) stream are in order; @stream_offset is the offset of
 * the first byte within that stream, so gaps are detectable.
 *
 * BTR_REC_BTS_INSNS is a side stream of a BTS stream (same tid, cpu):
 * little-endian u32 values, the i-th (byte stream_offset 4*i) being the
 * number of instructions retired since the previous BTS record of the
 * stream, the branch itself included (for the first record: since the
 * thread started being traced).  Its records precede the BTS records they
 * describe.  Hardware BTS has none; software stepping (-b step) writes it. */
struct btr_rec_data {
	uint32_t tid;
	int32_t cpu;            /* -1 if per-thread */
	uint64_t stream_offset;
	uint64_t size;
	const uint8_t *data;    /* reader: owned by the reader */
};

struct btr_lbr_entry {
	uint64_t from, to;
	uint32_t flags;         /* BTR_BF_MISPRED, BTR_BF_PREDICTED, BTR_BF_TSX_ABORT, BTR_BF_CYCLES */
	uint32_t cycles;
};

/* One LBR snapshot, newest entry first (as perf reports them). */
struct btr_rec_lbr {
	uint32_t pid, tid;
	int32_t cpu;
	uint32_t count;
	uint64_t tsc;
	uint64_t ip;            /* sample IP */
	const struct btr_lbr_entry *entries; /* reader-owned */
};

struct btr_rec_branches {
	uint32_t tid;
	uint32_t count;
	const struct btr_branch *branches; /* reader-owned */
};

/* Process exit: normal exit (@signo 0, @code) or death by signal @signo
 * at instruction @ip (0 if unknown) with fault address @addr. */
struct btr_rec_exit {
	uint32_t pid, tid;
	int32_t code;
	int32_t signo;
	uint64_t ip;
	uint64_t addr;
	uint64_t tsc;
};

/* What a BTR_REC_PROCESS record says. */
enum btr_proc_event {
	BTR_PROC_START = 1,    /* a traced process begins: the recorded command
				* (@ppid 0 or the recorder's parent), a child of
				* fork/vfork/clone without CLONE_VM (@ppid its
				* parent; it starts with a copy of the parent's
				* module map), or a process attached to (-p) */
	BTR_PROC_EXEC = 2,     /* process @pid executed @path with @args; tracing
				* continues in the new program (its modules
				* follow as EXEC / MODULE_LOAD records) */
	BTR_PROC_UNTRACED = 3, /* from here process @pid runs untraced: @reason
				* (negative enum btr_error) and @detail say why
				* ("32-bit program", "set-uid program",
				* "--max-processes 1000 reached"); @path/@args
				* name what it ran if known */
	BTR_PROC_LOST = 4,     /* process @pid ran on but its trace misses data
				* from here to its end (or has none at all when
				* no START record comes before): @reason
				* (negative enum btr_error, e.g. -BTR_ERR_NOSPACE)
				* and @detail say why ("$TMPDIR full while
				* recording").  Since format 1.4 */
};

/* A process event.  Strings are reader-owned (never NULL, "" if none). */
struct btr_rec_process {
	uint32_t pid, ppid;
	uint32_t event;         /* enum btr_proc_event */
	int32_t reason;         /* UNTRACED: negative enum btr_error, else 0 */
	uint64_t tsc;           /* when, 0 if unknown */
	const char *path;       /* the program (START, EXEC, UNTRACED) */
	const char *args;       /* argv: @args_len bytes, each argument ends in
				 * a NUL (so "a\0b\0" is argv {a, b}) */
	uint32_t args_len;      /* <= BTR_TRACE_MAX_STRING */
	const char *detail;     /* human-readable detail (UNTRACED), or "" */
};

/* Flags of struct btr_rec_switch. */
enum {
	BTR_SWITCH_OUT = 1u << 0,     /* @tid stops running on @cpu (else: starts) */
	BTR_SWITCH_PREEMPT = 1u << 1, /* with OUT: it was preempted (still runnable) */
};

/* A context switch (perf's PERF_RECORD_SWITCH / SWITCH_CPU_WIDE): from
 * @tsc on, thread @tid of process @pid runs on @cpu (or, with
 * BTR_SWITCH_OUT, no longer does).  Per-CPU trace data (struct
 * btr_rec_data with cpu >= 0 and tid 0) belongs to whichever thread the
 * switches say runs on that CPU at the data's time. */
struct btr_rec_switch {
	uint32_t pid, tid;
	int32_t cpu;            /* -1 if unknown */
	uint32_t flags;         /* BTR_SWITCH_* */
	uint64_t tsc;           /* 0 if unknown */
};

/* Code that no file holds (JIT, generated or self-modifying code, memfd,
 * deleted files): from this record on, in the trace's order, process
 * @pid's memory at [@addr, @addr+@size) holds these bytes, until a later
 * CODE record over the same addresses (the code was rewritten), a module
 * mapped there, or the process execs.  Content-addressed: @hash is the
 * writer's key of the bytes; a record with @data NULL (no bytes in the
 * file) repeats the bytes of the latest earlier record with the same
 * @hash and @size, so each distinct version is stored once. */
struct btr_rec_code {
	uint32_t pid;
	uint32_t flags;         /* 0; reserved */
	uint64_t addr;
	uint64_t hash;
	uint32_t size;          /* bytes of code, <= BTR_TRACE_MAX_CODE */
	const uint8_t *data;    /* @size bytes, or NULL (a repeat); reader-owned */
};

/* Where a symbol of generated code came from. */
enum btr_sym_source {
	BTR_SYM_PERF_MAP = 1,   /* /tmp/perf-PID.map ("START SIZE name" lines) */
	BTR_SYM_JITDUMP = 2,    /* jit-PID.dump (JIT_CODE_LOAD / JIT_CODE_MOVE) */
};

/* A function of generated code in process @pid: [@addr, @addr+@size) is
 * @name (a later record over the same addresses replaces it). */
struct btr_rec_symbol {
	uint32_t pid;
	uint32_t source;        /* enum btr_sym_source */
	uint64_t addr, size;
	const char *name;       /* reader-owned, never NULL */
};

/* Why a snapshot window was written (struct btr_rec_window.reason). */
enum btr_window_reason {
	BTR_WINDOW_TRIGGER = 1,  /* the thread called the trigger function at @ip (--trigger) */
	BTR_WINDOW_REQUEST = 2,  /* a SIGUSR2 to the recorder asked for one */
	BTR_WINDOW_END = 3,      /* the thread ended (exit, exec, end of the recording) */
	BTR_WINDOW_KILLED = 4,   /* the thread's process was killed by a signal */
};

/* A snapshot window (flight recorder, `btr record -b qemu --snapshot`):
 * the PT records of thread @tid that follow, from stream offset
 * @stream_offset on (@size bytes in all), are a window of its flow that
 * starts with a PSB+ and does not continue what came before it: no gap,
 * no continuity (readers restart the thread's decoder there and say
 * BTR_SEV_DISCONTINUITY).  Since format 1.6. */
struct btr_rec_window {
	uint32_t pid, tid;
	uint32_t reason;        /* enum btr_window_reason */
	uint32_t index;         /* the thread's windows before this one */
	uint64_t stream_offset; /* where the window's data begins */
	uint64_t size;          /* bytes of PT in the window */
	uint64_t ip;            /* TRIGGER: the trigger's address, else 0 */
};

struct btr_record {
	enum btr_rec_type type;
	union {
		struct btr_rec_machine machine;
		struct btr_rec_module module;
		struct btr_rec_thread thread;
		struct btr_rec_data data;
		struct btr_rec_lbr lbr;
		struct btr_rec_branches branches;
		struct btr_rec_exit exit;
		struct btr_rec_process process;
		struct btr_rec_switch sw;
		struct btr_rec_code code;
		struct btr_rec_symbol sym;
		struct btr_rec_window win;
	} u;
};

struct btr_trace_writer;
struct btr_trace_reader;

/* Format constants (docs/format.md).  A reader accepts every file whose
 * major version equals BTR_TRACE_VERSION_MAJOR, whatever its minor. */
#define BTR_TRACE_VERSION_MAJOR 1
#define BTR_TRACE_VERSION_MINOR 6   /* 1: BTR_REC_PROCESS; 2: BTR_REC_BTS_INSNS; 3: BTR_REC_SWITCH;
                                     * 4: BTR_PROC_LOST, thread_exit end + signo;
                                     * 5: BTR_REC_CODE, BTR_REC_SYMBOL; 6: BTR_REC_IP_FILTER, BTR_REC_WINDOW */
#define BTR_TRACE_CHUNK_DEFAULT (1u << 20) /* writer: default chunk_size */
#define BTR_TRACE_CHUNK_MIN 512u           /* writer: smaller chunk_size is raised to this */
#define BTR_TRACE_CHUNK_MAX (64u << 20)    /* largest chunk payload either side accepts */
#define BTR_TRACE_MAX_STRING 65535u        /* longest string field (module path, name) */
#define BTR_TRACE_MAX_LBR 65535u           /* most entries in one LBR record */
#define BTR_TRACE_MAX_CODE (1u << 20)      /* most bytes in one CODE record */

struct btr_trace_writer_opts {
	size_t sz;               /* sizeof(struct btr_trace_writer_opts) */
	int compress;            /* 0: none, 1..19: zstd level */
	size_t chunk_size;       /* target uncompressed chunk size, 0: default (1 MiB) */
	int no_sync;             /* 1: skip the fsync before the final rename (tests,
				  * scratch files); 0: the file is durable once
				  * btr_trace_writer_close returns */
	/* appended: > 0: the file's descriptor is moved to the lowest free
	 * number >= min_fd (F_DUPFD), for a writer inside another program's
	 * process (btr's QEMU plugin), which may dup2() over small numbers
	 * of its own choosing (a shell's `exec 4>file`).  Not for
	 * btr_trace_writer_new_fd (the caller's descriptor). */
	int min_fd;
};

/* Creates @path for writing, through a temporary name beside it that is
 * renamed on btr_trace_writer_close, so a failed recording leaves @path
 * as it was.  A symlink is followed (its target is replaced, the link
 * kept; a dangling one gives -BTR_ERR_NOENT).  A device, FIFO or socket is
 * written through instead (opened O_WRONLY; never created, truncated,
 * unlinked or renamed over).  @opts may be NULL.  Returns 0 or
 * -BTR_ERR_PERM, -BTR_ERR_NOENT, -BTR_ERR_ISDIR, -BTR_ERR_IO,
 * -BTR_ERR_NOMEM, -BTR_ERR_UNSUPPORTED (zstd not built in). */
int btr_trace_writer_new(const char *path, const struct btr_trace_writer_opts *opts,
			 struct btr_trace_writer **out);

/* Like btr_trace_writer_new, but writes through the open descriptor @fd
 * (the caller's: never closed by the writer) as it goes: stdout, a pipe.
 * The writer only appends (it never seeks), so any descriptor open for
 * writing works.  @name names the output in log lines.  Nothing can be
 * taken back: a failed recording leaves what was written. */
int btr_trace_writer_new_fd(int fd, const char *name, const struct btr_trace_writer_opts *opts,
			    struct btr_trace_writer **out);

/* 1 if @w writes through (btr_trace_writer_new_fd, or a device/FIFO path):
 * there is no temporary file to keep or retarget. */
int btr_trace_writer_streaming(const struct btr_trace_writer *w);

/* For a writer inside another program's process (btr's QEMU plugin), whose
 * dup2() onto a number the writer holds would take its file: if @w owns
 * descriptor @fd (btr_trace_writer_new, not _new_fd), moves it to the lowest
 * free number >= @min_fd (close-on-exec) and closes @fd.  Returns the new
 * number, 0 if @fd is not @w's, or a negative btr_error (-BTR_ERR_IO: no free
 * number; the writer keeps @fd). */
int btr_trace_writer_move_fd(struct btr_trace_writer *w, int fd, int min_fd);

/* Appends @rec (copied; the caller keeps ownership).  Returns 0 or a
 * negative error (the writer is then unusable), except -BTR_ERR_INVAL for
 * an invalid record (unknown type, NULL data/entries with a non-zero
 * size/count, string longer than BTR_TRACE_MAX_STRING, more than
 * BTR_TRACE_MAX_LBR entries, build_id_len > 20): nothing is written and
 * the writer stays usable.  PT/BTS data and branch arrays larger than a
 * chunk are split into several records (consecutive stream_offset /
 * consecutive branches), so a reader may see one write as several
 * records.  Strings longer than the fixed fields of the machine record
 * are cut to 15 bytes. */
int btr_trace_write(struct btr_trace_writer *w, const struct btr_record *rec);

/* Flushes the current chunk so that everything written so far is
 * readable even if the process dies afterwards (the temporary file then
 * reads up to here, followed by -BTR_ERR_TRUNCATED).  No fsync.  Returns
 * 0 or the writer's error. */
int btr_trace_flush(struct btr_trace_writer *w);

/* Flushes, writes the end marker, renames into place and frees @w.
 * Returns 0 or a negative error (the file is then removed). */
int btr_trace_writer_close(struct btr_trace_writer *w);

/* Frees @w without finishing the file; removes the temporary file. */
void btr_trace_writer_abort(struct btr_trace_writer *w);

/* Makes btr_trace_writer_close put the trace under @path instead of the
 * path given to btr_trace_writer_new (for example PATH.partial when the
 * recording turned out incomplete).  Returns 0, -BTR_ERR_INVAL,
 * -BTR_ERR_NOMEM or -BTR_ERR_UNSUPPORTED (a streaming writer). */
int btr_trace_writer_retarget(struct btr_trace_writer *w, const char *path);

/* The writer's sticky error: 0, or the negative btr_error with which a
 * write or flush failed (every later call returns it too). */
int btr_trace_writer_error(const struct btr_trace_writer *w);

/* The name of the temporary file @w writes until it is closed (PATH.tmp.
 * and a random suffix, beside PATH), owned by @w; NULL for a streaming
 * writer or one whose file has no name (O_TMPFILE).  For whoever must
 * remove it if the writing process dies (`btr record`'s watchdog). */
const char *btr_trace_writer_tmp_name(const struct btr_trace_writer *w);

/* Ends a recording whose writing failed (a full disk) like
 * btr_trace_writer_abort, but keeps what was written if it holds at least
 * one complete chunk: the temporary file becomes PATH.partial (replacing
 * one there), never PATH, and its name is copied into @kept (@kept_size
 * bytes).  Readers take such a file up to its last complete chunk and
 * report it cut.  Frees @w.  Returns 1 if kept, 0 if nothing was. */
int btr_trace_writer_abort_keep(struct btr_trace_writer *w, char *kept, size_t kept_size);

/* What a file is, by its first bytes: the one place that knows the magics
 * (the trace reader, btr pt dump and btr pt decode ask here). */
enum btr_file_kind {
	BTR_FILE_OTHER = 0,   /* neither: raw PT bytes, or any other file */
	BTR_FILE_BTR,         /* a .btr trace ("BTRTRACE") */
	BTR_FILE_PERF,        /* a perf.data file ("PERFILE2", either byte order) */
};
/* The kind of the file that starts with @buf (@size bytes; 8 decide;
 * fewer: BTR_FILE_OTHER).  Never fails. */
enum btr_file_kind btr_file_kind(const void *buf, size_t size);

/* Opens @path.  Returns 0, -BTR_ERR_NOENT, -BTR_ERR_PERM, -BTR_ERR_ISDIR, -BTR_ERR_IO,
 * -BTR_ERR_BAD_MAGIC, -BTR_ERR_BAD_VERSION, -BTR_ERR_TRUNCATED (the file
 * is empty or ends inside the file header), -BTR_ERR_CHECKSUM (file header
 * corrupted), -BTR_ERR_NOMEM.  Only the header is read here; the reader
 * then streams chunk by chunk with pread (constant memory: one chunk,
 * at most BTR_TRACE_CHUNK_MAX), so @path must be seekable.  A perf.data
 * file ("PERFILE2") is read through the perf.data reader when it is built
 * in (see btr_trace_reader_info().format). */
int btr_trace_reader_new(const char *path, struct btr_trace_reader **out);

/* Opens a trace held in memory (@buf stays owned by the caller and must
 * outlive the reader). */
int btr_trace_reader_new_mem(const void *buf, size_t size, struct btr_trace_reader **out);

/* Reads the next record into @rec.  Pointers inside @rec are owned by the
 * reader and valid until the next call.  Returns 0, -BTR_ERR_EOS at the
 * clean end, -BTR_ERR_TRUNCATED if the file stops inside a chunk (every
 * complete chunk before the cut has been returned), -BTR_ERR_CHECKSUM,
 * -BTR_ERR_BAD_RECORD, -BTR_ERR_COMPRESS.  After an error other than
 * CHECKSUM the reader stays at the error.  After -BTR_ERR_CHECKSUM the
 * damaged chunk has been skipped (its records are lost) and the next call
 * continues with the following chunk (found by scanning for a valid chunk
 * header if the damaged one's sizes cannot be trusted); a caller that
 * prefers to stop simply stops.  Records of unknown type (newer minor
 * version) are skipped silently; -BTR_ERR_INVAL for NULL arguments. */
int btr_trace_read(struct btr_trace_reader *r, struct btr_record *rec);

/* Byte offset in the file of the chunk currently being read (for error
 * messages and progress: it grows as the input is read, up to
 * btr_trace_info.size). */
uint64_t btr_trace_reader_offset(const struct btr_trace_reader *r);

enum btr_trace_format {
	BTR_TRACE_FMT_BTR = 1,  /* a .btr container */
	BTR_TRACE_FMT_PERF = 2, /* a perf.data file read through lib/perf/perfdata.c */
};

/* What a reader knows about its input: the file header (fixed after
 * btr_trace_reader_new) and running counts (updated by btr_trace_read). */
struct btr_trace_info {
	enum btr_trace_format format;
	uint16_t major, minor;      /* format version of the file */
	uint32_t flags;             /* file header flags (BTR_TRACE_F_*) */
	uint64_t created_ns;        /* CLOCK_REALTIME when the writer started */
	uint32_t writer_pid;
	char creator[64];           /* e.g. "btr 0.1.0", NUL-terminated */
	uint64_t chunks;            /* data chunks read so far (end chunk excluded) */
	uint64_t compressed_chunks; /* ... of which zstd-compressed */
	uint64_t stored_bytes;      /* chunk payload bytes as stored in the file */
	uint64_t raw_bytes;         /* chunk payload bytes after decompression */
	uint64_t records;           /* records returned so far */
	uint64_t unknown_records;   /* records of unknown type skipped so far */
	uint64_t bad_chunks;        /* chunks skipped after -BTR_ERR_CHECKSUM */
	int complete;               /* the end chunk has been read */
	uint64_t size;              /* bytes of the input (a file's size when it was
				     * opened), 0 if unknown (a pipe) */
};

/* File header flags. */
enum {
	BTR_TRACE_F_ZSTD = 1u << 0, /* the writer was asked to compress chunks */
};

/* Fills @out (never fails; @r and @out must not be NULL). */
void btr_trace_reader_info(const struct btr_trace_reader *r, struct btr_trace_info *out);

void btr_trace_reader_free(struct btr_trace_reader *r);

/* Returns the name of a record type ("machine", "module_load", ...). */
const char *btr_rec_type_name(enum btr_rec_type type);

/* Returns the name of a thread end: "unknown", "exited", "killed",
 * "running" (what is not one of enum btr_thread_end: "unknown"). */
const char *btr_thread_end_name(uint32_t end);

/* Returns the name of a window's reason: "trigger", "request", "end",
 * "killed" (what is not one of enum btr_window_reason: "?"). */
const char *btr_window_reason_name(uint32_t reason);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
