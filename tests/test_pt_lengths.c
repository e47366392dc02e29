/* test_pt_lengths.c - btr's PT parsers agree on every packet's length.
 *
 * Three places read PT packets from bytes: the packet decoder (lib/pt/pt.c,
 * btr_pt_pkt_next), the flow decoder's parser (lib/pt/ptflow.c packet(),
 * reached here through ptf_packet) and the PSB+ sizing of parallel
 * decoding (lib/pt/pt_packets.c btr__pt_psb_plus_len).  All take their opcodes
 * and sizes from the one packet table (lib/pt/pt_opcodes.h PT_PACKETS: the
 * fast paths its size column, the rest its size function pt_pkt_len());
 * this test walks streams packet by
 * packet with the packet decoder and asks the others at each boundary:
 *  - every packet the packet decoder accepts, the flow parser accepts
 *    with the same size (a packet cut by the end of the data: both say
 *    so);
 *  - where the packet decoder rejects the bytes, the flow parser rejects
 *    them too, or accepts them as one of the cases it is knowingly
 *    lenient about (it does not validate reserved fields: see lenient());
 *  - at every PSB, the PSB+ length parallel decoding uses ends exactly at
 *    the PSBEND's end (or at an OVF) of the packet sequence, or is 0 when
 *    that PSB+ holds a packet PSB+ cannot or is cut.  (A PSB+ with bytes
 *    the packet decoder rejects is counted, not compared: the PSB+ sizing
 *    is as lenient as the flow parser, see pt_packets.c.)
 * Streams: every libipt conformance stream (../shared/conformance/
 * libipt-ptt/NAME.pt, the bytes cli_pt_conformance.sh decodes), seeded
 * random bytes with PSBs and extended opcodes mixed in, and for every
 * packet type a BBP block holding it between two BIPs (whose first byte
 * reads as a TNT outside a block): the packet decoder's rule of which
 * packets leave a block open is pt_bbp_keeps() (pt_opcodes.h), the one
 * the flow parser follows.
 * The shared sizes of pt_opcodes.h could be wrong in all three alike, so
 * every packet is also measured by Intel's libipt packet decoder
 * (pt_pkt_next, walking the same bytes alongside): where libipt reads a
 * packet at the same offset, its size is btr's.  (libipt 2.0 knows no
 * BBP/BIP/BEP: packets from a BBP to its BEP are not compared.) */
#include "check.h"
#include "btr/image.h"
#include "btr/pt.h"
#include "btr/ptflow.h"
#include "pt/pt_opcodes.h"
#include "pt/ptflow_int.h"

#ifdef BTR_HAVE_LIBIPT
#include <intel-pt.h>
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return seed;
}

struct tally {
	uint64_t packets, bad, lenient, bip, psbs, psb_malformed, streams, ipt_same, ipt_other;
};
static struct tally T;

/* The packet decoder rejects the packet at @p (@n bytes) but the flow
 * parser takes it with size @sz: allowed for the reserved fields the flow
 * parser does not check. */
static int lenient(const uint8_t *p, size_t n, int sz)
{
	if (p[0] == PT_OPC_MODE)   /* reserved MODE leaf */
		return sz == PT_SIZE_MODE && (p[1] & PT_MODE_LEAF_MASK) > PT_MODE_TSX;
	if ((p[0] & PT_OPM_CYC) == PT_OPC_CYC)   /* a CYC longer than 64 bits */
		return sz > 9 && sz <= 15;
	if (p[0] != PT_OPC_EXT || n < 2)
		return 0;
	switch (p[1]) {
	case PT_EXT_TNT64:   /* no stop bit, or no branch */
		return sz == PT_SIZE_TNT64 && p[2] <= 1 && !(p[3] | p[4] | p[5] | p[6] | p[7]);
	case PT_EXT_TMA:     /* reserved bits set */
		return sz == PT_SIZE_TMA && (p[4] || (p[6] & 0xfe));
	}
	return 0;
}

/* Walks @buf[0..n) with the packet decoder, from its first PSB, checking
 * the flow parser at every packet and the PSB+ length at every PSB. */
