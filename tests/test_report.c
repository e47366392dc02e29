/* test_report.c - the report's arithmetic on synthetic branch streams,
 * and the report over the real LBR recordings. */
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <stdint.h>
#include <unistd.h>
#include <string.h>

#include "analysis/analysis_mux.h"
#include "btr/btr.h"
#include "btr/report.h"
#include "btr/stream.h"
#include "btr/trace.h"
#include "btr/perfdata.h"
#include "check.h"
#include "btr/blocks.h"

/* Three functions of this program that the synthetic stream "executes".
 * The volatile arithmetic makes each one longer than the 0x30 bytes of
 * offsets the stream uses. */
static volatile int sink;
__attribute__((noinline)) void rep_fa(int n)
{
	for (int i = 0; i < n; i++)
		sink += i * 3 + sink * 7 + (sink >> 2) + (i ^ sink);
	sink += n * 11 + (sink ^ 5);
}
__attribute__((noinline)) void rep_fb(int n)
{
	for (int i = 0; i < n; i++)
		sink -= i * 5 + sink * 3 + (sink >> 3) + (i | sink);
	sink += n * 13 + (sink ^ 9);
}
__attribute__((noinline)) void rep_fc(int n)
{
	for (int i = 0; i < n; i++)
		sink ^= i * 9 + sink * 5 + (sink >> 1) + (i & sink);
	sink += n * 17 + (sink ^ 3);
}

static uint64_t main_bias;
static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	main_bias = info->dlpi_addr;   /* the first object is the program */
	return 1;
}

static struct btr_branch br(uint32_t tid, uint64_t from, uint64_t to, enum btr_branch_kind k,
			    uint64_t insns, uint16_t flags)
{
	struct btr_branch b = { .from = from, .to = to, .tid = tid, .kind = (uint8_t)k,
				.insns = insns, .flags = flags | BTR_BF_INSNS };
	return b;
}

static void flow_ev(struct btr_report *r, uint32_t tid, enum btr_flow_event_type t, uint64_t ip, int reason)
{
	struct btr_flow_event fe = { .type = t, .ip = ip, .reason = reason, .offset = 0x40 };
	struct btr_stream_event ev = { .type = BTR_SEV_FLOW, .tid = tid, .flow = &fe };
	CHECK_EQ(btr_report_event(r, &ev), 0);
}

/* The stream of the comment in each step; expected values worked out by
 * hand below. */
