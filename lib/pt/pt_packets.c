/* pt_packets.c - the table of PT packets (pt_opcodes.h PT_PACKETS), its
 * two dispatch indexes, and PSB+ sizing.
 *
 * The rows and the indexes are built by the compiler from PT_PACKETS:
 * nothing here repeats an opcode, mask or size. */
#include "pt_opcodes.h"

const struct pt_pkt_desc btr__pt_pkts[PT_PK__COUNT] = {
#define PT_X_ROW(A_, ID, TY, NB, B0, B1, B2, M, SZ, FN, FL, NM)                                   \
	[PT_PK_##ID] = { .type = (TY), .nb = (NB), .opc = { (B0), (B1), (B2) }, .mask = (M), .size = (SZ), \
			 .szfn = (FN), .flags = (FL), .name = (NM) },
	PT_PACKETS(PT_X_ROW, 0)
#undef PT_X_ROW
};

#define FIRST(b) PT_FIRST_PK(b)
#define EXT(b) PT_EXT_PK(b)

#define I4(M, b) M(b), M((b) + 1), M((b) + 2), M((b) + 3)
#define I16(M, b) I4(M, b), I4(M, (b) + 4), I4(M, (b) + 8), I4(M, (b) + 12)
#define I64(M, b) I16(M, b), I16(M, (b) + 16), I16(M, (b) + 32), I16(M, (b) + 48)

const uint8_t btr__pt_by_first[256] = { I64(FIRST, 0), I64(FIRST, 64), I64(FIRST, 128), I64(FIRST, 192) };
const uint8_t btr__pt_by_ext[256] = { I64(EXT, 0), I64(EXT, 64), I64(EXT, 128), I64(EXT, 192) };

/* PSB+ sizing (parallel decoding cuts the stream at PSBs and needs where
 * each PSB+ ends).  The one statement of how lenient btr is about PSB+:
 *  - a PSB+ holds only the packets of rows with PT_F_PSBPLUS (PSB, PAD,
 *    CYC, FUP, TSC, MTC, MODE, PIP, CBR, VMCS, TMA: SDM Vol. 3C "Packet
 *    Generation Scenarios"); any other packet means these bytes are no
 *    PSB+ (0);
 *  - it ends at the end of its PSBEND, or before an OVF (an overflow in
 *    PSB+ ends it without PSBEND: the flow decoder leaves PSB+ at OVF);
 *  - packets are sized by pt_pkt_len() alone: reserved bits inside a
 *    packet (a MODE leaf, TMA's reserved bytes) are not checked, as the
 *    flow decoder does not; reserved IP compressions, overlong CYCs and
 *    bytes cut by the end are no PSB+;
 *  - SKZ84's longer TMA is not applied (PSB+ sizing has no errata: a
 *    wrong cut costs a resync in the piece, never a wrong branch). */
size_t btr__pt_psb_plus_len(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		const int id = pt_pkt_find(p + i, n - i);
		if (id == PT_PK_PSBEND)
			return i + PT_SIZE_PSBEND;
		if (id == PT_PK_OVF)
			return i;
		if (id <= PT_PK_NONE || !(btr__pt_pkts[id].flags & PT_F_PSBPLUS))
			return 0;
		const int sz = pt_pkt_len(id, p + i, n - i, 0);
		if (sz <= 0)
			return 0;
		i += (size_t)sz;
	}
	return 0;
}
