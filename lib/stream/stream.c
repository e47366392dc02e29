/* stream.c - the common branch stream: trace records -> branches + events.
 *
 * One struct btr_stream turns the records of a trace (any backend) into
 * struct btr_branch and struct btr_stream_event callbacks.  State kept:
 * the code image of each process, one PT flow decoder per (tid, cpu) data
 * stream, a BTS carry buffer per stream, per-thread filter accounting and
 * the list of modules placed into the images - all bounded by processes,
 * threads and modules, never by the length of the trace.
 *
 * Processes: every process has its own image, so two processes with code
 * at the same addresses (a fork's child after exec, two programs loaded
 * at QEMU's fixed base) never mix.  The trace's first process (and
 * records without a pid) use the stream's first image, btr_stream_image();
 * a PROCESS start record with a parent gives the child a copy of the
 * parent's modules (what fork does), an EXEC empties the process's image.
 */
#include "btr/stream.h"
#include "internal.h"
#include "image/jitsyms.h"
#include "stream_code.h"
#include "stream_elf.h"
#include "stream_loss.h"
#include "stream_switch.h"
#include "stream_threads.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/bts.h"
#include "btr/lbr.h"
#include "stream_par.h"
#include "stream_priv.h"
#include "stream_modules.h"

/* Live PT flow decoders at most.  Each owns a block cache of several MiB,
 * so a trace with hundreds of threads (or a hostile one with thousands of
 * tids) must not get one decoder each at the same time. */
#define MAX_LIVE_FLOWS 16
#define PROT_EXEC_BIT 4 /* PROT_EXEC; the record uses the POSIX values */

/* ---- helpers ---- */

static int stop_value(int rc)
{
	return rc > 0 ? rc : 1;
}

/* A consumer's return @rc: nonzero stops the stream (stop_value). */
static int stop_on(struct btr_stream *s, int rc)
{
	return rc ? (s->stopped = stop_value(rc)) : 0;
}

static int emit(struct btr_stream *s, struct btr_stream_event *ev)
{
	if (!ev->pid && ev->tid)
		ev->pid = btr_stream_pid_of(s, ev->tid);
	ev->image = btr_stream_image_pid(s, ev->pid);
	if (!s->o.event)
		return 0;
	if ((s->o.pid && ev->pid && ev->pid != s->o.pid) || (s->o.tid && ev->tid && ev->tid != s->o.tid &&
							      ev->type != BTR_SEV_MODULE_LOAD &&
							      ev->type != BTR_SEV_MODULE_UNLOAD &&
							      ev->type != BTR_SEV_EXEC))
		return 0;
	int rc = s->o.event(s->o.ctx, ev);
	if (rc) {
		s->stopped = stop_value(rc);
		return s->stopped;
	}
	return 0;
}

static int emit_gap(struct btr_stream *s, uint32_t tid, int reason, uint64_t offset)
{
	struct btr_stream_event ev = { .type = BTR_SEV_GAP, .tid = tid, .reason = reason, .offset = offset };
	s->st.gaps++;
	return emit(s, &ev);
}

/* Hands one branch to the consumer's callback. */
static inline int give(struct btr_stream *s, const struct btr_branch *b)
{
	if (s->o.branches)
		return s->o.branches(s->o.ctx, b, 1);
	return s->o.branch ? s->o.branch(s->o.ctx, b) : 0;
}

/* Applies the filter and delivers @b.  Dropped branches pass their
 * instruction count on to the next delivered branch of the thread, so
 * that a filtered report still counts every executed instruction. */
static int deliver(struct btr_stream *s, const struct btr_branch *b)
{
	struct btr_branch pb;
	if (!b->pid && b->tid) {
		/* Decoders know threads only; the stream knows their process. */
		uint32_t pid = btr_stream_pid_of(s, b->tid);
		if (pid) {
			pb = *b;
			pb.pid = pid;
			b = &pb;
		}
	}
	if ((s->o.pid && b->pid != s->o.pid) || (s->o.tid && b->tid != s->o.tid))
		return 0;
	if (s->o.filter) {
		struct stream_thread *t = stream_threads_get(&s->thr, b->tid);
		if (!t) {
			s->error = -BTR_ERR_NOMEM;
			s->stopped = 1;
			return -BTR_ERR_NOMEM;
		}
		if (!btr_filter_match(s->o.filter, b)) {
			if (b->flags & BTR_BF_INSNS)
				t->pending_insns += b->insns;
			s->st.filtered++;
			return 0;
		}
		if (t->pending_insns) {
			struct btr_branch c = *b;
			c.insns = ((b->flags & BTR_BF_INSNS) ? b->insns : 0) + t->pending_insns;
			c.flags |= BTR_BF_INSNS;
			t->pending_insns = 0;
			s->st.branches++;
			return stop_on(s, give(s, &c));
		}
	}
	s->st.branches++;
	return stop_on(s, give(s, b));
}

/* Delivers the MODULE_UNLOAD event of dead module @i and removes it from
 * its process's image (the event comes first: consumers symbolize what
 * they hold with the module still there). */
static int retire_module(struct btr_stream *s, size_t i)
{
	struct loaded_module *m = &s->mods[i];
	struct btr_record rec = { .type = BTR_REC_MODULE_UNLOAD };
	rec.u.module = m->unload;
	if (!m->dead) {   /* replaced without an unload record (perf MMAP) */
		rec.u.module.pid = m->pid;
		rec.u.module.start = m->start;
		rec.u.module.size = m->size;
	}
	rec.u.module.path = m->file;
	struct btr_stream_event ev = { .type = BTR_SEV_MODULE_UNLOAD, .rec = &rec, .tid = m->pid, .pid = m->pid };
	int rc = emit(s, &ev);
	btr_image_remove(stream_img_of(s, m->pid, 0), m->start, m->size);
	stream_mod_drop(s, i);
	return rc;
}

/* Before process @pid maps [@start, @start+@size): the modules there
 * leave its image for good - dead ones, and live ones too (recorders
 * without unload records, perf: a new mapping replaces what was there).
 * A module of the same @file at the same @bias is mapped again instead
 * (dlopen after dlclose, another segment of it): it stays, alive, and
 * *@revived is set. */
static int retire_overlapping(struct btr_stream *s, uint32_t pid, uint64_t start, uint64_t size, const char *file,
			      uint64_t bias, int *revived)
{
	for (size_t i = 0; i < s->n_mods;) {
		struct loaded_module *m = &s->mods[i];
		if (!m->size || m->pid != pid || m->start >= start + size || start >= m->start + m->size) {
			i++;
			continue;
		}
		if (file && m->bias == bias && !strcmp(m->file, file)) {
			m->dead = 0;
			*revived = 1;
			i++;
			continue;
		}
		int rc = retire_module(s, i);
		if (rc)
			return rc;
	}
	return 0;
}

/* Delivers the MODULE_UNLOAD events of process @pid's dead modules (all
 * processes' for @pid 0) and removes them. */
static int retire_all(struct btr_stream *s, uint32_t pid, int every_pid)
{
	for (size_t i = 0; i < s->n_mods;) {
		if (s->mods[i].dead && (every_pid || s->mods[i].pid == pid)) {
			int rc = retire_module(s, i);
			if (rc)
				return rc;
			continue;
		}
		i++;
	}
	return 0;
}

