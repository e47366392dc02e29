/* test_callstack.c - btr/callstack.h on hand-made branch sequences (no
 * code image, so functions are named by address): callers synthesized
 * from returns past the bottom of a trace that starts mid-call-tree,
 * return matching by call site when instruction lengths are unknown, the
 * depth cap, gaps, thread separation and enter/leave balance.  The
 * programs with known call trees are in tests/cli_flame.sh. */
#include "btr/callstack.h"
#include "btr/error.h"
#include "check.h"

static struct btr_branch br(uint32_t tid, enum btr_branch_kind k, uint64_t from, uint64_t to, uint64_t insns)
{
	struct btr_branch b;
	memset(&b, 0, sizeof(b));
	b.tid = tid;
	b.kind = (uint8_t)k;
	b.from = from;
	b.to = to;
	b.insns = insns;
	b.flags = BTR_BF_TAKEN | BTR_BF_INSNS;
	return b;
}

static uint64_t path_cost(struct btr_callstack *cs, const char *want)
{
	char buf[512];
	uint64_t sum = 0;
	for (uint32_t i = 1; i < btr_callstack_nnodes(cs); i++) {
		btr_callstack_path(cs, i, buf, sizeof(buf));
		if (!strcmp(buf, want))
			sum += btr_callstack_node(cs, i)->self_cost;
	}
	return sum;
}

static int enters, leaves, maxdepth;
static void on_enter(void *ctx, struct btr_cs_thread *t)
{
	enters++;
	if ((int)t->depth > maxdepth)
		maxdepth = (int)t->depth;
}
static void on_leave(void *ctx, struct btr_cs_thread *t, enum btr_cs_leave how)
{
	leaves++;
}

int main(void)
{
	struct btr_callstack *cs;
	struct btr_callstack_opts o = { .sz = sizeof(o), .enter = on_enter, .leave = on_leave };
	CHECK_EQ(btr_callstack_new(&o, &cs), 0);
	btr_callstack_begin(cs, NULL);

	/* Starts inside 0x1010's function, returns twice past what it knows,
	 * then calls 0x4000 from 0x3010, which returns to 0x3015. */
	struct btr_branch b[] = {
		br(7, BTR_KIND_JCC, 0x1010, 0x1020, 3),
		br(7, BTR_KIND_RET, 0x1030, 0x2005, 2),
		br(7, BTR_KIND_RET, 0x2040, 0x3005, 4),
		br(7, BTR_KIND_CALL, 0x3010, 0x4000, 1),
		br(7, BTR_KIND_RET, 0x4010, 0x3015, 5),
	};
	CHECK_EQ(btr_callstack_branches(cs, b, 5), 0);
	CHECK_EQ(btr_callstack_end(cs), 0);
	CHECK_EQ(path_cost(cs, "0x3005;0x2005;0x1010"), 5);
	CHECK_EQ(path_cost(cs, "0x3005;0x2005"), 4);
	CHECK_EQ(path_cost(cs, "0x3005"), 1);
	CHECK_EQ(path_cost(cs, "0x3005;0x4000"), 5);
	CHECK_EQ(enters, leaves);
	CHECK(btr_callstack_has_insns(cs));
	CHECK(!btr_callstack_has_time(cs));
	btr_callstack_free(cs);

	/* Depth cap: 10 nested calls with room for 4 frames, then the
	 * returns; costs stay where they belong and the stack comes back. */
	enters = leaves = maxdepth = 0;
	o.max_depth = 4;
	CHECK_EQ(btr_callstack_new(&o, &cs), 0);
	btr_callstack_begin(cs, NULL);
	struct btr_branch d[21 + BTR_CALLSTACK_LOOKAHEAD];
	d[0] = br(1, BTR_KIND_JMP, 0x100, 0x104, 1);
	for (int i = 0; i < 10; i++)
		d[1 + i] = br(1, BTR_KIND_CALL, 0x100 + 0x100 * i + 8, 0x200 + 0x100 * i, 1);
	for (int i = 9; i >= 0; i--)
		d[11 + (9 - i)] = br(1, BTR_KIND_RET, 0x220 + 0x100 * i, 0x100 + 0x100 * i + 8 + 5, 1);
	/* then enough branches for the look-ahead to be replayed */
	for (int i = 0; i < BTR_CALLSTACK_LOOKAHEAD; i++)
		d[21 + i] = br(1, BTR_KIND_JCC, 0x104, 0x108, 1);
	CHECK_EQ(btr_callstack_branches(cs, d, 21 + BTR_CALLSTACK_LOOKAHEAD), 0);
	struct btr_cs_thread *t = btr_callstack_thread(cs, 0);
	CHECK(t != NULL);
	CHECK_EQ(t->depth, 1);
	CHECK_EQ(t->dropped, 0);
	CHECK_EQ(maxdepth, 4);
	CHECK_EQ(btr_callstack_end(cs), 0);
	CHECK_EQ(enters, leaves);
	btr_callstack_free(cs);

	/* Two threads interleaved, and a gap in one of them. */
	enters = leaves = 0;
	o.max_depth = 0;
	CHECK_EQ(btr_callstack_new(&o, &cs), 0);
	btr_callstack_begin(cs, NULL);
	struct btr_branch m[] = {
		br(1, BTR_KIND_CALL, 0x1000, 0x5000, 1),
		br(2, BTR_KIND_CALL, 0x2000, 0x6000, 1),
		br(1, BTR_KIND_JCC, 0x5008, 0x5010, 10),
		br(2, BTR_KIND_JCC, 0x6008, 0x6010, 20),
	};
	CHECK_EQ(btr_callstack_branches(cs, m, 4), 0);
	struct btr_stream_event gap = { .type = BTR_SEV_GAP, .tid = 2, .reason = -BTR_ERR_TRUNCATED };
	CHECK_EQ(btr_callstack_event(cs, &gap), 0);
	struct btr_branch after = br(2, BTR_KIND_JCC, 0x7000, 0x7010, 30);
	CHECK_EQ(btr_callstack_branches(cs, &after, 1), 0);
	CHECK_EQ(btr_callstack_end(cs), 0);
	CHECK_EQ(path_cost(cs, "0x1000;0x5000"), 10);
	CHECK_EQ(path_cost(cs, "0x2000;0x6000"), 20);
	CHECK_EQ(path_cost(cs, "0x7000"), 30);   /* a new root after the gap */
	CHECK_EQ(btr_callstack_nthreads(cs), 2);
	CHECK_EQ(enters, leaves);
	btr_callstack_free(cs);

	/* Bad options */
	struct btr_callstack_opts bad = { .sz = 3 };
	CHECK_EQ(btr_callstack_new(&bad, &cs), -BTR_ERR_INVAL);
	CHECK_EQ(btr_callstack_new(NULL, NULL), -BTR_ERR_INVAL);
	return check_done();
}