static void test_synthetic(void)
{
	dl_iterate_phdr(phdr_cb, NULL);
	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, "/proc/self/exe", main_bias, 0), 0);
	uint64_t fa = (uint64_t)(uintptr_t)&rep_fa, fb = (uint64_t)(uintptr_t)&rep_fb,
		 fc = (uint64_t)(uintptr_t)&rep_fc;
	struct btr_symbol sym;
	CHECK_EQ(btr_image_symbol(img, fa + 0x20, &sym), 0);
	CHECK_STR(sym.name, "rep_fa");
	CHECK(sym.size > 0x30);

	struct btr_report *r;
	struct btr_report_opts ro = { .sz = sizeof(ro), .top = 10 };
	CHECK_EQ(btr_report_new(&ro, &r), 0);
	struct btr_rec_machine m = { .backend = "qemu" };
	struct btr_record rec = { .type = BTR_REC_MACHINE, .u.machine = m };
	struct btr_stream_event ev = { .type = BTR_SEV_MACHINE, .rec = &rec };
	CHECK_EQ(btr_report_event(r, &ev), 0);

	/* Thread 1: enabled at fa. */
	flow_ev(r, 1, BTR_FLOW_ENABLE, fa, 0);
	struct btr_branch b[] = {
		br(1, fa + 0x10, fb, BTR_KIND_CALL, 5, BTR_BF_TAKEN),        /* [fa, fa+0x10] 5 -> fa */
		br(1, fb + 0x8, fa + 0x15, BTR_KIND_RET, 3, BTR_BF_TAKEN),   /* [fb, fb+8] 3 -> fb */
		br(1, fa + 0x20, fa, BTR_KIND_JCC, 4, BTR_BF_TAKEN),         /* [fa+0x15, fa+0x20] 4 -> fa */
		br(1, fa + 0x10, fb, BTR_KIND_CALL, 5, BTR_BF_TAKEN),        /* [fa, fa+0x10] again */
	};
	for (size_t i = 0; i < 4; i++)
		CHECK_EQ(btr_report_branch(r, &b[i]), 0);
	flow_ev(r, 1, BTR_FLOW_DISABLE, 0, 0);
	/* After the disable the start is unknown: [?, fb+8] 3 -> fb, no top block. */
	struct btr_branch b5 = br(1, fb + 0x8, fa + 0x15, BTR_KIND_RET, 3, BTR_BF_TAKEN);
	CHECK_EQ(btr_report_branch(r, &b5), 0);

	/* Thread 2: a system call into the kernel and back, then a not-taken jcc. */
	uint64_t k = 0xffffffff81000000ull;
	struct btr_branch c[] = {
		br(2, fc + 0x4, k, BTR_KIND_SYSCALL, 2, BTR_BF_TAKEN | BTR_BF_TO_KERNEL), /* [?, fc+4] 2 -> fc */
		br(2, k + 0x10, fc + 0x6, BTR_KIND_SYSRET, 7, BTR_BF_TAKEN | BTR_BF_KERNEL), /* [k, k+0x10] 7 -> [unknown] */
		br(2, fc + 0x8, fc + 0xa, BTR_KIND_JCC, 1, 0),                 /* [fc+6, fc+8] 1 -> fc */
	};
	for (size_t i = 0; i < 3; i++)
		CHECK_EQ(btr_report_branch(r, &c[i]), 0);

	/* Gaps: one from the decoder, one overflow, one from the container. */
	flow_ev(r, 2, BTR_FLOW_GAP, 0, -BTR_ERR_NOMAP);
	flow_ev(r, 2, BTR_FLOW_OVERFLOW, 0, 0);
	struct btr_stream_event gap = { .type = BTR_SEV_GAP, .tid = 2, .reason = -BTR_ERR_TRUNCATED, .offset = 0x1234 };
	CHECK_EQ(btr_report_event(r, &gap), 0);

	/* Thread name and the process exit: SIGSEGV at fc+6. */
	struct btr_record tn = { .type = BTR_REC_THREAD_NAME, .u.thread = { .pid = 1, .tid = 2, .name = "worker" } };
	struct btr_stream_event tev = { .type = BTR_SEV_THREAD_NAME, .tid = 2, .rec = &tn };
	CHECK_EQ(btr_report_event(r, &tev), 0);
	struct btr_record ex = { .type = BTR_REC_PROCESS_EXIT,
				 .u.exit = { .pid = 1, .tid = 2, .signo = 11, .ip = fc + 6, .addr = 0x10 } };
	struct btr_stream_event xev = { .type = BTR_SEV_PROCESS_EXIT, .tid = 2, .rec = &ex, .image = img };
	CHECK_EQ(btr_report_event(r, &xev), 0);

	CHECK_EQ(btr_report_finish(r, img, NULL), 0);
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_STR(res->backend, "qemu");
	CHECK_EQ(res->has_insns, 1);
	CHECK_EQ(res->rank_by_insns, 1);
	CHECK_EQ(res->insns, 5 + 3 + 4 + 5 + 3 + 2 + 7 + 1);
	CHECK_EQ(res->branches, 8);
	CHECK_EQ(res->taken, 7);
	CHECK_EQ(res->by_class[BTR_LBR_NEAR_REL_CALL], 2);
	CHECK_EQ(res->by_class[BTR_LBR_NEAR_RET], 2);
	CHECK_EQ(res->by_class[BTR_LBR_JCC], 2);
	CHECK_EQ(res->by_class[BTR_LBR_FAR_BRANCH], 2);
	CHECK_EQ(res->by_class[BTR_LBR_NEAR_IND_CALL], 0);
	CHECK_EQ(res->by_class[BTR_LBR_CPL_EQ_0], 1);
	CHECK_EQ(res->by_class[BTR_LBR_CPL_NEQ_0], 7);
	CHECK_EQ(res->by_kind[BTR_KIND_SYSCALL], 1);
	CHECK_EQ(res->by_kind[BTR_KIND_SYSRET], 1);
	CHECK_EQ(res->by_kind[BTR_KIND_CALL], 2);
	CHECK_EQ(res->unclassified, 0);

	CHECK_EQ(res->n_threads, 2);
	CHECK_EQ(res->threads[0].tid, 1);
	CHECK_EQ(res->threads[0].insns, 20);
	CHECK_EQ(res->threads[0].branches, 5);
	CHECK_EQ(res->threads[1].tid, 2);
	CHECK_EQ(res->threads[1].insns, 10);
	CHECK_STR(res->threads[1].name, "worker");

	CHECK_EQ(res->gaps, 3);
	CHECK_EQ(res->overflows, 1);
	CHECK_EQ(res->n_gap_list, 3);
	CHECK_EQ(res->gap_list[0].reason, -BTR_ERR_NOMAP);
	CHECK_EQ(res->gap_list[0].from_flow, 1);
	CHECK_EQ(res->gap_list[2].reason, -BTR_ERR_TRUNCATED);
	CHECK_EQ(res->gap_list[2].offset, 0x1234);
	CHECK_EQ(res->gap_list[2].from_flow, 0);

	/* Functions: fa 14, [unknown] 7, fb 6, fc 3. */
	CHECK_EQ(res->n_functions, 4);
	CHECK_EQ(res->n_top_functions, 4);
	CHECK_STR(res->top_functions[0].name, "rep_fa");
	CHECK_EQ(res->top_functions[0].insns, 14);
	CHECK_EQ(res->top_functions[0].branches, 3);
	CHECK_EQ(res->top_functions[0].addr, fa);
	CHECK(res->top_functions[0].module && strstr(res->top_functions[0].module, "exe"));
	CHECK(res->top_functions[0].file && strstr(res->top_functions[0].file, "test_report.c"));
	CHECK(res->top_functions[0].line > 0);
	CHECK(res->top_functions[1].file == NULL);
	CHECK_STR(res->top_functions[1].name, "[unknown]");
	CHECK_EQ(res->top_functions[1].insns, 7);
	CHECK_STR(res->top_functions[2].name, "rep_fb");
	CHECK_EQ(res->top_functions[2].insns, 6);
	CHECK_EQ(res->top_functions[2].branches, 2);
	CHECK_STR(res->top_functions[3].name, "rep_fc");
	CHECK_EQ(res->top_functions[3].insns, 3);
	uint64_t sum = 0;
	for (size_t i = 0; i < res->n_top_functions; i++)
		sum += res->top_functions[i].insns;
	CHECK_EQ(sum, res->insns);

	/* Blocks: 7 distinct, 5 with a known start. */
	CHECK_EQ(res->n_blocks, 7);
	CHECK_EQ(res->n_top_blocks, 5);
	CHECK_EQ(res->top_blocks[0].start, fa);
	CHECK_EQ(res->top_blocks[0].end, fa + 0x10);
	CHECK_EQ(res->top_blocks[0].count, 2);
	CHECK_EQ(res->top_blocks[0].insns, 10);
	CHECK_STR(res->top_blocks[0].sym, "rep_fa");
	CHECK(res->top_blocks[0].file && strstr(res->top_blocks[0].file, "test_report.c"));
	CHECK(res->top_blocks[0].line > 0);
	CHECK_EQ(res->top_blocks[1].start, k);
	CHECK_EQ(res->top_blocks[1].insns, 7);
	CHECK_STR(res->top_blocks[1].sym, "0xffffffff81000000");
	CHECK_EQ(res->top_blocks[2].start, fa + 0x15);
	CHECK_EQ(res->top_blocks[2].end, fa + 0x20);
	CHECK_STR(res->top_blocks[2].sym, "rep_fa+0x15");
	CHECK_EQ(res->top_blocks[3].start, fb);
	CHECK_EQ(res->top_blocks[3].insns, 3);
	CHECK_EQ(res->top_blocks[4].start, fc + 6);
	CHECK_EQ(res->top_blocks[4].end, fc + 8);

	CHECK_EQ(res->exit.valid, 1);
	CHECK_EQ(res->exit.signo, 11);
	CHECK_EQ(res->exit.ip, fc + 6);
	CHECK_STR(res->exit.where, "rep_fc+0x6");
	btr_report_free(r);

	/* The same stream with top = 2 keeps the two best of each list. */
	ro.top = 2;
	CHECK_EQ(btr_report_new(&ro, &r), 0);
	flow_ev(r, 1, BTR_FLOW_ENABLE, fa, 0);
	for (size_t i = 0; i < 4; i++)
		btr_report_branch(r, &b[i]);
	for (size_t i = 0; i < 3; i++)
		btr_report_branch(r, &c[i]);
	CHECK_EQ(btr_report_finish(r, img, "perf"), 0);
	res = btr_report_get(r);
	CHECK_STR(res->backend, "perf");
	CHECK_EQ(res->n_top_functions, 2);
	CHECK_EQ(res->n_functions, 4);
	CHECK_EQ(res->n_top_blocks, 2);
	CHECK_EQ(res->top_blocks[0].insns, 10);
	CHECK_EQ(res->top_blocks[1].insns, 7);
	CHECK_EQ(res->exit.valid, 0);
	btr_report_free(r);
	btr_image_free(img);
}

