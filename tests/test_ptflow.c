/* test_ptflow: differential test of the PT flow decoder.  Real executions
 * of tests/progs/flow_* (single-stepped with ptrace: stepper.h) are turned
 * into PT streams (ptsynth.h) with and without return compression, with
 * IP filtering and with overflows; btr_ptflow and libipt's instruction
 * decoder must report exactly the same instructions, and both must match
 * the stepped ground truth. */
#include "check.h"
#include "stepper.h"
#include "ptsynth.h"
#include "flowdiff.h"

static int compare_one(const char *name, const char *variant, struct step_trace *t,
		       const struct synth_opts *so, const struct btr_ptflow_config *cfg)
{
	struct synth_out o;
	int r = synth_run(t->ip, t->fault, t->n, t->end_ip, t->img, so, &o);
	CHECK_EQ(r, 0);
	if (r) {
		synth_free(&o);
		return -1;
	}
	struct ipvec b = { 0 };
	/* Feed in odd-sized pieces to exercise packets cut at buffer ends. */
	r = flow_btr(t->img, cfg, o.buf, o.size, so->n_ovf ? 0 : 4093, &b);
	CHECK_EQ(r, 0);
	long d = ipvec_diff(&b, o.expect, o.nexpect);
	if (d >= 0) {
		char what[128];
		snprintf(what, sizeof(what), "%s/%s btr vs truth", name, variant);
		ipvec_report(what, &b, o.expect, o.nexpect, d);
	}
	CHECK_EQ(d, -1);
	CHECK(!b.tsc_backwards);
	CHECK_EQ(b.gaps, o.n_ovf);
	/* Parallel decoding gives the same branch count. */
	{
		struct ipvec pb = { 0 };
		struct btr_ptflow_callbacks cb = { .branch = fd_branch, .event = fd_event, .ctx = &pb };
		struct btr_ptflow_stats st;
		r = btr_ptflow_decode_parallel(t->img, cfg, o.buf, o.size, 2, so->psb_period ? so->psb_period * 3 : 8192, &cb, &st);
		CHECK_EQ(r, 0);
		CHECK_EQ(pb.branches, b.branches);
		CHECK_EQ(st.insns, b.n);
		ipvec_free(&pb);
	}
#ifdef BTR_HAVE_LIBIPT
	struct ipvec l = { 0 };
	int errs = flow_ipt(t->img, o.buf, o.size, &l);
	CHECK_EQ(errs, 0);
	long d2 = ipvec_diff(&b, l.v, l.n);
	if (d2 >= 0) {
		char what[128];
		snprintf(what, sizeof(what), "%s/%s btr vs libipt", name, variant);
		ipvec_report(what, &b, l.v, l.n, d2);
	}
	CHECK_EQ(d2, -1);
	ipvec_free(&l);
#else
	check_oracle_missing("libipt (built without libipt-dev): btr's flow vs libipt's");
#endif
	printf("%-14s %-10s insns %zu  stream %zu bytes  tip %zu tnt-bits %zu pge %zu pgd %zu ovf %zu psb %zu\n",
	       name, variant, b.n, o.size, o.n_tip, o.n_tnt_bits, o.n_pge, o.n_pgd, o.n_ovf, o.n_psb);
	ipvec_free(&b);
	synth_free(&o);
	return 0;
}

static void run_prog(const char *name)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/prog_%s", BTR_BINARY_DIR, name);
	if (access(path, X_OK)) {
		fprintf(stderr, "%s missing\n", path);
		CHECK(0);
		return;
	}
	char *argv[] = { path, NULL };
	struct step_trace t;
	if (step_run(argv, 400000, &t)) {
		CHECK(0);
		return;
	}
	CHECK(t.n > 1000);
	printf("%s: %zu instructions stepped\n", name, t.n);

	struct synth_opts so = { 0 };
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg) };
	compare_one(name, "retcomp", &t, &so, &cfg);

	so.no_retcomp = 1;
	cfg.no_retcomp = 1;
	compare_one(name, "no-retcomp", &t, &so, &cfg);
	so.no_retcomp = 0;
	cfg.no_retcomp = 0;

	/* PSB every 128 bytes: return stack resets, status FUPs, and
	 * parallel decoding split into many pieces */
	so.psb_period = 128;
	compare_one(name, "psb128", &t, &so, &cfg);
	so.psb_period = 0;

	/* IP filter: main itself; calls out of it leave the range */
	so.filter_lo = t.main_lo;
	so.filter_hi = t.main_hi;
	cfg.n_ip_filter = 1;
	cfg.ip_filter[0][0] = so.filter_lo;
	cfg.ip_filter[0][1] = so.filter_hi;
	compare_one(name, "ipfilter", &t, &so, &cfg);
	so.filter_lo = so.filter_hi = 0;
	cfg.n_ip_filter = 0;

	/* overflows */
	size_t at[3] = { t.n / 4, t.n / 2, (3 * t.n) / 4 };
	so.ovf_at = at;
	so.n_ovf = 3;
	so.ovf_drop = 37;
	compare_one(name, "overflow", &t, &so, &cfg);
	step_trace_free(&t);
}

int main(int argc, char **argv)
{
	if (!step_available())
		check_skip("ptrace is not permitted here: no stepped ground truth");
	if (argc > 1) {
		run_prog(argv[1]);
		return check_done();
	}
	run_prog("flow_loops");
	run_prog("flow_signals");
	run_prog("flow_except");
	run_prog("flow_threads");
	return check_done();
}
