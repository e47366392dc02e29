/* perf_event.c - the recorder shared by the hardware backends: opens one
 * perf event per CPU (or per thread), maps its ring and AUX area, reads
 * them with btr/perfring.h and writes a .btr trace.
 *
 * Why per CPU by default, even for one command: an event inherited by
 * the command's threads and children writes into the parent event's
 * buffer; with one AUX buffer per thread, two threads running at once on
 * two CPUs collide on it and the kernel drops one side's trace
 * (PERF_AUX_FLAG_COLLISION).  One ring per CPU, filtered to the command's
 * process tree (pid = the command, inherit), never collides - perf record
 * does the same.  --per-thread opts into one ring for the first thread
 * only (no inheritance).
 *
 * The sideband in the rings (MMAP2, COMM, FORK, EXIT, SAMPLE) goes
 * through btr_perf_convert (lib/perf/perfdata.c), the same code that reads
 * perf.data files; AUX records tell how far the AUX area was written.
 *
 * Nothing here could be run on the machines btr was written on (no PMU):
 * it follows include/uapi/linux/perf_event.h and tools/perf's use of it,
 * and the pure parts (ring walking, attrs, record conversion) are tested
 * on simulated buffers.
 */
#include "perf_event.h"
#include "perf_ops.h"
#include "btr/error.h"
#include "btr/hwinfo.h"
#include "btr/perfdata.h"
#include "btr/perfring.h"
#include "internal.h"
#include "agent/procmaps.h"
#include "output.h"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* struct btr_perf_event_attr is struct perf_event_attr (VER7 prefix). */
_Static_assert(sizeof(struct perf_event_attr) >= BTR_PERF_ATTR_SIZE, "perf_event_attr too small");
_Static_assert(offsetof(struct perf_event_attr, config) == offsetof(struct btr_perf_event_attr, config), "config");
_Static_assert(offsetof(struct perf_event_attr, sample_type) == offsetof(struct btr_perf_event_attr, sample_type),
	       "sample_type");
_Static_assert(offsetof(struct perf_event_attr, wakeup_events) ==
		       offsetof(struct btr_perf_event_attr, wakeup_events), "wakeup_events");
_Static_assert(offsetof(struct perf_event_attr, branch_sample_type) ==
		       offsetof(struct btr_perf_event_attr, branch_sample_type), "branch_sample_type");
_Static_assert(offsetof(struct perf_event_attr, aux_watermark) ==
		       offsetof(struct btr_perf_event_attr, aux_watermark), "aux_watermark");
_Static_assert(offsetof(struct perf_event_attr, sig_data) == offsetof(struct btr_perf_event_attr, sig_data),
	       "sig_data");

#define DATA_PAGES 64          /* data ring: 256 KiB per event */
#define AUX_MARKS 64           /* AUX records held per ring until the sideband of every ring is written */
#define MAX_RINGS 1024

struct ring {
	int fd;
	int cpu;                   /* -1: per thread */
	uint32_t tid;              /* per thread: the traced thread */
	void *base;
	size_t len;
	void *aux;
	size_t aux_len;
	struct btr_perf_ring *r;
	uint64_t aux_written;      /* stream position after the last AUX bytes written */
	uint64_t aux_skew;         /* added to AUX positions: a jump per lost stretch */
	uint64_t snap_off;         /* snapshot: the in-area offset the last one ended at */
	int snap_wrapped;          /* snapshot: the hardware has gone round the area */
	/* the AUX chunks the ring's PERF_RECORD_AUX told of, not yet
	 * written: where each ends, and whether a hole follows it */
	struct { uint64_t end; int hole; } marks[AUX_MARKS];
	unsigned n_marks;
};

struct rec_state {
	const struct btr_capture_opts *opts;
	struct btr_perf_capture *pc;
	struct btr_trace_writer *w;
	struct btr_perf_reader *conv;
	struct btr_capture_result *res;
	struct ring *rings;
	unsigned n_rings;
	long page;
	uint64_t aux_lost, aux_truncated, aux_collisions, lost_events, lost_samples;
	int err;
};

static volatile sig_atomic_t stop_flag, snapshot_flag;

