/* test_pt_libipt.c - differential test of the btr PT packet decoder
 * against Intel's libipt packet decoder (pt_pkt_next), the oracle.
 *
 * Both decoders run over the same bytes and must produce the same
 * sequence of packets (type, size, offset, payload) and of errors
 * (offset), resynchronizing at the next PSB after each error:
 *  1. long random streams from our encoder (all packet types libipt 2.0
 *     knows: everything but BBP/BIP/BEP/CFE/EVD/TRIG);
 *  2. the same streams with random byte damage;
 *  3. the real Skylake recording quipper/perf.data.intel_pt-4.14 (its
 *     PERF_RECORD_AUXTRACE payloads), also fed to btr in random pieces.
 */
#include "check.h"
#include "btr/pt.h"
#include "pt/pt_opcodes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef BTR_HAVE_LIBIPT
int main(void)
{
	check_oracle_missing("libipt (built without libipt-dev): every comparison of this test");
	if (check_done())
		return 1;
	check_skip("libipt not available (install libipt-dev)");
	return 0;
}
#else
#include <intel-pt.h>

struct ev {
	int err;                   /* 1: decode error at @pkt.offset */
	struct btr_pt_packet pkt;  /* offset always set */
};

struct evlist {
	struct ev *v;
	size_t n, cap;
};

static void push(struct evlist *l, const struct ev *e)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = *e;
}

/* libipt packet -> btr packet (the fields libipt has). */
static int from_ipt(const struct pt_packet *in, struct btr_pt_packet *o)
{
	memset(o, 0, sizeof(*o));
	o->size = in->size;
	switch (in->type) {
	case ppt_pad: o->type = BTR_PT_PAD; break;
	case ppt_psb: o->type = BTR_PT_PSB; break;
	case ppt_psbend: o->type = BTR_PT_PSBEND; break;
	case ppt_stop: o->type = BTR_PT_TRACESTOP; break;
	case ppt_ovf: o->type = BTR_PT_OVF; break;
	case ppt_fup: o->type = BTR_PT_FUP; goto ip;
	case ppt_tip: o->type = BTR_PT_TIP; goto ip;
	case ppt_tip_pge: o->type = BTR_PT_TIP_PGE; goto ip;
	case ppt_tip_pgd: o->type = BTR_PT_TIP_PGD;
	ip:
		o->u.ip.ipc = (uint8_t)in->payload.ip.ipc;
		o->u.ip.raw = in->payload.ip.ip;
		break;
	case ppt_tnt_8:
	case ppt_tnt_64:
		o->type = BTR_PT_TNT;
		o->u.tnt.count = in->payload.tnt.bit_size;
		o->u.tnt.bits = in->payload.tnt.payload &
				(in->payload.tnt.bit_size >= 64 ? ~0ull : (1ull << in->payload.tnt.bit_size) - 1);
		break;
	case ppt_mode:
		if (in->payload.mode.leaf == pt_mol_exec) {
			o->type = BTR_PT_MODE_EXEC;
			o->u.mode_exec.csl = in->payload.mode.bits.exec.csl;
			o->u.mode_exec.csd = in->payload.mode.bits.exec.csd;
		} else {
			o->type = BTR_PT_MODE_TSX;
			o->u.mode_tsx.intx = in->payload.mode.bits.tsx.intx;
			o->u.mode_tsx.abrt = in->payload.mode.bits.tsx.abrt;
		}
		break;
	case ppt_pip:
		o->type = BTR_PT_PIP;
		o->u.pip.cr3 = in->payload.pip.cr3;
		o->u.pip.nr = in->payload.pip.nr;
		break;
	case ppt_vmcs: o->type = BTR_PT_VMCS; o->u.vmcs.base = in->payload.vmcs.base; break;
	case ppt_cbr: o->type = BTR_PT_CBR; o->u.cbr.ratio = in->payload.cbr.ratio; break;
	case ppt_tsc: o->type = BTR_PT_TSC; o->u.tsc.tsc = in->payload.tsc.tsc; break;
	case ppt_tma:
		o->type = BTR_PT_TMA;
		o->u.tma.ctc = in->payload.tma.ctc;
		o->u.tma.fc = in->payload.tma.fc;
		break;
	case ppt_mtc: o->type = BTR_PT_MTC; o->u.mtc.ctc = in->payload.mtc.ctc; break;
	case ppt_cyc: o->type = BTR_PT_CYC; o->u.cyc.value = in->payload.cyc.value; break;
	case ppt_mnt: o->type = BTR_PT_MNT; o->u.mnt.payload = in->payload.mnt.payload; break;
	case ppt_exstop: o->type = BTR_PT_EXSTOP; o->u.exstop.ip = in->payload.exstop.ip; break;
	case ppt_mwait:
		o->type = BTR_PT_MWAIT;
		o->u.mwait.hints = in->payload.mwait.hints;
		o->u.mwait.ext = in->payload.mwait.ext;
		break;
	case ppt_pwre:
		o->type = BTR_PT_PWRE;
		o->u.pwre.state = in->payload.pwre.state;
		o->u.pwre.substate = in->payload.pwre.sub_state;
		o->u.pwre.hw = in->payload.pwre.hw;
		break;
	case ppt_pwrx:
		o->type = BTR_PT_PWRX;
		o->u.pwrx.last = in->payload.pwrx.last;
		o->u.pwrx.deepest = in->payload.pwrx.deepest;
		o->u.pwrx.wake = (uint8_t)((in->payload.pwrx.interrupt ? BTR_PT_PWRX_INT : 0) |
					   (in->payload.pwrx.store ? BTR_PT_PWRX_STORE : 0) |
					   (in->payload.pwrx.autonomous ? BTR_PT_PWRX_HW : 0));
		break;
	case ppt_ptw:
		o->type = BTR_PT_PTW;
		o->u.ptw.payload = in->payload.ptw.payload;
		o->u.ptw.bytes = in->payload.ptw.plc == 0 ? 4 : in->payload.ptw.plc == 1 ? 8 : 0;
		o->u.ptw.ip = in->payload.ptw.ip;
		break;
	default:
		return -1;
	}
	return 0;
}

