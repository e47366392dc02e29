/* test_opts.c - the one check of option structs (lib/internal.h
 * BTR_OPTS_VALID, BTR_OPTS_COPY, BTR_OPTS_GET; libbpf's OPTS_VALID is the
 * model), directly and through public functions that take options: a
 * struct of the caller's size is taken, an older (smaller, but at least
 * the first version) one too, a newer (larger) one only if the bytes this
 * library does not know are zero; sz 0 or below the first version is
 * -BTR_ERR_INVAL everywhere. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btr/callstack.h"
#include "btr/capture.h"
#include "btr/error.h"
#include "btr/report.h"
#include "btr/stream.h"
#include "btr/trace.h"
#include "check.h"
#include "internal.h"

struct v2 {
	size_t sz;
	int a;
	int b;   /* appended in "version 2" */
};

static int valid(const struct v2 *o)
{
	return BTR_OPTS_VALID(o, BTR_OFFSETOFEND(struct v2, a));
}

static void macros(void)
{
	/* a newer caller's struct: v2 and one more field */
	struct { struct v2 o; int c; } big = { { sizeof(big), 1, 2 }, 0 };
	CHECK(valid(NULL));
	struct v2 o = { sizeof(o), 1, 2 };
	CHECK(valid(&o));
	o.sz = BTR_OFFSETOFEND(struct v2, a);   /* version 1 */
	CHECK(valid(&o));
	o.sz = BTR_OFFSETOFEND(struct v2, a) - 1;
	CHECK(!valid(&o));
	o.sz = 0;
	CHECK(!valid(&o));
	CHECK(valid(&big.o));
	big.c = 7;   /* a field this library does not know, set */
	CHECK(!valid(&big.o));

	/* copy: what the caller passed, the rest zero, sz ours */
	struct v2 d, v1 = { BTR_OFFSETOFEND(struct v2, a), 5, 9 };
	BTR_OPTS_COPY(&d, &v1);
	CHECK_EQ(d.sz, sizeof(d));
	CHECK_EQ(d.a, 5);
	CHECK_EQ(d.b, 0);   /* not passed by a version 1 caller */
	BTR_OPTS_COPY(&d, &big.o);
	CHECK_EQ(d.b, 2);
	const struct v2 *none = NULL;
	BTR_OPTS_COPY(&d, none);
	CHECK_EQ(d.sz, sizeof(d));
	CHECK_EQ(d.a, 0);
	CHECK_EQ(BTR_OPTS_GET(&v1, b, 42), 42);   /* not passed: the fallback */
	v1.sz = sizeof(v1);
	CHECK_EQ(BTR_OPTS_GET(&v1, b, 42), 9);
	v1.b = 0;
	CHECK_EQ(BTR_OPTS_GET(&v1, b, 42), 42);   /* zero: the fallback */
}

static void public_functions(void)
{
	struct btr_callstack *cs = NULL;
	struct { struct btr_callstack_opts o; uint64_t more; } cbig = { { .sz = sizeof(cbig) }, 0 };
	CHECK_EQ(btr_callstack_new(&cbig.o, &cs), 0);
	btr_callstack_free(cs);
	cbig.more = 1;
	CHECK_EQ(btr_callstack_new(&cbig.o, &cs), -BTR_ERR_INVAL);
	struct btr_callstack_opts co = { .sz = 0 };
	CHECK_EQ(btr_callstack_new(&co, &cs), -BTR_ERR_INVAL);

	struct btr_stream *s = NULL;
	struct btr_stream_opts so = { .sz = BTR_OFFSETOFEND(struct btr_stream_opts, ctx) };   /* first version */
	CHECK_EQ(btr_stream_new(&so, &s), 0);
	btr_stream_free(s);
	so.sz = offsetof(struct btr_stream_opts, ctx);
	CHECK_EQ(btr_stream_new(&so, &s), -BTR_ERR_INVAL);

	char path[] = "/tmp/btr_test_opts_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	struct btr_trace_writer *w = NULL;
	struct btr_trace_writer_opts wo = { .sz = 0 };
	CHECK_EQ(btr_trace_writer_new_fd(fd, path, &wo, &w), -BTR_ERR_INVAL);
	wo.sz = sizeof(wo);
	wo.no_sync = 1;
	CHECK_EQ(btr_trace_writer_new_fd(fd, path, &wo, &w), 0);
	if (w)
		btr_trace_writer_abort(w);
	close(fd);
	unlink(path);

	/* the report's options and the stream options btr_report_trace takes */
	struct btr_report *r = NULL;
	struct { struct btr_report_opts o; uint64_t more; } rbig = { { .sz = sizeof(rbig) }, 0 };
	CHECK_EQ(btr_report_new(&rbig.o, &r), 0);
	btr_report_free(r);
	r = NULL;
	rbig.more = 1;
	CHECK_EQ(btr_report_new(&rbig.o, &r), -BTR_ERR_INVAL);
	struct btr_report_opts ro = { .sz = BTR_OFFSETOFEND(struct btr_report_opts, top) };   /* first version */
	CHECK_EQ(btr_report_new(&ro, &r), 0);
	btr_report_free(r);
	r = NULL;
	so.sz = 0;
	CHECK_EQ(btr_report_trace("/nonexistent.btr", &so, NULL, &r, NULL), -BTR_ERR_INVAL);

	/* the perf recorders: an option struct of an unknown size is refused
	 * before anything is probed or started */
	struct btr_capture_result res;
	char *argv[] = { "true", NULL };
	struct btr_capture_opts cap = { .sz = 0, .output = path, .argv = argv };
	CHECK_EQ(btr_pt_record(&cap, &res), -BTR_ERR_INVAL);
	CHECK_EQ(btr_bts_record(&cap, &res), -BTR_ERR_INVAL);
	CHECK_EQ(btr_lbr_record(&cap, &res), -BTR_ERR_INVAL);
	struct { struct btr_capture_opts o; uint64_t more; } capbig = { { .sz = sizeof(capbig), .output = path, .argv = argv }, 1 };
	CHECK_EQ(btr_pt_record(&capbig.o, &res), -BTR_ERR_INVAL);
	CHECK_EQ(btr_bts_record(&capbig.o, &res), -BTR_ERR_INVAL);
	CHECK_EQ(btr_lbr_record(&capbig.o, &res), -BTR_ERR_INVAL);
	CHECK(access(path, F_OK) != 0);   /* nothing written */
}

int main(void)
{
	macros();
	public_functions();
	return check_done();
}