static void walk(const char *name, const uint8_t *buf, size_t n, struct btr_image *img)
{
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet pkt;
	struct btr_ptflow *f;
	uint64_t *psb = NULL;   /* offsets of the PSBs; their PSB+ checked at the end */
	size_t npsb = 0, cap = 0;
	/* per packet: offset and type, to find each PSB+'s end */
	struct ent { uint64_t off; uint8_t type, size; } *ev = NULL;
	size_t nev = 0, capev = 0;
	int r, fails = 0;

	T.streams++;
#ifdef BTR_HAVE_LIBIPT
	struct pt_config cfg;
	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + n;
	struct pt_packet_decoder *ipt = pt_pkt_alloc_decoder(&cfg);
	CHECK(ipt != NULL);
	int in_block = 0, ipt_fails = 0;
#endif
	CHECK_EQ(btr_ptflow_new(img, NULL, &f), 0);
	CHECK_EQ(btr_pt_pkt_init(&d, buf, n, 0), 0);
	if (btr_pt_pkt_sync_forward(&d) < 0)
		goto out;
	for (;;) {
		uint64_t off = btr_pt_pkt_offset(&d);
		r = btr_pt_pkt_next(&d, &pkt);
		if (off >= n)
			break;
		int sz = ptf_packet(f, buf + off, n - off);
		if (r > 0) {
			T.packets++;
			if (pkt.type == BTR_PT_BIP)
				T.bip++;   /* a BIP the flow parser must not read as a TNT */
			if (sz != r && fails++ < 5) {
				CHECK_EQ(sz, r);
				fprintf(stderr, "%s: offset 0x%llx: %s: packet decoder %d bytes, flow parser %d\n", name,
					(unsigned long long)off, btr_pt_pkt_name(&pkt), r, sz);
			}
			if (nev == capev) {
				capev = capev ? 2 * capev : 1024;
				ev = realloc(ev, capev * sizeof(*ev));
			}
			ev[nev++] = (struct ent){ off, pkt.type, pkt.size };
#ifdef BTR_HAVE_LIBIPT
			if (pkt.type == BTR_PT_BBP)
				in_block = 1;
			if (!in_block && ipt) {
				uint64_t ioff = ~0ull;
				struct pt_packet ip;
				if (pt_pkt_get_offset(ipt, &ioff) < 0 || ioff != off)
					pt_pkt_sync_set(ipt, off);
				int ir = pt_pkt_next(ipt, &ip, sizeof(ip));
				if (ir > 0 && ir == r) {
					T.ipt_same++;
				} else if (ir > 0) {
					if (ipt_fails++ < 5) {
						CHECK_EQ(r, ir);
						fprintf(stderr, "%s: offset 0x%llx: %s: btr %d bytes, libipt %d\n", name,
							(unsigned long long)off, btr_pt_pkt_name(&pkt), r, ir);
					} else {
						CHECK_EQ(r, ir);
					}
				} else {
					T.ipt_other++;   /* libipt rejects it (a newer packet, reserved bits) */
				}
			}
			if (pkt.type == BTR_PT_BEP)
				in_block = 0;
#endif
			if (pkt.type == BTR_PT_PSB) {
				if (npsb == cap) {
					cap = cap ? 2 * cap : 64;
					psb = realloc(psb, cap * sizeof(*psb));
				}
				psb[npsb++] = nev - 1;
			}
			continue;
		}
		if (r == -BTR_ERR_EOS) {
			/* a packet cut by the end of the data */
			if (btr_pt_pkt_end(&d) == -BTR_ERR_TRUNCATED && sz != 0 && fails++ < 5) {
				CHECK_EQ(sz, 0);
				fprintf(stderr, "%s: offset 0x%llx: cut packet, flow parser %d\n", name,
					(unsigned long long)off, sz);
			}
			break;
		}
		CHECK_EQ(r, -BTR_ERR_BAD_PACKET);
		T.bad++;
		if (nev == capev) {
			capev = capev ? 2 * capev : 1024;
			ev = realloc(ev, capev * sizeof(*ev));
		}
		ev[nev++] = (struct ent){ off, BTR_PT_INVALID, 0 };
		if (sz > 0) {
			if (lenient(buf + off, n - off, sz)) {
				T.lenient++;
			} else if (fails++ < 5) {
				CHECK(!"flow parser accepts a packet the packet decoder rejects");
				fprintf(stderr, "%s: offset 0x%llx: bytes %02x %02x %02x: flow parser %d bytes\n", name,
					(unsigned long long)off, buf[off], off + 1 < n ? buf[off + 1] : 0,
					off + 2 < n ? buf[off + 2] : 0, sz);
			}
		}
		if (btr_pt_pkt_sync_forward(&d) < 0)
			break;
	}
	/* PSB+ lengths, against the packet sequence */
	for (size_t k = 0; k < npsb; k++) {
		size_t i = psb[k];
		uint64_t start = ev[i].off, want = 0;
		int malformed = 0;
		for (size_t j = i + 1; j < nev; j++) {
			unsigned t = ev[j].type;
			if (t == BTR_PT_INVALID) {
				/* bytes the packet decoder rejects: the flow
				 * parser may step over them (lenient()), and
				 * so may the PSB+ sizing: not compared */
				malformed = 1;
				break;
			}
			if (t == BTR_PT_PSBEND) {
				want = ev[j].off + ev[j].size - start;
				break;
			}
			if (t == BTR_PT_OVF) {
				want = ev[j].off - start;
				break;
			}
			if (t != BTR_PT_PAD && t != BTR_PT_PSB && t != BTR_PT_PIP && t != BTR_PT_CBR &&
			    t != BTR_PT_TMA && t != BTR_PT_VMCS && t != BTR_PT_TSC && t != BTR_PT_MTC &&
			    t != BTR_PT_MODE_EXEC && t != BTR_PT_MODE_TSX && t != BTR_PT_FUP && t != BTR_PT_CYC)
				break;   /* not PSB+ (or a bad packet): 0 */
		}
		size_t got = btr__pt_psb_plus_len(buf + start, n - start);
		if (malformed) {
			T.psb_malformed++;
			continue;
		}
		T.psbs++;
		if (got != want && fails++ < 5) {
			CHECK_EQ(got, want);
			fprintf(stderr, "%s: PSB+ at 0x%llx\n", name, (unsigned long long)start);
		}
	}
out:
#ifdef BTR_HAVE_LIBIPT
	pt_pkt_free_decoder(ipt);
#endif
	btr_ptflow_free(f);
	free(psb);
	free(ev);
}

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *b = NULL;
	long sz;

	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (sz = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0) {
		b = malloc((size_t)sz + 1);
		if (b && fread(b, 1, (size_t)sz, fp) != (size_t)sz) {
			free(b);
			b = NULL;
		}
		*n = (size_t)sz;
	}
	fclose(fp);
	return b;
}

