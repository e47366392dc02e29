/* afdo_tree.c - an LLVM sample profile in memory and its text format
 * (afdo_tree.h).  The format, as LLVM's SampleProfReader documents it:
 *
 *     function:total_samples:head_samples
 *      offset[.discriminator]: samples [target:count ...]
 *      offset[.discriminator]: inlined_callee:total_samples
 *       ... (the callee's lines, one more space of indentation)
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "afdo_tree.h"
#include "btr/error.h"
#include "internal.h"

/* Room for one more entry in an array of @n entries of @size bytes: its
 * capacity is 4, 8, 16 ... (reallocated when @n reaches it).  Returns the
 * array, or NULL (with p->nomem set; the old array stays valid). */
static void *grow(struct afdo_prof *p, void *v, size_t n, size_t size)
{
	if (n >= 4 ? (n & (n - 1)) != 0 : n != 0)
		return v;
	void *nv = realloc(v, (n < 4 ? 4 : n * 2) * size);
	if (!nv)
		p->nomem = 1;
	return nv;
}

static char *dup_name(struct afdo_prof *p, const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (!d) {
		p->nomem = 1;
		return NULL;
	}
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

static struct afdo_fs *top_n(struct afdo_prof *p, const char *name, size_t len)
{
	for (size_t i = p->ntop; i-- > 0;)
		if (!strncmp(p->top[i].name, name, len) && !p->top[i].name[len])
			return &p->top[i];
	struct afdo_fs *nt = grow(p, p->top, p->ntop, sizeof(*nt));
	if (!nt)
		return NULL;
	p->top = nt;
	char *nm = dup_name(p, name, len);
	if (!nm)
		return NULL;
	nt[p->ntop] = (struct afdo_fs){ .name = nm };
	return &nt[p->ntop++];
}

struct afdo_fs *afdo_top(struct afdo_prof *p, const char *name)
{
	return top_n(p, name, strlen(name));
}

static struct afdo_fs *site_n(struct afdo_prof *p, struct afdo_fs *f, uint32_t off, uint32_t disc, const char *callee,
			      size_t len)
{
	for (size_t i = f->ns; i-- > 0;) {
		struct afdo_site *s = &f->s[i];
		if (s->off == off && s->disc == disc && !strncmp(s->f.name, callee, len) && !s->f.name[len])
			return &s->f;
	}
	struct afdo_site *ns = grow(p, f->s, f->ns, sizeof(*ns));
	if (!ns)
		return NULL;
	f->s = ns;
	char *nm = dup_name(p, callee, len);
	if (!nm)
		return NULL;
	ns[f->ns] = (struct afdo_site){ .off = off, .disc = disc, .f = { .name = nm } };
	return &ns[f->ns++].f;
}

struct afdo_fs *afdo_site(struct afdo_prof *p, struct afdo_fs *f, uint32_t off, uint32_t disc, const char *callee)
{
	return site_n(p, f, off, disc, callee, strlen(callee));
}

struct afdo_body *afdo_line(struct afdo_prof *p, struct afdo_fs *f, uint32_t off, uint32_t disc)
{
	for (size_t i = f->nb; i-- > 0;)
		if (f->b[i].off == off && f->b[i].disc == disc)
			return &f->b[i];
	struct afdo_body *nb = grow(p, f->b, f->nb, sizeof(*nb));
	if (!nb)
		return NULL;
	f->b = nb;
	nb[f->nb] = (struct afdo_body){ .off = off, .disc = disc };
	return &nb[f->nb++];
}

static int target_n(struct afdo_prof *p, struct afdo_body *b, const char *name, size_t len, uint64_t count)
{
	for (size_t i = 0; i < b->nt; i++)
		if (!strncmp(b->t[i].name, name, len) && !b->t[i].name[len]) {
			b->t[i].count += count;
			return 0;
		}
	struct afdo_target *nt = grow(p, b->t, b->nt, sizeof(*nt));
	if (!nt)
		return -BTR_ERR_NOMEM;
	b->t = nt;
	char *nm = dup_name(p, name, len);
	if (!nm)
		return -BTR_ERR_NOMEM;
	nt[b->nt++] = (struct afdo_target){ nm, count };
	return 0;
}

int afdo_target(struct afdo_prof *p, struct afdo_body *b, const char *name, uint64_t count)
{
	return target_n(p, b, name, strlen(name), count);
}

/* ---- writing ------------------------------------------------------------ */

static int cmp_body(const void *x, const void *y)
{
	const struct afdo_body *p = x, *q = y;
	if (p->off != q->off)
		return p->off < q->off ? -1 : 1;
	return p->disc < q->disc ? -1 : p->disc > q->disc;
}

static int cmp_site(const void *x, const void *y)
{
	const struct afdo_site *p = x, *q = y;
	if (p->off != q->off)
		return p->off < q->off ? -1 : 1;
	if (p->disc != q->disc)
		return p->disc < q->disc ? -1 : 1;
	return strcmp(p->f.name, q->f.name);
}

static int cmp_target(const void *x, const void *y)
{
	const struct afdo_target *p = x, *q = y;
	if (p->count != q->count)
		return p->count > q->count ? -1 : 1;
	return strcmp(p->name, q->name);
}

static int cmp_top(const void *x, const void *y)
{
	const struct afdo_fs *p = x, *q = y;
	if (p->total != q->total)
		return p->total > q->total ? -1 : 1;
	return strcmp(p->name, q->name);
}

static void write_loc(FILE *out, int depth, uint32_t off, uint32_t disc)
{
	fprintf(out, "%*s%" PRIu32, depth, "", off);
	if (disc)
		fprintf(out, ".%" PRIu32, disc);
	fputs(": ", out);
}

/* A function's lines below its header, at indentation @depth. */
static void write_fs(FILE *out, struct afdo_fs *f, int depth)
{
	if (f->nb > 1)
		qsort(f->b, f->nb, sizeof(*f->b), cmp_body);
	for (size_t i = 0; i < f->nb; i++) {
		struct afdo_body *b = &f->b[i];
		write_loc(out, depth, b->off, b->disc);
		fprintf(out, "%" PRIu64, b->count);
		if (b->nt > 1)
			qsort(b->t, b->nt, sizeof(*b->t), cmp_target);
		for (size_t k = 0; k < b->nt; k++)
			fprintf(out, " %s:%" PRIu64, b->t[k].name, b->t[k].count);
		fputc('\n', out);
	}
	if (f->ns > 1)
		qsort(f->s, f->ns, sizeof(*f->s), cmp_site);
	for (size_t i = 0; i < f->ns; i++) {
		struct afdo_site *s = &f->s[i];
		write_loc(out, depth, s->off, s->disc);
		fprintf(out, "%s:%" PRIu64 "\n", s->f.name, s->f.total);
		write_fs(out, &s->f, depth + 1);
	}
}

int afdo_write(struct afdo_prof *p, FILE *out)
{
	if (p->ntop > 1)
		qsort(p->top, p->ntop, sizeof(*p->top), cmp_top);
	for (size_t i = 0; i < p->ntop; i++) {
		struct afdo_fs *f = &p->top[i];
		if (!f->total)
			continue;   /* entered, but no line of it has DWARF (_init, asm) */
		fprintf(out, "%s:%" PRIu64 ":%" PRIu64 "\n", f->name, f->total, f->head);
		write_fs(out, f, 1);
	}
	return ferror(out) ? -BTR_ERR_IO : 0;
}

/* ---- reading ------------------------------------------------------------ */

static int num(const char **s, const char *end, uint64_t *v)
{
	const char *q = *s;
	uint64_t x = 0;
	if (q >= end || !isdigit((unsigned char)*q))
		return -1;
	for (; q < end && isdigit((unsigned char)*q); q++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	*s = q;
	*v = x;
	return 0;
}

/* A name ends at ':' (names are linkage names: no spaces or colons). */
static size_t name_len(const char *s, const char *end)
{
	size_t n = 0;
	while (s + n < end && s[n] != ':' && s[n] != ' ')
		n++;
	return n;
}

int afdo_looks_like(const char *d, size_t n)
{
	const char *end = memchr(d, '\n', n);
	if (!end)
		end = d + n;
	size_t k = name_len(d, end);
	const char *q = d + k;
	uint64_t v;
	return k && q < end && *q == ':' && (q++, num(&q, end, &v) == 0) && q < end && *q == ':' &&
	       (q++, num(&q, end, &v) == 0) && q == end;
}

#define MAX_DEPTH 64

int afdo_parse(struct afdo_prof *p, const char *d, size_t n)
{
	struct afdo_fs *stack[MAX_DEPTH + 1];   /* stack[k]: the function at indentation k */
	int depth = -1;                         /* deepest valid entry */
	unsigned lineno = 0;
	for (const char *l = d, *next; l < d + n; l = next) {
		const char *end = memchr(l, '\n', (size_t)(d + n - l));
		next = end ? end + 1 : d + n;
		if (!end)
			end = d + n;
		lineno++;
		if (end > l && end[-1] == '\r')
			end--;
		int ind = 0;
		while (l + ind < end && l[ind] == ' ')
			ind++;
		const char *q = l + ind;
		if (q == end)
			continue;
		uint64_t a, b;
		if (ind == 0) {   /* function:total:head */
			size_t k = name_len(q, end);
			const char *r = q + k;
			if (!k || r >= end || *r != ':' || (r++, num(&r, end, &a)) || r >= end || *r != ':' ||
			    (r++, num(&r, end, &b)) || r != end)
				goto bad;
			struct afdo_fs *f = top_n(p, q, k);
			if (!f)
				return -BTR_ERR_NOMEM;
			f->total += a;
			f->head += b;
			stack[0] = f;
			depth = 0;
			continue;
		}
		if (*q == '!')
			continue;   /* !CFGChecksum, !Attribute: metadata of newer writers */
		if (ind > depth + 1 || ind > MAX_DEPTH || depth < 0)
			goto bad;
		struct afdo_fs *f = stack[ind - 1];
		uint64_t off, disc = 0;
		if (num(&q, end, &off) || off > UINT32_MAX)
			goto bad;
		if (q < end && *q == '.' && (q++, num(&q, end, &disc) || disc > UINT32_MAX))
			goto bad;
		if (q + 1 >= end || q[0] != ':' || q[1] != ' ')
			goto bad;
		q += 2;
		if (isdigit((unsigned char)*q)) {   /* samples [target:count ...] */
			if (num(&q, end, &a))
				goto bad;
			struct afdo_body *bd = afdo_line(p, f, (uint32_t)off, (uint32_t)disc);
			if (!bd)
				return -BTR_ERR_NOMEM;
			bd->count += a;
			while (q < end) {
				if (*q != ' ')
					goto bad;
				q++;
				size_t k = name_len(q, end);
				const char *r = q + k;
				if (!k || r >= end || *r != ':' || (r++, num(&r, end, &a)))
					goto bad;
				if (target_n(p, bd, q, k, a))
					return -BTR_ERR_NOMEM;
				q = r;
			}
			depth = ind - 1;
		} else {   /* inlined callee:total */
			size_t k = name_len(q, end);
			const char *r = q + k;
			if (!k || r >= end || *r != ':' || (r++, num(&r, end, &a)) || r != end)
				goto bad;
			struct afdo_fs *c = site_n(p, f, (uint32_t)off, (uint32_t)disc, q, k);
			if (!c)
				return -BTR_ERR_NOMEM;
			c->total += a;
			stack[ind] = c;
			depth = ind;
		}
	}
	return p->nomem ? -BTR_ERR_NOMEM : 0;
bad:
	btr_err("line %u: not a sample profile line", lineno);
	return -BTR_ERR_BAD_FORMAT;
}

static void fs_free(struct afdo_fs *f)
{
	for (size_t i = 0; i < f->nb; i++) {
		for (size_t k = 0; k < f->b[i].nt; k++)
			free(f->b[i].t[k].name);
		free(f->b[i].t);
	}
	free(f->b);
	for (size_t i = 0; i < f->ns; i++)
		fs_free(&f->s[i].f);
	free(f->s);
	free(f->name);
}

void afdo_free(struct afdo_prof *p)
{
	for (size_t i = 0; i < p->ntop; i++)
		fs_free(&p->top[i]);
	free(p->top);
	*p = (struct afdo_prof){ 0 };
}
