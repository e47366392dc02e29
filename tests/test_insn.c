/* test_insn.c - branch classification of encoded x86 instructions.
 *
 * Every byte sequence below was cross-checked with GNU as / objdump or
 * llvm-mc -show-encoding.  Each row is checked for the exact length, kind,
 * flags, direct target and RET imm16; every valid row is additionally
 * decoded with one byte missing (must be TRUNCATED) and with trailing
 * garbage (must not change anything).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "btr/btr.h"
#include "check.h"
#include "image/insn_priv.h"

#define B(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})

enum { M64 = BTR_MODE_64, M32 = BTR_MODE_32, M16 = BTR_MODE_16 };
enum { D = BTR_INSN_DIRECT, C = BTR_INSN_COND, F = BTR_INSN_FAR, NT = BTR_INSN_NOTRACK,
       BND = BTR_INSN_BND, STOP = BTR_INSN_STOPS };

struct row {
	const char *name;
	const uint8_t *bytes;
	size_t n;
	int mode;
	uint64_t ip;
	int ret;          /* expected length or negative error */
	int kind;
	uint32_t flags;
	uint64_t target;
	uint16_t imm;
};

static const struct row rows[] = {
	/* ---- conditional ---- */
	{"je rel8", B(0x74, 0x10), M64, 0x401000, 2, BTR_KIND_JCC, C | D, 0x401012, 0},
	{"jne rel8 back", B(0x75, 0xfe), M64, 0x401000, 2, BTR_KIND_JCC, C | D, 0x401000, 0},
	{"jo rel8", B(0x70, 0x80), M64, 0x401000, 2, BTR_KIND_JCC, C | D, 0x400f82, 0},
	{"jg rel32", B(0x0f, 0x8f, 0x00, 0x01, 0x00, 0x00), M64, 0x401000, 6, BTR_KIND_JCC, C | D, 0x401106, 0},
	{"je rel32 neg", B(0x0f, 0x84, 0xfa, 0xff, 0xff, 0xff), M64, 0x401000, 6, BTR_KIND_JCC, C | D, 0x401000, 0},
	{"jcc rel32 below 0", B(0x0f, 0x84, 0x00, 0xff, 0xff, 0xff), M64, 0x10, 6, BTR_KIND_JCC, C | D,
	 0xffffffffffffff16ull, 0},
	{"bnd je", B(0xf2, 0x74, 0xdd), M64, 0x20, 3, BTR_KIND_JCC, C | D | BND, 0x0, 0},
	{"loop", B(0xe2, 0xfe), M64, 0x1000, 2, BTR_KIND_LOOP, C | D, 0x1000, 0},
	{"loope", B(0xe1, 0xfc), M64, 0x1002, 2, BTR_KIND_LOOP, C | D, 0x1000, 0},
	{"loopne", B(0xe0, 0xfa), M64, 0x1004, 2, BTR_KIND_LOOP, C | D, 0x1000, 0},
	{"jrcxz", B(0xe3, 0xf8), M64, 0x1006, 2, BTR_KIND_JRCXZ, C | D, 0x1000, 0},
	{"jecxz 64 (67)", B(0x67, 0xe3, 0xf5), M64, 0x1008, 3, BTR_KIND_JRCXZ, C | D, 0x1000, 0},
	{"jecxz 32", B(0xe3, 0xe3), M32, 0x3e, 2, BTR_KIND_JRCXZ, C | D, 0x23, 0},
	{"jcxz 32 (67)", B(0x67, 0xe3, 0xe5), M32, 0x3b, 3, BTR_KIND_JRCXZ, C | D, 0x23, 0},
	{"loop 32", B(0xe2, 0xe1), M32, 0x40, 2, BTR_KIND_LOOP, C | D, 0x23, 0},
	{"66 je rel8 32", B(0x66, 0x74, 0xe8), M32, 0x38, 3, BTR_KIND_JCC, C | D, 0x23, 0},
	/* 66 0F 84 rel16 in 32-bit mode: 16-bit operand size, target wraps to 16 bits */
	{"66 je rel16 32 wrap", B(0x66, 0x0f, 0x84, 0x00, 0x10), M32, 0x1234f000, 5, BTR_KIND_JCC, C | D,
	 0x0005, 0},
	{"je rel32 32 wrap", B(0x0f, 0x84, 0x20, 0x00, 0x00, 0x00), M32, 0xfffffff0, 6, BTR_KIND_JCC, C | D,
	 0x16, 0},
	{"jcc 16", B(0x74, 0x10), M16, 0xfff0, 2, BTR_KIND_JCC, C | D, 0x0002, 0},

	/* ---- calls ---- */
	{"call rel32", B(0xe8, 0x00, 0x01, 0x00, 0x00), M64, 0x401000, 5, BTR_KIND_CALL, D, 0x401105, 0},
	{"call rel32 neg", B(0xe8, 0xf0, 0xff, 0xff, 0xff), M64, 0x401000, 5, BTR_KIND_CALL, D, 0x400ff5, 0},
	{"bnd call", B(0xf2, 0xe8, 0xe5, 0xff, 0xff, 0xff), M64, 0x15, 6, BTR_KIND_CALL, D | BND, 0x0, 0},
	{"call rax", B(0xff, 0xd0), M64, 0x1000, 2, BTR_KIND_CALL_IND, 0, 0, 0},
	{"call r11", B(0x41, 0xff, 0xd3), M64, 0x1000, 3, BTR_KIND_CALL_IND, 0, 0, 0},
	{"call [rip+0x100]", B(0xff, 0x15, 0x00, 0x01, 0x00, 0x00), M64, 0x1000, 6, BTR_KIND_CALL_IND, 0, 0, 0},
	{"call [rax+rcx*8+0x10]", B(0xff, 0x54, 0xc8, 0x10), M64, 0x1000, 4, BTR_KIND_CALL_IND, 0, 0, 0},
	{"notrack call rax", B(0x3e, 0xff, 0xd0), M64, 0x1000, 3, BTR_KIND_CALL_IND, NT, 0, 0},
	{"call far m16:32", B(0xff, 0x18), M64, 0x1000, 2, BTR_KIND_FAR_CALL, F, 0, 0},
	{"call far m16:64", B(0x48, 0xff, 0x18), M64, 0x1000, 3, BTR_KIND_FAR_CALL, F, 0, 0},
	{"call far ptr16:32", B(0x9a, 0x78, 0x56, 0x34, 0x12, 0x10, 0x00), M32, 0x1000, 7, BTR_KIND_FAR_CALL, F,
	 0, 0},
	{"call far ptr 64 invalid", B(0x9a, 0x78, 0x56, 0x34, 0x12, 0x10, 0x00), M64, 0x1000, -BTR_ERR_BAD_INSN,
	 0, 0, 0, 0},
	{"call ind 32", B(0xff, 0xd0), M32, 0x1000, 2, BTR_KIND_CALL_IND, 0, 0, 0},

	/* ---- returns ---- */
	{"ret", B(0xc3), M64, 0x1000, 1, BTR_KIND_RET, 0, 0, 0},
	{"ret imm16", B(0xc2, 0x08, 0x00), M64, 0x1000, 3, BTR_KIND_RET, 0, 0, 8},
	{"ret imm16 big", B(0xc2, 0x34, 0x12), M64, 0x1000, 3, BTR_KIND_RET, 0, 0, 0x1234},
	{"bnd ret", B(0xf2, 0xc3), M64, 0x1000, 2, BTR_KIND_RET, BND, 0, 0},
	{"retf", B(0xcb), M64, 0x1000, 1, BTR_KIND_FAR_RET, F, 0, 0},
	{"retf imm16", B(0xca, 0x10, 0x00), M64, 0x1000, 3, BTR_KIND_FAR_RET, F, 0, 16},
	{"retf 32", B(0xcb), M32, 0x1000, 1, BTR_KIND_FAR_RET, F, 0, 0},

	/* ---- jumps ---- */
	{"jmp rel8", B(0xeb, 0x10), M64, 0x401000, 2, BTR_KIND_JMP, D, 0x401012, 0},
	{"jmp rel8 self", B(0xeb, 0xfe), M64, 0x401000, 2, BTR_KIND_JMP, D, 0x401000, 0},
	{"jmp rel32", B(0xe9, 0x00, 0x00, 0x00, 0x80), M64, 0x401000, 5, BTR_KIND_JMP, D,
	 0x401005ull - 0x80000000ull, 0},
	/* Intel ignores 66 on near branches in 64-bit mode: still rel32 */
	{"66 jmp rel32 64", B(0x66, 0xe9, 0x10, 0x00, 0x00, 0x00), M64, 0x1000, 6, BTR_KIND_JMP, D, 0x1016, 0},
	{"66 jmp rel8 32", B(0x66, 0xeb, 0xeb), M32, 0x35, 3, BTR_KIND_JMP, D, 0x23, 0},
	{"66 jmp rel16 32", B(0x66, 0xe9, 0x10, 0x00), M32, 0x12345, 4, BTR_KIND_JMP, D, 0x2359, 0},
	{"jmp rel32 32 wrap", B(0xe9, 0x20, 0x00, 0x00, 0x00), M32, 0xfffffff0, 5, BTR_KIND_JMP, D, 0x15, 0},
	{"jmp rel16 16 wrap", B(0xe9, 0x00, 0x01), M16, 0xfff0, 3, BTR_KIND_JMP, D, 0xf3, 0},
	{"66 jmp rel32 16", B(0x66, 0xe9, 0x00, 0x01, 0x00, 0x00), M16, 0xfff0, 6, BTR_KIND_JMP, D, 0x100f6, 0},
	{"jmp rax", B(0xff, 0xe0), M64, 0x1000, 2, BTR_KIND_JMP_IND, 0, 0, 0},
	{"jmp [rip-0x20]", B(0xff, 0x25, 0xe0, 0xff, 0xff, 0xff), M64, 0x1000, 6, BTR_KIND_JMP_IND, 0, 0, 0},
	{"jmp [rsp+8]", B(0xff, 0x64, 0x24, 0x08), M64, 0x1000, 4, BTR_KIND_JMP_IND, 0, 0, 0},
	{"notrack jmp rax", B(0x3e, 0xff, 0xe0), M64, 0x1000, 3, BTR_KIND_JMP_IND, NT, 0, 0},
	{"bnd jmp rax", B(0xf2, 0xff, 0xe0), M64, 0x1000, 3, BTR_KIND_JMP_IND, BND, 0, 0},
	{"jmp far m16:32", B(0xff, 0x28), M64, 0x1000, 2, BTR_KIND_FAR_JMP, F, 0, 0},
	{"jmp far m16:64", B(0x48, 0xff, 0x28), M64, 0x1000, 3, BTR_KIND_FAR_JMP, F, 0, 0},
	{"jmp far ptr16:32", B(0xea, 0x78, 0x56, 0x34, 0x12, 0x10, 0x00), M32, 0x1000, 7, BTR_KIND_FAR_JMP, F,
	 0, 0},
	{"jmp far ptr16:16", B(0xea, 0x00, 0x7c, 0x00, 0x00), M16, 0x1000, 5, BTR_KIND_FAR_JMP, F, 0, 0},

	/* ---- system / far ---- */
	{"syscall", B(0x0f, 0x05), M64, 0x1000, 2, BTR_KIND_SYSCALL, F, 0, 0},
	{"sysenter", B(0x0f, 0x34), M32, 0x1000, 2, BTR_KIND_SYSCALL, F, 0, 0},
	{"sysret", B(0x0f, 0x07), M64, 0x1000, 2, BTR_KIND_SYSRET, F, 0, 0},
	{"sysretq", B(0x48, 0x0f, 0x07), M64, 0x1000, 3, BTR_KIND_SYSRET, F, 0, 0},
	{"sysexit", B(0x0f, 0x35), M32, 0x1000, 2, BTR_KIND_SYSRET, F, 0, 0},
	{"int 0x80", B(0xcd, 0x80), M64, 0x1000, 2, BTR_KIND_INT, F, 0, 0},
	{"int 0x80 32", B(0xcd, 0x80), M32, 0x1000, 2, BTR_KIND_INT, F, 0, 0},
	{"into 32", B(0xce), M32, 0x1000, 1, BTR_KIND_INT, F, 0, 0},
	{"into 64 invalid", B(0xce), M64, 0x1000, -BTR_ERR_BAD_INSN, 0, 0, 0, 0},
	{"int1", B(0xf1), M64, 0x1000, 1, BTR_KIND_INT, F, 0, 0},
	{"int3", B(0xcc), M64, 0x1000, 1, BTR_KIND_INT3, F, 0, 0},
	{"iretq", B(0x48, 0xcf), M64, 0x1000, 2, BTR_KIND_IRET, F, 0, 0},
	{"iretd", B(0xcf), M64, 0x1000, 1, BTR_KIND_IRET, F, 0, 0},
	{"iretd 32", B(0xcf), M32, 0x1000, 1, BTR_KIND_IRET, F, 0, 0},
	{"iret 16 (66)", B(0x66, 0xcf), M32, 0x1000, 2, BTR_KIND_IRET, F, 0, 0},

	/* ---- special non-branches ---- */
	{"hlt", B(0xf4), M64, 0x1000, 1, BTR_KIND_NONE, STOP, 0, 0},
	{"ud2", B(0x0f, 0x0b), M64, 0x1000, 2, BTR_KIND_NONE, STOP, 0, 0},
	{"ud0", B(0x0f, 0xff, 0x00), M64, 0x1000, 3, BTR_KIND_NONE, STOP, 0, 0},
	{"ud1", B(0x0f, 0xb9, 0x00), M64, 0x1000, 3, BTR_KIND_NONE, STOP, 0, 0},
	{"ptwrite rax", B(0xf3, 0x48, 0x0f, 0xae, 0xe0), M64, 0x1000, 5, BTR_KIND_NONE, BTR_INSN_PTWRITE, 0, 0},
	{"ptwrite [rax]", B(0xf3, 0x0f, 0xae, 0x20), M64, 0x1000, 4, BTR_KIND_NONE, BTR_INSN_PTWRITE, 0, 0},
	{"vmlaunch", B(0x0f, 0x01, 0xc2), M64, 0x1000, 3, BTR_KIND_FAR_JMP, BTR_INSN_VMENTRY | F, 0, 0},
	{"vmresume", B(0x0f, 0x01, 0xc3), M64, 0x1000, 3, BTR_KIND_FAR_JMP, BTR_INSN_VMENTRY | F, 0, 0},
	{"vmcall", B(0x0f, 0x01, 0xc1), M64, 0x1000, 3, BTR_KIND_FAR_CALL, BTR_INSN_VMENTRY | F, 0, 0},
	{"vmmcall", B(0x0f, 0x01, 0xd9), M64, 0x1000, 3, BTR_KIND_FAR_CALL, BTR_INSN_VMENTRY | F, 0, 0},
	{"mov cr3, rax", B(0x0f, 0x22, 0xd8), M64, 0x1000, 3, BTR_KIND_NONE, BTR_INSN_MOV_CR3, 0, 0},
	{"mov cr0, rax", B(0x0f, 0x22, 0xc0), M64, 0x1000, 3, BTR_KIND_NONE, 0, 0, 0},
	/* FRED, UINTR, APX (newer than Zydis 4.0: lib/image/insn.c's table) */
	{"eretu", B(0xf3, 0x0f, 0x01, 0xca), M64, 0x1000, 4, BTR_KIND_IRET, F, 0, 0},
	{"erets", B(0xf2, 0x0f, 0x01, 0xca), M64, 0x1000, 4, BTR_KIND_IRET, F, 0, 0},
	{"uiret", B(0xf3, 0x0f, 0x01, 0xec), M64, 0x1000, 4, BTR_KIND_IRET, F, 0, 0},
	{"jmpabs", B(0xd5, 0x00, 0xa1, 0x0d, 0x10, 0, 0, 0, 0, 0, 0), M64, 0x1000, 11, BTR_KIND_JMP_IND, 0, 0, 0},
	{"xbegin", B(0xc7, 0xf8, 0xeb, 0xff, 0xff, 0xff), M64, 0x1000, 6, BTR_KIND_NONE, BTR_INSN_TSX, 0, 0},
	{"xend", B(0x0f, 0x01, 0xd5), M64, 0x1000, 3, BTR_KIND_NONE, BTR_INSN_TSX, 0, 0},
	{"xabort", B(0xc6, 0xf8, 0x03), M64, 0x1000, 3, BTR_KIND_NONE, BTR_INSN_TSX, 0, 0},

	/* ---- plain instructions ---- */
	{"nop", B(0x90), M64, 0x1000, 1, BTR_KIND_NONE, 0, 0, 0},
	{"nop long", B(0x0f, 0x1f, 0x44, 0x00, 0x00), M64, 0x1000, 5, BTR_KIND_NONE, 0, 0, 0},
	{"endbr64", B(0xf3, 0x0f, 0x1e, 0xfa), M64, 0x1000, 4, BTR_KIND_NONE, 0, 0, 0},
	{"mov rax, imm64", B(0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8), M64, 0x1000, 10, BTR_KIND_NONE, 0, 0, 0},
	{"mov [rip+x], eax", B(0x89, 0x05, 0x10, 0x00, 0x00, 0x00), M64, 0x1000, 6, BTR_KIND_NONE, 0, 0, 0},
	{"lea rax,[rip+x]", B(0x48, 0x8d, 0x05, 1, 2, 3, 4), M64, 0x1000, 7, BTR_KIND_NONE, 0, 0, 0},
	{"push rbp", B(0x55), M64, 0x1000, 1, BTR_KIND_NONE, 0, 0, 0},
	{"push imm32", B(0x68, 1, 2, 3, 4), M64, 0x1000, 5, BTR_KIND_NONE, 0, 0, 0},
	{"3e on non-branch", B(0x3e, 0x90), M64, 0x1000, 2, BTR_KIND_NONE, 0, 0, 0},
	{"f2 on mov", B(0xf2, 0x89, 0xc0), M64, 0x1000, 3, BTR_KIND_NONE, 0, 0, 0},
	{"vaddps ymm (VEX)", B(0xc5, 0xfc, 0x58, 0xc1), M64, 0x1000, 4, BTR_KIND_NONE, 0, 0, 0},
	{"inc eax 32 (1 byte)", B(0x40), M32, 0x1000, 1, BTR_KIND_NONE, 0, 0, 0},

	/* ---- errors ---- */
	{"push es 64 invalid", B(0x06), M64, 0x1000, -BTR_ERR_BAD_INSN, 0, 0, 0, 0},
	{"ff /7 invalid", B(0xff, 0xff), M64, 0x1000, -BTR_ERR_BAD_INSN, 0, 0, 0, 0},
	{"16 prefixes too long", B(0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
				   0x66, 0x66, 0x90), M64, 0x1000, -BTR_ERR_BAD_INSN, 0, 0, 0, 0},
	{"call rel32 cut", B(0xe8, 0x01), M64, 0x1000, -BTR_ERR_TRUNCATED, 0, 0, 0, 0},
	{"0f alone", B(0x0f), M64, 0x1000, -BTR_ERR_TRUNCATED, 0, 0, 0, 0},
	{"prefix alone", B(0x66), M64, 0x1000, -BTR_ERR_TRUNCATED, 0, 0, 0, 0},
	{"modrm missing", B(0xff), M64, 0x1000, -BTR_ERR_TRUNCATED, 0, 0, 0, 0},
	{"sib disp cut", B(0xff, 0x54, 0xc8), M64, 0x1000, -BTR_ERR_TRUNCATED, 0, 0, 0, 0},
};

