/* test_ptflow_real: real Skylake Intel PT data (quipper's
 * perf.data.intel_pt-4.14; its binaries are not available) decodes
 * without a crash, every AUX byte is consumed, and the missing code is
 * reported as gaps (never a crash or an endless loop).  (libipt reads the
 * same file packet by packet in test_pt_libipt; without the binaries no
 * flow comparison with libipt is possible.) */
#include <unistd.h>
#include "check.h"
#include "btr/error.h"
#include "btr/perfdata.h"
#include "btr/ptflow.h"

struct counts {
	uint64_t gaps, nomap, enables, disables, overflows, events, branches, to_kernel;
	int bad_offset;
	uint64_t last_off;
};

static int on_event(void *ctx, const struct btr_flow_event *ev)
{
	struct counts *c = ctx;
	c->events++;
	switch (ev->type) {
	case BTR_FLOW_GAP:
		c->gaps++;
		if (ev->reason == -BTR_ERR_NOMAP)
			c->nomap++;
		break;
	case BTR_FLOW_ENABLE: c->enables++; break;
	case BTR_FLOW_DISABLE: c->disables++; break;
	case BTR_FLOW_OVERFLOW: c->overflows++; break;
	default: break;
	}
	return 0;
}

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct counts *c = ctx;
	c->branches++;
	/* without code only FUP+TIP pairs (asynchronous transfers) can be
	 * branches: both ends are in the packets */
	if (b->kind != BTR_KIND_ASYNC)
		c->bad_offset = 1;
	/* user -> kernel interrupts: privilege flags from the addresses */
	if ((b->flags & BTR_BF_TO_KERNEL) && b->to >= 0xffff800000000000ull && !(b->flags & BTR_BF_KERNEL))
		c->to_kernel++;
	return 0;
}

int main(void)
{
	const char *path = BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14";
	if (access(path, R_OK))
		check_skip("quipper perf.data.intel_pt-4.14 absent");
	struct btr_perf_reader *r;
	int e = btr_perf_reader_new(path, &r);
	CHECK_EQ(e, 0);
	if (e)
		return check_done();
	struct btr_perf_info info;
	btr_perf_reader_info(r, &info);
	printf("cpuid %s\n", info.cpuid);

	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	struct btr_ptflow_config cfg = { .sz = sizeof(cfg) };
	unsigned fam = 0, model = 0, step = 0;
	if (sscanf(info.cpuid, "GenuineIntel,%u,%u,%u", &fam, &model, &step) >= 2) {
		cfg.cpu_family = (uint16_t)fam;
		cfg.cpu_model = (uint16_t)model;
		cfg.cpu_stepping = (uint16_t)step;
	}
	char errata[128];
	btr_ptflow_errata_names(&cfg, errata, sizeof(errata));
	printf("errata: %s\n", errata);
	struct {
		int32_t cpu;
		uint32_t tid;
		struct btr_ptflow *f;
	} dec[64];
	unsigned nd = 0;
	uint64_t pt_bytes = 0, recs = 0;
	struct counts c = { 0 };
	struct btr_ptflow_callbacks cb = { .branch = on_branch, .event = on_event, .ctx = &c };
	struct btr_record rec;
	while ((e = btr_perf_read(r, &rec)) == 0) {
		if (rec.type != BTR_REC_PT)
			continue;
		unsigned k;
		for (k = 0; k < nd; k++)
			if (dec[k].cpu == rec.u.data.cpu && dec[k].tid == rec.u.data.tid)
				break;
		if (k == nd) {
			if (nd == 64)
				continue;
			CHECK_EQ(btr_ptflow_new(img, &cfg, &dec[k].f), 0);
			dec[k].cpu = rec.u.data.cpu;
			dec[k].tid = rec.u.data.tid;
			nd++;
		}
		recs++;
		pt_bytes += rec.u.data.size;
		CHECK(btr_ptflow_decode(dec[k].f, rec.u.data.data, rec.u.data.size, &cb) >= 0);
	}
	CHECK_EQ(e, -BTR_ERR_EOS);
	uint64_t bytes = 0, insns = 0;
	for (unsigned k = 0; k < nd; k++) {
		struct btr_ptflow_stats st;
		btr_ptflow_stats(dec[k].f, &st);
		bytes += st.bytes;
		insns += st.insns;
		btr_ptflow_free(dec[k].f);
	}
	printf("%llu AUX records, %u streams, %llu bytes; enables %llu disables %llu gaps %llu (nomap %llu) "
	       "overflows %llu branches %llu insns %llu\n",
	       (unsigned long long)recs, nd, (unsigned long long)pt_bytes, (unsigned long long)c.enables,
	       (unsigned long long)c.disables, (unsigned long long)c.gaps, (unsigned long long)c.nomap,
	       (unsigned long long)c.overflows, (unsigned long long)c.branches, (unsigned long long)insns);
	CHECK(recs > 0);
	CHECK(pt_bytes > 1000);
	CHECK_EQ(bytes, pt_bytes);          /* every byte went through the decoder */
	CHECK(c.enables > 0);               /* it synchronized and found IPs */
	CHECK(c.nomap > 0);                 /* the missing binaries are gaps */
	CHECK_EQ(insns, 0);                 /* no code: nothing may be invented */
	CHECK(!c.bad_offset);
	CHECK(c.to_kernel > 0);

	btr_perf_reader_free(r);
	btr_image_free(img);
	return check_done();
}
