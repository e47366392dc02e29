/* text.h - escaping for the text formats btr writes: the one JSON string
 * writer used by every JSON output of the library and the CLI, the one
 * XML/HTML text escaper, and the one escaper of plain text and line
 * formats. */
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

/* Writes @s to @f for a terminal or a line of a text report: the one
 * escaper of text outputs (btr report, btr trace dump, ...).  Names and
 * paths come from traces and may hold any bytes: newline and tab become
 * \n and \t, the other control characters (U+0000..U+001F, U+007F and
 * the C1 controls U+0080..U+009F) \u00XX, a byte 0x80..0x9F that is not
 * part of well-formed UTF-8 \xXX, so no escape sequence reaches a
 * terminal and no name makes a line of its own; every other byte is
 * kept.  With @quoted, inside double quotes, `"` and `\` escaped too
 * (then the text is a valid C and JSON string when it is UTF-8).  NULL
 * is written as the empty string. */
void btr_text_str(FILE *f, const char *s, int quoted);

/* Writes @s to @f as a field of a line format (lcov, drcov, folded
 * stacks): each control character and lone C1 byte (as for btr_text_str)
 * and each byte of
 * @special (NULL: none) - the format's own separators - becomes `?`.
 * NULL is written as the empty string. */
void btr_text_field(FILE *f, const char *s, const char *special);

/* btr_text_field in place: the first @n bytes of @s (up to its NUL). */
void btr_text_field_fix(char *s, size_t n, const char *special);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
