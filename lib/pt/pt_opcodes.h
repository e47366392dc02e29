/* pt_opcodes.h - the one table of Intel PT packet opcodes and sizes.
 *
 * Every parser and writer of PT bytes names packets by these constants:
 * the packet decoder (pt.c), the flow decoder's packet parser and its hot
 * TNT/TIP walk (ptflow.c, ptflow_walk.c), the PSB+ sizing of parallel
 * decoding (ptflow_par.c, through pt.c), the encoder (pt_enc.c, which the
 * QEMU plugin writes its PT with).  No other file spells an opcode byte;
 * adding a packet starts here (docs/architecture.md, "How to add a PT
 * packet").  Layouts: Intel SDM Vol. 3C, "Trace Packets and Data Types";
 * organised like libipt's pt_opcodes.h: opcodes, the masks that select
 * them, then sizes.  The names of packets (what `btr pt dump` prints) are
 * keyed by enum btr_pt_type in pt_format.c.
 *
 * All values are integer constant expressions, so a switch on them or a
 * table built from them costs what the bare numbers did. */
#ifndef BTR_PT_OPCODES_H
#define BTR_PT_OPCODES_H

#include <stdint.h>

#include "btr/pt.h"

/* ---- first byte ---- */
enum pt_opcode {
	PT_OPC_PAD = 0x00,
	PT_OPC_EXT = 0x02,       /* extended: the second byte is an enum pt_ext_opcode */
	/* (b & PT_OPM_IP): bits 7:5 are the IP compression (enum btr_pt_ipc) */
	PT_OPC_TIP_PGD = 0x01,
	PT_OPC_TIP = 0x0d,
	PT_OPC_TIP_PGE = 0x11,
	PT_OPC_FUP = 0x1d,
	PT_OPC_TSC = 0x19,
	PT_OPC_MTC = 0x59,
	PT_OPC_MODE = 0x99,      /* byte 1 bits 7:5: enum pt_mode_leaf */
	PT_OPC_TRIG = 0xd9,
	PT_OPC_TNT8 = 0x00,      /* (b & PT_OPM_TNT8), b not PAD or EXT: stop bit, up to 6 TNT bits */
	PT_OPC_CYC = 0x03,       /* (b & PT_OPM_CYC) */
	PT_OPC_CYC1 = 0x03,      /* (b & PT_OPM_CYC1): a CYC of one byte (no PT_CYC_EXP) */
	PT_OPC_BIP = 0x04,       /* (b & PT_OPM_BIP), only inside a BBP block */
};

/* Masks selecting the opcode bits of a first byte. */
enum pt_opcode_mask {
	PT_OPM_TNT8 = 0x01,
	PT_OPM_IP = 0x1f,
	PT_OPM_CYC = 0x03,
	PT_OPM_CYC1 = 0x07,
	PT_OPM_BIP = 0x07,
};

enum {
	PT_OPS_IPC = 5,          /* shift of the IP compression in an IP packet's first byte */
	PT_OPS_BIP = 3,          /* shift of a BIP's register id */
	PT_CYC_EXP = 0x04,       /* CYC byte 0: more bytes follow */
	PT_CYC_MORE = 0x01,      /* CYC bytes 1..: more bytes follow */
};

