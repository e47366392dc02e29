/* insn.c - x86 instruction length decoding and branch classification.
 *
 * Built on Zydis 4.0.  The PT flow decoder calls btr_insn_decode() once
 * per executed instruction it walks over, so the hot path uses a decoder
 * in ZYDIS_DECODER_MODE_MINIMAL: that mode still gives the mnemonic, the
 * length, the effective operand width and every field of `raw` (prefixes,
 * ModRM, immediates), which is all classification needs.  Operands are
 * never decoded here; direct targets come from the relative immediate.
 *
 * Formatting (btr_insn_format) is not hot and uses a full decoder with
 * operands plus the Intel-syntax formatter.
 *
 * All decoders and the formatter are initialized exactly once, under
 * pthread_once, and are only read afterwards, so every function here is
 * thread-safe.
 */
#include "btr/insn.h"
#include "internal.h"
#include "insn_priv.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <Zydis/Zydis.h>

#define NMODES 3

static ZydisDecoder dec_min[NMODES];   /* minimal mode: classification */
static ZydisDecoder dec_full[NMODES];  /* full mode: formatting */
static ZydisFormatter formatter;
static int init_ok;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_decoders(void)
{
	static const ZydisMachineMode mm[NMODES] = {
		[BTR_MODE_64] = ZYDIS_MACHINE_MODE_LONG_64,
		[BTR_MODE_32] = ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
		[BTR_MODE_16] = ZYDIS_MACHINE_MODE_LONG_COMPAT_16,
	};
	static const ZydisStackWidth sw[NMODES] = {
		[BTR_MODE_64] = ZYDIS_STACK_WIDTH_64,
		[BTR_MODE_32] = ZYDIS_STACK_WIDTH_32,
		[BTR_MODE_16] = ZYDIS_STACK_WIDTH_16,
	};
	int ok = 1;

	for (int i = 0; i < NMODES; i++) {
		ok &= ZYAN_SUCCESS(ZydisDecoderInit(&dec_min[i], mm[i], sw[i]));
		ok &= ZYAN_SUCCESS(ZydisDecoderEnableMode(&dec_min[i], ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE));
		ok &= ZYAN_SUCCESS(ZydisDecoderInit(&dec_full[i], mm[i], sw[i]));
	}
	ok &= ZYAN_SUCCESS(ZydisFormatterInit(&formatter, ZYDIS_FORMATTER_STYLE_INTEL));
	/* objdump-like text: lower-case hex, no zero padding ("call 0x401105",
	 * "mov rax, [rsp+0x8]") so that addresses read like everywhere else
	 * in btr's output. */
	ok &= ZYAN_SUCCESS(ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE));
	ok &= ZYAN_SUCCESS(ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_ADDR_PADDING_ABSOLUTE,
						     ZYDIS_PADDING_DISABLED));
	ok &= ZYAN_SUCCESS(ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_ADDR_PADDING_RELATIVE,
						     ZYDIS_PADDING_DISABLED));
	ok &= ZYAN_SUCCESS(ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_DISP_PADDING,
						     ZYDIS_PADDING_DISABLED));
	ok &= ZYAN_SUCCESS(ZydisFormatterSetProperty(&formatter, ZYDIS_FORMATTER_PROP_IMM_PADDING,
						     ZYDIS_PADDING_DISABLED));
	init_ok = ok;
}

static inline int ensure_init(void)
{
	pthread_once(&init_once, init_decoders);
	return init_ok;
}

static int map_status(ZyanStatus st)
{
	/* NO_MORE_DATA: the buffer ended inside an instruction that would
	 * otherwise be valid; every other failure means the bytes are not an
	 * instruction (including INSTRUCTION_TOO_LONG: > 15 bytes). */
	if (st == ZYDIS_STATUS_NO_MORE_DATA)
		return -BTR_ERR_TRUNCATED;
	return -BTR_ERR_BAD_INSN;
}

/* Does a legacy prefix byte @val appear among the instruction's prefixes?
 * Zydis lists every prefix byte in raw.prefixes, including ignored ones
 * and the REX byte (0x40..0x4f, so no confusion with legacy values). */
