/* check_findings.c - the findings of `btr check`: kinds and severities,
 * recording (deduplicated, --allow rules applied), the text and JSON
 * output and the public accessors.  check.c calls in; nothing here calls
 * back into the judging. */
#include "btr/check.h"
#include "btr/error.h"
#include "btr/image.h"
#include "btr/text.h"
#include "check_priv.h"
#include "internal.h"
#include "registry.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const btr__check_kinds[] = {
	"return-hijack", "rop-chain", "return-mismatch", "gadget-chain", "call-non-entry",
	"jump-non-entry", "unbacked-code", "code-modified", "got-overwrite", "interposition",
};
const size_t btr__check_n_kinds = sizeof(btr__check_kinds) / sizeof(btr__check_kinds[0]);

const char *btr_check_severity_name(enum btr_check_severity s)
{
	static const char *const n[] = { "info", "low", "medium", "high" };
	return (unsigned)s < 4 ? n[s] : "?";
}

int btr_check_severity_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (name && !strcasecmp(name, btr_check_severity_name((enum btr_check_severity)i)))
			return i;
	return -1;
}

void check_symbolize(struct check *c, uint32_t pid, uint64_t a, char *buf)
{
	if (!a) {
		snprintf(buf, SYM_LEN, "?");
		return;
	}
	btr_image_symbolize(btr_stream_image_pid(c->s, pid), a, buf, SYM_LEN);
}

/* Records a finding (deduplicated on kind, from and @key_to). */
int check_add_finding(struct check *c, int kind, enum btr_check_severity sev, const struct thr *t, uint64_t from,
		      uint64_t to, uint64_t key_to, uint64_t pos, uint64_t tsc, const char *fmt, ...)
{
	uint32_t idx;
	uint64_t ka = from ^ ((uint64_t)kind << 56);
	if (pairmap_get(&c->dedup, ka, key_to, &idx)) {
		if (idx != UINT32_MAX)
			c->f[idx].pub.count++;
		return 0;
	}
	if (c->n_f >= MAX_FINDINGS) {
		c->stats.dropped++;
		return 0;
	}
	if (c->n_f == c->cap_f) {
		size_t nc = c->cap_f ? c->cap_f * 2 : 16;
		struct finding *nf = realloc(c->f, nc * sizeof(*nf));
		if (!nf)
			return -BTR_ERR_NOMEM;
		c->f = nf;
		c->cap_f = nc;
	}
	struct finding *f = &c->f[c->n_f];
	memset(f, 0, sizeof(*f));
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0 || !(f->detail = malloc((size_t)len + 1)))
		return -BTR_ERR_NOMEM;
	va_start(ap, fmt);
	vsnprintf(f->detail, (size_t)len + 1, fmt, ap);
	va_end(ap);
	f->pub.kind = btr__check_kinds[kind];
	f->pub.severity = sev;
	f->pub.pid = t ? t->pid : 0;
	f->pub.tid = t ? t->tid : 0;
	f->pub.from = from;
	f->pub.to = to;
	f->pub.position = pos;
	f->pub.tsc = tsc;
	f->pub.count = 1;
	check_symbolize(c, f->pub.pid, from, f->from_sym);
	check_symbolize(c, f->pub.pid, to, f->to_sym);
	if (check_allow_match(c->rules, c->n_rules, f->pub.kind, f->pub.from, f->pub.to, f->detail, f->from_sym,
			      f->to_sym)) {
		c->stats.allowed++;
		free(f->detail);
		return pairmap_put(&c->dedup, ka, key_to, UINT32_MAX);
	}
	c->n_f++;
	return pairmap_put(&c->dedup, ka, key_to, (uint32_t)(c->n_f - 1));
}