/* Places the file of module record @m into the image.  Returns 1 and
 * stores the file in @file if one was loaded (or already was), 0 if not
 * (no file, not code), negative on allocation failure. */
static int load_module(struct btr_stream *s, const struct btr_rec_module *m, char *file, size_t filesz)
{
	const char *path = m->path;
	if (!path || !path[0] || path[0] == '[' || !strncmp(path, "//anon", 6) || jit_dump_path(path) ||
	    btr__path_is_device(path))
		return 0;   /* [vdso], [kernel.kallsyms], anonymous, a jitdump marker, a device: no code file */
	if (m->prot && !(m->prot & PROT_EXEC_BIT))
		return 0;   /* a data mapping; code comes with the PROT_EXEC one */
	size_t len = strlen(path);
	if (len > 3 && !strcmp(path + len - 3, ".ko"))
		return 0;   /* kernel modules are relocatable objects, not images */

	const struct stream_placed *pl =
		stream_place(&s->placed, s->uelfs, s->n_uelfs, s->o.root, s->o.debug_dirs, m);
	if (!pl)
		return -BTR_ERR_NOMEM;
	if (!pl->found) {
		s->st.modules_missing++;
		btr_info("module %s: no usable file here; its code cannot be decoded or named", path);
		return 0;
	}
	snprintf(file, filesz, "%s", pl->file);
	int mismatch = pl->mismatch;
	uint64_t bias = pl->fixed ? 0 : m->start - pl->k;
	int rc = pl->bias_err;
	if (rc < 0) {
		s->st.modules_missing++;
		btr_warn("%s: cannot place it at 0x%" PRIx64 " (file offset 0x%" PRIx64 "): %s", file,
			 m->start, m->pgoff, btr_errstr(rc));
		return 0;
	}
	struct btr_image *img = stream_img_of(s, m->pid, 1);
	if (!img)
		return -BTR_ERR_NOMEM;
	int revived = 0;
	rc = retire_overlapping(s, m->pid, m->start, m->size ? m->size : 1, file, bias, &revived);
	if (rc)
		return rc < 0 ? rc : 0;   /* stopped: btr_stream_record sees it */
	struct btr_image_module here;
	if ((revived || stream_mod_is_loaded(s, file, bias, m->pid)) && m->size &&
	    (btr_image_module_at(img, m->start, &here) != 0 || strcmp(here.path, file))) {
		/* The file again where its ELF headers do not place it (node's
		 * copy of its embedded builtins): its bytes there, raw. */
		if ((rc = btr_image_add_file(img, file, m->pgoff, m->size, m->start)) == -BTR_ERR_NOMEM)
			return rc;
		return rc < 0 ? 1 : stream_mod_add(s, file, bias, m->start, m->size, m->pid) < 0 ? -BTR_ERR_NOMEM : 1;
	}
	if (revived || stream_mod_is_loaded(s, file, bias, m->pid))
		return 1;   /* another mapping of the same file: said once */
	if (mismatch) {
		char want[41], have[41] = "none";
		uint8_t id[20];
		int n = btr_elf_build_id(file, id, sizeof(id));
		stream_hex_id(m->build_id, m->build_id_len > 20 ? 20 : m->build_id_len, want);
		if (n > 0)
			stream_hex_id(id, n, have);
		s->st.buildid_mismatch++;
		btr_warn("%s: build-id %s differs from the recorded %s (%s): its code is not what ran",
			 file, have, want, path);
	}
	rc = btr_image_add_elf(img, file, bias, 0);
	if (rc < 0) {
		if (rc == -BTR_ERR_NOMEM)
			return rc;
		s->st.modules_missing++;
		btr_warn("%s: %s", file, btr_errstr(rc));
		return 0;
	}
	rc = stream_mod_add(s, file, bias, m->start, m->size, m->pid);
	if (rc < 0)
		return rc;
	s->st.modules_loaded++;
	btr_debug("module %s -> %s at bias 0x%" PRIx64, path, file, bias);
	return 1;
}

/* ---- data streams ---- */

static struct data_stream *ds_get(struct btr_stream *s, uint32_t tid, int32_t cpu, int kind)
{
	for (size_t i = 0; i < s->n_ds; i++) {
		struct data_stream *d = s->ds[i];
		if (d->tid == tid && d->cpu == cpu && d->kind == kind)
			return d;
	}
	if (s->n_ds == s->cap_ds) {
		size_t ncap = s->cap_ds ? s->cap_ds * 2 : 8;
		struct data_stream **n = realloc(s->ds, ncap * sizeof(*n));
		if (!n)
			return NULL;
		s->ds = n;
		s->cap_ds = ncap;
	}
	struct data_stream *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->tid = tid;
	d->cpu = cpu;
	d->kind = kind;
	d->s = s;
	s->ds[s->n_ds++] = d;
	return d;
}

/* Per-CPU PT: the thread of a branch at @tsc.  The image stays the one
 * chosen at the last ENABLE or PAGING event (the decoder has walked with
 * it); within that process the branch's time picks the thread, as
 * threads of one process switch without a PIP. */
static void percpu_thread(struct data_stream *d, uint64_t tsc)
{
	uint32_t pid, tid;
	if (!tsc || (tsc >= d->run_from && tsc < d->run_until))
		return;
	if (!stream_sw_runner(&d->s->sw, d->cpu, tsc, &pid, &tid, &d->run_from, &d->run_until))
		return;
	if (pid == d->img_pid)
		d->cur_tid = tid;
}

static int flow_branch(void *ctx, const struct btr_branch *b)
{
	struct data_stream *d = ctx;
	if (d->warm)
		return 0;
	if (d->percpu) {
		percpu_thread(d, b->tsc);
		struct btr_branch c = *b;
		c.tid = d->cur_tid;
		c.pid = d->cur_pid;
		return deliver(d->s, &c) != 0;
	}
	if (b->tid == d->tid)
		return deliver(d->s, b) != 0;
	struct btr_branch c = *b;
	c.tid = d->tid;
	return deliver(d->s, &c) != 0;
}

/* The batched form: one call per up to BTR_PTFLOW_BATCH branches instead of
 * one per branch, which is most of the per-branch cost of a PT stream. */
static int flow_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct data_stream *d = ctx;
	struct btr_stream *s = d->s;
	if (d->warm)
		return 0;
	if (!s->o.filter && !s->o.pid && !s->o.tid && !d->percpu && (s->o.branch || s->o.branches)) {
		/* The common case, without a filter or a selection: the
		 * batch's branches are all of one thread, so its process is
		 * looked up once, and they go straight to the consumer, as
		 * the decoder's batch if the consumer takes batches
		 * (deliver()'s tests per branch were a third of a PT
		 * decode's time). */
		struct btr_branch c;
		uint32_t pid = btr_stream_pid_of(s, d->tid);
		if (s->o.branches && pid == d->flow_pid) {
			/* the decoder wrote .tid = d->tid and .pid = flow_pid */
			s->st.branches += n;
			return stop_on(s, s->o.branches(s->o.ctx, b, n)) != 0;
		}
		for (size_t i = 0; i < n; i++) {
			const struct btr_branch *x = &b[i];
			if (btr_unlikely(x->tid != d->tid || x->pid != pid)) {
				c = *x;
				c.tid = d->tid;
				c.pid = pid;
				x = &c;
			}
			int rc = give(s, x);
			if (rc) {
				s->st.branches += i + 1;
				s->stopped = stop_value(rc);
				return 1;
			}
		}
		s->st.branches += n;
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (flow_branch(ctx, &b[i]))
			return 1;
	return 0;
}