static inline int has_prefix(const ZydisDecodedInstruction *zi, uint8_t val)
{
	for (unsigned i = 0; i < zi->raw.prefix_count; i++)
		if (zi->raw.prefixes[i].value == val)
			return 1;
	return 0;
}

/* Target of a relative branch: next IP plus the sign-extended immediate,
 * wrapped to the operand size (the SDM's "EIP <- tempEIP AND 0000FFFFH"
 * for a 16-bit operand size, and 32-bit wrap outside 64-bit mode). */
static inline uint64_t rel_target(const ZydisDecodedInstruction *zi, uint64_t ip)
{
	uint64_t t = ip + zi->length + (uint64_t)zi->raw.imm[0].value.s;

	switch (zi->operand_width) {
	case 16: return t & 0xffffu;
	case 32: return t & 0xffffffffu;
	default: return t;
	}
}

static void classify(const ZydisDecodedInstruction *zi, uint64_t ip, struct btr_insn *out)
{
	uint8_t kind = BTR_KIND_NONE;
	uint32_t flags = 0;

	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_JB: case ZYDIS_MNEMONIC_JBE: case ZYDIS_MNEMONIC_JL:
	case ZYDIS_MNEMONIC_JLE: case ZYDIS_MNEMONIC_JNB: case ZYDIS_MNEMONIC_JNBE:
	case ZYDIS_MNEMONIC_JNL: case ZYDIS_MNEMONIC_JNLE: case ZYDIS_MNEMONIC_JNO:
	case ZYDIS_MNEMONIC_JNP: case ZYDIS_MNEMONIC_JNS: case ZYDIS_MNEMONIC_JNZ:
	case ZYDIS_MNEMONIC_JO: case ZYDIS_MNEMONIC_JP: case ZYDIS_MNEMONIC_JS:
	case ZYDIS_MNEMONIC_JZ:
		kind = BTR_KIND_JCC;
		flags = BTR_INSN_COND | BTR_INSN_DIRECT;
		out->target = rel_target(zi, ip);
		break;
	case ZYDIS_MNEMONIC_LOOP: case ZYDIS_MNEMONIC_LOOPE: case ZYDIS_MNEMONIC_LOOPNE:
		kind = BTR_KIND_LOOP;
		flags = BTR_INSN_COND | BTR_INSN_DIRECT;
		out->target = rel_target(zi, ip);
		break;
	case ZYDIS_MNEMONIC_JCXZ: case ZYDIS_MNEMONIC_JECXZ: case ZYDIS_MNEMONIC_JRCXZ:
		kind = BTR_KIND_JRCXZ;
		flags = BTR_INSN_COND | BTR_INSN_DIRECT;
		out->target = rel_target(zi, ip);
		break;
	case ZYDIS_MNEMONIC_CALL:
		/* E8 rel; FF /2 near r/m; FF /3 far m16:xx; 9A far ptr16:xx. */
		if (zi->opcode == 0xe8) {
			kind = BTR_KIND_CALL;
			flags = BTR_INSN_DIRECT;
			out->target = rel_target(zi, ip);
		} else if (zi->opcode == 0xff && zi->raw.modrm.reg == 2) {
			kind = BTR_KIND_CALL_IND;
		} else {
			/* The far pointer names a segment selector; the linear
			 * target depends on that segment's base, so no DIRECT. */
			kind = BTR_KIND_FAR_CALL;
			flags = BTR_INSN_FAR;
		}
		break;
	case ZYDIS_MNEMONIC_JMP:
		/* EB rel8, E9 rel16/32; FF /4 near r/m; FF /5 far m16:xx; EA far ptr. */
		if (zi->opcode == 0xe9 || zi->opcode == 0xeb) {
			kind = BTR_KIND_JMP;
			flags = BTR_INSN_DIRECT;
			out->target = rel_target(zi, ip);
		} else if (zi->opcode == 0xff && zi->raw.modrm.reg == 4) {
			kind = BTR_KIND_JMP_IND;
		} else {
			kind = BTR_KIND_FAR_JMP;
			flags = BTR_INSN_FAR;
		}
		break;
	case ZYDIS_MNEMONIC_RET:
		/* C3, C2 iw: near; CB, CA iw: far (Zydis names both RET). */
		if (zi->opcode == 0xc3 || zi->opcode == 0xc2) {
			kind = BTR_KIND_RET;
		} else {
			kind = BTR_KIND_FAR_RET;
			flags = BTR_INSN_FAR;
		}
		if (zi->opcode == 0xc2 || zi->opcode == 0xca)
			out->imm = (uint16_t)zi->raw.imm[0].value.u;
		break;
	case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER:
		kind = BTR_KIND_SYSCALL;
		flags = BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_SYSRET: case ZYDIS_MNEMONIC_SYSEXIT:
		kind = BTR_KIND_SYSRET;
		flags = BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_INT1:
		kind = BTR_KIND_INT;
		flags = BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_INT3:
		kind = BTR_KIND_INT3;
		flags = BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_IRET: case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ:
	case ZYDIS_MNEMONIC_UIRET:
		kind = BTR_KIND_IRET;
		flags = BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
		flags = BTR_INSN_STOPS;
		break;
	case ZYDIS_MNEMONIC_PTWRITE:
		flags = BTR_INSN_PTWRITE;
		break;
	/* VM entries and hypercalls change context like far transfers: in
	 * PT they take a TIP (or TIP.PGD), as libipt classifies them. */
	case ZYDIS_MNEMONIC_VMLAUNCH: case ZYDIS_MNEMONIC_VMRESUME:
		kind = BTR_KIND_FAR_JMP;
		flags = BTR_INSN_VMENTRY | BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_VMCALL: case ZYDIS_MNEMONIC_VMMCALL:
		kind = BTR_KIND_FAR_CALL;
		flags = BTR_INSN_VMENTRY | BTR_INSN_FAR;
		break;
	case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XEND: case ZYDIS_MNEMONIC_XABORT:
		flags = BTR_INSN_TSX;
		break;
	default:
		break;
	}

	/* MOV to CR3: 0F 22 /3 (the register form is the only form). */
	if (zi->opcode_map == ZYDIS_OPCODE_MAP_0F && zi->opcode == 0x22 && zi->raw.modrm.reg == 3)
		flags |= BTR_INSN_MOV_CR3;

	/* CET: 3E on an indirect near CALL/JMP is NOTRACK (in 32-bit mode it
	 * doubles as a DS override, which is harmless for the branch). */
	if ((kind == BTR_KIND_CALL_IND || kind == BTR_KIND_JMP_IND) && has_prefix(zi, 0x3e))
		flags |= BTR_INSN_NOTRACK;
	/* MPX: F2 on near CALL/RET/JMP/Jcc is the BND prefix. */
	if ((kind == BTR_KIND_JCC || kind == BTR_KIND_CALL || kind == BTR_KIND_CALL_IND ||
	     kind == BTR_KIND_RET || kind == BTR_KIND_JMP || kind == BTR_KIND_JMP_IND) &&
	    has_prefix(zi, 0xf2))
		flags |= BTR_INSN_BND;

	out->kind = kind;
	out->flags = flags;
}

