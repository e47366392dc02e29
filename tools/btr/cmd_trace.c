/* cmd_trace.c - `btr trace dump|info FILE`: look inside a .btr container
 * (or a perf.data file, through the same reader). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "btr/text.h"
#include "cli_cmd.h"

/* One table for both subcommands: each takes the options of its bit. */
enum { DUMP = 1, INFO = 2 };
enum { O_PID = 256, O_TID };

static const struct cli_opt opts[] = {
	{ "verbose", 'v', CLI_NOARG, "    -v, --verbose   also print every LBR entry and decoded branch\n", NULL, DUMP },
	{ "hex", 'x', CLI_NOARG, "    -x, --hex       also hex-dump PT/BTS data bytes\n", NULL, DUMP },
	{ "format", 'f', CLI_ARG,
	  "  info   summary: records per type, PT/BTS/LBR bytes, threads, modules,\n"
	  "         backend, compression, completeness\n"
	  "    --format json   print one JSON object instead of text\n", NULL, INFO },
	{ "pid", O_PID, CLI_ARG, "  --pid PID         only the records of process PID (and the machine record)\n", NULL, 0 },
	{ "tid", O_TID, CLI_ARG,
	  "  --tid TID         only the records of thread TID and of its process's\n"
	  "                    modules and process events\n", NULL, 0 },
	{ "help", 'h', CLI_NOARG, NULL, NULL, 0 },
	{ 0 },
};

#define TRACE_USAGE                                                            \
	"Usage: btr trace dump [-v] [-x] [--pid PID] [--tid TID] FILE\n"       \
	"       btr trace info [--format text|json] [--pid PID] [--tid TID] FILE\n" \
	"Look inside a .btr trace (or perf.data file).\n\n"                    \
	"  dump   one line per record: type name and fields; PT/BTS data records\n" \
	"         show tid, cpu, stream offset and size\n"
#define TRACE_EPILOG                                                           \
	"\nExit status: 0 ok, 2 usage error, 3 the file cannot be read or is damaged\n" \
	"(truncated, checksum mismatch: everything readable is still printed).\n"

static const struct cli_cmd dump_cmd = {
	"trace", TRACE_USAGE, opts, TRACE_EPILOG, 1, 1, "dump: missing FILE", "dump: one FILE only",
	DUMP, "bad option", CLI_CMD_POSIX,
};
static const struct cli_cmd info_cmd = {
	"trace", TRACE_USAGE, opts, TRACE_EPILOG, 1, 1, "info: missing FILE", "info: one FILE only",
	INFO, "bad option", CLI_CMD_POSIX,
};

/* Prints @s as a double-quoted string with C/JSON escapes (the one
 * escaper of text outputs, btr/text.h). */
static void print_quoted(FILE *f, const char *s)
{
	btr_text_str(f, s, 1);
}

static const char *prot_str(uint32_t prot, char buf[4])
{
	buf[0] = (prot & PROT_READ) ? 'r' : '-';
	buf[1] = (prot & PROT_WRITE) ? 'w' : '-';
	buf[2] = (prot & PROT_EXEC) ? 'x' : '-';
	buf[3] = 0;
	return buf;
}

static void print_module(const struct btr_record *rec)
{
	const struct btr_rec_module *m = &rec->u.module;
	char pb[4];

	printf(" pid=%" PRIu32 " 0x%" PRIx64 "-0x%" PRIx64 " prot=%s pgoff=0x%" PRIx64 " tsc=%" PRIu64,
	       m->pid, m->start, m->start + m->size, prot_str(m->prot, pb), m->pgoff, m->tsc);
	if (m->build_id_len) {
		printf(" build_id=");
		for (int i = 0; i < m->build_id_len; i++)
			printf("%02x", m->build_id[i]);
	}
	printf(" path=");
	print_quoted(stdout, m->path);
}