/* The counted form (btr_stream_opts.counts; only in the common case of
 * flow_branches: no filter, no selection, a per-thread stream). */
static int flow_counts(void *ctx, const struct btr_branch_count *c, size_t n)
{
	struct data_stream *d = ctx;
	struct btr_stream *s = d->s;
	if (d->warm)
		return 0;
	uint32_t pid = btr_stream_pid_of(s, d->tid);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += c[i].count;
	s->st.branches += total;
	if (btr_unlikely(pid != d->flow_pid)) {
		/* the decoder wrote .pid = flow_pid: give the process the
		 * stream knows now */
		struct btr_branch_count tmp[64];
		for (size_t i = 0; i < n;) {
			size_t k = n - i < 64 ? n - i : 64;
			for (size_t j = 0; j < k; j++) {
				tmp[j] = c[i + j];
				tmp[j].b.tid = d->tid;
				tmp[j].b.pid = pid;
			}
			int rc = s->o.counts(s->o.ctx, tmp, k);
			if (rc) {
				s->stopped = stop_value(rc);
				return 1;
			}
			i += k;
		}
		return 0;
	}
	return stop_on(s, s->o.counts(s->o.ctx, c, n)) != 0;
}

/* btr_stream_opts.fold_ok for the thread of a per-thread stream (the
 * same common case as flow_counts). */
static int flow_fold_ok(void *ctx)
{
	struct data_stream *d = ctx;
	return d->s->o.fold_ok(d->s->o.ctx, d->tid);
}

/* btr_stream_opts.fold_block for the process of a per-thread stream (the
 * .pid its branches are delivered with, flow_branches). */
static int flow_fold_block(void *ctx, uint64_t start, uint64_t from, uint64_t to)
{
	struct data_stream *d = ctx;
	return d->s->o.fold_block(d->s->o.ctx, btr_stream_pid_of(d->s, d->tid), start, from, to);
}

static int flow_insn(void *ctx, uint64_t ip, const struct btr_insn *insn)
{
	struct data_stream *d = ctx;
	struct btr_stream *s = d->s;
	if (d->warm)
		return 0;
	uint32_t tid = d->percpu ? d->cur_tid : d->tid;
	uint32_t pid = d->percpu ? d->cur_pid : btr_stream_pid_of(s, d->tid);
	if ((s->o.tid && tid != s->o.tid) || (s->o.pid && pid != s->o.pid))
		return 0;
	return stop_on(s, s->o.insn(s->o.ctx, tid, ip, insn)) != 0;
}

/* Per-CPU PT: at an ENABLE (user code resumes: with user-only tracing,
 * after every switch) and at a PAGING event (the MOV CR3 of a switch,
 * when the kernel is traced) the thread running decides the image the
 * decoder reads next. */
static void percpu_switch(struct data_stream *d, const struct btr_flow_event *fev)
{
	struct btr_stream *s = d->s;
	uint32_t pid, tid;
	if (!fev->tsc || !stream_sw_runner(&s->sw, d->cpu, fev->tsc, &pid, &tid, &d->run_from, &d->run_until)) {
		if (!d->percpu_warned) {
			d->percpu_warned = 1;
			btr_warn("PT of cpu %d: %s, so every process on it is decoded with the first process's image",
				 d->cpu, fev->tsc ? "no context-switch records name its threads"
						  : "no timestamps place its context switches");
		}
		return;
	}
	d->cur_tid = tid;
	d->cur_pid = pid;
	if (pid != d->img_pid && d->flow) {
		struct btr_image *img = stream_img_of(s, pid, 0);
		if (img && img != stream_img_of(s, d->img_pid, 0))
			btr_ptflow_set_image(d->flow, img);
		d->img_pid = pid;
	}
}

/* A flow event with its bookkeeping (gaps; the qemu recorder's OVF where it
 * cannot tell the flow, count_lost: data lost), then to the consumer. */
static int flow_emit(struct btr_stream *s, struct btr_stream_event *ev)
{
	const struct btr_flow_event *fev = ev->flow;
	if (fev->type == BTR_FLOW_GAP || fev->type == BTR_FLOW_OVERFLOW)
		s->st.gaps++;
	if (fev->type == BTR_FLOW_OVERFLOW && !strcmp(s->backend, "qemu")) {
		if (stream_loss_flow(&s->loss, ev->tid, fev->ip, fev->offset) < 0)
			return -BTR_ERR_NOMEM;
		s->data_lost = 1;
	}
	return emit(s, ev);
}

static int flow_event(void *ctx, const struct btr_flow_event *fev)
{
	struct data_stream *d = ctx;
	if (d->percpu && (fev->type == BTR_FLOW_ENABLE || fev->type == BTR_FLOW_PAGING))
		percpu_switch(d, fev);
	if (d->warm)
		return 0;
	struct btr_stream_event ev = { .type = BTR_SEV_FLOW, .tid = d->percpu ? d->cur_tid : d->tid,
				       .pid = d->percpu ? d->cur_pid : 0, .flow = fev,
				       .reason = fev->reason, .offset = fev->offset };
	return flow_emit(d->s, &ev) != 0;
}

static void pt_drop_decoder(struct btr_stream *s, struct data_stream *d)
{
	if (!d->flow)
		return;
	struct btr_ptflow_stats fs;
	btr_ptflow_stats(d->flow, &fs);
	s->st.pt_blocks += fs.blocks_decoded;
	btr__ptflow_free_keep(d->flow, &s->spare);
	d->flow = NULL;
	s->n_live_flows--;
}

/* A new decoder for @d, whose data continue at stream offset @off: its
 * events' offsets are stream offsets (as the gaps the stream reports),
 * whichever record it starts at, so that a decoder started at any PSB
 * of the stream (stream_par.c) says what the first one says. */
static int pt_new_decoder(struct btr_stream *s, struct data_stream *d, uint64_t off)
{
	struct btr_ptflow_config cfg = s->flowcfg;
	cfg.tid = d->tid;
	pt_drop_decoder(s, d);
	if (s->n_live_flows >= MAX_LIVE_FLOWS) {
		/* Evict the least recently fed decoder; its stream resumes at
		 * its next PSB with a gap (reported when it resumes). */
		struct data_stream *v = NULL;
		for (size_t i = 0; i < s->n_ds; i++)
			if (s->ds[i]->flow && (!v || s->ds[i]->last_use < v->last_use))
				v = s->ds[i];
		if (v) {
			pt_drop_decoder(s, v);
			v->evicted = 1;
		}
	}
	uint32_t pid = d->percpu ? d->img_pid : btr_stream_pid_of(s, d->tid);
	cfg.pid = d->percpu ? 0 : pid;   /* the branches come with it (flow_branches) */
	d->flow_pid = cfg.pid;
	int rc = btr__ptflow_new_reuse(stream_img_of(s, pid, 0), &cfg, &s->spare, &d->flow);
	if (rc == 0) {
		s->n_live_flows++;
		btr__ptflow_restart(d->flow, off);
	}
	return rc;
}

