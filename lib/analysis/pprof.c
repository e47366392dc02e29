/* pprof.c - a pprof profile (profile.proto, gzipped) of the call stacks:
 * one sample per distinct stack with its instructions (or branches) and
 * TSC ticks where the trace has them, functions with file and start line,
 * one location per function, mappings with build-ids (btr/profile.h,
 * docs/pprof.md).
 *
 * profile.proto field numbers used (github.com/google/pprof, proto3):
 *   Profile: sample_type 1, sample 2, mapping 3, location 4, function 5,
 *            string_table 6, period_type 11, period 12, comment 13
 *   ValueType: type 1, unit 2          Sample: location_id 1, value 2
 *   Mapping: id 1, memory_start 2, memory_limit 3, file_offset 4,
 *            filename 5, build_id 6, has_functions 7, has_filenames 8,
 *            has_line_numbers 9
 *   Location: id 1, mapping_id 2, address 3, line 4
 *   Line: function_id 1, line 2
 *   Function: id 1, name 2, system_name 3, filename 4, start_line 5
 * Strings are indices into string_table, whose entry 0 is "".
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/callstack.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/image.h"
#include "btr/profile.h"
#include "internal.h"
#include "profutil.h"

struct pmod {
	uint64_t start, end, pgoff;
	uint32_t pid;
	char *path;
	char *file;   /* the file loaded for it (as btr_cs_func.module), or NULL */
	char buildid[41];
};

struct strtab {
	char **s;
	size_t n, cap;
	/* open addressing: index + 1 */
	uint32_t *h;
	size_t hcap;
	int nomem;
};

struct pprof {
	struct btr_profile_opts o;
	struct btr_callstack *cs;
	struct pmod *mods;
	size_t nmods, capmods;
	uint8_t *out;         /* the encoded profile (end) */
	size_t outlen;
	int nomem;
	struct btr_stream *s; /* the stream (begin to end) */
};

static uint64_t shash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static int64_t str_id(struct strtab *t, const char *s)
{
	if (!s)
		s = "";
	if ((t->n + 1) * 2 > t->hcap) {
		size_t nc = t->hcap ? t->hcap * 2 : 256;
		uint32_t *nh = calloc(nc, sizeof(*nh));
		if (!nh) {
			t->nomem = 1;
			return 0;
		}
		for (size_t i = 0; i < t->n; i++) {
			size_t j = shash(t->s[i]) & (nc - 1);
			while (nh[j])
				j = (j + 1) & (nc - 1);
			nh[j] = (uint32_t)i + 1;
		}
		free(t->h);
		t->h = nh;
		t->hcap = nc;
	}
	size_t j = shash(s) & (t->hcap - 1);
	while (t->h[j]) {
		if (!strcmp(t->s[t->h[j] - 1], s))
			return t->h[j] - 1;
		j = (j + 1) & (t->hcap - 1);
	}
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 256;
		char **ns = realloc(t->s, nc * sizeof(*ns));
		if (!ns) {
			t->nomem = 1;
			return 0;
		}
		t->s = ns;
		t->cap = nc;
	}
	if (!(t->s[t->n] = strdup(s))) {
		t->nomem = 1;
		return 0;
	}
	t->h[j] = (uint32_t)t->n + 1;
	return (int64_t)t->n++;
}

static void str_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->h);
}

/* The backends whose branches always carry instruction counts (Intel PT
 * decoded, the QEMU plugin's PT, stepping's counted side stream). */
static int backend_counts_insns(const char *b)
{
	return b && (!strcmp(b, "qemu") || !strcmp(b, "pt") || !strcmp(b, "step"));
}

static int p_begin(void *p, struct btr_stream *s)
{
	struct pprof *pp = p;
	pp->s = s;   /* its backend is known once its MACHINE record is read */
	btr_callstack_begin(pp->cs, s);
	return 0;
}

static int p_branches(void *p, const struct btr_branch *b, size_t n)
{
	return btr_callstack_branches(((struct pprof *)p)->cs, b, n);
}

static int p_fold_ok(void *p, uint32_t tid)
{
	return btr_callstack_fold_ok(((struct pprof *)p)->cs, tid);
}

static int p_fold_block(void *p, uint32_t pid, uint64_t start, uint64_t from, uint64_t to)
{
	return btr_callstack_fold_block(((struct pprof *)p)->cs, pid, start, from, to);
}