static void check_row(const struct row *r)
{
	struct btr_insn in;
	uint8_t buf[32];
	int ret;

	memset(&in, 0xa5, sizeof(in));
	ret = btr_insn_decode(r->bytes, r->n, r->ip, (enum btr_exec_mode)r->mode, &in);
	if (ret != r->ret)
		fprintf(stderr, "row '%s': ret %d, expected %d\n", r->name, ret, r->ret);
	CHECK_EQ(ret, r->ret);
	if (r->ret < 0)
		return;
	if (in.kind != r->kind || in.flags != r->flags || in.target != r->target || in.imm != r->imm)
		fprintf(stderr, "row '%s': kind %s flags %#x target %#" PRIx64 " imm %u\n", r->name,
			btr_branch_kind_name((enum btr_branch_kind)in.kind), in.flags, in.target, in.imm);
	CHECK_EQ(in.len, r->ret);
	CHECK_EQ(in.ip, r->ip);
	CHECK_EQ(in.kind, r->kind);
	CHECK_EQ(in.flags, r->flags);
	CHECK_EQ(in.target, r->target);
	CHECK_EQ(in.imm, r->imm);

	/* One byte short: the instruction cannot be complete. */
	ret = btr_insn_decode(r->bytes, r->n - 1, r->ip, (enum btr_exec_mode)r->mode, &in);
	if (ret != -BTR_ERR_TRUNCATED)
		fprintf(stderr, "row '%s' cut: ret %d\n", r->name, ret);
	CHECK_EQ(ret, -BTR_ERR_TRUNCATED);

	/* Trailing bytes must not change the result. */
	memset(buf, 0xcc, sizeof(buf));
	memcpy(buf, r->bytes, r->n);
	ret = btr_insn_decode(buf, sizeof(buf), r->ip, (enum btr_exec_mode)r->mode, &in);
	CHECK_EQ(ret, r->ret);
	CHECK_EQ(in.kind, r->kind);
	CHECK_EQ(in.target, r->target);
}