static void print_branch_flags(uint32_t flags)
{
	static const char *const names[] = { "taken", "kernel", "tsc", "cycles", "mispred",
					     "predicted", "insns", "tsx_abort", "to_kernel", "in_tx" };
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (flags & (1u << i))
			printf(" %s", names[i]);
}

static void hexdump(const uint8_t *d, uint64_t n)
{
	for (uint64_t i = 0; i < n; i += 16) {
		printf("  %08" PRIx64 " ", i);
		for (uint64_t k = i; k < i + 16 && k < n; k++)
			printf(" %02x", d[k]);
		putchar('\n');
	}
}

static void dump_record(const struct btr_record *rec, int verbose, int hex)
{
	printf("%s", btr_rec_type_name(rec->type));
	switch (rec->type) {
	case BTR_REC_MACHINE: {
		const struct btr_rec_machine *m = &rec->u.machine;
		printf(" backend=%s vendor=%s family=%u model=0x%x stepping=%u lbr_depth=%u flags=0x%" PRIx32
		       " mtc_freq=%u cyc_thresh=%u nom_freq=%" PRIu32 " cpuid15=%" PRIu32 "/%" PRIu32
		       " tsc_hz=%" PRIu64 " start_time_ns=%" PRIu64,
		       m->backend[0] ? m->backend : "?", m->cpu_vendor[0] ? m->cpu_vendor : "?",
		       m->cpu_family, m->cpu_model, m->cpu_stepping, m->lbr_depth, m->flags, m->mtc_freq,
		       m->cyc_thresh, m->nom_freq, m->cpuid15_eax, m->cpuid15_ebx, m->tsc_hz,
		       m->start_time_ns);
		for (int i = 0; i < m->addr_filter_cfg && i < 4; i++)
			printf(" filter%d=0x%" PRIx64 "-0x%" PRIx64, i, m->addr_filter[i][0],
			       m->addr_filter[i][1]);
		break;
	}
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_IP_FILTER:
	case BTR_REC_EXEC:
		print_module(rec);
		break;
	case BTR_REC_THREAD_START:
		printf(" pid=%" PRIu32 " tid=%" PRIu32 " parent=%" PRIu32 " tsc=%" PRIu64, rec->u.thread.pid,
		       rec->u.thread.tid, rec->u.thread.parent_tid, rec->u.thread.tsc);
		break;
	case BTR_REC_THREAD_EXIT:
		printf(" pid=%" PRIu32 " tid=%" PRIu32 " code=%" PRId32 " end=%s signal=%" PRId32 " tsc=%" PRIu64,
		       rec->u.thread.pid, rec->u.thread.tid, rec->u.thread.exit_code,
		       btr_thread_end_name(rec->u.thread.end), rec->u.thread.signo, rec->u.thread.tsc);
		break;
	case BTR_REC_THREAD_NAME:
		printf(" pid=%" PRIu32 " tid=%" PRIu32 " tsc=%" PRIu64 " name=", rec->u.thread.pid,
		       rec->u.thread.tid, rec->u.thread.tsc);
		print_quoted(stdout, rec->u.thread.name);
		break;
	case BTR_REC_PT:
	case BTR_REC_BTS:
	case BTR_REC_BTS_INSNS:
		printf(" tid=%" PRIu32 " cpu=%" PRId32 " offset=0x%" PRIx64 " size=%" PRIu64, rec->u.data.tid,
		       rec->u.data.cpu, rec->u.data.stream_offset, rec->u.data.size);
		if (hex) {
			putchar('\n');
			hexdump(rec->u.data.data, rec->u.data.size);
			return;
		}
		break;
	case BTR_REC_LBR: {
		const struct btr_rec_lbr *l = &rec->u.lbr;
		printf(" pid=%" PRIu32 " tid=%" PRIu32 " cpu=%" PRId32 " count=%" PRIu32 " ip=0x%" PRIx64
		       " tsc=%" PRIu64,
		       l->pid, l->tid, l->cpu, l->count, l->ip, l->tsc);
		if (verbose) {
			for (uint32_t i = 0; i < l->count; i++) {
				printf("\n  0x%" PRIx64 " -> 0x%" PRIx64 " cycles=%" PRIu32, l->entries[i].from,
				       l->entries[i].to, l->entries[i].cycles);
				print_branch_flags(l->entries[i].flags);
			}
		}
		break;
	}
	case BTR_REC_BRANCHES: {
		const struct btr_rec_branches *b = &rec->u.branches;
		printf(" tid=%" PRIu32 " count=%" PRIu32, b->tid, b->count);
		if (verbose) {
			for (uint32_t i = 0; i < b->count; i++) {
				const struct btr_branch *x = &b->branches[i];
				printf("\n  0x%" PRIx64 " -> 0x%" PRIx64 " %s", x->from, x->to,
				       btr_branch_kind_name((enum btr_branch_kind)x->kind));
				print_branch_flags(x->flags);
				if (x->flags & BTR_BF_TSC)
					printf(" tsc=%" PRIu64, x->tsc);
				if (x->flags & BTR_BF_INSNS)
					printf(" insns=%" PRIu64, x->insns);
				if (x->flags & BTR_BF_CYCLES)
					printf(" cyc=%" PRIu32, x->cycles);
			}
		}
		break;
	}
	case BTR_REC_PROCESS: {
		const struct btr_rec_process *x = &rec->u.process;
		static const char *const ev[] = { "?", "start", "exec", "untraced", "lost" };
		printf(" pid=%" PRIu32 " ppid=%" PRIu32 " event=%s tsc=%" PRIu64 " path=", x->pid, x->ppid,
		       ev[x->event < 5 ? x->event : 0], x->tsc);
		print_quoted(stdout, x->path);
		printf(" argv=[");
		for (uint32_t i = 0; i < x->args_len; i += (uint32_t)strnlen(x->args + i, x->args_len - i) + 1) {
			if (i)
				putchar(' ');
			print_quoted(stdout, x->args + i);
		}
		putchar(']');
		if (x->event == BTR_PROC_UNTRACED || x->event == BTR_PROC_LOST) {
			printf(" reason=");
			print_quoted(stdout, *x->detail ? x->detail : btr_errstr(x->reason));
		}
		break;
	}
	case BTR_REC_CODE: {
		const struct btr_rec_code *x = &rec->u.code;
		printf(" pid=%" PRIu32 " addr=0x%" PRIx64 " size=%" PRIu32 " hash=%016" PRIx64 "%s", x->pid, x->addr,
		       x->size, x->hash, x->data ? "" : " repeat");
		if (hex && x->data) {
			putchar('\n');
			hexdump(x->data, x->size);
			return;
		}
		break;
	}
	case BTR_REC_SYMBOL:
		printf(" pid=%" PRIu32 " addr=0x%" PRIx64 " size=0x%" PRIx64 " source=%s name=", rec->u.sym.pid,
		       rec->u.sym.addr, rec->u.sym.size, rec->u.sym.source == BTR_SYM_JITDUMP ? "jitdump" : "perf-map");
		print_quoted(stdout, rec->u.sym.name);
		break;
	case BTR_REC_WINDOW: {
		const struct btr_rec_window *x = &rec->u.win;
		printf(" pid=%" PRIu32 " tid=%" PRIu32 " reason=%s index=%" PRIu32 " offset=0x%" PRIx64 " size=%" PRIu64,
		       x->pid, x->tid, btr_window_reason_name(x->reason), x->index, x->stream_offset, x->size);
		if (x->ip)
			printf(" ip=0x%" PRIx64, x->ip);
		break;
	}
	case BTR_REC_SWITCH: {
		const struct btr_rec_switch *x = &rec->u.sw;
		printf(" %s pid=%" PRIu32 " tid=%" PRIu32 " cpu=%" PRId32 " tsc=%" PRIu64 "%s",
		       (x->flags & BTR_SWITCH_OUT) ? "out" : "in", x->pid, x->tid, x->cpu, x->tsc,
		       (x->flags & BTR_SWITCH_PREEMPT) ? " preempt" : "");
		break;
	}
	case BTR_REC_PROCESS_EXIT: {
		const struct btr_rec_exit *x = &rec->u.exit;
		printf(" pid=%" PRIu32 " tid=%" PRIu32 " code=%" PRId32 " signal=%" PRId32 " ip=0x%" PRIx64
		       " addr=0x%" PRIx64 " tsc=%" PRIu64,
		       x->pid, x->tid, x->code, x->signo, x->ip, x->addr, x->tsc);
		break;
	}
	default:
		break;
	}
	putchar('\n');
}

