/* fuzz_perfdata.c - libFuzzer target for the perf.data reader.
 *
 * Build: cmake -DBTR_FUZZ=ON -DCMAKE_C_COMPILER=clang ...; run e.g.
 *   ./fuzz_perfdata -max_len=65536 corpus/ /path/to/perf.data.branch-4.14
 * Good seeds: the recordings in shared/traces (autofdo/test.lbr is large;
 * the quipper files are small).  The input is copied to an exact-size
 * heap buffer so that ASan catches any read past its end; every record is
 * touched so that bad pointers or lengths in it are caught too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "btr/error.h"
#include "btr/perfdata.h"

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct btr_perf_reader *r;
	if (btr_perf_reader_new_mem(buf, size, &r) == 0) {
		struct btr_record rec;
		unsigned n = 0;
		while (btr_perf_read(r, &rec) == 0 && n++ < 1000000) {
			switch (rec.type) {
			case BTR_REC_MODULE_LOAD:
			case BTR_REC_EXEC:
				sink += strlen(rec.u.module.path) + rec.u.module.build_id_len;
				break;
			case BTR_REC_THREAD_NAME:
				sink += strlen(rec.u.thread.name);
				break;
			case BTR_REC_PT:
			case BTR_REC_BTS:
				if (rec.u.data.size)
					sink += rec.u.data.data[0] + rec.u.data.data[rec.u.data.size - 1];
				break;
			case BTR_REC_LBR:
				for (uint32_t i = 0; i < rec.u.lbr.count; i++)
					sink += rec.u.lbr.entries[i].from ^ rec.u.lbr.entries[i].to;
				break;
			default:
				break;
			}
		}
		struct btr_perf_info info;
		btr_perf_reader_info(r, &info);
		sink += strlen(info.cpuid) + strlen(info.hostname);
		for (unsigned i = 0; i < btr_perf_reader_attr_count(r); i++) {
			struct btr_perf_attr a;
			if (btr_perf_reader_attr(r, i, &a) == 0)
				sink += strlen(a.name);
		}
		btr_perf_reader_free(r);
	}
	free(buf);
	return 0;
}
