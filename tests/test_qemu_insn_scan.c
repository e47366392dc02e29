/* test_qemu_insn_scan.c - the QEMU plugin's may_stop() fast path
 * (agents/qemu/qemu_insn_scan.h): an instruction it passes as register-only
 * without decoding the operands (reg_only) must have no memory operand and
 * be none that can fault, so that the counters the plugin places, and with
 * them the exactness of a faulting block's end, are those of the full
 * decode.  Checked at every byte offset of real code (libc, ld.so, the btr
 * binary: every encoding a compiler emits) and of pseudo-random bytes, and
 * on a few hand-picked encodings. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <Zydis/Zydis.h>

#include "check.h"
#include "../agents/qemu/qemu_insn_scan.h"

static unsigned long fast_hits, bad;

/* may_stop decided by the full decode alone: the answer before the fast path. */
static int full_answer(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops)
{
	if (in->attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
		return 1;
	for (unsigned i = 0; i < in->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.type != ZYDIS_MEMOP_TYPE_AGEN)
			return 1;
	return 0;
}

static void scan(const uint8_t *b, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = n - i < 15 ? n - i : 15;
		ZydisDecodedInstruction in;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zdec, b + i, len, &in, ops)))
			continue;
		/* may_stop answers privileged instructions (MOV CRn/DRn) first */
		if (!reg_only(&in) || (in.attributes & ZYDIS_ATTRIB_IS_PRIVILEGED))
			continue;
		fast_hits++;
		if (full_answer(&in, ops) || may_stop(b + i, len, 0)) {
			if (bad++ < 10)
				fprintf(stderr, "%s+0x%zx: register-only by the fast path, not by the operands\n", what, i);
		}
	}
}

static void scan_file(const char *path, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return;
	uint8_t *b = malloc(cap);
	size_t n = b ? fread(b, 1, cap, f) : 0;
	fclose(f);
	scan(b, n, path);
	free(b);
}

int main(void)
{
	CHECK(ZYAN_SUCCESS(ZydisDecoderInit(&zdec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)));
	static const struct { const char *bytes; int len, stop; } cases[] = {
		{ "\x48\x01\xd8", 3, 0 },             /* add rax, rbx */
		{ "\x48\x8d\x44\x7f\x01", 5, 0 },     /* lea rax, [rdi+rdi*2+1] */
		{ "\x48\x8b\x07", 3, 1 },             /* mov rax, [rdi]: a load */
		{ "\x8e\xd8", 2, 1 },                 /* mov ds, eax: a bad selector faults (#GP) */
		{ "\x8c\xd8", 2, 0 },                 /* mov eax, ds */
		{ "\x0f\x23\xf8", 3, 1 },             /* mov dr7, rax: privileged */
		{ "\x48\xf7\xf1", 3, 1 },             /* div rcx */
		{ "\x50", 1, 1 },                     /* push rax: a store */
		{ "\xff\xd0", 2, 1 },                 /* call rax: a store */
		{ "\x0f\x1f\x44\x00\x00", 5, 1 },     /* nop dword [rax+rax]: counted (Zydis: a memory operand) */
		{ "\x0f\x1f\xc0", 3, 0 },             /* nop eax */
		{ "\xa1\x00\x00\x00\x00\x00\x00\x00\x00", 9, 1 }, /* mov eax, [moffs64] */
		{ "\x0f\x05", 2, 1 },                 /* syscall */
		{ "\x48\x0f\x44\xc1", 4, 0 },         /* cmovz rax, rcx */
		{ "\x48\x0f\x44\x01", 4, 1 },         /* cmovz rax, [rcx]: loads always */
		{ "\xf0\x48\x01\xd8", 4, 1 },         /* lock add rax, rbx: #UD */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = may_stop((const uint8_t *)cases[i].bytes, (size_t)cases[i].len, 0);
		if (got != cases[i].stop)
			fprintf(stderr, "case %zu: may_stop %d, expected %d\n", i, got, cases[i].stop);
		CHECK_EQ(got, cases[i].stop);
	}
	scan_file("/lib/x86_64-linux-gnu/libc.so.6", 4u << 20);
	scan_file("/lib64/ld-linux-x86-64.so.2", 1u << 20);
	scan_file(BTR_BINARY_DIR "/btr", 4u << 20);
	uint8_t *r = malloc(1u << 20);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; r && i < (1u << 20); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		r[i] = (uint8_t)x;
	}
	if (r)
		scan(r, 1u << 20, "random");
	free(r);
	CHECK(is_rep_string((const uint8_t *)"\xf3\xa4", 2));   /* rep movsb (the header's other scan) */
	printf("%lu register-only instructions by the fast path\n", fast_hits);
	CHECK(fast_hits > 100000);   /* the fast path is taken */
	CHECK_EQ(bad, 0);
	return check_done();
}
