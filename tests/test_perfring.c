/* test_perfring.c - the perf ring and AUX reader (btr/perfring.h) on
 * simulated buffers: a "kernel" in this file writes records the way
 * perf_output_begin/end do (free-running head, wrap-around, whole records
 * published by moving data_head, no overwriting of unread data - a
 * PERF_RECORD_LOST instead) and the reader must get every record back
 * exactly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "btr/perfring.h"
#include "check.h"

#define PAGE 4096

static _Alignas(8) uint8_t page[PAGE];
static _Alignas(8) uint8_t data[4096];
static _Alignas(8) uint8_t aux[1024];

static uint64_t rd(unsigned off)
{
	uint64_t v;
	memcpy(&v, page + off, 8);
	return v;
}

static void wr(unsigned off, uint64_t v)
{
	memcpy(page + off, &v, 8);
}

/* ---- the simulated kernel ---- */

struct kern {
	uint8_t *data;
	uint64_t size;
	uint64_t head;       /* written but maybe not yet published */
	uint64_t lost;       /* records dropped since the last LOST record */
};

static void kput_bytes(struct kern *k, const void *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		k->data[(k->head + i) & (k->size - 1)] = ((const uint8_t *)p)[i];
	k->head += len;
}

static int kfits(struct kern *k, uint64_t len)
{
	return k->size - (k->head - rd(BTR_PERF_PAGE_DATA_TAIL)) >= len;
}

/* Writes one record (header + payload padded to 8) like the kernel: if it
 * does not fit, it is dropped and counted; a PERF_RECORD_LOST goes first
 * once there is room again.  Does not publish (see kpublish). */
static int kwrite(struct kern *k, uint32_t type, uint16_t misc, const void *payload, uint16_t len)
{
	uint16_t size = (uint16_t)(8 + ((len + 7u) & ~7u));
	if (k->lost) {
		if (!kfits(k, 24 + size)) {
			k->lost++;
			return 0;
		}
		uint8_t lost[24] = { 0 };
		uint32_t t = BTR_PERF_RECORD_LOST;
		uint16_t s = 24;
		memcpy(lost, &t, 4);
		memcpy(lost + 6, &s, 2);
		memcpy(lost + 16, &k->lost, 8);
		kput_bytes(k, lost, 24);
		k->lost = 0;
	}
	if (!kfits(k, size)) {
		k->lost++;
		return 0;
	}
	uint8_t hdr[8];
	memcpy(hdr, &type, 4);
	memcpy(hdr + 4, &misc, 2);
	memcpy(hdr + 6, &size, 2);
	kput_bytes(k, hdr, 8);
	kput_bytes(k, payload, len);
	static const uint8_t zero[8];
	kput_bytes(k, zero, size - 8u - len);
	return 1;
}

static void kpublish(struct kern *k)
{
	wr(BTR_PERF_PAGE_DATA_HEAD, k->head);
}

static void reset(void)
{
	memset(page, 0, sizeof(page));
	memset(data, 0xcc, sizeof(data));
	memset(aux, 0, sizeof(aux));
}

/* payload of record number @seq: its number, then a byte pattern */
static uint16_t make_payload(uint64_t seq, uint8_t *buf)
{
	uint16_t len = (uint16_t)(8 + (seq * 37) % 300);
	memcpy(buf, &seq, 8);
	for (uint16_t i = 8; i < len; i++)
		buf[i] = (uint8_t)(seq + i);
	return len;
}

static int payload_ok(const struct btr_perf_ring_rec *rec, uint64_t seq)
{
	uint8_t want[400];
	uint16_t len = make_payload(seq, want);
	if (rec->size != 8 + ((len + 7u) & ~7u))
		return 0;
	return !memcmp(rec->rec + 8, want, len);
}

