/* perf_replay.h - a replay kernel behind lib/capture/perf_ops.h: plays a
 * real perf.data recording back to the unmodified hardware recorder
 * (lib/capture/perf_event.c) through the same calls it makes on real
 * hardware.
 *
 * What it does, as the kernel does it (include/uapi/linux/perf_event.h,
 * kernel/events/ring_buffer.c, arch/x86/events/intel/pt.c):
 *   - perf_event_open: checks the attr against the PMU type in the sysfs
 *     tree it serves (tests/data/sysfs-skl), hands out a descriptor per
 *     (event, cpu); CPUs beyond the recording's are offline (ENODEV);
 *   - mmap: the metadata page (data_offset/data_size, the time
 *     conversion of the recording: time_shift/mult/zero with
 *     cap_user_time_zero), the data ring, the AUX area at aux_offset
 *     (read-only = overwrite mode);
 *   - poll: "runs the hardware" for a few steps of the recording: writes
 *     each sideband / sample record re-encoded for the recorder's own
 *     attr (sample_type, sample_id_all trailer) into its CPU's ring at
 *     data_head, free-running (records straddle the ring's end), and
 *     publishes data_head after whole records only; copies each AUX
 *     chunk into the AUX area at aux_head and writes the PERF_RECORD_AUX
 *     that tells of it;
 *   - when there is no room: waits (a consumer that keeps up), or in
 *     lossy mode drops the record and writes PERF_RECORD_LOST {id, lost}
 *     before the next record that fits; an AUX chunk that does not fit
 *     is cut where the free space ends and its AUX record flagged
 *     TRUNCATED; in overwrite (snapshot) mode the AUX area is written
 *     round and round and aux_head is the offset within the buffer, as
 *     pt_update_head() sets it;
 *   - signals at chosen steps: SIGINT (Ctrl-C: to the recorder and the
 *     traced command, like a terminal), SIGUSR2 (take a snapshot);
 *   - at the end of the recording it ends the traced command (SIGTERM).
 * Everything it delivered (or dropped) is logged, so a test can say what
 * the recorder's output must hold.
 *
 * Simplifications, said plainly: records the perf tool synthesized
 * (MMAP of the kernel and of running processes) are played as if the
 * kernel wrote them; MMAP becomes MMAP2 (what the kernel writes for an
 * attr with mmap2 set); records without a CPU (recordings made without
 * PERF_SAMPLE_CPU) go to CPU 0.
 */
#ifndef BTR_TEST_PERF_REPLAY_H
#define BTR_TEST_PERF_REPLAY_H

#include "capture/perf_ops.h"
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/perfattr.h"
#include "btr/perfdata.h"
#include "btr/perfring.h"
#include "btr/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* helpers a test may not use all of */
#define RP_FN static __attribute__((unused))

#define RP_MAX_CPU 16
#define RP_FD_BASE 7000

/* PERF_SAMPLE_* bits */
enum {
	RP_S_IP = 1u << 0, RP_S_TID = 1u << 1, RP_S_TIME = 1u << 2, RP_S_ADDR = 1u << 3, RP_S_READ = 1u << 4,
	RP_S_CALLCHAIN = 1u << 5, RP_S_ID = 1u << 6, RP_S_CPU = 1u << 7, RP_S_PERIOD = 1u << 8,
	RP_S_STREAM_ID = 1u << 9, RP_S_RAW = 1u << 10, RP_S_BRANCH_STACK = 1u << 11, RP_S_IDENTIFIER = 1u << 16,
};
#define RP_BRANCH_HW_INDEX (1ull << 17)

/* ---- the source recording ---- */

struct rp_attr {
	uint64_t sample_type, bst, flags;
	uint64_t first_id;      /* one of its ids (0: none) */
};

/* One record of the source, decoded enough to re-encode it. */
struct rp_src_rec {
	uint64_t off;           /* file offset */
	uint32_t type;
	uint16_t misc;
	const uint8_t *body;    /* after the header, without the sample_id trailer */
	uint32_t body_len;
	uint32_t pid, tid;
	int cpu;                /* -1: none */
	uint64_t time;
	/* SAMPLE */
	uint64_t ip, period;
	uint64_t nr_br;
	const uint8_t *br;      /* nr_br 24-byte entries */
};

struct rp_src {
	uint8_t *buf;
	size_t size;
	struct rp_attr attrs[8];
	uint64_t *ids;          /* id -> attr index: pairs */
	unsigned n_attrs, n_ids;
	struct rp_src_rec *recs;
	size_t n;
	/* AUXTRACE payloads, per CPU: the CPU's AUX byte stream */
	uint8_t *aux[RP_MAX_CPU];
	uint64_t aux_len[RP_MAX_CPU];
	int have_time;
	uint16_t time_shift;
	uint32_t time_mult;
	uint64_t time_zero;
	int max_cpu;
};

RP_FN uint64_t rp_rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

RP_FN uint32_t rp_rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

RP_FN const struct rp_attr *rp_attr_of(const struct rp_src *s, uint64_t id)
{
	for (unsigned i = 0; i < s->n_ids; i++)
		if (s->ids[2 * i] == id)
			return &s->attrs[s->ids[2 * i + 1]];
	return &s->attrs[0];
}

/* Parses the sample_id trailer of a non-sample record (perf_event.h,
 * "struct sample_id"): fields from the end. */
RP_FN void rp_trailer(const struct rp_src *s, const uint8_t *p, uint32_t len, struct rp_src_rec *r)
{
	const struct rp_attr *a = &s->attrs[0];
	if (s->n_attrs > 1 && (a->sample_type & RP_S_IDENTIFIER) && len >= 8)
		a = rp_attr_of(s, rp_rd64(p + len - 8));
	r->cpu = -1;
	r->body_len = len;
	if (!(a->flags & (1ull << 18)))
		return;   /* no sample_id_all */
	uint64_t st = a->sample_type;
	uint32_t end = len;
	if (st & RP_S_IDENTIFIER)
		end -= 8;
	if (st & RP_S_CPU) {
		end -= 8;
		r->cpu = (int)rp_rd32(p + end);
	}
	if (st & RP_S_STREAM_ID)
		end -= 8;
	if (st & RP_S_ID)
		end -= 8;
	if (st & RP_S_TIME) {
		end -= 8;
		r->time = rp_rd64(p + end);
	}
	if (st & RP_S_TID) {
		end -= 8;
		r->pid = rp_rd32(p + end);
		r->tid = rp_rd32(p + end + 4);
	}
	r->body_len = end;
}