/* ---- control-flow instructions newer than Debian's Zydis 4.0 ----
 *
 * Zydis 4.0 (and binutils 2.40, LLVM 14) predates FRED and APX: it reads
 * ERETU/ERETS as CLAC with a REP prefix (not a branch) and rejects
 * JMPABS.  Encodings from the SDM (FRED: ERETS F2 0F 01 CA, ERETU F3 0F
 * 01 CA; APX: JMPABS = REX2 (D5, M0=0, W=0) A1 imm64) and libipt's
 * classification: ERETU/ERETS are far returns like IRET (they take a TIP
 * or TIP.PGD), JMPABS takes a TIP like an indirect jump (libipt ignores
 * its immediate; so do we: the TIP is authoritative).  UIRET (F3 0F 01
 * EC) is known to Zydis 4.0 but not classified there: a far return. */
struct new_insn {
	uint8_t bytes[4], len, match; /* match: bytes compared; len: total length */
	uint8_t kind, mode64;         /* kind; valid in 64-bit mode only */
	const char *name;
};

static const struct new_insn new_insns[] = {
	{ { 0xf3, 0x0f, 0x01, 0xca }, 4, 4, BTR_KIND_IRET, 1, "eretu" },
	{ { 0xf2, 0x0f, 0x01, 0xca }, 4, 4, BTR_KIND_IRET, 1, "erets" },
	{ { 0xf3, 0x0f, 0x01, 0xec }, 4, 4, BTR_KIND_IRET, 1, "uiret" },
	{ { 0xd5, 0x00, 0xa1 }, 11, 3, BTR_KIND_JMP_IND, 1, "jmpabs" },
};