/* EXEC: what was seen before is named with the old image, what comes
 * after with the new one. */
static void test_exec(void)
{
	struct btr_image *old, *nu;
	CHECK_EQ(btr_image_new(&old), 0);
	CHECK_EQ(btr_image_new(&nu), 0);
	CHECK_EQ(btr_image_add_elf(old, "/proc/self/exe", main_bias, 0), 0);
	uint64_t fa = (uint64_t)(uintptr_t)&rep_fa;
	struct btr_report *r;
	CHECK_EQ(btr_report_new(NULL, &r), 0);
	flow_ev(r, 1, BTR_FLOW_ENABLE, fa, 0);
	struct btr_branch b = br(1, fa + 0x10, fa + 0x20, BTR_KIND_JMP, 6, BTR_BF_TAKEN);
	CHECK_EQ(btr_report_branch(r, &b), 0);
	struct btr_record x = { .type = BTR_REC_EXEC, .u.module = { .pid = 1, .path = "/bin/new" } };
	struct btr_stream_event ev = { .type = BTR_SEV_EXEC, .tid = 1, .rec = &x, .image = old };
	CHECK_EQ(btr_report_event(r, &ev), 0);
	/* The same addresses after the exec belong to a program without symbols. */
	flow_ev(r, 1, BTR_FLOW_ENABLE, fa, 0);
	b.insns = 2;
	CHECK_EQ(btr_report_branch(r, &b), 0);
	CHECK_EQ(btr_report_finish(r, nu, NULL), 0);
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_EQ(res->n_functions, 2);
	CHECK_STR(res->top_functions[0].name, "rep_fa");
	CHECK_EQ(res->top_functions[0].insns, 6);
	CHECK_STR(res->top_functions[1].name, "[unknown]");
	CHECK_EQ(res->top_functions[1].insns, 2);
	CHECK_EQ(res->n_blocks, 2);
	CHECK_EQ(res->n_top_blocks, 2);
	CHECK_STR(res->top_blocks[0].sym, "rep_fa");
	CHECK_EQ(res->top_blocks[1].start, fa);
	CHECK(res->top_blocks[1].sym && !strncmp(res->top_blocks[1].sym, "0x", 2));
	btr_report_free(r);
	btr_image_free(old);
	btr_image_free(nu);
}