RP_FN int rp_sample(const struct rp_src *s, const uint8_t *p, uint32_t len, struct rp_src_rec *r)
{
	const struct rp_attr *a = &s->attrs[0];
	if (s->n_attrs > 1 && (a->sample_type & RP_S_IDENTIFIER))
		a = rp_attr_of(s, rp_rd64(p));
	uint64_t st = a->sample_type;
	const uint8_t *q = p, *e = p + len;
	r->cpu = -1;
#define TAKE(n) do { if (q + (n) > e) return -1; q += (n); } while (0)
	if (st & RP_S_IDENTIFIER)
		TAKE(8);
	if (st & RP_S_IP) {
		r->ip = rp_rd64(q);
		TAKE(8);
	}
	if (st & RP_S_TID) {
		r->pid = rp_rd32(q);
		r->tid = rp_rd32(q + 4);
		TAKE(8);
	}
	if (st & RP_S_TIME) {
		r->time = rp_rd64(q);
		TAKE(8);
	}
	if (st & RP_S_ADDR)
		TAKE(8);
	if (st & RP_S_ID)
		TAKE(8);
	if (st & RP_S_STREAM_ID)
		TAKE(8);
	if (st & RP_S_CPU) {
		r->cpu = (int)rp_rd32(q);
		TAKE(8);
	}
	if (st & RP_S_PERIOD) {
		r->period = rp_rd64(q);
		TAKE(8);
	}
	if (st & RP_S_READ)
		return -1;
	if (st & RP_S_CALLCHAIN) {
		uint64_t nr = rp_rd64(q);
		TAKE(8);
		TAKE(8 * nr);
	}
	if (st & RP_S_RAW) {
		uint32_t n = rp_rd32(q);
		TAKE(4 + n);
	}
	if (st & RP_S_BRANCH_STACK) {
		r->nr_br = rp_rd64(q);
		TAKE(8);
		if (a->bst & RP_BRANCH_HW_INDEX)
			TAKE(8);
		r->br = q;
		TAKE(24 * r->nr_br);
	}
#undef TAKE
	return 0;
}

RP_FN void rp_src_free(struct rp_src *s)
{
	free(s->buf);
	free(s->recs);
	free(s->ids);
	for (int c = 0; c < RP_MAX_CPU; c++)
		free(s->aux[c]);
	memset(s, 0, sizeof(*s));
}

/* Reads perf.data @path (perf.data-file-format.txt: header, attrs with
 * their ids, the data section of records; AUXTRACE records are followed
 * by their payload).  Returns 0 or -1. */
RP_FN int rp_src_load(const char *path, struct rp_src *s)
{
	memset(s, 0, sizeof(*s));
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	s->size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	s->buf = malloc(s->size);
	if (!s->buf || fread(s->buf, 1, s->size, f) != s->size) {
		fclose(f);
		return -1;
	}
	fclose(f);
	const uint8_t *b = s->buf;
	if (memcmp(b, "PERFILE2", 8))
		return -1;
	uint64_t attr_size = rp_rd64(b + 16), ao = rp_rd64(b + 24), asz = rp_rd64(b + 32);
	uint64_t doff = rp_rd64(b + 40), dsz = rp_rd64(b + 48);
	s->n_attrs = (unsigned)(asz / attr_size);
	if (s->n_attrs > 8)
		return -1;
	size_t nid = 0;
	for (unsigned i = 0; i < s->n_attrs; i++)
		nid += rp_rd64(b + ao + i * attr_size + attr_size - 8) / 8;
	s->ids = calloc(nid * 2 + 2, 8);
	for (unsigned i = 0; i < s->n_attrs; i++) {
		const uint8_t *a = b + ao + i * attr_size;
		uint32_t asize = rp_rd32(a + 4);
		s->attrs[i].sample_type = rp_rd64(a + 24);
		s->attrs[i].flags = rp_rd64(a + 40);
		s->attrs[i].bst = asize >= 80 ? rp_rd64(a + 72) : 0;
		uint64_t io = rp_rd64(a + attr_size - 16), isz = rp_rd64(a + attr_size - 8);
		for (uint64_t k = 0; k < isz / 8; k++) {
			s->ids[2 * s->n_ids] = rp_rd64(b + io + 8 * k);
			s->ids[2 * s->n_ids + 1] = i;
			s->n_ids++;
			if (!k)
				s->attrs[i].first_id = rp_rd64(b + io);
		}
	}
	size_t cap = 1024;
	s->recs = malloc(cap * sizeof(*s->recs));
	uint64_t pos = doff;
	while (pos + 8 <= doff + dsz) {
		uint32_t type = rp_rd32(b + pos);
		uint16_t misc, size;
		memcpy(&misc, b + pos + 4, 2);
		memcpy(&size, b + pos + 6, 2);
		if (size < 8)
			return -1;
		if (type == 71) {
			/* AUXTRACE { size, offset, reference, idx, tid, cpu } + payload */
			uint64_t n = rp_rd64(b + pos + 8), off = rp_rd64(b + pos + 16);
			uint32_t cpu = rp_rd32(b + pos + 40);
			if (cpu < RP_MAX_CPU) {
				if (off + n > s->aux_len[cpu]) {
					s->aux[cpu] = realloc(s->aux[cpu], off + n);
					s->aux_len[cpu] = off + n;
				}
				memcpy(s->aux[cpu] + off, b + pos + size, n);
			}
			pos += size + n;
			continue;
		}
		if (type == 79 && size >= 32 && !s->have_time) {
			/* TIME_CONV { time_shift, time_mult, time_zero } */
			s->time_shift = (uint16_t)rp_rd64(b + pos + 8);
			s->time_mult = (uint32_t)rp_rd64(b + pos + 16);
			s->time_zero = rp_rd64(b + pos + 24);
			s->have_time = s->time_mult != 0;
		}
		if (type < 64) {
			if (s->n == cap)
				s->recs = realloc(s->recs, (cap *= 2) * sizeof(*s->recs));
			struct rp_src_rec *r = &s->recs[s->n++];
			memset(r, 0, sizeof(*r));
			r->off = pos;
			r->type = type;
			r->misc = misc;
			r->body = b + pos + 8;
			if (type == BTR_PERF_RECORD_SAMPLE) {
				if (rp_sample(s, b + pos + 8, size - 8u, r) < 0)
					return -1;
			} else {
				rp_trailer(s, b + pos + 8, size - 8u, r);
			}
			if (r->cpu >= RP_MAX_CPU)
				return -1;
			if (r->cpu > s->max_cpu)
				s->max_cpu = r->cpu;
		}
		pos += size;
	}
	return 0;
}

/* Loads ../shared/traces/@name into @s (its path in @path).  Returns 1,
 * 0 if the file is absent (said on stdout: the test skips it), -1 if it
 * does not parse. */
RP_FN int rp_src_open(const char *name, char *path, size_t size, struct rp_src *s)
{
	snprintf(path, size, "%s/traces/%s", BTR_SHARED_DIR, name);
	if (access(path, R_OK)) {
		printf("note: %s absent: its replay is skipped\n", path);
		return 0;
	}
	return rp_src_load(path, s) < 0 ? -1 : 1;
}

/* ---- the replay kernel ---- */

enum rp_kind { RP_DATA = 1, RP_AUX = 2 };

/* One step of the "hardware": a record for a CPU's data ring, or an AUX
 * chunk (bytes [aux_pos, aux_pos+aux_len) of the CPU's AUX stream, told
 * by a PERF_RECORD_AUX). */