/* The new_insns entry for @p, or NULL. */
static const struct new_insn *new_insn_at(const uint8_t *p, size_t size, enum btr_exec_mode mode)
{
	for (size_t i = 0; i < BTR_ARRAY_SIZE(new_insns); i++) {
		const struct new_insn *t = &new_insns[i];
		if (t->mode64 && mode != BTR_MODE_64)
			continue;
		if (size < t->match)
			continue;
		/* JMPABS: REX2 payload bits other than M0 (7) and W (3) are
		 * ignored. */
		int ok = 1;
		for (unsigned k = 0; k < t->match && ok; k++) {
			uint8_t m = (t->bytes[0] == 0xd5 && k == 1) ? 0x88 : 0xff;
			ok = (p[k] & m) == t->bytes[k];
		}
		if (ok)
			return t;
	}
	return NULL;
}

/* The general path: Zydis in minimal mode. */
int btr__insn_decode_zydis(const uint8_t *bytes, size_t size, uint64_t ip,
			   enum btr_exec_mode mode, struct btr_insn *out)
{
	ZydisDecodedInstruction zi;
	ZyanStatus st;

	if (btr_unlikely(!bytes || !out || (unsigned)mode >= NMODES))
		return -BTR_ERR_INVAL;
	if (btr_unlikely((bytes[0] == 0xf3 || bytes[0] == 0xf2 || bytes[0] == 0xd5) && size)) {
		const struct new_insn *t = new_insn_at(bytes, size, mode);
		if (t) {
			if (size < t->len)
				return -BTR_ERR_TRUNCATED;
			out->ip = ip;
			out->len = t->len;
			out->imm = 0;
			out->target = 0;
			out->kind = t->kind;
			out->flags = t->kind == BTR_KIND_IRET ? BTR_INSN_FAR : 0;
			return t->len;
		}
	}
	if (btr_unlikely(!ensure_init()))
		return -BTR_ERR_INTERNAL;

	st = ZydisDecoderDecodeInstruction(&dec_min[mode], NULL, bytes, size, &zi);
	if (btr_unlikely(!ZYAN_SUCCESS(st)))
		return map_status(st);

	out->ip = ip;
	out->target = 0;
	out->imm = 0;
	out->len = zi.length;
	classify(&zi, ip, out);
	return zi.length;
}

/* ---- fast path ----
 *
 * Zydis costs ~115 ns per instruction here (even in minimal mode), which
 * would dominate PT flow decoding.  Compiled 64-bit code is mostly a small
 * set of plain encodings, so those are length-decoded from two tables:
 * at most one 66 and one FS/GS prefix (not on branches), at most one REX
 * directly before the opcode, a
 * one-byte or 0F opcode from a whitelist whose validity does not depend
 * on anything but the ModRM checks encoded below.  Everything else (other
 * prefixes, VEX/EVEX, 0F38/0F3A, x87, string ops, far and system forms,
 * any doubt) goes to Zydis, as does an instruction longer than @size, so
 * results are identical by construction; tests/test_insn.c checks that
 * differentially over real code and millions of random encodings. */