/* A growing open-addressing set of thread ids (0 is "empty"). */
struct tidset {
	uint32_t *v;
	size_t cap, n;
};

static int tidset_add(struct tidset *s, uint32_t tid)
{
	if (!tid)
		return 0;
	if (2 * (s->n + 1) > s->cap) {
		struct tidset t = { calloc(s->cap ? 2 * s->cap : 64, sizeof(uint32_t)), s->cap ? 2 * s->cap : 64, 0 };
		if (!t.v)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				tidset_add(&t, s->v[i]);
		free(s->v);
		*s = t;
	}
	size_t i = (tid * 2654435761u) & (s->cap - 1);
	while (s->v[i] && s->v[i] != tid)
		i = (i + 1) & (s->cap - 1);
	if (!s->v[i]) {
		s->v[i] = tid;
		s->n++;
	}
	return 0;
}

static int tidset_has(const struct tidset *s, uint32_t tid)
{
	if (!tid || !s->cap)
		return 0;
	size_t i = (tid * 2654435761u) & (s->cap - 1);
	while (s->v[i] && s->v[i] != tid)
		i = (i + 1) & (s->cap - 1);
	return s->v[i] == tid;
}

struct summary {
	uint64_t by_type[BTR_REC__MAX];
	uint64_t pt_bytes, bts_bytes, lbr_entries, branches;
	uint64_t modules;
	char backend[16];
	int have_exit;
	struct btr_rec_exit exit;
	struct tidset threads;
};