struct rp_step {
	enum rp_kind kind;
	int cpu;
	uint32_t type;            /* RP_DATA: the record's type */
	uint16_t misc;
	const uint8_t *body;      /* RP_DATA: body (before the sample_id trailer) */
	uint32_t body_len;
	uint32_t pid, tid;
	uint64_t time;
	const struct rp_src_rec *sample;  /* RP_DATA SAMPLE: re-encoded */
	const uint8_t *aux;       /* RP_AUX */
	uint64_t aux_pos, aux_len;
	uint64_t src_idx;         /* index into the source records (or the step's own) */
	/* log */
	int dropped;              /* RP_DATA: dropped (LOST) */
	uint64_t aux_done;        /* RP_AUX: bytes delivered so far */
	uint64_t aux_cut;         /* RP_AUX: bytes dropped by truncation */
};

struct rp_ring {
	int open;
	int cpu;
	struct btr_perf_event_attr attr;
	uint8_t *base;
	size_t len;
	uint8_t *data;
	uint64_t data_size;
	uint64_t khead;           /* written, published after each step */
	uint64_t lost;            /* records dropped since the last LOST */
	uint8_t *aux;
	uint64_t aux_size;
	int overwrite;
	uint64_t aux_khead;       /* free-running count of AUX bytes written */
	uint64_t id;
	int enabled;
};

struct rp_snap {
	int cpu;
	uint64_t khead;           /* free-running AUX position of the snapshot */
};

struct rp {
	struct btr_perf_ops ops;
	const char *sysfs;
	int ncpus;                /* CPUs the recorder sees */
	struct rp_step *steps;
	size_t n_steps, next;
	struct rp_ring rings[RP_MAX_CPU + 1];   /* by cpu; [RP_MAX_CPU]: per thread */
	int child;                /* the pid the events were opened for */
	/* the script */
	unsigned per_poll;        /* steps per poll, at most (varied) */
	int lossy;                /* 1: a slow consumer: drop what does not fit */
	int reverse_cpus;         /* 1: the recording's CPU c is CPU ncpus-1-c here */
	unsigned burst;           /* lossy: steps per poll */
	uint64_t aux_piece;       /* largest AUX chunk per AUX record (0: as recorded) */
	size_t ctrlc_at;          /* SIGINT before this step (0: never; n_steps: after the last) */
	size_t usr2_every;        /* SIGUSR2 every that many steps (0: never) */
	/* time conversion served in the page */
	int have_time;
	uint16_t time_shift;
	uint32_t time_mult;
	uint64_t time_zero;
	/* log */
	int ended, interrupted;
	uint64_t lost_records, lost_reported, truncated, aux_cut_bytes, polls;
	struct rp_snap snaps[256];
	unsigned n_snaps;
	unsigned seed;
	char err[256];            /* first protocol violation seen, "" if none */
};


RP_FN unsigned rp_rand(struct rp *k)
{
	k->seed = k->seed * 1103515245u + 12345u;
	return (k->seed >> 16) & 0x7fff;
}

RP_FN struct rp_ring *rp_ring_fd(struct rp *k, int fd)
{
	int i = fd - RP_FD_BASE;
	if (i < 0 || i > RP_MAX_CPU || !k->rings[i].open)
		return NULL;
	return &k->rings[i];
}

RP_FN void rp_fail(struct rp *k, const char *what)
{
	if (!k->err[0])
		snprintf(k->err, sizeof(k->err), "%s", what);
}

RP_FN int rp_open(void *ctx, const struct btr_perf_event_attr *attr, int pid, int cpu)
{
	struct rp *k = ctx;
	/* the type must be the one the sysfs tree says */
	char path[512];
	int want = -1;
	const char *pmu = attr->type == 0 ? NULL : attr->type == 8 ? "intel_pt" : attr->type == 7 ? "intel_bts" : "?";
	if (pmu) {
		snprintf(path, sizeof(path), "%s/%s/type", k->sysfs, pmu);
		FILE *f = fopen(path, "r");
		if (!f || fscanf(f, "%d", &want) != 1 || (uint32_t)want != attr->type) {
			if (f)
				fclose(f);
			errno = ENOENT;
			return -1;
		}
		fclose(f);
	}
	if (cpu >= k->ncpus || cpu < -1) {
		errno = ENODEV;
		return -1;
	}
	int slot = cpu < 0 ? RP_MAX_CPU : cpu;
	if (pid == 0 && cpu == -1 && (attr->flags & BTR_PA_DISABLED)) {
		/* the probe: opened and closed at once */
		return RP_FD_BASE + RP_MAX_CPU + 1;
	}
	struct rp_ring *rg = &k->rings[slot];
	if (rg->open) {
		errno = EBUSY;
		return -1;
	}
	memset(rg, 0, sizeof(*rg));
	rg->open = 1;
	rg->cpu = cpu;
	rg->attr = *attr;
	rg->id = 1000 + (uint64_t)slot;
	rg->enabled = !(attr->flags & BTR_PA_DISABLED);
	if (pid > 0)
		k->child = pid;
	return RP_FD_BASE + slot;
}

RP_FN void *rp_mmap(void *ctx, int fd, size_t len, int prot, uint64_t off)
{
	struct rp *k = ctx;
	struct rp_ring *rg = rp_ring_fd(k, fd);
	long page = sysconf(_SC_PAGESIZE);
	if (!rg) {
		errno = EBADF;
		return MAP_FAILED;
	}
	if (off == 0) {
		/* 1 + 2^n pages (perf_mmap: "nr_pages must be a power of two") */
		uint64_t n = len / (uint64_t)page - 1;
		if (len % (size_t)page || !n || (n & (n - 1)) || rg->base) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		rg->base = aligned_alloc((size_t)page, len);
		memset(rg->base, 0, len);
		rg->len = len;
		rg->data = rg->base + page;
		rg->data_size = len - (size_t)page;
		uint64_t v = (uint64_t)page;
		memcpy(rg->base + BTR_PERF_PAGE_DATA_OFFSET, &v, 8);
		memcpy(rg->base + BTR_PERF_PAGE_DATA_SIZE, &rg->data_size, 8);
		if (k->have_time) {
			uint64_t caps = (1ull << 3) | (1ull << 4);   /* cap_user_time, cap_user_time_zero */
			memcpy(rg->base + 40, &caps, 8);
			memcpy(rg->base + 50, &k->time_shift, 2);
			memcpy(rg->base + 52, &k->time_mult, 4);
			memcpy(rg->base + 64, &k->time_zero, 8);
		}
		return rg->base;
	}
	/* the AUX area: where aux_offset/aux_size in the page say */
	uint64_t aoff, asz;
	memcpy(&aoff, rg->base + BTR_PERF_PAGE_AUX_OFFSET, 8);
	memcpy(&asz, rg->base + BTR_PERF_PAGE_AUX_SIZE, 8);
	if (!rg->base || off != aoff || len != asz || aoff < rg->len || (asz & (asz - 1)) || rg->aux) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	rg->aux = aligned_alloc((size_t)page, len < (size_t)page ? (size_t)page : len);
	memset(rg->aux, 0, len);
	rg->aux_size = len;
	rg->overwrite = !(prot & PROT_WRITE);
	return rg->aux;
}

