/* text.c - escaping for the text formats btr writes (btr/text.h). */
#include <stdint.h>
#include <string.h>

#include "btr/text.h"

size_t btr_utf8_len(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;   /* the second byte's range */
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;   /* overlong */
		else if (c == 0xed)
			hi = 0x9f;   /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;   /* overlong */
		else if (c == 0xf4)
			hi = 0x8f;   /* above U+10FFFF */
	} else {
		return 0;
	}
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void btr_json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		if (*p == '"' || *p == '\\') {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else if (*p < 0x80) {
			fputc(*p++, f);
		} else {
			size_t n = btr_utf8_len((const char *)p);
			if (!n) {
				fputs("\\ufffd", f);
				p++;
			} else {
				fwrite(p, 1, n, f);
				p += n;
			}
		}
	}
	fputc('"', f);
}

void btr_xml_str(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
		switch (*p) {
		case '<': fputs("&lt;", f); p++; continue;
		case '>': fputs("&gt;", f); p++; continue;
		case '&': fputs("&amp;", f); p++; continue;
		case '"': fputs("&quot;", f); p++; continue;
		default: break;
		}
		/* XML 1.0 allows tab, newline and carriage return among the
		 * characters below U+0020 (source lines keep their tabs) */
		size_t n = *p < 0x20 ? (*p == '\t' || *p == '\n' || *p == '\r') : btr_utf8_len((const char *)p);
		if (!n) {
			fputc('?', f);
			p++;
		} else {
			fwrite(p, 1, n, f);
			p += n;
		}
	}
}

/* The length of a C1 control character (U+0080..U+009F, two bytes in
 * UTF-8: C2 80..C2 9F) at @p, else 0. */
static size_t c1_len(const unsigned char *p)
{
	return p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f ? 2 : 0;
}

void btr_text_str(FILE *f, const char *s, int quoted)
{
	if (quoted)
		fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		/* a run of plain printable ASCII in one write */
		size_t run = 0;
		while (p[run] >= 0x20 && p[run] < 0x7f && !(quoted && (p[run] == '"' || p[run] == '\\')))
			run++;
		if (run) {
			fwrite(p, 1, run, f);
			p += run;
			continue;
		}
		size_t c1 = c1_len(p);
		if (quoted && (*p == '"' || *p == '\\')) {
			fputc('\\', f);
			fputc(*p++, f);
		} else if (*p == '\n') {
			fputs("\\n", f);
			p++;
		} else if (*p == '\t') {
			fputs("\\t", f);
			p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p++);
		} else if (c1) {
			fprintf(f, "\\u%04x", p[1]);
			p += c1;
		} else if (*p >= 0x80 && *p <= 0x9f && !btr_utf8_len((const char *)p)) {
			fprintf(f, "\\x%02x", *p++);   /* a lone C1 byte (CSI to a Latin-1 terminal) */
		} else {
			size_t n = *p >= 0x80 ? btr_utf8_len((const char *)p) : 1;
			fwrite(p, 1, n ? n : 1, f);
			p += n ? n : 1;
		}
	}
	if (quoted)
		fputc('"', f);
}

/* The bytes at @p (NUL-terminated) that btr_text_field treats as one:
 * a well-formed UTF-8 sequence, else one byte; *@bad: they become `?`. */
static size_t field_unit(const unsigned char *p, const char *special, int *bad)
{
	size_t n = *p >= 0x80 ? btr_utf8_len((const char *)p) : 1;
	if (!n) {   /* not UTF-8: a lone C1 byte is replaced, the others kept */
		*bad = *p <= 0x9f;
		return 1;
	}
	*bad = *p < 0x20 || *p == 0x7f || c1_len(p) || (n == 1 && special && strchr(special, *p));
	return n;
}

void btr_text_field(FILE *f, const char *s, const char *special)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		int bad;
		size_t n = field_unit(p, special, &bad);
		if (bad)
			fputc('?', f);
		else
			fwrite(p, 1, n, f);
		p += n;
	}
}

void btr_text_field_fix(char *s, size_t n, const char *special)
{
	unsigned char *p = (unsigned char *)s;
	for (size_t i = 0; i < n && p[i];) {
		/* (the bytes at i, NUL-terminated, for the UTF-8 checks: never
		 * read past the @n bytes) */
		unsigned char q[5] = { 0 };
		for (size_t k = 0; k < 4 && i + k < n; k++)
			q[k] = p[i + k];
		int bad;
		size_t u = field_unit(q, special, &bad);
		for (size_t k = 0; bad && k < u; k++)
			p[i + k] = '?';
		i += u;
	}
}
