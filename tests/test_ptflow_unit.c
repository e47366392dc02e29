/* test_ptflow_unit: handcrafted PT packet sequences over a small code
 * image, one rule each (TNT, TIP, return compression, deferred TIP,
 * FUP+TIP, OVF and its errata, MODE.Exec 32-bit, TSX abort, PTW, PIP,
 * TraceStop, timing, gaps, callbacks that stop, byte-by-byte feeding).
 * Where libipt gives an instruction sequence it must be the same. */
#include "check.h"
#include "flowdiff.h"
#include "btr/pt.h"
#include "ptgen.h"

#define BTR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct btr_image *img;

/* 64-bit code at 0x1000 */
static const uint8_t code64[] = {
	/* 0x1000 */ 0x48, 0x83, 0xc0, 0x01,       /* add rax, 1 */
	/* 0x1004 */ 0x75, 0xfa,                   /* jne 0x1000 */
	/* 0x1006 */ 0xff, 0xe0,                   /* jmp rax */
	/* 0x1008 */ 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	/* 0x1010 */ 0xe8, 0x0b, 0x00, 0x00, 0x00, /* call 0x1020 */
	/* 0x1015 */ 0x90,                         /* nop */
	/* 0x1016 */ 0xc3,                         /* ret */
	/* 0x1017 */ 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	/* 0x1020 */ 0x90,                         /* nop */
	/* 0x1021 */ 0xc3,                         /* ret */
	/* 0x1022 */ 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	/* 0x1030 */ 0x0f, 0x05,                   /* syscall */
	/* 0x1032 */ 0x90,                         /* nop */
	/* 0x1033 */ 0xc3,                         /* ret */
};
/* 64-bit code at 0x6000: a call whose callee has a conditional branch,
 * so that a TNT bit walks the flow past the call */
static const uint8_t code_psb[] = {
	/* 0x6000 */ 0xe8, 0x0b, 0x00, 0x00, 0x00, /* call 0x6010 */
	/* 0x6005 */ 0x90,                         /* nop */
	/* 0x6006 */ 0xc3,                         /* ret */
	/* 0x6007 */ 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
	/* 0x6010 */ 0x48, 0x83, 0xc0, 0x01,       /* add rax, 1 */
	/* 0x6014 */ 0x75, 0xfa,                   /* jne 0x6010 */
	/* 0x6016 */ 0xc3,                         /* ret */
};
/* 32-bit code at 0x5000: in 64-bit mode 0x40 would be a REX prefix */
static const uint8_t code32[] = {
	/* 0x5000 */ 0x40,                         /* inc eax */
	/* 0x5001 */ 0x75, 0xfd,                   /* jne 0x5000 */
	/* 0x5003 */ 0xc3,                         /* ret */
};

static uint8_t sbuf[4096];
static struct btr_pt_encoder enc;

static void s_begin(void) { btr_pt_enc_init(&enc, sbuf, sizeof(sbuf)); }
static void s_pkt(struct btr_pt_packet p) { CHECK(btr_pt_enc_packet(&enc, &p) > 0); }
static void s_ip(enum btr_pt_type t, uint64_t ip) { CHECK(btr_pt_enc_ip(&enc, t, ip) > 0); }
static void s_ipsup(enum btr_pt_type t)
{
	struct btr_pt_packet p = { .type = (uint8_t)t };
	p.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
	s_pkt(p);
}
static void s_psb(int mode64, uint64_t fup)
{
	s_pkt((struct btr_pt_packet){ .type = BTR_PT_PSB });
	struct btr_pt_packet m = { .type = BTR_PT_MODE_EXEC };
	m.u.mode_exec.csl = (uint8_t)mode64;
	m.u.mode_exec.csd = (uint8_t)!mode64;
	s_pkt(m);
	if (fup)
		s_ip(BTR_PT_FUP, fup);
	s_pkt((struct btr_pt_packet){ .type = BTR_PT_PSBEND });
}
static void s_tnt(const char *bits)
{
	struct btr_pt_packet p = { .type = BTR_PT_TNT, .size = 1 };
	for (const char *c = bits; *c; c++) {
		p.u.tnt.bits = (p.u.tnt.bits << 1) | (*c == '1');
		p.u.tnt.count++;
	}
	s_pkt(p);
}
static void s_simple(enum btr_pt_type t) { s_pkt((struct btr_pt_packet){ .type = (uint8_t)t }); }

struct rec {
	struct ipvec ips;
	struct btr_branch br[64];
	unsigned nbr;
	struct btr_flow_event ev[64];
	unsigned nev;
	int stop_after;   /* stop at this branch (1-based), 0: never */
};

static int r_insn(void *ctx, uint64_t ip, const struct btr_insn *in)
{
	(void)in;
	ipvec_push(&((struct rec *)ctx)->ips, ip);
	return 0;
}
static int r_branch(void *ctx, const struct btr_branch *b)
{
	struct rec *r = ctx;
	if (r->nbr < 64)
		r->br[r->nbr] = *b;
	r->nbr++;
	return r->stop_after && (int)r->nbr == r->stop_after;
}
static int r_event(void *ctx, const struct btr_flow_event *e)
{
	struct rec *r = ctx;
	if (r->nev < 64)
		r->ev[r->nev++] = *e;
	return 0;
}

struct bvec_ { struct btr_branch *v; size_t n, cap; };
static int bv_push(void *ctx, const struct btr_branch *b)
{
	struct bvec_ *v = ctx;
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 4096;
		v->v = realloc(v->v, v->cap * sizeof(*v->v));
	}
	v->v[v->n++] = *b;
	return 0;
}

static int bv_push_n(void *ctx, const struct btr_branch *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		bv_push(ctx, &b[i]);
	return 0;
}

