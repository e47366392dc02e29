/* qemu_insn_scan.c - the plugin's scans of translated instruction bytes (REP
 * string instructions, instructions that may stop a block early).
 * Part of the QEMU plugin (declared in qemu_insn_scan.h, which
 * tests/test_qemu_insn_scan.c also uses); private to agents/qemu/. */
#include "qemu_insn_scan.h"

int is_rep_string(const uint8_t *b, size_t len)
{
	int rep = 0;
	size_t i = 0;
	for (; i < len; i++) {
		if (b[i] == 0xf3 || b[i] == 0xf2)
			rep = 1;
		else if (b[i] == 0x66 || b[i] == 0x67 || b[i] == 0x2e || b[i] == 0x3e ||
			 b[i] == 0x26 || b[i] == 0x36 || b[i] == 0x64 || b[i] == 0x65 ||
			 (b[i] >= 0x40 && b[i] <= 0x4f))
			continue;
		else
			break;
	}
	if (!rep || i >= len)
		return 0;
	uint8_t op = b[i];
	return (op >= 0xa4 && op <= 0xa7) || (op >= 0xaa && op <= 0xaf) || (op >= 0x6c && op <= 0x6f);
}

ZydisDecoder zdec;

/* The register forms (ModRM.mod 3) of common integer instructions, and
 * LEA (address generation only): no memory operand, explicit or implicit,
 * and nothing that can fault, so may_stop's answer is 0 without decoding
 * the operands, which costs as much as the instruction again (about 1 ms
 * of CPU per traced process, most of them run ld.so and libc's start).
 * MOV to a segment register (8E) is not one: a bad selector faults. */
int reg_only(const ZydisDecodedInstruction *in)
{
	if (in->mnemonic == ZYDIS_MNEMONIC_LEA)
		return 1;
	if (!(in->attributes & ZYDIS_ATTRIB_HAS_MODRM) || in->raw.modrm.mod != 3)
		return 0;
	if (in->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && in->opcode == 0x8e)
		return 0;
	switch (in->mnemonic) {
	case ZYDIS_MNEMONIC_MOV: case ZYDIS_MNEMONIC_MOVZX: case ZYDIS_MNEMONIC_MOVSX:
	case ZYDIS_MNEMONIC_MOVSXD: case ZYDIS_MNEMONIC_ADD: case ZYDIS_MNEMONIC_ADC:
	case ZYDIS_MNEMONIC_SUB: case ZYDIS_MNEMONIC_SBB: case ZYDIS_MNEMONIC_AND:
	case ZYDIS_MNEMONIC_OR: case ZYDIS_MNEMONIC_XOR: case ZYDIS_MNEMONIC_CMP:
	case ZYDIS_MNEMONIC_TEST: case ZYDIS_MNEMONIC_INC: case ZYDIS_MNEMONIC_DEC:
	case ZYDIS_MNEMONIC_NEG: case ZYDIS_MNEMONIC_NOT: case ZYDIS_MNEMONIC_SHL:
	case ZYDIS_MNEMONIC_SHR: case ZYDIS_MNEMONIC_SAR: case ZYDIS_MNEMONIC_ROL:
	case ZYDIS_MNEMONIC_ROR: case ZYDIS_MNEMONIC_SHLD: case ZYDIS_MNEMONIC_SHRD:
	case ZYDIS_MNEMONIC_IMUL: case ZYDIS_MNEMONIC_XCHG: case ZYDIS_MNEMONIC_BT:
	case ZYDIS_MNEMONIC_BSF: case ZYDIS_MNEMONIC_BSR: case ZYDIS_MNEMONIC_TZCNT:
	case ZYDIS_MNEMONIC_LZCNT: case ZYDIS_MNEMONIC_POPCNT: case ZYDIS_MNEMONIC_NOP:
	case ZYDIS_MNEMONIC_CMOVB: case ZYDIS_MNEMONIC_CMOVBE: case ZYDIS_MNEMONIC_CMOVL:
	case ZYDIS_MNEMONIC_CMOVLE: case ZYDIS_MNEMONIC_CMOVNB: case ZYDIS_MNEMONIC_CMOVNBE:
	case ZYDIS_MNEMONIC_CMOVNL: case ZYDIS_MNEMONIC_CMOVNLE: case ZYDIS_MNEMONIC_CMOVNO:
	case ZYDIS_MNEMONIC_CMOVNP: case ZYDIS_MNEMONIC_CMOVNS: case ZYDIS_MNEMONIC_CMOVNZ:
	case ZYDIS_MNEMONIC_CMOVO: case ZYDIS_MNEMONIC_CMOVP: case ZYDIS_MNEMONIC_CMOVS:
	case ZYDIS_MNEMONIC_CMOVZ: case ZYDIS_MNEMONIC_SETB: case ZYDIS_MNEMONIC_SETBE:
	case ZYDIS_MNEMONIC_SETL: case ZYDIS_MNEMONIC_SETLE: case ZYDIS_MNEMONIC_SETNB:
	case ZYDIS_MNEMONIC_SETNBE: case ZYDIS_MNEMONIC_SETNL: case ZYDIS_MNEMONIC_SETNLE:
	case ZYDIS_MNEMONIC_SETNO: case ZYDIS_MNEMONIC_SETNP: case ZYDIS_MNEMONIC_SETNS:
	case ZYDIS_MNEMONIC_SETNZ: case ZYDIS_MNEMONIC_SETO: case ZYDIS_MNEMONIC_SETP:
	case ZYDIS_MNEMONIC_SETS: case ZYDIS_MNEMONIC_SETZ:
		return 1;
	default:
		return 0;
	}
}