static void test_init(void)
{
	struct btr_perf_ring *r = malloc(sizeof(*r));
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, 3000, NULL, 0, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_init(r, page, data, 4, NULL, 0, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_init(r, page, data, 4096, aux, 1000, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_init(r, page, data, 4096, NULL, 1024, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_init(NULL, page, data, 4096, NULL, 0, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_init(r, page + 1, data, 4096, NULL, 0, 0), -BTR_ERR_INVAL);
	/* reading starts at the stored tail */
	wr(BTR_PERF_PAGE_DATA_TAIL, 0x1238);
	wr(BTR_PERF_PAGE_DATA_HEAD, 0x1238);
	CHECK_EQ(btr_perf_ring_init(r, page, data, 4096, NULL, 0, 0), 0);
	CHECK_EQ(r->tail, 0x1238);
	CHECK_EQ(btr_perf_ring_begin(r), 0);

	/* one mapping: data_offset/data_size (Linux 4.1+) */
	static _Alignas(8) uint8_t map[PAGE + 8192];
	memset(map, 0, sizeof(map));
	uint64_t v = PAGE;
	memcpy(map + BTR_PERF_PAGE_DATA_OFFSET, &v, 8);
	v = 8192;
	memcpy(map + BTR_PERF_PAGE_DATA_SIZE, &v, 8);
	CHECK_EQ(btr_perf_ring_init_mmap(r, map, sizeof(map), PAGE), 0);
	CHECK(r->data == map + PAGE);
	CHECK_EQ(r->data_size, 8192);
	/* older kernels: fields zero, data after the first page */
	memset(map, 0, sizeof(map));
	CHECK_EQ(btr_perf_ring_init_mmap(r, map, sizeof(map), PAGE), 0);
	CHECK(r->data == map + PAGE);
	CHECK_EQ(r->data_size, 8192);
	/* offsets pointing outside the mapping */
	v = PAGE;
	memcpy(map + BTR_PERF_PAGE_DATA_OFFSET, &v, 8);
	v = 16384;
	memcpy(map + BTR_PERF_PAGE_DATA_SIZE, &v, 8);
	CHECK_EQ(btr_perf_ring_init_mmap(r, map, sizeof(map), PAGE), -BTR_ERR_INVAL);
	free(r);
}

/* Many records of varying sizes through a small ring, over many laps:
 * records split at the end, the tail stored after each batch lets the
 * kernel reuse the space, every record comes back intact and in order. */
static void test_laps(void)
{
	struct btr_perf_ring *r = malloc(sizeof(*r));
	struct kern k = { data, sizeof(data), 0, 0 };
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	uint64_t wseq = 0, rseq = 0, split = 0, bad = 0;
	uint8_t buf[400];
	for (int round = 0; round < 400; round++) {
		/* the kernel writes a few records (never more than fit) */
		int n = 1 + round % 7;
		for (int i = 0; i < n; i++) {
			uint16_t len = make_payload(wseq, buf);
			if (!kfits(&k, 8 + ((len + 7u) & ~7u)))
				break;
			CHECK(kwrite(&k, BTR_PERF_RECORD_SAMPLE, 2, buf, len));
			wseq++;
		}
		kpublish(&k);
		int64_t avail = btr_perf_ring_begin(r);
		CHECK(avail >= 0);
		struct btr_perf_ring_rec rec;
		int rc;
		while ((rc = btr_perf_ring_next(r, &rec)) == 1) {
			CHECK_EQ(rec.type, BTR_PERF_RECORD_SAMPLE);
			CHECK_EQ(rec.misc, 2);
			if (!payload_ok(&rec, rseq))
				bad++;
			if (rec.rec == r->scratch)
				split++;
			rseq++;
		}
		CHECK_EQ(rc, 0);
		btr_perf_ring_end(r);
		CHECK_EQ(rd(BTR_PERF_PAGE_DATA_TAIL), k.head);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(rseq, wseq);
	CHECK(wseq > 1000);
	CHECK(split > 10);   /* records really were split at the end */
	CHECK(k.head > 50 * sizeof(data));
	CHECK_EQ(r->records, wseq);
	CHECK_EQ(r->bad_bytes, 0);
	free(r);
}

/* A full ring: the kernel drops records and reports them with one
 * PERF_RECORD_LOST when the reader has made room. */
static void test_lost(void)
{
	struct btr_perf_ring *r = malloc(sizeof(*r));
	struct kern k = { data, sizeof(data), 0, 0 };
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	uint8_t buf[400];
	uint64_t written = 0, dropped = 0;
	for (uint64_t s = 0; s < 100; s++) {
		uint16_t len = make_payload(s, buf);
		if (kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, len))
			written++;
		else
			dropped++;
	}
	CHECK(dropped > 0);
	kpublish(&k);
	struct btr_perf_ring_rec rec;
	CHECK(btr_perf_ring_begin(r) > 0);
	uint64_t got = 0;
	while (btr_perf_ring_next(r, &rec) == 1)
		got++;
	CHECK_EQ(got, written);
	btr_perf_ring_end(r);
	/* room again: the next record is preceded by LOST */
	uint16_t len = make_payload(999, buf);
	CHECK(kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, len));
	/* a LOST_SAMPLES record too */
	uint64_t ls = 5;
	CHECK(kwrite(&k, BTR_PERF_RECORD_LOST_SAMPLES, 0, &ls, 8));
	kpublish(&k);
	CHECK(btr_perf_ring_begin(r) > 0);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK_EQ(rec.type, BTR_PERF_RECORD_LOST);
	CHECK_EQ(r->lost_events, dropped);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 999));
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK_EQ(rec.type, BTR_PERF_RECORD_LOST_SAMPLES);
	CHECK_EQ(r->lost_samples, 5);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 0);
	btr_perf_ring_end(r);
	free(r);
}