RP_FN int rp_munmap(void *ctx, void *addr, size_t len)
{
	struct rp *k = ctx;
	(void)len;
	for (int i = 0; i <= RP_MAX_CPU; i++) {
		struct rp_ring *rg = &k->rings[i];
		if (addr && addr == rg->base) {
			free(rg->base);
			rg->base = NULL;
			return 0;
		}
		if (addr && addr == rg->aux) {
			free(rg->aux);
			rg->aux = NULL;
			return 0;
		}
	}
	errno = EINVAL;
	return -1;
}

RP_FN int rp_close(void *ctx, int fd)
{
	struct rp *k = ctx;
	if (fd == RP_FD_BASE + RP_MAX_CPU + 1)
		return 0;
	struct rp_ring *rg = rp_ring_fd(k, fd);
	if (!rg) {
		errno = EBADF;
		return -1;
	}
	if (rg->base || rg->aux)
		rp_fail(k, "close before munmap");
	rg->open = 0;
	return 0;
}

RP_FN int rp_ioctl(void *ctx, int fd, unsigned long req, unsigned long arg)
{
	struct rp *k = ctx;
	(void)arg;
	struct rp_ring *rg = rp_ring_fd(k, fd);
	if (!rg) {
		errno = EBADF;
		return -1;
	}
	if (req == 0x2400)        /* PERF_EVENT_IOC_ENABLE */
		rg->enabled = 1;
	else if (req == 0x2401)   /* PERF_EVENT_IOC_DISABLE */
		rg->enabled = 0;
	return 0;
}

RP_FN long rp_ncpus(void *ctx)
{
	return ((struct rp *)ctx)->ncpus;
}

/* Writes @len bytes at the ring's kernel head (wrapping). */
RP_FN void rp_put(struct rp_ring *rg, const void *p, uint64_t len)
{
	uint64_t off = rg->khead & (rg->data_size - 1), first = rg->data_size - off;
	if (first >= len) {
		memcpy(rg->data + off, p, len);
	} else {
		memcpy(rg->data + off, p, first);
		memcpy(rg->data, (const uint8_t *)p + first, len - first);
	}
	rg->khead += len;
}

/* Stores u64 @v / the u32 pair {@a, @b} at @out + @n; returns n + 8. */
RP_FN size_t rp_w64(uint8_t *out, size_t n, uint64_t v)
{
	memcpy(out + n, &v, 8);
	return n + 8;
}

RP_FN size_t rp_w32x2(uint8_t *out, size_t n, uint32_t a, uint32_t b)
{
	memcpy(out + n, &a, 4);
	memcpy(out + n + 4, &b, 4);
	return n + 8;
}

/* The sample_id trailer for the ring's attr (perf_event_header__init_id). */
RP_FN size_t rp_sample_id(const struct rp_ring *rg, uint32_t pid, uint32_t tid, uint64_t time, int cpu, uint8_t *out)
{
	uint64_t st = rg->attr.sample_type;
	size_t n = 0;
	if (!(rg->attr.flags & BTR_PA_SAMPLE_ID_ALL))
		return 0;
	if (st & RP_S_TID)
		n = rp_w32x2(out, n, pid, tid);
	if (st & RP_S_TIME)
		n = rp_w64(out, n, time);
	if (st & RP_S_ID)
		n = rp_w64(out, n, rg->id);
	if (st & RP_S_STREAM_ID)
		n = rp_w64(out, n, rg->id);
	if (st & RP_S_CPU)
		n = rp_w32x2(out, n, (uint32_t)(cpu < 0 ? 0 : cpu), 0);
	if (st & RP_S_IDENTIFIER)
		n = rp_w64(out, n, rg->id);
	return n;
}

/* Encodes step @s as the kernel would write it for ring @rg into @out
 * (header included).  Returns its size. */
RP_FN size_t rp_encode(const struct rp_ring *rg, const struct rp_step *s, uint8_t *out)
{
	size_t n = 8;
	uint32_t type = s->type;
	uint16_t misc = s->misc;
	if (s->sample) {
		const struct rp_src_rec *r = s->sample;
		uint64_t st = rg->attr.sample_type;
		if (st & RP_S_IDENTIFIER)
			n = rp_w64(out, n, rg->id);
		if (st & RP_S_IP)
			n = rp_w64(out, n, r->ip);
		if (st & RP_S_TID)
			n = rp_w32x2(out, n, r->pid, r->tid);
		if (st & RP_S_TIME)
			n = rp_w64(out, n, r->time);
		if (st & RP_S_ADDR)
			n = rp_w64(out, n, 0);
		if (st & RP_S_ID)
			n = rp_w64(out, n, rg->id);
		if (st & RP_S_STREAM_ID)
			n = rp_w64(out, n, rg->id);
		if (st & RP_S_CPU)
			n = rp_w32x2(out, n, (uint32_t)(rg->cpu >= 0 ? rg->cpu : s->cpu < 0 ? 0 : s->cpu), 0);
		if (st & RP_S_PERIOD)
			n = rp_w64(out, n, r->period);
		if (st & RP_S_BRANCH_STACK) {
			n = rp_w64(out, n, r->nr_br);
			if (rg->attr.branch_sample_type & RP_BRANCH_HW_INDEX) {
				uint64_t idx = (uint64_t)-1;
				n = rp_w64(out, n, idx);
			}
			memcpy(out + n, r->br, 24 * r->nr_br);
			n += 24 * r->nr_br;
		}
	} else if (type == BTR_PERF_RECORD_MMAP) {
		/* MMAP { pid, tid, addr, len, pgoff, filename } -> MMAP2 { pid,
		 * tid, addr, len, pgoff, maj, min, ino, ino_generation, prot,
		 * flags, filename } */
		type = BTR_PERF_RECORD_MMAP2;
		memcpy(out + n, s->body, 32);
		n += 32;
		memset(out + n, 0, 24);
		n += 24;
		uint32_t prot = 5, flags = 2;   /* PROT_READ|PROT_EXEC, MAP_PRIVATE */
		n = rp_w32x2(out, n, prot, flags);
		memcpy(out + n, s->body + 32, s->body_len - 32);
		n += s->body_len - 32;
	} else {
		memcpy(out + n, s->body, s->body_len);
		n += s->body_len;
	}
	n += rp_sample_id(rg, s->pid, s->tid, s->time, rg->cpu < 0 ? s->cpu : rg->cpu, out + n);
	uint16_t size = (uint16_t)n;
	memcpy(out, &type, 4);
	memcpy(out + 4, &misc, 2);
	memcpy(out + 6, &size, 2);
	return n;
}