enum {
	FP_OK = 1u << 0,      /* whitelisted */
	FP_MODRM = 1u << 1,   /* has ModRM (+SIB/disp) */
	FP_I8 = 1u << 2,      /* imm8 */
	FP_IZ = 1u << 3,      /* imm32, imm16 with 66 */
	FP_I16 = 1u << 4,     /* imm16 (RET iw) */
	FP_IV = 1u << 5,      /* imm32, imm64 with REX.W, imm16 with 66 (MOV r, imm) */
	FP_REL8 = 1u << 6,    /* rel8 */
	FP_REL32 = 1u << 7,   /* rel32 */
	FP_NO66 = 1u << 8,    /* 66 changes the meaning (branches): use Zydis */
	FP_NOMOD3 = 1u << 9,  /* register form is invalid (LEA) */
	FP_REG = 1u << 10,    /* ModRM.reg must be in the opcode's reg mask */
	FP_GRP3 = 1u << 11,   /* F6/F7: imm only for /0 */
};

#define ALU4(b) [b] = FP_OK | FP_MODRM, [b + 1] = FP_OK | FP_MODRM, [b + 2] = FP_OK | FP_MODRM, \
	[b + 3] = FP_OK | FP_MODRM, [b + 4] = FP_OK | FP_I8, [b + 5] = FP_OK | FP_IZ

static const uint16_t fp_map0[256] = {
	ALU4(0x00), ALU4(0x08), ALU4(0x10), ALU4(0x18), ALU4(0x20), ALU4(0x28), ALU4(0x30), ALU4(0x38),
	[0x50 ... 0x5f] = FP_OK,
	[0x63] = FP_OK | FP_MODRM,
	[0x68] = FP_OK | FP_IZ,
	[0x69] = FP_OK | FP_MODRM | FP_IZ,
	[0x6a] = FP_OK | FP_I8,
	[0x6b] = FP_OK | FP_MODRM | FP_I8,
	[0x70 ... 0x7f] = FP_OK | FP_REL8 | FP_NO66,
	[0x80] = FP_OK | FP_MODRM | FP_I8,
	[0x81] = FP_OK | FP_MODRM | FP_IZ,
	[0x83] = FP_OK | FP_MODRM | FP_I8,
	[0x84 ... 0x8b] = FP_OK | FP_MODRM,
	[0x8d] = FP_OK | FP_MODRM | FP_NOMOD3,
	[0x90 ... 0x99] = FP_OK,
	[0xa8] = FP_OK | FP_I8,
	[0xa9] = FP_OK | FP_IZ,
	[0xb0 ... 0xb7] = FP_OK | FP_I8,
	[0xb8 ... 0xbf] = FP_OK | FP_IV,
	[0xc0] = FP_OK | FP_MODRM | FP_I8 | FP_REG,
	[0xc1] = FP_OK | FP_MODRM | FP_I8 | FP_REG,
	[0xc2] = FP_OK | FP_I16 | FP_NO66,
	[0xc3] = FP_OK | FP_NO66,
	[0xc6] = FP_OK | FP_MODRM | FP_I8 | FP_REG,
	[0xc7] = FP_OK | FP_MODRM | FP_IZ | FP_REG,
	[0xc9] = FP_OK,
	[0xcc] = FP_OK | FP_NO66,
	[0xcd] = FP_OK | FP_I8 | FP_NO66,
	[0xd0 ... 0xd3] = FP_OK | FP_MODRM | FP_REG,
	[0xe0 ... 0xe3] = FP_OK | FP_REL8 | FP_NO66,
	[0xe8] = FP_OK | FP_REL32 | FP_NO66,
	[0xe9] = FP_OK | FP_REL32 | FP_NO66,
	[0xeb] = FP_OK | FP_REL8 | FP_NO66,
	[0xf4] = FP_OK | FP_NO66,
	[0xf5] = FP_OK, [0xf8] = FP_OK, [0xf9] = FP_OK, [0xfc] = FP_OK, [0xfd] = FP_OK,
	[0xf6] = FP_OK | FP_MODRM | FP_REG | FP_GRP3,
	[0xf7] = FP_OK | FP_MODRM | FP_REG | FP_GRP3,
	[0xfe] = FP_OK | FP_MODRM | FP_REG,
	[0xff] = FP_OK | FP_MODRM | FP_REG | FP_NO66,
};