static void on_stop(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void on_snapshot(int sig)
{
	(void)sig;
	snapshot_flag = 1;
}

int btr_perf_refuse(const char *name, const char *reason)
{
	btr_err("%s: %s; record with -b qemu (software Intel PT) or -b step (ptrace) instead", name, reason);
	return -BTR_ERR_NODEV;
}

void btr_perf_privilege(const struct btr_capture_opts *opts, int *user, int *kernel)
{
	*user = opts->user;
	*kernel = opts->kernel;
	if (!*user && !*kernel)
		*user = 1;
}

static int write_rec(struct rec_state *st, const struct btr_record *rec)
{
	if (st->err)
		return st->err;
	int rc = btr_trace_write(st->w, rec);
	if (rc < 0)
		st->err = rc;   /* said once, at the end (btr_capture_output_failed) */
	return rc;
}

/* Writes AUX bytes [pos, pos+len) of ring @rg as trace data. */
static void write_aux(struct rec_state *st, struct ring *rg, const uint8_t *p, uint64_t len, uint64_t pos)
{
	struct btr_record rec = { .type = st->pc->aux_type };
	rec.u.data.tid = rg->tid;
	rec.u.data.cpu = rg->cpu;
	rec.u.data.stream_offset = pos + rg->aux_skew;
	rec.u.data.size = len;
	rec.u.data.data = p;
	if (write_rec(st, &rec) == 0) {
		st->res->pt_bytes += len;
		rg->aux_written = pos + rg->aux_skew + len;
	}
}

/* Writes the AUX bytes up to position @end (UINT64_MAX: the head). */
static void drain_aux(struct rec_state *st, struct ring *rg, uint64_t end)
{
	struct btr_perf_aux_span sp[2];
	uint64_t lost;
	int n = btr_perf_ring_aux_read_to(rg->r, end, sp, &lost);
	st->aux_lost += lost;
	if (lost)
		rg->aux_skew += rg->aux_len;   /* the spans start after the hole: keep it a hole */
	for (int i = 0; i < n; i++)
		write_aux(st, rg, sp[i].ptr, sp[i].len, sp[i].pos);
	btr_perf_ring_aux_done(rg->r);
}

/* Whether the hardware has gone round the AUX area, now at offset @off:
 * the kernel hands the area out zeroed and the hardware fills it from 0,
 * so data after @off (in the last 4 KiB, as perf's intel_pt_first_wrap
 * looks) means it was written up to the end before. */
static int aux_wrapped(const struct ring *rg, uint64_t off)
{
	uint64_t from = rg->aux_len > 4096 ? rg->aux_len - 4096 : 0;
	if (from < off)
		from = off;
	const uint8_t *p = rg->aux;
	for (uint64_t i = from; i < rg->aux_len; i++)
		if (p[i])
			return 1;
	return 0;
}

/* Snapshot: what the AUX area holds that an earlier snapshot did not
 * write.  In overwrite mode the kernel's aux_head is the offset within
 * the area where the hardware is (pt_update_head, bts_update), not a
 * free-running count, so - as perf's intel_pt_find_snapshot - until the
 * area has wrapped the new bytes are [last offset, offset); after that
 * the whole area, oldest first, after a jump in the stream positions (the
 * bytes before it may be lost or repeated: the decoder resynchronizes).
 * The event is stopped while the area is copied (perf's
 * intel_pt_snapshot_start/finish), so the hardware cannot overwrite what
 * is being read; @final leaves it stopped. */
static void snapshot_aux(struct rec_state *st, struct ring *rg, int final)
{
	const struct btr_perf_ops *k = btr_perf_ops_get();
	if (!rg->aux)
		return;
	if (!final)
		k->ioctl(k->ctx, rg->fd, PERF_EVENT_IOC_DISABLE, 0);
	uint64_t head = __atomic_load_n((uint64_t *)((uint8_t *)rg->base + BTR_PERF_PAGE_AUX_HEAD), __ATOMIC_ACQUIRE);
	uint64_t off = head & (rg->aux_len - 1);
	if (!rg->snap_wrapped)
		rg->snap_wrapped = aux_wrapped(rg, off);
	struct btr_perf_aux_span sp[2];
	int n = 0;
	if (rg->snap_wrapped && off != rg->snap_off) {
		n = btr_perf_ring_aux_snapshot(rg->r, off + rg->aux_len, sp, NULL);
		uint64_t at = rg->aux_written ? rg->aux_written + rg->aux_len : 0;
		for (int i = 0; i < n; i++) {
			write_aux(st, rg, sp[i].ptr, sp[i].len, at - rg->aux_skew);
			at += sp[i].len;
		}
	} else if (!rg->snap_wrapped && off > rg->snap_off) {
		write_aux(st, rg, (const uint8_t *)rg->aux + rg->snap_off, off - rg->snap_off,
			  rg->aux_written - rg->aux_skew);
	}
	rg->snap_off = off;
	if (!final)
		k->ioctl(k->ctx, rg->fd, PERF_EVENT_IOC_ENABLE, 0);
}

/* Writes the AUX chunks ring @rg's PERF_RECORD_AUX records told of, each
 * chunk's bytes only: what follows a truncated (or partial, collided)
 * chunk does not continue it, and a jump in the stream positions says so
 * to the decoder (it then waits for the next PSB instead of splicing
 * unrelated packets together). */
static void drain_aux_marks(struct rec_state *st, struct ring *rg)
{
	for (unsigned i = 0; i < rg->n_marks; i++) {
		drain_aux(st, rg, rg->marks[i].end);
		if (rg->marks[i].hole)
			rg->aux_skew += rg->aux_len;
	}
	rg->n_marks = 0;
}

/* Writes the records of ring @rg's data ring and notes its AUX records
 * (drain_aux_marks writes their data once every ring's records are
 * written: a module mapped on one CPU must come before the trace that
 * runs in it on another). */
static void drain_ring(struct rec_state *st, struct ring *rg)
{
	struct btr_perf_ring_rec rr;
	struct btr_record out[2];
	if (btr_perf_ring_begin(rg->r) < 0)
		btr_warn("perf ring of cpu %d: corrupt head, records skipped", rg->cpu);
	int rc;
	while ((rc = btr_perf_ring_next(rg->r, &rr)) == 1) {
		if (rr.type == BTR_PERF_RECORD_AUX) {
			struct btr_perf_aux_rec a;
			if (btr_perf_parse_aux(&rr, &a) < 0)
				continue;
			if (a.flags & BTR_PERF_AUX_TRUNCATED)
				st->aux_truncated++;
			if (a.flags & BTR_PERF_AUX_COLLISION)
				st->aux_collisions++;
			if (st->pc->snapshot || !rg->aux)
				continue;
			if (rg->n_marks == AUX_MARKS)
				drain_aux_marks(st, rg);   /* a long batch: keep the order within the ring */
			rg->marks[rg->n_marks].end = a.offset + a.size;
			rg->marks[rg->n_marks++].hole =
				!!(a.flags & (BTR_PERF_AUX_TRUNCATED | BTR_PERF_AUX_PARTIAL | BTR_PERF_AUX_COLLISION));
			continue;
		}
		if (rr.type == BTR_PERF_RECORD_LOST || rr.type == BTR_PERF_RECORD_LOST_SAMPLES)
			continue;   /* counted by the ring (lost_events, lost_samples) */
		int n = btr_perf_convert(st->conv, rr.rec, rr.size, out);
		for (int i = 0; i < n; i++) {
			if (out[i].type == BTR_REC_MODULE_LOAD)
				st->res->modules++;
			if (out[i].type == BTR_REC_THREAD_START)
				st->res->threads++;
			write_rec(st, &out[i]);
		}
	}
	btr_perf_ring_end(rg->r);
}

static void close_rings(struct rec_state *st)
{
	const struct btr_perf_ops *k = btr_perf_ops_get();
	for (unsigned i = 0; i < st->n_rings; i++) {
		struct ring *rg = &st->rings[i];
		if (rg->aux)
			k->munmap(k->ctx, rg->aux, rg->aux_len);
		if (rg->base)
			k->munmap(k->ctx, rg->base, rg->len);
		if (rg->fd >= 0)
			k->close(k->ctx, rg->fd);
		free(rg->r);
	}
	free(st->rings);
	st->rings = NULL;
	st->n_rings = 0;
}

static int errno_line(const char *what, int e)
{
	const char *hint = "";
	if (e == EACCES || e == EPERM)
		hint = " (see kernel.perf_event_paranoid, or run as root / with CAP_PERFMON)";
	else if (e == ENOENT || e == ENODEV)
		hint = " (this CPU or hypervisor does not offer it)";
	else if (e == EOPNOTSUPP)
		hint = " (the PMU cannot do what was asked)";
	btr_err("%s: %s%s", what, strerror(e), hint);
	return btr_err_from_errno(e) == -BTR_ERR_IO ? -BTR_ERR_NODEV : btr_err_from_errno(e);
}

/* Opens the event on (@pid, @cpu) and maps its ring (and AUX area).
 * Returns 0, 1 if @cpu is offline, or a negative error. */
static int open_ring(struct rec_state *st, pid_t pid, int cpu, struct ring *rg)
{
	const struct btr_perf_ops *k = btr_perf_ops_get();
	memset(rg, 0, sizeof(*rg));
	rg->fd = -1;
	rg->cpu = cpu;
	rg->tid = cpu < 0 ? (uint32_t)pid : 0;
	int fd = k->open(k->ctx, &st->pc->attr, (int)pid, cpu);
	if (fd < 0) {
		if (cpu >= 0 && (errno == ENODEV || errno == ENXIO))
			return 1;
		char what[96];
		snprintf(what, sizeof(what), "perf_event_open(%s, cpu %d)", st->pc->backend, cpu);
		return errno_line(what, errno);
	}
	rg->fd = fd;
	rg->len = (size_t)(1 + DATA_PAGES) * (size_t)st->page;
	rg->base = k->mmap(k->ctx, rg->fd, rg->len, PROT_READ | PROT_WRITE, 0);
	if (rg->base == MAP_FAILED) {
		rg->base = NULL;
		return errno_line("mmap of the perf ring", errno);
	}
	if (!(rg->r = malloc(sizeof(*rg->r))))
		return -BTR_ERR_NOMEM;
	if (btr_perf_ring_init_mmap(rg->r, rg->base, rg->len, (uint64_t)st->page) < 0) {
		btr_err("perf ring of cpu %d: unexpected layout", cpu);
		return -BTR_ERR_INTERNAL;
	}
	if (st->pc->aux_type) {
		/* aux_offset/aux_size are set in the page before the AUX mmap
		 * (perf_event.h: "should be set by the userspace") */
		uint8_t *pg = rg->base;
		uint64_t off = rg->len, size = st->pc->aux_size;
		memcpy(pg + BTR_PERF_PAGE_AUX_OFFSET, &off, 8);
		memcpy(pg + BTR_PERF_PAGE_AUX_SIZE, &size, 8);
		/* read-only = overwrite mode (snapshot) */
		int prot = st->pc->snapshot ? PROT_READ : PROT_READ | PROT_WRITE;
		rg->aux = k->mmap(k->ctx, rg->fd, size, prot, off);
		if (rg->aux == MAP_FAILED) {
			rg->aux = NULL;
			return errno_line("mmap of the AUX area", errno);
		}
		rg->aux_len = size;
		btr_perf_ring_set_aux(rg->r, rg->aux, size, st->pc->snapshot);
	}
	if (st->pc->filter[0] &&
	    k->ioctl(k->ctx, rg->fd, PERF_EVENT_IOC_SET_FILTER, (unsigned long)st->pc->filter) < 0)
		return errno_line("PERF_EVENT_IOC_SET_FILTER (the IP filter)", errno);
	return 0;
}

static int open_all(struct rec_state *st, pid_t pid)
{
	const struct btr_perf_ops *k = btr_perf_ops_get();
	long ncpu = k->ncpus(k->ctx);
	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > MAX_RINGS)
		ncpu = MAX_RINGS;
	unsigned want = st->opts->per_thread ? 1 : (unsigned)ncpu;
	st->rings = calloc(want, sizeof(*st->rings));
	if (!st->rings)
		return -BTR_ERR_NOMEM;
	for (unsigned i = 0; i < want; i++) {
		int cpu = st->opts->per_thread ? -1 : (int)i;
		int rc = open_ring(st, pid, cpu, &st->rings[st->n_rings]);
		if (rc == 0 || rc < 0)
			st->n_rings++;   /* keep it so close_rings frees what was made */
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Module records for the mappings a running process already has
 * (/proc/PID/maps): perf synthesizes MMAP2 records the same way. */
static void synth_maps(struct rec_state *st, pid_t pid)
{
	char line[4096 + 128];
	FILE *f = btr_procmaps_open(pid);
	if (!f)
		return;
	struct btr_procmap m;
	while (btr_procmaps_next(f, line, sizeof(line), &m)) {
		if (m.perm[2] != 'x')
			continue;
		struct btr_record rec = { .type = BTR_REC_MODULE_LOAD };
		rec.u.module.pid = (uint32_t)pid;
		rec.u.module.prot = 5;
		rec.u.module.start = m.start;
		rec.u.module.size = m.end - m.start;
		rec.u.module.pgoff = m.off;
		rec.u.module.path = m.file;
		st->res->modules++;
		write_rec(st, &rec);
	}
	fclose(f);
}

static void machine_record(struct rec_state *st, struct timespec *now)
{
	struct btr_record rec = { .type = BTR_REC_MACHINE };
	struct btr_rec_machine *m = &rec.u.machine;
	snprintf(m->backend, sizeof(m->backend), "%s", st->pc->backend);
	unsigned a, b, c, d;
	if (__get_cpuid(0, &a, &b, &c, &d)) {
		memcpy(m->cpu_vendor, &b, 4);
		memcpy(m->cpu_vendor + 4, &d, 4);
		memcpy(m->cpu_vendor + 8, &c, 4);
	}
	if (__get_cpuid(1, &a, &b, &c, &d)) {
		unsigned fam, model, stepping;
		btr_cpuid_signature_decode(a, &fam, &model, &stepping);
		m->cpu_family = (uint16_t)fam;
		m->cpu_model = (uint16_t)model;
		m->cpu_stepping = (uint16_t)stepping;
	}
	if (__get_cpuid(0x15, &a, &b, &c, &d)) {
		m->cpuid15_eax = a;
		m->cpuid15_ebx = b;
	}
	m->flags = st->pc->machine_flags;
	m->lbr_depth = st->pc->lbr_depth;
	m->mtc_freq = st->pc->mtc_freq;
	m->cyc_thresh = st->pc->cyc_thresh;
	m->nom_freq = st->pc->nom_freq;
	m->start_time_ns = (uint64_t)now->tv_sec * 1000000000ull + (uint64_t)now->tv_nsec;
	/* TSC frequency from the first ring's time conversion
	 * (perf_event_mmap_page: time_shift @50, time_mult @52, both valid
	 * with cap_user_time, capabilities bit 3) */
	if (st->n_rings && st->rings[0].base) {
		const uint8_t *pg = st->rings[0].base;
		uint64_t caps;
		uint16_t shift;
		uint32_t mult;
		memcpy(&caps, pg + 40, 8);
		memcpy(&shift, pg + 50, 2);
		memcpy(&mult, pg + 52, 4);
		if ((caps & (1ull << 3)) && mult && shift < 64)
			m->tsc_hz = (uint64_t)(((unsigned __int128)1000000000u << shift) / mult);
	}
	write_rec(st, &rec);
}

static void process_record(struct rec_state *st, pid_t pid, char *const *argv)
{
	struct btr_record rec = { .type = BTR_REC_PROCESS };
	struct btr_rec_process *p = &rec.u.process;
	char args[4096];
	size_t len = 0;
	p->pid = (uint32_t)pid;
	p->ppid = (uint32_t)getpid();
	p->event = BTR_PROC_START;
	p->path = argv && argv[0] ? argv[0] : "";
	for (size_t i = 0; argv && argv[i]; i++) {
		size_t k = strlen(argv[i]) + 1;
		if (len + k > sizeof(args))
			break;
		memcpy(args + len, argv[i], k);
		len += k;
	}
	p->args = args;
	p->args_len = (uint32_t)len;
	p->detail = "";
	write_rec(st, &rec);
}

int btr_perf_capture_run(const struct btr_capture_opts *opts, struct btr_perf_capture *pc,
			 struct btr_capture_result *res)
{
	if (!opts || !pc || !res || !opts->output ||
	    (!opts->attach_pid && !opts->system_wide && (!opts->argv || !opts->argv[0])))
		return -BTR_ERR_INVAL;
	memset(res, 0, sizeof(*res));
	const struct btr_perf_ops *k = btr_perf_ops_get();
	struct rec_state st = { .opts = opts, .pc = pc, .res = res, .page = sysconf(_SC_PAGESIZE) };
	int rc;

	if (opts->attach_pid) {
		/* attached: enabled at once, no exec to wait for */
		pc->attr.flags &= ~(uint64_t)(BTR_PA_DISABLED | BTR_PA_ENABLE_ON_EXEC);
	}
	if (!opts->per_thread)
		pc->attr.flags |= BTR_PA_INHERIT;
	if (opts->system_wide)
		pc->attr.flags &= ~(uint64_t)BTR_PA_ENABLE_ON_EXEC;
	if ((rc = btr_perf_conv_new(&pc->attr, BTR_PERF_ATTR_SIZE, &st.conv)) < 0)
		return rc;
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .compress = opts->compress };
	if ((rc = btr_capture_writer_new(opts, &wo, &st.w)) < 0) {
		btr_perf_reader_free(st.conv);
		return rc;
	}

	struct sigaction sa, old_int, old_term, old_usr2;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	stop_flag = snapshot_flag = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sa.sa_handler = on_snapshot;
	sigaction(SIGUSR2, &sa, &old_usr2);

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	pid_t child = 0;
	int go[2] = { -1, -1 }, ex[2] = { -1, -1 };
	if (!opts->attach_pid && opts->argv && opts->argv[0]) {
		/* The child waits on @go until the events are open, then
		 * execs; @ex (close-on-exec) reports a failed exec. */
		if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0) {
			rc = btr_err_from_errno(errno);
			goto out;
		}
		/* The signals stay blocked across fork until the child has
		 * its own dispositions back: a Ctrl-C in between would
		 * otherwise run on_stop in the child and be lost there. */
		sigset_t stop_set, old_mask;
		sigemptyset(&stop_set);
		sigaddset(&stop_set, SIGINT);
		sigaddset(&stop_set, SIGTERM);
		sigaddset(&stop_set, SIGUSR2);
		sigprocmask(SIG_BLOCK, &stop_set, &old_mask);
		child = fork();
		if (child != 0)
			sigprocmask(SIG_SETMASK, &old_mask, NULL);
		if (child < 0) {
			rc = btr_err_from_errno(errno);
			goto out;
		}
		if (child == 0) {
			char c;
			sigaction(SIGINT, &old_int, NULL);
			sigaction(SIGTERM, &old_term, NULL);
			sigaction(SIGUSR2, &old_usr2, NULL);
			sigprocmask(SIG_SETMASK, &old_mask, NULL);
			close(go[1]);
			close(ex[0]);
			if (read(go[0], &c, 1) != 1)
				_exit(127);
			execvp(opts->argv[0], opts->argv);
			int e = errno;
			if (write(ex[1], &e, sizeof(e)) < 0)
				_exit(127);
			_exit(127);
		}
		close(go[0]);
		go[0] = -1;
		close(ex[1]);
		ex[1] = -1;
	}
	pid_t target = opts->system_wide ? -1 : opts->attach_pid ? (pid_t)opts->attach_pid : child;
	if ((rc = open_all(&st, target)) < 0)
		goto out;
	/* Sideband times in TSC units, like the PT packets: the page's
	 * conversion (time_shift @50, time_mult @52, time_zero @64, valid
	 * with cap_user_time_zero = capabilities bit 4) */
	if (st.n_rings && st.rings[0].base) {
		const uint8_t *pg = st.rings[0].base;
		uint64_t caps, zero;
		uint16_t shift;
		uint32_t mult;
		memcpy(&caps, pg + 40, 8);
		memcpy(&shift, pg + 50, 2);
		memcpy(&mult, pg + 52, 4);
		memcpy(&zero, pg + 64, 8);
		if (caps & (1ull << 4))
			btr_perf_conv_set_time(st.conv, shift, mult, zero);
	}
	machine_record(&st, &now);
	if (opts->attach_pid) {
		process_record(&st, (pid_t)opts->attach_pid, NULL);
		synth_maps(&st, (pid_t)opts->attach_pid);
	} else if (child) {
		process_record(&st, child, opts->argv);
	}
	if (opts->system_wide) {
		for (unsigned i = 0; i < st.n_rings; i++)
			k->ioctl(k->ctx, st.rings[i].fd, PERF_EVENT_IOC_ENABLE, 0);
		DIR *d = opendir("/proc");
		struct dirent *e;
		while (d && (e = readdir(d)))
			if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
				synth_maps(&st, (pid_t)atoi(e->d_name));
		if (d)
			closedir(d);
	}
	if (child) {
		char c = 1;
		if (write(go[1], &c, 1) != 1) {
			rc = btr_err_from_errno(errno);
			goto out;
		}
		close(go[1]);
		go[1] = -1;
		int e = 0;
		ssize_t got;
		do
			got = read(ex[0], &e, sizeof(e));
		while (got < 0 && errno == EINTR);
		if (got > 0) {
			btr_err("%s: cannot execute: %s", opts->argv[0], strerror(e));
			rc = -BTR_ERR_CHILD;
			goto out;
		}
	}

	struct pollfd *pfd = calloc(st.n_rings ? st.n_rings : 1, sizeof(*pfd));
	if (!pfd) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	for (unsigned i = 0; i < st.n_rings; i++)
		pfd[i] = (struct pollfd){ .fd = st.rings[i].fd, .events = POLLIN };
	int status = 0, done = 0;
	while (!done && !st.err) {
		k->poll(k->ctx, pfd, st.n_rings, 100);
		for (unsigned i = 0; i < st.n_rings; i++)
			drain_ring(&st, &st.rings[i]);
		for (unsigned i = 0; i < st.n_rings; i++)
			drain_aux_marks(&st, &st.rings[i]);
		if (snapshot_flag && pc->snapshot) {
			snapshot_flag = 0;
			for (unsigned i = 0; i < st.n_rings; i++)
				snapshot_aux(&st, &st.rings[i], 0);
			btr_trace_flush(st.w);
		}
		if (child) {
			pid_t w = waitpid(child, &status, WNOHANG);
			if (w == child)
				done = 1;
		} else if (opts->attach_pid && kill((pid_t)opts->attach_pid, 0) < 0 && errno == ESRCH) {
			done = 1;   /* the attached process is gone */
		}
		/* -a without a command: until SIGINT / SIGTERM */
		if (stop_flag) {
			res->interrupted = 1;
			if (!child)
				done = 1;
		}
	}
	free(pfd);
	/* the last records and data */
	for (unsigned i = 0; i < st.n_rings; i++) {
		k->ioctl(k->ctx, st.rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
		drain_ring(&st, &st.rings[i]);
	}
	for (unsigned i = 0; i < st.n_rings; i++) {
		drain_aux_marks(&st, &st.rings[i]);
		/* bytes no AUX record told of (the kernel publishes aux_head
		 * with one, so there should be none) */
		if (!pc->snapshot && st.rings[i].aux)
			drain_aux(&st, &st.rings[i], UINT64_MAX);
		if (pc->snapshot)
			snapshot_aux(&st, &st.rings[i], 1);
		if (st.rings[i].r) {
			st.lost_events += st.rings[i].r->lost_events;
			st.lost_samples += st.rings[i].r->lost_samples;
		}
	}
	if (child) {
		res->exited = WIFEXITED(status);
		res->code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
		res->signo = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
		struct btr_record rec = { .type = BTR_REC_PROCESS_EXIT };
		rec.u.exit.pid = rec.u.exit.tid = (uint32_t)child;
		rec.u.exit.code = res->code;
		rec.u.exit.signo = res->signo;
		write_rec(&st, &rec);
		child = 0;
	} else {
		res->exited = 1;
	}
	/* PERF_RECORD_LOST counts every record the ring had no room
	 * for: samples (LBR) as well as sideband */
	if (st.lost_events || st.lost_samples || st.aux_lost || st.aux_truncated || st.aux_collisions)
		btr_warn("%s: the kernel lost %llu record(s) (samples or sideband) and %llu sample(s), %llu AUX "
			 "byte(s) (%llu truncated, %llu collided AUX records); the trace has gaps there",
			 opts->output, (unsigned long long)st.lost_events, (unsigned long long)st.lost_samples,
			 (unsigned long long)st.aux_lost,
			 (unsigned long long)st.aux_truncated, (unsigned long long)st.aux_collisions);
	rc = st.err;
out:
	if (child > 0) {
		kill(child, SIGKILL);
		while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (ex[i] >= 0)
			close(ex[i]);
	}
	close_rings(&st);
	btr_perf_reader_free(st.conv);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGUSR2, &old_usr2, NULL);
	if (rc < 0 && st.err)
		return btr_capture_output_failed(st.w, opts->output, rc);
	if (rc < 0) {
		btr_trace_writer_abort(st.w);
		return rc;
	}
	rc = btr_trace_writer_close(st.w);
	if (rc < 0)
		btr_err("%s: cannot write: %s", opts->output, btr_errstr(rc));
	return rc;
}