/* Memory follows distinct blocks and threads, not the number of
 * branches: two million branches over 64 blocks in 4 threads allocate
 * the same as the first few thousand. */
static void test_memory_bounded(void)
{
	struct btr_report *r;
	CHECK_EQ(btr_report_new(NULL, &r), 0);
	size_t before = 0;
	int errs = 0;
	for (uint64_t i = 0; i < 2000000; i++) {
		uint64_t k = i % 64;
		struct btr_branch b = br((uint32_t)(i % 4), 0x400000 + k * 0x40 + 0x20, 0x400000 + ((k + 1) % 64) * 0x40,
					 BTR_KIND_JMP, 3, BTR_BF_TAKEN);
		errs += btr_report_branch(r, &b) != 0;
		if (i == 10000)
			before = mallinfo2().uordblks;
	}
	size_t after = mallinfo2().uordblks;
	CHECK_EQ(errs, 0);
	CHECK(after <= before);
	CHECK_EQ(btr_report_finish(r, NULL, NULL), 0);
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_EQ(res->branches, 2000000);
	CHECK_EQ(res->insns, 6000000);
	CHECK_EQ(res->n_threads, 4);
	/* 64 blocks with a known start, plus one per thread without one. */
	CHECK_EQ(res->n_blocks, 64 + 4);
	CHECK_EQ(res->top_blocks[0].count, 2000000 / 64);
	btr_report_free(r);
}

