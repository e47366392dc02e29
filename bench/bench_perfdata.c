/* bench_perfdata.c - throughput of the perf.data reader.
 *
 *   bench_perfdata [FILE [REPEAT]]
 *
 * Opens FILE (default: shared/traces/autofdo/test.lbr, 9232 16-deep LBR
 * samples) REPEAT times (default 20) and reads every record, touching
 * each LBR entry and PT payload.  Prints the open time, MB/s of file data
 * and records/s.  The file is read through the page cache after the first
 * pass, so this measures parsing, not the disk.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "btr/error.h"
#include "btr/perfdata.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : BTR_SHARED_DIR "/traces/autofdo/test.lbr";
	int repeat = argc > 2 ? atoi(argv[2]) : 20;
	uint64_t records = 0, entries = 0, sum = 0, bytes = 0;
	double t_open = 0, t0 = now();
	if (repeat < 1)
		repeat = 1;
	for (int i = 0; i < repeat; i++) {
		struct btr_perf_reader *r;
		double a = now();
		int err = btr_perf_reader_new(path, &r);
		t_open += now() - a;
		if (err) {
			fprintf(stderr, "bench_perfdata: %s: %s\n", path, btr_errstr(err));
			return 1;
		}
		struct btr_perf_info info;
		btr_perf_reader_info(r, &info);
		bytes += info.file_size;
		struct btr_record rec;
		while ((err = btr_perf_read(r, &rec)) == 0) {
			records++;
			if (rec.type == BTR_REC_LBR) {
				for (uint32_t k = 0; k < rec.u.lbr.count; k++)
					sum += rec.u.lbr.entries[k].from ^ rec.u.lbr.entries[k].cycles;
				entries += rec.u.lbr.count;
			} else if (rec.type == BTR_REC_PT && rec.u.data.size) {
				sum += rec.u.data.data[rec.u.data.size - 1];
			}
		}
		btr_perf_reader_free(r);
		if (err != -BTR_ERR_EOS) {
			fprintf(stderr, "bench_perfdata: %s: %s\n", path, btr_errstr(err));
			return 1;
		}
	}
	double dt = now() - t0;
	printf("%s x%d: %.1f MB/s, %.2f M records/s, %.1f M LBR entries/s, open %.3f ms (checksum %" PRIx64 ")\n",
	       path, repeat, (double)bytes / dt / 1e6, (double)records / dt / 1e6, (double)entries / dt / 1e6,
	       t_open / repeat * 1e3, sum);
	return 0;
}