/* ---- second byte after PT_OPC_EXT ---- */
enum pt_ext_opcode {
	PT_EXT_TNT64 = 0xa3,
	PT_EXT_PIP = 0x43,
	PT_EXT_TRACESTOP = 0x83,
	PT_EXT_CBR = 0x03,
	PT_EXT_VMCS = 0xc8,
	PT_EXT_OVF = 0xf3,
	PT_EXT_PSB = 0x82,
	PT_EXT_PSBEND = 0x23,
	PT_EXT_TMA = 0x73,
	PT_EXT_EXT2 = 0xc3,      /* 3-byte opcodes: the third byte is an enum pt_ext2_opcode */
	PT_EXT_EXSTOP = 0x62,
	PT_EXT_EXSTOP_IP = 0xe2, /* EXSTOP with its IP bit (a FUP follows) */
	PT_EXT_MWAIT = 0xc2,
	PT_EXT_PWRE = 0x22,
	PT_EXT_PWRX = 0xa2,
	PT_EXT_BBP = 0x63,
	PT_EXT_BEP = 0x33,
	PT_EXT_BEP_IP = 0xb3,    /* BEP with its IP bit */
	PT_EXT_CFE = 0x13,
	PT_EXT_EVD = 0x53,
	PT_EXT_PTW = 0x12,       /* (b & PT_OPM_PTW): bits 6:5 payload size, bit 7 IP */
};

enum {
	PT_OPM_PTW = 0x1f,
	PT_OPS_PTW_PLC = 5,      /* shift of PTW's PayloadBytes field (2 bits: 0 4 bytes, 1 8, others reserved) */
	PT_EXT_IP_BIT = 0x80,    /* the IP bit of PTW, EXSTOP, BEP (their opcode byte) */
};

/* ---- third byte after PT_OPC_EXT PT_EXT_EXT2 ---- */
enum pt_ext2_opcode {
	PT_EXT2_MNT = 0x88,
};

/* ---- payload fields that decide a packet's size or kind ---- */
enum {
	PT_MODE_LEAF_MASK = 0xe0,
	PT_MODE_EXEC = 0x00,     /* MODE leaves (byte 1 & PT_MODE_LEAF_MASK) */
	PT_MODE_TSX = 0x20,
	PT_TRIG_IP = 0x80,       /* TRIG byte 1: a FUP follows */
	PT_TRIG_ICNT = 0x40,     /* TRIG byte 1: ICNT[15:0] follows (PT_SIZE_TRIG_ICNT) */
	PT_TRIG_MULT = 0x20,
	PT_TRIG_RSVD = 0x1f,     /* TRIG byte 1: reserved, must be 0 */
	PT_BBP_SZ = 0x80,        /* BBP byte 2: BIPs carry 4 bytes, else 8 */
};

/* ---- sizes in bytes, opcode included ---- */
enum pt_packet_size {
	PT_SIZE_PAD = 1,
	PT_SIZE_TNT8 = 1,
	PT_SIZE_CYC1 = 1,        /* CYC: 1 + the bytes PT_CYC_EXP / PT_CYC_MORE announce */
	PT_SIZE_IP0 = 1,         /* IP packets: 1 + PT_IPC_BYTES(ipc) */
	PT_SIZE_TSC = 8,
	PT_SIZE_MTC = 2,
	PT_SIZE_MODE = 2,
	PT_SIZE_TRIG = 3,
	PT_SIZE_TRIG_ICNT = 5,
	PT_SIZE_EXT = 2,         /* the extended packets without payload */
	PT_SIZE_TNT64 = 8,
	PT_SIZE_PIP = 8,
	PT_SIZE_TRACESTOP = 2,
	PT_SIZE_CBR = 4,
	PT_SIZE_VMCS = 7,
	PT_SIZE_OVF = 2,
	PT_SIZE_PSB = BTR_PT_PSB_SIZE,
	PT_SIZE_PSBEND = 2,
	PT_SIZE_TMA = 7,
	PT_SIZE_MNT = 11,
	PT_SIZE_PTW4 = 6,        /* PTW: 2 + 4 or 8 payload bytes */
	PT_SIZE_PTW8 = 10,
	PT_SIZE_EXSTOP = 2,
	PT_SIZE_MWAIT = 10,
	PT_SIZE_PWRE = 4,
	PT_SIZE_PWRX = 7,
	PT_SIZE_BBP = 3,
	PT_SIZE_BIP4 = 5,        /* BIP: 1 + 4 or 8 payload bytes (the BBP's PT_BBP_SZ) */
	PT_SIZE_BIP8 = 9,
	PT_SIZE_BEP = 2,
	PT_SIZE_CFE = 4,
	PT_SIZE_EVD = 11,
};