static void account(struct summary *s, const struct btr_record *rec)
{
	if ((unsigned)rec->type < BTR_REC__MAX)
		s->by_type[rec->type]++;
	switch (rec->type) {
	case BTR_REC_MACHINE:
		if (!s->backend[0])
			memcpy(s->backend, rec->u.machine.backend, sizeof(s->backend));
		break;
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_EXEC:
		s->modules++;
		break;
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME:
		tidset_add(&s->threads, rec->u.thread.tid);
		break;
	case BTR_REC_PT:
		s->pt_bytes += rec->u.data.size;
		tidset_add(&s->threads, rec->u.data.tid);
		break;
	case BTR_REC_BTS:
		s->bts_bytes += rec->u.data.size;
		tidset_add(&s->threads, rec->u.data.tid);
		break;
	case BTR_REC_LBR:
		s->lbr_entries += rec->u.lbr.count;
		tidset_add(&s->threads, rec->u.lbr.tid);
		break;
	case BTR_REC_BRANCHES:
		s->branches += rec->u.branches.count;
		tidset_add(&s->threads, rec->u.branches.tid);
		break;
	case BTR_REC_PROCESS_EXIT:
		s->have_exit = 1;
		s->exit = rec->u.exit;
		tidset_add(&s->threads, rec->u.exit.tid);
		break;
	default:
		break;
	}
}

static void format_time(uint64_t ns, char *buf, size_t n)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;
	if (!ns || !gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, n, "unknown");
}