static void test_table(void)
{
	int seen[BTR_KIND__COUNT] = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		check_row(&rows[i]);
		if (rows[i].ret > 0)
			seen[rows[i].kind]++;
	}
	/* Every instruction kind is covered (ASYNC has no instruction). */
	for (int k = 0; k < BTR_KIND__COUNT; k++)
		if (k != BTR_KIND_ASYNC) {
			if (!seen[k])
				fprintf(stderr, "kind %s not covered\n", btr_branch_kind_name((enum btr_branch_kind)k));
			CHECK(seen[k] > 0);
		}
}

static void test_args(void)
{
	struct btr_insn in;
	const uint8_t ret[] = {0xc3};
	char buf[8];

	CHECK_EQ(btr_insn_decode(NULL, 1, 0, BTR_MODE_64, &in), -BTR_ERR_INVAL);
	CHECK_EQ(btr_insn_decode(ret, 1, 0, BTR_MODE_64, NULL), -BTR_ERR_INVAL);
	CHECK_EQ(btr_insn_decode(ret, 1, 0, (enum btr_exec_mode)7, &in), -BTR_ERR_INVAL);
	CHECK_EQ(btr_insn_decode(ret, 0, 0, BTR_MODE_64, &in), -BTR_ERR_TRUNCATED);
	CHECK_EQ(btr_insn_format(NULL, 1, 0, BTR_MODE_64, buf, sizeof(buf)), -BTR_ERR_INVAL);
	CHECK_EQ(btr_insn_format(ret, 1, 0, BTR_MODE_64, buf, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_insn_decode_image(NULL, 0, BTR_MODE_64, &in), -BTR_ERR_INVAL);
}

static void test_format(void)
{
	char buf[64];
	int n;

	n = btr_insn_format(B(0xc2, 0x08, 0x00), 0x1000, BTR_MODE_64, buf, sizeof(buf));
	CHECK_STR(buf, "ret 0x8");
	CHECK_EQ(n, 7);
	btr_insn_format(B(0x3e, 0xff, 0xd0), 0x1000, BTR_MODE_64, buf, sizeof(buf));
	CHECK_STR(buf, "notrack call rax");
	/* relative targets are absolute, computed from ip */
	btr_insn_format(B(0xe8, 0x00, 0x01, 0x00, 0x00), 0x401000, BTR_MODE_64, buf, sizeof(buf));
	CHECK_STR(buf, "call 0x401105");
	btr_insn_format(B(0xff, 0x15, 0x00, 0x01, 0x00, 0x00), 0x1000, BTR_MODE_64, buf, sizeof(buf));
	CHECK_STR(buf, "call [0x1106]");
	btr_insn_format(B(0x48, 0x8b, 0x44, 0x24, 0x08), 0, BTR_MODE_64, buf, sizeof(buf));
	CHECK_STR(buf, "mov rax, [rsp+0x8]");
	btr_insn_format(B(0xe9, 0x00, 0x01), 0xfff0, BTR_MODE_16, buf, sizeof(buf));
	CHECK_STR(buf, "jmp 0xf3");

	/* truncation: like snprintf, the full length is returned */
	n = btr_insn_format(B(0x3e, 0xff, 0xd0), 0, BTR_MODE_64, buf, 8);
	CHECK_EQ(n, 16);
	CHECK_STR(buf, "notrack");
	CHECK_EQ(btr_insn_format(B(0x06), 0, BTR_MODE_64, buf, sizeof(buf)), -BTR_ERR_BAD_INSN);
	CHECK_STR(buf, "");
	CHECK_EQ(btr_insn_format(B(0xe8, 0x00), 0, BTR_MODE_64, buf, sizeof(buf)), -BTR_ERR_TRUNCATED);
}

/* Sequential decoding of a small function body: lengths chain exactly. */
static void test_sequence(void)
{
	/* push rbp; mov rbp,rsp; cmp edi,1; jle +7; lea eax,[rdi-1]; call -0x20; pop rbp; ret */
	static const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0x83, 0xff, 0x01, 0x7e, 0x08, 0x8d,
				       0x47, 0xff, 0xe8, 0xe0, 0xff, 0xff, 0xff, 0x5d, 0xc3};
	static const int lens[] = {1, 3, 3, 2, 3, 5, 1, 1};
	static const int kinds[] = {0, 0, 0, BTR_KIND_JCC, 0, BTR_KIND_CALL, 0, BTR_KIND_RET};
	size_t off = 0;
	int i = 0;

	while (off < sizeof(code)) {
		struct btr_insn in;
		int ret = btr_insn_decode(code + off, sizeof(code) - off, 0x1000 + off, BTR_MODE_64, &in);

		CHECK_EQ(ret, lens[i]);
		CHECK_EQ(in.kind, kinds[i]);
		if (ret <= 0)
			return;
		if (in.kind == BTR_KIND_JCC)
			CHECK_EQ(in.target, 0x1000 + 7 + 2 + 8);
		if (in.kind == BTR_KIND_CALL)
			CHECK_EQ(in.target, 0x1000 + 12 + 5 - 0x20);
		off += (size_t)ret;
		i++;
	}
	CHECK_EQ(i, 8);
}

