/* text.h - escaping for the text formats btr writes: the one JSON string
 * writer used by every JSON output of the library and the CLI, and the one
 * XML/HTML text escaper. */
#ifndef BTR_TEXT_H
#define BTR_TEXT_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The length (1..4) of the well-formed UTF-8 sequence at @s (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0 if the
 * bytes at @s are not one.  @s must be NUL-terminated. */
size_t btr_utf8_len(const char *s);

/* Writes @s to @f as a JSON string, quotes included; NULL as `null`.
 * Paths, symbols and thread names come from traces and may hold any
 * bytes: `"` and `\` are escaped, control characters (U+0000..U+001F,
 * U+007F) are written as \u00XX, well-formed UTF-8 is kept as it is, and
 * every byte that is not part of well-formed UTF-8 becomes \ufffd.  Write
 * errors stay in @f's error flag (ferror). */
void btr_json_str(FILE *f, const char *s);

/* Writes @s to @f as XML (or HTML) character data or attribute text,
 * without quotes; NULL writes nothing.  `<`, `>`, `&` and `"` become
 * entities, well-formed UTF-8 is kept as it is (tab, newline and carriage
 * return too), and the other control characters (below U+0020) and every
 * byte that is not part of well-formed UTF-8 become `?`, so the output is
 * always well-formed XML.  Write errors stay
 * in @f's error flag (ferror). */
void btr_xml_str(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