/* Our packet reduced to what libipt reports. */
static void reduce(struct btr_pt_packet *p)
{
	struct btr_pt_packet o = *p;
	memset(p, 0, sizeof(*p));
	p->type = o.type;
	p->size = o.size;
	p->offset = o.offset;
	switch (o.type) {
	case BTR_PT_TIP: case BTR_PT_TIP_PGE: case BTR_PT_TIP_PGD: case BTR_PT_FUP:
		p->u.ip.ipc = o.u.ip.ipc;
		p->u.ip.raw = o.u.ip.raw;
		break;
	case BTR_PT_MODE_EXEC:
		p->u.mode_exec.csl = o.u.mode_exec.csl;
		p->u.mode_exec.csd = o.u.mode_exec.csd;
		break;
	case BTR_PT_PWRX:
		p->u = o.u;
		p->u.pwrx.wake &= BTR_PT_PWRX_INT | BTR_PT_PWRX_STORE | BTR_PT_PWRX_HW; /* libipt drops bit 1 */
		break;
	default:
		p->u = o.u;
		break;
	}
}

static int same(const struct btr_pt_packet *a, const struct btr_pt_packet *b)
{
	if (a->type != b->type || a->size != b->size || a->offset != b->offset)
		return 0;
	switch (a->type) {
	case BTR_PT_TNT: return a->u.tnt.bits == b->u.tnt.bits && a->u.tnt.count == b->u.tnt.count;
	case BTR_PT_TIP: case BTR_PT_TIP_PGE: case BTR_PT_TIP_PGD: case BTR_PT_FUP:
		return a->u.ip.ipc == b->u.ip.ipc && a->u.ip.raw == b->u.ip.raw;
	case BTR_PT_PIP: return a->u.pip.cr3 == b->u.pip.cr3 && a->u.pip.nr == b->u.pip.nr;
	case BTR_PT_MODE_EXEC:
		return a->u.mode_exec.csl == b->u.mode_exec.csl && a->u.mode_exec.csd == b->u.mode_exec.csd;
	case BTR_PT_MODE_TSX:
		return a->u.mode_tsx.intx == b->u.mode_tsx.intx && a->u.mode_tsx.abrt == b->u.mode_tsx.abrt;
	case BTR_PT_CBR: return a->u.cbr.ratio == b->u.cbr.ratio;
	case BTR_PT_TSC: return a->u.tsc.tsc == b->u.tsc.tsc;
	case BTR_PT_MTC: return a->u.mtc.ctc == b->u.mtc.ctc;
	case BTR_PT_TMA: return a->u.tma.ctc == b->u.tma.ctc && a->u.tma.fc == b->u.tma.fc;
	case BTR_PT_CYC: return a->u.cyc.value == b->u.cyc.value;
	case BTR_PT_VMCS: return a->u.vmcs.base == b->u.vmcs.base;
	case BTR_PT_MNT: return a->u.mnt.payload == b->u.mnt.payload;
	case BTR_PT_PTW:
		return a->u.ptw.payload == b->u.ptw.payload && a->u.ptw.bytes == b->u.ptw.bytes &&
		       a->u.ptw.ip == b->u.ptw.ip;
	case BTR_PT_EXSTOP: return a->u.exstop.ip == b->u.exstop.ip;
	case BTR_PT_MWAIT: return a->u.mwait.hints == b->u.mwait.hints && a->u.mwait.ext == b->u.mwait.ext;
	case BTR_PT_PWRE:
		return a->u.pwre.hw == b->u.pwre.hw && a->u.pwre.state == b->u.pwre.state &&
		       a->u.pwre.substate == b->u.pwre.substate;
	case BTR_PT_PWRX:
		return a->u.pwrx.last == b->u.pwrx.last && a->u.pwrx.deepest == b->u.pwrx.deepest &&
		       a->u.pwrx.wake == b->u.pwrx.wake;
	default: return 1;
	}
}

