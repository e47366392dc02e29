/* step_core.c - the core of the "step" backend that both of its drivers
 * use: processes and their code cache (bytes read from /proc/PID/mem,
 * decoded instructions), module maps, threads, and the records written for
 * them (branches as BTS records, thread and process starts and ends).
 * The drivers are step.c (ptrace) and step_inproc.c (the --inproc
 * agent's ring); this file calls neither (tests/cli_layering.sh).
 */
#include "btr/bts.h"
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/trace.h"
#include "internal.h"
#include "agent/procmaps.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "step_priv.h"

volatile sig_atomic_t btr__step_child;

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

void step_wr(struct rec *r, const struct btr_record *rec)
{
	if (r->err)
		return;
	int rc = btr_trace_write(r->w, rec);
	if (rc < 0)
		r->err = rc;
}

struct proc *step_proc_find(struct rec *r, pid_t pid)
{
	for (struct proc *p = r->procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

void step_proc_reset(struct proc *p)
{
	/* An open /proc/PID/mem keeps the old address space: reopen it. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)p->pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		if (p->memfd >= 0)
			close(p->memfd);
		p->memfd = fd;
	}
	memset(p->pages, 0, NPAGES * sizeof(*p->pages));
	memset(p->ic, 0, NICACHE * sizeof(*p->ic));
	p->nmods = 0;
}

struct proc *step_proc_new(struct rec *r, pid_t pid)
{
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pages = calloc(NPAGES, sizeof(*p->pages));
	p->ic = calloc(NICACHE, sizeof(*p->ic));
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	p->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (!p->pages || !p->ic || p->memfd < 0) {
		if (p->memfd >= 0)
			close(p->memfd);
		free(p->pages);
		free(p->ic);
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->next = r->procs;
	r->procs = p;
	return p;
}

void step_proc_close(struct proc *p)
{
	if (p->memfd >= 0)
		close(p->memfd);
	p->memfd = -1;
	p->dead = 1;
}

const uint8_t *step_page_get(struct proc *p, uint64_t addr)
{
	uint64_t pa = addr & ~(uint64_t)(PAGE - 1);
	struct cpage *c = &p->pages[(pa / PAGE) % NPAGES];
	if (c->addr == pa + 1)
		return c->b;
	if (pread(p->memfd, c->b, PAGE, (off_t)pa) != (ssize_t)PAGE) {
		c->addr = 0;
		return NULL;
	}
	/* The cache holds the program's bytes, not our breakpoints. */
	for (int i = 0; i < MAX_BP; i++)
		if (p->bp[i].planted && (p->bp[i].addr & ~(uint64_t)(PAGE - 1)) == pa)
			c->b[p->bp[i].addr - pa] = p->bp[i].orig;
	for (size_t i = 0; i < p->nfbp; i++)
		if (p->fbp[i].planted && (p->fbp[i].addr & ~(uint64_t)(PAGE - 1)) == pa)
			c->b[p->fbp[i].addr - pa] = p->fbp[i].orig;
	c->addr = pa + 1;
	return c->b;
}

struct bp *step_bp_find(struct proc *p, uint64_t addr)
{
	for (int i = 0; i < MAX_BP; i++)
		if (p->bp[i].addr && p->bp[i].addr == addr)
			return &p->bp[i];
	/* the filter's breakpoints are sorted by address */
	size_t lo = 0, hi = p->nfbp;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->fbp[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < p->nfbp && p->fbp[lo].addr == addr ? &p->fbp[lo] : NULL;
}

static int poke_byte(struct proc *p, uint64_t addr, uint8_t v)
{
	return pwrite(p->memfd, &v, 1, (off_t)addr) == 1 ? 0 : -1;
}

void step_bp_plant(struct proc *p, struct bp *b)
{
	if (!b->addr || b->planted || p->dead)
		return;
	const uint8_t *pg = step_page_get(p, b->addr);
	if (!pg)
		return;
	b->orig = pg[b->addr & (PAGE - 1)];
	if (poke_byte(p, b->addr, 0xcc) == 0)
		b->planted = 1;
}

void step_bp_remove(struct proc *p, struct bp *b)
{
	if (b->planted && !p->dead && poke_byte(p, b->addr, b->orig) == 0)
		b->planted = 0;
}

/* Decodes the instruction at @ip through the caches.  Returns NULL if its
 * bytes cannot be read or decoded. */
const struct icache_ent *step_insn_at(struct proc *p, uint64_t ip)
{
	struct icache_ent *e = &p->ic[(ip ^ (ip >> 13)) % NICACHE];
	if (e->ip == ip + 1)
		return e;
	uint8_t bytes[16];
	size_t in_page = PAGE - (ip & (PAGE - 1)), n = in_page < 16 ? in_page : 16;
	const uint8_t *pg = step_page_get(p, ip);
	if (!pg)
		return NULL;
	memcpy(bytes, pg + (ip & (PAGE - 1)), n);
	if (n < 16) {
		const uint8_t *pg2 = step_page_get(p, ip + n);
		if (pg2)
			memcpy(bytes + n, pg2, 16 - n);
		else
			memset(bytes + n, 0, 16 - n);
		pg = step_page_get(p, ip);   /* may share the slot: keep the cache consistent */
		if (!pg)
			return NULL;
	}
	struct btr_insn in;
	if (btr_insn_decode(bytes, 16, ip, BTR_MODE_64, &in) <= 0)
		return NULL;
	e->ip = ip + 1;
	e->len = in.len;
	e->kind = in.kind;
	e->flags = (uint16_t)in.flags;
	e->target = in.target;
	return e;
}

static int known_mod(const struct proc *p, uint64_t a)
{
	for (size_t i = 0; i < p->nmods; i++)
		if (a >= p->mods[i].start && a < p->mods[i].end)
			return 1;
	return 0;
}

/* Writes a module record for every executable file mapping of @p not
 * written yet (/proc/PID/maps).  Called at the start, after exec, and
 * when a branch lands outside every known module (dlopen, mmap). */
void step_scan_maps(struct rec *r, struct proc *p)
{
	char line[4096 + 128];
	FILE *f = btr_procmaps_open(p->pid);
	if (!f)
		return;
	struct btr_procmap m;
	while (btr_procmaps_next(f, line, sizeof(line), &m)) {
		unsigned long long s = m.start, e = m.end, off = m.off;
		const char *perm = m.perm;
		char *file = m.file;
		if (perm[2] != 'x' || known_mod(p, s))
			continue;
		if (p->nmods == p->capmods) {
			size_t nc = p->capmods ? p->capmods * 2 : 16;
			struct mod *nm = realloc(p->mods, nc * sizeof(*nm));
			if (!nm)
				break;
			p->mods = nm;
			p->capmods = nc;
		}
		p->mods[p->nmods++] = (struct mod){ s, e };
		if (file[0] != '/')
			continue;   /* [vdso], anonymous code: no file to decode with */
		struct btr_record rec = { .type = BTR_REC_MODULE_LOAD };
		rec.u.module.pid = (uint32_t)p->pid;
		rec.u.module.prot = (perm[0] == 'r' ? 1 : 0) | (perm[1] == 'w' ? 2 : 0) | 4;
		rec.u.module.start = s;
		rec.u.module.size = e - s;
		rec.u.module.pgoff = off;
		rec.u.module.path = file;
		int n = btr_elf_build_id(file, rec.u.module.build_id, sizeof(rec.u.module.build_id));
		rec.u.module.build_id_len = n > 0 && n <= 20 ? (uint8_t)n : 0;
		step_wr(r, &rec);
		r->res->modules++;
	}
	fclose(f);
}

struct thr *step_thr_find(struct rec *r, pid_t tid)
{
	for (struct thr *t = r->thrs; t; t = t->next)
		if (t->tid == tid)
			return t;
	return NULL;
}

struct thr *step_thr_new(struct rec *r, pid_t tid, struct proc *p, pid_t parent)
{
	struct thr *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	uint32_t cap = r->o->ring ? r->o->ring : BATCH;
	t->buf = malloc((size_t)cap * BTR_BTS_RECORD_SIZE);
	t->cnt = malloc((size_t)cap * sizeof(uint32_t));
	if (r->o->ring)
		t->ring = calloc(cap, sizeof(*t->ring));
	if (!t->buf || !t->cnt || (r->o->ring && !t->ring)) {
		free(t->buf);
		free(t->cnt);
		free(t->ring);
		free(t);
		return NULL;
	}
	t->tid = tid;
	t->p = p;
	t->fresh = 1;
	t->stepping = !r->region && !r->ipf;
	t->next = r->thrs;
	r->thrs = t;
	r->res->threads++;
	struct btr_record rec = { .type = BTR_REC_THREAD_START };
	rec.u.thread.pid = (uint32_t)p->pid;
	rec.u.thread.tid = (uint32_t)tid;
	rec.u.thread.parent_tid = (uint32_t)parent;
	step_wr(r, &rec);
	return t;
}

static void write_batch(struct rec *r, struct thr *t, const uint8_t *buf, const uint32_t *cnt, unsigned n)
{
	if (!n)
		return;
	uint8_t tmp[4 * 256];
	/* The counts first: a reader pairs them with the BTS records that follow. */
	for (unsigned done = 0; done < n;) {
		unsigned k = n - done < 256 ? n - done : 256;
		for (unsigned i = 0; i < k; i++) {
			uint32_t v = cnt[done + i];
			tmp[4 * i] = (uint8_t)v;
			tmp[4 * i + 1] = (uint8_t)(v >> 8);
			tmp[4 * i + 2] = (uint8_t)(v >> 16);
			tmp[4 * i + 3] = (uint8_t)(v >> 24);
		}
		struct btr_record rec = { .type = BTR_REC_BTS_INSNS };
		rec.u.data.tid = (uint32_t)t->tid;
		rec.u.data.cpu = -1;
		rec.u.data.stream_offset = t->ins_off;
		rec.u.data.size = 4ull * k;
		rec.u.data.data = tmp;
		step_wr(r, &rec);
		t->ins_off += 4ull * k;
		done += k;
	}
	struct btr_record rec = { .type = BTR_REC_BTS };
	rec.u.data.tid = (uint32_t)t->tid;
	rec.u.data.cpu = -1;
	rec.u.data.stream_offset = t->off;
	rec.u.data.size = (uint64_t)n * BTR_BTS_RECORD_SIZE;
	rec.u.data.data = buf;
	step_wr(r, &rec);
	t->off += rec.u.data.size;
	r->res->pt_bytes += rec.u.data.size;
}

void step_flush_thr(struct rec *r, struct thr *t)
{
	if (t->ring) {
		/* Oldest first: the entries after the top of stack, then before. */
		unsigned n = 0, cap = r->o->ring;
		uint32_t first = t->used < cap ? 0 : t->tos;
		for (uint32_t i = 0; i < t->used; i++) {
			const struct ring_ent *e = &t->ring[(first + i) % cap];
			put64(t->buf + (size_t)n * 24, e->from);
			put64(t->buf + (size_t)n * 24 + 8, e->to);
			put64(t->buf + (size_t)n * 24 + 16, 0);
			t->cnt[n++] = e->insns;
		}
		write_batch(r, t, t->buf, t->cnt, n);
		t->used = t->tos = 0;
		return;
	}
	write_batch(r, t, t->buf, t->cnt, t->n);
	t->n = 0;
}

void step_flush_proc(struct rec *r, struct proc *p)
{
	for (struct thr *t = r->thrs; t; t = t->next)
		if (t->p == p)
			step_flush_thr(r, t);
}

void step_marker(struct rec *r, struct thr *t, uint64_t to, uint64_t flag)
{
	if (t->ring)
		return;   /* --ring is refused with --ip-filter */
	uint8_t *p = t->buf + (size_t)t->n * BTR_BTS_RECORD_SIZE;
	put64(p, 0);
	put64(p + 8, to);
	put64(p + 16, flag);
	t->cnt[t->n++] = 0;
	t->ninsn = 0;
	if (t->n == BATCH)
		step_flush_thr(r, t);
}

void step_branch(struct rec *r, struct thr *t, uint64_t from, uint64_t to, unsigned kind)
{
	r->res->branches++;
	if (t->ring) {
		struct btr_branch b = { .from = from, .to = to, .kind = (uint8_t)kind, .flags = BTR_BF_TAKEN };
		if (!btr_filter_match(&r->filter, &b))
			return;   /* its instructions count toward the next kept one */
		struct ring_ent *e = &t->ring[t->tos];
		e->from = from;
		e->to = to;
		e->insns = t->ninsn;
		t->tos = (t->tos + 1) % r->o->ring;
		if (t->used < r->o->ring)
			t->used++;
		t->ninsn = 0;
		return;
	}
	uint8_t *p = t->buf + (size_t)t->n * BTR_BTS_RECORD_SIZE;
	put64(p, from);
	put64(p + 8, to);
	put64(p + 16, 0);   /* flags: "predicted" (bit 4) unknown, left 0 */
	t->cnt[t->n++] = t->ninsn;
	t->ninsn = 0;
	if (t->n == BATCH)
		step_flush_thr(r, t);
}

/* The step from @t->prev_ip ended at @ip: count the instruction and write
 * the branch it took, if any. */
void step_account(struct rec *r, struct thr *t, uint64_t ip)
{
	if (!t->have_prev) {
		t->have_prev = 1;
		t->prev_ip = ip;
		return;
	}
	uint64_t from = t->prev_ip;
	const struct icache_ent *e = step_insn_at(t->p, from);
	if (ip == from && (!e || e->kind == BTR_KIND_NONE))
		return;   /* one iteration of a rep string instruction */
	t->ninsn++;
	t->prev_ip = ip;
	if (!e)
		return;
	if (e->kind == BTR_KIND_SYSCALL) {
		step_branch(r, t, from, 0, e->kind);
	} else if (e->kind != BTR_KIND_NONE) {
		int cond = e->kind == BTR_KIND_JCC || e->kind == BTR_KIND_LOOP || e->kind == BTR_KIND_JRCXZ;
		if (!cond || ip != from + e->len)
			step_branch(r, t, from, ip, e->kind);
	}
	if (ip != from + e->len && !known_mod(t->p, ip))
		step_scan_maps(r, t->p);
}

void step_write_process(struct rec *r, uint32_t pid, uint32_t ppid, uint32_t ev, const char *path,
			  char *const *argv)
{
	char args[4096];
	size_t len = 0;
	for (size_t i = 0; argv && argv[i]; i++) {
		size_t n = strlen(argv[i]) + 1;
		if (len + n > sizeof(args))
			break;
		memcpy(args + len, argv[i], n);
		len += n;
	}
	struct btr_record rec = { .type = BTR_REC_PROCESS };
	rec.u.process.pid = pid;
	rec.u.process.ppid = ppid;
	rec.u.process.event = ev;
	rec.u.process.path = path;
	rec.u.process.args = args;
	rec.u.process.args_len = (uint32_t)len;
	rec.u.process.detail = "";
	step_wr(r, &rec);
}

void step_exe_path(pid_t pid, char *buf, size_t size)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, buf, size - 1);
	buf[n > 0 ? n : 0] = 0;
}

void step_thr_free(struct rec *r, struct thr *t)
{
	for (struct thr **pp = &r->thrs; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	free(t->buf);
	free(t->cnt);
	free(t->ring);
	free(t);
}

/* @st: the thread's wait status (exited or killed), or -1 when it ended
 * otherwise (replaced by an exec). */
void step_thr_gone(struct rec *r, struct thr *t, int st)
{
	step_flush_thr(r, t);
	struct btr_record rec = { .type = BTR_REC_THREAD_EXIT };
	rec.u.thread.pid = (uint32_t)t->p->pid;
	rec.u.thread.tid = (uint32_t)t->tid;
	if (st != -1 && WIFEXITED(st)) {
		rec.u.thread.end = BTR_THREAD_END_EXITED;
		rec.u.thread.exit_code = WEXITSTATUS(st);
	} else if (st != -1 && WIFSIGNALED(st)) {
		rec.u.thread.end = BTR_THREAD_END_KILLED;
		rec.u.thread.signo = WTERMSIG(st);
	}
	step_wr(r, &rec);
	step_thr_free(r, t);
}

void step_exit_status(struct rec *r, struct thr *t, int st)
{
	struct proc *p = t->p;
	/* The last step of a thread that leaves by exit/exit_group is a syscall
	 * that never returns: write it as every other syscall. */
	if (t->have_prev && t->stepping) {
		const struct icache_ent *e = step_insn_at(p, t->prev_ip);
		if (e && e->kind == BTR_KIND_SYSCALL && WIFEXITED(st)) {
			t->ninsn++;
			step_branch(r, t, t->prev_ip, 0, e->kind);
		}
	}
	int leader = t->tid == p->pid;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
	struct thr saved = *t;
	step_thr_gone(r, t, st);
	if (!leader)
		return;
	step_flush_proc(r, p);
	struct btr_record rec = { .type = BTR_REC_PROCESS_EXIT };
	rec.u.exit.pid = (uint32_t)p->pid;
	rec.u.exit.tid = (uint32_t)p->pid;
	rec.u.exit.code = code;
	if (WIFSIGNALED(st)) {
		rec.u.exit.signo = WTERMSIG(st);
		/* The thread that got the fatal signal (the leader reports it). */
		for (struct thr *o = r->thrs; o; o = o->next)
			if (o->p == p && o->last_sig == rec.u.exit.signo)
				saved = *o;
		if (saved.last_sig == rec.u.exit.signo) {
			rec.u.exit.tid = (uint32_t)saved.tid;
			rec.u.exit.ip = saved.last_sig_ip;
			rec.u.exit.addr = saved.last_sig_addr;
		}
	}
	step_wr(r, &rec);
	step_proc_close(p);
	if (p->pid == r->root) {
		r->exited_root = 1;
		r->res->exited = WIFEXITED(st);
		r->res->code = code;
		r->res->signo = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
		r->res->crash_ip = rec.u.exit.ip;
	}
}