static int p_event(void *p, const struct btr_stream_event *ev)
{
	struct pprof *pp = p;
	if (ev->type == BTR_SEV_MODULE_LOAD && ev->rec) {
		const struct btr_rec_module *m = &ev->rec->u.module;
		if (pp->nmods == pp->capmods) {
			size_t nc = pp->capmods ? pp->capmods * 2 : 16;
			struct pmod *nm = realloc(pp->mods, nc * sizeof(*nm));
			if (!nm)
				return -BTR_ERR_NOMEM;
			pp->mods = nm;
			pp->capmods = nc;
		}
		struct pmod *d = &pp->mods[pp->nmods];
		memset(d, 0, sizeof(*d));
		d->start = m->start;
		d->end = m->start + m->size;
		d->pgoff = m->pgoff;
		d->pid = m->pid;
		if (!(d->path = strdup(m->path ? m->path : "")))
			return -BTR_ERR_NOMEM;
		if (ev->path && !(d->file = strdup(ev->path))) {
			free(d->path);
			return -BTR_ERR_NOMEM;
		}
		uint8_t id[20];
		int len = m->build_id_len;
		if (len)
			memcpy(id, m->build_id, (size_t)len);
		else if (ev->path)
			len = btr_elf_build_id(ev->path, id, sizeof(id));
		for (int i = 0; i < len && i < 20; i++)
			snprintf(d->buildid + 2 * i, 3, "%02x", id[i]);
		pp->nmods++;
	}
	return btr_callstack_event(pp->cs, ev);
}

/* The mapping of function @f: one of its process (btr_cs_func.pid: the
 * process where f->addr is its entry) holding f->addr, of its module file
 * if known; else, as a fallback, the first mapping holding f->addr (a
 * forked child has no mappings of its own).  0 if none. */
static uint64_t mapping_of(const struct pprof *pp, const struct btr_cs_func *f)
{
	uint64_t best = 0;
	int best_score = -1;
	for (size_t i = 0; i < pp->nmods; i++) {
		const struct pmod *d = &pp->mods[i];
		if (f->addr < d->start || f->addr >= d->end)
			continue;
		int score = (d->pid == f->pid) * 2 + (!f->module || (d->file && !strcmp(d->file, f->module)));
		if (score > best_score) {
			best = i + 1;
			best_score = score;
			if (score == 3)
				break;
		}
	}
	return best;
}

static void value_type(struct pbuf *b, unsigned field, struct strtab *st, const char *type, const char *unit)
{
	struct pbuf v = { 0 };
	pb_sint(&v, 1, str_id(st, type));
	pb_sint(&v, 2, str_id(st, unit));
	pb_msg(b, field, &v);
	pb_free(&v);
}