/* Without instruction counts (LBR) the ranking is by branches. */
static void test_rank_by_branches(void)
{
	struct btr_report *r;
	CHECK_EQ(btr_report_new(NULL, &r), 0);
	struct btr_stream_event disc = { .type = BTR_SEV_DISCONTINUITY, .tid = 5 };
	/* Snapshot 1: 0x100->0x200, 0x210->0x300, 0x310->0x200 */
	/* Snapshot 2: 0x210->0x300, 0x310->0x200 */
	uint64_t s1[][2] = { { 0x100, 0x200 }, { 0x210, 0x300 }, { 0x310, 0x200 } };
	uint64_t s2[][2] = { { 0x210, 0x300 }, { 0x310, 0x200 } };
	CHECK_EQ(btr_report_event(r, &disc), 0);
	for (int i = 0; i < 3; i++) {
		struct btr_branch b = { .from = s1[i][0], .to = s1[i][1], .tid = 5, .kind = BTR_KIND_JMP,
					.flags = BTR_BF_TAKEN | (i == 1 ? BTR_BF_MISPRED : 0) };
		CHECK_EQ(btr_report_branch(r, &b), 0);
	}
	CHECK_EQ(btr_report_event(r, &disc), 0);
	for (int i = 0; i < 2; i++) {
		struct btr_branch b = { .from = s2[i][0], .to = s2[i][1], .tid = 5, .kind = BTR_KIND_NONE,
					.flags = BTR_BF_TAKEN };
		CHECK_EQ(btr_report_branch(r, &b), 0);
	}
	CHECK_EQ(btr_report_finish(r, NULL, NULL), 0);
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_EQ(res->has_insns, 0);
	CHECK_EQ(res->rank_by_insns, 0);
	CHECK_EQ(res->insns, 0);
	CHECK_EQ(res->branches, 5);
	CHECK_EQ(res->mispredicted, 1);
	CHECK_EQ(res->unclassified, 2);
	CHECK_EQ(res->by_class[BTR_LBR_NEAR_REL_JMP], 3);
	/* Blocks with a known start: [0x200,0x210] once (snapshot 1) and
	 * [0x300,0x310] twice.  Joining across the snapshot boundary would
	 * count [0x200,0x210] twice: snapshot 2's first branch has no start. */
	CHECK_EQ(res->n_top_blocks, 2);
	CHECK_EQ(res->top_blocks[0].start, 0x300);
	CHECK_EQ(res->top_blocks[0].end, 0x310);
	CHECK_EQ(res->top_blocks[0].count, 2);
	CHECK_EQ(res->top_blocks[1].start, 0x200);
	CHECK_EQ(res->top_blocks[1].end, 0x210);
	CHECK_EQ(res->top_blocks[1].count, 1);
	CHECK_EQ(res->n_blocks, 4);
	/* Without an image every function is [unknown], with all branches. */
	CHECK_EQ(res->n_functions, 1);
	CHECK_EQ(res->top_functions[0].branches, 5);
	btr_report_free(r);
}

/* ---- real recordings (perf.data with LBR) ---- */

/* Runs a report over perf.data @path the way `btr report` does. */
static struct btr_report *report_perf(const char *path, const struct btr_stream_elf *elfs, unsigned n_elfs)
{
	struct btr_stream_opts so = { .sz = sizeof(so), .elfs = elfs, .n_elfs = n_elfs };
	struct btr_report_opts ro = { .sz = sizeof(ro), .top = 5 };
	struct btr_report *r = NULL;
	int lost = -1;
	CHECK_EQ(btr_report_trace(path, &so, &ro, &r, &lost), 0);
	CHECK_EQ(lost, 0);
	return r;
}

struct pair { uint64_t a, b; };
static int cmp_pair(const void *x, const void *y)
{
	const struct pair *p = x, *q = y;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return p->b < q->b ? -1 : p->b > q->b;
}

/* Facts counted here straight from the perf reader's LBR records. */
struct lbr_facts {
	uint64_t entries, kernel, outside;  /* outside: from not in [lo, hi) */
	uint64_t hot_from, hot_from_count;  /* most frequent source in [lo, hi) */
	struct pair hot_block;              /* most frequent [to(i+1), from(i)] */
	uint64_t hot_block_count;
	uint64_t hot_fn_addr, hot_fn_count; /* function (by @img) with most sources */
};