/* IP payload bytes per compression (0 for suppressed and the reserved
 * encodings 5 and 7, which PT_IPC_OK rejects), and the same with 0xff
 * for the reserved ones (a table lookup decides both). */
#define PT_IPC_BYTES(ipc)                                                                              \
	((ipc) == BTR_PT_IPC_UPDATE16 ? 2 : (ipc) == BTR_PT_IPC_UPDATE32 ? 4 : (ipc) == BTR_PT_IPC_SEXT48 ? 6 \
	 : (ipc) == BTR_PT_IPC_UPDATE48 ? 6 : (ipc) == BTR_PT_IPC_FULL ? 8 : 0)
#define PT_IPC_OK(ipc) ((ipc) != 5 && (ipc) != 7)
#define PT_IPC_LEN(ipc) (PT_IPC_OK(ipc) ? PT_IPC_BYTES(ipc) : 0xff)

/* The type of an IP packet by its first byte, 0 if it is none. */
#define PT_IP_TYPE(b)                                                                                  \
	(((b) & PT_OPM_IP) == PT_OPC_TIP ? BTR_PT_TIP : ((b) & PT_OPM_IP) == PT_OPC_TIP_PGE ? BTR_PT_TIP_PGE \
	 : ((b) & PT_OPM_IP) == PT_OPC_TIP_PGD ? BTR_PT_TIP_PGD : ((b) & PT_OPM_IP) == PT_OPC_FUP ? BTR_PT_FUP : 0)

/* BBP blocks (PEBS via PT, SDM Vol. 3B "PEBS output to Intel Processor
 * Trace"): after a BBP, a byte xxxxx100b (PT_OPC_BIP) starts a BIP, not
 * a short TNT, until the block ends.  Whether the packet at @p (not a
 * BIP; p[1] is read after PT_OPC_EXT only) leaves an open block open:
 * timing and power packets (PAD, MTC, CYC, TSC, TMA, CBR, MNT, EXSTOP,
 * PWRE, PWRX, TRIG) and FUP do, BBP starts a new block, BEP ends it, any
 * other packet ends it (perf's intel_pt_upd_pkt_ctx).  Both decoders
 * apply it: pt.c's decode() and the flow parser (ptflow.c). */
static inline int pt_bbp_keeps(const uint8_t *p)
{
	const uint8_t b = p[0];

	if (b == PT_OPC_PAD || (b & PT_OPM_CYC) == PT_OPC_CYC || b == PT_OPC_MTC || b == PT_OPC_TSC ||
	    b == PT_OPC_TRIG || (b & PT_OPM_IP) == PT_OPC_FUP)
		return 1;
	if (b != PT_OPC_EXT)
		return 0;
	switch (p[1]) {
	case PT_EXT_TMA: case PT_EXT_CBR: case PT_EXT_EXT2: case PT_EXT_EXSTOP: case PT_EXT_EXSTOP_IP:
	case PT_EXT_PWRE: case PT_EXT_PWRX:
		return 1;
	}
	return 0;
}

/* PSB: PT_SIZE_PSB bytes of PT_OPC_EXT PT_EXT_PSB pairs. */
#define PT_PSB_PAIRS                                                                                   \
	PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB,  \
		PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB, PT_OPC_EXT, PT_EXT_PSB
_Static_assert(PT_SIZE_PSB == 16, "PT_PSB_PAIRS spells 16 bytes");
/* (include/btr/pt.h spells the same bytes as the string BTR_PT_PSB_PATTERN
 * for the CLI; tests/test_pt_lengths.c checks they agree.) */
_Static_assert(sizeof(BTR_PT_PSB_PATTERN) == PT_SIZE_PSB + 1, "BTR_PT_PSB_PATTERN is one PSB");

#endif