int check_write(void *state, FILE *out, const char *format)
{
	struct check *c = state;
	int json = format && !strcmp(format, "json");
	if (format && !json && strcmp(format, "text"))
		return -BTR_ERR_INVAL;
	if (json) {
		fprintf(out, "{\n  \"findings\": [");
		for (size_t i = 0; i < c->n_f; i++) {
			const struct finding *f = &c->f[i];
			fprintf(out, "%s\n    {\"kind\": \"%s\", \"severity\": \"%s\", \"pid\": %" PRIu32
				     ", \"thread\": %" PRIu32 ", \"position\": %" PRIu64 ", \"tsc\": %" PRIu64
				     ", \"from\": \"0x%" PRIx64 "\", \"to\": \"0x%" PRIx64 "\", \"from_sym\": ",
				i ? "," : "", f->pub.kind, btr_check_severity_name(f->pub.severity), f->pub.pid,
				f->pub.tid, f->pub.position, f->pub.tsc, f->pub.from, f->pub.to);
			btr_json_str(out, f->from_sym);
			fprintf(out, ", \"to_sym\": ");
			btr_json_str(out, f->to_sym);
			fprintf(out, ", \"count\": %" PRIu64 ", \"detail\": ", f->pub.count);
			btr_json_str(out, f->detail);
			fputc('}', out);
		}
		fprintf(out, "%s],\n  \"stats\": {\"branches\": %" PRIu64 ", \"unknown_code\": %" PRIu64
			     ", \"allowed\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"sampled\": %s, \"max_depth\": %u}\n}\n",
			c->n_f ? "\n  " : "", c->stats.branches, c->stats.unknown_code, c->stats.allowed,
			c->stats.dropped, c->stats.sampled ? "true" : "false", c->stats.max_depth);
	} else {
		for (size_t i = 0; i < c->n_f; i++) {
			const struct finding *f = &c->f[i];
			fprintf(out, "%-6s %s pid %" PRIu32 " tid %" PRIu32 " #%" PRIu64 ": 0x%" PRIx64 " -> 0x%" PRIx64
				     " %s -> %s",
				btr_check_severity_name(f->pub.severity), f->pub.kind, f->pub.pid, f->pub.tid,
				f->pub.position, f->pub.from, f->pub.to, f->from_sym, f->to_sym);
			if (f->pub.count > 1)
				fprintf(out, " (x%" PRIu64 ")", f->pub.count);
			fprintf(out, "\n       %s\n", f->detail);
		}
		fprintf(out, "%zu finding%s; %" PRIu64 " branches checked (%" PRIu64 " in code the image lacks)%s",
			c->n_f, c->n_f == 1 ? "" : "s", c->stats.branches, c->stats.unknown_code,
			c->stats.sampled ? ", sampled LBR data: kBouncer-style checks" : "");
		if (c->stats.allowed)
			fprintf(out, ", %" PRIu64 " allowed", c->stats.allowed);
		if (c->stats.dropped)
			fprintf(out, ", %" PRIu64 " more not kept", c->stats.dropped);
		fputc('\n', out);
		size_t unbacked = 0;
		for (size_t i = 0; i < c->n_f; i++)
			unbacked += !strcmp(c->f[i].pub.kind, "unbacked-code");
		if (unbacked)
			fprintf(out, "(a JIT runtime's code is named, and not reported, when the runtime writes a perf map: "
				     "java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, node --perf-basic-prof; "
				     "see docs/check.md)\n");
	}
	return ferror(out) ? -BTR_ERR_IO : 0;
}

const struct btr_check_finding *btr_check_findings(const struct btr_analysis *a, size_t *n)
{
	struct check *c = btr_analysis_state(a);
	*n = 0;
	if (!c || !c->n_f)
		return NULL;
	free(c->pubs);
	if (!(c->pubs = malloc(c->n_f * sizeof(*c->pubs))))
		return NULL;
	for (size_t i = 0; i < c->n_f; i++) {
		c->pubs[i] = c->f[i].pub;
		c->pubs[i].from_sym = c->f[i].from_sym;
		c->pubs[i].to_sym = c->f[i].to_sym;
		c->pubs[i].detail = c->f[i].detail;
	}
	*n = c->n_f;
	return c->pubs;
}

void btr_check_get_stats(const struct btr_analysis *a, struct btr_check_stats *st)
{
	const struct check *c = btr_analysis_state(a);
	if (c)
		*st = c->stats;
	else
		memset(st, 0, sizeof(*st));
}