RP_FN uint64_t rp_tail(const struct rp_ring *rg)
{
	return __atomic_load_n((const uint64_t *)(const void *)(rg->base + BTR_PERF_PAGE_DATA_TAIL), __ATOMIC_ACQUIRE);
}

RP_FN void rp_publish(struct rp_ring *rg)
{
	__atomic_store_n((uint64_t *)(void *)(rg->base + BTR_PERF_PAGE_DATA_HEAD), rg->khead, __ATOMIC_RELEASE);
}

/* perf_output_begin: room for @size bytes (plus a LOST record first if
 * records were lost)?  Writes the LOST record if so and returns 1; else
 * counts the loss (lossy) and returns 0. */
RP_FN int rp_reserve(struct rp *k, struct rp_ring *rg, const struct rp_step *s, size_t size)
{
	uint8_t lost[64];
	size_t ln = 0;
	if (rg->lost) {
		uint32_t t = BTR_PERF_RECORD_LOST;
		memcpy(lost, &t, 4);
		memset(lost + 4, 0, 2);
		memcpy(lost + 8, &rg->id, 8);
		memcpy(lost + 16, &rg->lost, 8);
		ln = 24 + rp_sample_id(rg, s->pid, s->tid, s->time, rg->cpu < 0 ? s->cpu : rg->cpu, lost + 24);
		uint16_t sz = (uint16_t)ln;
		memcpy(lost + 6, &sz, 2);
	}
	uint64_t used = rg->khead - rp_tail(rg);
	if (used > rg->data_size) {
		rp_fail(k, "data_tail ahead of data_head");
		return 0;
	}
	if (rg->data_size - used < size + ln)
		return 0;
	if (ln) {
		rp_put(rg, lost, ln);
		k->lost_reported += rg->lost;
		rg->lost = 0;
	}
	return 1;
}

/* The CPU the recording's CPU @cpu is here. */
RP_FN int rp_cpu_of(const struct rp *k, int cpu)
{
	if (cpu < 0)
		cpu = 0;
	return k->reverse_cpus && cpu < k->ncpus ? k->ncpus - 1 - cpu : cpu;
}

RP_FN struct rp_ring *rp_ring_cpu(struct rp *k, int cpu)
{
	if (k->rings[RP_MAX_CPU].open)
		return &k->rings[RP_MAX_CPU];
	cpu = rp_cpu_of(k, cpu);
	return cpu < RP_MAX_CPU && k->rings[cpu].open ? &k->rings[cpu] : NULL;
}

/* Runs step @s.  Returns 1 when it is done, 0 to wait for the consumer. */
RP_FN int rp_step(struct rp *k, struct rp_step *s)
{
	struct rp_ring *rg = rp_ring_cpu(k, s->cpu);
	uint8_t rec[65536];
	if (!rg || !rg->base) {
		rp_fail(k, "a step for a CPU without a ring");
		return 1;
	}
	if (s->kind == RP_DATA) {
		size_t n = rp_encode(rg, s, rec);
		if (!rp_reserve(k, rg, s, n)) {
			if (!k->lossy)
				return 0;
			rg->lost++;
			k->lost_records++;
			s->dropped = 1;
			return 1;
		}
		rp_put(rg, rec, n);
		rp_publish(rg);
		return 1;
	}
	/* RP_AUX */
	if (!rg->aux) {
		rp_fail(k, "AUX data for a ring without an AUX area");
		return 1;
	}
	while (s->aux_done < s->aux_len) {
		uint64_t want = s->aux_len - s->aux_done, flags = 0;
		if (k->aux_piece && want > k->aux_piece)
			want = k->aux_piece;
		uint64_t put = want;
		if (!rg->overwrite) {
			uint64_t tail = __atomic_load_n((uint64_t *)(void *)(rg->base + BTR_PERF_PAGE_AUX_TAIL),
							__ATOMIC_ACQUIRE);
			uint64_t fr = rg->aux_size - (rg->aux_khead - tail);
			if (rg->aux_khead - tail > rg->aux_size) {
				rp_fail(k, "aux_tail ahead of aux_head");
				fr = 0;
			}
			if (fr < want) {
				if (!k->lossy)
					put = fr;
				else {
					/* the hardware stops where the space ends
					 * (ToPA STOP): the rest of the chunk is lost */
					put = fr;
					flags |= BTR_PERF_AUX_TRUNCATED;
				}
			}
			if (!put && !flags)
				return 0;
		} else {
			flags |= BTR_PERF_AUX_OVERWRITE;
		}
		/* the AUX record: { aux_offset, aux_size, flags } + sample_id */
		struct rp_step as = *s;
		as.kind = RP_DATA;
		as.type = BTR_PERF_RECORD_AUX;
		as.misc = 0;
		as.sample = NULL;
		uint64_t body[3] = { rg->overwrite ? (rg->aux_khead + put) & (rg->aux_size - 1) : rg->aux_khead, put,
				     flags };
		as.body = (const uint8_t *)body;
		as.body_len = 24;
		size_t n = rp_encode(rg, &as, rec);
		if (!rp_reserve(k, rg, &as, n)) {
			if (!k->lossy)
				return 0;
			/* no room for the AUX record: the data is still written */
			rg->lost++;
			k->lost_records++;
			n = 0;
		}
		const uint8_t *src = s->aux + s->aux_pos + s->aux_done;
		for (uint64_t i = 0; i < put;) {
			uint64_t off = (rg->aux_khead + i) & (rg->aux_size - 1), m = rg->aux_size - off;
			if (m > put - i)
				m = put - i;
			memcpy(rg->aux + off, src + i, m);
			i += m;
		}
		rg->aux_khead += put;
		/* overwrite mode: aux_head is the offset within the buffer */
		uint64_t h = rg->overwrite ? rg->aux_khead & (rg->aux_size - 1) : rg->aux_khead;
		__atomic_store_n((uint64_t *)(void *)(rg->base + BTR_PERF_PAGE_AUX_HEAD), h, __ATOMIC_RELEASE);
		if (n)
			rp_put(rg, rec, n);
		rp_publish(rg);
		s->aux_done += put;
		if (flags & BTR_PERF_AUX_TRUNCATED) {
			k->truncated++;
			s->aux_cut += want - put;
			k->aux_cut_bytes += want - put;
			s->aux_done += want - put;
		}
	}
	return 1;
}