/* The head moves while a batch is read: the batch ends at the head seen
 * by begin; the new records come with the next begin. */
static void test_head_moves(void)
{
	struct btr_perf_ring *r = malloc(sizeof(*r));
	struct kern k = { data, sizeof(data), 0, 0 };
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	uint8_t buf[400];
	for (uint64_t s = 0; s < 3; s++)
		kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, make_payload(s, buf));
	kpublish(&k);
	struct btr_perf_ring_rec rec;
	CHECK(btr_perf_ring_begin(r) > 0);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 0));
	/* the kernel writes two more while we read */
	for (uint64_t s = 3; s < 5; s++)
		kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, make_payload(s, buf));
	kpublish(&k);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 1));
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 2));
	CHECK_EQ(btr_perf_ring_next(r, &rec), 0);   /* batch done */
	btr_perf_ring_end(r);
	CHECK(btr_perf_ring_begin(r) > 0);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 3));
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 4));
	CHECK_EQ(btr_perf_ring_next(r, &rec), 0);
	free(r);
}

/* Corrupt memory: a header claiming more than was published, a size 0
 * header, a size not a multiple of 8, a head more than a ring ahead. */
static void test_corrupt(void)
{
	struct btr_perf_ring *r = malloc(sizeof(*r));
	struct kern k = { data, sizeof(data), 0, 0 };
	uint8_t buf[400];
	struct btr_perf_ring_rec rec;

	/* truncated: the last record runs past data_head */
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, make_payload(0, buf));
	kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, make_payload(1, buf));
	wr(BTR_PERF_PAGE_DATA_HEAD, k.head - 8);
	CHECK(btr_perf_ring_begin(r) > 0);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 1);
	CHECK(payload_ok(&rec, 0));
	uint64_t left = r->head - r->tail;
	CHECK_EQ(btr_perf_ring_next(r, &rec), -BTR_ERR_TRUNCATED);
	CHECK_EQ(r->bad_bytes, left);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 0);
	btr_perf_ring_end(r);
	CHECK_EQ(rd(BTR_PERF_PAGE_DATA_TAIL), k.head - 8);

	/* fewer than 8 bytes published */
	reset();
	k.head = 0;
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, 8);
	wr(BTR_PERF_PAGE_DATA_HEAD, 4);
	CHECK_EQ(btr_perf_ring_begin(r), 4);
	CHECK_EQ(btr_perf_ring_next(r, &rec), -BTR_ERR_TRUNCATED);

	/* size 0 and an odd size */
	for (int odd = 0; odd < 2; odd++) {
		reset();
		k.head = 0;
		CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
		kwrite(&k, BTR_PERF_RECORD_SAMPLE, 0, buf, 16);
		uint16_t sz = odd ? 13 : 0;
		memcpy(data + 6, &sz, 2);
		kpublish(&k);
		CHECK_EQ(btr_perf_ring_begin(r), 24);
		CHECK_EQ(btr_perf_ring_next(r, &rec), -BTR_ERR_BAD_RECORD);
		CHECK_EQ(r->bad_bytes, 24);
		CHECK_EQ(btr_perf_ring_next(r, &rec), 0);
	}

	/* head more than a ring ahead of the tail, and behind it */
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	wr(BTR_PERF_PAGE_DATA_HEAD, sizeof(data) + 64);
	CHECK_EQ(btr_perf_ring_begin(r), -BTR_ERR_OVERFLOW);
	CHECK_EQ(r->tail, sizeof(data) + 64);
	CHECK_EQ(btr_perf_ring_next(r, &rec), 0);
	wr(BTR_PERF_PAGE_DATA_HEAD, 8);
	CHECK_EQ(btr_perf_ring_begin(r), -BTR_ERR_OVERFLOW);
	free(r);
}

