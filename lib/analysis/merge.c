/* merge.c - merging profiles of many runs or machines: BOLT fdata, BOLT
 * pre-aggregated, pprof and folded stacks (btr/profile.h, docs/merge.md).
 *
 * Every kind becomes a table of keys with counts that add.  The output is
 * written in a canonical order (sorted keys, ids numbered in that order),
 * and pprof mappings keep the lowest start address seen, so the result
 * depends only on the multiset of inputs: merging is associative and
 * commutative and can run as a tree over a fleet's files.
 *
 * pprof: modules are matched by build-id (by file name when a mapping has
 * none); a location is (module, offset in the module, lines), so the same
 * code at different load addresses (ASLR) is one location; functions are
 * matched by name, system name, file and start line; samples by their
 * stack of locations (labels are dropped).  Values add per sample type;
 * the sample types must be the same in every input.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "btr/profile.h"
#include "afdo_tree.h"
#include "internal.h"
#include "profutil.h"

#define MAXV 8   /* values per key */

/* ---- a table of byte-string keys ---- */
struct kent {
	char *key;
	size_t len;
	uint64_t v[MAXV];
	uint64_t aux[3];   /* kind-specific (pprof mappings: start, limit, offset) */
};

struct ktab {
	struct kent *e;
	size_t n, cap;
	uint32_t *h;
	size_t hcap;
	int nomem;
};

static uint64_t khash(const char *k, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)k[i]) * 1099511628211ull;
	return h;
}

/* The entry of @key (created zeroed); its index in *@idx.  NULL if out of memory. */
static struct kent *kget(struct ktab *t, const char *key, size_t len, size_t *idx)
{
	if ((t->n + 1) * 2 > t->hcap) {
		size_t nc = t->hcap ? t->hcap * 2 : 256;
		uint32_t *nh = calloc(nc, sizeof(*nh));
		if (!nh)
			goto nomem;
		for (size_t i = 0; i < t->n; i++) {
			size_t j = khash(t->e[i].key, t->e[i].len) & (nc - 1);
			while (nh[j])
				j = (j + 1) & (nc - 1);
			nh[j] = (uint32_t)i + 1;
		}
		free(t->h);
		t->h = nh;
		t->hcap = nc;
	}
	size_t j = khash(key, len) & (t->hcap - 1);
	while (t->h[j]) {
		struct kent *e = &t->e[t->h[j] - 1];
		if (e->len == len && !memcmp(e->key, key, len)) {
			if (idx)
				*idx = t->h[j] - 1;
			return e;
		}
		j = (j + 1) & (t->hcap - 1);
	}
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 256;
		struct kent *ne = realloc(t->e, nc * sizeof(*ne));
		if (!ne)
			goto nomem;
		t->e = ne;
		t->cap = nc;
	}
	struct kent *e = &t->e[t->n];
	memset(e, 0, sizeof(*e));
	if (!(e->key = malloc(len + 1)))
		goto nomem;
	memcpy(e->key, key, len);
	e->key[len] = 0;
	e->len = len;
	t->h[j] = (uint32_t)t->n + 1;
	if (idx)
		*idx = t->n;
	t->n++;
	return e;
nomem:
	t->nomem = 1;
	return NULL;
}

static void kfree(struct ktab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->e[i].key);
	free(t->e);
	free(t->h);
	memset(t, 0, sizeof(*t));
}

