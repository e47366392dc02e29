/* step_filter.c - `btr record -b step --ip-filter SPEC`: the ranges, and
 * the breakpoints that let a thread run at full speed outside them.
 *
 * A range is given as for -b pt and -b qemu (btr_ip_filter_parse: file
 * offsets of FILE) and mapped onto every executable mapping of FILE in
 * every traced process (/proc/PID/maps: at the start, after exec, and after
 * each mmap/mprotect that a thread running free makes, so a library loaded
 * later is found).  A thread is stepped only while its IP is inside a
 * range; where a step leaves the ranges step.c writes a PGD marker and
 * lets the thread run free (PTRACE_SYSCALL), where it comes back a PGE
 * marker (btr/bts.h).  It comes back at a breakpoint (int3): at the start
 * of each range and of each function inside one (calls, signal handlers,
 * callbacks, jumps to a function), and at the places a left range will be
 * resumed (the return address of a call that left, the instruction a
 * signal whose handler is outside interrupted, the return address on the
 * stack when a jump left).  Every breakpoint is inside a range, so a hit
 * always means "inside".  Flow that enters a range elsewhere (a longjmp, a
 * computed jump into the middle of a function) is not traced until the
 * next breakpoint (docs/record.md).
 *
 * This file uses step_core.c; step.c uses it (tests/cli_layering.sh).
 */
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/insn.h"
#include "btr/perfattr.h"
#include "btr/trace.h"
#include "internal.h"
#include "agent/procmaps.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "step_priv.h"

#define MAX_FBP 65536u   /* breakpoints per process (beyond: not planted) */

int step_filter_parse(struct rec *r)
{
	const struct btr_capture_opts *o = r->o;
	const char *const *spec = BTR_OPTS_GET(o, ip_filters, NULL);
	unsigned n = BTR_OPTS_GET(o, n_ip_filters, 0);
	if (!n || !spec)
		return 0;
	if (n > BTR_PT_MAX_FILTERS) {
		btr_err("--ip-filter: at most %d ranges", BTR_PT_MAX_FILTERS);
		return -BTR_ERR_INVAL;
	}
	r->ipf = calloc(n, sizeof(*r->ipf));
	if (!r->ipf)
		return -BTR_ERR_NOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct btr_ip_filter f;
		int rc = btr_ip_filter_parse(spec[i], &f);
		if (rc < 0)
			return rc;   /* the parser said why */
		if (!f.module[0]) {
			btr_err("--ip-filter '%s': -b step traces user code only: give the file (START-END@FILE or "
				"SYM@FILE)", spec[i]);
			return -BTR_ERR_INVAL;
		}
		if (!realpath(f.module, r->ipf[i].file)) {
			btr_err("--ip-filter: %s: %s", f.module, strerror(errno));
			return btr_err_from_errno(errno);
		}
		r->ipf[i].start = f.start;
		r->ipf[i].end = f.end;
	}
	r->n_ipf = n;
	return 0;
}

void step_filter_records(struct rec *r)
{
	for (unsigned i = 0; i < r->n_ipf; i++) {
		struct btr_record rec = { .type = BTR_REC_IP_FILTER };
		rec.u.module.pgoff = r->ipf[i].start;
		rec.u.module.size = r->ipf[i].end - r->ipf[i].start + 1;
		rec.u.module.path = r->ipf[i].file;
		step_wr(r, &rec);
	}
}

int step_filter_inside(const struct proc *p, uint64_t ip)
{
	for (size_t i = 0; i < p->nfr; i++)
		if (ip >= p->fr[i].lo && ip <= p->fr[i].hi)
			return 1;
	return 0;
}

int step_filter_bp_add(struct proc *p, uint64_t addr)
{
	if (!addr || !step_filter_inside(p, addr))
		return -1;
	struct bp *b = step_bp_find(p, addr);
	if (b) {
		step_bp_plant(p, b);
		return b->planted ? 0 : -1;
	}
	if (p->nfbp == MAX_FBP)
		return -1;
	if (p->nfbp == p->capfbp) {
		size_t nc = p->capfbp ? p->capfbp * 2 : 64;
		struct bp *nb = realloc(p->fbp, nc * sizeof(*nb));
		if (!nb)
			return -1;
		p->fbp = nb;
		p->capfbp = nc;
	}
	size_t k = p->nfbp;
	while (k && p->fbp[k - 1].addr > addr)
		k--;
	memmove(p->fbp + k + 1, p->fbp + k, (p->nfbp - k) * sizeof(*p->fbp));
	p->fbp[k] = (struct bp){ .addr = addr };
	p->nfbp++;
	step_bp_plant(p, &p->fbp[k]);
	return p->fbp[k].planted ? 0 : -1;
}