/* Encodes the whole profile now, while names are at hand. */
static int encode(struct pprof *pp)
{
	const struct btr_callstack *cs = pp->cs;
	struct strtab st = { 0 };
	struct pbuf prof = { 0 }, m = { 0 }, line = { 0 }, ids = { 0 }, vals = { 0 };
	int time = btr_callstack_has_time(cs);
	int rc = 0;
	str_id(&st, "");
	/* the unit the samples are counted in; a profile of no samples
	 * (--pid of no process, a filter that keeps nothing) names the unit
	 * its trace counts in, as a profile of some of its branches would */
	size_t nn = btr_callstack_nnodes(cs);
	int samples = 0;
	for (uint32_t i = 1; i < nn && !samples; i++)
		samples = btr_callstack_node(cs, i)->self_cost || btr_callstack_node(cs, i)->self_time;
	int insns = samples ? btr_callstack_has_insns(cs) : backend_counts_insns(btr_stream_backend(pp->s));
	const char *unit = insns ? "instructions" : "branches";
	value_type(&prof, 1, &st, unit, "count");
	if (time)
		value_type(&prof, 1, &st, "time", "ticks");
	/* samples: one per stack that has a cost of its own, leaf first */
	for (uint32_t i = 1; i < nn; i++) {
		const struct btr_cs_node *nd = btr_callstack_node(cs, i);
		if (!nd->self_cost && !nd->self_time)
			continue;
		ids.len = vals.len = m.len = 0;
		for (uint32_t k = i; k; k = btr_callstack_node(cs, k)->parent)
			pb_varint(&ids, (uint64_t)btr_callstack_node(cs, k)->func + 1);
		pb_varint(&vals, nd->self_cost);
		if (time)
			pb_varint(&vals, nd->self_time);
		pb_msg(&m, 1, &ids);    /* packed repeated */
		pb_msg(&m, 2, &vals);
		pb_msg(&prof, 2, &m);
	}
	for (size_t i = 0; i < pp->nmods; i++) {
		const struct pmod *d = &pp->mods[i];
		m.len = 0;
		pb_uint(&m, 1, i + 1);
		pb_uint(&m, 2, d->start);
		pb_uint(&m, 3, d->end);
		pb_uint(&m, 4, d->pgoff);
		pb_sint(&m, 5, str_id(&st, d->path));
		pb_sint(&m, 6, str_id(&st, d->buildid));
		pb_uint(&m, 7, 1);
		pb_uint(&m, 8, 1);
		pb_uint(&m, 9, 1);
		pb_msg(&prof, 3, &m);
	}
	/* one location and one function per function of the call stacks */
	size_t nf = btr_callstack_nfuncs(cs);
	for (uint32_t i = 0; i < nf; i++) {
		const struct btr_cs_func *f = btr_callstack_func(cs, i);
		line.len = m.len = 0;
		pb_uint(&line, 1, (uint64_t)i + 1);
		pb_sint(&line, 2, f->line);
		pb_uint(&m, 1, (uint64_t)i + 1);
		pb_uint(&m, 2, mapping_of(pp, f));
		pb_uint(&m, 3, f->addr);
		pb_msg(&m, 4, &line);
		pb_msg(&prof, 4, &m);
		m.len = 0;
		pb_uint(&m, 1, (uint64_t)i + 1);
		pb_sint(&m, 2, str_id(&st, f->name));
		pb_sint(&m, 3, str_id(&st, f->name));
		pb_sint(&m, 4, str_id(&st, f->file ? f->file : f->module));
		pb_sint(&m, 5, f->line);
		pb_msg(&prof, 5, &m);
	}
	/* period type, then the strings (all ids are known now) */
	value_type(&prof, 11, &st, unit, "count");
	pb_sint(&prof, 12, 1);
	int64_t c = str_id(&st, "btr: instructions are exact counts from a branch trace, not samples");
	pb_tag(&prof, 13, 0);
	pb_varint(&prof, (uint64_t)c);
	for (size_t i = 0; i < st.n; i++)
		pb_str(&prof, 6, st.s[i]);
	if (prof.nomem || m.nomem || line.nomem || ids.nomem || vals.nomem || st.nomem)
		rc = -BTR_ERR_NOMEM;
	else
		rc = prof_gzip(prof.p, prof.len, &pp->out, &pp->outlen);
	pb_free(&prof);
	pb_free(&m);
	pb_free(&line);
	pb_free(&ids);
	pb_free(&vals);
	str_free(&st);
	return rc;
}

static int p_end(void *p, int status)
{
	struct pprof *pp = p;
	int rc = btr_callstack_end(pp->cs);
	rc = rc ? rc : encode(pp);
	pp->s = NULL;
	return rc;
}

static int p_write(void *p, FILE *out, const char *format)
{
	struct pprof *pp = p;
	if (!pp->out)
		return -BTR_ERR_INVAL;
	if (!format || !strcmp(format, "pb")) {
		if (fwrite(pp->out, 1, pp->outlen, out) != pp->outlen)
			return -BTR_ERR_IO;
		return 0;
	}
	if (!strcmp(format, "pb-raw")) {
		uint8_t *raw;
		size_t n;
		int rc = prof_gunzip(pp->out, pp->outlen, &raw, &n);
		if (rc)
			return rc;
		rc = fwrite(raw, 1, n, out) == n ? 0 : -BTR_ERR_IO;
		free(raw);
		return rc;
	}
	return -BTR_ERR_INVAL;
}

static void p_destroy(void *p)
{
	struct pprof *pp = p;
	btr_callstack_free(pp->cs);
	for (size_t i = 0; i < pp->nmods; i++) {
		free(pp->mods[i].path);
		free(pp->mods[i].file);
	}
	free(pp->mods);
	free(pp->out);
	free(pp);
}

static const char *const pprof_formats[] = { "pb", "pb-raw", NULL };

const struct btr_analysis_ops btr__pprof_ops = {
	.name = "pprof", .begin = p_begin, .branches = p_branches, .fold_ok = p_fold_ok, .fold_block = p_fold_block, .event = p_event,
	.end = p_end, .write = p_write, .destroy = p_destroy,
	.formats = pprof_formats,
};

int btr_pprof_new(const struct btr_profile_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct pprof *pp = calloc(1, sizeof(*pp));
	if (!pp)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&pp->o, opts);
	struct btr_callstack_opts co = { .sz = sizeof(co), .lines = 1 };
	int rc = btr_callstack_new(&co, &pp->cs);
	if (rc) {
		free(pp);
		return rc;
	}
	return btr_analysis_new(&btr__pprof_ops, pp, out);
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__pprof_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_profile_opts o = { .sz = sizeof(o), .events = a->events, .module = a->module };
	return btr_pprof_new(&o, out);
}
