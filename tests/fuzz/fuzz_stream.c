/* fuzz_stream.c - libFuzzer target: a whole trace file (.btr or perf.data,
 * with or without AUX data) through btr_analysis_run into every analysis
 * of tests/fuzz/analyses.h: container or perf.data reader, PT/BTS/LBR
 * decoding, module loading, the stream and the analyses in one pass, as
 * `btr report FILE` does.  The API takes a path, so the input goes to a
 * memfd opened as /proc/self/fd/N.  Seeds: the .btr files of
 * tests/fuzz/corpus/trace and the perf.data files of ../shared/traces
 * (scripts/fuzz.sh). */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "btr/btr.h"
#include "analyses.h"

/* warnings are formatted (that code runs) but not printed */
static void discard(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)ctx, (void)level, (void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz_stream", 0);
		if (fd < 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		btr_log_set(discard, NULL, BTR_LOG_WARN);
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	struct btr_analysis *list[FUZZ_N_ANALYSES];
	size_t na = fuzz_analyses_new(data, size, list);
	if (!na)
		return 0;
	struct btr_filter flt;
	struct btr_stream_opts so = { .sz = sizeof(so) };
	if (size && (data[size - 1] & 1) && btr_filter_parse("jcc,call,return,user", &flt) == 0)
		so.filter = &flt;
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	btr_analysis_run(path, &so, list, na, &info);
	fuzz_analyses_write_free(list, na);
	return 0;
}
