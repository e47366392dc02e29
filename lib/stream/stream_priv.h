/* stream_priv.h - the state of a stream (struct btr_stream and its data
 * streams, modules, images), split from stream.c (which alone uses it) to
 * keep that file's length in bounds. */
#ifndef BTR_STREAM_PRIV_H
#define BTR_STREAM_PRIV_H

#include "btr/bts.h"
#include "btr/stream.h"
#include "internal.h"
#include "stream_code.h"
#include "stream_elf.h"
#include "stream_loss.h"
#include "stream_par.h"
#include "stream_switch.h"
#include "stream_threads.h"

#define BTS_REC_SIZE BTR_BTS_RECORD_SIZE

/* A PT or BTS data stream: records of one (tid, cpu) pair. */
struct data_stream {
	uint32_t tid;
	int32_t cpu;
	int kind;                 /* BTR_REC_PT or BTR_REC_BTS */
	int started;              /* next_off is valid */
	uint64_t next_off;        /* expected stream_offset of the next chunk */
	struct btr_ptflow *flow;  /* PT */
	uint64_t last_use;        /* PT: for evicting the least recently used decoder */
	int evicted;              /* PT: its decoder was taken away mid-stream */
	int fresh;                /* a THREAD_START for its tid came: a stream
				   * starting again at offset 0 is a new one (the
				   * same tid after exec, or a reused tid) */
	uint8_t carry[BTS_REC_SIZE]; /* BTS: a record cut at a chunk end */
	unsigned carry_len;
	struct btr_stream *s;
	struct btr_bts_insns *ins;   /* BTS: counts from BTS_INSNS records, or NULL */
	uint64_t rec_idx;            /* BTS: index of the record being decoded */
	/* PT of a whole CPU (the data record names no thread): the thread
	 * running, from the CPU's SWITCH records, and the process whose
	 * image the decoder reads (see stream_sw_runner) */
	int percpu, percpu_warned;
	uint32_t flow_pid;        /* PT: the .pid its decoder writes into branches */
	uint32_t cur_tid, cur_pid, img_pid;
	uint64_t run_from, run_until; /* cur_tid runs in [run_from, run_until) */
	int win_pending;          /* PT: a WINDOW record said a window starts at win_off */
	uint64_t win_off;
	int warm;                 /* PT: decoding without output (on_pt's cut) */
};

/* A module file placed into the image (for de-duplication and EXEC). */
struct loaded_module {
	char *file;
	uint64_t bias;
	uint64_t start, size;     /* recorded mapping (0, 0 for user ELFs) */
	uint32_t pid;             /* process that mapped it */
	/* Unloaded (a MODULE_UNLOAD record came) but still in the image until
	 * its addresses are mapped again: PT data is written in chunks, so
	 * the branches into a module can come after its unload record (a
	 * thread's buffered data, other threads' data).  Code that is
	 * unmapped cannot run again, so keeping it is harmless until another
	 * module takes its place.  @unload is the record, delivered as the
	 * MODULE_UNLOAD event when the module really leaves the image. */
	int dead;
	struct btr_rec_module unload;   /* .path is @file */
};

/* The image of one process (see the file comment). */
struct proc_image {
	uint32_t pid;
	struct btr_image *img;
};

struct btr_stream {
	struct btr_stream_opts o;
	struct btr_trace_reader *reader; /* reads .btr and perf.data alike */
	struct btr_image *img;           /* the first process's image */
	struct proc_image *procs;        /* procs[0].img == img once bound */
	size_t n_procs, cap_procs;
	size_t last_proc;                /* img_of's one-entry cache */
	struct btr_ptflow_config flowcfg;
	struct stream_place_memo placed; /* module records placed so far */
	struct btr_ptflow_spare spare;   /* the last freed PT decoder's tables */
	char backend[sizeof(((struct btr_rec_machine *)0)->backend) + 1];

	struct data_stream **ds;
	size_t n_ds, cap_ds;
	unsigned n_live_flows;
	uint64_t tick;

	struct stream_threads thr;    /* threads: process, filtered instructions (stream_threads.c) */

	struct loaded_module *mods;
	size_t n_mods, cap_mods;

	struct user_elf *uelfs;
	unsigned n_uelfs;

	struct btr_stream_stats st;
	int stopped;              /* positive: a callback asked to stop */
	int error;                /* a failure inside a callback path (NOMEM) */
	int data_lost;
	int finished;
	uint64_t progress_shown;  /* btr_stream_step: input offset of the last progress call */
	int progress_started;     /* ... and whether there was one */

	struct stream_switches sw; /* context switches per CPU (stream_switch.c) */
	struct stream_losses loss; /* causes of lost data (stream_loss.c) */
	struct stream_code code;   /* code without a file, CODE records (stream_code.c) */
	char *path;                /* btr_stream_open's file (the parallel run reopens it) */
	stream_rec_hook hook;      /* the parallel run's say over each record (stream_par.h) */
	void *hook_ctx;
	void (*hook_free)(void *ctx);   /* frees @hook_ctx with the stream */
	struct { int on; size_t warm, from, to; } cut;  /* btr__stream_cut's, for the next PT record */
};

#endif
