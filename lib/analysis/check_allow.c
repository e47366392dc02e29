/* check_allow.c - the `--allow FILE` rules of `btr check` (docs/check.md):
 * parsing their text and matching a finding against them.  Knows nothing
 * of the analysis: check.c hands in the finding kinds and each finding's
 * fields. */
#include "check_priv.h"
#include "btr/error.h"
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int check_allow_parse(const char *text, const char *const *kinds, size_t n_kinds, struct check_allow_rule **rules,
		      size_t *n_rules)
{
	int lineno = 0;
	while (text && *text) {
		const char *eol = strchr(text, '\n');
		size_t len = eol ? (size_t)(eol - text) : strlen(text);
		char line[512];
		lineno++;
		if (len >= sizeof(line)) {
			btr_err("allow rule %d: line too long", lineno);
			return -BTR_ERR_BAD_FILTER;
		}
		memcpy(line, text, len);
		line[len] = 0;
		text = eol ? eol + 1 : text + len;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *kind = strtok(line, " \t\r");
		if (!kind)
			continue;
		char *pat = strtok(NULL, "\r");
		while (pat && isspace((unsigned char)*pat))
			pat++;
		if (pat) {
			size_t pl = strlen(pat);
			while (pl && isspace((unsigned char)pat[pl - 1]))
				pat[--pl] = 0;
		}
		int known = !strcmp(kind, "*");
		for (size_t k = 0; k < n_kinds && !known; k++)
			known = !strcmp(kind, kinds[k]);
		if (!known || !pat || !*pat) {
			btr_err("allow rule %d: '%s' %s", lineno, kind,
				known ? "needs a pattern ('*', 0xLO-0xHI or text)" : "is not a finding kind");
			return -BTR_ERR_BAD_FILTER;
		}
		struct check_allow_rule *nr = realloc(*rules, (*n_rules + 1) * sizeof(*nr));
		if (!nr)
			return -BTR_ERR_NOMEM;
		*rules = nr;
		struct check_allow_rule *r = &nr[*n_rules];
		memset(r, 0, sizeof(*r));
		if (strcmp(kind, "*"))
			snprintf(r->kind, sizeof(r->kind), "%s", kind);
		char *dash;
		if (!strcmp(pat, "*")) {
			r->type = 0;
		} else if (!strncmp(pat, "0x", 2) && (dash = strchr(pat, '-')) != NULL) {
			char *e1, *e2;
			r->lo = strtoull(pat, &e1, 16);
			r->hi = strtoull(dash + 1, &e2, 16);
			if (e1 != dash || *e2 || r->hi < r->lo) {
				btr_err("allow rule %d: bad address range '%s'", lineno, pat);
				return -BTR_ERR_BAD_FILTER;
			}
			r->type = 1;
		} else {
			r->type = 2;
			if (!(r->text = strdup(pat)))
				return -BTR_ERR_NOMEM;
		}
		(*n_rules)++;
	}
	return 0;
}

int check_allow_match(const struct check_allow_rule *rules, size_t n_rules, const char *kind, uint64_t from,
		      uint64_t to, const char *detail, const char *from_sym, const char *to_sym)
{
	for (size_t i = 0; i < n_rules; i++) {
		const struct check_allow_rule *r = &rules[i];
		if (r->kind[0] && strcmp(r->kind, kind))
			continue;
		if (r->type == 0)
			return 1;
		if (r->type == 1 && ((from >= r->lo && from <= r->hi) || (to >= r->lo && to <= r->hi)))
			return 1;
		if (r->type == 2 && (strstr(detail, r->text) || strstr(from_sym, r->text) || strstr(to_sym, r->text)))
			return 1;
	}
	return 0;
}

void check_allow_free(struct check_allow_rule *rules, size_t n_rules)
{
	for (size_t i = 0; i < n_rules; i++)
		free(rules[i].text);
	free(rules);
}
