/* flame.c - flame graphs: folded stacks (Brendan Gregg's format),
 * speedscope's evented file format, and an interactive SVG drawn here
 * (btr/profile.h, docs/flame.md).
 *
 * Folded stacks and the SVG come from the calling-context tree of
 * btr/callstack.h.  Speedscope's evented profiles need every enter and
 * leave in order, per thread; they are written to an unlinked temporary
 * file during the pass (24 bytes per event) so memory stays bounded.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "btr/callstack.h"
#include "btr/error.h"
#include "registry.h"
#include "btr/profile.h"
#include "internal.h"
#include "profutil.h"

struct ev {
	uint32_t tid;
	uint32_t func;
	uint64_t at;
	uint32_t open;
	uint32_t pad;
};

struct flame {
	struct btr_profile_opts o;
	struct btr_callstack *cs;
	FILE *ev;
	int ev_err;
	char *title;
	int status;
};

static void on_enter(void *ctx, struct btr_cs_thread *t)
{
	struct flame *f = ctx;
	struct btr_cs_frame *fr = &t->frames[t->depth - 1];
	/* PLT stubs are part of the call (their time goes to the target) */
	fr->emitted = !btr_callstack_func(f->cs, fr->func)->plt;
	if (!fr->emitted)
		return;
	struct ev e = { t->tid, fr->func, prof_clock(t, f->o.weight), 1, 0 };
	if (f->ev && fwrite(&e, sizeof(e), 1, f->ev) != 1)
		f->ev_err = 1;
}

static void on_leave(void *ctx, struct btr_cs_thread *t, enum btr_cs_leave how)
{
	struct flame *f = ctx;
	if (!t->frames[t->depth - 1].emitted)
		return;
	struct ev e = { t->tid, t->frames[t->depth - 1].func, prof_clock(t, f->o.weight), 0, 0 };
	if (f->ev && fwrite(&e, sizeof(e), 1, f->ev) != 1)
		f->ev_err = 1;
}

static int f_begin(void *p, struct btr_stream *s)
{
	struct flame *f = p;
	btr_callstack_begin(f->cs, s);
	return 0;
}

static int f_branches(void *p, const struct btr_branch *b, size_t n)
{
	return btr_callstack_branches(((struct flame *)p)->cs, b, n);
}

static int f_fold_ok(void *p, uint32_t tid)
{
	return btr_callstack_fold_ok(((struct flame *)p)->cs, tid);
}

static int f_fold_block(void *p, uint32_t pid, uint64_t start, uint64_t from, uint64_t to)
{
	return btr_callstack_fold_block(((struct flame *)p)->cs, pid, start, from, to);
}

static int f_event(void *p, const struct btr_stream_event *ev)
{
	return btr_callstack_event(((struct flame *)p)->cs, ev);
}

static int f_end(void *p, int status)
{
	struct flame *f = p;
	f->status = status;
	return btr_callstack_end(f->cs);
}

struct fline {
	char *path;
	uint64_t w;
};

static int cmp_fline(const void *a, const void *b)
{
	const struct fline *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	return c ? c : (x->w > y->w) - (x->w < y->w);
}

/* One line per distinct stack of names: distinct functions may share a
 * name (ld.so's memcpy and libc's), so their paths are summed. */
static int write_folded(struct flame *f, FILE *out)
{
	size_t n = btr_callstack_nnodes(f->cs), nl = 0;
	struct fline *lines = calloc(n ? n : 1, sizeof(*lines));
	size_t bufsz = 1 << 16;
	char *buf = malloc(bufsz);
	int rc = 0;
	if (!lines || !buf) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = prof_node_weight(btr_callstack_node(f->cs, i), f->o.weight);
		if (!w)
			continue;
		/* the root holds what ran where no stack was known */
		size_t len = i ? btr_callstack_path(f->cs, i, buf, bufsz) : (size_t)snprintf(buf, bufsz, "[unknown]");
		if (len >= bufsz)
			len = strlen(buf);
		char *l = malloc(len + 1);
		if (!l) {
			rc = -BTR_ERR_NOMEM;
			goto out;
		}
		memcpy(l, buf, len + 1);
		lines[nl++] = (struct fline){ l, w };
	}
	qsort(lines, nl, sizeof(*lines), cmp_fline);
	for (size_t i = 0; i < nl;) {
		uint64_t w = 0;
		size_t j = i;
		for (; j < nl && !strcmp(lines[j].path, lines[i].path); j++)
			w += lines[j].w;
		if (fprintf(out, "%s %" PRIu64 "\n", lines[i].path, w) < 0)
			rc = -BTR_ERR_IO;
		i = j;
	}