static const uint16_t fp_map1[256] = {
	[0x05] = FP_OK | FP_NO66,                      /* syscall */
	[0x0b] = FP_OK | FP_NO66,                      /* ud2 */
	[0x10] = FP_OK | FP_MODRM, [0x11] = FP_OK | FP_MODRM,
	[0x14] = FP_OK | FP_MODRM, [0x15] = FP_OK | FP_MODRM,
	[0x1f] = FP_OK | FP_MODRM | FP_REG,           /* nop r/m */
	[0x28] = FP_OK | FP_MODRM, [0x29] = FP_OK | FP_MODRM,
	[0x2e] = FP_OK | FP_MODRM, [0x2f] = FP_OK | FP_MODRM,
	[0x40 ... 0x4f] = FP_OK | FP_MODRM,           /* cmovcc */
	[0x51] = FP_OK | FP_MODRM,
	[0x54 ... 0x59] = FP_OK | FP_MODRM,
	[0x5c ... 0x5f] = FP_OK | FP_MODRM,
	[0x60 ... 0x6b] = FP_OK | FP_MODRM,           /* MMX/SSE2 unpack, pack, compare */
	[0x6e] = FP_OK | FP_MODRM, [0x6f] = FP_OK | FP_MODRM,
	[0x70] = FP_OK | FP_MODRM | FP_I8,            /* pshufw / pshufd */
	[0x74 ... 0x76] = FP_OK | FP_MODRM,           /* pcmpeqb/w/d */
	[0x7e] = FP_OK | FP_MODRM, [0x7f] = FP_OK | FP_MODRM,
	[0x80 ... 0x8f] = FP_OK | FP_REL32 | FP_NO66, /* jcc rel32 */
	[0x90 ... 0x9f] = FP_OK | FP_MODRM | FP_REG,  /* setcc */
	[0xa3] = FP_OK | FP_MODRM, [0xab] = FP_OK | FP_MODRM,
	[0xa4] = FP_OK | FP_MODRM | FP_I8, [0xac] = FP_OK | FP_MODRM | FP_I8,
	[0xa5] = FP_OK | FP_MODRM, [0xad] = FP_OK | FP_MODRM,
	[0xaf] = FP_OK | FP_MODRM,
	[0xb0] = FP_OK | FP_MODRM, [0xb1] = FP_OK | FP_MODRM,
	[0xb3] = FP_OK | FP_MODRM, [0xbb] = FP_OK | FP_MODRM,
	[0xb6] = FP_OK | FP_MODRM, [0xb7] = FP_OK | FP_MODRM,
	[0xba] = FP_OK | FP_MODRM | FP_I8 | FP_REG,
	[0xbc] = FP_OK | FP_MODRM, [0xbd] = FP_OK | FP_MODRM,
	[0xbe] = FP_OK | FP_MODRM, [0xbf] = FP_OK | FP_MODRM,
	[0xc0] = FP_OK | FP_MODRM, [0xc1] = FP_OK | FP_MODRM,
	[0xc2] = FP_OK | FP_MODRM | FP_I8, [0xc6] = FP_OK | FP_MODRM | FP_I8, /* cmpps, shufps */
	[0xc8 ... 0xcf] = FP_OK,                       /* bswap */
	[0xd8 ... 0xdf] = FP_OK | FP_MODRM,           /* psubus, pminub, pand, ... */
	[0xe8 ... 0xef] = FP_OK | FP_MODRM,           /* psubs, por, pxor, ... */
	[0xf8 ... 0xfe] = FP_OK | FP_MODRM,           /* psub, padd */
};