static int decode(struct rec *r, const struct btr_ptflow_config *cfg, size_t piece)
{
	memset(r, 0, sizeof(*r) - sizeof(r->stop_after));
	struct btr_ptflow *f;
	int e = btr_ptflow_new(img, cfg, &f);
	CHECK_EQ(e, 0);
	if (e)
		return e;
	struct btr_ptflow_callbacks cb = { .branch = r_branch, .insn = r_insn, .event = r_event, .ctx = r };
	size_t size = btr_pt_enc_size(&enc);
	int ret = 0;
	if (!piece)
		piece = size;
	for (size_t i = 0; i < size && !ret; i += piece)
		ret = btr_ptflow_decode(f, sbuf + i, size - i < piece ? size - i : piece, &cb);
	btr_ptflow_free(f);
	return ret;
}

/* decode() without the instruction callback: the fast walk */
static int decode_fast(struct rec *r, const struct btr_ptflow_config *cfg)
{
	memset(r, 0, sizeof(*r) - sizeof(r->stop_after));
	struct btr_ptflow *f;
	int e = btr_ptflow_new(img, cfg, &f);
	CHECK_EQ(e, 0);
	if (e)
		return e;
	struct btr_ptflow_callbacks cb = { .branch = r_branch, .event = r_event, .ctx = r };
	int ret = btr_ptflow_decode(f, sbuf, btr_pt_enc_size(&enc), &cb);
	btr_ptflow_free(f);
	return ret;
}

/* The reason of the @k-th (1-based) gap of @r, 0 if none. */
static int gap_reason(const struct rec *r, int k)
{
	for (unsigned i = 0; i < r->nev; i++)
		if (r->ev[i].type == BTR_FLOW_GAP && !--k)
			return r->ev[i].reason;
	return 0;
}

static int has_event(const struct rec *r, enum btr_flow_event_type t)
{
	for (unsigned i = 0; i < r->nev; i++)
		if (r->ev[i].type == t)
			return (int)i + 1;
	return 0;
}

static void expect_ips(const char *name, const struct rec *r, const uint64_t *want, size_t n)
{
	long d = ipvec_diff(&r->ips, want, n);
	if (d >= 0)
		ipvec_report(name, &r->ips, want, n, d);
	CHECK_EQ(d, -1);
#ifdef BTR_HAVE_LIBIPT
	struct ipvec l = { 0 };
	flow_ipt(img, sbuf, btr_pt_enc_size(&enc), &l);
	long d2 = ipvec_diff(&r->ips, l.v, l.n);
	if (d2 >= 0)
		ipvec_report(name, &r->ips, l.v, l.n, d2);
	CHECK_EQ(d2, -1);
	ipvec_free(&l);
#else
	check_oracle_missing("libipt (built without libipt-dev): the unit streams' flow vs libipt's");
#endif
}