static int kcmp(const void *a, const void *b)
{
	const struct kent *x = *(struct kent *const *)a, *y = *(struct kent *const *)b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->key, y->key, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Entries sorted by key (array of pointers, malloc'd). */
static struct kent **ksorted(struct ktab *t)
{
	struct kent **s = malloc((t->n ? t->n : 1) * sizeof(*s));
	if (!s)
		return NULL;
	for (size_t i = 0; i < t->n; i++)
		s[i] = &t->e[i];
	qsort(s, t->n, sizeof(*s), kcmp);
	return s;
}

/* ---- the merge ---- */
struct btr_merge {
	enum btr_merge_kind kind;
	struct ktab rec;          /* text kinds: records; pprof: samples */
	char *header;             /* fdata: "no_lbr ..." / "boltedcollection" lines */
	unsigned nvals;           /* fdata: values per line (1 no_lbr, 2 lbr) */
	int inputs;
	int have_header;          /* fdata: an input with records or a header set @header */
	/* pprof */
	struct ktab types;        /* sample types "type\0unit" in order (v[0] = position) */
	char **type_list;
	size_t ntypes;
	struct ktab maps, funcs, locs, comments;
	char *period_type;        /* "type\0unit" of the first input */
	size_t period_type_len;
	uint64_t period;
	struct afdo_prof afdo;    /* sample profiles */
};

enum btr_merge_kind btr_merge_detect(const uint8_t *d, size_t n)
{
	if (n >= 2 && d[0] == 0x1f && d[1] == 0x8b)
		return BTR_MERGE_PPROF;
	if (n && d[0] == 0x0a)   /* field 1 (sample_type), length-delimited */
		return BTR_MERGE_PPROF;
	size_t i = 0;
	while (i < n && (d[i] == '\n' || d[i] == ' '))
		i++;
	if (i >= n)
		return BTR_MERGE_UNKNOWN;
	const char *p = (const char *)d + i;
	size_t rest = n - i;
	if (rest > 2 && (p[0] == 'B' || p[0] == 'F' || p[0] == 'f') && p[1] == ' ')
		return BTR_MERGE_FDATA_PA;
	if ((rest >= 6 && !memcmp(p, "no_lbr", 6)) || (rest >= 16 && !memcmp(p, "boltedcollection", 16)))
		return BTR_MERGE_FDATA;
	/* "0|1 NAME OFF 0|1 NAME OFF MIS COUNT" */
	size_t end = 0;
	while (end < rest && p[end] != '\n')
		end++;
	unsigned fields = 0;
	for (size_t k = 0; k < end; k++)
		if (p[k] != ' ' && (k == 0 || p[k - 1] == ' '))
			fields++;
	if (fields == 8 && (p[0] >= '0' && p[0] <= '4') && p[1] == ' ')
		return BTR_MERGE_FDATA;
	if (afdo_looks_like(p, rest))
		return BTR_MERGE_AFDO;
	for (size_t k = 0; k < end; k++)
		if ((unsigned char)p[k] < 0x20 && p[k] != '\t')
			return BTR_MERGE_UNKNOWN;
	return BTR_MERGE_FOLDED;
}

int btr_merge_new(enum btr_merge_kind kind, struct btr_merge **out)
{
	if (!out || kind <= BTR_MERGE_UNKNOWN || kind > BTR_MERGE_AFDO)
		return -BTR_ERR_INVAL;
	struct btr_merge *m = calloc(1, sizeof(*m));
	if (!m)
		return -BTR_ERR_NOMEM;
	m->kind = kind;
	*out = m;
	return 0;
}

void btr_merge_free(struct btr_merge *m)
{
	if (!m)
		return;
	kfree(&m->rec);
	afdo_free(&m->afdo);
	kfree(&m->types);
	kfree(&m->maps);
	kfree(&m->funcs);
	kfree(&m->locs);
	kfree(&m->comments);
	free(m->type_list);
	free(m->header);
	free(m->period_type);
	free(m);
}

static int parse_u64(const char *s, size_t n, uint64_t *v)
{
	uint64_t x = 0;
	if (!n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = x;
	return 0;
}

/* One text line: the key is everything before the last @nv fields. */
static int add_line(struct btr_merge *m, const char *l, size_t n, unsigned nv, unsigned lineno)
{
	size_t end = n;
	uint64_t v[MAXV];
	for (unsigned k = nv; k-- > 0;) {
		while (end && l[end - 1] == ' ')
			end--;
		size_t st = end;
		while (st && l[st - 1] != ' ')
			st--;
		if (!st || parse_u64(l + st, end - st, &v[k])) {
			btr_err("line %u: expected %u count(s) at the end", lineno, nv);
			return -BTR_ERR_BAD_FORMAT;
		}
		end = st;
	}
	while (end && l[end - 1] == ' ')
		end--;
	struct kent *e = kget(&m->rec, l, end, NULL);
	if (!e)
		return -BTR_ERR_NOMEM;
	for (unsigned k = 0; k < nv; k++)
		e->v[k] += v[k];
	return 0;
}

static int add_text(struct btr_merge *m, const uint8_t *d, size_t n)
{
	const char *p = (const char *)d, *end = p + n;
	unsigned lineno = 0;
	char *hdr = NULL;
	size_t hdrlen = 0;
	int rc = 0;
	while (p < end && !rc) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		lineno++;
		const char *l = p;
		p += len + (nl ? 1 : 0);
		if (!len)
			continue;
		if (memchr(l, 0, len)) {
			btr_err("line %u: binary data", lineno);
			return -BTR_ERR_BAD_FORMAT;
		}
		switch (m->kind) {
		case BTR_MERGE_FOLDED:
			rc = add_line(m, l, len, 1, lineno);
			break;
		case BTR_MERGE_FDATA_PA:
			if ((l[0] == 'B') && len > 2 && l[1] == ' ') {
				/* the mispredictions are optional */
				unsigned f = 0;
				for (size_t k = 0; k < len; k++)
					f += l[k] != ' ' && (k == 0 || l[k - 1] == ' ');
				if (f == 5)
					rc = add_line(m, l, len, 2, lineno);
				else {
					char tmp[1024];
					if (len + 3 > sizeof(tmp)) {
						rc = -BTR_ERR_BAD_FORMAT;
						break;
					}
					memcpy(tmp, l, len);
					memcpy(tmp + len, " 0", 3);
					rc = add_line(m, tmp, len + 2, 2, lineno);
				}
			} else if ((l[0] == 'F' || l[0] == 'f' || l[0] == 'S') && len > 2 && l[1] == ' ') {
				rc = add_line(m, l, len, 1, lineno);
			} else {
				btr_err("line %u: not a pre-aggregated BOLT record (B, F, f, S)", lineno);
				rc = -BTR_ERR_BAD_FORMAT;
			}
			break;
		case BTR_MERGE_FDATA:
			if ((len >= 6 && !memcmp(l, "no_lbr", 6)) || (len == 16 && !memcmp(l, "boltedcollection", 16))) {
				/* headers: the same in every input */
				char *nh = realloc(hdr, hdrlen + len + 2);   /* the line, its newline, the final NUL */
				if (!nh) {
					rc = -BTR_ERR_NOMEM;
					break;
				}
				hdr = nh;
				memcpy(hdr + hdrlen, l, len);
				hdrlen += len;
				hdr[hdrlen++] = '\n';
				if (len >= 6 && !memcmp(l, "no_lbr", 6))
					m->nvals = 1;
				continue;
			}
			rc = add_line(m, l, len, m->nvals ? m->nvals : 2, lineno);
			break;
		default:
			rc = -BTR_ERR_INVAL;
		}
	}
	/* (an empty input never gets here: btr_merge_add adds nothing for
	 * it, so it mixes with either kind of fdata) */
	if (!rc && m->kind == BTR_MERGE_FDATA) {
		char *h = hdr ? hdr : strdup("");
		if (h && hdr)
			h[hdrlen] = 0;
		if (!h)
			rc = -BTR_ERR_NOMEM;
		else if (m->have_header && strcmp(h, m->header ? m->header : "")) {
			btr_err("the fdata headers differ between the inputs (LBR and no_lbr profiles do not mix)");
			rc = -BTR_ERR_BAD_FORMAT;
		} else if (!m->have_header) {
			m->have_header = 1;
			free(m->header);
			m->header = h;
			h = NULL;
		}
		if (h && h != m->header)
			free(h);
		hdr = NULL;
	}
	free(hdr);
	return rc;
}

/* ---- pprof ---- */
struct pin {
	const uint8_t **str;
	size_t *strn;
	size_t nstr;
};

static const char *pstr(const struct pin *in, uint64_t i, size_t *len)
{
	if (i >= in->nstr) {
		*len = 0;
		return "";
	}
	*len = in->strn[i];
	return (const char *)in->str[i];
}

/* Appends @s (@n bytes) and a 0 separator to @buf (at *@len, capacity *@cap). */
static int kappend(char **buf, size_t *len, size_t *cap, const void *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			return -1;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[(*len)++] = 0;
	return 0;
}

struct inmap {
	uint64_t id, start, limit, offset, name, buildid;
	size_t out;   /* index in m->maps */
};
struct inloc {
	uint64_t id;
	size_t out;   /* index in m->locs */
};
struct infn {
	uint64_t id;
	size_t out;   /* index in m->funcs */
};

static int add_pprof(struct btr_merge *m, const uint8_t *data, size_t size)
{
	uint8_t *raw = NULL;
	size_t n;
	int rc = prof_gunzip(data, size, &raw, &n);
	if (rc)
		return rc;
	struct pin in = { 0 };
	struct inmap *maps = NULL;
	struct inloc *locs = NULL;
	struct infn *fns = NULL;
	size_t nmaps = 0, nlocs = 0, nfns = 0, cap;
	char *key = NULL;
	size_t klen = 0, kcap = 0;
	unsigned field, wt;
	uint64_t v;
	const uint8_t *d;
	size_t dn;
	int r;
	/* pass 1: strings and counts */
	struct pbr pr = { raw, raw + n, 0 };
	size_t ns = 0, ntypes = 0;
	while ((r = pbr_next(&pr, &field, &wt, &v, &d, &dn)) > 0)
		ns += field == 6;
	if (r < 0 || !ns) {
		btr_err("not a pprof profile (bad protobuf, or no string table)");
		rc = -BTR_ERR_BAD_FORMAT;
		goto out;
	}
	in.str = malloc(ns * sizeof(*in.str));
	in.strn = malloc(ns * sizeof(*in.strn));
	if (!in.str || !in.strn) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	pr = (struct pbr){ raw, raw + n, 0 };
	while (pbr_next(&pr, &field, &wt, &v, &d, &dn) > 0)
		if (field == 6 && wt == 2) {
			in.str[in.nstr] = d;
			in.strn[in.nstr++] = dn;
		}
	/* pass 2: sample types, mappings, functions, locations */
	cap = 1;
	pr = (struct pbr){ raw, raw + n, 0 };
	while (pbr_next(&pr, &field, &wt, &v, &d, &dn) > 0) {
		if (wt != 2 && (field == 1 || field == 2 || field == 3 || field == 4 || field == 5 || field == 11))
			goto bad;
		if (field == 1 || field == 11) {
			uint64_t tu[2];   /* type, unit */
			pbr_fields(d, dn, tu, 2);
			uint64_t ty = tu[0], un = tu[1];
			size_t l1, l2;
			const char *s1 = pstr(&in, ty, &l1), *s2 = pstr(&in, un, &l2);
			klen = 0;
			if (kappend(&key, &klen, &kcap, s1, l1) || kappend(&key, &klen, &kcap, s2, l2)) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			if (field == 11) {
				if (!m->inputs && !m->period_type) {
					m->period_type = malloc(klen);
					if (!m->period_type) {
						rc = -BTR_ERR_NOMEM;
						goto out;
					}
					memcpy(m->period_type, key, klen);
					m->period_type_len = klen;
				}
				continue;
			}
			if (!m->inputs) {
				size_t idx;
				if (!kget(&m->types, key, klen, &idx)) {
					rc = -BTR_ERR_NOMEM;
					goto out;
				}
			} else {
				size_t idx;
				if (ntypes >= m->types.n || m->types.e[ntypes].len != klen ||
				    memcmp(m->types.e[ntypes].key, key, klen)) {
					btr_err("the pprof sample types differ between the inputs");
					rc = -BTR_ERR_BAD_FORMAT;
					goto out;
				}
				(void)idx;
			}
			ntypes++;
		} else if (field == 12 && wt == 0 && !m->inputs) {
			m->period = v;
		} else if (field == 13 && wt == 0) {
			size_t l;
			const char *s = pstr(&in, v, &l);
			if (!kget(&m->comments, s, l, NULL)) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
		} else if (field == 3) {
			uint64_t mf[6];
			pbr_fields(d, dn, mf, 6);
			struct inmap mp = { .id = mf[0], .start = mf[1], .limit = mf[2], .offset = mf[3], .name = mf[4],
					    .buildid = mf[5] };
			/* the key: build-id, else the file name */
			size_t lb, lf;
			const char *b = pstr(&in, mp.buildid, &lb), *fn = pstr(&in, mp.name, &lf);
			klen = 0;
			if (kappend(&key, &klen, &kcap, lb ? "B" : "N", 1) ||
			    kappend(&key, &klen, &kcap, lb ? b : fn, lb ? lb : lf) ||
			    kappend(&key, &klen, &kcap, fn, lf)) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			struct kent *e = kget(&m->maps, key, klen, &mp.out);
			if (!e) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			if (!e->v[0] || mp.start < e->aux[0]) {   /* the lowest start wins: order-free */
				e->v[0] = 1;
				e->aux[0] = mp.start;
				e->aux[1] = mp.limit;
				e->aux[2] = mp.offset;
			}
			struct inmap *nm = realloc(maps, (nmaps + 1) * sizeof(*nm));
			if (!nm) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			maps = nm;
			maps[nmaps++] = mp;
		} else if (field == 5) {
			uint64_t ff[5];   /* id, then four fields */
			pbr_fields(d, dn, ff, 5);
			uint64_t id = ff[0], *f = ff + 1;
			klen = 0;
			for (int k = 0; k < 3; k++) {
				size_t l;
				const char *s = pstr(&in, f[k], &l);
				if (kappend(&key, &klen, &kcap, s, l)) {
					rc = -BTR_ERR_NOMEM;
					goto out;
				}
			}
			char ln[24];
			snprintf(ln, sizeof(ln), "%020" PRId64, (int64_t)f[3]);
			if (kappend(&key, &klen, &kcap, ln, strlen(ln))) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			size_t idx;
			if (!kget(&m->funcs, key, klen, &idx)) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			struct infn *nf = realloc(fns, (nfns + 1) * sizeof(*nf));
			if (!nf) {
				rc = -BTR_ERR_NOMEM;
				goto out;
			}
			fns = nf;
			fns[nfns++] = (struct infn){ id, idx };
		}
	}
	(void)cap;
	if (m->inputs && ntypes != m->types.n) {
		btr_err("the pprof sample types differ between the inputs");
		rc = -BTR_ERR_BAD_FORMAT;
		goto out;
	}
	/* pass 3: locations (need mappings and functions).  Their table key
	 * holds indices (module + 1, offset in the module, then function
	 * index and line per line); write() sorts by what the indices stand
	 * for, so the output does not depend on the order of the inputs. */
	pr = (struct pbr){ raw, raw + n, 0 };
	while (pbr_next(&pr, &field, &wt, &v, &d, &dn) > 0) {
		if (field != 4)
			continue;
		uint64_t id = 0, mapid = 0, addr = 0, lk[2];
		struct pbr q = { d, d + dn, 0 };
		unsigned f2, w2;
		uint64_t v2;
		const uint8_t *d2;
		size_t n2;
		klen = 16;
		if (kcap < 16 && !(key = realloc(key, kcap = 256)))
			goto nomem;
		while (pbr_next(&q, &f2, &w2, &v2, &d2, &n2) > 0) {
			if (f2 == 1)
				id = v2;
			else if (f2 == 2)
				mapid = v2;
			else if (f2 == 3)
				addr = v2;
			else if (f2 == 4 && w2 == 2) {
				uint64_t fl[2];   /* function id, line */
				pbr_fields(d2, n2, fl, 2);
				uint64_t fid = fl[0], line = fl[1];
				uint64_t fo = UINT64_MAX;
				for (size_t k = 0; k < nfns; k++)
					if (fns[k].id == fid)
						fo = fns[k].out;
				lk[0] = fo;
				lk[1] = line;
				if (kappend(&key, &klen, &kcap, lk, sizeof(lk)))
					goto nomem;
				klen--;   /* no separator: fixed-size records */
			}
		}
		const struct inmap *mp = NULL;
		for (size_t k = 0; k < nmaps; k++)
			if (maps[k].id == mapid)
				mp = &maps[k];
		lk[0] = mp ? mp->out + 1 : 0;
		lk[1] = mp ? addr - mp->start : addr;
		memcpy(key, lk, sizeof(lk));
		size_t idx;
		struct kent *le = kget(&m->locs, key, klen, &idx);
		if (!le)
			goto nomem;
		le->aux[0] = lk[0];
		le->aux[1] = lk[1];
		struct inloc *nl = realloc(locs, (nlocs + 1) * sizeof(*nl));
		if (!nl)
			goto nomem;
		locs = nl;
		locs[nlocs++] = (struct inloc){ id, idx };
	}
	/* pass 4: samples, keyed by their stack of location indices */
	pr = (struct pbr){ raw, raw + n, 0 };
	while (pbr_next(&pr, &field, &wt, &v, &d, &dn) > 0) {
		if (field != 2)
			continue;
		uint64_t vals[MAXV] = { 0 };
		size_t nv = 0;
		struct pbr q = { d, d + dn, 0 };
		unsigned f2, w2;
		uint64_t v2;
		const uint8_t *d2;
		size_t n2;
		klen = 0;
		while (pbr_next(&q, &f2, &w2, &v2, &d2, &n2) > 0) {
			if (f2 != 1 && f2 != 2)
				continue;
			/* packed (length-delimited varints) or one varint */
			struct pbr vr = { d2, d2 + n2, 0 };
			for (int first = 1;; first = 0) {
				uint64_t x = v2;
				if (w2 == 2) {
					if (vr.p >= vr.end)
						break;
					uint64_t acc = 0;
					unsigned sh = 0;
					while (vr.p < vr.end) {
						uint8_t c = *vr.p++;
						acc |= (uint64_t)(c & 0x7f) << sh;
						sh += 7;
						if (!(c & 0x80) || sh > 63)
							break;
					}
					x = acc;
				} else if (!first) {
					break;
				}
				if (f2 == 1) {
					uint64_t lo = UINT64_MAX;
					for (size_t k = 0; k < nlocs; k++)
						if (locs[k].id == x)
							lo = locs[k].out;
					if (kappend(&key, &klen, &kcap, &lo, sizeof(lo)))
						goto nomem;
					klen--;
				} else if (nv < MAXV) {
					vals[nv++] = x;
				}
			}
		}
		struct kent *se = kget(&m->rec, key ? key : "", klen, NULL);
		if (!se)
			goto nomem;
		for (size_t k = 0; k < nv; k++)
			se->v[k] += vals[k];
	}
	goto out;
bad:
	btr_err("not a pprof profile (unexpected field %u)", field);
	rc = -BTR_ERR_BAD_FORMAT;
	goto out;
nomem:
	rc = -BTR_ERR_NOMEM;
out:
	free(in.str);
	free(in.strn);
	free(maps);
	free(locs);
	free(fns);
	free(key);
	free(raw);
	return rc;
}

int btr_merge_add(struct btr_merge *m, const uint8_t *data, size_t size)
{
	if (!m || (!data && size))
		return -BTR_ERR_INVAL;
	size_t i = 0;
	while (i < size && (data[i] == '\n' || data[i] == ' '))
		i++;
	if (i == size)
		return 0;   /* an empty profile adds nothing, whatever the kind */
	enum btr_merge_kind k = btr_merge_detect(data, size);
	if (k != m->kind) {
		btr_err("a different kind of profile than the first input");
		return -BTR_ERR_BAD_FORMAT;
	}
	int rc = m->kind == BTR_MERGE_PPROF ? add_pprof(m, data, size)
		 : m->kind == BTR_MERGE_AFDO ? afdo_parse(&m->afdo, (const char *)data, size)
					      : add_text(m, data, size);
	if (!rc && (m->rec.nomem || m->afdo.nomem || m->maps.nomem || m->funcs.nomem || m->locs.nomem || m->types.nomem))
		rc = -BTR_ERR_NOMEM;
	if (!rc)
		m->inputs++;
	return rc;
}

static int write_text(struct btr_merge *m, FILE *out)
{
	struct kent **s = ksorted(&m->rec);
	if (!s)
		return -BTR_ERR_NOMEM;
	unsigned nv = m->kind == BTR_MERGE_FOLDED ? 1 : m->kind == BTR_MERGE_FDATA ? (m->nvals ? m->nvals : 2) : 0;
	if (m->header)
		fputs(m->header, out);
	for (size_t i = 0; i < m->rec.n; i++) {
		const struct kent *e = s[i];
		unsigned k = nv;
		if (m->kind == BTR_MERGE_FDATA_PA)
			k = e->key[0] == 'B' ? 2 : 1;
		fwrite(e->key, 1, e->len, out);
		for (unsigned j = 0; j < k; j++)
			fprintf(out, " %" PRIu64, e->v[j]);
		fputc('\n', out);
	}
	free(s);
	return ferror(out) ? -BTR_ERR_IO : 0;
}

/* The n-th 0-terminated piece of an entry's key. */
static const char *piece(const struct kent *e, unsigned n, size_t *len)
{
	const char *p = e->key, *end = e->key + e->len;
	for (unsigned i = 0; i < n && p < end; i++)
		p += strlen(p) + 1;
	if (p >= end) {
		*len = 0;
		return "";
	}
	*len = strlen(p);
	return p;
}

static int64_t sid(struct ktab *t, const char *s, size_t n)
{
	size_t idx;
	return kget(t, s, n, &idx) ? (int64_t)idx : 0;
}

/* mappings by their lowest start address (the program first, as pprof
 * expects of mapping 1), then by key */
static int map_cmp(const void *a, const void *b)
{
	const struct kent *x = *(struct kent *const *)a, *y = *(struct kent *const *)b;
	if (x->aux[0] != y->aux[0])
		return x->aux[0] < y->aux[0] ? -1 : 1;
	return kcmp(a, b);
}

/* ranks (1-based) of the entries of @t in key order (@maps: mapping order) */
static size_t *ranks(struct ktab *t, int maps)
{
	struct kent **s = ksorted(t);
	if (s && maps)
		qsort(s, t->n, sizeof(*s), map_cmp);
	size_t *r = calloc(t->n + 1, sizeof(*r));
	if (!s || !r) {
		free(s);
		free(r);
		return NULL;
	}
	for (size_t i = 0; i < t->n; i++)
		r[s[i] - t->e] = i + 1;
	free(s);
	return r;
}

static const size_t *g_maprank, *g_funcrank, *g_locrank;
static const struct ktab *g_locs;

/* a location's key, translated into ranks: module, offset, (function, line)... */
static int loc_cmp(const void *a, const void *b)
{
	const struct kent *x = *(struct kent *const *)a, *y = *(struct kent *const *)b;
	const uint64_t *kx = (const uint64_t *)(const void *)x->key, *ky = (const uint64_t *)(const void *)y->key;
	size_t nx = x->len / 8, ny = y->len / 8;
	for (size_t i = 0; i < nx && i < ny; i++) {
		uint64_t u = kx[i], w = ky[i];
		if (i == 0) {
			u = u ? g_maprank[u - 1] : 0;
			w = w ? g_maprank[w - 1] : 0;
		} else if (i >= 2 && i % 2 == 0) {
			u = u == UINT64_MAX ? 0 : g_funcrank[u];
			w = w == UINT64_MAX ? 0 : g_funcrank[w];
		}
		if (u != w)
			return u < w ? -1 : 1;
	}
	return (nx > ny) - (nx < ny);
}

static int sample_cmp(const void *a, const void *b)
{
	const struct kent *x = *(struct kent *const *)a, *y = *(struct kent *const *)b;
	size_t nx = x->len / 8, ny = y->len / 8;
	for (size_t i = 0; i < nx && i < ny; i++) {
		uint64_t u, w;
		memcpy(&u, x->key + 8 * i, 8);
		memcpy(&w, y->key + 8 * i, 8);
		u = u == UINT64_MAX ? 0 : g_locrank[u];
		w = w == UINT64_MAX ? 0 : g_locrank[w];
		if (u != w)
			return u < w ? -1 : 1;
	}
	(void)g_locs;
	return (nx > ny) - (nx < ny);
}

static int write_pprof(struct btr_merge *m, FILE *out)
{
	struct ktab strs = { 0 };
	struct pbuf prof = { 0 }, x = { 0 }, y = { 0 }, ids = { 0 }, vals = { 0 };
	size_t *maprank = ranks(&m->maps, 1), *funcrank = ranks(&m->funcs, 0), *locrank = NULL;
	struct kent **maps = ksorted(&m->maps), **funcs = ksorted(&m->funcs), **comments = ksorted(&m->comments);
	struct kent **locs = malloc((m->locs.n + 1) * sizeof(*locs)), **samples = malloc((m->rec.n + 1) * sizeof(*samples));
	int rc = 0;
	if (!maprank || !funcrank || !maps || !funcs || !comments || !locs || !samples) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	qsort(maps, m->maps.n, sizeof(*maps), map_cmp);
	g_maprank = maprank;
	g_funcrank = funcrank;
	for (size_t i = 0; i < m->locs.n; i++)
		locs[i] = &m->locs.e[i];
	qsort(locs, m->locs.n, sizeof(*locs), loc_cmp);
	if (!(locrank = calloc(m->locs.n + 1, sizeof(*locrank)))) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->locs.n; i++)
		locrank[locs[i] - m->locs.e] = i + 1;
	g_locrank = locrank;
	g_locs = &m->locs;
	for (size_t i = 0; i < m->rec.n; i++)
		samples[i] = &m->rec.e[i];
	qsort(samples, m->rec.n, sizeof(*samples), sample_cmp);

	sid(&strs, "", 0);
	for (size_t i = 0; i < m->types.n; i++) {
		size_t l1, l2;
		const char *a = piece(&m->types.e[i], 0, &l1), *b = piece(&m->types.e[i], 1, &l2);
		x.len = 0;
		pb_sint(&x, 1, sid(&strs, a, l1));
		pb_sint(&x, 2, sid(&strs, b, l2));
		pb_msg(&prof, 1, &x);
	}
	for (size_t i = 0; i < m->rec.n; i++) {
		const struct kent *e = samples[i];
		ids.len = vals.len = x.len = 0;
		for (size_t k = 0; k < e->len / 8; k++) {
			uint64_t li;
			memcpy(&li, e->key + 8 * k, 8);
			if (li != UINT64_MAX)
				pb_varint(&ids, locrank[li]);
		}
		for (size_t k = 0; k < m->types.n; k++)
			pb_varint(&vals, e->v[k]);
		pb_msg(&x, 1, &ids);
		pb_msg(&x, 2, &vals);
		pb_msg(&prof, 2, &x);
	}
	for (size_t i = 0; i < m->maps.n; i++) {
		const struct kent *e = maps[i];
		size_t lk, lb, lf;
		const char *kind = piece(e, 0, &lk), *b = piece(e, 1, &lb), *fn = piece(e, 2, &lf);
		x.len = 0;
		pb_uint(&x, 1, i + 1);
		pb_uint(&x, 2, e->aux[0]);
		pb_uint(&x, 3, e->aux[1]);
		pb_uint(&x, 4, e->aux[2]);
		pb_sint(&x, 5, sid(&strs, fn, lf));
		if (kind[0] == 'B')
			pb_sint(&x, 6, sid(&strs, b, lb));
		pb_uint(&x, 7, 1);
		pb_uint(&x, 8, 1);
		pb_uint(&x, 9, 1);
		pb_msg(&prof, 3, &x);
	}
	for (size_t i = 0; i < m->locs.n; i++) {
		const struct kent *e = locs[i];
		uint64_t k[2];
		memcpy(k, e->key, 16);
		uint64_t base = k[0] ? m->maps.e[k[0] - 1].aux[0] : 0;
		x.len = 0;
		pb_uint(&x, 1, i + 1);
		pb_uint(&x, 2, k[0] ? maprank[k[0] - 1] : 0);
		pb_uint(&x, 3, base + k[1]);
		for (size_t o = 16; o + 16 <= e->len; o += 16) {
			uint64_t fl[2];
			memcpy(fl, e->key + o, 16);
			y.len = 0;
			pb_uint(&y, 1, fl[0] == UINT64_MAX ? 0 : funcrank[fl[0]]);
			pb_sint(&y, 2, (int64_t)fl[1]);
			pb_msg(&x, 4, &y);
		}
		pb_msg(&prof, 4, &x);
	}
	for (size_t i = 0; i < m->funcs.n; i++) {
		const struct kent *e = funcs[i];
		size_t l0, l1, l2, l3;
		const char *a = piece(e, 0, &l0), *b = piece(e, 1, &l1), *c = piece(e, 2, &l2), *d = piece(e, 3, &l3);
		x.len = 0;
		pb_uint(&x, 1, i + 1);
		pb_sint(&x, 2, sid(&strs, a, l0));
		pb_sint(&x, 3, sid(&strs, b, l1));
		pb_sint(&x, 4, sid(&strs, c, l2));
		pb_sint(&x, 5, (int64_t)strtoll(d, NULL, 10));
		pb_msg(&prof, 5, &x);
	}
	if (m->period_type) {
		size_t l1, l2;
		struct kent tmp = { .key = m->period_type, .len = m->period_type_len };
		const char *a = piece(&tmp, 0, &l1), *b = piece(&tmp, 1, &l2);
		x.len = 0;
		pb_sint(&x, 1, sid(&strs, a, l1));
		pb_sint(&x, 2, sid(&strs, b, l2));
		pb_msg(&prof, 11, &x);
	}
	pb_sint(&prof, 12, (int64_t)m->period);
	for (size_t i = 0; i < m->comments.n; i++) {
		pb_tag(&prof, 13, 0);
		pb_varint(&prof, (uint64_t)sid(&strs, comments[i]->key, comments[i]->len));
	}
	for (size_t i = 0; i < strs.n; i++)
		pb_bytes(&prof, 6, strs.e[i].key, strs.e[i].len);
	if (prof.nomem || x.nomem || y.nomem || ids.nomem || vals.nomem || strs.nomem) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	uint8_t *gz;
	size_t gzn;
	if ((rc = prof_gzip(prof.p, prof.len, &gz, &gzn)))
		goto out;
	if (fwrite(gz, 1, gzn, out) != gzn)
		rc = -BTR_ERR_IO;
	free(gz);
out:
	free(maprank);
	free(funcrank);
	free(locrank);
	free(maps);
	free(funcs);
	free(locs);
	free(samples);
	free(comments);
	pb_free(&prof);
	pb_free(&x);
	pb_free(&y);
	pb_free(&ids);
	pb_free(&vals);
	kfree(&strs);
	return rc;
}

int btr_merge_write(struct btr_merge *m, FILE *out)
{
	if (!m || !out)
		return -BTR_ERR_INVAL;
	if (m->kind == BTR_MERGE_AFDO)
		return afdo_write(&m->afdo, out);
	return m->kind == BTR_MERGE_PPROF ? write_pprof(m, out) : write_text(m, out);
}
