/* test_tsx_views.c - a TSX transaction that aborts, through `btr report`
 * and `btr cov`: a .btr whose PT stream runs code of this program (the
 * tsxv_* labels below) and a transaction that begins after a first jump,
 * takes a second jump and aborts.  The report must count the aborted
 * instructions; the coverage must leave the transaction's blocks out and
 * keep the others.  Both with the branches counted by the decoder (the
 * default of count views) and in order (BTR_ORDERED=1); and a loop traced
 * the same way shows that an analysis with ops->counts really gets
 * counts from btr_analysis_run (and branches in order with
 * BTR_ORDERED=1). */
#include "check.h"
#include "btr/btr.h"
#include "btr/analysis.h"
#include "btr/pt.h"
#include "btr/trace.h"

#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BTR BTR_BINARY_DIR "/btr"

/* l0 nop; l1 jmp l2; [begin] l2 nop; l3 jmp l5; l4 hlt; l5 nop; [abort at
 * l6] l6 nop; l7 hlt; [handler] l8 nop; l9 jmp l10; l10 hlt */
__asm__(".text\n.p2align 6\n"
	".globl tsxv_l0, tsxv_l2, tsxv_l5, tsxv_l6, tsxv_l8, tsxv_l10\n"
	"tsxv_l0: nop\n"
	"tsxv_l1: jmp tsxv_l2\n"
	"tsxv_l2: nop\n"
	"tsxv_l3: jmp tsxv_l5\n"
	"tsxv_l4: hlt\n"
	"tsxv_l5: nop\n"
	"tsxv_l6: nop\n"
	"tsxv_l7: hlt\n"
	"tsxv_l8: nop\n"
	"tsxv_l9: jmp tsxv_l10\n"
	"tsxv_l10: hlt\n"
	".globl tsxv_loop\n"
	"tsxv_loop: nop\n"
	"jne tsxv_loop\n"
	"hlt\n");
extern const char tsxv_l0[], tsxv_l2[], tsxv_l5[], tsxv_l6[], tsxv_l8[], tsxv_l10[], tsxv_loop[];

static struct { uint64_t vaddr, offset, memsz, bias; int found; } text;
static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	uint64_t a = (uint64_t)(uintptr_t)tsxv_l0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_LOAD && a >= info->dlpi_addr + p->p_vaddr &&
		    a < info->dlpi_addr + p->p_vaddr + p->p_memsz) {
			text.vaddr = p->p_vaddr;
			text.offset = p->p_offset;
			text.memsz = p->p_memsz;
			text.bias = info->dlpi_addr;
			text.found = 1;
		}
	}
	return 1;   /* the first object is the program */
}

static size_t pt_stream(uint8_t *buf, size_t size)
{
	struct btr_pt_encoder e;
	btr_pt_enc_init(&e, buf, size);
	struct btr_pt_packet k = { 0 };
	CHECK(btr_pt_enc_psb(&e, (uint64_t)(uintptr_t)tsxv_l0) > 0);
	k.type = BTR_PT_MODE_TSX;
	k.u.mode_tsx.intx = 1;
	CHECK(btr_pt_enc_packet(&e, &k) > 0);
	CHECK(btr_pt_enc_ip(&e, BTR_PT_FUP, (uint64_t)(uintptr_t)tsxv_l2) > 0);
	k.u.mode_tsx.intx = 0;
	k.u.mode_tsx.abrt = 1;
	CHECK(btr_pt_enc_packet(&e, &k) > 0);
	CHECK(btr_pt_enc_ip(&e, BTR_PT_FUP, (uint64_t)(uintptr_t)tsxv_l6) > 0);
	CHECK(btr_pt_enc_ip(&e, BTR_PT_TIP, (uint64_t)(uintptr_t)tsxv_l8) > 0);
	CHECK(btr_pt_enc_ip(&e, BTR_PT_FUP, (uint64_t)(uintptr_t)tsxv_l10) > 0);
	k = (struct btr_pt_packet){ .type = BTR_PT_TIP_PGD };
	k.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
	CHECK(btr_pt_enc_packet(&e, &k) > 0);
	return btr_pt_enc_size(&e);
}

/* The loop at tsxv_loop: 40 times taken, then not. */
static size_t pt_loop(uint8_t *buf, size_t size)
{
	struct btr_pt_encoder e;
	btr_pt_enc_init(&e, buf, size);
	CHECK(btr_pt_enc_psb(&e, (uint64_t)(uintptr_t)tsxv_loop) > 0);
	struct btr_pt_packet k = { .type = BTR_PT_TNT };
	k.u.tnt.bits = ((1ull << 40) - 1) << 1;   /* the first bit is the oldest */
	k.u.tnt.count = 41;
	CHECK(btr_pt_enc_packet(&e, &k) > 0);
	return btr_pt_enc_size(&e);
}

