/* insn_priv.h - classification helpers shared by the BTS and LBR decoders
 * (implemented in insn.c).  Not part of the public API. */
#ifndef BTR_INSN_PRIV_H
#define BTR_INSN_PRIV_H

#include "btr/branch.h"
#include "btr/image.h"
#include "btr/insn.h"

/* Start of the canonical upper half: kernel addresses on x86-64 Linux. */
#define BTR_KERNEL_START 0xffff800000000000ull

/* Completes @b, a TAKEN branch recorded by hardware (BTS, LBR) whose
 * .from and .to are set: sets .kind by decoding the instruction at .from
 * through @img (may be NULL), and the TAKEN, KERNEL and TO_KERNEL flags.
 *  - no image, no code at .from, undecodable bytes: BTR_KIND_NONE;
 *  - a branch instruction: its kind, unless it is DIRECT and .to is not
 *    its target (an interrupt arrived before it executed): ASYNC;
 *  - any other instruction: ASYNC (interrupt, exception, TSX abort). */
void btr__classify_taken(const struct btr_image *img, struct btr_branch *b);

/* btr_insn_decode without the table-driven fast path (Zydis only), for
 * differential tests and benchmarks. */
int btr__insn_decode_zydis(const uint8_t *bytes, size_t size, uint64_t ip,
			   enum btr_exec_mode mode, struct btr_insn *out);

#endif