static void print_info_text(const char *file, const struct btr_trace_info *ti, const struct summary *s)
{
	char when[64];
	uint64_t total = 0;

	format_time(ti->created_ns, when, sizeof(when));
	printf("file:        %s\n", file);
	if (ti->format == BTR_TRACE_FMT_PERF)
		printf("format:      perf.data\n");
	else
		printf("format:      btr %u.%u (written by %s, pid %" PRIu32 ", %s)\n", ti->major, ti->minor,
		       ti->creator[0] ? ti->creator : "?", ti->writer_pid, when);
	printf("complete:    %s\n", ti->complete ? "yes" : "no (no end chunk)");
	printf("backend:     %s\n", s->backend[0] ? s->backend : "unknown");
	if (ti->format == BTR_TRACE_FMT_PERF)
		printf("compressed:  no\n");
	else
		printf("compressed:  %s (%" PRIu64 " of %" PRIu64 " chunks zstd; %" PRIu64 " bytes stored, %" PRIu64
		       " raw)\n",
		       ti->compressed_chunks ? "yes" : "no", ti->compressed_chunks, ti->chunks,
		       ti->stored_bytes, ti->raw_bytes);
	for (int t = 1; t < BTR_REC__MAX; t++)
		total += s->by_type[t];
	printf("records:     %" PRIu64 "\n", total);
	for (int t = 1; t < BTR_REC__MAX; t++)
		if (s->by_type[t])
			printf("  %-14s %" PRIu64 "\n", btr_rec_type_name((enum btr_rec_type)t), s->by_type[t]);
	if (ti->unknown_records)
		printf("  %-14s %" PRIu64 " (newer format, skipped)\n", "unknown", ti->unknown_records);
	printf("threads:     %zu\n", s->threads.n);
	printf("modules:     %" PRIu64 "\n", s->modules);
	printf("pt bytes:    %" PRIu64 "\n", s->pt_bytes);
	printf("bts bytes:   %" PRIu64 "\n", s->bts_bytes);
	printf("lbr bytes:   %" PRIu64 " (%" PRIu64 " entries)\n", s->lbr_entries * 24, s->lbr_entries);
	printf("branches:    %" PRIu64 "\n", s->branches);
	if (s->have_exit)
		printf("exit:        pid %" PRIu32 " code %" PRId32 " signal %" PRId32 " ip 0x%" PRIx64 "\n",
		       s->exit.pid, s->exit.code, s->exit.signo, s->exit.ip);
	if (ti->bad_chunks)
		printf("damaged:     %" PRIu64 " chunks skipped (checksum mismatch)\n", ti->bad_chunks);
}

static void print_info_json(const char *file, const struct btr_trace_info *ti, const struct summary *s)
{
	uint64_t total = 0;

	for (int t = 1; t < BTR_REC__MAX; t++)
		total += s->by_type[t];
	printf("{\"file\": ");
	btr_json_str(stdout, file);
	printf(", \"format\": \"%s\"", ti->format == BTR_TRACE_FMT_PERF ? "perf" : "btr");
	if (ti->format == BTR_TRACE_FMT_PERF)
		printf(", \"version\": \"\", \"creator\": ");
	else
		printf(", \"version\": \"%u.%u\", \"creator\": ", ti->major, ti->minor);
	btr_json_str(stdout, ti->creator);
	printf(", \"created_ns\": %" PRIu64 ", \"complete\": %s", ti->created_ns,
	       ti->complete ? "true" : "false");
	printf(", \"backend\": ");
	btr_json_str(stdout, s->backend[0] ? s->backend : "unknown");
	printf(", \"compressed\": %s, \"chunks\": %" PRIu64 ", \"compressed_chunks\": %" PRIu64
	       ", \"stored_bytes\": %" PRIu64 ", \"raw_bytes\": %" PRIu64 ", \"damaged_chunks\": %" PRIu64,
	       ti->compressed_chunks ? "true" : "false", ti->chunks, ti->compressed_chunks, ti->stored_bytes,
	       ti->raw_bytes, ti->bad_chunks);
	printf(", \"records\": %" PRIu64 ", \"records_by_type\": {", total);
	for (int t = 1; t < BTR_REC__MAX; t++)
		printf("%s\"%s\": %" PRIu64, t > 1 ? ", " : "", btr_rec_type_name((enum btr_rec_type)t),
		       s->by_type[t]);
	printf("}, \"unknown_records\": %" PRIu64, ti->unknown_records);
	printf(", \"data_bytes\": {\"pt\": %" PRIu64 ", \"bts\": %" PRIu64 ", \"lbr\": %" PRIu64 "}",
	       s->pt_bytes, s->bts_bytes, s->lbr_entries * 24);
	printf(", \"lbr_entries\": %" PRIu64 ", \"branches\": %" PRIu64 ", \"threads\": %zu, \"modules\": %" PRIu64,
	       s->lbr_entries, s->branches, s->threads.n, s->modules);
	if (s->have_exit)
		printf(", \"exit\": {\"pid\": %" PRIu32 ", \"code\": %" PRId32 ", \"signal\": %" PRId32
		       ", \"ip\": \"0x%" PRIx64 "\"}",
		       s->exit.pid, s->exit.code, s->exit.signo, s->exit.ip);
	printf("}\n");
}

