/* text.c - escaping for the text formats btr writes (btr/text.h). */
#include <stdint.h>

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
