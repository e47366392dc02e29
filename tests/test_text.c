/* test_text.c - the escapers of btr/text.h: btr_xml_str (the one XML/HTML
 * text escaper of the Cobertura report and the flame graph SVG),
 * btr_json_str, and the text escapers btr_text_str (terminal text) and
 * btr_text_field (line formats), on the bytes a trace's paths and symbols
 * may hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btr/text.h"
#include "check.h"

typedef void (*escaper)(FILE *, const char *);

/* What @esc writes for @s, in a static buffer. */
static const char *run(escaper esc, const char *s)
{
	static char out[256];
	memset(out, 0, sizeof(out));
	FILE *f = fmemopen(out, sizeof(out), "w");
	if (!f)
		return "";
	esc(f, s);
	fclose(f);
	return out;
}

static void text_plain(FILE *f, const char *s) { btr_text_str(f, s, 0); }
static void text_quoted(FILE *f, const char *s) { btr_text_str(f, s, 1); }
static void field_folded(FILE *f, const char *s) { btr_text_field(f, s, ";"); }

int main(void)
{
	/* terminal text: ESC, OSC, BEL, CSI (C1, as UTF-8 and as a lone byte) never raw */
	CHECK_STR(run(text_plain, "a\x1b]0;t\x07" "b\nc\td\x7f"), "a\\u001b]0;t\\u0007b\\nc\\td\\u007f");
	CHECK_STR(run(text_plain, "x\xc2\x9b" "2Jy\x9b" "z"), "x\\u009b2Jy\\x9bz");
	CHECK_STR(run(text_plain, "caf\xc3\xa9 \xe2\x82\xac \"q\" \\"), "caf\xc3\xa9 \xe2\x82\xac \"q\" \\");
	CHECK_STR(run(text_plain, NULL), "");
	CHECK_STR(run(text_quoted, "a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
	/* line formats: separators and control characters become ? */
	CHECK_STR(run(field_folded, "a;b\nforged 9\r\x1b[1m\xc2\x85\xe2\x82\xac"), "a?b?forged 9??[1m?\xe2\x82\xac");
	char buf[] = "x;y\nz\xc2\x9b";
	btr_text_field_fix(buf, 3, ";");   /* only the first 3 bytes */
	CHECK_STR(buf, "x?y\nz\xc2\x9b");
	btr_text_field_fix(buf, sizeof(buf), NULL);
	CHECK_STR(buf, "x?y?z??");

	CHECK_STR(run(btr_xml_str, "a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c'");
	CHECK_STR(run(btr_xml_str, "caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");   /* UTF-8 kept */
	CHECK_STR(run(btr_xml_str, "x\xff\xc3y"), "x??y");      /* not UTF-8: one ? per byte */
	CHECK_STR(run(btr_xml_str, "t\tn\n\x01\x1b"), "t\tn\n??");   /* control characters but tab, newline */
	CHECK_STR(run(btr_xml_str, ""), "");
	CHECK_STR(run(btr_xml_str, NULL), "");

	CHECK_STR(run(btr_json_str, "a\"b\\c\n\x7f"), "\"a\\\"b\\\\c\\u000a\\u007f\"");
	CHECK_STR(run(btr_json_str, "x\xffy\xc3\xa9"), "\"x\\ufffdy\xc3\xa9\"");
	CHECK_STR(run(btr_json_str, NULL), "null");
	/* The ill-formed sequences of Unicode's Table 3-7 at each edge of a
	 * lead byte's second-byte range: one U+FFFD per byte, as Python's
	 * bytes.decode("utf-8", "replace") gives for each; the well-formed
	 * neighbours kept as they are. */
	static const struct { const char *in, *out; } utf8[] = {
		{ "\xe0\x80\x80", "\"\\ufffd\\ufffd\\ufffd\"" },           /* overlong U+0000 */
		{ "\xe0\x9f\xbf", "\"\\ufffd\\ufffd\\ufffd\"" },           /* overlong U+07FF */
		{ "\xe0\xa0\x80", "\"\xe0\xa0\x80\"" },                    /* U+0800 */
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },           /* surrogate U+D800 */
		{ "\xed\x9f\xbf", "\"\xed\x9f\xbf\"" },                    /* U+D7FF */
		{ "\xf0\x8f\xbf\xbf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },  /* overlong U+FFFF */
		{ "\xf0\x90\x80\x80", "\"\xf0\x90\x80\x80\"" },            /* U+10000 */
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },  /* above U+10FFFF */
		{ "\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"" },            /* U+10FFFF */
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },                      /* overlong '/' */
	};
	for (size_t i = 0; i < sizeof(utf8) / sizeof(utf8[0]); i++)
		CHECK_STR(run(btr_json_str, utf8[i].in), utf8[i].out);
	return check_done();
}
