/* profutil.h - helpers shared by the profile analyses (lib/analysis/). */
#ifndef BTR_PROFUTIL_H
#define BTR_PROFUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "btr/callstack.h"
#include "btr/profile.h"
#include "btr/text.h"   /* btr_json_str, btr_xml_str */

/* Whether the module file @path can be the traced program: the first
 * file module a process loads that is not a kernel module (perf traces
 * list kernel modules first). */
int prof_is_program(const char *path);

/* An unlinked temporary file (tmpfile(3)); NULL on failure. */
FILE *prof_tmpfile(void);

/* The weight of CCT node @n under @w. */
static inline uint64_t prof_node_weight(const struct btr_cs_node *n, enum btr_profile_weight w)
{
	return w == BTR_PROFILE_TIME ? n->self_time : n->self_cost;
}

/* The thread clock under @w. */
static inline uint64_t prof_clock(const struct btr_cs_thread *t, enum btr_profile_weight w)
{
	return w == BTR_PROFILE_TIME ? t->time : t->cost;
}

/* Inclusive weight of every CCT node (its subtree): an array of
 * btr_callstack_nnodes entries (malloc'd, caller frees), NULL when out of
 * memory.  Children always have higher indices than their parents. */
uint64_t *prof_subtree(const struct btr_callstack *cs, enum btr_profile_weight w);

/* Returns 0 if the weight @w can be used with @cs, or
 * -BTR_ERR_UNSUPPORTED (time asked, trace without timestamps). */
int prof_weight_ok(const struct btr_callstack *cs, enum btr_profile_weight w);

/* Name of the weight's unit: "instructions", "branches" or "ticks". */
const char *prof_unit(const struct btr_callstack *cs, enum btr_profile_weight w);

/* ---- protobuf encoding (varints, length-delimited fields) ---- */
struct pbuf {
	uint8_t *p;
	size_t len, cap;
	int nomem;
};
void pb_free(struct pbuf *b);
void pb_raw(struct pbuf *b, const void *data, size_t n);
void pb_varint(struct pbuf *b, uint64_t v);
void pb_tag(struct pbuf *b, unsigned field, unsigned wiretype);
/* field of wire type 0 (skipped when @v is 0 unless @always) */
void pb_uint(struct pbuf *b, unsigned field, uint64_t v);
void pb_sint(struct pbuf *b, unsigned field, int64_t v);
void pb_uint_always(struct pbuf *b, unsigned field, uint64_t v);   /* written even when 0 */   /* int64: two's complement varint */
/* length-delimited field with @n bytes */
void pb_bytes(struct pbuf *b, unsigned field, const void *data, size_t n);
void pb_str(struct pbuf *b, unsigned field, const char *s);
/* embedded message @m as field @field */
void pb_msg(struct pbuf *b, unsigned field, const struct pbuf *m);

/* A protobuf reader over @p..@end. */
struct pbr {
	const uint8_t *p, *end;
	int bad;
};
/* Reads the next field: returns 1 and sets *@field, *@wt, and *@v (varint
 * and fixed) or *@data and *@n (length-delimited); 0 at the end; -1 if bad. */
int pbr_next(struct pbr *r, unsigned *field, unsigned *wt, uint64_t *v, const uint8_t **data, size_t *n);
/* The numeric fields 1..@nout of the message @data (@n bytes): @out[f - 1]
 * = the last value of field f (0 if absent or length-delimited). */
void pbr_fields(const uint8_t *data, size_t n, uint64_t *out, unsigned nout);

/* gzip @in into @out (malloc'd).  Returns 0, -BTR_ERR_NOMEM, -BTR_ERR_COMPRESS. */
int prof_gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outn);
/* gunzip (or copy if not gzip) into @out (malloc'd). */
int prof_gunzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outn);

#endif
