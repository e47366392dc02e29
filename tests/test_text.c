/* test_text.c - the escapers of btr/text.h: btr_xml_str (the one XML/HTML
 * text escaper of the Cobertura report and the flame graph SVG) and
 * btr_json_str, on the bytes a trace's paths and symbols may hold. */
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

int main(void)
{
	CHECK_STR(run(btr_xml_str, "a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c'");
	CHECK_STR(run(btr_xml_str, "caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");   /* UTF-8 kept */
	CHECK_STR(run(btr_xml_str, "x\xff\xc3y"), "x??y");      /* not UTF-8: one ? per byte */
	CHECK_STR(run(btr_xml_str, "t\tn\n\x01\x1b"), "t\tn\n??");   /* control characters but tab, newline */
	CHECK_STR(run(btr_xml_str, ""), "");
	CHECK_STR(run(btr_xml_str, NULL), "");

	CHECK_STR(run(btr_json_str, "a\"b\\c\n\x7f"), "\"a\\\"b\\\\c\\u000a\\u007f\"");
	CHECK_STR(run(btr_json_str, "x\xffy\xc3\xa9"), "\"x\\ufffdy\xc3\xa9\"");
	CHECK_STR(run(btr_json_str, NULL), "null");
	return check_done();
}