static void *thread_decode(void *arg)
{
	long bad = 0;

	(void)arg;
	for (int i = 0; i < 20000; i++) {
		struct btr_insn in;
		int ret = btr_insn_decode(B(0x0f, 0x84, 0xfa, 0xff, 0xff, 0xff), 0x401000, BTR_MODE_64, &in);

		if (ret != 6 || in.kind != BTR_KIND_JCC || in.target != 0x401000)
			bad++;
		ret = btr_insn_decode(B(0xe2, 0xe1), 0x40, BTR_MODE_32, &in);
		if (ret != 2 || in.kind != BTR_KIND_LOOP || in.target != 0x23)
			bad++;
	}
	return (void *)bad;
}

/* Must run first: several threads race into the one-time initialization. */
static void test_threads(void)
{
	pthread_t t[4];
	void *res;

	for (int i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, thread_decode, NULL), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &res);
		CHECK_EQ((long)res, 0);
	}
}

static int add_bytes(struct btr_image *img, uint64_t addr, const uint8_t *b, size_t n)
{
	return btr_image_add_bytes(img, b, n, addr);
}

/* btr_insn_decode_image: plain, NOMAP, and an instruction that straddles
 * two adjacent sections. */
static void test_image(void)
{
	struct btr_image *img = NULL;
	struct btr_insn in;

	if (btr_image_new(&img) < 0 || !img) {
		CHECK(0);
		return;
	}
	CHECK_EQ(add_bytes(img, 0x1000, B(0x90, 0xe8, 0x00, 0x01)), 0);
	CHECK_EQ(add_bytes(img, 0x1004, B(0x00, 0x00, 0xc3)), 0);
	CHECK_EQ(btr_insn_decode_image(img, 0x1000, BTR_MODE_64, &in), 1);
	CHECK_EQ(btr_insn_decode_image(img, 0x1001, BTR_MODE_64, &in), 5);
	CHECK_EQ(in.kind, BTR_KIND_CALL);
	CHECK_EQ(in.target, 0x1106);
	CHECK_EQ(btr_insn_decode_image(img, 0x1006, BTR_MODE_64, &in), 1);
	CHECK_EQ(in.kind, BTR_KIND_RET);
	CHECK_EQ(btr_insn_decode_image(img, 0x2000, BTR_MODE_64, &in), -BTR_ERR_NOMAP);
	/* code ends inside an instruction */
	CHECK_EQ(add_bytes(img, 0x3000, B(0xe8, 0x00)), 0);
	CHECK_EQ(btr_insn_decode_image(img, 0x3000, BTR_MODE_64, &in), -BTR_ERR_TRUNCATED);
	btr_image_free(img);
}