/* Allowed ModRM.reg values (bit per value) for FP_REG opcodes. */
static inline unsigned fp_regmask(unsigned map, unsigned op)
{
	if (map == 0) {
		switch (op) {
		case 0xc0: case 0xc1: case 0xd0: case 0xd1: case 0xd2: case 0xd3:
			return 0xbf;        /* /6 is the undocumented SAL alias */
		case 0xc6: case 0xc7:
			return 0x01;        /* /7 is XABORT/XBEGIN */
		case 0xf6: case 0xf7:
			return 0xfd;        /* /1 is an undocumented TEST alias */
		case 0xfe:
			return 0x03;
		case 0xff:
			return 0x57;        /* /0 /1 /2 /4 /6: no far forms, no /7 */
		}
		return 0;
	}
	switch (op) {
	case 0x1f: return 0x01;
	case 0xba: return 0xf0;
	default: return 0x01;           /* setcc /0 */
	}
}

/* Returns the length, or 0 to let Zydis decide. */
static inline int fast_decode(const uint8_t *p, size_t size, uint64_t ip, struct btr_insn *out)
{
	size_t i = 0, end = size < 15 ? size : 15;
	unsigned o66 = 0, seg = 0, rexw = 0, map = 0, op, fl, modrm = 0;
	size_t len;
	int64_t rel = 0;

	if (end < 1)
		return 0;
	/* Up to one 66 and one FS/GS override (TLS and stack-protector
	 * accesses), in either order; repeats and other prefixes go to Zydis. */
	for (; i < 2 && i < end; i++) {
		if (p[i] == 0x66 && !o66)
			o66 = 1;
		else if ((p[i] == 0x64 || p[i] == 0x65) && !seg)
			seg = 1;
		else
			break;
	}
	if (i < end && (p[i] & 0xf0) == 0x40) {
		rexw = (p[i] >> 3) & 1;
		i++;
	}
	if (i >= end)
		return 0;
	op = p[i++];
	if (op == 0x0f) {
		if (i >= end)
			return 0;
		map = 1;
		op = p[i++];
		fl = fp_map1[op];
	} else {
		fl = fp_map0[op];
	}
	if (!(fl & FP_OK) || ((o66 || seg) && (fl & FP_NO66)))
		return 0;

	len = i;
	if (fl & FP_MODRM) {
		unsigned mod, rm;

		if (len >= end)
			return 0;
		modrm = p[len++];
		mod = modrm >> 6;
		rm = modrm & 7;
		if ((fl & FP_REG) && !(fp_regmask(map, op) & (1u << ((modrm >> 3) & 7))))
			return 0;
		if (mod == 3) {
			if (fl & FP_NOMOD3)
				return 0;
		} else {
			if (rm == 4) {
				if (len >= end)
					return 0;
				if (mod == 0 && (p[len] & 7) == 5)
					len += 4;
				len++;
			} else if (mod == 0 && rm == 5) {
				len += 4;       /* RIP-relative */
			}
			if (mod == 1)
				len += 1;
			else if (mod == 2)
				len += 4;
		}
	}
	if (fl & FP_I8)
		len += 1;
	/* REX.W wins over 66 for the operand size (and so the imm size). */
	if (fl & FP_IZ)
		len += (o66 && !rexw) ? 2 : 4;
	if (fl & FP_I16)
		len += 2;
	if (fl & FP_IV)
		len += rexw ? 8 : (o66 ? 2 : 4);
	if ((fl & FP_GRP3) && ((modrm >> 3) & 7) == 0)
		len += (op == 0xf6) ? 1 : ((o66 && !rexw) ? 2 : 4);
	if (fl & FP_REL8) {
		if (len + 1 > end)
			return 0;
		rel = (int8_t)p[len];
		len += 1;
	} else if (fl & FP_REL32) {
		if (len + 4 > end)
			return 0;
		rel = (int32_t)((uint32_t)p[len] | (uint32_t)p[len + 1] << 8 |
				(uint32_t)p[len + 2] << 16 | (uint32_t)p[len + 3] << 24);
		len += 4;
	}
	if (len > end)
		return 0;

	out->ip = ip;
	out->target = 0;
	out->imm = 0;
	out->len = (uint8_t)len;
	out->kind = BTR_KIND_NONE;
	out->flags = 0;
	if (fl & (FP_REL8 | FP_REL32)) {
		/* 64-bit mode, no 66: the target never wraps below 64 bits. */
		out->target = ip + len + (uint64_t)rel;
		out->flags = BTR_INSN_DIRECT;
		if (map == 1 || op < 0x80) {
			out->kind = BTR_KIND_JCC;
			out->flags |= BTR_INSN_COND;
		} else if (op <= 0xe2) {
			out->kind = BTR_KIND_LOOP;
			out->flags |= BTR_INSN_COND;
		} else if (op == 0xe3) {
			out->kind = BTR_KIND_JRCXZ;
			out->flags |= BTR_INSN_COND;
		} else if (op == 0xe8) {
			out->kind = BTR_KIND_CALL;
		} else {
			out->kind = BTR_KIND_JMP;
		}
	} else if (fl & FP_NO66) {
		if (map == 1) {
			if (op == 0x05) {
				out->kind = BTR_KIND_SYSCALL;
				out->flags = BTR_INSN_FAR;
			} else {
				out->flags = BTR_INSN_STOPS;     /* ud2 */
			}
		} else {
			switch (op) {
			case 0xc2:
				out->imm = (uint16_t)(p[len - 2] | p[len - 1] << 8);
				/* fall through */
			case 0xc3:
				out->kind = BTR_KIND_RET;
				break;
			case 0xcc:
				out->kind = BTR_KIND_INT3;
				out->flags = BTR_INSN_FAR;
				break;
			case 0xcd:
				out->kind = BTR_KIND_INT;
				out->flags = BTR_INSN_FAR;
				break;
			case 0xf4:
				out->flags = BTR_INSN_STOPS;     /* hlt */
				break;
			case 0xff:
				if (((modrm >> 3) & 7) == 2)
					out->kind = BTR_KIND_CALL_IND;
				else if (((modrm >> 3) & 7) == 4)
					out->kind = BTR_KIND_JMP_IND;
				break;
			}
		}
	}
	return (int)len;
}