int step_filter_is_return_addr(struct proc *p, uint64_t addr)
{
	/* call rel32 (5 bytes) or call r/m (2 to 7 bytes) just before it */
	for (unsigned len = 2; len <= 7 && len < addr; len++) {
		const struct icache_ent *e = step_insn_at(p, addr - len);
		if (e && e->len == len && (e->kind == BTR_KIND_CALL || e->kind == BTR_KIND_CALL_IND))
			return 1;
	}
	return 0;
}

static int on_fn(void *ctx, const struct btr_function *fn)
{
	step_filter_bp_add(ctx, fn->start);
	return 0;
}

void step_filter_scan(struct rec *r, struct proc *p)
{
	if (!r->n_ipf || p->dead)
		return;
	char line[4096 + 128];
	FILE *f = btr_procmaps_open(p->pid);
	if (!f)
		return;
	struct btr_procmap m;
	size_t old = p->nfr;
	while (btr_procmaps_next(f, line, sizeof(line), &m)) {
		if (m.perm[2] != 'x' || m.file[0] != '/')
			continue;
		for (unsigned i = 0; i < r->n_ipf; i++) {
			const struct fspec *s = &r->ipf[i];
			uint64_t len = m.end - m.start;
			if (strcmp(s->file, m.file) || s->end < m.off || s->start >= m.off + len)
				continue;
			uint64_t lo = m.start + (s->start > m.off ? s->start - m.off : 0);
			uint64_t hi = m.start + (s->end - m.off < len ? s->end - m.off : len - 1);
			int known = 0;
			for (size_t k = 0; k < p->nfr; k++)
				known |= p->fr[k].lo == lo && p->fr[k].hi == hi;
			if (known)
				continue;
			if (p->nfr == p->capfr) {
				size_t nc = p->capfr ? p->capfr * 2 : 8;
				struct frange *nr = realloc(p->fr, nc * sizeof(*nr));
				if (!nr)
					continue;
				p->fr = nr;
				p->capfr = nc;
			}
			p->fr[p->nfr++] = (struct frange){ lo, hi };
		}
	}
	fclose(f);
	if (p->nfr == old)
		return;
	/* Breakpoints at the starts of the new ranges and of the functions
	 * that start inside them (their symbols, through the image API). */
	struct btr_image *img = NULL;
	if (btr_image_new(&img) == 0) {
		f = btr_procmaps_open(p->pid);
		while (f && btr_procmaps_next(f, line, sizeof(line), &m)) {
			uint64_t bias;
			if (m.perm[2] != 'x' || m.file[0] != '/')
				continue;
			for (unsigned i = 0; i < r->n_ipf; i++)
				if (!strcmp(r->ipf[i].file, m.file) &&
				    btr_elf_load_bias(m.file, m.start, m.off, &bias) == 0) {
					btr_image_add_elf(img, m.file, bias, 0);
					break;
				}
		}
		if (f)
			fclose(f);
	}
	for (size_t k = old; k < p->nfr; k++) {
		step_filter_bp_add(p, p->fr[k].lo);
		if (img)
			btr_image_foreach_function(img, p->fr[k].lo, p->fr[k].hi + 1, on_fn, p);
	}
	btr_image_free(img);
}

int step_filter_fork(struct proc *child, const struct proc *parent)
{
	if (parent->nfbp) {
		child->fbp = malloc(parent->nfbp * sizeof(*child->fbp));
		if (!child->fbp)
			return -1;
		memcpy(child->fbp, parent->fbp, parent->nfbp * sizeof(*child->fbp));
		child->nfbp = child->capfbp = parent->nfbp;
	}
	if (parent->nfr) {
		child->fr = malloc(parent->nfr * sizeof(*child->fr));
		if (!child->fr)
			return -1;
		memcpy(child->fr, parent->fr, parent->nfr * sizeof(*child->fr));
		child->nfr = child->capfr = parent->nfr;
	}
	return 0;
}

void step_filter_reset(struct proc *p)
{
	p->nfbp = 0;
	p->nfr = 0;
}