/* Reads every record of @file, calling dump_record or account.  Returns
 * the exit code; prints the one error line itself. */
/* --pid / --tid: which records belong to the selection.  Data records
 * name only a thread: a thread belongs to process PID when its thread
 * records say so (or it is the main thread, tid == pid). */
struct sel {
	uint32_t pid, tid;
	uint32_t tid_pid;          /* --tid: its process (from thread records) */
	struct tidset tids;        /* --pid: its threads */
};

static int selected(struct sel *q, const struct btr_record *rec)
{
	uint32_t pid = 0, tid = 0;
	switch (rec->type) {
	case BTR_REC_MACHINE:
		return 1;
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_EXEC:
		pid = rec->u.module.pid;
		break;
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME:
		pid = rec->u.thread.pid;
		tid = rec->u.thread.tid;
		if (q->pid && pid == q->pid)
			tidset_add(&q->tids, tid);
		if (q->tid && tid == q->tid && pid)
			q->tid_pid = pid;
		break;
	case BTR_REC_PT:
	case BTR_REC_BTS:
		tid = rec->u.data.tid;
		break;
	case BTR_REC_LBR:
		pid = rec->u.lbr.pid;
		tid = rec->u.lbr.tid;
		break;
	case BTR_REC_BRANCHES:
		tid = rec->u.branches.tid;
		break;
	case BTR_REC_PROCESS_EXIT:
		pid = rec->u.exit.pid;
		tid = rec->u.exit.tid;
		break;
	case BTR_REC_PROCESS:
		pid = rec->u.process.pid;
		break;
	default:
		return 1;
	}
	if (q->pid) {
		if (pid ? pid != q->pid : !(tid == q->pid || tidset_has(&q->tids, tid)))
			return 0;
	}
	if (q->tid) {
		if (tid ? tid != q->tid : pid != q->tid_pid)
			return 0;
	}
	return 1;
}

