/* btr/insn.h - x86 instruction length and branch classification (Zydis). */
#ifndef BTR_INSN_H
#define BTR_INSN_H

#pragma GCC visibility push(default)   /* the public API: what libbtr.so exports (docs/library.md) */

#include <stddef.h>
#include <stdint.h>
#include "btr/branch.h"

#ifdef __cplusplus
extern "C" {
#endif

enum btr_exec_mode {
	BTR_MODE_64 = 0,   /* 64-bit long mode (default) */
	BTR_MODE_32,       /* 32-bit protected / compatibility mode */
	BTR_MODE_16,       /* 16-bit mode */
};

enum {
	BTR_INSN_DIRECT = 1u << 0,  /* target is encoded in the instruction (.target valid) */
	BTR_INSN_COND = 1u << 1,    /* conditional: consumes a TNT bit in PT */
	BTR_INSN_FAR = 1u << 2,     /* far transfer (changes CS / privilege) */
	BTR_INSN_NOTRACK = 1u << 3, /* has the 3E (notrack) prefix */
	BTR_INSN_BND = 1u << 4,     /* has the F2 (bnd) prefix */
	BTR_INSN_STOPS = 1u << 5,   /* ends the trace of a block without a branch: hlt, ud2, ... */
	BTR_INSN_PTWRITE = 1u << 6, /* PTWRITE instruction */
	BTR_INSN_VMENTRY = 1u << 7, /* VMLAUNCH/VMRESUME/VMCALL etc. */
	BTR_INSN_TSX = 1u << 8,     /* XBEGIN/XEND/XABORT */
	BTR_INSN_MOV_CR3 = 1u << 9, /* MOV to CR3 (a PIP or TIP.PGD without IP binds to it) */
	/* Set by the PT flow decoder in its instruction callback (never by
	 * btr_insn_decode): the instruction ran inside a TSX transaction,
	 * speculatively (libipt's pt_insn.speculative, ptxed's "? "). */
	BTR_INSN_IN_TX = 1u << 10,
};

/* A classified instruction. Caller-owned; no allocation. */
struct btr_insn {
	uint64_t ip;        /* address it was decoded at */
	uint64_t target;    /* branch target for BTR_INSN_DIRECT, else 0 */
	uint32_t flags;     /* BTR_INSN_* */
	uint8_t len;        /* length in bytes, 1..15 */
	uint8_t kind;       /* enum btr_branch_kind, BTR_KIND_NONE for non-branches */
	uint16_t imm;       /* RET/RETF imm16 (bytes popped), else 0 */
};

/* Decodes the instruction at @bytes (at most @size bytes, read from
 * address @ip in @mode) and classifies it into @out.  Returns the length
 * (> 0), -BTR_ERR_BAD_INSN if the bytes are not a valid instruction,
 * -BTR_ERR_TRUNCATED if @size is too short for it, -BTR_ERR_INVAL on NULL
 * or a bad @mode.  Thread-safe, no allocation.
 *
 * Classification (docs/branch-kinds.md has the full table):
 *  - DIRECT is set for the rel forms only (Jcc, LOOPcc, JrCXZ, CALL rel,
 *    JMP rel); .target = ip + len + disp, wrapped to the operand size
 *    (16 or 32 bits outside 64-bit mode, also with a 66 prefix in 32-bit
 *    mode).  Far ptr16:32 forms are FAR without DIRECT, target 0: their
 *    linear target depends on the new code segment's base.
 *  - HLT/UD0/UD1/UD2 are kind NONE with STOPS; PTWRITE, VMLAUNCH/VMRESUME/
 *    VMCALL/VMMCALL and XBEGIN/XEND/XABORT are kind NONE with their flag.
 *  - NOTRACK: 3E prefix on CALL_IND/JMP_IND.  BND: F2 prefix on near
 *    Jcc/CALL/CALL_IND/RET/JMP/JMP_IND.
 *  - 66 on near branches in 64-bit mode is ignored, as Intel CPUs do. */
int btr_insn_decode(const uint8_t *bytes, size_t size, uint64_t ip,
		    enum btr_exec_mode mode, struct btr_insn *out);

struct btr_image;

/* Like btr_insn_decode, reading the bytes at @ip from @img (an
 * instruction may straddle adjacent sections).  Returns the length,
 * -BTR_ERR_NOMAP if no section holds @ip, -BTR_ERR_TRUNCATED if the code
 * ends inside the instruction, -BTR_ERR_BAD_INSN, -BTR_ERR_INVAL. */
int btr_insn_decode_image(const struct btr_image *img, uint64_t ip,
			  enum btr_exec_mode mode, struct btr_insn *out);

/* Formats the instruction at @bytes as Intel-syntax text (Zydis
 * formatter; relative targets shown as absolute addresses computed from
 * @ip) into @buf, always NUL-terminated and truncated to @bufsize - 1
 * characters.  Returns the length of the full text (like snprintf; it is
 * >= @bufsize when truncated), -BTR_ERR_BAD_INSN, -BTR_ERR_TRUNCATED, or
 * -BTR_ERR_INVAL (NULL, @bufsize 0, bad @mode). */
int btr_insn_format(const uint8_t *bytes, size_t size, uint64_t ip,
		    enum btr_exec_mode mode, char *buf, size_t bufsize);

#ifdef __cplusplus
}
#endif
#pragma GCC visibility pop

#endif