RP_FN int rp_poll(void *ctx, struct pollfd *fds, unsigned n, int timeout_ms)
{
	struct rp *k = ctx;
	(void)timeout_ms;
	k->polls++;
	if (k->ended) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		return 0;
	}
	unsigned budget = k->lossy ? k->burst : 1 + rp_rand(k) % (k->per_poll ? k->per_poll : 1);
	while (budget--) {
		if (k->ctrlc_at && k->next == k->ctrlc_at) {
			/* Ctrl-C: the terminal signals the whole foreground
			 * group (at n_steps: the end of a -a recording) */
			k->ended = k->interrupted = 1;
			if (k->child > 0)
				kill(k->child, SIGINT);
			raise(SIGINT);
			break;
		}
		if (k->next == k->n_steps) {
			/* the recording is over: the command ends */
			k->ended = 1;
			if (k->child > 0)
				kill(k->child, SIGTERM);
			break;
		}
		struct rp_step *s = &k->steps[k->next];
		struct rp_ring *rg = rp_ring_cpu(k, s->cpu);
		if (rg && !rg->enabled && !(rg->attr.flags & BTR_PA_ENABLE_ON_EXEC))
			rp_fail(k, "data for an event that was never enabled");
		if (!rp_step(k, s))
			break;   /* no room: the consumer must read first */
		k->next++;
		if (k->usr2_every && k->next % k->usr2_every == 0 && k->n_snaps < 256) {
			/* logged by the steps' CPU (the per-thread ring's is 0) */
			for (int c = 0; c <= RP_MAX_CPU && k->n_snaps < 256; c++)
				if (k->rings[c].open && k->rings[c].aux)
					k->snaps[k->n_snaps++] =
						(struct rp_snap){ c == RP_MAX_CPU ? 0 : c, k->rings[c].aux_khead };
			raise(SIGUSR2);
			break;
		}
	}
	int ready = 0;
	for (unsigned i = 0; i < n; i++) {
		struct rp_ring *rg = rp_ring_fd(k, fds[i].fd);
		fds[i].revents = rg && rg->base && rg->khead != rp_tail(rg) ? POLLIN : 0;
		ready += fds[i].revents != 0;
	}
	return ready;
}

/* Sets up @k for a recording of @s (@sysfs: the PMU tree) and installs
 * it.  The caller fills k->steps. */
RP_FN void rp_init(struct rp *k, const struct rp_src *s, const char *sysfs, int ncpus)
{
	memset(k, 0, sizeof(*k));
	k->sysfs = sysfs;
	k->ncpus = ncpus;
	k->per_poll = 8;
	k->burst = 64;
	k->seed = 12345;
	if (s && s->have_time) {
		k->have_time = 1;
		k->time_shift = s->time_shift;
		k->time_mult = s->time_mult;
		k->time_zero = s->time_zero;
	}
	k->ops = (struct btr_perf_ops){ .open = rp_open, .mmap = rp_mmap, .munmap = rp_munmap, .ioctl = rp_ioctl,
					.poll = rp_poll, .close = rp_close, .ncpus = rp_ncpus, .sysfs_root = sysfs,
					.ctx = k };
}

/* Resets the script state so @k can play its steps again. */
RP_FN void rp_rewind(struct rp *k)
{
	for (size_t i = 0; i < k->n_steps; i++) {
		k->steps[i].dropped = 0;
		k->steps[i].aux_done = k->steps[i].aux_cut = 0;
	}
	memset(k->rings, 0, sizeof(k->rings));
	k->next = 0;
	k->child = 0;
	k->ended = k->interrupted = 0;
	k->lost_records = k->lost_reported = k->truncated = k->aux_cut_bytes = k->polls = 0;
	k->n_snaps = 0;
	k->err[0] = 0;
}

/* Adds a step. */
RP_FN struct rp_step *rp_add(struct rp *k, size_t *cap)
{
	if (k->n_steps == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		k->steps = realloc(k->steps, *cap * sizeof(*k->steps));
	}
	struct rp_step *s = &k->steps[k->n_steps++];
	memset(s, 0, sizeof(*s));
	return s;
}

/* The source's sideband records (what the kernel writes for a sideband
 * attr: MMAP/MMAP2, COMM, EXIT, FORK, ITRACE_START, SWITCH*) as steps;
 * SAMPLE records too if @samples. */
RP_FN int rp_is_sideband(uint32_t t)
{
	return t == BTR_PERF_RECORD_MMAP || t == BTR_PERF_RECORD_COMM || t == BTR_PERF_RECORD_EXIT ||
	       t == BTR_PERF_RECORD_FORK || t == BTR_PERF_RECORD_MMAP2 || t == BTR_PERF_RECORD_ITRACE_START ||
	       t == BTR_PERF_RECORD_SWITCH || t == BTR_PERF_RECORD_SWITCH_CPU_WIDE;
}

RP_FN void rp_step_from(struct rp_step *st, const struct rp_src *s, size_t i)
{
	const struct rp_src_rec *r = &s->recs[i];
	st->kind = RP_DATA;
	st->cpu = r->cpu < 0 ? 0 : r->cpu;
	st->type = r->type;
	st->misc = r->misc;
	st->body = r->body;
	st->body_len = r->body_len;
	st->pid = r->pid;
	st->tid = r->tid;
	st->time = r->time;
	st->src_idx = i;
	if (r->type == BTR_PERF_RECORD_SAMPLE)
		st->sample = r;
}

/* ---- what the recorder wrote ---- */

/* A canonical line per record of the kinds both paths produce. */
RP_FN int rp_rec_line(const struct btr_record *r, char *out, size_t size)
{
	switch (r->type) {
	case BTR_REC_MODULE_LOAD:
		snprintf(out, size, "module pid=%u start=%llx size=%llx pgoff=%llx tsc=%llu %s", r->u.module.pid,
			 (unsigned long long)r->u.module.start, (unsigned long long)r->u.module.size,
			 (unsigned long long)r->u.module.pgoff, (unsigned long long)r->u.module.tsc,
			 r->u.module.path ? r->u.module.path : "");
		return 1;
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME:
		snprintf(out, size, "thread%d pid=%u tid=%u tsc=%llu %s", r->type, r->u.thread.pid, r->u.thread.tid,
			 (unsigned long long)r->u.thread.tsc, r->type == BTR_REC_THREAD_NAME ? r->u.thread.name : "");
		return 1;
	case BTR_REC_SWITCH:
		snprintf(out, size, "switch pid=%u tid=%u cpu=%d flags=%u tsc=%llu", r->u.sw.pid, r->u.sw.tid,
			 r->u.sw.cpu, r->u.sw.flags, (unsigned long long)r->u.sw.tsc);
		return 1;
	case BTR_REC_EXEC:
		snprintf(out, size, "exec pid=%u %s", r->u.module.pid, r->u.module.path ? r->u.module.path : "");
		return 1;
	case BTR_REC_LBR: {
		/* cpu first (lines are compared per CPU); -1 (recorded
		 * without PERF_SAMPLE_CPU) is the replay's CPU 0 */
		int k = snprintf(out, size, "lbr cpu=%d pid=%u tid=%u tsc=%llu ip=%llx n=%u",
				 r->u.lbr.cpu < 0 ? 0 : r->u.lbr.cpu, r->u.lbr.pid, r->u.lbr.tid,
				 (unsigned long long)r->u.lbr.tsc,
				 (unsigned long long)r->u.lbr.ip, r->u.lbr.count);
		for (uint32_t i = 0; i < r->u.lbr.count && (size_t)k + 64 < size; i++)
			k += snprintf(out + k, size - (size_t)k, " %llx>%llx/%x", (unsigned long long)r->u.lbr.entries[i].from,
				      (unsigned long long)r->u.lbr.entries[i].to, r->u.lbr.entries[i].flags);
		return 1;
	}
	default:
		return 0;
	}
}