/* ---- AUX ---- */

static void aux_fill(uint64_t from, uint64_t to)
{
	for (uint64_t p = from; p < to; p++)
		aux[p % sizeof(aux)] = (uint8_t)(p * 7 + 1);
}

static int span_ok(const struct btr_perf_aux_span *s)
{
	for (uint64_t i = 0; i < s->len; i++)
		if (s->ptr[i] != (uint8_t)((s->pos + i) * 7 + 1))
			return 0;
	return 1;
}

static void test_aux(void)
{
	struct btr_perf_ring *r = malloc(sizeof(*r));
	struct btr_perf_aux_span sp[2];
	uint64_t lost;
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), NULL, 0, 0), 0);
	CHECK_EQ(btr_perf_ring_aux_read(r, sp, &lost), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_set_aux(r, aux, 1000, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_ring_set_aux(r, aux, sizeof(aux), 0), 0);

	/* nothing new */
	CHECK_EQ(btr_perf_ring_aux_read(r, sp, &lost), 0);
	/* 600 bytes: one span */
	aux_fill(0, 600);
	wr(BTR_PERF_PAGE_AUX_HEAD, 600);
	CHECK_EQ(btr_perf_ring_aux_read(r, sp, &lost), 1);
	CHECK_EQ(sp[0].pos, 0);
	CHECK_EQ(sp[0].len, 600);
	CHECK(span_ok(&sp[0]));
	CHECK_EQ(lost, 0);
	btr_perf_ring_aux_done(r);
	CHECK_EQ(rd(BTR_PERF_PAGE_AUX_TAIL), 600);
	/* 700 more: wraps, two spans with consecutive positions */
	aux_fill(600, 1300);
	wr(BTR_PERF_PAGE_AUX_HEAD, 1300);
	CHECK_EQ(btr_perf_ring_aux_read(r, sp, &lost), 2);
	CHECK_EQ(sp[0].pos, 600);
	CHECK_EQ(sp[0].len, 424);
	CHECK_EQ(sp[1].pos, 1024);
	CHECK_EQ(sp[1].len, 276);
	CHECK(sp[0].ptr == aux + 600 && sp[1].ptr == aux);
	CHECK(span_ok(&sp[0]) && span_ok(&sp[1]));
	btr_perf_ring_aux_done(r);
	CHECK_EQ(rd(BTR_PERF_PAGE_AUX_TAIL), 1300);
	/* overrun: 1500 bytes written since, only the newest 1024 are there */
	aux_fill(1300, 2800);
	wr(BTR_PERF_PAGE_AUX_HEAD, 2800);
	int n = btr_perf_ring_aux_read(r, sp, &lost);
	CHECK_EQ(lost, 1500 - 1024);
	uint64_t total = 0;
	for (int i = 0; i < n; i++) {
		CHECK(span_ok(&sp[i]));
		total += sp[i].len;
	}
	CHECK_EQ(sp[0].pos, 2800 - 1024);
	CHECK_EQ(total, 1024);
	btr_perf_ring_aux_done(r);

	/* snapshot mode: read-only AUX, never store the tail */
	reset();
	CHECK_EQ(btr_perf_ring_init(r, page, data, sizeof(data), aux, sizeof(aux), 1), 0);
	int wrapped = -1;
	CHECK_EQ(btr_perf_ring_aux_snapshot(r, 0, sp, &wrapped), 0);
	aux_fill(0, 300);
	CHECK_EQ(btr_perf_ring_aux_snapshot(r, 300, sp, &wrapped), 1);
	CHECK_EQ(wrapped, 0);
	CHECK_EQ(sp[0].pos, 0);
	CHECK_EQ(sp[0].len, 300);
	CHECK(span_ok(&sp[0]));
	aux_fill(300, 5000);
	CHECK_EQ(btr_perf_ring_aux_snapshot(r, 5000, sp, &wrapped), 2);
	CHECK_EQ(wrapped, 1);
	CHECK_EQ(sp[0].pos, 5000 - 1024);
	CHECK_EQ(sp[0].len + sp[1].len, 1024);
	CHECK(span_ok(&sp[0]) && span_ok(&sp[1]));
	CHECK(sp[0].ptr == aux + (5000 - 1024) % 1024);
	/* exactly at the boundary: one span, the whole area */
	CHECK_EQ(btr_perf_ring_aux_snapshot(r, 4096, sp, &wrapped), 1);
	CHECK_EQ(sp[0].len, 1024);
	CHECK(sp[0].ptr == aux);
	wr(BTR_PERF_PAGE_AUX_HEAD, 5000);
	CHECK(btr_perf_ring_aux_read(r, sp, &lost) > 0);
	btr_perf_ring_aux_done(r);
	CHECK_EQ(rd(BTR_PERF_PAGE_AUX_TAIL), 0);   /* overwrite mode: untouched */
	free(r);
}