/* Thread @tid ended: its PT decoders (several MiB each) go at once
 * rather than when evicted, so that a trace of many short threads or
 * processes keeps few.  Should more of its data come after all (a
 * recorder that writes data after the exit record), the stream resumes
 * at the next PSB after a GAP, as after an eviction. */
static void thread_exited(struct btr_stream *s, uint32_t tid)
{
	for (size_t i = 0; i < s->n_ds; i++) {
		struct data_stream *d = s->ds[i];
		if (d->tid == tid && d->cpu < 0 && d->flow) {
			pt_drop_decoder(s, d);
			d->evicted = 1;
		}
	}
}

/* Checks that a data record continues its stream.  A jump means bytes
 * were lost between chunks (a bad chunk was skipped, perf lost AUX data):
 * report a gap and restart the decoder, which then waits for the next PSB
 * instead of misreading the bytes after the hole. */
static int check_continuity(struct btr_stream *s, struct data_stream *d, const struct btr_rec_data *r, int *restart)
{
	*restart = 0;
	if (d->started && r->stream_offset != d->next_off) {
		*restart = 1;
		return emit_gap(s, d->percpu ? d->cur_tid : d->tid, -BTR_ERR_TRUNCATED, d->next_off);
	}
	return 0;
}

void btr__stream_cut(struct btr_stream *s, size_t warm, size_t from, size_t to)
{
	s->cut.on = 1;
	s->cut.warm = warm;
	s->cut.from = from;
	s->cut.to = to;
}

static int on_pt(struct btr_stream *s, const struct btr_rec_data *rec)
{
	struct btr_rec_data part;
	const struct btr_rec_data *r = rec;
	int seam = 0;
	if (s->cut.on) {
		/* the parallel run's part of the record (stream_par.h) */
		s->cut.on = 0;
		if (s->cut.from > s->cut.to || s->cut.to > rec->size || s->cut.warm > s->cut.from)
			return -BTR_ERR_INVAL;
		part = *rec;
		part.data = rec->data + s->cut.from;
		part.size = s->cut.to - s->cut.from;
		part.stream_offset = rec->stream_offset + s->cut.from;
		r = &part;
		seam = s->cut.from > 0;
	}
	struct data_stream *d = ds_get(s, r->tid, r->cpu, BTR_REC_PT);
	if (!d)
		return -BTR_ERR_NOMEM;
	/* perf writes tid -1 for a CPU's AUX area, btr's recorder 0 */
	d->percpu = r->cpu >= 0 && (r->tid == 0 || r->tid == UINT32_MAX);
	if (seam) {
		/* The stream continues here, at a PSB: as the decoder of the
		 * whole stream (another thread's, which decoded the data
		 * before) would, with no gap; the decoder starts at the PSB
		 * before (@warm) and decodes up to this one without output,
		 * which gives it the state the whole stream's has here. */
		d->fresh = 0;
		d->evicted = 0;
		d->started = 1;
		d->next_off = r->stream_offset;
	}
	if (d->fresh) {
		d->fresh = 0;
		if (r->stream_offset == 0 && d->started) {
			/* A new thread with this tid (exec, reuse): a new stream
			 * decoded with its process's image, no gap. */
			d->started = 0;
			d->evicted = 0;
			pt_drop_decoder(s, d);
		}
	}
	if (d->win_pending && r->stream_offset == d->win_off) {
		/* A snapshot window (on_window): a stream of its own from its
		 * PSB on, neither a gap nor a continuation. */
		d->win_pending = 0;
		d->started = 0;
		d->evicted = 0;
		pt_drop_decoder(s, d);
	}
	int restart, rc = check_continuity(s, d, r, &restart);
	if (rc)
		return rc;
	if (d->evicted && !restart) {
		d->evicted = 0;
		rc = emit_gap(s, d->percpu ? d->cur_tid : d->tid, -BTR_ERR_NOSYNC, r->stream_offset);
		if (rc)
			return rc;
	}
	d->evicted = 0;
	if (!d->flow || restart) {
		rc = pt_new_decoder(s, d, r->stream_offset);
		if (rc < 0)
			return rc;
	}
	d->last_use = ++s->tick;
	d->started = 1;
	d->next_off = r->stream_offset + r->size;
	s->st.pt_bytes += r->size;
	struct btr_ptflow_callbacks cb = { .branches = flow_branches, .event = flow_event,
					   .insn = s->o.insn ? flow_insn : NULL, .ctx = d };
	if (s->o.counts && !s->o.filter && !s->o.pid && !s->o.tid && !d->percpu && !s->o.insn)
		cb.counts = flow_counts;
	else if (s->o.fold_ok && s->o.branches && !s->o.filter && !s->o.pid && !s->o.tid && !d->percpu &&
		 !s->o.insn)
	{
		cb.fold_ok = flow_fold_ok;
		if (s->o.fold_block)
			cb.fold_block = flow_fold_block;
	}
	if (seam) {
		btr__ptflow_restart(d->flow, rec->stream_offset + s->cut.warm);
		d->warm = 1;
		rc = btr_ptflow_decode(d->flow, rec->data + s->cut.warm, s->cut.from - s->cut.warm, &cb);
		d->warm = 0;
		if (rc != 0)
			return rc < 0 ? rc : s->stopped ? s->stopped : 1;
	}
	uint64_t folded = btr_ptflow_folded(d->flow);
	rc = btr_ptflow_decode(d->flow, r->data, (size_t)r->size, &cb);
	s->st.branches += btr_ptflow_folded(d->flow) - folded;
	if (rc > 0)
		return s->stopped ? s->stopped : 1;
	if (rc < 0) {
		/* Not a trace gap but a decoder failure: this stream's rest is
		 * lost; report it and restart at the next chunk's PSB. */
		if (rc == -BTR_ERR_NOMEM)
			return rc;   /* (the decoder's counters: the run ends, one message) */
		btr_warn("PT decoding of thread %u failed at stream offset 0x%" PRIx64 ": %s", d->tid,
			 r->stream_offset, btr_errstr(rc));
		pt_drop_decoder(s, d);
		return emit_gap(s, d->percpu ? d->cur_tid : d->tid, rc, r->stream_offset);
	}
	return 0;
}

/* Decoder callback (btr_branch_fn) for BTS and LBR: ctx is the stream. */
static int branch_cb(void *ctx, const struct btr_branch *b)
{
	int rc = deliver(ctx, b);
	return rc < 0 ? rc : rc ? 1 : 0;
}

/* BTS records of software stepping carry their instruction counts in a
 * side stream (BTR_REC_BTS_INSNS, written before the BTS records). */
static int bts_insns_cb(void *ctx, const struct btr_branch *b)
{
	struct data_stream *d = ctx;
	struct btr_branch c = *b;
	uint32_t n;
	if (btr_bts_insns_take(d->ins, d->rec_idx++, &n)) {
		c.insns = n;
		c.flags |= BTR_BF_INSNS;
	}
	return branch_cb(d->s, &c);
}