/* Everything of a trace file (.btr or perf.data), as btr reads it: the
 * canonical lines (sorted or in order) and the AUX byte streams per CPU
 * (PT or BTS records, concatenated, with the number of jumps in
 * stream_offset). */
struct rp_trace {
	char **lines;
	size_t n_lines;
	uint8_t *aux[RP_MAX_CPU];
	uint64_t aux_len[RP_MAX_CPU];
	uint64_t next_off[RP_MAX_CPU];
	unsigned jumps[RP_MAX_CPU];
	/* per AUX record: { first byte in aux[cpu], MODULE_LOAD records
	 * before it in the file } */
	uint64_t *aux_at[RP_MAX_CPU];
	size_t n_aux_at[RP_MAX_CPU];
	uint64_t aux_cap[RP_MAX_CPU], at_cap[RP_MAX_CPU];   /* allocated (growth doubles) */
	uint64_t modules;
	int read_rc;
};

RP_FN void rp_trace_free(struct rp_trace *t)
{
	for (size_t i = 0; i < t->n_lines; i++)
		free(t->lines[i]);
	free(t->lines);
	for (int c = 0; c < RP_MAX_CPU; c++) {
		free(t->aux[c]);
		free(t->aux_at[c]);
	}
	memset(t, 0, sizeof(*t));
}

RP_FN int rp_trace_load(const char *path, struct rp_trace *t)
{
	memset(t, 0, sizeof(*t));
	struct btr_trace_reader *r;
	int rc = btr_trace_reader_new(path, &r);
	if (rc < 0)
		return rc;
	struct btr_record rec;
	size_t cap = 0;
	char line[8192];
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if (rec.type == BTR_REC_PT || rec.type == BTR_REC_BTS) {
			int c = rec.u.data.cpu < 0 ? 0 : rec.u.data.cpu;
			if (c >= RP_MAX_CPU)
				continue;
			if (t->aux_len[c] && rec.u.data.stream_offset != t->next_off[c])
				t->jumps[c]++;
			t->next_off[c] = rec.u.data.stream_offset + rec.u.data.size;
			if (t->n_aux_at[c] == t->at_cap[c]) {
				t->at_cap[c] = t->at_cap[c] ? 2 * t->at_cap[c] : 64;
				t->aux_at[c] = realloc(t->aux_at[c], t->at_cap[c] * 2 * sizeof(uint64_t));
			}
			t->aux_at[c][2 * t->n_aux_at[c]] = t->aux_len[c];
			t->aux_at[c][2 * t->n_aux_at[c]++ + 1] = t->modules;
			if (t->aux_len[c] + rec.u.data.size + 1 > t->aux_cap[c]) {
				/* doubling: a realloc per record is quadratic
				 * under ASan, whose realloc always copies */
				t->aux_cap[c] = 2 * (t->aux_len[c] + rec.u.data.size + 1);
				t->aux[c] = realloc(t->aux[c], t->aux_cap[c]);
			}
			memcpy(t->aux[c] + t->aux_len[c], rec.u.data.data, rec.u.data.size);
			t->aux_len[c] += rec.u.data.size;
			continue;
		}
		if (rec.type == BTR_REC_MODULE_LOAD)
			t->modules++;
		if (!rp_rec_line(&rec, line, sizeof(line)))
			continue;
		if (t->n_lines == cap)
			t->lines = realloc(t->lines, (cap = cap ? 2 * cap : 256) * sizeof(char *));
		t->lines[t->n_lines++] = strdup(line);
	}
	t->read_rc = rc == -BTR_ERR_EOS ? 0 : rc;
	btr_trace_reader_free(r);
	return 0;
}

RP_FN int rp_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Compares the lines of @a and @b that start with @prefix: in order
 * (@sorted 0) or as sorted lists.  Returns the index of the first
 * difference + 1 (printed), 0 if equal. */
RP_FN size_t rp_cmp_lines(const struct rp_trace *a, const struct rp_trace *b, const char *prefix, int sorted,
			   size_t *count)
{
	size_t na = 0, nb = 0;
	char **la = malloc((a->n_lines + 1) * sizeof(char *)), **lb = malloc((b->n_lines + 1) * sizeof(char *));
	size_t pl = strlen(prefix);
	for (size_t i = 0; i < a->n_lines; i++)
		if (!strncmp(a->lines[i], prefix, pl))
			la[na++] = a->lines[i];
	for (size_t i = 0; i < b->n_lines; i++)
		if (!strncmp(b->lines[i], prefix, pl))
			lb[nb++] = b->lines[i];
	if (sorted) {
		qsort(la, na, sizeof(char *), rp_cmp_str);
		qsort(lb, nb, sizeof(char *), rp_cmp_str);
	}
	size_t diff = 0;
	for (size_t i = 0; i < na || i < nb; i++) {
		if (i >= na || i >= nb || strcmp(la[i], lb[i])) {
			fprintf(stderr, "  first difference in '%s' lines at #%zu (of %zu / %zu):\n    got:  %.300s\n    want: %.300s\n",
				prefix, i, na, nb, i < na ? la[i] : "(none)", i < nb ? lb[i] : "(none)");
			diff = i + 1;
			break;
		}
	}
	if (count)
		*count = nb;
	free(la);
	free(lb);
	return diff;
}

/* ---- running the recorder ---- */

struct rp_run {
	int rc;
	struct btr_capture_result res;
	char err[4096];           /* what the recorder logged (warnings, errors) */
};

static char rp_log_buf[4096];
static size_t rp_log_len;

RP_FN void rp_log(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	size_t n = strlen(msg);
	if (rp_log_len + n + 2 < sizeof(rp_log_buf)) {
		memcpy(rp_log_buf + rp_log_len, msg, n);
		rp_log_len += n;
		rp_log_buf[rp_log_len++] = '\n';
		rp_log_buf[rp_log_len] = 0;
	}
}

/* Runs `btr record -b @backend` (with @opts, output @out) over replay
 * @k: the traced command is a real `sleep` that the replay ends. */