int btr_insn_decode(const uint8_t *bytes, size_t size, uint64_t ip,
		    enum btr_exec_mode mode, struct btr_insn *out)
{
	if (btr_likely(mode == BTR_MODE_64 && bytes && out)) {
		int n = fast_decode(bytes, size, ip, out);

		if (btr_likely(n > 0))
			return n;
	}
	return btr__insn_decode_zydis(bytes, size, ip, mode, out);
}

int btr_insn_format(const uint8_t *bytes, size_t size, uint64_t ip,
		    enum btr_exec_mode mode, char *buf, size_t bufsize)
{
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	char text[256];
	ZyanStatus st;
	size_t n;

	if (!bytes || !buf || !bufsize || (unsigned)mode >= NMODES)
		return -BTR_ERR_INVAL;
	buf[0] = '\0';
	if (!ensure_init())
		return -BTR_ERR_INTERNAL;

	const struct new_insn *t = size ? new_insn_at(bytes, size, mode) : NULL;
	if (t && size >= t->len) {
		if (t->len == 11) {
			uint64_t imm = 0;
			for (unsigned k = 0; k < 8; k++)
				imm |= (uint64_t)bytes[3 + k] << (8 * k);
			snprintf(text, sizeof(text), "%s 0x%" PRIx64, t->name, imm);
		} else {
			snprintf(text, sizeof(text), "%s", t->name);
		}
		goto out;
	}
	st = ZydisDecoderDecodeFull(&dec_full[mode], bytes, size, &zi, ops);
	if (!ZYAN_SUCCESS(st))
		return map_status(st);
	st = ZydisFormatterFormatInstruction(&formatter, &zi, ops, zi.operand_count_visible,
					     text, sizeof(text), ip, NULL);
	if (!ZYAN_SUCCESS(st))
		return -BTR_ERR_INTERNAL;
out:
	n = strlen(text);
	if (n >= bufsize) {
		memcpy(buf, text, bufsize - 1);
		buf[bufsize - 1] = '\0';
	} else {
		memcpy(buf, text, n + 1);
	}
	return (int)n;
}