static void count_lbr(const char *path, uint64_t lo, uint64_t hi, struct btr_image *img, struct lbr_facts *f)
{
	memset(f, 0, sizeof(*f));
	struct btr_perf_reader *pr;
	CHECK_EQ(btr_perf_reader_new(path, &pr), 0);
	size_t cap = 1 << 16, nf = 0, nb = 0;
	struct pair *froms = malloc(cap * sizeof(*froms)), *blocks = malloc(cap * sizeof(*blocks));
	struct btr_record rec;
	while (btr_perf_read(pr, &rec) == 0) {
		if (rec.type != BTR_REC_LBR)
			continue;
		const struct btr_lbr_entry *e = rec.u.lbr.entries;
		for (uint32_t i = 0; i < rec.u.lbr.count; i++) {
			if (!e[i].from && !e[i].to)
				continue;
			f->entries++;
			if (e[i].from >= 0xffff800000000000ull)
				f->kernel++;
			if (nf + 1 >= cap || nb + 1 >= cap) {
				cap *= 2;
				froms = realloc(froms, cap * sizeof(*froms));
				blocks = realloc(blocks, cap * sizeof(*blocks));
			}
			if (e[i].from < lo || e[i].from >= hi)
				f->outside++;
			else
				froms[nf++] = (struct pair){ e[i].from, 0 };
			struct btr_symbol sy;
			if (img && e[i].from >= lo && e[i].from < hi && btr_image_symbol(img, e[i].from, &sy) == 0)
				froms[nf - 1].b = sy.addr;
			/* entries[i+1] is older: its target starts the block that
			 * entries[i]'s source ends. */
			if (i + 1 < rec.u.lbr.count && e[i + 1].to && e[i + 1].to <= e[i].from &&
			    e[i].from - e[i + 1].to < (1u << 20))
				blocks[nb++] = (struct pair){ e[i + 1].to, e[i].from };
		}
	}
	btr_perf_reader_free(pr);
	qsort(froms, nf, sizeof(*froms), cmp_pair);
	for (size_t i = 0, j; i < nf; i = j) {
		for (j = i; j < nf && froms[j].a == froms[i].a; j++)
			;
		if (j - i > f->hot_from_count) {
			f->hot_from_count = j - i;
			f->hot_from = froms[i].a;
		}
	}
	/* Per function: sort by function address. */
	for (size_t i = 0; i < nf; i++) {
		uint64_t t = froms[i].a;
		froms[i].a = froms[i].b;
		froms[i].b = t;
	}
	qsort(froms, nf, sizeof(*froms), cmp_pair);
	for (size_t i = 0, j; i < nf; i = j) {
		for (j = i; j < nf && froms[j].a == froms[i].a; j++)
			;
		if (froms[i].a && j - i > f->hot_fn_count) {
			f->hot_fn_count = j - i;
			f->hot_fn_addr = froms[i].a;
		}
	}
	qsort(blocks, nb, sizeof(*blocks), cmp_pair);
	for (size_t i = 0, j; i < nb; i = j) {
		for (j = i; j < nb && !cmp_pair(&blocks[j], &blocks[i]); j++)
			;
		if (j - i > f->hot_block_count) {
			f->hot_block_count = j - i;
			f->hot_block = blocks[i];
		}
	}
	free(froms);
	free(blocks);
}

/* autofdo's test.lbr: `perf record -b` of test.binary on Westmere, with
 * the binary next to it; the recorded path (/export/hda3/tmp/...) does
 * not exist here, so the binary is passed like `--elf test.binary`. */