int main(void)
{
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_bytes(img, code64, sizeof(code64), 0x1000), 0);
	CHECK_EQ(btr_image_add_bytes(img, code32, sizeof(code32), 0x5000), 0);
	CHECK_EQ(btr_image_add_bytes(img, code_psb, sizeof(code_psb), 0x6000), 0);
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg) };
	struct rec r;

	/* 1. TNT, indirect jump, call, compressed and uncompressed RET, syscall */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("110");
	s_ip(BTR_PT_TIP, 0x1010);
	s_tnt("1");
	s_ip(BTR_PT_TIP, 0x1030);
	s_ipsup(BTR_PT_TIP_PGD);
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1000, 0x1004, 0x1000, 0x1004, 0x1006,
						 0x1010, 0x1020, 0x1021, 0x1015, 0x1016, 0x1030 };
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		expect_ips("basic", &r, want, BTR_ARRAY_SIZE(want));
		CHECK_EQ(r.nbr, 8);
		CHECK_EQ(r.br[0].kind, BTR_KIND_JCC);
		CHECK_EQ(r.br[0].from, 0x1004);
		CHECK_EQ(r.br[0].to, 0x1000);
		CHECK(r.br[0].flags & BTR_BF_TAKEN);
		CHECK_EQ(r.br[0].insns, 2);
		CHECK_EQ(r.br[2].to, 0x1006);           /* not taken: fall-through */
		CHECK(!(r.br[2].flags & BTR_BF_TAKEN));
		CHECK_EQ(r.br[3].kind, BTR_KIND_JMP_IND);
		CHECK_EQ(r.br[3].to, 0x1010);
		CHECK_EQ(r.br[4].kind, BTR_KIND_CALL);
		CHECK_EQ(r.br[5].kind, BTR_KIND_RET);   /* compressed */
		CHECK_EQ(r.br[5].to, 0x1015);
		CHECK_EQ(r.br[6].to, 0x1030);           /* uncompressed, empty stack */
		CHECK_EQ(r.br[7].kind, BTR_KIND_SYSCALL);
		CHECK_EQ(r.ev[0].type, BTR_FLOW_ENABLE);
		CHECK_EQ(r.ev[0].ip, 0x1000);
		CHECK(has_event(&r, BTR_FLOW_DISABLE));
		/* the same, fed one byte at a time */
		struct rec r1;
		CHECK_EQ(decode(&r1, &cfg, 1), 0);
		CHECK_EQ(ipvec_diff(&r1.ips, want, BTR_ARRAY_SIZE(want)), -1);
		CHECK_EQ(r1.nbr, 8);
		ipvec_free(&r1.ips);
		/* --no-retcomp: the RET at 0x1021 waits for a TIP (the bit is
		 * then read as a deferred TIP's) and goes to 0x1030 */
		cfg.no_retcomp = 1;
		CHECK_EQ(decode(&r1, &cfg, 0), 0);
		static const uint64_t want_nr[] = { 0x1000, 0x1004, 0x1000, 0x1004, 0x1000, 0x1004, 0x1006,
						    0x1010, 0x1020, 0x1021, 0x1030 };
		CHECK_EQ(ipvec_diff(&r1.ips, want_nr, BTR_ARRAY_SIZE(want_nr)), -1);
		cfg.no_retcomp = 0;
		ipvec_free(&r1.ips);
		/* a callback that stops */
		r1.stop_after = 2;
		CHECK_EQ(decode(&r1, &cfg, 0), 1);
		CHECK_EQ(r1.nbr, 2);
		r1.stop_after = 0;
		ipvec_free(&r1.ips);
		/* parallel decoding: same branches */
		struct rec rp;
		memset(&rp, 0, sizeof(rp));
		struct btr_ptflow_callbacks cb = { .branch = r_branch, .event = r_event, .ctx = &rp };
		struct btr_ptflow_stats st;
		CHECK_EQ(btr_ptflow_decode_parallel(img, &cfg, sbuf, btr_pt_enc_size(&enc), 2, 0, &cb, &st), 0);
		CHECK_EQ(rp.nbr, 8);
		CHECK_EQ(st.insns, BTR_ARRAY_SIZE(want));
		CHECK_EQ(st.by_kind[BTR_KIND_JCC], 3);
		cb.insn = r_insn;
		CHECK_EQ(btr_ptflow_decode_parallel(img, &cfg, sbuf, 4, 2, 0, &cb, NULL), -BTR_ERR_UNSUPPORTED);
	}
	ipvec_free(&r.ips);

	/* 2. deferred TIP: bits of branches after the indirect jump come first */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("1010");
	s_ip(BTR_PT_TIP, 0x1000);
	s_ip(BTR_PT_TIP_PGD, 0x2000);
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1000, 0x1004, 0x1006,
						 0x1000, 0x1004, 0x1000, 0x1004, 0x1006 };
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		expect_ips("deferred", &r, want, BTR_ARRAY_SIZE(want));
		CHECK(!has_event(&r, BTR_FLOW_GAP));
		CHECK_EQ(r.br[r.nbr - 1].to, 0x2000);   /* the PGD binds to the indirect jump */
	}
	ipvec_free(&r.ips);

	/* 3. FUP + TIP: an interrupt before 0x1004 executes */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("1");
	s_ip(BTR_PT_FUP, 0x1004);
	s_ip(BTR_PT_TIP, 0x1020);
	s_ip(BTR_PT_TIP, 0x1032);
	s_ip(BTR_PT_TIP_PGD, 0x3000);
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1000, 0x1020, 0x1021, 0x1032, 0x1033 };
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		expect_ips("async", &r, want, BTR_ARRAY_SIZE(want));
		CHECK_EQ(r.br[1].kind, BTR_KIND_ASYNC);
		CHECK_EQ(r.br[1].from, 0x1004);
		CHECK_EQ(r.br[1].to, 0x1020);
		CHECK_EQ(r.br[1].insns, 1);
		CHECK(has_event(&r, BTR_FLOW_ASYNC));
	}
	ipvec_free(&r.ips);

	/* 3b. an interrupt where the flow is, at an address without code (a
	 * whole-system trace: the interrupted TB never ran, so no bytes were
	 * captured there): the event binds at the current IP before any
	 * instruction there is decoded, so no code is needed and nothing is
	 * lost (before: a "no code image" gap at each such event) */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("0");
	s_ip(BTR_PT_TIP, 0x9000);    /* jmp rax to code never captured */
	s_ip(BTR_PT_FUP, 0x9000);    /* interrupted before its first instruction */
	s_ip(BTR_PT_TIP, 0x1020);
	s_ip(BTR_PT_TIP, 0x1032);
	s_ip(BTR_PT_TIP_PGD, 0x3000);
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1006, 0x1020, 0x1021, 0x1032, 0x1033 };
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		expect_ips("async at no code", &r, want, BTR_ARRAY_SIZE(want));
		CHECK(!has_event(&r, BTR_FLOW_GAP));
		CHECK_EQ(r.br[2].kind, BTR_KIND_ASYNC);
		CHECK_EQ(r.br[2].from, 0x9000);
		CHECK_EQ(r.br[2].to, 0x1020);
		CHECK_EQ(r.br[2].insns, 0);
		struct rec rf;
		CHECK_EQ(decode_fast(&rf, &cfg), 0);
		CHECK(!has_event(&rf, BTR_FLOW_GAP));
		CHECK_EQ(rf.nbr, r.nbr);
	}
	ipvec_free(&r.ips);

	/* 4. OVF, resume at the FUP */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("1");
	s_simple(BTR_PT_OVF);
	enc.last_ip = 0;
	s_ip(BTR_PT_FUP, 0x1010);
	s_tnt("1");
	s_ip(BTR_PT_TIP_PGD, 0x4000);
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1010, 0x1020, 0x1021, 0x1015, 0x1016 };
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		expect_ips("overflow", &r, want, BTR_ARRAY_SIZE(want));
		int g = has_event(&r, BTR_FLOW_GAP);
		CHECK(g);
		if (g)
			CHECK_EQ(r.ev[g - 1].reason, -BTR_ERR_OVERFLOW);
		CHECK(has_event(&r, BTR_FLOW_OVERFLOW));
	}
	ipvec_free(&r.ips);

	/* 5. SKD010: no FUP after the OVF, the TIP gives the IP */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("1");
	s_simple(BTR_PT_OVF);
	s_ip(BTR_PT_TIP, 0x1010);
	s_tnt("1");
	s_ip(BTR_PT_TIP_PGD, 0x4000);
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1010, 0x1020, 0x1021, 0x1015, 0x1016 };
		struct btr_ptflow_config sk = cfg;
		sk.cpu_family = 6;
		sk.cpu_model = 0x5e;
		CHECK_EQ(decode(&r, &sk, 0), 0);
		CHECK_EQ(ipvec_diff(&r.ips, want, BTR_ARRAY_SIZE(want)), -1);
		char names[128];
		btr_ptflow_errata_names(&sk, names, sizeof(names));
		CHECK(strstr(names, "skd010") != NULL);
		CHECK(strstr(names, "skl014") != NULL);
	}
	ipvec_free(&r.ips);

	/* 6. APL11: a TIP.PGD right after OVF is the erratum's on Goldmont:
	 * dropped, tracing stays off; the FUP and TNT after it then find
	 * tracing off, as in libipt (whose ptxed stops there with "expected
	 * tracing enabled event") - btr no longer resumes at the FUP. */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("1");
	s_simple(BTR_PT_OVF);
	s_ipsup(BTR_PT_TIP_PGD);
	enc.last_ip = 0;
	s_ip(BTR_PT_FUP, 0x1010);
	s_tnt("1");
	s_ip(BTR_PT_TIP_PGD, 0x4000);
	{
		struct btr_ptflow_config gm = cfg;
		gm.cpu_family = 6;
		gm.cpu_model = 0x5c;
		CHECK_EQ(decode(&r, &gm, 0), 0);
		CHECK_EQ(r.ips.n, 2);      /* not resumed at 0x1010 */
		ipvec_free(&r.ips);
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		CHECK_EQ(r.ips.n, 2);      /* without the erratum: disabled */
	}
	ipvec_free(&r.ips);

	/* 6b. APL12 (Goldmont: a FUP after OVF though tracing was off) does
	 * not apply when the PSB+ after that FUP holds a FUP: tracing was on,
	 * so the erratum's workaround must change nothing - the same
	 * instructions and events as a decode without errata (the erratum's
	 * own case, a PSB+ without FUP, is the conformance case apl12-psb). */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("1");
	s_simple(BTR_PT_OVF);
	enc.last_ip = 0;
	s_ip(BTR_PT_FUP, 0x1000);
	s_psb(1, 0x1004);
	s_tnt("0");
	s_ipsup(BTR_PT_TIP_PGD);
	{
		struct btr_ptflow_config gm = cfg;
		gm.cpu_family = 6;
		gm.cpu_model = 0x5c;
		char names[128];
		btr_ptflow_errata_names(&gm, names, sizeof(names));
		CHECK(strstr(names, "apl12") != NULL);
		struct rec plain;
		CHECK_EQ(decode(&plain, &cfg, 0), 0);
		CHECK_EQ(decode(&r, &gm, 0), 0);
		CHECK(has_event(&r, BTR_FLOW_OVERFLOW));
		CHECK(plain.ips.n >= 5);
		CHECK_EQ(ipvec_diff(&r.ips, plain.ips.v, plain.ips.n), -1);
		CHECK_EQ(r.nev, plain.nev);
		for (unsigned i = 0; i < r.nev && i < plain.nev; i++) {
			CHECK_EQ(r.ev[i].type, plain.ev[i].type);
			CHECK_EQ(r.ev[i].ip, plain.ev[i].ip);
		}
		ipvec_free(&plain.ips);
	}
	ipvec_free(&r.ips);

	/* 7. MODE.Exec 32-bit code */
	s_begin();
	s_psb(0, 0x5000);
	s_tnt("10");
	s_ip(BTR_PT_TIP_PGD, 0x6000);
	{
		static const uint64_t want[] = { 0x5000, 0x5001, 0x5000, 0x5001, 0x5003 };
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		CHECK_EQ(ipvec_diff(&r.ips, want, BTR_ARRAY_SIZE(want)), -1);
		int m = has_event(&r, BTR_FLOW_MODE);
		CHECK(m);
		if (m)
			CHECK_EQ(r.ev[m - 1].payload, BTR_MODE_32);
		CHECK(!has_event(&r, BTR_FLOW_GAP));
	}
	ipvec_free(&r.ips);

	/* 8. PIP, PTW, TSX abort, TraceStop */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	{
		struct btr_pt_packet p = { .type = BTR_PT_PIP };
		p.u.pip.cr3 = 0x1234000;
		s_pkt(p);
		struct btr_pt_packet w = { .type = BTR_PT_PTW };
		w.u.ptw.payload = 0xdeadbeef;
		w.u.ptw.bytes = 4;
		s_pkt(w);
		struct btr_pt_packet x = { .type = BTR_PT_MODE_TSX };
		x.u.mode_tsx.abrt = 1;
		s_pkt(x);
		s_ip(BTR_PT_FUP, 0x1004);
		s_ip(BTR_PT_TIP, 0x1020);
		s_simple(BTR_PT_TRACESTOP);
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		int i = has_event(&r, BTR_FLOW_PAGING);
		CHECK(i);
		if (i)
			CHECK_EQ(r.ev[i - 1].payload, 0x1234000);
		i = has_event(&r, BTR_FLOW_PTWRITE);
		CHECK(i);
		if (i)
			CHECK_EQ(r.ev[i - 1].payload, 0xdeadbeef);
		CHECK(has_event(&r, BTR_FLOW_TSX_ABORT));
		CHECK(has_event(&r, BTR_FLOW_STOP));
		CHECK_EQ(r.nbr, 1);
		CHECK(r.br[0].flags & BTR_BF_TSX_ABORT);
		CHECK_EQ(r.br[0].from, 0x1004);
	}
	ipvec_free(&r.ips);

	/* 8b. MODE.TSX begin: reported at its FUP's IP (where the XBEGIN
	 * is), after the instructions before it - not at the packet (libipt
	 * conformance: tsx-abort) */
	s_begin();
	s_psb(1, 0x1000);
	{
		struct btr_pt_packet x = { .type = BTR_PT_MODE_TSX };
		x.u.mode_tsx.intx = 1;
		s_pkt(x);
		s_ip(BTR_PT_FUP, 0x1004);
		s_tnt("0");
		s_ip(BTR_PT_TIP_PGD, 0x1020);
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		int i = has_event(&r, BTR_FLOW_TSX);
		CHECK(i);
		if (i) {
			CHECK_EQ(r.ev[i - 1].ip, 0x1004);
			CHECK_EQ(r.ev[i - 1].payload, 1);
		}
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1006 };
		expect_ips("tsx begin", &r, want, 3);
	}
	ipvec_free(&r.ips);

	/* 8c. MODE.TSX abort + FUP + TIP.PGD: the abort is reported, then
	 * the disable (libipt conformance: tip_pge-tsx_abort-tip_pgd) */
	s_begin();
	s_psb(1, 0x1000);
	{
		struct btr_pt_packet x = { .type = BTR_PT_MODE_TSX };
		x.u.mode_tsx.abrt = 1;
		s_pkt(x);
		s_ip(BTR_PT_FUP, 0x1004);
		s_ipsup(BTR_PT_TIP_PGD);
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		int i = has_event(&r, BTR_FLOW_TSX_ABORT), d = has_event(&r, BTR_FLOW_DISABLE);
		CHECK(i && d && i < d);
		if (i)
			CHECK_EQ(r.ev[i - 1].ip, 0x1004);
	}
	ipvec_free(&r.ips);

	/* 8d. OVF, then TIP.PGD: the flow never resumed, so no disable
	 * (libipt conformance: skd010-tip_pgd) */
	s_begin();
	s_psb(1, 0x1000);
	s_simple(BTR_PT_OVF);
	s_ipsup(BTR_PT_TIP_PGD);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("0");
	s_ip(BTR_PT_TIP_PGD, 0x1020);
	CHECK_EQ(decode(&r, &cfg, 0), 0);
	{
		unsigned nd = 0;
		for (unsigned k = 0; k < r.nev; k++)
			nd += r.ev[k].type == BTR_FLOW_DISABLE;
		CHECK_EQ(nd, 1);   /* the last TIP.PGD's only */
		CHECK(has_event(&r, BTR_FLOW_OVERFLOW));
	}
	ipvec_free(&r.ips);

	/* 9. timing: TSC, then TMA + MTC with CPUID 0x15 = 2/100, CYC */
	s_begin();
	s_pkt((struct btr_pt_packet){ .type = BTR_PT_PSB });
	{
		struct btr_pt_packet t = { .type = BTR_PT_TSC };
		t.u.tsc.tsc = 1000;
		s_pkt(t);
		struct btr_pt_packet a = { .type = BTR_PT_TMA };
		a.u.tma.ctc = 0x100;
		s_pkt(a);
		s_simple(BTR_PT_PSBEND);
		s_ip(BTR_PT_TIP_PGE, 0x1000);
		s_tnt("1");
		struct btr_pt_packet m = { .type = BTR_PT_MTC };
		m.u.mtc.ctc = (0x100 >> 3) + 2;    /* two MTC periods of 8 crystal ticks */
		s_pkt(m);
		struct btr_pt_packet c = { .type = BTR_PT_CYC };
		c.u.cyc.value = 5;
		s_pkt(c);
		s_tnt("0");
		s_ip(BTR_PT_TIP_PGD, 0x4000);
		struct btr_ptflow_config tc = cfg;
		tc.cpuid15_eax = 2;
		tc.cpuid15_ebx = 100;
		tc.mtc_freq = 3;
		CHECK_EQ(decode(&r, &tc, 0), 0);
		CHECK_EQ(r.nbr, 3);
		CHECK_EQ(r.br[0].tsc, 1000);
		CHECK(r.br[0].flags & BTR_BF_TSC);
		CHECK_EQ(r.br[1].tsc, 1000 + 16 * 50);
		CHECK(r.br[1].flags & BTR_BF_CYCLES);
		CHECK_EQ(r.br[1].cycles, 5);
		CHECK(!(r.br[0].flags & BTR_BF_CYCLES));
		/* the CYC count goes to one branch only */
		CHECK(!(r.br[2].flags & BTR_BF_CYCLES));
		CHECK_EQ(r.br[2].cycles, 0);
	}
	ipvec_free(&r.ips);

	/* 9b. the fast walk (no instruction callback) gives a CYC count to the
	 * first branch after it only, in both output modes */
	for (int batched = 0; batched < 2; batched++) {
		s_begin();
		s_pkt((struct btr_pt_packet){ .type = BTR_PT_PSB });
		s_simple(BTR_PT_PSBEND);
		s_ip(BTR_PT_TIP_PGE, 0x1000);
		s_tnt("1");
		struct btr_pt_packet c = { .type = BTR_PT_CYC };
		c.u.cyc.value = 7;
		s_pkt(c);
		s_tnt("110");   /* three conditionals in one walk */
		s_ip(BTR_PT_TIP_PGD, 0x4000);
		struct bvec_ bv = { 0 };
		struct btr_ptflow *f;
		CHECK_EQ(btr_ptflow_new(img, &cfg, &f), 0);
		struct btr_ptflow_callbacks bcb = { .ctx = &bv };
		if (batched)
			bcb.branches = bv_push_n;
		else
			bcb.branch = bv_push;
		CHECK_EQ(btr_ptflow_decode(f, sbuf, btr_pt_enc_size(&enc), &bcb), 0);
		btr_ptflow_free(f);
		CHECK_EQ(bv.n, 5);
		for (size_t i = 0; i < bv.n && bv.n == 5; i++) {
			CHECK_EQ(!!(bv.v[i].flags & BTR_BF_CYCLES), i == 1);
			CHECK_EQ(bv.v[i].cycles, i == 1 ? 7 : 0);
		}
		free(bv.v);
	}

	/* 10. missing code is a gap, then the next IP resumes */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x9000);
	s_tnt("1");
	s_ip(BTR_PT_TIP, 0x1010);
	s_tnt("1");
	s_ip(BTR_PT_TIP_PGD, 0x4000);
	{
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		int g = has_event(&r, BTR_FLOW_GAP);
		CHECK(g);
		if (g) {
			CHECK_EQ(r.ev[g - 1].reason, -BTR_ERR_NOMAP);
			CHECK_EQ(r.ev[g - 1].ip, 0x9000);
		}
		CHECK_EQ(r.ips.n, 5);   /* 0x1010 0x1020 0x1021 0x1015 0x1016 */
	}
	ipvec_free(&r.ips);

	/* 10b. after a gap, a RET compressed against a CALL made in the
	 * missing code (the hardware's stack lives until the next PSB): the
	 * decoder's stack is empty, so the bit is not a deferred TIP's - the
	 * RET at 0x1021 must not "return" to the next TIP's 0x1010 (libipt:
	 * pte_retstack_empty).  A contradiction before the next PSB is not
	 * BAD_CONTEXT either; after that PSB it is. */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x9000);   /* JIT code: no image */
	s_ip(BTR_PT_TIP, 0x1020);       /* it calls 0x1020 */
	s_tnt("1");                     /* whose RET the hardware compresses */
	s_ip(BTR_PT_TIP, 0x1000);       /* the JIT code jumps to 0x1000 */
	s_ip(BTR_PT_TIP, 0x1010);       /* a TIP where the JCC at 0x1004 needs a bit */
	s_psb(1, 0x1000);
	s_ip(BTR_PT_TIP, 0x1010);       /* the same contradiction in sync */
	for (int fast = 0; fast < 2; fast++) {
		CHECK_EQ(fast ? decode_fast(&r, &cfg) : decode(&r, &cfg, 0), 0);
		for (unsigned i = 0; i < r.nbr && i < 64; i++)
			CHECK(!(r.br[i].from == 0x1021 && r.br[i].to == 0x1000));
		CHECK_EQ(gap_reason(&r, 1), -BTR_ERR_NOMAP);
		CHECK_EQ(gap_reason(&r, 2), -BTR_ERR_NOSYNC);   /* the RET at 0x1021 */
		CHECK_EQ(gap_reason(&r, 3), -BTR_ERR_NOSYNC);   /* contradiction after a gap */
		CHECK_EQ(gap_reason(&r, 4), -BTR_ERR_BAD_CONTEXT);
		ipvec_free(&r.ips);
	}

	/* 10c. a PSB empties the return stack (SDM: only RETs whose CALL came
	 * after the last PSB are compressed): a taken bit for the RET at
	 * 0x6016, whose CALL at 0x6000 came before the PSB (the bit of the JCC
	 * at 0x6014 walked the flow past it), is a compressed return to an
	 * unknown address (libipt: pte_retstack_empty), never a return to
	 * 0x6005 through a stack kept across the PSB. */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x6000);
	s_tnt("0");                     /* call 0x6010 (0x6005 pushed), the JCC, up to the RET */
	s_psb(1, 0x6016);               /* PSB+ at the RET */
	s_tnt("1");
	s_ip(BTR_PT_TIP, 0x1030);
	s_ipsup(BTR_PT_TIP_PGD);
	for (int fast = 0; fast < 2; fast++) {
		CHECK_EQ(fast ? decode_fast(&r, &cfg) : decode(&r, &cfg, 0), 0);
		int ret = 0;
		for (unsigned i = 0; i < r.nbr && i < 64; i++)
			ret += r.br[i].from == 0x6016 && r.br[i].to == 0x6005;
		CHECK_EQ(ret, 0);
		CHECK_EQ(gap_reason(&r, 1), -BTR_ERR_NOSYNC);   /* the RET at 0x6016 */
		CHECK_EQ(r.nbr, 3);                              /* the CALL, the JCC, the SYSCALL */
		if (r.nbr == 3)
			CHECK_EQ(r.br[2].kind, BTR_KIND_SYSCALL);
		ipvec_free(&r.ips);
	}

	/* 11. garbage before the first PSB and a bad byte inside: skipped */
	s_begin();
	{
		static const uint8_t junk[] = { 0x02, 0xff, 0x99, 0x02, 0x23 };
		memcpy(enc.pos, junk, sizeof(junk));
		enc.pos += sizeof(junk);
		s_psb(1, 0);
		s_ip(BTR_PT_TIP_PGE, 0x1000);
		s_tnt("0");
		*enc.pos++ = 0x05;   /* not a packet */
		s_psb(1, 0x1006);
		s_ip(BTR_PT_TIP, 0x1010);
		s_tnt("1");
		s_ip(BTR_PT_TIP_PGD, 0x4000);
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		int g = has_event(&r, BTR_FLOW_GAP);
		CHECK(g);
		if (g)
			CHECK_EQ(r.ev[g - 1].reason, -BTR_ERR_BAD_PACKET);
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1006, 0x1010, 0x1020, 0x1021, 0x1015, 0x1016 };
		CHECK_EQ(ipvec_diff(&r.ips, want, BTR_ARRAY_SIZE(want)), -1);
	}
	ipvec_free(&r.ips);

	/* 12. parallel == sequential, branch by branch (pieces of 4 KiB cut at
	 * PSBs every 512 bytes, 3 threads) on a generated walk */
	{
		struct ptgen g;
		memset(&g, 0, sizeof(g));
		ptgen_code(&g, 0x400000, 64);
		ptgen_walk(&g, 300000, 99, 512);
		struct btr_image *gi;
		btr_image_new(&gi);
		btr_image_add_bytes(gi, g.code, g.code_size, g.base);
		struct bvec_ sq = { 0 }, pr = { 0 };
		struct btr_ptflow *f;
		CHECK_EQ(btr_ptflow_new(gi, NULL, &f), 0);
		struct btr_ptflow_callbacks cb = { .branch = bv_push, .ctx = &sq };
		CHECK_EQ(btr_ptflow_decode(f, g.pt, g.pt_size, &cb), 0);
		btr_ptflow_free(f);
		cb.ctx = &pr;
		struct btr_ptflow_stats st;
		CHECK_EQ(btr_ptflow_decode_parallel(gi, NULL, g.pt, g.pt_size, 3, 4096, &cb, &st), 0);
		CHECK_EQ(sq.n, g.branches);
		CHECK_EQ(pr.n, sq.n);
		CHECK_EQ(st.insns, g.insns);
		size_t bad = 0;
		for (size_t i = 0; i < sq.n && i < pr.n; i++)
			if (sq.v[i].from != pr.v[i].from || sq.v[i].to != pr.v[i].to ||
			    sq.v[i].kind != pr.v[i].kind || sq.v[i].flags != pr.v[i].flags ||
			    sq.v[i].insns != pr.v[i].insns || sq.v[i].tsc != pr.v[i].tsc)
				bad++;
		CHECK_EQ(bad, 0);
#ifdef BTR_HAVE_LIBIPT
		/* and instruction by instruction against libipt (which, at the
		 * very end of a stream, also reports the few instructions up to
		 * the next branch that would need trace; btr reports only what
		 * the trace proves) */
		struct ipvec bi = { 0 }, li = { 0 };
		CHECK_EQ(flow_btr(gi, NULL, g.pt, g.pt_size, 777, &bi), 0);
		CHECK_EQ(bi.n, g.insns);
		CHECK_EQ(flow_ipt(gi, g.pt, g.pt_size, &li), 0);
		CHECK(li.n >= bi.n && li.n - bi.n < 32);
		size_t first = bi.n;
		for (size_t i = 0; i < bi.n && i < li.n; i++)
			if (bi.v[i] != li.v[i]) {
				first = i;
				break;
			}
		CHECK_EQ(first, bi.n);
		ipvec_free(&bi);
		ipvec_free(&li);
#else
		check_oracle_missing("libipt (built without libipt-dev): the generated walk instruction by instruction");
#endif
		free(sq.v);
		free(pr.v);
		btr_image_free(gi);
		ptgen_free(&g);
	}

	/* 13. btr_ptflow_reset: a hole in the input */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x1000);
	s_tnt("110");
	s_ip(BTR_PT_TIP, 0x1010);
	s_tnt("1");
	{
		struct btr_ptflow *f;
		CHECK_EQ(btr_ptflow_new(img, &cfg, &f), 0);
		memset(&r, 0, sizeof(r));
		struct btr_ptflow_callbacks cb = { .branch = r_branch, .insn = r_insn, .event = r_event, .ctx = &r };
		size_t n = btr_pt_enc_size(&enc);
		CHECK_EQ(btr_ptflow_decode(f, sbuf, n - 3, &cb), 0);   /* cut inside the TIP */
		btr_ptflow_reset(f, 1000);
		CHECK_EQ(btr_ptflow_decode(f, sbuf, n, &cb), 0);       /* a new stream */
		int g = has_event(&r, BTR_FLOW_GAP);
		CHECK(g);
		if (g) {
			CHECK_EQ(r.ev[g - 1].reason, -BTR_ERR_TRUNCATED);
			CHECK_EQ(r.ev[g - 1].offset, 1000);
		}
		/* 6 before the hole (three jne, 0x1006 is not proven without
		 * its TIP), then all 10 of the new stream */
		CHECK_EQ(r.ips.n, 6 + 10);
		btr_ptflow_free(f);
	}
	ipvec_free(&r.ips);

	/* 14. parallel == sequential events across PSBs where the flow was
	 * on, lost (after a gap) and off */
	s_begin();
	s_psb(1, 0);
	s_ip(BTR_PT_TIP_PGE, 0x9000);     /* no code: gap, flow lost */
	s_tnt("1");
	s_psb(1, 0x1000);                 /* resync: ENABLE */
	s_tnt("11");
	s_psb(1, 0x1000);                 /* still on: no event */
	s_tnt("0");
	s_ip(BTR_PT_TIP_PGD, 0x4000);
	s_psb(1, 0);                      /* off */
	s_ip(BTR_PT_TIP_PGE, 0x1010);
	s_tnt("1");
	{
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		struct rec rp;
		memset(&rp, 0, sizeof(rp));
		struct btr_ptflow_callbacks cb = { .branch = r_branch, .event = r_event, .ctx = &rp };
		CHECK_EQ(btr_ptflow_decode_parallel(img, &cfg, sbuf, btr_pt_enc_size(&enc), 2, 8, &cb, NULL), 0);
		CHECK_EQ(rp.nbr, r.nbr);
		CHECK_EQ(rp.nev, r.nev);
		for (unsigned i = 0; i < r.nev && i < rp.nev; i++) {
			CHECK_EQ(rp.ev[i].type, r.ev[i].type);
			CHECK_EQ(rp.ev[i].ip, r.ev[i].ip);
			CHECK_EQ(rp.ev[i].offset, r.ev[i].offset);
		}
		CHECK(r.nev >= 5);   /* enable, gap, enable, disable, enable */
	}
	ipvec_free(&r.ips);

	/* 14b. the same in 32-bit code: each piece's decoder learns the mode
	 * from its leading PSB+, which the sequential one already knew, with
	 * tracing on there and off: one MODE event in both (parallel
	 * decoding reported a second MODE at the PSB+ with tracing off) */
	s_begin();
	s_psb(0, 0x5000);
	s_tnt("10");
	s_ip(BTR_PT_TIP_PGD, 0x6000);
	s_psb(0, 0);                      /* off */
	s_ip(BTR_PT_TIP_PGE, 0x5000);
	s_tnt("10");
	s_psb(0, 0x5003);                 /* on */
	s_ip(BTR_PT_TIP_PGD, 0x6000);
	{
		CHECK_EQ(decode(&r, &cfg, 0), 0);
		struct rec rp;
		memset(&rp, 0, sizeof(rp));
		struct btr_ptflow_callbacks cb = { .branch = r_branch, .event = r_event, .ctx = &rp };
		CHECK_EQ(btr_ptflow_decode_parallel(img, &cfg, sbuf, btr_pt_enc_size(&enc), 2, 8, &cb, NULL), 0);
		unsigned modes = 0;
		for (unsigned i = 0; i < rp.nev; i++)
			if (rp.ev[i].type == BTR_FLOW_MODE) {
				modes++;
				CHECK_EQ(rp.ev[i].payload, BTR_MODE_32);
			}
		CHECK_EQ(modes, 1);
		CHECK_EQ(rp.nbr, r.nbr);
		CHECK_EQ(rp.nev, r.nev);
		for (unsigned i = 0; i < r.nev && i < rp.nev; i++) {
			CHECK_EQ(rp.ev[i].type, r.ev[i].type);
			CHECK_EQ(rp.ev[i].ip, r.ev[i].ip);
			CHECK_EQ(rp.ev[i].offset, r.ev[i].offset);
		}
	}
	ipvec_free(&r.ips);

	/* BBP blocks (PEBS via PT): inside a block a byte xxxxx100b starts a
	 * BIP, not a short TNT.  The block stays open across timing, PAD and
	 * FUP packets and ends at BEP (with its IP bit a status FUP follows) or
	 * at any other packet (here a TNT whose
	 * byte is no BIP; the TNT 0x04 after it is a TNT again): the rule of
	 * the packet decoder (lib/pt/pt.c).  libipt 2.0 knows no BBP, so the
	 * oracle is the same stream without the block packets, whose flow
	 * libipt checks; with them the flow must be the same. */
	{
		static const uint64_t want[] = { 0x1000, 0x1004, 0x1000, 0x1004, 0x1000, 0x1004, 0x1000, 0x1004,
						 0x1000, 0x1004, 0x1006, 0x1010, 0x1020, 0x1021, 0x1015, 0x1016, 0x1030 };
		struct rec want_r, got;
		for (int with_block = 0; with_block < 2; with_block++) {
			s_begin();
			s_psb(1, 0);
			s_ip(BTR_PT_TIP_PGE, 0x1000);
			s_tnt("11");
			if (with_block) {
				struct btr_pt_packet bbp = { .type = BTR_PT_BBP };
				bbp.u.bbp.sz = 1;   /* 4-byte BIPs */
				bbp.u.bbp.type = 2;
				s_pkt(bbp);
				struct btr_pt_packet bip = { .type = BTR_PT_BIP, .size = 5 };
				bip.u.bip.id = 0;   /* 0x04: a TNT "0" outside the block */
				bip.u.bip.value = 0x0c0c0c0c;
				s_pkt(bip);
				struct btr_pt_packet mtc = { .type = BTR_PT_MTC };
				mtc.u.mtc.ctc = 3;
				s_pkt(mtc);
				bip.u.bip.id = 1;   /* 0x0c: TNT "10" */
				bip.u.bip.value = 0x04040404;
				s_pkt(bip);
				struct btr_pt_packet cyc = { .type = BTR_PT_CYC };
				cyc.u.cyc.value = 1000;
				s_pkt(cyc);
				struct btr_pt_packet tsc = { .type = BTR_PT_TSC };
				tsc.u.tsc.tsc = 0x123456;
				s_pkt(tsc);
				struct btr_pt_packet cbr = { .type = BTR_PT_CBR };
				cbr.u.cbr.ratio = 20;
				s_pkt(cbr);
				s_simple(BTR_PT_PAD);
				bip.u.bip.id = 3;   /* 0x1c: TNT "110" */
				bip.u.bip.value = 0x1c1c1c1c;
				s_pkt(bip);
				/* BEP with its IP bit: a status FUP follows (the
				 * instruction the PEBS record is for: walked to,
				 * not the source of an asynchronous branch) */
				struct btr_pt_packet bep = { .type = BTR_PT_BEP };
				bep.u.bep.ip = 1;
				s_pkt(bep);
				s_ip(BTR_PT_FUP, 0x1004);
			}
			s_tnt("1");
			if (with_block) {
				struct btr_pt_packet bbp = { .type = BTR_PT_BBP };
				bbp.u.bbp.type = 2;   /* 8-byte BIPs */
				s_pkt(bbp);
				struct btr_pt_packet bip = { .type = BTR_PT_BIP, .size = 9 };
				bip.u.bip.id = 2;   /* 0x14: TNT "010" */
				bip.u.bip.value = 0x0d1d0d0c04040d0dull;   /* TIP- and FUP-like bytes */
				s_pkt(bip);
			}
			s_tnt("1");   /* 0x06, no BIP: ends the block */
			s_tnt("0");   /* 0x04: a TNT, the block has ended */
			s_ip(BTR_PT_TIP, 0x1010);
			s_tnt("1");
			s_ip(BTR_PT_TIP, 0x1030);
			s_ipsup(BTR_PT_TIP_PGD);
			if (!with_block) {
				CHECK_EQ(decode(&want_r, &cfg, 0), 0);
				expect_ips("bbp control", &want_r, want, BTR_ARRAY_SIZE(want));
				CHECK(!has_event(&want_r, BTR_FLOW_GAP));
				continue;
			}
			/* whole, byte by byte, and by the fast walk */
			for (int how = 0; how < 3; how++) {
				CHECK_EQ(how == 2 ? decode_fast(&got, &cfg) : decode(&got, &cfg, how == 1 ? 1 : 0), 0);
				if (how < 2) {
					long d = ipvec_diff(&got.ips, want, BTR_ARRAY_SIZE(want));
					if (d >= 0)
						ipvec_report("bbp", &got.ips, want, BTR_ARRAY_SIZE(want), d);
					CHECK_EQ(d, -1);
				}
				CHECK(!has_event(&got, BTR_FLOW_GAP));
				CHECK_EQ(got.nbr, want_r.nbr);
				for (unsigned i = 0; i < got.nbr && i < want_r.nbr && i < 64; i++) {
					CHECK_EQ(got.br[i].from, want_r.br[i].from);
					CHECK_EQ(got.br[i].to, want_r.br[i].to);
					CHECK_EQ(got.br[i].kind, want_r.br[i].kind);
				}
				ipvec_free(&got.ips);
			}
		}
		ipvec_free(&want_r.ips);
	}

	/* config validation */
	{
		struct btr_ptflow *f;
		struct btr_ptflow_config bad = cfg;
		bad.cache_bits = 40;
		CHECK_EQ(btr_ptflow_new(img, &bad, &f), -BTR_ERR_INVAL);
		CHECK_EQ(btr_ptflow_new(NULL, &cfg, &f), -BTR_ERR_INVAL);
		CHECK_STR(btr_flow_event_name(BTR_FLOW_GAP), "gap");
	}
	btr_image_free(img);
	return check_done();
}
