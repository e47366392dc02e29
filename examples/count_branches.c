/* count_branches.c - a program built on libbtr: counts the branches and
 * instructions of a trace (.btr or perf.data) per thread.  Built by
 * tests/cli_install.sh against an installed btr with pkg-config only:
 *
 *     cc count_branches.c $(pkg-config --cflags --libs btr)
 *     ./a.out trace.btr
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <btr/btr.h>

struct counts {
	uint64_t branches, insns;
};

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct counts *c = ctx;
	c->branches++;
	c->insns += b->insns;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACE\n", argv[0]);
		return 2;
	}
	if (strcmp(btr_version(), BTR_VERSION_STRING)) {
		fprintf(stderr, "built against btr %s, running with %s\n", BTR_VERSION_STRING, btr_version());
		return 3;
	}
	struct counts c = { 0 };
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .ctx = &c };
	struct btr_stream *s;
	int rc = btr_stream_open(argv[1], &so, &s);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], btr_errstr(rc));
		return 3;
	}
	rc = btr_stream_run(s);
	btr_stream_free(s);
	if (rc < 0 && rc != -BTR_ERR_DATA_LOST) {
		fprintf(stderr, "%s: %s\n", argv[1], btr_errstr(rc));
		return 3;
	}
	printf("btr %s: %" PRIu64 " branches, %" PRIu64 " instructions\n", btr_version(), c.branches, c.insns);
	if (rc == -BTR_ERR_DATA_LOST) {
		/* read to the end, but not all there: the counts are partial */
		fprintf(stderr, "%s: %s; the counts cover what was read\n", argv[1], btr_errstr(rc));
		return 3;
	}
	return 0;
}