static void write_trace(const char *path, size_t (*stream)(uint8_t *, size_t))
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	CHECK(n > 0);
	exe[n > 0 ? n : 0] = 0;
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	struct btr_record r = { .type = BTR_REC_MACHINE };
	snprintf(r.u.machine.backend, sizeof(r.u.machine.backend), "pt");
	r.u.machine.flags = BTR_MACHINE_USER_ONLY;
	CHECK_EQ(btr_trace_write(w, &r), 0);
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_MODULE_LOAD;
	r.u.module.pid = 5;
	r.u.module.prot = 5;
	r.u.module.start = text.bias + text.vaddr;
	r.u.module.size = text.memsz;
	r.u.module.pgoff = text.offset;
	r.u.module.path = exe;
	CHECK_EQ(btr_trace_write(w, &r), 0);
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_THREAD_START;
	r.u.thread.pid = r.u.thread.tid = 5;
	r.u.thread.name = "";
	CHECK_EQ(btr_trace_write(w, &r), 0);
	uint8_t pt[256];
	size_t np = stream(pt, sizeof(pt));
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_PT;
	r.u.data = (struct btr_rec_data){ .tid = 5, .cpu = -1, .stream_offset = 0, .size = np, .data = pt };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	CHECK_EQ(btr_trace_writer_close(w), 0);
}

/* Runs @cmd; its stdout (up to @size - 1 bytes) in @out. */
static void run(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t n = p ? fread(out, 1, size - 1, p) : 0;
	out[n] = 0;
	if (p)
		CHECK_EQ(pclose(p), 0);
}

/* An analysis that takes both forms and tallies them. */
struct tally {
	uint64_t branches, count_calls, counted, max_count;
};

static int t_branches(void *st, const struct btr_branch *b, size_t n)
{
	(void)b;
	((struct tally *)st)->branches += n;
	return 0;
}

static int t_counts(void *st, const struct btr_branch_count *c, size_t n)
{
	struct tally *t = st;
	t->count_calls++;
	for (size_t i = 0; i < n; i++) {
		t->counted += c[i].count;
		if (c[i].count > t->max_count)
			t->max_count = c[i].count;
		/* every run starts at the loop */
		CHECK_EQ(c[i].start, (uintptr_t)tsxv_loop);
	}
	return 0;
}

static const struct btr_analysis_ops tally_ops = { .name = "tally", .branches = t_branches,
						   .counts = t_counts };

static void loop_counts(void)
{
	const char *path = "test_tsx_views_loop.btr";
	write_trace(path, pt_loop);
	for (int ordered = 0; ordered < 2; ordered++) {
		if (ordered)
			setenv("BTR_ORDERED", "1", 1);
		struct tally t = { 0 };
		struct btr_analysis *a;
		CHECK_EQ(btr_analysis_new(&tally_ops, &t, &a), 0);
		CHECK_EQ(btr_analysis_run(path, NULL, &a, 1, NULL), 0);
		btr_analysis_free(a);
		printf("loop, %s: %llu in order, %llu counted (largest count %llu)\n",
		       ordered ? "in order" : "counts", (unsigned long long)t.branches,
		       (unsigned long long)t.counted, (unsigned long long)t.max_count);
		if (ordered) {
			CHECK_EQ(t.branches, 41);
			CHECK_EQ(t.count_calls, 0);
		} else {
			CHECK_EQ(t.branches, 0);
			CHECK_EQ(t.counted, 41);
			CHECK_EQ(t.max_count, 40);
		}
	}
	unsetenv("BTR_ORDERED");
	unlink(path);
}

int main(void)
{
	if (access(BTR, X_OK) != 0)
		check_skip("btr binary not built");
	dl_iterate_phdr(phdr_cb, NULL);
	CHECK(text.found);
	const char *path = "test_tsx_views.btr";
	write_trace(path, pt_stream);
	char out[65536];
	/* twice: the views as they run (the decoder counts branches on its
	 * blocks: btr/ptflow.h "counts"), then with every branch in order */
	for (int pass = 0; pass < 2; pass++) {
	if (pass)
		setenv("BTR_ORDERED", "1", 1);

	/* the flow: l0 l1 | ? l2 l3 l5 | [abort] l8 l9 */
	run(BTR " pt decode test_tsx_views.btr --insn 2>&1", out, sizeof(out));
	printf("%s", out);
	char want[64];
	snprintf(want, sizeof(want), "%016llx ?\n", (unsigned long long)(uintptr_t)tsxv_l5);
	CHECK(strstr(out, want) != NULL);
	snprintf(want, sizeof(want), "%016llx\n", (unsigned long long)(uintptr_t)tsxv_l8);
	CHECK(strstr(out, want) != NULL);

	run(BTR " report test_tsx_views.btr --format json 2>&1", out, sizeof(out));
	CHECK(strstr(out, "\"tsx_aborts\": 1") != NULL);
	CHECK(strstr(out, "\"aborted_instructions\": 3") != NULL);   /* l2, l3, l5 */
	CHECK(strstr(out, "\"instructions\": 7") != NULL);           /* l0 l1 l2 l3 l5 l8 l9 */
	run(BTR " report test_tsx_views.btr 2>&1", out, sizeof(out));
	CHECK(strstr(out, "aborted instructions: 3 (in 1 aborted TSX transaction") != NULL);

	/* coverage: the blocks [l0, l1] and [l8, l9] - not [l2, l3], [l5, l6) */
	run(BTR " cov test_tsx_views.btr --format drcov -o - 2>/dev/null", out, sizeof(out));
	CHECK(strstr(out, "BB Table: 2 bbs") != NULL);
	run(BTR " cov test_tsx_views.btr --format drcov -o /dev/null 2>&1", out, sizeof(out));
	CHECK(strstr(out, "aborted instructions: 3 (in 1 aborted TSX transaction)") != NULL);
	}
	unlink(path);
	unsetenv("BTR_ORDERED");
	loop_counts();
	return check_done();
}
