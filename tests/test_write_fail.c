/* test_write_fail.c - the .btr writer on a file system that fills up,
 * simulated with a file size limit (RLIMIT_FSIZE, `ulimit -f`): with
 * SIGXFSZ caught (as the btr CLI does), the write that crosses the limit
 * fails with a clear error instead of killing the process; at that moment
 * every chunk flushed before is readable from the temporary file (the
 * reader stops at the cut with -BTR_ERR_TRUNCATED), and after
 * btr_trace_writer_abort nothing is left: no half-written file under the
 * final name, no temporary file.  Runs in a child so the limit stays there. */
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btr/btr.h"
#include "check.h"

static void on_xfsz(int sig)
{
	(void)sig;
}

/* The child's checks; returns the number of failures. */
static int child(const char *path, int compress)
{
	struct sigaction sa = { .sa_handler = on_xfsz };
	sigaction(SIGXFSZ, &sa, NULL);
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 100;

	struct btr_trace_writer_opts o = { .sz = sizeof(o), .compress = compress, .chunk_size = 4096, .no_sync = 1 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, &o, &w), 0);
	uint8_t data[3000];
	for (size_t i = 0; i < sizeof(data); i++)   /* poorly compressible */
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	int rc = 0;
	unsigned flushed = 0;
	for (unsigned i = 0; i < 1000 && rc == 0; i++) {
		struct btr_record rec = { .type = BTR_REC_PT };
		rec.u.data = (struct btr_rec_data){ .tid = 1, .cpu = -1, .stream_offset = (uint64_t)i * sizeof(data),
						    .size = sizeof(data), .data = data };
		data[0] = (uint8_t)i;
		rc = btr_trace_write(w, &rec);
		if (rc == 0)
			rc = btr_trace_flush(w);
		if (rc == 0)
			flushed++;
	}
	/* the limit was hit after about 64 KiB, with a clear error that
	 * names it (EFBIG: "file size limit exceeded (ulimit -f)") */
	CHECK_EQ(rc, -BTR_ERR_FBIG);
	CHECK(flushed > 5 && flushed < 1000);
	printf("compress %d: %u records flushed before the write failed: %s\n", compress, flushed, btr_errstr(rc));

	/* what was flushed is readable from the temporary file */
	char tmp[4200];
	char pat[4200];
	glob_t gl;
	snprintf(pat, sizeof(pat), "%s.tmp.??????", path);
	tmp[0] = 0;
	if (glob(pat, 0, NULL, &gl) == 0) {
		CHECK_EQ(gl.gl_pathc, 1);
		snprintf(tmp, sizeof(tmp), "%s", gl.gl_pathv[0]);
		globfree(&gl);
	}
	struct btr_trace_reader *r;
	CHECK_EQ(btr_trace_reader_new(tmp, &r), 0);
	if (r) {
		struct btr_record rec;
		unsigned n = 0;
		int e;
		while ((e = btr_trace_read(r, &rec)) == 0) {
			CHECK_EQ(rec.type, BTR_REC_PT);
			CHECK_EQ(rec.u.data.stream_offset, (uint64_t)n * sizeof(data));
			CHECK_EQ(rec.u.data.data[0], (uint8_t)n);
			n++;
		}
		CHECK_EQ(e, -BTR_ERR_TRUNCATED);   /* says it was cut */
		CHECK_EQ(n, flushed);              /* every flushed chunk, nothing else */
		struct btr_trace_info info;
		btr_trace_reader_info(r, &info);
		CHECK_EQ(info.complete, 0);
		btr_trace_reader_free(r);
	}
	CHECK(btr_trace_writer_error(w) == rc);
	if (!compress) {
		btr_trace_writer_abort(w);
	} else {
		/* a recorder keeps the complete chunks as PATH.partial */
		char kept[4300], want[4300];
		snprintf(want, sizeof(want), "%s.partial", path);
		CHECK_EQ(btr_trace_writer_abort_keep(w, kept, sizeof(kept)), 1);
		CHECK_STR(kept, want);
		struct btr_trace_reader *k;
		CHECK_EQ(btr_trace_reader_new(kept, &k), 0);
		if (k) {
			struct btr_record rec;
			unsigned n = 0;
			int e;
			while ((e = btr_trace_read(k, &rec)) == 0)
				n++;
			CHECK_EQ(e, -BTR_ERR_TRUNCATED);
			CHECK_EQ(n, flushed);
			btr_trace_reader_free(k);
		}
		unlink(kept);
	}
	CHECK(access(tmp, F_OK) != 0);
	CHECK(access(path, F_OK) != 0);
	fflush(stdout);
	return check_fail_;
}

int main(void)
{
	char dir[] = "/tmp/btr-write-fail-XXXXXX";
	if (!mkdtemp(dir))
		check_skip("no temporary directory");
	char path[256];
	snprintf(path, sizeof(path), "%s/out.btr", dir);
	for (int compress = 0; compress <= 3; compress += 3) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			_exit(child(path, compress));
		int st = 0;
		waitpid(pid, &st, 0);
		/* not killed by SIGXFSZ, no failed check */
		CHECK(WIFEXITED(st));
		CHECK_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), 0);
		CHECK(access(path, F_OK) != 0);
	}
	/* nothing complete written: nothing kept */
	struct btr_trace_writer *w;
	struct btr_trace_writer_opts o = { .sz = sizeof(o), .no_sync = 1 };
	CHECK_EQ(btr_trace_writer_new(path, &o, &w), 0);
	char kept[300];
	CHECK_EQ(btr_trace_writer_abort_keep(w, kept, sizeof(kept)), 0);
	CHECK(access(path, F_OK) != 0);
	/* retarget: the finished trace goes to the other name only */
	char other[300];
	snprintf(other, sizeof(other), "%s/other.btr", dir);
	CHECK_EQ(btr_trace_writer_new(path, &o, &w), 0);
	CHECK_EQ(btr_trace_writer_retarget(w, other), 0);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	CHECK(access(path, F_OK) != 0);
	CHECK(access(other, F_OK) == 0);
	unlink(other);
	rmdir(dir);
	return check_done();
}
