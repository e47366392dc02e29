/* qemu_insn_scan.h - the QEMU plugin's scans of translated instruction
 * bytes (qemu_insn_scan.c): REP string instructions, instructions that may
 * stop a block early.  Needs nothing of the plugin's state, so
 * tests/test_qemu_insn_scan.c builds qemu_insn_scan.c with it.  Private to
 * agents/qemu/. */
#ifndef BTR_QEMU_INSN_SCAN_H
#define BTR_QEMU_INSN_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <Zydis/Zydis.h>

/* The plugin's decoder (64-bit long mode), set up by qemu_plugin_install
 * (or the test) before the first scan. */
extern ZydisDecoder zdec;

/* Is @b (@len bytes) a REP/REPNE string instruction (MOVS, CMPS, STOS,
 * LODS, SCAS, INS, OUTS)?  1 or 0. */
int is_rep_string(const uint8_t *b, size_t len);
/* The register forms of common integer instructions and LEA: no memory
 * operand and nothing that can fault (may_stop answers 0 without decoding
 * the operands).  1 or 0. */
int reg_only(const ZydisDecodedInstruction *in);
/* Can the instruction @bytes (@len, at guest address @va) end its TB
 * early (fault, or make QEMU stop after it)?  1 or 0. */
int may_stop(const uint8_t *bytes, size_t len, uint64_t va);

#endif