/* Runs libipt over @buf.  @sync: start at the first PSB (else at 0). */
static void run_ipt(const uint8_t *buf, size_t len, int sync, struct evlist *out)
{
	struct pt_config cfg;
	struct pt_packet_decoder *dec;
	int r;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	dec = pt_pkt_alloc_decoder(&cfg);
	if (!dec)
		abort();
	r = sync ? pt_pkt_sync_forward(dec) : pt_pkt_sync_set(dec, 0);
	while (r >= 0) {
		struct pt_packet p;
		struct ev e;
		uint64_t off = 0;

		pt_pkt_get_offset(dec, &off);
		r = pt_pkt_next(dec, &p, sizeof(p));
		if (r == -pte_eos)
			break;
		memset(&e, 0, sizeof(e));
		if (r < 0 || from_ipt(&p, &e.pkt) < 0) {
			e.err = 1;
			e.pkt.offset = off;
			push(out, &e);
			/* libipt 2.0.5 may sync to a PSB that starts before the
			 * failing position (inside a run of 02 82 pairs that it
			 * already decoded); later libipt versions skip those ("If
			 * @start points inside a PSB ... ignore it" in pt_sync.c),
			 * and so does btr: emulate the fix. */
			do {
				uint64_t s = 0;
				r = pt_pkt_sync_forward(dec);
				if (r < 0 || pt_pkt_get_offset(dec, &s) < 0 || s >= off)
					break;
			} while (1);
			continue;
		}
		e.pkt.offset = off;
		push(out, &e);
	}
	pt_pkt_free_decoder(dec);
}

/* Runs btr over @buf fed in pieces of random size (1..@maxpiece bytes;
 * 0: all at once). */
static void run_btr(const uint8_t *buf, size_t len, int sync, size_t maxpiece, struct evlist *out)
{
	struct btr_pt_pkt_decoder d;
	size_t pos, end;
	unsigned seed = (unsigned)len;
	int r = 0;

	end = maxpiece ? (size_t)(rand_r(&seed) % maxpiece) + 1 : len;
	if (end > len)
		end = len;
	btr_pt_pkt_init(&d, buf, end, 0);
	pos = end;
	if (sync)
		r = btr_pt_pkt_sync_forward(&d);
	for (;;) {
		struct ev e;

		if (r == 0) {
			memset(&e, 0, sizeof(e));
			r = btr_pt_pkt_next(&d, &e.pkt);
			if (r > 0) {
				reduce(&e.pkt);
				push(out, &e);
				r = 0;
				continue;
			}
			if (r == -BTR_ERR_BAD_PACKET) {
				memset(&e, 0, sizeof(e));
				e.err = 1;
				e.pkt.offset = btr_pt_pkt_offset(&d);
				push(out, &e);
				r = btr_pt_pkt_sync_forward(&d);
				continue;
			}
		}
		/* EOS or AGAIN (from next or sync): feed more, or stop */
		if (pos >= len)
			break;
		end = pos + (maxpiece ? (size_t)(rand_r(&seed) % maxpiece) + 1 : len);
		if (end > len)
			end = len;
		btr_pt_pkt_feed(&d, buf + pos, end - pos);
		pos = end;
		r = 0;
	}
}