static int walk(const char *file, int mode_info, int json, int verbose, int hex, uint32_t sel_pid, uint32_t sel_tid)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	struct btr_trace_info ti;
	struct summary s;
	int rc, first_err = 0;
	uint64_t err_off = 0, last_off = 0;

	memset(&s, 0, sizeof(s));
	struct sel sel = { .pid = sel_pid, .tid = sel_tid, .tid_pid = sel_tid };
	/* The process records also go to a stream, which tells what the
	 * recorder lost (BTR_PROC_LOST). */
	struct btr_stream_opts so = { .sz = sizeof(so) };
	struct btr_stream *ls = NULL;
	rc = btr_stream_new(&so, &ls);
	if (rc < 0) {
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	rc = btr_trace_reader_new(file, &r);
	if (rc) {
		btr_stream_free(ls);
		cli_error("%s: %s", file, btr_errstr(rc));
		return EXIT_RUNTIME;
	}
	for (;;) {
		rc = btr_trace_read(r, &rec);
		if (rc == 0) {
			if ((sel.pid || sel.tid) && !selected(&sel, &rec))
				continue;
			if (rec.type == BTR_REC_PROCESS && btr_stream_record(ls, &rec) < 0) {
				first_err = rc = -BTR_ERR_NOMEM;
				break;
			}
			if (mode_info)
				account(&s, &rec);
			else
				dump_record(&rec, verbose, hex);
			continue;
		}
		if (rc == -BTR_ERR_EOS)
			break;
		last_off = btr_trace_reader_offset(r);
		if (!first_err) {
			first_err = rc;
			err_off = btr_trace_reader_offset(r);
		}
		/* A damaged chunk is skipped; keep going to show the rest. */
		if (rc == -BTR_ERR_CHECKSUM)
			continue;
		break;
	}
	btr_trace_reader_info(r, &ti);
	if (mode_info) {
		if (json)
			print_info_json(file, &ti, &s);
		else
			print_info_text(file, &ti, &s);
	}
	fflush(stdout);
	btr_trace_reader_free(r);
	free(s.threads.v);
	free(sel.tids.v);
	int lost = cli_stream_losses(file, mode_info ? "info" : "dump", ls);
	btr_stream_free(ls);
	if (!first_err)
		return lost ? EXIT_RUNTIME : EXIT_OK;
	if (rc == -BTR_ERR_EOS)
		cli_error("%s: %" PRIu64 " damaged chunk(s) skipped (checksum mismatch), first at offset 0x%" PRIx64,
			  file, ti.bad_chunks, err_off);
	else if (ti.bad_chunks)
		cli_error("%s: %s at offset 0x%" PRIx64 " (after %" PRIu64 " damaged chunk(s) skipped)", file,
			  btr_errstr(rc), last_off, ti.bad_chunks);
	else
		cli_error("%s: %s at offset 0x%" PRIx64, file, btr_errstr(rc), last_off);
	return EXIT_RUNTIME;
}

struct args {
	int verbose, hex, json;
	uint32_t sel_pid, sel_tid;
};

static int on_opt(void *ctx, int key, char *arg)
{
	struct args *x = ctx;
	uint64_t v;
	switch (key) {
	case 'v': x->verbose = 1; break;
	case 'x': x->hex = 1; break;
	case O_PID:
	case O_TID:
		if (cli_parse_u64(arg, &v) < 0 || v == 0 || v > UINT32_MAX)
			return cli_usage_error("trace", "bad --%s '%s' (a positive number)", key == O_PID ? "pid" : "tid",
					       arg);
		*(key == O_PID ? &x->sel_pid : &x->sel_tid) = (uint32_t)v;
		break;
	case 'f':
		return cli_format_text_json("trace", arg, &x->json, "unknown format '%s' (text or json)");
	}
	return EXIT_OK;
}

int cmd_trace(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	if (argc < 2)
		return cli_usage_error("trace", "missing subcommand (dump or info)");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		cli_cmd_help(&dump_cmd, stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "dump"))
		cmd = &dump_cmd;
	else if (!strcmp(argv[1], "info"))
		cmd = &info_cmd;
	else
		return cli_usage_error("trace", "unknown subcommand '%s' (dump or info)", argv[1]);
	struct args x = { 0 };
	int first;
	int rc = cli_cmd_parse(cmd, argc - 1, argv + 1, NULL, on_opt, &x, &first);
	if (rc != EXIT_OK)
		return rc == CLI_CMD_DONE ? EXIT_OK : rc;
	return walk(argv[1 + first], cmd == &info_cmd, x.json, x.verbose, x.hex, x.sel_pid, x.sel_tid);
}