RP_FN int rp_record(struct rp *k, const char *backend, struct btr_capture_opts *opts, const char *out,
		     struct rp_run *run)
{
	static char *const argv[] = { "sleep", "60", NULL };
	/* `sleep` inherits the recorder's dispositions: one started with
	 * SIGINT ignored (a background job of a non-interactive shell)
	 * would outlive the replay's Ctrl-C, and the recording would wait
	 * for it forever. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	memset(run, 0, sizeof(*run));
	opts->sz = sizeof(*opts);
	opts->output = out;
	if (!opts->argv && !opts->system_wide && !opts->attach_pid)
		opts->argv = argv;
	unlink(out);
	rp_log_len = 0;
	rp_log_buf[0] = 0;
	btr_log_set(rp_log, NULL, BTR_LOG_WARN);
	const struct btr_perf_ops *old = btr_perf_ops_set(&k->ops);
	const struct btr_capture_backend *b = btr_capture_find(backend);
	run->rc = b ? b->record(opts, &run->res) : -BTR_ERR_INVAL;
	btr_perf_ops_set(old);
	btr_log_set(NULL, NULL, BTR_LOG_WARN);
	snprintf(run->err, sizeof(run->err), "%s", rp_log_buf);
	if (run->err[0])
		fprintf(stderr, "  recorder said: %s", run->err);
	if (k->err[0])
		fprintf(stderr, "  replay: protocol violation: %s\n", k->err);
	return run->rc;
}

/* @name in the build directory, unique to this process. */
RP_FN void rp_out_path(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/replay-%d-%s", BTR_BINARY_DIR, (int)getpid(), name);
}

/* ---- what the recorder must have written of the AUX streams ---- */

/* Appends bytes [pos, pos+len) of @src to *@buf (*@n bytes long). */
RP_FN void rp_take(uint8_t **buf, uint64_t *n, const uint8_t *src, uint64_t pos, uint64_t len)
{
	/* the allocation is the power of two at or above *n + 1 (doubling:
	 * ASan's realloc always copies) */
	uint64_t have = 64, need = 64;
	while (have < *n + 1)
		have *= 2;
	while (need < *n + len + 1)
		need *= 2;
	if (!*buf || need != have)
		*buf = realloc(*buf, need);
	memcpy(*buf + *n, src + pos, len);
	*n += len;
}

RP_FN int rp_same_bytes(const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb, const char *what, int cpu)
{
	if (na == nb && (!na || !memcmp(a, b, na)))
		return 1;
	uint64_t i = 0;
	while (i < na && i < nb && a[i] == b[i])
		i++;
	fprintf(stderr, "  %s, cpu %d: %llu bytes, want %llu; first difference at %llu\n", what, cpu,
		(unsigned long long)na, (unsigned long long)nb, (unsigned long long)i);
	return 0;
}

/* The AUX bytes of @cpu the replay delivered (steps before @upto, all of
 * them with 0), and the number of cuts (truncations) that have delivered
 * bytes after them: each must be a jump in the .btr's stream positions. */
RP_FN uint8_t *rp_want_delivered(const struct rp *k, int cpu, size_t upto, uint64_t *n, unsigned *cuts)
{
	uint8_t *want = malloc(64);   /* rp_take's smallest allocation */
	int pending = 0;
	*n = 0;
	*cuts = 0;
	for (size_t i = 0; i < (upto ? upto : k->n_steps); i++) {
		const struct rp_step *st = &k->steps[i];
		if (st->kind != RP_AUX || st->cpu != cpu)
			continue;
		uint64_t put = st->aux_done - st->aux_cut;
		rp_take(&want, n, st->aux, st->aux_pos, put);
		if (put && pending)
			(*cuts)++;
		if (st->aux_cut)
			pending = 1;
		else if (put)
			pending = 0;
	}
	return want;
}

/* The AUX bytes of @cpu a snapshot recording must hold: at each snapshot
 * (k->snaps, free-running kernel positions in @stream), until the area
 * (@aux_size) has wrapped what is new since the previous one; after that
 * the whole area.  *@windows: the whole-area windows (each may follow a
 * jump). */
RP_FN uint8_t *rp_want_snapshots(const struct rp *k, int cpu, const uint8_t *stream, uint64_t aux_size, uint64_t *n,
				  unsigned *windows)
{
	uint8_t *want = malloc(64);   /* rp_take's smallest allocation */
	uint64_t prev = 0;
	*n = 0;
	*windows = 0;
	for (unsigned i = 0; i < k->n_snaps; i++) {
		if (k->snaps[i].cpu != cpu || k->snaps[i].khead == prev)
			continue;
		uint64_t h = k->snaps[i].khead, from = h <= aux_size ? prev : h - aux_size;
		rp_take(&want, n, stream, from, h - from);
		*windows += h > aux_size;
		prev = h;
	}
	return want;
}

/* @n pseudo-random steps in [1, n_steps) (fixed @seed: reproducible)
 * for Ctrl-C. */
RP_FN void rp_random_cuts(const struct rp *k, size_t *cuts, int n, unsigned seed)
{
	for (int j = 0; j < n; j++) {
		seed = seed * 1103515245u + 12345u;
		cuts[j] = k->n_steps > 1 ? 1 + (seed >> 8) % (k->n_steps - 1) : 1;
	}
}

/* Whether @t (a full delivery of @k's steps) puts every AUX chunk after
 * the module records of every MMAP the kernel wrote before it, on any
 * CPU: a decoder reading the file in order must know a module before it
 * meets the trace that runs in it.  Says the first violation. */
RP_FN int rp_modules_before_aux(const struct rp *k, const struct rp_trace *t)
{
	uint64_t mmaps = 0;
	for (size_t i = 0; i < k->n_steps; i++) {
		const struct rp_step *st = &k->steps[i];
		if (st->kind == RP_DATA && (st->type == BTR_PERF_RECORD_MMAP || st->type == BTR_PERF_RECORD_MMAP2))
			mmaps++;
		int c = rp_cpu_of(k, st->cpu);
		if (st->kind != RP_AUX || !st->aux_len || c >= RP_MAX_CPU)
			continue;
		/* the .btr record holding the chunk's first byte */
		const uint64_t *at = t->aux_at[c];
		size_t j = 0;
		while (j + 1 < t->n_aux_at[c] && at[2 * (j + 1)] <= st->aux_pos)
			j++;
		if (!t->n_aux_at[c] || at[2 * j + 1] < mmaps) {
			fprintf(stderr, "  the AUX bytes at %llu of cpu %d follow %llu MMAP records in the kernel's order "
				"but only %llu module records in the .btr\n", (unsigned long long)st->aux_pos, c,
				(unsigned long long)mmaps, (unsigned long long)(t->n_aux_at[c] ? at[2 * j + 1] : 0));
			return 0;
		}
	}
	return 1;
}

/* `btr script -F @fields @path` (the CLI of this build): a hash of its
 * output in order, and its number of lines (*@lines; 0 if it failed). */
RP_FN uint64_t rp_script(const char *path, const char *fields, uint64_t *lines)
{
	char cmd[8192], buf[4096];
	snprintf(cmd, sizeof(cmd), "'%s/btr' script --no-progress -F %s '%s' 2>/dev/null", BTR_BINARY_DIR, fields, path);
	uint64_t h = 1469598103934665603ull;
	*lines = 0;
	FILE *f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f)) {
		for (const char *p = buf; *p; p++)
			h = (h ^ (uint8_t)*p) * 1099511628211ull;
		(*lines)++;
	}
	if (pclose(f) != 0)
		*lines = 0;
	return h;
}

#endif