out:
	if (lines)
		for (size_t i = 0; i < nl; i++)
			free(lines[i].path);
	free(lines);
	free(buf);
	return rc;
}

static int write_speedscope(struct flame *f, FILE *out)
{
	if (!f->ev)
		return -BTR_ERR_UNSUPPORTED;
	if (f->ev_err || fflush(f->ev))
		return -BTR_ERR_IO;
	size_t nf = btr_callstack_nfuncs(f->cs);
	fprintf(out, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"btr\",\"name\":");
	btr_json_str(out, f->title ? f->title : "btr");
	fprintf(out, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
	for (uint32_t i = 0; i < nf; i++) {
		const struct btr_cs_func *fn = btr_callstack_func(f->cs, i);
		fprintf(out, "%s\n{\"name\":", i ? "," : "");
		btr_json_str(out, fn->name);
		if (fn->file) {
			fprintf(out, ",\"file\":");
			btr_json_str(out, fn->file);
			fprintf(out, ",\"line\":%d", fn->line);
		} else if (fn->module) {
			fprintf(out, ",\"file\":");
			btr_json_str(out, fn->module);
		}
		fputc('}', out);
	}
	fprintf(out, "]},\"profiles\":[");
	/* one profile per thread: one pass over the event file each */
	size_t nt = btr_callstack_nthreads(f->cs);
	int first_prof = 1;
	for (size_t ti = 0; ti < nt; ti++) {
		struct btr_cs_thread *t = btr_callstack_thread(f->cs, ti);
		struct ev e;
		uint64_t start = 0, end = 0;
		int any = 0;
		if (fseek(f->ev, 0, SEEK_SET))
			return -BTR_ERR_IO;
		while (fread(&e, sizeof(e), 1, f->ev) == 1) {
			if (e.tid != t->tid)
				continue;
			if (!any)
				start = e.at;
			end = e.at;
			any = 1;
		}
		if (!any)
			continue;
		fprintf(out, "%s\n{\"type\":\"evented\",\"name\":\"tid %" PRIu32 "\",\"unit\":\"none\",\"startValue\":%" PRIu64
			     ",\"endValue\":%" PRIu64 ",\"events\":[",
			first_prof ? "" : ",", t->tid, start, end);
		first_prof = 0;
		if (fseek(f->ev, 0, SEEK_SET))
			return -BTR_ERR_IO;
		int first = 1;
		while (fread(&e, sizeof(e), 1, f->ev) == 1) {
			if (e.tid != t->tid)
				continue;
			fprintf(out, "%s{\"type\":\"%c\",\"frame\":%" PRIu32 ",\"at\":%" PRIu64 "}", first ? "" : ",\n",
				e.open ? 'O' : 'C', e.func, e.at);
			first = 0;
		}
		fprintf(out, "]}");
	}
	fprintf(out, "]}\n");
	return ferror(out) ? -BTR_ERR_IO : 0;
}

/* ---- SVG ---- */
struct kid {
	uint32_t parent, node;
	const char *name;
};

static int cmp_kid(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;
	if (x->parent != y->parent)
		return x->parent < y->parent ? -1 : 1;
	return strcmp(x->name, y->name);
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

#define SVG_W 1200
#define SVG_PAD 10
#define SVG_FH 16

static const char svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"var W=" "1180" ",details,frames,zoomed=null;\n"
	"function init(){details=document.getElementById('details');frames=document.getElementsByClassName('f');\n"
	" for(var i=0;i<frames.length;i++){var g=frames[i];\n"
	"  g.onmouseover=function(){details.textContent=this.getElementsByTagName('title')[0].textContent;};\n"
	"  g.onmouseout=function(){details.textContent=' ';};\n"
	"  g.onclick=function(){zoom(this);};}\n"
	" document.getElementById('unzoom').onclick=function(){zoom(null);};\n"
	" layout(0,1,-1);}\n"
	"function label(g,w){var t=g.getElementsByTagName('text')[0];var n=g.getAttribute('data-n');\n"
	" var c=Math.floor((w-6)/7);t.textContent=c<3?'':(n.length<=c?n:n.substr(0,c-2)+'..');}\n"
	"function layout(x0,w0,d0){for(var i=0;i<frames.length;i++){var g=frames[i];\n"
	"  var x=+g.getAttribute('data-x'),w=+g.getAttribute('data-w'),d=+g.getAttribute('data-d');\n"
	"  var r=g.getElementsByTagName('rect')[0],t=g.getElementsByTagName('text')[0];\n"
	"  var vis=(x>=x0-1e-12&&x+w<=x0+w0+1e-12)||(d<d0&&x<=x0+1e-12&&x+w>=x0+w0-1e-12);\n"
	"  if(!vis){g.style.display='none';continue;}g.style.display='';\n"
	"  var nx,nw;if(d<d0){nx=0;nw=W;g.style.opacity=0.6;}else{nx=(x-x0)/w0*W;nw=w/w0*W;g.style.opacity=1;}\n"
	"  r.setAttribute('x'," "10" "+nx);r.setAttribute('width',Math.max(nw-0.5,0));t.setAttribute('x'," "10" "+nx+3);label(g,nw);}}\n"
	"function zoom(g){if(!g){zoomed=null;layout(0,1,-1);return;}zoomed=g;\n"
	" layout(+g.getAttribute('data-x'),+g.getAttribute('data-w'),+g.getAttribute('data-d'));}\n"
	"]]></script>\n";

static int write_svg(struct flame *f, FILE *out)
{
	const struct btr_callstack *cs = f->cs;
	size_t n = btr_callstack_nnodes(cs);
	uint64_t *sub = prof_subtree(cs, f->o.weight);
	double *x = calloc(n ? n : 1, sizeof(*x));
	uint32_t *depth = calloc(n ? n : 1, sizeof(*depth));
	struct kid *kids = calloc(n ? n : 1, sizeof(*kids));
	int rc = 0;
	if (!sub || !x || !depth || !kids) {
		rc = -BTR_ERR_NOMEM;
		goto out;
	}
	uint64_t total = sub[0];
	size_t nk = 0;
	for (uint32_t i = 1; i < n; i++) {
		const struct btr_cs_node *nd = btr_callstack_node(cs, i);
		kids[nk++] = (struct kid){ nd->parent, i, btr_callstack_func(cs, nd->func)->name };
	}
	qsort(kids, nk, sizeof(*kids), cmp_kid);
	/* parents sort before their children's groups (lower index), so a
	 * parent's x is known when its children are placed */
	uint32_t maxd = 0;
	for (size_t i = 0; i < nk;) {
		uint32_t p = kids[i].parent;
		double acc = x[p];
		for (; i < nk && kids[i].parent == p; i++) {
			uint32_t c = kids[i].node;
			x[c] = acc;
			acc += total ? (double)sub[c] / (double)total : 0;
			depth[c] = depth[p] + 1;
			if (sub[c] && depth[c] > maxd)
				maxd = depth[c];
		}
	}
	unsigned height = (maxd + 1) * SVG_FH + 3 * SVG_FH + 2 * SVG_PAD;
	const char *unit = prof_unit(cs, f->o.weight);
	fprintf(out, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		     "<svg version=\"1.1\" width=\"%d\" height=\"%u\" onload=\"init(evt)\" viewBox=\"0 0 %d %u\" "
		     "xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n"
		     "<style type=\"text/css\">text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
		     " .f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}</style>\n%s"
		     "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"#f4f4ec\"/>\n"
		     "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">",
		SVG_W, height, SVG_W, height, svg_script, SVG_W, height, SVG_W / 2);
	btr_xml_str(out, f->title ? f->title : "Flame Graph");
	fprintf(out, "</text>\n<text id=\"unzoom\" x=\"%d\" y=\"24\" style=\"cursor:pointer\">Reset Zoom</text>\n"
		     "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n",
		SVG_PAD, SVG_PAD, height - SVG_PAD / 2);
	double inner = SVG_W - 2 * SVG_PAD;
	for (uint32_t i = 0; i < n; i++) {
		if (!sub[i] || (i && (double)sub[i] / (double)total * inner < 0.1))
			continue;
		const char *name = i ? btr_callstack_func(cs, btr_callstack_node(cs, i)->func)->name : "all";
		double fx = i ? x[i] : 0, fw = (double)sub[i] / (double)total;
		double y = height - 2 * SVG_FH - SVG_PAD - (double)depth[i] * SVG_FH;
		uint32_t h = name_hash(name);
		int red = 205 + (int)(h % 50), green = (int)((h >> 8) % 230), blue = (int)((h >> 16) % 55);
		fprintf(out, "<g class=\"f\" data-x=\"%.10f\" data-w=\"%.10f\" data-d=\"%u\" data-n=\"", fx, fw, depth[i]);
		btr_xml_str(out, name);
		fprintf(out, "\"><title>");
		btr_xml_str(out, name);
		fprintf(out, " (%" PRIu64 " %s, %.2f%%)</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
			     "fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\"></text></g>\n",
			sub[i], unit, 100.0 * fw, SVG_PAD + fx * inner, y, fw * inner > 0.5 ? fw * inner - 0.5 : fw * inner,
			SVG_FH - 1, red, green, blue, SVG_PAD + fx * inner + 3, y + SVG_FH - 4.5);
	}
	fprintf(out, "</svg>\n");
	if (ferror(out))
		rc = -BTR_ERR_IO;
out:
	free(sub);
	free(x);
	free(depth);
	free(kids);
	return rc;
}

static int f_write(void *p, FILE *out, const char *format)
{
	struct flame *f = p;
	int rc = prof_weight_ok(f->cs, f->o.weight);
	if (rc)
		return rc;
	if (!format || !strcmp(format, "folded"))
		return write_folded(f, out);
	if (!strcmp(format, "speedscope"))
		return write_speedscope(f, out);
	if (!strcmp(format, "svg"))
		return write_svg(f, out);
	return -BTR_ERR_INVAL;
}

static void f_destroy(void *p)
{
	struct flame *f = p;
	btr_callstack_free(f->cs);
	if (f->ev)
		fclose(f->ev);
	free(f->title);
	free(f);
}

static const char *const flame_formats[] = { "folded", "speedscope", "svg", NULL };

const struct btr_analysis_ops btr__flame_ops = {
	.name = "flame", .begin = f_begin, .branches = f_branches, .fold_ok = f_fold_ok, .fold_block = f_fold_block, .event = f_event,
	.end = f_end, .write = f_write, .destroy = f_destroy,
	.formats = flame_formats,
};

int btr_flame_new(const struct btr_profile_opts *opts, struct btr_analysis **out)
{
	if (!out || !BTR_OPTS_VALID(opts, sizeof(*opts)))
		return -BTR_ERR_INVAL;
	struct flame *f = calloc(1, sizeof(*f));
	if (!f)
		return -BTR_ERR_NOMEM;
	BTR_OPTS_COPY(&f->o, opts);
	struct btr_callstack_opts co = { .sz = sizeof(co), .ctx = f };
	if (f->o.events) {
		co.enter = on_enter;
		co.leave = on_leave;
		co.lines = 1;
		if (!(f->ev = prof_tmpfile())) {
			free(f);
			return -BTR_ERR_IO;
		}
	}
	int rc = btr_callstack_new(&co, &f->cs);
	if (rc) {
		f_destroy(f);
		return rc;
	}
	return btr_analysis_new(&btr__flame_ops, f, out);
}

int btr_flame_set_title(struct btr_analysis *a, const char *title)
{
	struct flame *f = btr_analysis_state(a);
	char *t = strdup(title ? title : "");
	if (!t)
		return -BTR_ERR_NOMEM;
	free(f->title);
	f->title = t;
	return 0;
}

/* Created by name (registry.c: btr_analysis_create). */
int btr__flame_create(const struct btr_analysis_args *a, struct btr_analysis **out)
{
	struct btr_profile_opts o = { .sz = sizeof(o), .events = a->events, .module = a->module };
	return btr_flame_new(&o, out);
}