static void test_autofdo_lbr(void)
{
	const char *lbr = BTR_SHARED_DIR "/traces/autofdo/test.lbr";
	const char *bin = BTR_SHARED_DIR "/traces/autofdo/test.binary";
	if (access(lbr, R_OK) || access(bin, R_OK)) {
		printf("autofdo test.lbr / test.binary absent: real-data part skipped\n");
		return;
	}
	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, bin, 0, 0), 0);
	/* test.binary's text: from the image, not from the report. */
	uint64_t lo = 0x400000, hi = 0x400000 + 0xa000;  /* its MMAP record: start 0x400000 size 0xa000 */
	struct lbr_facts f;
	count_lbr(lbr, lo, hi, img, &f);
	CHECK(f.entries > 1000);
	struct btr_symbol hot;
	CHECK_EQ(btr_image_symbol(img, f.hot_from, &hot), 0);

	struct btr_stream_elf e = { .path = bin };
	struct btr_report *r = report_perf(lbr, &e, 1);
	if (!r)
		return;
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_STR(res->backend, "perf");
	CHECK_EQ(res->has_insns, 0);
	CHECK_EQ(res->rank_by_insns, 0);
	CHECK_EQ(res->branches, f.entries);
	CHECK_EQ(res->taken, f.entries);
	CHECK_EQ(res->by_class[BTR_LBR_CPL_EQ_0], f.kernel);
	CHECK_EQ(res->by_class[BTR_LBR_CPL_NEQ_0], f.entries - f.kernel);
	/* Branches inside test.binary are classified from its code; only
	 * those elsewhere (kernel, libc: no files here) may stay unknown. */
	CHECK(res->unclassified <= f.outside);
	CHECK(res->unclassified < res->branches / 2);
	uint64_t sum = 0;
	for (int c = BTR_LBR_JCC; c < BTR_LBR__COUNT; c++)
		sum += res->by_class[c];
	CHECK_EQ(sum + res->unclassified, res->branches);

	/* The top function is named from test.binary's symbols: it is the
	 * one holding the most branch sources, counted here entry by entry
	 * with a separate image; and the single hottest branch source lies
	 * in one of the top functions. */
	struct btr_symbol hf;
	CHECK_EQ(btr_image_symbol(img, f.hot_fn_addr, &hf), 0);
	CHECK(res->n_top_functions >= 1);
	if (res->n_top_functions) {
		printf("autofdo: top function %s (%" PRIu64 " branches); counted: %s (%" PRIu64
		       "); hottest source 0x%" PRIx64 " in %s (%" PRIu64 ")\n",
		       res->top_functions[0].name, res->top_functions[0].branches, hf.name, f.hot_fn_count,
		       f.hot_from, hot.name, f.hot_from_count);
		CHECK_STR(res->top_functions[0].name, hf.name);
		CHECK_EQ(res->top_functions[0].addr, hf.addr);
		CHECK_EQ(res->top_functions[0].branches, f.hot_fn_count);
		CHECK(res->top_functions[0].module && strstr(res->top_functions[0].module, "test.binary"));
		int found = 0;
		for (size_t i = 0; i < res->n_top_functions; i++)
			if (!strcmp(res->top_functions[i].name, hot.name) && res->top_functions[i].addr == hot.addr)
				found = res->top_functions[i].branches >= f.hot_from_count;
		CHECK(found);
	}
	/* The top block is the most frequent [target, next source] pair. */
	CHECK(res->n_top_blocks >= 1);
	if (res->n_top_blocks) {
		CHECK_EQ(res->top_blocks[0].count, f.hot_block_count);
		CHECK_EQ(res->top_blocks[0].start, f.hot_block.a);
		CHECK_EQ(res->top_blocks[0].end, f.hot_block.b);
		char want[256];
		btr_image_symbolize(img, f.hot_block.a, want, sizeof(want));
		CHECK_STR(res->top_blocks[0].sym, want);
	}
	uint64_t fsum = 0;
	for (size_t i = 0; i < res->n_top_functions; i++)
		fsum += res->top_functions[i].branches;
	CHECK(fsum <= res->branches);
	CHECK(res->n_modules >= 1);
	btr_report_free(r);
	btr_image_free(img);
}

/* quipper's perf.data.branch-4.14: `perf record -b -- echo` on Skylake,
 * 32-deep LBR, binaries not available: counts only. */
static void test_quipper_branch(void)
{
	const char *path = BTR_SHARED_DIR "/traces/quipper/perf.data.branch-4.14";
	if (access(path, R_OK)) {
		printf("quipper perf.data.branch-4.14 absent: skipped\n");
		return;
	}
	struct lbr_facts f;
	count_lbr(path, 0, 0, NULL, &f);
	struct btr_report *r = report_perf(path, NULL, 0);
	if (!r)
		return;
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_EQ(res->branches, f.entries);
	CHECK(res->branches > 100);
	CHECK_EQ(res->by_class[BTR_LBR_CPL_EQ_0], f.kernel);
	CHECK(res->n_threads >= 1);
	CHECK(res->n_modules >= 1);
	CHECK(res->n_top_blocks >= 1);
	if (res->n_top_blocks)
		CHECK_EQ(res->top_blocks[0].count, f.hot_block_count);
	btr_report_free(r);
}

/* quipper's perf.data.intel_pt-4.14: real Skylake PT whose binaries are
 * not here.  The stream must decode it without data loss and report the
 * missing code as decoder gaps (no code image), not fail. */
static void test_quipper_pt(void)
{
	const char *path = BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14";
	if (access(path, R_OK)) {
		printf("quipper perf.data.intel_pt-4.14 absent: skipped\n");
		return;
	}
	struct btr_report *r = report_perf(path, NULL, 0);
	if (!r)
		return;
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_STR(res->backend, "perf");
	CHECK(res->gaps > 0);
	CHECK(res->n_gap_list > 0);
	int nomap = 0;
	for (size_t i = 0; i < res->n_gap_list; i++)
		nomap += res->gap_list[i].reason == -BTR_ERR_NOMAP && res->gap_list[i].from_flow;
	CHECK(nomap > 0);
	CHECK(res->n_modules > 0);
	btr_report_free(r);
}

