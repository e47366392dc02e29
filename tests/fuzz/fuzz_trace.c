/* fuzz_trace.c - libFuzzer target: the .btr reader on arbitrary bytes.
 * Must never crash, hang or read out of bounds; every pointer it returns
 * is touched so ASan sees any overrun. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/trace.h"
#include "btr/error.h"
#include "../../lib/trace/crc32c.h"

static volatile uint64_t sink;

static void touch(const struct btr_record *rec)
{
	uint64_t s = rec->type;
	switch (rec->type) {
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_EXEC:
		s += strlen(rec->u.module.path) + rec->u.module.build_id_len;
		break;
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME:
		s += strlen(rec->u.thread.name);
		break;
	case BTR_REC_MACHINE:
		s += strlen(rec->u.machine.backend) + strlen(rec->u.machine.cpu_vendor);
		break;
	case BTR_REC_PT:
	case BTR_REC_BTS:
		for (uint64_t i = 0; i < rec->u.data.size; i++)
			s += rec->u.data.data[i];
		break;
	case BTR_REC_LBR:
		for (uint32_t i = 0; i < rec->u.lbr.count; i++)
			s += rec->u.lbr.entries[i].from ^ rec->u.lbr.entries[i].cycles;
		break;
	case BTR_REC_BRANCHES:
		for (uint32_t i = 0; i < rec->u.branches.count; i++)
			s += rec->u.branches.branches[i].to + rec->u.branches.branches[i].kind;
		break;
	default:
		break;
	}
	sink += s;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/* Chunk header (docs/format.md) with valid CRCs. */
static void chunk(uint8_t *h, uint32_t flags, const uint8_t *pl, uint32_t len, uint32_t count)
{
	put32(h, 0x43525442u);
	put32(h + 4, flags);
	put32(h + 8, len);
	put32(h + 12, len);
	put32(h + 16, count);
	put32(h + 20, btr_crc32c(0, pl, len));
	put32(h + 24, 0);
	put32(h + 28, btr_crc32c(0, h, 28));
	memcpy(h + 32, pl, len);
}

/* Wraps @pl as the payload of one valid chunk, so that the fuzzer reaches
 * the record decoder behind the checksums. */
static uint8_t *wrap(const uint8_t *pl, size_t len, size_t *out_size)
{
	size_t hdr = 39, pos = 0;
	uint32_t count = 0;
	uint8_t *f = malloc(hdr + 32 + len + 32 + 16);

	if (!f)
		return NULL;
	memset(f, 0, hdr);
	memcpy(f, "BTRTRACE", 8);
	f[8] = 1;
	put32(f + 16, (uint32_t)hdr);
	f[36] = 1;
	f[38] = 'f';
	put32(f + 20, btr_crc32c(0, f, hdr));
	/* The record count the writer would have stored (or a wrong one if
	 * the records do not tile the payload: exercises BAD_RECORD). */
	while (pos + 8 <= len) {
		uint32_t l = pl[pos + 4] | pl[pos + 5] << 8 | pl[pos + 6] << 16 | (uint32_t)pl[pos + 7] << 24;
		if (l > len - pos - 8)
			break;
		pos += 8 + l;
		count++;
	}
	chunk(f + hdr, 0, pl, (uint32_t)len, count);
	uint8_t end[16] = { 1 };
	put32(end + 8, count);
	chunk(f + hdr + 32 + len, 2, end, 16, 0);
	*out_size = hdr + 32 + len + 48;
	return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	struct btr_trace_info info;
	uint8_t *wrapped = NULL;
	int rc;

	/* First byte 0xB7: the rest is a chunk payload to wrap; otherwise
	 * the input is the whole file. */
	if (size >= 1 && data[0] == 0xB7 && size < (1u << 20)) {
		wrapped = wrap(data + 1, size - 1, &size);
		if (!wrapped)
			return 0;
		data = wrapped;
	}
	if (btr_trace_reader_new_mem(data, size, &r)) {
		free(wrapped);
		return 0;
	}
	/* Continue past checksum errors like `btr trace dump` does; each one
	 * advances the reader, so this terminates. */
	while ((rc = btr_trace_read(r, &rec)) == 0 || rc == -BTR_ERR_CHECKSUM)
		if (!rc)
			touch(&rec);
	/* Errors other than CHECKSUM are sticky. */
	if (btr_trace_read(r, &rec) != rc)
		__builtin_trap();
	btr_trace_reader_info(r, &info);
	sink += info.records + btr_trace_reader_offset(r);
	btr_trace_reader_free(r);
	free(wrapped);
	return 0;
}
