/* fuzz_analysis.c - libFuzzer target: the common branch stream and every
 * analysis of tests/fuzz/analyses.h on arbitrary record sequences.  The
 * input is read as a series of records (a type byte, then that record's
 * fields taken from the bytes) fed to btr_stream_record, whose callbacks
 * feed the analyses through btr__analysis_mux, over a small fixed code
 * image; every analysis is then written in each of its formats.  Containers are fuzzed by fuzz_trace; this
 * target skips the checksums and reaches the stream's own logic: PT data
 * with arbitrary stream offsets and tids, BTS records split anywhere, LBR
 * snapshots, branches, module loads/unloads/exec, exits, filters. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_mux.h"
#include "btr/report.h"
#include "btr/stream.h"
#include "analyses.h"

static const uint8_t code[] = { 0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x03, 0x75, 0xf9,
				0xe8, 0x02, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3 };

struct in {
	const uint8_t *p, *end;
};

static uint64_t take(struct in *in, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n && in->p < in->end; i++)
		v |= (uint64_t)*in->p++ << (8 * i);
	return v;
}

/* Small addresses near the code image, sometimes anything. */
static uint64_t addr(struct in *in)
{
	uint8_t sel = (uint8_t)take(in, 1);
	if (sel < 200)
		return 0x1000 + (sel % 24);
	return take(in, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[] = { "", "[vdso]", "/nonexistent/lib.so", "/proc/self/exe", "x.ko" };
	struct in in = { data, data + size };
	struct btr_analysis *list[FUZZ_N_ANALYSES];
	size_t na = fuzz_analyses_new(data, size, list);
	struct btr__analysis_mux *mux;
	if (!na)
		return 0;
	if (btr__analysis_mux_new(list, na, &mux) < 0) {
		fuzz_analyses_write_free(list, na);
		return 0;
	}
	struct btr_filter flt;
	int use_filter = size && (data[0] & 1);
	if (use_filter)
		btr_filter_parse("jcc,near_ret,user", &flt);
	struct btr_stream_opts so = { .sz = sizeof(so), .filter = use_filter ? &flt : NULL,
				      .branch = btr__analysis_mux_branch, .event = btr__analysis_mux_event,
				      .ctx = mux };
	struct btr_stream *s;
	if (btr_stream_new(&so, &s) < 0) {
		btr__analysis_mux_free(mux);
		fuzz_analyses_write_free(list, na);
		return 0;
	}
	btr_image_add_bytes(btr_stream_image(s), code, sizeof(code), 0x1000);
	btr__analysis_mux_begin(mux, s);
	struct btr_lbr_entry ent[32];
	struct btr_branch br[16];
	while (in.p < in.end) {
		struct btr_record rec;
		memset(&rec, 0, sizeof(rec));
		rec.type = (enum btr_rec_type)(take(&in, 1) % (BTR_REC__MAX + 1));
		switch (rec.type) {
		case BTR_REC_MACHINE:
			memcpy(rec.u.machine.backend, "fuzz", 5);
			rec.u.machine.flags = (uint32_t)take(&in, 1);
			rec.u.machine.addr_filter_cfg = (uint8_t)take(&in, 1);
			rec.u.machine.addr_filter[0][0] = 0x1000;
			rec.u.machine.addr_filter[0][1] = 0x1008;
			break;
		case BTR_REC_MODULE_LOAD:
		case BTR_REC_MODULE_UNLOAD:
		case BTR_REC_EXEC:
			rec.u.module.pid = (uint32_t)take(&in, 1);
			rec.u.module.prot = (uint32_t)take(&in, 1);
			rec.u.module.start = take(&in, 8);
			rec.u.module.size = take(&in, 4);
			rec.u.module.pgoff = take(&in, 4);
			rec.u.module.build_id_len = (uint8_t)(take(&in, 1) % 21);
			rec.u.module.path = paths[take(&in, 1) % 5];
			break;
		case BTR_REC_THREAD_START:
		case BTR_REC_THREAD_EXIT:
		case BTR_REC_THREAD_NAME:
			rec.u.thread.tid = (uint32_t)take(&in, 1);
			rec.u.thread.exit_code = (int32_t)take(&in, 1);
			rec.u.thread.name = "t";
			break;
		case BTR_REC_PT:
		case BTR_REC_BTS: {
			rec.u.data.tid = (uint32_t)take(&in, 1) % 4;
			rec.u.data.cpu = -1;
			rec.u.data.stream_offset = take(&in, 2);
			size_t n = (size_t)take(&in, 1);
			if (n > (size_t)(in.end - in.p))
				n = (size_t)(in.end - in.p);
			rec.u.data.size = n;
			rec.u.data.data = in.p;
			in.p += n;
			break;
		}
		case BTR_REC_LBR: {
			uint32_t n = (uint32_t)take(&in, 1) % 33;
			for (uint32_t i = 0; i < n; i++) {
				ent[i].from = addr(&in);
				ent[i].to = addr(&in);
				ent[i].flags = (uint32_t)take(&in, 1);
				ent[i].cycles = 0;
			}
			rec.u.lbr.tid = (uint32_t)take(&in, 1) % 4;
			rec.u.lbr.count = n;
			rec.u.lbr.entries = ent;
			break;
		}
		case BTR_REC_BRANCHES: {
			uint32_t n = (uint32_t)take(&in, 1) % 17;
			for (uint32_t i = 0; i < n; i++) {
				br[i] = (struct btr_branch){ .from = addr(&in), .to = addr(&in),
							     .tid = (uint32_t)take(&in, 1) % 4,
							     .insns = take(&in, 1),
							     .flags = (uint16_t)take(&in, 2),
							     .kind = (uint8_t)take(&in, 1) };
			}
			rec.u.branches.tid = (uint32_t)take(&in, 1) % 4;
			rec.u.branches.count = n;
			rec.u.branches.branches = br;
			break;
		}
		case BTR_REC_PROCESS_EXIT:
			rec.u.exit.signo = (int32_t)take(&in, 1);
			rec.u.exit.ip = addr(&in);
			break;
		default:
			break;
		}
		if (btr_stream_record(s, &rec) != 0)
			break;
	}
	btr_stream_finish(s);
	btr__analysis_mux_end(mux, 0);
	/* written after the stream is gone: results must not point into it */
	btr_stream_free(s);
	btr__analysis_mux_free(mux);
	fuzz_analyses_write_free(list, na);
	return 0;
}