/* Can the instruction end its TB early: fault (memory access, division,
 * privileged or trapping instruction), or make QEMU stop after it
 * (self-modifying code is written by a store; atomics may be restarted)?
 * Only these instructions, and the last one of each TB, bump the TB's
 * counter: an instruction that cannot stop the TB need not be counted,
 * which saves an inline add on most register-only instructions. */
int may_stop(const uint8_t *bytes, size_t len, uint64_t va)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zdec, &ctx, bytes, len, &in)))
		return 1;
	if (in.attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
		return 1;
	/* MOV Sreg, r/m: loading a segment register faults on a bad selector */
	if (in.opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && in.opcode == 0x8e)
		return 1;
	if (reg_only(&in))
		return 0;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&zdec, &ctx, &in, ops, in.operand_count)))
		return 1;
	switch (in.mnemonic) {
	case ZYDIS_MNEMONIC_DIV: case ZYDIS_MNEMONIC_IDIV:
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_BOUND:
	case ZYDIS_MNEMONIC_IN: case ZYDIS_MNEMONIC_OUT: case ZYDIS_MNEMONIC_INSB:
	case ZYDIS_MNEMONIC_INSW: case ZYDIS_MNEMONIC_INSD: case ZYDIS_MNEMONIC_OUTSB:
	case ZYDIS_MNEMONIC_OUTSW: case ZYDIS_MNEMONIC_OUTSD: case ZYDIS_MNEMONIC_CLI:
	case ZYDIS_MNEMONIC_STI: case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER:
	case ZYDIS_MNEMONIC_CPUID: case ZYDIS_MNEMONIC_RDTSC: case ZYDIS_MNEMONIC_RDTSCP:
	case ZYDIS_MNEMONIC_RDPMC: case ZYDIS_MNEMONIC_PAUSE: case ZYDIS_MNEMONIC_XABORT:
	case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XEND:
		return 1;
	default:
		break;
	}
	for (unsigned i = 0; i < in.operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY && ops[i].mem.type != ZYDIS_MEMOP_TYPE_AGEN)
			return 1;
	(void)va;
	return 0;
}