static int on_bts_insns(struct btr_stream *s, const struct btr_rec_data *r)
{
	struct data_stream *d = ds_get(s, r->tid, r->cpu, BTR_REC_BTS);
	if (!d || (!d->ins && btr_bts_insns_new(&d->ins) < 0))
		return -BTR_ERR_NOMEM;
	return btr_bts_insns_add(d->ins, r->stream_offset, r->data, (size_t)r->size);
}

static int bts_decode_run(struct btr_stream *s, struct data_stream *d, const uint8_t *p, size_t n, uint64_t off)
{
	if (!n)
		return 0;
	if (!d->ins)
		return btr_bts_decode(p, n, stream_img_of(s, btr_stream_pid_of(s, d->tid), 0), d->tid, branch_cb, s);
	d->rec_idx = off / BTS_REC_SIZE;
	return btr_bts_decode(p, n, stream_img_of(s, btr_stream_pid_of(s, d->tid), 0), d->tid, bts_insns_cb, d);
}

static uint64_t le64_at(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Whole BTS records: the branches, and the markers of software stepping
 * with --ip-filter (btr/bts.h) as the flow events PT's TIP.PGD / TIP.PGE
 * give (not gaps). */
static int bts_decode(struct btr_stream *s, struct data_stream *d, const uint8_t *p, size_t n, uint64_t off)
{
	size_t run = 0;
	for (size_t i = 0; i + BTS_REC_SIZE <= n; i += BTS_REC_SIZE) {
		uint64_t fl = le64_at(p + i + 16);
		if (le64_at(p + i) || !(fl & (BTR_BTS_SW_PGD | BTR_BTS_SW_PGE)))
			continue;
		int rc = bts_decode_run(s, d, p + run, i - run, off + run);
		if (rc < 0 || s->stopped)
			return rc < 0 ? rc : 0;
		struct btr_flow_event fev = { .type = (fl & BTR_BTS_SW_PGE) ? BTR_FLOW_ENABLE : BTR_FLOW_DISABLE,
					      .offset = off + i, .ip = le64_at(p + i + 8) };
		struct btr_stream_event ev = { .type = BTR_SEV_FLOW, .tid = d->tid, .flow = &fev, .offset = off + i };
		uint32_t unused;
		if (d->ins)
			btr_bts_insns_take(d->ins, (off + i) / BTS_REC_SIZE, &unused);
		if (flow_emit(s, &ev) || s->stopped)
			return 0;   /* emit() set s->stopped */
		run = i + BTS_REC_SIZE;
	}
	return bts_decode_run(s, d, p + run, n - run, off + run);
}

static int on_bts(struct btr_stream *s, const struct btr_rec_data *r)
{
	struct data_stream *d = ds_get(s, r->tid, r->cpu, BTR_REC_BTS);
	if (!d)
		return -BTR_ERR_NOMEM;
	int restart, rc = check_continuity(s, d, r, &restart);
	if (rc)
		return rc;
	if (restart)
		d->carry_len = 0;   /* half a record before the hole is useless */
	d->started = 1;
	d->next_off = r->stream_offset + r->size;
	s->st.bts_bytes += r->size;
	const uint8_t *p = r->data;
	size_t n = (size_t)r->size;
	/* Records may be split across chunks: complete a carried one first. */
	if (d->carry_len) {
		size_t take = BTS_REC_SIZE - d->carry_len;
		if (take > n)
			take = n;
		memcpy(d->carry + d->carry_len, p, take);
		d->carry_len += take;
		p += take;
		n -= take;
		if (d->carry_len < BTS_REC_SIZE)
			return 0;
		rc = bts_decode(s, d, d->carry, BTS_REC_SIZE, r->stream_offset + take - BTS_REC_SIZE);
		d->carry_len = 0;
		if (s->stopped)
			return s->stopped;
		if (rc < 0)
			return rc == -BTR_ERR_NOMEM ? rc : 0;
	}
	size_t whole = n - n % BTS_REC_SIZE;
	if (whole) {
		rc = bts_decode(s, d, p, whole, r->stream_offset + (uint64_t)(p - r->data));
		if (s->stopped)
			return s->stopped;
		if (rc == -BTR_ERR_NOMEM)
			return rc;
	}
	memcpy(d->carry, p + whole, n - whole);
	d->carry_len = (unsigned)(n - whole);
	return 0;
}

/* A snapshot window of a thread begins (BTR_REC_WINDOW, the qemu
 * recorder's --snapshot): its PT records from the window's offset on are
 * decoded as a new stream (on_pt), and consumers hear of it as a
 * DISCONTINUITY whose .rec is the WINDOW record. */
static int on_window(struct btr_stream *s, const struct btr_record *rec)
{
	const struct btr_rec_window *w = &rec->u.win;
	struct data_stream *d = ds_get(s, w->tid, -1, BTR_REC_PT);
	if (!d)
		return -BTR_ERR_NOMEM;
	d->win_pending = 1;
	d->win_off = w->stream_offset;
	struct btr_stream_event ev = { .type = BTR_SEV_DISCONTINUITY, .tid = w->tid, .pid = w->pid, .rec = rec,
				       .offset = w->stream_offset };
	return emit(s, &ev);
}

static int on_lbr(struct btr_stream *s, const struct btr_rec_lbr *r)
{
	/* Each snapshot is a window into the thread's flow unrelated to the
	 * previous one: tell consumers not to join blocks across it. */
	struct btr_stream_event ev = { .type = BTR_SEV_DISCONTINUITY, .tid = r->tid };
	int rc = emit(s, &ev);
	if (rc)
		return rc;
	s->st.lbr_snapshots++;
	rc = btr_lbr_decode(r, stream_img_of(s, r->pid ? r->pid : btr_stream_pid_of(s, r->tid), 0), branch_cb, s);
	if (s->stopped)
		return s->stopped;
	return rc == -BTR_ERR_NOMEM ? rc : 0;
}

static int on_branches(struct btr_stream *s, const struct btr_rec_branches *r)
{
	for (uint32_t i = 0; i < r->count; i++) {
		const struct btr_branch *b = &r->branches[i];
		int rc;
		/* A kind from a damaged or newer file must not index past the
		 * kind tables (btr_filter_match shifts by it). */
		if ((r->tid && b->tid != r->tid) || b->kind >= BTR_KIND__COUNT) {
			struct btr_branch c = *b;
			if (r->tid)
				c.tid = r->tid;
			if (c.kind >= BTR_KIND__COUNT)
				c.kind = BTR_KIND_NONE;
			rc = deliver(s, &c);
		} else {
			rc = deliver(s, b);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static void on_machine(struct btr_stream *s, const struct btr_rec_machine *m)
{
	memcpy(s->backend, m->backend, sizeof(m->backend));
	s->backend[sizeof(m->backend)] = 0;
	struct btr_ptflow_config *c = &s->flowcfg;
	c->cpu_family = m->cpu_family;
	c->cpu_model = m->cpu_model;
	c->cpu_stepping = m->cpu_stepping;
	c->mtc_freq = m->mtc_freq;
	c->nom_freq = m->nom_freq;
	c->cpuid15_eax = m->cpuid15_eax;
	c->cpuid15_ebx = m->cpuid15_ebx;
	c->no_retcomp = !(m->flags & BTR_MACHINE_PT_RETCOMP);
	c->n_ip_filter = m->addr_filter_cfg > 4 ? 4 : m->addr_filter_cfg;
	memcpy(c->ip_filter, m->addr_filter, sizeof(c->ip_filter));
}

/* EXEC: process @pid's image is replaced.  Remove what it had mapped, so
 * the old program's code cannot be mistaken for the new one's; the image
 * object itself stays (decoders borrow it) and bumps its generation.
 * Other processes' modules (system-wide perf recordings) stay. */
static void drop_modules(struct btr_stream *s, uint32_t pid)
{
	struct btr_image *img = stream_img_of(s, pid, 0);
	stream_code_clear(&s->code, img, pid);
	for (size_t i = 0; i < s->n_mods;) {
		struct loaded_module *m = &s->mods[i];
		if (m->size && m->pid == pid) {
			btr_image_remove(img, m->start, m->size);
			free(m->file);
			*m = s->mods[--s->n_mods];
			continue;
		}
		i++;
	}
}

/* PROCESS start of @pid by @ppid: the child has what the parent had
 * mapped (fork copies the address space).  A pid seen before (reused)
 * starts over. */
static int on_start(struct btr_stream *s, uint32_t pid, uint32_t ppid)
{
	struct btr_image *img = stream_img_of(s, pid, 1);
	if (!img)
		return -BTR_ERR_NOMEM;
	int rc = retire_all(s, pid, 0);
	if (rc)
		return rc;
	drop_modules(s, pid);
	if (!ppid || ppid == pid)
		return 0;
	size_t n = s->n_mods;
	for (size_t i = 0; i < n; i++) {
		struct loaded_module m = s->mods[i];
		if (m.pid != ppid || !m.size || m.dead || stream_mod_is_loaded(s, m.file, m.bias, pid))
			continue;
		if (btr_image_add_elf(img, m.file, m.bias, 0) < 0)
			continue;
		rc = stream_mod_add(s, m.file, m.bias, m.start, m.size, pid);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int on_exec(struct btr_stream *s, const struct btr_record *rec)
{
	uint32_t pid = rec->u.module.pid;
	stream_code_clear(&s->code, stream_img_of(s, pid, 0), pid);
	for (size_t i = 0; i < s->n_mods;) {
		struct loaded_module *m = &s->mods[i];
		if (m->size && m->pid == pid) {
			btr_image_remove(stream_img_of(s, pid, 0), m->start, m->size);
			free(m->file);
			*m = s->mods[--s->n_mods];
			continue;
		}
		i++;
	}
	if (rec->u.module.size && rec->u.module.path && rec->u.module.path[0]) {
		char file[4096];
		int rc = load_module(s, &rec->u.module, file, sizeof(file));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* MODULE_UNLOAD: the module is marked dead and stays in the image until
 * its addresses are mapped again (retire_overlapping), its process execs
 * or starts over, or the stream finishes; its MODULE_UNLOAD event comes
 * then.  An unload naming no module placed in the image (no file here) is
 * delivered at once. */
static int on_unload(struct btr_stream *s, const struct btr_rec_module *m)
{
	for (size_t i = 0; m->size && i < s->n_mods; i++) {
		struct loaded_module *x = &s->mods[i];
		if (x->size && !x->dead && x->start == m->start && x->pid == m->pid) {
			x->dead = 1;
			x->unload = *m;
			x->unload.path = NULL;
			return 0;
		}
	}
	struct btr_record rec = { .type = BTR_REC_MODULE_UNLOAD, .u.module = *m };
	struct btr_stream_event ev = { .type = BTR_SEV_MODULE_UNLOAD, .rec = &rec, .tid = m->pid, .pid = m->pid };
	return emit(s, &ev);
}

/* ---- public API ---- */

int btr_stream_new(const struct btr_stream_opts *opts, struct btr_stream **out)
{
	if (!out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	if (!BTR_OPTS_VALID(opts, BTR_OFFSETOFEND(struct btr_stream_opts, ctx)) || (opts && opts->n_elfs && !opts->elfs))
		return -BTR_ERR_INVAL;
	struct btr_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&s->o, opts);
	if (s->o.shards > 64 || (s->o.shards > 1 && s->o.shard >= s->o.shards)) {
		free(s);
		return -BTR_ERR_INVAL;
	}
	s->flowcfg.sz = sizeof(s->flowcfg);
	int rc = btr_image_new(&s->img);
	if (rc < 0)
		goto fail;
	if (s->o.n_elfs) {
		s->uelfs = calloc(s->o.n_elfs, sizeof(*s->uelfs));
		if (!s->uelfs) {
			rc = -BTR_ERR_NOMEM;
			goto fail;
		}
		s->n_uelfs = s->o.n_elfs;
		for (unsigned i = 0; i < s->n_uelfs; i++) {
			struct user_elf *u = &s->uelfs[i];
			u->path = s->o.elfs[i].path;
			if (!u->path) {
				rc = -BTR_ERR_INVAL;
				goto fail;
			}
			u->base_name = stream_base_name(u->path);
			u->base = s->o.elfs[i].base;
			u->has_base = s->o.elfs[i].has_base;
			int t = stream_elf_is_exec(u->path);
			if (t < 0) {
				btr_info("%s: %s", u->path, btr_errstr(t));
				rc = t;
				goto fail;
			}
			u->is_exec = t;
			u->build_id_len = btr_elf_build_id(u->path, u->build_id, sizeof(u->build_id));
		}
	}
	rc = stream_add_user_elfs(s, s->img, 0);
	if (rc < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	btr_stream_free(s);
	return rc;
}

int btr_stream_open(const char *path, const struct btr_stream_opts *opts, struct btr_stream **out)
{
	if (!path || !out)
		return -BTR_ERR_INVAL;
	*out = NULL;
	struct btr_trace_reader *r;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	rc = btr_stream_new(opts, out);
	if (rc < 0) {
		btr_trace_reader_free(r);
		return rc;
	}
	(*out)->reader = r;
	if (!((*out)->path = strdup(path))) {
		btr_stream_free(*out);
		*out = NULL;
		return -BTR_ERR_NOMEM;
	}
	struct btr_trace_info ti;
	btr_trace_reader_info(r, &ti);
	stream_code_limit(&(*out)->code, ti.size);
	return 0;
}
void btr__stream_input_size(struct btr_stream *s, uint64_t size)
{
	if (s)
		stream_code_limit(&s->code, size);
}

/* opts.skip_unselected: per-thread data of thread @tid (of process @pid, 0:
 * as the thread records say) is outside the selection.  Per-CPU data (tid 0
 * or -1) is never: its threads are known only while it is decoded. */
static int unselected(struct btr_stream *s, uint32_t tid, uint32_t pid)
{
	if (!s->o.skip_unselected || (!s->o.tid && !s->o.pid) || !tid || tid == UINT32_MAX)
		return 0;
	if (s->o.tid)
		return tid != s->o.tid;
	if (!pid)
		pid = btr_stream_pid_of(s, tid);
	return pid && pid != s->o.pid;
}

int btr_stream_record(struct btr_stream *s, const struct btr_record *rec)
{
	if (!s || !rec)
		return -BTR_ERR_INVAL;
	if (s->error)
		return s->error;
	if (s->stopped)
		return s->stopped;
	s->st.records++;
	if (s->hook) {
		int h = s->hook(s->hook_ctx, rec);
		if (h == 2 && rec->type != BTR_REC_PT)
			return -BTR_ERR_INVAL;
		if (h && h != 2)
			return h < 0 ? h : s->error ? s->error : s->stopped;
	}
	uint64_t cost = stream_code_cost(rec);   /* strings kept: the limit (stream_code.h) */
	if (cost && !stream_code_afford(&s->code, cost))
		return 0;
	struct btr_stream_event ev = { .rec = rec };
	int rc = 0;
	char file[4096];
	switch (rec->type) {
	case BTR_REC_MACHINE:
		on_machine(s, &rec->u.machine);
		ev.type = BTR_SEV_MACHINE;
		rc = emit(s, &ev);
		break;
	case BTR_REC_MODULE_LOAD:
		stream_code_mapped(&s->code, rec->u.module.pid, rec->u.module.start, rec->u.module.size);
		rc = load_module(s, &rec->u.module, file, sizeof(file));
		if (rc < 0 || s->stopped)
			break;
		ev.type = BTR_SEV_MODULE_LOAD;
		ev.tid = rec->u.module.pid;
		ev.pid = rec->u.module.pid;
		ev.path = rc > 0 ? file : NULL;
		rc = emit(s, &ev);
		break;
	case BTR_REC_MODULE_UNLOAD:
		/* The event comes when the module leaves the image (see
		 * struct loaded_module's @dead). */
		rc = on_unload(s, &rec->u.module);
		break;
	case BTR_REC_EXEC:
		/* Consumers symbolize what they hold with the old image first. */
		rc = retire_all(s, rec->u.module.pid, 0);
		if (rc)
			break;
		ev.type = BTR_SEV_EXEC;
		ev.tid = rec->u.module.pid;
		ev.pid = rec->u.module.pid;
		rc = emit(s, &ev);
		if (!rc)
			rc = on_exec(s, rec);
		break;
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME:
		ev.type = rec->type == BTR_REC_THREAD_START ? BTR_SEV_THREAD_START
			: rec->type == BTR_REC_THREAD_EXIT ? BTR_SEV_THREAD_EXIT : BTR_SEV_THREAD_NAME;
		ev.tid = rec->u.thread.tid;
		ev.pid = rec->u.thread.pid;
		if (rec->u.thread.pid && rec->u.thread.tid) {
			if (stream_threads_set_pid(&s->thr, rec->u.thread.tid, rec->u.thread.pid) < 0)
				return -BTR_ERR_NOMEM;
		}
		if (rec->type == BTR_REC_THREAD_START)
			for (size_t i = 0; i < s->n_ds; i++)
				if (s->ds[i]->tid == rec->u.thread.tid && s->ds[i]->cpu < 0)
					s->ds[i]->fresh = 1;
		if (rec->type == BTR_REC_THREAD_EXIT)
			thread_exited(s, rec->u.thread.tid);
		rc = emit(s, &ev);
		break;
	case BTR_REC_PROCESS_EXIT:
		if ((rc = stream_loss_exit(&s->loss, rec->u.exit.pid)) < 0)
			break;
		ev.type = BTR_SEV_PROCESS_EXIT;
		ev.tid = rec->u.exit.tid;
		ev.pid = rec->u.exit.pid;
		rc = emit(s, &ev);
		break;
	case BTR_REC_PROCESS:
		ev.type = BTR_SEV_PROCESS;
		ev.pid = rec->u.process.pid;
		if ((rc = stream_loss_process(&s->loss, &rec->u.process)) < 0)
			break;
		if (rc > 0)
			s->data_lost = 1;   /* the recorder lost this process's data */
		if (rec->u.process.pid) {
			/* The main thread's id is the process id. */
			if (stream_threads_set_pid(&s->thr, rec->u.process.pid, rec->u.process.pid) < 0)
				return -BTR_ERR_NOMEM;
			if (rec->u.process.event == BTR_PROC_START) {
				rc = on_start(s, rec->u.process.pid, rec->u.process.ppid);
				if (rc)
					break;
			}
		}
		rc = emit(s, &ev);
		break;
	case BTR_REC_SWITCH:
		if ((rc = stream_sw_add(&s->sw, &rec->u.sw)) < 0)
			break;
		ev.type = BTR_SEV_SWITCH;
		ev.tid = rec->u.sw.tid;
		ev.pid = rec->u.sw.pid;
		rc = emit(s, &ev);
		break;
	case BTR_REC_PT:
		if (unselected(s, rec->u.data.tid, 0))
			break;
		rc = on_pt(s, &rec->u.data);
		break;
	case BTR_REC_BTS:
		if (unselected(s, rec->u.data.tid, 0))
			break;
		rc = on_bts(s, &rec->u.data);
		break;
	case BTR_REC_BTS_INSNS:
		if (unselected(s, rec->u.data.tid, 0))
			break;
		rc = on_bts_insns(s, &rec->u.data);
		break;
	case BTR_REC_LBR:
		if (unselected(s, rec->u.lbr.tid, rec->u.lbr.pid))
			break;
		rc = on_lbr(s, &rec->u.lbr);
		break;
	case BTR_REC_BRANCHES:
		if (unselected(s, rec->u.branches.tid, 0))
			break;
		rc = on_branches(s, &rec->u.branches);
		break;
	case BTR_REC_IP_FILTER:
		ev.type = BTR_SEV_IP_FILTER;
		rc = emit(s, &ev);
		break;
	case BTR_REC_WINDOW:
		if (unselected(s, rec->u.win.tid, rec->u.win.pid))
			break;
		rc = on_window(s, rec);
		break;
	case BTR_REC_CODE:
	case BTR_REC_SYMBOL:
		rc = stream_code_on(&s->code, stream_img_of(s, rec->type == BTR_REC_CODE ? rec->u.code.pid : rec->u.sym.pid, 1), rec);
		break;
	default:
		break;   /* a newer record type: nothing to do with it */
	}
	s->cut.on = 0;   /* (a record on_pt did not see) */
	if (s->error)
		return s->error;
	if (rc < 0)
		return rc;
	return s->stopped ? s->stopped : 0;
}

int btr_stream_finish(struct btr_stream *s)
{
	if (!s)
		return -BTR_ERR_INVAL;
	if (s->finished)
		return s->stopped;
	s->finished = 1;
	if (s->hook)
		s->hook(s->hook_ctx, NULL);
	if (!s->stopped) {
		int rc = retire_all(s, 0, 1);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < s->n_ds && !s->stopped; i++) {
		struct data_stream *d = s->ds[i];
		if (d->kind == BTR_REC_BTS && d->carry_len) {
			/* The stream ended inside a BTS record. */
			int rc = emit_gap(s, d->tid, -BTR_ERR_TRUNCATED, d->next_off - d->carry_len);
			d->carry_len = 0;
			if (rc)
				return rc;
		}
	}
	return s->stopped;
}

/* Bytes read between two progress calls. */
#define PROGRESS_STEP (256u << 10)

int btr_stream_step(struct btr_stream *s, int *end)
{
	if (!s || !s->reader || !end)
		return -BTR_ERR_INVAL;
	*end = 0;
	if (s->finished) {
		*end = 1;
		return s->stopped ? s->stopped : s->data_lost ? -BTR_ERR_DATA_LOST : 0;
	}
	struct btr_record rec;
	struct btr_trace_info ti;
	int rc = btr_trace_read(s->reader, &rec);
	if (rc == -BTR_ERR_EOS) {
		*end = 1;
		if (s->o.progress) {
			btr_trace_reader_info(s->reader, &ti);
			uint64_t at = ti.size ? ti.size : btr_trace_reader_offset(s->reader);
			s->o.progress(s->o.progress_ctx, at, at);
		}
		/* the end: loss said in the return, not only by data_lost */
		rc = btr_stream_finish(s);
		return rc ? rc : s->data_lost ? -BTR_ERR_DATA_LOST : 0;
	}
	if (s->o.progress && rc == 0) {
		uint64_t at = btr_trace_reader_offset(s->reader);
		if (!s->progress_started || at >= s->progress_shown + PROGRESS_STEP) {
			btr_trace_reader_info(s->reader, &ti);
			s->o.progress(s->o.progress_ctx, at, ti.size);
			s->progress_shown = at;
			s->progress_started = 1;
		}
	}
	if (rc == -BTR_ERR_CHECKSUM) {
		/* The reader skipped the chunk: note the loss, go on. */
		s->st.lost_chunks++;
		s->data_lost = 1;
		if ((rc = stream_loss_chunk(&s->loss, btr_trace_reader_offset(s->reader))) < 0)
			return rc;
		return emit_gap(s, 0, -BTR_ERR_CHECKSUM, btr_trace_reader_offset(s->reader));
	}
	if (rc < 0) {
		*end = 1;
		s->st.read_error = rc;
		s->data_lost = 1;
		int lrc = stream_loss_end(&s->loss, rc, btr_trace_reader_offset(s->reader));
		btr_stream_finish(s);
		return lrc < 0 ? lrc : rc;
	}
	return btr_stream_record(s, &rec);
}

/* ---- for the parallel run (stream_par.h) ---- */

void btr__stream_hook(struct btr_stream *s, stream_rec_hook fn, void *ctx)
{
	s->hook = fn;
	s->hook_ctx = ctx;
}

int btr__stream_hooked(const struct btr_stream *s)
{
	return s->hook != NULL;
}

void btr__stream_hook_owned(struct btr_stream *s, stream_rec_hook fn, void *ctx, void (*free_ctx)(void *ctx))
{
	s->hook = fn;
	s->hook_ctx = ctx;
	s->hook_free = free_ctx;
}

const struct btr_stream_opts *btr__stream_opts(const struct btr_stream *s, const char **path)
{
	*path = s->reader ? s->path : NULL;
	return &s->o;
}

int btr__stream_replay_branches(struct btr_stream *s, const struct btr_branch *b, size_t n)
{
	int rc = s->o.branches ? s->o.branches(s->o.ctx, b, n) : 0;
	for (size_t i = 0; i < n && !rc && !s->o.branches && s->o.branch; i++)
		rc = s->o.branch(s->o.ctx, &b[i]);
	return stop_on(s, rc);
}

int btr__stream_replay_counts(struct btr_stream *s, const struct btr_branch_count *c, size_t n)
{
	return stop_on(s, s->o.counts ? s->o.counts(s->o.ctx, c, n) : 0);
}

/* The bookkeeping of flow_emit and emit_gap, then the event. */
int btr__stream_replay_event(struct btr_stream *s, struct btr_stream_event *ev)
{
	if (ev->type == BTR_SEV_FLOW)
		return flow_emit(s, ev);
	s->st.gaps += ev->type == BTR_SEV_GAP;
	return emit(s, ev);
}

void btr__stream_add_stats(struct btr_stream *s, const struct btr_stream_stats *a)
{
	s->st.pt_bytes += a->pt_bytes, s->st.bts_bytes += a->bts_bytes, s->st.lbr_snapshots += a->lbr_snapshots;
	s->st.branches += a->branches, s->st.filtered += a->filtered, s->st.pt_blocks += a->pt_blocks;
}

struct btr_image *btr_stream_image(struct btr_stream *s)
{
	return s ? s->img : NULL;
}

struct btr_image *btr_stream_image_pid(struct btr_stream *s, uint32_t pid)
{
	return s ? stream_img_of(s, pid, 0) : NULL;
}

uint32_t btr_stream_pid_of(struct btr_stream *s, uint32_t tid)
{
	return s ? stream_threads_pid(&s->thr, tid) : 0;
}

void btr_stream_get_stats(const struct btr_stream *s, struct btr_stream_stats *st)
{
	if (!s || !st)
		return;
	*st = s->st;
	struct btr_ptflow_stats fs;   /* the live decoders' blocks too */
	for (size_t i = 0; i < s->n_ds; i++, st->pt_blocks += fs.blocks_decoded)
		btr_ptflow_stats(s->ds[i]->flow, &fs);   /* (zeros for none) */
}

int btr_stream_data_lost(const struct btr_stream *s)
{
	return s ? s->data_lost : 0;
}

size_t btr_stream_losses(const struct btr_stream *s, struct btr_stream_loss *out, size_t max)
{
	return s ? stream_loss_get(&s->loss, out, max) : 0;
}

const char *btr_stream_backend(const struct btr_stream *s)
{
	return s ? s->backend : "";
}

const char *btr_stream_path(const struct btr_stream *s)
{
	return s && s->path ? s->path : "";
}

int btr_stream_cpu_thread(struct btr_stream *s, int32_t cpu, uint64_t tsc, uint32_t *pid, uint32_t *tid)
{
	return s ? stream_sw_thread(&s->sw, cpu, tsc, pid, tid) : 0;
}

void btr_stream_free(struct btr_stream *s)
{
	if (!s)
		return;
	if (s->hook_free)
		s->hook_free(s->hook_ctx);
	stream_sw_free(&s->sw);
	stream_loss_free(&s->loss);
	for (size_t i = 0; i < s->n_ds; i++) {
		if (s->ds[i]->flow)
			btr_ptflow_free(s->ds[i]->flow);
		btr_bts_insns_free(s->ds[i]->ins);
		free(s->ds[i]);
	}
	free(s->ds);
	for (size_t i = 0; i < s->n_mods; i++)
		free(s->mods[i].file);
	free(s->mods);
	stream_place_memo_free(&s->placed);
	btr__ptflow_spare_free(&s->spare);
	stream_threads_free(&s->thr);
	free(s->uelfs);
	free(s->path);
	if (s->reader)
		btr_trace_reader_free(s->reader);
	for (size_t i = 0; i < s->n_procs; i++)
		if (s->procs[i].img != s->img)
			btr_image_free(s->procs[i].img);
	free(s->procs);
	btr_image_free(s->img);
	stream_code_free(&s->code);   /* after the images, which read its pages */
	free(s);
}