static void test_conformance(struct btr_image *img)
{
	const char *dir = BTR_SHARED_DIR "/conformance/libipt-ptt";
	DIR *dp = opendir(dir);
	struct dirent *de;
	unsigned nfiles = 0;

	if (!dp) {
		printf("conformance streams absent: %s\n", dir);
		return;
	}
	while ((de = readdir(dp))) {
		size_t len = strlen(de->d_name), n;
		char path[4096];
		if (len < 4 || strcmp(de->d_name + len - 3, ".pt"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		uint8_t *b = slurp(path, &n);
		CHECK(b != NULL);
		if (!b)
			continue;
		walk(de->d_name, b, n, img);
		free(b);
		nfiles++;
	}
	closedir(dp);
	printf("conformance: %u streams\n", nfiles);
	CHECK(nfiles > 100);
}

/* BBP, BIP, a packet of each type, BIP, BEP after a PSB: whether the
 * packet decoder still reads the second BIP as one is pt_bbp_keeps() of
 * the packet (BBP: a new block, BEP: the end), and walk() checks the
 * flow parser reads every packet with the same size (a BIP read as a
 * TNT is 1 byte). */
static void test_bbp_rule(struct btr_image *img)
{
	static const uint8_t psbb[PT_SIZE_PSB] = { PT_PSB_PAIRS };
	unsigned kept = 0, ended = 0;

	for (unsigned t = BTR_PT_PAD; t < BTR_PT__COUNT; t++) {
		if (t == BTR_PT_BIP)
			continue;
		for (int sz4 = 0; sz4 < 2; sz4++) {
			uint8_t buf[128];
			struct btr_pt_encoder e;
			struct btr_pt_packet x, bip = { .type = BTR_PT_BIP, .size = sz4 ? PT_SIZE_BIP4 : PT_SIZE_BIP8 };
			struct btr_pt_packet bbp = { .type = BTR_PT_BBP };

			memcpy(buf, psbb, PT_SIZE_PSB);
			btr_pt_enc_init(&e, buf + PT_SIZE_PSB, sizeof(buf) - PT_SIZE_PSB);
			CHECK(btr_pt_enc_packet(&e, &(struct btr_pt_packet){ .type = BTR_PT_PSBEND }) > 0);
			bbp.u.bbp.sz = (uint8_t)sz4;
			bbp.u.bbp.type = 2;
			CHECK(btr_pt_enc_packet(&e, &bbp) > 0);
			bip.u.bip.id = 0;                     /* 0x04: TNT "0" outside */
			bip.u.bip.value = 0x0c0c0c0c0d0d0d0dull;   /* TNT and TIP bytes */
			CHECK(btr_pt_enc_packet(&e, &bip) > 0);
			memset(&x, 0, sizeof(x));
			x.type = (uint8_t)t;
			if (t == BTR_PT_TNT)
				x.size = 1, x.u.tnt.count = 1, x.u.tnt.bits = 1;   /* 0x06: no BIP byte */
			if (t == BTR_PT_PTW)
				x.u.ptw.bytes = 4;
			if (t == BTR_PT_BBP)
				x.u.bbp.sz = (uint8_t)sz4, x.u.bbp.type = 3;
			size_t xoff = (size_t)(e.pos - buf);
			CHECK(btr_pt_enc_packet(&e, &x) > 0);
			bip.u.bip.id = 3;                     /* 0x1c: TNT "110" outside */
			CHECK(btr_pt_enc_packet(&e, &bip) > 0);
			CHECK(btr_pt_enc_packet(&e, &(struct btr_pt_packet){ .type = BTR_PT_BEP }) > 0);
			size_t n = (size_t)(e.pos - buf);

			/* the packet decoder: is the second BIP a BIP? */
			struct btr_pt_pkt_decoder d;
			struct btr_pt_packet pkt;
			int keeps = -1;
			CHECK_EQ(btr_pt_pkt_init(&d, buf, n, 0), 0);
			CHECK_EQ(btr_pt_pkt_sync_forward(&d), 0);
			while (btr_pt_pkt_offset(&d) < n) {
				uint64_t off = btr_pt_pkt_offset(&d);
				if (btr_pt_pkt_next(&d, &pkt) <= 0)
					break;
				if (off == xoff) {
					CHECK_EQ(pkt.type, t);
					off = btr_pt_pkt_offset(&d);
					if (btr_pt_pkt_next(&d, &pkt) <= 0)
						break;
					keeps = pkt.type == BTR_PT_BIP;
					break;
				}
			}
			int want = t == BTR_PT_BBP ? 1 : t == BTR_PT_BEP ? 0 : pt_bbp_keeps(buf + xoff);
			if (keeps != want)
				fprintf(stderr, "BBP block and %s: the packet decoder %s the block, pt_bbp_keeps %d\n",
					btr_pt_type_name(t), keeps < 0 ? "fails in" : keeps ? "keeps" : "ends", want);
			CHECK_EQ(keeps, want);
			kept += keeps == 1;
			ended += keeps == 0;
			walk("bbp-rule", buf, n, img);
		}
	}
	printf("BBP blocks: %u packet types keep the block, %u end it\n", kept / 2, ended / 2);
	/* PAD MTC CYC TSC TMA CBR MNT EXSTOP PWRE PWRX TRIG FUP, BBP */
	CHECK_EQ(kept, 2 * 13);
}

/* One random packet of those that may stand in PSB+, encoded at @e. */
static void psb_plus_packet(struct btr_pt_encoder *e)
{
	static const uint8_t types[] = { BTR_PT_PAD, BTR_PT_PIP, BTR_PT_CBR, BTR_PT_TMA, BTR_PT_VMCS,
					 BTR_PT_TSC, BTR_PT_MTC, BTR_PT_MODE_EXEC, BTR_PT_MODE_TSX,
					 BTR_PT_FUP, BTR_PT_CYC };
	struct btr_pt_packet pkt;
	uint64_t x = rnd();

	memset(&pkt, 0, sizeof(pkt));
	pkt.type = types[x % sizeof(types)];
	x = rnd();
	switch (pkt.type) {
	case BTR_PT_PIP: pkt.u.pip.cr3 = (x & 0xffffffffffull) << 5; pkt.u.pip.nr = x >> 63; break;
	case BTR_PT_CBR: pkt.u.cbr.ratio = (uint8_t)x; break;
	case BTR_PT_TMA: pkt.u.tma.ctc = (uint16_t)x; pkt.u.tma.fc = (x >> 16) & 0x1ff; break;
	case BTR_PT_VMCS: pkt.u.vmcs.base = (x & 0xffffffffffull) << 12; break;
	case BTR_PT_TSC: pkt.u.tsc.tsc = x & ((1ull << 56) - 1); break;
	case BTR_PT_MTC: pkt.u.mtc.ctc = (uint8_t)x; break;
	case BTR_PT_MODE_EXEC: pkt.u.mode_exec.csl = x & 1; pkt.u.mode_exec.iflag = (x >> 1) & 1; break;
	case BTR_PT_MODE_TSX: pkt.u.mode_tsx.intx = x & 1; break;
	case BTR_PT_FUP:
		pkt.u.ip.ipc = (uint8_t)((const uint8_t[]){ 0, 1, 2, 3, 4, 6 })[x % 6];
		pkt.u.ip.ip = rnd();
		break;
	case BTR_PT_CYC: pkt.u.cyc.value = rnd() >> (3 + x % 61); break;   /* at most 61 bits */
	}
	if (e->end - e->pos >= BTR_PT_MAX_PACKET)
		CHECK(btr_pt_enc_packet(e, &pkt) > 0);
}

/* Random bytes: a PSB every few hundred bytes (so both parsers resync
 * often), a quarter of the other bytes PT_OPC_EXT (so every extended
 * opcode occurs), and after most PSBs a random PSB+ written by the
 * encoder (every packet PSB+ may hold, ended by PSBEND or OVF), one byte
 * of it sometimes damaged. */
static void test_random(struct btr_image *img)
{
	static const uint8_t psbb[PT_SIZE_PSB] = { PT_PSB_PAIRS };
	size_t n = 16u << 20;
	uint8_t *b = malloc(n);
	struct btr_pt_encoder e;

	CHECK(b != NULL);
	if (!b)
		return;
	for (size_t i = 0; i < n;) {
		uint64_t x = rnd();
		if (x % 300 == 0 && i + PT_SIZE_PSB <= n) {
			memcpy(b + i, psbb, PT_SIZE_PSB);
			i += PT_SIZE_PSB;
			if ((x >> 16) % 4 && n - i > 256) {
				struct btr_pt_packet end = { .type = (x >> 18) % 8 ? BTR_PT_PSBEND : BTR_PT_OVF };
				btr_pt_enc_init(&e, b + i, 256);
				for (unsigned k = (x >> 24) % 12; k; k--)
					psb_plus_packet(&e);
				CHECK(btr_pt_enc_packet(&e, &end) > 0);
				size_t len = (size_t)(e.pos - e.begin);
				if ((x >> 21) % 4 == 0)
					b[i + (x >> 32) % len] = (uint8_t)(x >> 40);
				i += len;
			}
			continue;
		}
		b[i++] = (x >> 8) % 4 == 0 ? PT_OPC_EXT : (uint8_t)(x >> 24);
	}
	walk("random", b, n, img);
	free(b);
}

int main(void)
{
	struct btr_image *img;

	CHECK(!memcmp(BTR_PT_PSB_PATTERN, (const uint8_t[]){ PT_PSB_PAIRS }, BTR_PT_PSB_SIZE));
	CHECK_EQ(btr_image_new(&img), 0);
	test_conformance(img);
	test_random(img);
	test_bbp_rule(img);
	printf("%llu streams, %llu packets, %llu bad (%llu of them taken by the lenient flow parser), "
	       "%llu BIPs (the flow parser agrees), %llu PSB+ lengths (%llu PSB+ with a bad packet not compared)\n",
	       (unsigned long long)T.streams, (unsigned long long)T.packets, (unsigned long long)T.bad,
	       (unsigned long long)T.lenient, (unsigned long long)T.bip, (unsigned long long)T.psbs,
	       (unsigned long long)T.psb_malformed);
	CHECK(T.packets > 100000);
	CHECK(T.psbs > 1000);
#ifdef BTR_HAVE_LIBIPT
	printf("libipt: %llu packets of the same size, %llu it does not read\n", (unsigned long long)T.ipt_same,
	       (unsigned long long)T.ipt_other);
	CHECK(T.ipt_same > T.packets / 2);
#else
	check_oracle_missing("libipt (libipt-dev): packet sizes against libipt's packet decoder");
#endif
	btr_image_free(img);
	return check_done();
}
