/* qemu_insn_scan.h - the plugin's scans of translated instruction bytes (REP
 * string instructions, instructions that may stop a block early).
 * Split from qemu_plugin.c (included inside its BTR_QEMU_PLUGIN_BUILD
 * part only, once); private to lib/capture/. */
static int is_rep_string(const uint8_t *b, size_t len)
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

static ZydisDecoder zdec;

/* Can the instruction end its TB early: fault (memory access, division,
 * privileged or trapping instruction), or make QEMU stop after it
 * (self-modifying code is written by a store; atomics may be restarted)?
 * Only these instructions, and the last one of each TB, bump the TB's
 * counter: an instruction that cannot stop the TB need not be counted,
 * which saves an inline add on most register-only instructions. */
static int may_stop(const uint8_t *bytes, size_t len, uint64_t va)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zdec, bytes, len, &in, ops)))
		return 1;
	if (in.attributes & ZYDIS_ATTRIB_IS_PRIVILEGED)
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