static const char *ev_str(const struct ev *e, char *s, size_t n)
{
	char pl[128];
	if (e->err) {
		snprintf(s, n, "%08" PRIx64 " error", e->pkt.offset);
		return s;
	}
	btr_pt_pkt_format(&e->pkt, pl, sizeof(pl));
	snprintf(s, n, "%08" PRIx64 " %s/%u %s", e->pkt.offset, btr_pt_pkt_name(&e->pkt), e->pkt.size, pl);
	return s;
}

/* The buffer being compared, for a hex dump on mismatch. */
static const uint8_t *cur_buf;
static size_t cur_len;

/* Compares both event lists; returns the number of packets compared. */
static size_t compare(const char *what, const struct evlist *a, const struct evlist *b)
{
	size_t n = a->n < b->n ? a->n : b->n;
	char s1[200], s2[200];

	for (size_t i = 0; i < n; i++) {
		const struct ev *x = &a->v[i], *y = &b->v[i];
		int ok = x->err == y->err && (x->err ? x->pkt.offset == y->pkt.offset : same(&x->pkt, &y->pkt));
		if (!ok) {
			for (size_t k = i > 3 ? i - 3 : 0; k < i; k++)
				fprintf(stderr, "  before: %s\n", ev_str(&a->v[k], s1, sizeof(s1)));
			fprintf(stderr, "%s: event %zu differs:\n  libipt %s\n  btr    %s\n", what, i,
				ev_str(x, s1, sizeof(s1)), ev_str(y, s2, sizeof(s2)));
			if (cur_buf) {
				uint64_t o = x->pkt.offset < y->pkt.offset ? x->pkt.offset : y->pkt.offset;
				o = o > 48 ? o - 48 : 0;
				fprintf(stderr, "  bytes from %08" PRIx64 ":", o);
				for (uint64_t k = o; k < o + 96 && k < cur_len; k++)
					fprintf(stderr, "%s%02x", (k - o) % 16 ? " " : "\n    ", cur_buf[k]);
				fprintf(stderr, "\n");
			}
			CHECK(ok);
			return i;
		}
	}
	if (a->n != b->n) {
		fprintf(stderr, "%s: libipt %zu events, btr %zu\n", what, a->n, b->n);
		CHECK_EQ(a->n, b->n);
	}
	CHECK(1);
	return n;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A random packet libipt 2.0 knows. */
static void random_packet(struct btr_pt_packet *p, const struct btr_pt_encoder *e)
{
	static const uint8_t ipcs[] = { 0, 1, 2, 3, 4, 6 };
	static const uint8_t types[] = {
		BTR_PT_PAD, BTR_PT_PSB, BTR_PT_PSBEND, BTR_PT_TNT, BTR_PT_TNT, BTR_PT_TNT, BTR_PT_TIP,
		BTR_PT_TIP, BTR_PT_TIP_PGE, BTR_PT_TIP_PGD, BTR_PT_FUP, BTR_PT_PIP, BTR_PT_MODE_EXEC,
		BTR_PT_MODE_TSX, BTR_PT_TRACESTOP, BTR_PT_CBR, BTR_PT_TSC, BTR_PT_MTC, BTR_PT_MTC,
		BTR_PT_TMA, BTR_PT_CYC, BTR_PT_CYC, BTR_PT_VMCS, BTR_PT_OVF, BTR_PT_MNT, BTR_PT_PTW,
		BTR_PT_EXSTOP, BTR_PT_MWAIT, BTR_PT_PWRE, BTR_PT_PWRX,
	};
	memset(p, 0, sizeof(*p));
	p->type = types[rnd() % sizeof(types)];
	switch (p->type) {
	case BTR_PT_TNT:
		p->size = rnd() & 1 ? 1 : 8;
		p->u.tnt.count = (uint8_t)(p->size == 1 ? 1 + rnd() % 6 : 1 + rnd() % 47);
		p->u.tnt.bits = rnd();
		break;
	case BTR_PT_TIP: case BTR_PT_TIP_PGE: case BTR_PT_TIP_PGD: case BTR_PT_FUP:
		p->u.ip.ipc = ipcs[rnd() % 6];
		p->u.ip.ip = rnd() & 1 ? e->last_ip ^ (rnd() & 0xffffff) : rnd();
		break;
	case BTR_PT_PIP: p->u.pip.cr3 = rnd() & 0x0000ffffffffffe0ull; p->u.pip.nr = rnd() & 1; break;
	case BTR_PT_MODE_EXEC: p->u.mode_exec.csl = rnd() & 1; p->u.mode_exec.csd = rnd() & 1; break;
	case BTR_PT_MODE_TSX: p->u.mode_tsx.intx = rnd() & 1; p->u.mode_tsx.abrt = rnd() & 1; break;
	case BTR_PT_CBR: p->u.cbr.ratio = (uint8_t)rnd(); break;
	case BTR_PT_TSC: p->u.tsc.tsc = rnd() >> 8; break;
	case BTR_PT_MTC: p->u.mtc.ctc = (uint8_t)rnd(); break;
	case BTR_PT_TMA: p->u.tma.ctc = (uint16_t)rnd(); p->u.tma.fc = rnd() & 0x1ff; break;
	case BTR_PT_CYC: p->u.cyc.value = rnd() >> (3 + rnd() % 61); break;
	case BTR_PT_VMCS: p->u.vmcs.base = rnd() & 0x000ffffffffff000ull; break;
	case BTR_PT_MNT: p->u.mnt.payload = rnd(); break;
	case BTR_PT_PTW:
		p->u.ptw.bytes = rnd() & 1 ? 8 : 4;
		p->u.ptw.payload = rnd();
		p->u.ptw.ip = rnd() & 1;
		break;
	case BTR_PT_EXSTOP: p->u.exstop.ip = rnd() & 1; break;
	case BTR_PT_MWAIT: p->u.mwait.hints = (uint32_t)rnd(); p->u.mwait.ext = (uint32_t)rnd(); break;
	case BTR_PT_PWRE: p->u.pwre.hw = rnd() & 1; p->u.pwre.state = rnd() & 15; p->u.pwre.substate = rnd() & 15; break;
	case BTR_PT_PWRX: p->u.pwrx.last = rnd() & 15; p->u.pwrx.deepest = rnd() & 15; p->u.pwrx.wake = rnd() & 0xd; break;
	default: break;
	}
}

static void test_random(void)
{
	const size_t len = 8u << 20;
	uint8_t *buf = malloc(len + 64);
	struct btr_pt_encoder e;
	struct evlist a = { 0 }, b = { 0 };
	size_t npk = 0, n;

	btr_pt_enc_init(&e, buf, len);
	for (;;) {
		struct btr_pt_packet p;
		random_packet(&p, &e);
		if (btr_pt_enc_packet(&e, &p) < 0)
			break;
		npk++;
	}
	n = btr_pt_enc_size(&e);
	printf("random stream: %zu bytes, %zu packets\n", n, npk);
	run_ipt(buf, n, 0, &a);
	run_btr(buf, n, 0, 0, &b);
	CHECK_EQ(a.n, npk);
	CHECK_EQ(compare("random stream", &a, &b), npk);
	for (size_t i = 0; i < b.n; i++)
		if (b.v[i].err) {
			CHECK(!b.v[i].err);
			break;
		}
	/* in pieces of 1..300 bytes */
	b.n = 0;
	run_btr(buf, n, 0, 300, &b);
	CHECK_EQ(compare("random stream, pieces", &a, &b), npk);

	/* Damage: ~1 byte in 500 overwritten by a random value.  Both must
	 * fail at the same offsets and resync at the same PSBs. */
	for (size_t i = 0; i < n; i += 1 + rnd() % 1000)
		buf[i] = (uint8_t)rnd();
	/* Damage must not create packets that libipt 2.0 does not know
	 * (BBP, BEP, CFE, EVD; the SDM added them later): make those
	 * extended opcodes invalid for both decoders, at any alignment. */
	for (size_t i = 0; i + 1 < n; i++)
		if (buf[i] == PT_OPC_EXT && (buf[i + 1] == PT_EXT_BBP || buf[i + 1] == PT_EXT_BEP ||
					     buf[i + 1] == PT_EXT_BEP_IP || buf[i + 1] == PT_EXT_CFE ||
					     buf[i + 1] == PT_EXT_EVD))
			buf[i + 1] = 0x04;
	/* Nor TRIG, which libipt 2.0 reads as a bad opcode. */
	for (size_t i = 0; i < n; i++)
		if (buf[i] == PT_OPC_TRIG)
			buf[i] = 0x05;
	a.n = b.n = 0;
	cur_buf = buf;
	cur_len = n;
	run_ipt(buf, n, 1, &a);
	run_btr(buf, n, 1, 0, &b);
	size_t errs = 0;
	for (size_t i = 0; i < a.n; i++)
		errs += a.v[i].err;
	printf("damaged stream: %zu events, %zu errors\n", a.n, errs);
	CHECK(errs > 100);
	compare("damaged stream", &a, &b);
	b.n = 0;
	run_btr(buf, n, 1, 700, &b);
	compare("damaged stream, pieces", &a, &b);
	free(a.v);
	free(b.v);
	free(buf);
}

/* ---- the real recording ---- */

static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static void test_real(void)
{
	const char *path = BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14";
	FILE *f = fopen(path, "rb");
	uint8_t *file;
	long fsize;
	uint64_t doff, dsize, pos, end;
	int naux = 0;
	size_t total = 0, types[BTR_PT__COUNT] = { 0 };

	if (!f)
		check_skip("quipper/perf.data.intel_pt-4.14 absent");
	fseek(f, 0, SEEK_END);
	fsize = ftell(f);
	fseek(f, 0, SEEK_SET);
	file = malloc((size_t)fsize);
	CHECK(fread(file, 1, (size_t)fsize, f) == (size_t)fsize);
	fclose(f);
	CHECK(!memcmp(file, "PERFILE2", 8));
	/* struct perf_file_header: magic, size, attr_size, attrs{offset,size},
	 * data{offset,size} at bytes 40..55 */
	doff = rd64(file + 40);
	dsize = rd64(file + 48);
	CHECK(doff + dsize <= (uint64_t)fsize);
	pos = doff;
	end = doff + dsize;
	while (pos + 8 <= end) {
		uint32_t type = rd32(file + pos);
		uint16_t hsize = rd16(file + pos + 6);
		if (hsize < 8)
			break;
		if (type == 71) {   /* PERF_RECORD_AUXTRACE: size, offset, reference, idx, tid, cpu */
			uint64_t sz = rd64(file + pos + 8);
			uint32_t cpu = rd32(file + pos + 40);
			const uint8_t *pt = file + pos + hsize;
			struct evlist a = { 0 }, b = { 0 };
			char what[64];

			CHECK(pos + hsize + sz <= end);
			if (pos + hsize + sz > end)
				break;
			snprintf(what, sizeof(what), "auxtrace cpu %u (%" PRIu64 " bytes)", cpu, sz);
			run_ipt(pt, sz, 1, &a);
			run_btr(pt, sz, 1, 0, &b);
			size_t n = compare(what, &a, &b);
			printf("%s: %zu packets agree\n", what, n);
			for (size_t i = 0; i < b.n; i++)
				if (!b.v[i].err)
					types[b.v[i].pkt.type]++;
			total += n;
			for (size_t piece = 1; piece <= 4096; piece *= 8) {
				b.n = 0;
				run_btr(pt, sz, 1, piece, &b);
				snprintf(what, sizeof(what), "auxtrace cpu %u, pieces <= %zu", cpu, piece);
				compare(what, &a, &b);
			}
			free(a.v);
			free(b.v);
			naux++;
			pos += hsize + sz;   /* the payload is not counted in hsize */
		} else {
			pos += hsize;
		}
	}
	CHECK_EQ(naux, 2);
	CHECK(total > 10000);
	/* The recording has these packet kinds (README: MTC/TSC/CBR/PIP). */
	CHECK(types[BTR_PT_PSB] > 0 && types[BTR_PT_PSBEND] > 0 && types[BTR_PT_TNT] > 0);
	CHECK(types[BTR_PT_TIP] > 0 && types[BTR_PT_FUP] > 0 && types[BTR_PT_TIP_PGE] > 0);
	CHECK(types[BTR_PT_MTC] > 0 && types[BTR_PT_TSC] > 0 && types[BTR_PT_CBR] > 0 && types[BTR_PT_PIP] > 0);
	for (int t = 1; t < BTR_PT__COUNT; t++)
		if (types[t])
			printf("  %-10s %zu\n", btr_pt_type_name(t), types[t]);
	free(file);
}

int main(void)
{
	test_random();
	test_real();
	return check_done();
}
#endif