/* ---- fast path vs Zydis ---- */

static int same(const uint8_t *b, size_t n, uint64_t ip, long *fast_hits)
{
	struct btr_insn a, z;
	int ra, rz;

	memset(&a, 0x5a, sizeof(a));
	memset(&z, 0x5a, sizeof(z));
	ra = btr_insn_decode(b, n, ip, BTR_MODE_64, &a);
	rz = btr__insn_decode_zydis(b, n, ip, BTR_MODE_64, &z);
	if (ra != rz)
		goto diff;
	if (ra < 0)
		return 1;
	if (a.ip != z.ip || a.target != z.target || a.flags != z.flags || a.len != z.len ||
	    a.kind != z.kind || a.imm != z.imm)
		goto diff;
	if (fast_hits)
		(*fast_hits)++;
	return 1;
diff:
	fprintf(stderr, "fast/zydis differ (ret %d/%d kind %u/%u flags %#x/%#x len %u/%u target %#" PRIx64
		"/%#" PRIx64 ") on:", ra, rz, a.kind, z.kind, a.flags, z.flags, a.len, z.len, a.target, z.target);
	for (size_t i = 0; i < n && i < 16; i++)
		fprintf(stderr, " %02x", b[i]);
	fprintf(stderr, "\n");
	return 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic, so a failure reproduces */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Random encodings shaped like the fast path's input: optional 66,
 * optional REX, one- or two-byte opcode, random rest, random size. */
static void test_fast_random(void)
{
	long bad = 0, valid = 0;

	for (int it = 0; it < 1000000 && bad < 10; it++) {
		uint8_t b[16];
		size_t n = 0;
		uint64_t r = rnd();

		if ((r & 0xc0) == 0xc0)
			b[n++] = (r & 0x100) ? 0x64 : 0x65;
		if (r & 1)
			b[n++] = 0x66;
		if ((r & 0xc0) == 0x80)
			b[n++] = (r & 0x100) ? 0x64 : 0x65;
		if (r & 2)
			b[n++] = (uint8_t)(0x40 | ((r >> 8) & 15));
		if ((r & 0x1c) == 0)
			b[n++] = (uint8_t)(r >> 16);           /* any prefix-ish byte */
		if (r & 0x20)
			b[n++] = 0x0f;
		while (n < 16) {
			uint64_t x = rnd();
			for (int k = 0; k < 8 && n < 16; k++, x >>= 8)
				b[n++] = (uint8_t)x;
		}
		n = (size_t)((r >> 32) % 17);
		if (!same(b, n, (r >> 40) << 4, &valid))
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK(valid > 100000);
}

/* Every start offset of real files: compiled code at every alignment,
 * plus data that is not code at all. */
static void test_fast_files(void)
{
	static const char *const files[] = {
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
		BTR_SHARED_DIR "/traces/autofdo/test.binary",
		"/proc/self/exe",
	};
	long bad = 0, valid = 0;

	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		FILE *fp = fopen(files[f], "rb");
		static uint8_t buf[1 << 21];
		size_t n;

		if (!fp)
			continue;
		n = fread(buf, 1, sizeof(buf), fp);
		fclose(fp);
		for (size_t off = 0; off < n && bad < 10; off++)
			if (!same(buf + off, n - off, 0x400000 + off, &valid))
				bad++;
	}
	printf("fast path differential: %ld valid decodes compared\n", valid);
	CHECK_EQ(bad, 0);
	CHECK(valid > 100000);
}

/* Exhaustive over opcode and ModRM (map 0 and 0F), with and without 66
 * and REX.W, every size: the classes of encodings the tables decide. */
static void test_fast_exhaustive(void)
{
	long bad = 0;

	for (unsigned pre = 0; pre < 8; pre++)
		for (unsigned map = 0; map < 2; map++)
			for (unsigned op = 0; op < 256 && bad < 10; op++)
				for (unsigned m = 0; m < 256; m++) {
					uint8_t b[16];
					size_t n = 0;

					if (pre & 4)
						b[n++] = 0x64;
					if (pre & 1)
						b[n++] = 0x66;
					if (pre & 2)
						b[n++] = 0x48;
					if (map)
						b[n++] = 0x0f;
					b[n++] = (uint8_t)op;
					b[n++] = (uint8_t)m;
					for (size_t k = n; k < 16; k++)
						b[k] = (uint8_t)(0x11 * k + m);
					for (size_t sz = n - 1; sz <= 15; sz += (sz < n + 6 ? 1 : 4))
						if (!same(b, sz, 0x7ffff000, NULL))
							bad++;
				}
	CHECK_EQ(bad, 0);
}

int main(void)
{
	test_threads();
	test_table();
	test_args();
	test_format();
	test_sequence();
	test_image();
	test_fast_exhaustive();
	test_fast_random();
	test_fast_files();
	return check_done();
}
