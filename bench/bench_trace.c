/* bench_trace.c - throughput of the .btr container and CRC-32C.
 * Usage: bench_trace [MiB] [dir]   (default 128 MiB, /tmp)
 * Writes MiB of synthetic PT-like data as 64 KiB PT records, plain and
 * zstd level 1 and 3, reads each back, and prints MB/s, file sizes and
 * peak RSS (constant memory: RSS must not grow with MiB). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "btr/trace.h"
#include "btr/error.h"
#include "../lib/trace/crc32c.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_mb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss / 1024;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 128;
	const char *dir = argc > 2 ? argv[2] : "/tmp";
	const size_t rec = 64 << 10, pool_n = 128;
	uint8_t *pool = malloc(rec * pool_n), *buf = pool;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	char path[512];

	/* PT-like: half random bytes, half from 4 values (real user-space PT
	 * compresses roughly 2-4x with zstd; this is ~1.6x). */
	/* 8 MiB of distinct data, so zstd cannot just find the previous
	 * record again inside its window. */
	for (size_t i = 0; i < rec * pool_n; i++) {
		x ^= x << 13; x ^= x >> 7; x ^= x << 17;
		pool[i] = (i % 8 < 4) ? (uint8_t)x : (uint8_t)(0x0a + (x >> 40) % 4);
	}

	double t = now();
	uint32_t c = 0;
	for (size_t i = 0; i < mib * 16; i++)
		c = btr_crc32c(c, pool + (i % pool_n) * rec, rec);
	double dt = now() - t;
	printf("crc32c: %zu MiB in %.3f s = %.0f MB/s (crc %08x)\n", mib, dt, mib * 1.048576 / dt, c);

	snprintf(path, sizeof(path), "%s/bench_trace.%d.btr", dir, (int)getpid());
	for (int level = 0; level <= 3; level += (level ? 2 : 1)) {
		struct btr_trace_writer_opts o = { sizeof(o), level, 0 };
		struct btr_trace_writer *w;
		struct btr_record r = { .type = BTR_REC_PT };
		int rc = btr_trace_writer_new(path, &o, &w);
		if (rc) {
			fprintf(stderr, "bench_trace: %s: %s\n", path, btr_errstr(rc));
			return 1;
		}
		r.u.data.tid = 1;
		r.u.data.cpu = -1;
		r.u.data.size = rec;
		r.u.data.data = buf;
		t = now();
		for (size_t i = 0; i < mib * 16; i++) {
			r.u.data.stream_offset = i * rec;
			r.u.data.data = pool + (i % pool_n) * rec;
			if ((rc = btr_trace_write(w, &r)))
				break;
		}
		if (!rc)
			rc = btr_trace_writer_close(w);
		else
			btr_trace_writer_abort(w);
		double wt = now() - t;
		if (rc) {
			fprintf(stderr, "bench_trace: write: %s\n", btr_errstr(rc));
			return 1;
		}
		FILE *f = fopen(path, "rb");
		fseek(f, 0, SEEK_END);
		long size = ftell(f);
		fclose(f);

		struct btr_trace_reader *rd;
		uint64_t bytes = 0, sum = 0;
		t = now();
		if ((rc = btr_trace_reader_new(path, &rd)))
			return 1;
		while ((rc = btr_trace_read(rd, &r)) == 0) {
			bytes += r.u.data.size;
			sum += r.u.data.data[0];
		}
		btr_trace_reader_free(rd);
		double rt = now() - t;
		printf("zstd %d: write %zu MiB in %.3f s = %.0f MB/s, file %.1f MiB (%.2fx), "
		       "read %.3f s = %.0f MB/s (%s, %llu bytes), peak RSS %ld MB\n",
		       level, mib, wt, mib * 1.048576 / wt, size / 1048576.0, mib * 1048576.0 / size, rt,
		       mib * 1.048576 / rt, btr_errstr(rc), (unsigned long long)bytes, rss_mb());
		(void)sum;
		unlink(path);
	}
	free(pool);
	return 0;
}