/* TSX: a thread's run of BTR_BF_IN_TX branches ended by a BTR_BF_TSX_ABORT
 * branch was rolled back - left out of the blocks (the coverage of btr
 * cov); one ended by another branch committed (btr/blocks.h).  The aborted
 * instructions are counted from the decoder's BTR_FLOW_TSX_ABORT event. */
static void test_tsx(void)
{
	const uint16_t T = BTR_BF_TAKEN, X = BTR_BF_TAKEN | BTR_BF_IN_TX;
	struct btr_branch b[] = {
		br(1, 0x1010, 0x1100, BTR_KIND_JMP, 4, T),
		br(1, 0x1108, 0x1200, BTR_KIND_JMP, 3, X),       /* aborted: [0x1100, 0x1108] */
		br(1, 0x1204, 0x1300, BTR_KIND_JCC, 2, X),       /* aborted: [0x1200, 0x1204] */
		br(1, 0x1302, 0x1400, BTR_KIND_ASYNC, 1, T | BTR_BF_TSX_ABORT), /* [0x1300, 0x1302) */
		br(1, 0x1408, 0x1500, BTR_KIND_JMP, 5, T),       /* [0x1400, 0x1408] */
		br(1, 0x1508, 0x1600, BTR_KIND_JMP, 2, X),       /* committed: [0x1500, 0x1508] */
		br(1, 0x1604, 0x1700, BTR_KIND_JMP, 3, T),       /* [0x1600, 0x1604] */
		br(1, 0x1708, 0x1800, BTR_KIND_JMP, 1, X),       /* open at the end: committed */
	};
	const size_t n = sizeof(b) / sizeof(b[0]);
	/* the decoder reports the abort before the abort branch */
	struct btr_flow_event fe = { .type = BTR_FLOW_TSX_ABORT, .ip = 0x1302, .payload = 6 };
	struct btr_stream_event ab = { .type = BTR_SEV_FLOW, .tid = 1, .flow = &fe };

	struct btr_report *r;
	struct btr_report_opts ro = { .sz = sizeof(ro), .top = 10 };
	CHECK_EQ(btr_report_new(&ro, &r), 0);
	for (size_t i = 0; i < n; i++) {
		if (i == 3)
			CHECK_EQ(btr_report_event(r, &ab), 0);
		CHECK_EQ(btr_report_branch(r, &b[i]), 0);
	}
	CHECK_EQ(btr_report_finish(r, NULL, NULL), 0);
	const struct btr_report_result *res = btr_report_get(r);
	CHECK_EQ(res->insns, 21);
	CHECK_EQ(res->tsx_aborts, 1);
	CHECK_EQ(res->aborted_insns, 6);
	btr_report_free(r);

	struct btr_analysis *bl;
	struct btr__analysis_mux *m;
	CHECK_EQ(btr_blocks_new(&bl), 0);
	CHECK_EQ(btr__analysis_mux_new(&bl, 1, &m), 0);
	CHECK_EQ(btr__analysis_mux_begin(m, NULL), 0);
	CHECK_EQ(btr__analysis_mux_branches(m, b, 3), 0);   /* the abort comes in the next batch */
	CHECK_EQ(btr__analysis_mux_event(m, &ab), 0);
	CHECK_EQ(btr__analysis_mux_branches(m, b + 3, n - 3), 0);
	CHECK_EQ(btr__analysis_mux_end(m, 0), 0);
	const struct btr_blocks_result *br_ = btr_blocks_get(bl);
	CHECK(br_ != NULL);
	if (br_) {
		CHECK_EQ(br_->insns, 21);
		CHECK_EQ(br_->tsx_aborts, 1);
		CHECK_EQ(br_->aborted_insns, 6);
		unsigned seen = 0;
		for (size_t i = 0; i < br_->n_blocks; i++) {
			uint64_t s0 = br_->blocks[i].start;
			CHECK(s0 != 0x1100 && s0 != 0x1200 && s0 != 0x1300);
			seen |= (s0 == 0x1400) | (s0 == 0x1500) << 1 | (s0 == 0x1600) << 2 | (s0 == 0x1700) << 3;
		}
		CHECK_EQ(seen, 15u);
	}
	btr__analysis_mux_free(m);
	btr_analysis_free(bl);
}

int main(void)
{
	test_tsx();
	test_synthetic();
	test_exec();
	test_memory_bounded();
	test_rank_by_branches();
	test_autofdo_lbr();
	test_quipper_branch();
	test_quipper_pt();
	return check_done();
}