static void test_parse_aux(void)
{
	_Alignas(8) uint8_t rec[40] = { 0 };
	uint32_t t = BTR_PERF_RECORD_AUX;
	uint16_t s = 40;
	uint64_t off = 0x1000, size = 0x800, flags = BTR_PERF_AUX_TRUNCATED | BTR_PERF_AUX_PARTIAL;
	memcpy(rec, &t, 4);
	memcpy(rec + 6, &s, 2);
	memcpy(rec + 8, &off, 8);
	memcpy(rec + 16, &size, 8);
	memcpy(rec + 24, &flags, 8);
	struct btr_perf_ring_rec rr = { BTR_PERF_RECORD_AUX, 0, 40, 0, rec };
	struct btr_perf_aux_rec a;
	CHECK_EQ(btr_perf_parse_aux(&rr, &a), 0);
	CHECK_EQ(a.offset, 0x1000);
	CHECK_EQ(a.size, 0x800);
	CHECK_EQ(a.flags, 5);
	rr.size = 24;
	CHECK_EQ(btr_perf_parse_aux(&rr, &a), -BTR_ERR_BAD_RECORD);
}

int main(void)
{
	test_init();
	test_laps();
	test_lost();
	test_head_moves();
	test_corrupt();
	test_aux();
	test_parse_aux();
	return check_done();
}
