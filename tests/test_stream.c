/* test_stream.c - the common branch stream over .btr traces written here:
 * PT (encoded with the packet encoder over a tiny code image), BTS, LBR,
 * decoded branches, modules (load bias, build-id, path remapping),
 * filters, gaps, truncation. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btr/btr.h"
#include "btr/bts.h"
#include "btr/pt.h"
#include "btr/stream.h"
#include "btr/trace.h"
#include "check.h"

/* The tiny program the PT, BTS and LBR streams "execute":
 *   0x1000 31 c0             xor eax, eax
 *   0x1002 ff c0             inc eax           <- loop
 *   0x1004 83 f8 03          cmp eax, 3
 *   0x1007 75 f9             jne 0x1002
 *   0x1009 e8 02 00 00 00    call 0x1010
 *   0x100e 0f 05             syscall
 *   0x1010 c3                ret
 */
static const uint8_t code[] = { 0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x03, 0x75, 0xf9,
				0xe8, 0x02, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3 };
#define CODE_BASE 0x1000

#define MAX_SEEN 1024
struct seen {
	struct btr_branch b[MAX_SEEN];
	size_t n;
	int ev_count[32];
	struct btr_stream_event ev[MAX_SEEN];   /* copies; pointers not kept */
	size_t n_ev;
	char module_path[MAX_SEEN][PATH_MAX];   /* MODULE_LOAD .path per event, "" if NULL */
	int ev_flow_type[MAX_SEEN];             /* FLOW: the flow event's type */
	int windows;                            /* DISCONTINUITY events of WINDOW records */
	uint64_t win_off[8];                    /* their .offset */
};

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct seen *s = ctx;
	if (s->n < MAX_SEEN)
		s->b[s->n] = *b;
	s->n++;
	return 0;
}

static uint64_t insn_count[16];
static int on_insn(void *ctx, uint32_t tid, uint64_t ip, const struct btr_insn *insn)
{
	(void)ctx;
	if (tid < 16 && ip >= CODE_BASE && ip < CODE_BASE + sizeof(code) && insn->ip == ip)
		insn_count[tid]++;
	return 0;
}

static int on_event(void *ctx, const struct btr_stream_event *ev)
{
	struct seen *s = ctx;
	s->ev_count[ev->type]++;
	if (ev->type == BTR_SEV_DISCONTINUITY && ev->rec && ev->rec->type == BTR_REC_WINDOW && s->windows < 8)
		s->win_off[s->windows++] = ev->offset;
	if (s->n_ev < MAX_SEEN) {
		s->ev[s->n_ev] = *ev;
		snprintf(s->module_path[s->n_ev], PATH_MAX, "%s", ev->path ? ev->path : "");
		s->ev_flow_type[s->n_ev] = ev->flow ? (int)ev->flow->type : 0;
		s->ev[s->n_ev].rec = NULL;
		s->ev[s->n_ev].flow = NULL;
		s->n_ev++;
	}
	return 0;
}

/* Log capture: counts warnings containing "build-id". */
static int buildid_warnings;
static void log_cb(void *ctx, enum btr_log_level level, const char *msg)
{
	(void)ctx;
	if (level == BTR_LOG_WARN && strstr(msg, "build-id"))
		buildid_warnings++;
}

/* One pass of the program as PT: PSB, TIP.PGE at 0x1000, the loop's
 * conditional outcomes T T N, the return as a TIP (no return
 * compression), and TIP.PGD with suppressed IP at the syscall (tracing
 * user mode only).  Returns the size. */
static size_t encode_pass(uint8_t *buf, size_t size)
{
	struct btr_pt_encoder e;
	struct btr_pt_tnt_acc t;
	btr_pt_enc_init(&e, buf, size);
	btr_pt_tnt_init(&t, 0);
	CHECK(btr_pt_enc_psb(&e, 0) > 0);
	CHECK(btr_pt_enc_ip(&e, BTR_PT_TIP_PGE, 0x1000) > 0);
	btr_pt_tnt_add(&e, &t, 1);
	btr_pt_tnt_add(&e, &t, 1);
	btr_pt_tnt_add(&e, &t, 0);
	CHECK_EQ(btr_pt_tnt_flush(&e, &t), 1);
	CHECK(btr_pt_enc_ip(&e, BTR_PT_TIP, 0x100e) > 0);
	struct btr_pt_packet pgd = { .type = BTR_PT_TIP_PGD };
	pgd.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
	CHECK(btr_pt_enc_packet(&e, &pgd) > 0);
	return btr_pt_enc_size(&e);
}

static void write_rec(struct btr_trace_writer *w, const struct btr_record *r)
{
	CHECK_EQ(btr_trace_write(w, r), 0);
}

static void write_data(struct btr_trace_writer *w, enum btr_rec_type type, uint32_t tid, uint64_t off,
		       const uint8_t *data, size_t size)
{
	struct btr_record r = { .type = type };
	r.u.data = (struct btr_rec_data){ .tid = tid, .cpu = -1, .stream_offset = off, .size = size, .data = data };
	write_rec(w, &r);
}

/* Expected branches of one PT pass (the syscall's end is the decoder's
 * business and is not asserted here). */
static void check_pass(const struct btr_branch *b, uint32_t tid)
{
	static const struct { uint64_t from, to; int kind; uint64_t insns; int taken; } want[] = {
		{ 0x1007, 0x1002, BTR_KIND_JCC, 4, 1 },  /* xor inc cmp jne */
		{ 0x1007, 0x1002, BTR_KIND_JCC, 3, 1 },  /* inc cmp jne */
		{ 0x1007, 0x1009, BTR_KIND_JCC, 3, 0 },  /* not taken: .to is the fall-through */
		{ 0x1009, 0x1010, BTR_KIND_CALL, 1, 1 },
		{ 0x1010, 0x100e, BTR_KIND_RET, 1, 1 },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_EQ(b[i].from, want[i].from);
		CHECK_EQ(b[i].to, want[i].to);
		CHECK_EQ(b[i].kind, want[i].kind);
		CHECK_EQ(b[i].tid, tid);
		CHECK(b[i].flags & BTR_BF_INSNS);
		CHECK_EQ(b[i].insns, want[i].insns);
		CHECK_EQ(!!(b[i].flags & BTR_BF_TAKEN), want[i].taken);
	}
}

static size_t count_tid(const struct seen *s, uint32_t tid)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n && i < MAX_SEEN; i++)
		n += s->b[i].tid == tid;
	return n;
}

static void test_pt_bts_lbr(void)
{
	const char *path = "test_stream_pt.btr";
	uint8_t pt[256];
	size_t n = encode_pass(pt, sizeof(pt));
	CHECK(n > 20);

	struct btr_trace_writer *w;
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .chunk_size = 512 };
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	struct btr_record m = { .type = BTR_REC_MACHINE };
	snprintf(m.u.machine.backend, sizeof(m.u.machine.backend), "test");
	m.u.machine.flags = BTR_MACHINE_USER_ONLY; /* no RETCOMP: returns are TIPs */
	write_rec(w, &m);
	/* Thread 7: the pass cut in two records in the middle of a packet. */
	write_data(w, BTR_REC_PT, 7, 0, pt, 5);
	write_data(w, BTR_REC_PT, 7, 5, pt + 5, n - 5);
	/* Thread 8: one pass in one record, interleaved with thread 7. */
	write_data(w, BTR_REC_PT, 8, 0, pt, n);
	/* Thread 7 again after a hole of 100 bytes: a gap, then a new pass. */
	write_data(w, BTR_REC_PT, 7, n + 100, pt, n);

	/* BTS for thread 9: jne taken, call, ret; cut at byte 30. */
	uint8_t bts[72];
	btr_bts_encode(0x1007, 0x1002, 1, bts);
	btr_bts_encode(0x1009, 0x1010, 0, bts + 24);
	btr_bts_encode(0x1010, 0x100e, 0, bts + 48);
	write_data(w, BTR_REC_BTS, 9, 0, bts, 30);
	write_data(w, BTR_REC_BTS, 9, 30, bts + 30, 42);
	/* ... and a record after a hole: a gap, then the record (jne again). */
	write_data(w, BTR_REC_BTS, 9, 100, bts, 24);

	/* LBR snapshot for thread 10, newest first. */
	struct btr_lbr_entry le[2] = { { .from = 0x1010, .to = 0x100e, .flags = BTR_BF_MISPRED },
				       { .from = 0x1009, .to = 0x1010 } };
	struct btr_record lr = { .type = BTR_REC_LBR };
	lr.u.lbr = (struct btr_rec_lbr){ .pid = 10, .tid = 10, .cpu = 0, .count = 2, .entries = le };
	write_rec(w, &lr);
	struct btr_record ex = { .type = BTR_REC_PROCESS_EXIT };
	ex.u.exit = (struct btr_rec_exit){ .pid = 7, .tid = 7, .code = 3 };
	write_rec(w, &ex);
	CHECK_EQ(btr_trace_writer_close(w), 0);

	struct seen *s = calloc(1, sizeof(*s));
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event,
				      .insn = on_insn, .ctx = s };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_open(path, &so, &st), 0);
	if (!st)
		return;
	CHECK_EQ(btr_image_add_bytes(btr_stream_image(st), code, sizeof(code), CODE_BASE), 0);
	CHECK_EQ(btr_stream_run(st), 0);
	CHECK_STR(btr_stream_backend(st), "test");
	CHECK_EQ(btr_stream_data_lost(st), 0);

	/* Thread 7: a pass, the gap, a pass.  Thread 8: a pass. */
	size_t n7 = count_tid(s, 7), n8 = count_tid(s, 8);
	CHECK(n7 >= 10);
	CHECK(n8 >= 5);
	CHECK_EQ(n7, 2 * n8);
	static struct btr_branch b7[MAX_SEEN], b8[MAX_SEEN], b9[8], b10[8];
	size_t k7 = 0, k8 = 0, k9 = 0, k10 = 0;
	for (size_t i = 0; i < s->n && i < MAX_SEEN; i++) {
		const struct btr_branch *b = &s->b[i];
		if (b->tid == 7)
			b7[k7++] = *b;
		else if (b->tid == 8)
			b8[k8++] = *b;
		else if (b->tid == 9 && k9 < 8)
			b9[k9++] = *b;
		else if (b->tid == 10 && k10 < 8)
			b10[k10++] = *b;
	}
	if (n8 < 5 || n7 < 2 * n8)
		return;   /* reported above; the rest would read garbage */
	check_pass(b7, 7);
	check_pass(b7 + n8, 7);
	check_pass(b8, 8);
	/* The instruction callback sees exactly the instructions the
	 * branches count. */
	uint64_t sum8 = 0;
	for (size_t i = 0; i < k8; i++)
		sum8 += b8[i].insns;
	CHECK(sum8 >= 12);
	CHECK_EQ(insn_count[8], sum8);
	CHECK_EQ(insn_count[7], 2 * sum8);

	/* The holes in thread 7's PT and thread 9's BTS are GAP events at
	 * the offsets where data went missing. */
	CHECK_EQ(s->ev_count[BTR_SEV_GAP], 2);
	int gap7 = 0, gap9 = 0;
	for (size_t i = 0; i < s->n_ev; i++) {
		if (s->ev[i].type != BTR_SEV_GAP)
			continue;
		if (s->ev[i].tid == 7 && s->ev[i].offset == n)
			gap7++;
		if (s->ev[i].tid == 9 && s->ev[i].offset == 72)
			gap9++;
	}
	CHECK_EQ(gap7, 1);
	CHECK_EQ(gap9, 1);
	CHECK(s->ev_count[BTR_SEV_FLOW] >= 3); /* enable of each pass at least */

	/* BTS: three taken branches classified from the image, in order,
	 * then the one after the hole. */
	CHECK_EQ(k9, 4);
	CHECK_EQ(b9[3].from, 0x1007);
	CHECK_EQ(b9[3].to, 0x1002);
	CHECK_EQ(b9[0].from, 0x1007);
	CHECK_EQ(b9[0].kind, BTR_KIND_JCC);
	CHECK(b9[0].flags & BTR_BF_PREDICTED);
	CHECK_EQ(b9[1].from, 0x1009);
	CHECK_EQ(b9[1].kind, BTR_KIND_CALL);
	CHECK_EQ(b9[2].to, 0x100e);
	CHECK_EQ(b9[2].kind, BTR_KIND_RET);

	/* LBR: oldest first, after one DISCONTINUITY. */
	CHECK_EQ(s->ev_count[BTR_SEV_DISCONTINUITY], 1);
	CHECK_EQ(k10, 2);
	CHECK_EQ(b10[0].from, 0x1009);
	CHECK_EQ(b10[0].kind, BTR_KIND_CALL);
	CHECK_EQ(b10[1].from, 0x1010);
	CHECK_EQ(b10[1].kind, BTR_KIND_RET);
	CHECK(b10[1].flags & BTR_BF_MISPRED);

	CHECK_EQ(s->ev_count[BTR_SEV_MACHINE], 1);
	CHECK_EQ(s->ev_count[BTR_SEV_PROCESS_EXIT], 1);
	struct btr_stream_stats stats;
	btr_stream_get_stats(st, &stats);
	CHECK_EQ(stats.pt_bytes, 3 * n);
	CHECK_EQ(stats.bts_bytes, 96);
	CHECK_EQ(stats.lbr_snapshots, 1);
	CHECK_EQ(stats.branches, s->n);
	btr_stream_free(st);

	/* Truncation: cut the file in its last chunk.  Everything before is
	 * delivered, then TRUNCATED, and data_lost is set. */
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	if (f) {
		static uint8_t whole[1 << 16];
		size_t len = fread(whole, 1, sizeof(whole), f);
		fclose(f);
		CHECK(len > 64);
		f = fopen("test_stream_cut.btr", "wb");
		fwrite(whole, 1, len - 20, f);
		fclose(f);
		memset(s, 0, sizeof(*s));
		CHECK_EQ(btr_stream_open("test_stream_cut.btr", &so, &st), 0);
		btr_image_add_bytes(btr_stream_image(st), code, sizeof(code), CODE_BASE);
		CHECK_EQ(btr_stream_run(st), -BTR_ERR_TRUNCATED);
		CHECK_EQ(btr_stream_data_lost(st), 1);
		btr_stream_free(st);
		unlink("test_stream_cut.btr");
	}
	free(s);
	unlink(path);

	/* Missing file and a file that is not a trace. */
	CHECK_EQ(btr_stream_open("/nonexistent/x.btr", &so, &st), -BTR_ERR_NOENT);
	CHECK_EQ(btr_stream_open(BTR_SOURCE_DIR "/tests/check.h", &so, &st), -BTR_ERR_BAD_MAGIC);
}

/* More threads than live decoders: complete streams lose nothing; a
 * stream whose decoder was evicted resumes at its next PSB after a gap. */
static void test_many_threads(void)
{
	uint8_t pt[256];
	size_t n = encode_pass(pt, sizeof(pt));
	struct seen *s = calloc(1, sizeof(*s));
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event, .ctx = s };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	CHECK_EQ(btr_image_add_bytes(btr_stream_image(st), code, sizeof(code), CODE_BASE), 0);
	struct btr_record r = { .type = BTR_REC_PT };
	for (uint32_t t = 100; t < 180; t++) {
		r.u.data = (struct btr_rec_data){ .tid = t, .cpu = -1, .stream_offset = 0, .size = n, .data = pt };
		CHECK_EQ(btr_stream_record(st, &r), 0);
	}
	r.u.data = (struct btr_rec_data){ .tid = 100, .cpu = -1, .stream_offset = n, .size = n, .data = pt };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_stream_finish(st), 0);
	size_t n100 = 0, n150 = 0;
	for (size_t i = 0; i < s->n && i < MAX_SEEN; i++) {
		n100 += s->b[i].tid == 100;
		n150 += s->b[i].tid == 150;
	}
	CHECK(s->n >= 81 * 5);
	CHECK(n150 >= 5);
	CHECK_EQ(n100, 2 * n150);
	CHECK_EQ(s->ev_count[BTR_SEV_GAP], 1);
	btr_stream_free(st);
	free(s);
}

/* A BTS stream that ends inside a record: the complete record is
 * delivered and the partial one reported as a gap at the end. */
static void test_bts_tail(void)
{
	uint8_t bts[48];
	btr_bts_encode(0x1009, 0x1010, 0, bts);
	btr_bts_encode(0x1010, 0x100e, 0, bts + 24);
	struct seen *s = calloc(1, sizeof(*s));
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event, .ctx = s };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	struct btr_record r = { .type = BTR_REC_BTS };
	r.u.data = (struct btr_rec_data){ .tid = 3, .cpu = -1, .stream_offset = 0, .size = 30, .data = bts };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(s->n, 1);
	CHECK_EQ(s->ev_count[BTR_SEV_GAP], 0);
	CHECK_EQ(btr_stream_finish(st), 0);
	CHECK_EQ(s->ev_count[BTR_SEV_GAP], 1);
	CHECK_EQ(s->ev[0].offset, 24);
	CHECK_EQ(s->ev[0].reason, -BTR_ERR_TRUNCATED);
	btr_stream_free(st);
	free(s);
}

/* Decoded branches with a filter: dropped branches' instructions move to
 * the next delivered branch of the same thread. */
static void test_filter(void)
{
	struct btr_filter flt;
	CHECK_EQ(btr_filter_parse("near_rel_call", &flt), 0);
	struct seen *s = calloc(1, sizeof(*s));
	struct btr_stream_opts so = { .sz = sizeof(so), .filter = &flt, .branch = on_branch, .ctx = s };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	struct btr_branch br[] = {
		{ .from = 0x10, .to = 0x20, .tid = 1, .kind = BTR_KIND_JCC, .insns = 4, .flags = BTR_BF_INSNS | BTR_BF_TAKEN },
		{ .from = 0x30, .to = 0x40, .tid = 2, .kind = BTR_KIND_JCC, .insns = 50, .flags = BTR_BF_INSNS },
		{ .from = 0x28, .to = 0x10, .tid = 1, .kind = BTR_KIND_JCC, .insns = 3, .flags = BTR_BF_INSNS | BTR_BF_TAKEN },
		{ .from = 0x18, .to = 0x80, .tid = 1, .kind = BTR_KIND_CALL, .insns = 1, .flags = BTR_BF_INSNS | BTR_BF_TAKEN },
		{ .from = 0x88, .to = 0x1d, .tid = 1, .kind = BTR_KIND_RET, .insns = 1, .flags = BTR_BF_INSNS | BTR_BF_TAKEN },
		{ .from = 0x22, .to = 0x80, .tid = 1, .kind = BTR_KIND_CALL, .insns = 2, .flags = BTR_BF_INSNS | BTR_BF_TAKEN },
		{ .from = 0x38, .to = 0x90, .tid = 2, .kind = BTR_KIND_CALL, .insns = 5, .flags = BTR_BF_INSNS | BTR_BF_TAKEN },
	};
	struct btr_record r = { .type = BTR_REC_BRANCHES };
	r.u.branches = (struct btr_rec_branches){ .tid = 0, .count = 7, .branches = br };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_stream_finish(st), 0);
	CHECK_EQ(s->n, 3);
	CHECK_EQ(s->b[0].from, 0x18);
	CHECK_EQ(s->b[0].insns, 4 + 3 + 1);   /* jcc, jcc, the call */
	CHECK_EQ(s->b[1].from, 0x22);
	CHECK_EQ(s->b[1].insns, 1 + 2);       /* ret, the call */
	CHECK_EQ(s->b[2].tid, 2);
	CHECK_EQ(s->b[2].insns, 50 + 5);
	struct btr_stream_stats stats;
	btr_stream_get_stats(st, &stats);
	CHECK_EQ(stats.filtered, 4);
	CHECK_EQ(stats.branches, 3);
	btr_stream_free(st);
	free(s);
}

/* The executable mapping of this program, from /proc/self/maps. */
static int self_mapping(char *path, size_t pathsz, uint64_t *start, uint64_t *end, uint64_t *pgoff)
{
	ssize_t l = readlink("/proc/self/exe", path, pathsz - 1);
	if (l <= 0)
		return -1;
	path[l] = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	char line[PATH_MAX + 128];
	int found = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b, off;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &a, &b, perms, &off, &pos) < 4 || !pos)
			continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = 0;
		if (perms[2] == 'x' && !strcmp(p, path)) {
			*start = a;
			*end = b;
			*pgoff = off;
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

__attribute__((noinline)) int stream_marker_fn(int x)
{
	return x * 3 + 1;
}

struct mod_case {
	const char *what;
	const char *rec_path;
	const char *root;
	const char *debug_dir;
	int use_elf;       /* pass the real file as a user ELF without base */
	int bad_id;        /* corrupt the recorded build-id */
	int want_loaded;
	int want_mismatch;
};

static void test_modules(void)
{
	char self[PATH_MAX], dir[PATH_MAX], nowhere[PATH_MAX + 16];
	uint64_t start, end, pgoff;
	if (self_mapping(self, sizeof(self), &start, &end, &pgoff) < 0) {
		CHECK(!"no executable mapping of this program in /proc/self/maps");
		return;
	}
	snprintf(dir, sizeof(dir), "%s", self);
	*strrchr(dir, '/') = 0;
	snprintf(nowhere, sizeof(nowhere), "/nowhere/%s", strrchr(self, '/') + 1);
	uint8_t id[20];
	int idlen = btr_elf_build_id(self, id, sizeof(id));
	CHECK(idlen > 0);   /* gcc on Debian links with --build-id */

	const struct mod_case cases[] = {
		{ "recorded path", self, NULL, NULL, 0, 0, 1, 0 },
		{ "root remap", "/exe", "/proc/self", NULL, 0, 0, 1, 0 },
		{ "user ELF by name", nowhere, NULL, NULL, 1, 0, 1, 0 },
		{ "user ELF by build-id", "/nowhere/other-name", NULL, NULL, 1, 0, 1, 0 },
		{ "debug dir by name", nowhere, NULL, dir, 0, 0, 1, 0 },
		{ "debug dir by build-id", "/nowhere/other-name", NULL, dir, 0, 0, 1, 0 },
		{ "build-id mismatch", self, NULL, NULL, 0, 1, 1, 1 },
		{ "missing", "/nowhere/zzz-missing", NULL, NULL, 0, 0, 0, 0 },
	};
	btr_log_set(log_cb, NULL, BTR_LOG_WARN);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct mod_case *mc = &cases[c];
		struct seen *s = calloc(1, sizeof(*s));
		struct btr_stream_elf ue = { .path = self };
		const char *dirs[2] = { mc->debug_dir, NULL };
		struct btr_stream_opts so = { .sz = sizeof(so), .event = on_event, .ctx = s, .root = mc->root,
					      .debug_dirs = mc->debug_dir ? dirs : NULL,
					      .elfs = mc->use_elf ? &ue : NULL, .n_elfs = mc->use_elf ? 1 : 0 };
		struct btr_stream *st;
		buildid_warnings = 0;
		CHECK_EQ(btr_stream_new(&so, &st), 0);
		struct btr_record r = { .type = BTR_REC_MODULE_LOAD };
		r.u.module = (struct btr_rec_module){ .pid = 1, .prot = 5, .start = start, .size = end - start,
						      .pgoff = pgoff, .path = mc->rec_path };
		memcpy(r.u.module.build_id, id, sizeof(id));
		r.u.module.build_id_len = (uint8_t)idlen;
		if (mc->bad_id)
			r.u.module.build_id[0] ^= 0xff;
		CHECK_EQ(btr_stream_record(st, &r), 0);
		struct btr_stream_stats stats;
		btr_stream_get_stats(st, &stats);
		char sym[256];
		btr_image_symbolize(btr_stream_image(st), (uint64_t)(uintptr_t)&stream_marker_fn, sym, sizeof(sym));
		int ok = s->ev_count[BTR_SEV_MODULE_LOAD] == 1;
		CHECK(ok);
		if (mc->want_loaded) {
			if (strcmp(sym, "stream_marker_fn"))
				fprintf(stderr, "case '%s': symbolized as %s\n", mc->what, sym);
			CHECK_STR(sym, "stream_marker_fn");
			CHECK_EQ(stats.modules_loaded, 1);
			CHECK(s->module_path[0][0] != 0);
		} else {
			CHECK_EQ(stats.modules_missing, 1);
			CHECK_STR(s->module_path[0], "");
			CHECK(strcmp(sym, "stream_marker_fn") != 0);
		}
		CHECK_EQ(stats.buildid_mismatch, mc->want_mismatch);
		CHECK_EQ(buildid_warnings, mc->want_mismatch);

		/* EXEC of the same pid drops the module from the image. */
		struct btr_record e = { .type = BTR_REC_EXEC };
		e.u.module = (struct btr_rec_module){ .pid = 1, .path = "/new/program" };
		CHECK_EQ(btr_stream_record(st, &e), 0);
		CHECK_EQ(s->ev_count[BTR_SEV_EXEC], 1);
		uint8_t byte;
		if (mc->want_loaded)
			CHECK_EQ(btr_image_read(btr_stream_image(st), (uint64_t)(uintptr_t)&stream_marker_fn, &byte, 1),
				 -BTR_ERR_NOMAP);
		btr_stream_free(st);
		free(s);
	}
	btr_log_set(NULL, NULL, BTR_LOG_WARN);

	/* A user ELF with an explicit base is placed at once. */
	struct btr_stream_elf ue = { .path = self, .base = start - pgoff, .has_base = 1 };
	struct btr_stream_opts so = { .sz = sizeof(so), .elfs = &ue, .n_elfs = 1 };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	struct btr_symbol sy;
	/* The bias of a PIE is start - pgoff only if its text PT_LOAD has
	 * p_vaddr == p_offset, as GNU ld lays them out. */
	CHECK_EQ(btr_image_symbol(btr_stream_image(st), (uint64_t)(uintptr_t)&stream_marker_fn, &sy), 0);
	CHECK_STR(sy.name, "stream_marker_fn");
	btr_stream_free(st);
	struct btr_stream_elf bad = { .path = "/nonexistent/elf", .has_base = 1 };
	so.elfs = &bad;
	CHECK_EQ(btr_stream_new(&so, &st), -BTR_ERR_NOENT);
}

/* Per-process images: a child starts with its parent's modules, an exec
 * empties only its own image, nothing of one process shows in another. */
static void test_processes(void)
{
	char self[PATH_MAX];
	uint64_t start, end, pgoff;
	if (self_mapping(self, sizeof(self), &start, &end, &pgoff) < 0) {
		CHECK(!"no executable mapping of this program in /proc/self/maps");
		return;
	}
	uint64_t marker = (uint64_t)(uintptr_t)&stream_marker_fn;
	struct btr_stream_opts so = { .sz = sizeof(so) };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	struct btr_record r = { .type = BTR_REC_PROCESS };
	r.u.process = (struct btr_rec_process){ .pid = 10, .event = BTR_PROC_START, .path = "", .args = "",
						.detail = "" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	struct btr_record m = { .type = BTR_REC_MODULE_LOAD };
	m.u.module = (struct btr_rec_module){ .pid = 10, .prot = 5, .start = start, .size = end - start,
					      .pgoff = pgoff, .path = self };
	CHECK_EQ(btr_stream_record(st, &m), 0);
	struct btr_image *i10 = btr_stream_image_pid(st, 10);
	CHECK(i10 == btr_stream_image(st));   /* the first process has the first image */
	char sym[256];
	btr_image_symbolize(i10, marker, sym, sizeof(sym));
	CHECK_STR(sym, "stream_marker_fn");

	/* fork: pid 11 has a copy of 10's modules, in an image of its own */
	r.u.process.pid = 11;
	r.u.process.ppid = 10;
	CHECK_EQ(btr_stream_record(st, &r), 0);
	struct btr_image *i11 = btr_stream_image_pid(st, 11);
	CHECK(i11 && i11 != i10);
	btr_image_symbolize(i11, marker, sym, sizeof(sym));
	CHECK_STR(sym, "stream_marker_fn");
	CHECK_EQ(btr_stream_pid_of(st, 11), 11);

	/* exec in 11: its image is empty, 10's is untouched */
	struct btr_record e = { .type = BTR_REC_EXEC };
	e.u.module = (struct btr_rec_module){ .pid = 11, .path = "/new/program" };
	CHECK_EQ(btr_stream_record(st, &e), 0);
	uint8_t byte;
	CHECK_EQ(btr_image_read(btr_stream_image_pid(st, 11), marker, &byte, 1), -BTR_ERR_NOMAP);
	CHECK(btr_image_read(btr_stream_image_pid(st, 10), marker, &byte, 1) == 1);

	/* a process started without a parent in the trace has nothing */
	r.u.process.pid = 12;
	r.u.process.ppid = 0;
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_image_read(btr_stream_image_pid(st, 12), marker, &byte, 1), -BTR_ERR_NOMAP);
	/* an unknown pid falls back to the first image */
	CHECK(btr_stream_image_pid(st, 999) == i10);
	/* 11's module load goes to 11 only */
	m.u.module.pid = 11;
	CHECK_EQ(btr_stream_record(st, &m), 0);
	CHECK(btr_image_read(btr_stream_image_pid(st, 11), marker, &byte, 1) == 1);
	CHECK_EQ(btr_image_read(btr_stream_image_pid(st, 12), marker, &byte, 1), -BTR_ERR_NOMAP);
	btr_stream_free(st);
}


/* Per-CPU PT (a CPU's stream, no thread named) of two processes with
 * different code at the same address: the SWITCH records and the
 * stream's TSC packets decide, at each TIP.PGE and PIP, whose image the
 * decoder walks and which thread the branches belong to.
 *   process 20 (threads 21, 22): the program above at 0x1000;
 *   process 30 (thread 31): two NOPs, then the same program, so its
 *   loop branch is at 0x1009, its call at 0x100b and its ret at 0x1012. */
static void enc_tsc(struct btr_pt_encoder *e, uint64_t tsc)
{
	struct btr_pt_packet p = { .type = BTR_PT_TSC };
	p.u.tsc.tsc = tsc;
	CHECK(btr_pt_enc_packet(e, &p) > 0);
}

/* One pass of the program placed @shift bytes after 0x1000, entered by
 * TIP.PGE at 0x1000 and left by TIP.PGD at its syscall. */
static void enc_percpu_pass(struct btr_pt_encoder *e, unsigned shift)
{
	struct btr_pt_tnt_acc t;
	btr_pt_tnt_init(&t, 0);
	CHECK(btr_pt_enc_ip(e, BTR_PT_TIP_PGE, 0x1000) > 0);
	btr_pt_tnt_add(e, &t, 1);
	btr_pt_tnt_add(e, &t, 1);
	btr_pt_tnt_add(e, &t, 0);
	CHECK_EQ(btr_pt_tnt_flush(e, &t), 1);
	CHECK(btr_pt_enc_ip(e, BTR_PT_TIP, 0x100e + shift) > 0);
	struct btr_pt_packet pgd = { .type = BTR_PT_TIP_PGD };
	pgd.u.ip.ipc = BTR_PT_IPC_SUPPRESSED;
	CHECK(btr_pt_enc_packet(e, &pgd) > 0);
}

static void feed_switch(struct btr_stream *st, uint32_t pid, uint32_t tid, int out, uint64_t tsc)
{
	struct btr_record r = { .type = BTR_REC_SWITCH };
	r.u.sw = (struct btr_rec_switch){ .pid = pid, .tid = tid, .cpu = 2, .flags = out ? BTR_SWITCH_OUT : 0,
					  .tsc = tsc };
	CHECK_EQ(btr_stream_record(st, &r), 0);
}

static void test_percpu(int with_switches, int kernel_pip)
{
	uint8_t pt[512];
	struct btr_pt_encoder e;
	btr_pt_enc_init(&e, pt, sizeof(pt));
	CHECK(btr_pt_enc_psb(&e, 0) > 0);
	enc_tsc(&e, 1500);
	enc_percpu_pass(&e, 0);            /* 21 */
	/* With @kernel_pip the time is mid-switch (after 21's switch out,
	 * before 31's switch in) and a PIP announces the new address space
	 * as the MOV CR3 of a traced kernel would: both must go to 31. */
	enc_tsc(&e, kernel_pip ? 3500 : 4500);
	if (kernel_pip) {
		struct btr_pt_packet pip = { .type = BTR_PT_PIP };
		pip.u.pip.cr3 = 0x30000;
		CHECK(btr_pt_enc_packet(&e, &pip) > 0);
	}
	enc_percpu_pass(&e, 2);            /* 31 */
	enc_tsc(&e, 10500);
	enc_percpu_pass(&e, 0);            /* 22 */
	size_t n = btr_pt_enc_size(&e);

	struct seen *s = calloc(1, sizeof(*s));
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event, .ctx = s };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	struct btr_record m = { .type = BTR_REC_MACHINE };
	snprintf(m.u.machine.backend, sizeof(m.u.machine.backend), "test");
	m.u.machine.flags = BTR_MACHINE_USER_ONLY | BTR_MACHINE_PT_TSC;
	CHECK_EQ(btr_stream_record(st, &m), 0);
	struct btr_record pr = { .type = BTR_REC_PROCESS };
	pr.u.process = (struct btr_rec_process){ .pid = 20, .event = BTR_PROC_START, .path = "", .args = "",
						 .detail = "" };
	CHECK_EQ(btr_stream_record(st, &pr), 0);
	pr.u.process.pid = 30;
	CHECK_EQ(btr_stream_record(st, &pr), 0);
	uint8_t code30[sizeof(code) + 2] = { 0x90, 0x90 };
	memcpy(code30 + 2, code, sizeof(code));
	CHECK_EQ(btr_image_add_bytes(btr_stream_image_pid(st, 20), code, sizeof(code), CODE_BASE), 0);
	CHECK_EQ(btr_image_add_bytes(btr_stream_image_pid(st, 30), code30, sizeof(code30), CODE_BASE), 0);
	if (with_switches) {
		feed_switch(st, 20, 21, 0, 1000);
		feed_switch(st, 20, 21, 1, 3000);
		feed_switch(st, 30, 31, 0, 4000);
		feed_switch(st, 30, 31, 1, 9000);
		feed_switch(st, 20, 22, 0, 10000);
	}
	struct btr_record d = { .type = BTR_REC_PT };
	d.u.data = (struct btr_rec_data){ .tid = UINT32_MAX, .cpu = 2, .stream_offset = 0, .size = n, .data = pt };
	CHECK_EQ(btr_stream_record(st, &d), 0);
	CHECK_EQ(btr_stream_finish(st), 0);

	if (!with_switches) {
		/* Without switch records all three passes are read with the
		 * first process's code: the second one contradicts it. */
		CHECK(count_tid(s, 31) == 0);
		CHECK(s->n != 18 || s->b[6].from != 0x1009);
		btr_stream_free(st);
		free(s);
		return;
	}
	CHECK_EQ(s->n, 18);   /* each pass: 5 branches and its syscall */
	check_pass(s->b, 21);
	check_pass(s->b + 12, 22);
	static const struct { uint64_t from, to; int kind; } want31[] = {
		{ 0x1009, 0x1004, BTR_KIND_JCC }, { 0x1009, 0x1004, BTR_KIND_JCC }, { 0x1009, 0x100b, BTR_KIND_JCC },
		{ 0x100b, 0x1012, BTR_KIND_CALL }, { 0x1012, 0x1010, BTR_KIND_RET },
	};
	for (size_t i = 0; i < 5; i++) {
		const struct btr_branch *b = &s->b[6 + i];
		CHECK_EQ(b->from, want31[i].from);
		CHECK_EQ(b->to, want31[i].to);
		CHECK_EQ(b->kind, want31[i].kind);
		CHECK_EQ(b->tid, 31);
		CHECK_EQ(b->pid, 30);
	}
	CHECK_EQ(s->b[11].from, 0x1010);   /* 30's syscall */
	CHECK_EQ(s->b[11].tid, 31);
	CHECK_EQ(s->b[0].pid, 20);
	CHECK_EQ(s->b[17].pid, 20);
	CHECK_EQ(s->b[17].tid, 22);
	/* the ENABLE events name the thread that resumed */
	uint32_t en_tids[3] = { 0 };
	size_t ne = 0;
	for (size_t i = 0; i < s->n_ev; i++)
		if (s->ev[i].type == BTR_SEV_FLOW && ne < 3 && s->ev_flow_type[i] == BTR_FLOW_ENABLE)
			en_tids[ne++] = s->ev[i].tid;
	CHECK_EQ(ne, 3);
	CHECK_EQ(en_tids[0], 21);
	CHECK_EQ(en_tids[1], 31);
	CHECK_EQ(en_tids[2], 22);
	if (kernel_pip) {
		size_t np = 0;
		for (size_t i = 0; i < s->n_ev; i++)
			if (s->ev[i].type == BTR_SEV_FLOW && s->ev_flow_type[i] == BTR_FLOW_PAGING) {
				CHECK_EQ(s->ev[i].tid, 31);
				CHECK_EQ(s->ev[i].pid, 30);
				np++;
			}
		CHECK_EQ(np, 1);
	}
	btr_stream_free(st);
	free(s);
}

/* BTR_PROC_LOST records and a process without an exit in a cut trace
 * become causes of lost data (btr_stream_losses), named by process. */
static void test_losses(void)
{
	struct btr_stream_opts so = { .sz = sizeof(so) };
	struct btr_stream *st;
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	struct btr_record r = { .type = BTR_REC_PROCESS };
	r.u.process = (struct btr_rec_process){ .pid = 10, .event = BTR_PROC_START, .path = "/bin/sh", .args = "",
						.detail = "" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	r.u.process.pid = 12;
	r.u.process.ppid = 10;
	CHECK_EQ(btr_stream_record(st, &r), 0);
	r.u.process.event = BTR_PROC_EXEC;
	r.u.process.path = "/usr/bin/gzip";
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_stream_data_lost(st), 0);
	CHECK_EQ(btr_stream_losses(st, NULL, 0), 0);
	/* 12 is cut, 13 (never started) is missing */
	r.u.process = (struct btr_rec_process){ .pid = 12, .event = BTR_PROC_LOST, .reason = -BTR_ERR_NOSPACE,
						.path = "", .args = "", .detail = "disk full" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	r.u.process.pid = 13;
	r.u.process.ppid = 10;
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_stream_data_lost(st), 1);
	struct btr_stream_loss l[4];
	CHECK_EQ(btr_stream_losses(st, l, 1), 2);   /* only one copied */
	CHECK_EQ(btr_stream_losses(st, l, 4), 2);
	CHECK_EQ(l[0].kind, BTR_LOSS_CUT);
	CHECK_EQ(l[0].pid, 12);
	CHECK_EQ(l[0].ppid, 10);
	CHECK_STR(l[0].comm, "gzip");
	CHECK_STR(l[0].detail, "disk full");
	CHECK_EQ(l[0].reason, -BTR_ERR_NOSPACE);
	CHECK_EQ(l[1].kind, BTR_LOSS_MISSING);
	CHECK_EQ(l[1].pid, 13);
	CHECK_EQ(l[1].ppid, 10);
	CHECK_STR(l[1].comm, "");
	btr_stream_free(st);

	/* A cut file: sh (10) has no exit record, 11 has one. */
	char path[] = "/tmp/btr_test_losses_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .chunk_size = 512 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
	r.u.process = (struct btr_rec_process){ .pid = 10, .event = BTR_PROC_START, .path = "/bin/sh", .args = "",
						.detail = "" };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	r.u.process.pid = 11;
	r.u.process.ppid = 10;
	CHECK_EQ(btr_trace_write(w, &r), 0);
	struct btr_record ex = { .type = BTR_REC_PROCESS_EXIT };
	ex.u.exit.pid = 11;
	CHECK_EQ(btr_trace_write(w, &ex), 0);
	CHECK_EQ(btr_trace_flush(w), 0);
	CHECK_EQ(btr_trace_write(w, &ex), 0);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	struct stat sb;
	CHECK_EQ(stat(path, &sb), 0);
	CHECK_EQ(truncate(path, sb.st_size - 40), 0);   /* the end chunk and part of the last */
	CHECK_EQ(btr_stream_open(path, &so, &st), 0);
	CHECK_EQ(btr_stream_run(st), -BTR_ERR_TRUNCATED);
	CHECK_EQ(btr_stream_data_lost(st), 1);
	CHECK_EQ(btr_stream_losses(st, l, 4), 2);
	CHECK_EQ(l[0].kind, BTR_LOSS_END);
	CHECK_EQ(l[0].reason, -BTR_ERR_TRUNCATED);
	CHECK(l[0].offset > 0);
	CHECK_EQ(l[1].kind, BTR_LOSS_CUT);
	CHECK_EQ(l[1].pid, 10);
	CHECK_STR(l[1].comm, "sh");
	btr_stream_free(st);
	unlink(path);
}

/* The writer's content key (64-bit FNV-1a, lib/image/codepages.h). */
static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* Code without a file (format 1.5): code records go through the container
 * and into the process's image in the trace's order - a new version over
 * the old, a repeat by content key, a repeat of a key never stored
 * ignored, bytes that are not what their key says ignored, an exec
 * clearing them - and symbol records name the code, in whatever order
 * they come (a later one at the same address renames it). */
static void test_code_records(void)
{
	static const uint8_t v1[] = { 0x31, 0xc0, 0xc3 }, v2[] = { 0x90, 0x90, 0x90, 0x90, 0xc3 };
	const char *path = "test_stream_code.btr";
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(path, NULL, &w), 0);
	struct btr_record r = { .type = BTR_REC_CODE };
	r.u.code = (struct btr_rec_code){ .pid = 7, .addr = 0x5000, .hash = fnv(v1, 3), .size = 3, .data = v1 };
	write_rec(w, &r);
	r.u.code = (struct btr_rec_code){ .pid = 7, .addr = 0x5000, .hash = fnv(v2, 5), .size = 5, .data = v2 };
	write_rec(w, &r);
	r.u.code = (struct btr_rec_code){ .pid = 7, .addr = 0x5000, .hash = fnv(v1, 3), .size = 3 };   /* v1 again */
	write_rec(w, &r);
	r.u.code = (struct btr_rec_code){ .pid = 7, .addr = 0x6000, .hash = 99, .size = 3 };   /* never stored */
	write_rec(w, &r);
	r = (struct btr_record){ .type = BTR_REC_SYMBOL };
	r.u.sym = (struct btr_rec_symbol){ 7, BTR_SYM_PERF_MAP, 0x5000, 5, "JS:*hot" };
	write_rec(w, &r);
	CHECK_EQ(btr_trace_writer_close(w), 0);

	struct btr_trace_reader *rd;
	CHECK_EQ(btr_trace_reader_new(path, &rd), 0);
	struct btr_stream *st;
	struct btr_stream_opts so = { .sz = sizeof(so) };
	CHECK_EQ(btr_stream_new(&so, &st), 0);
	uint8_t buf[8];
	int i = 0;
	while (rd && st && btr_trace_read(rd, &r) == 0) {
		CHECK_EQ(btr_stream_record(st, &r), 0);
		struct btr_image *img = btr_stream_image_pid(st, 7);
		memset(buf, 0, sizeof(buf));
		int n = btr_image_read(img, 0x5000, buf, sizeof(buf));
		switch (i++) {
		case 0:   /* the first version */
			CHECK(n == 3 && !memcmp(buf, v1, 3));
			break;
		case 1:   /* rewritten in place */
			CHECK(n == 5 && !memcmp(buf, v2, 5));
			break;
		case 2:   /* the first version again, by reference: its bytes over the second's */
			CHECK(n == 5 && !memcmp(buf, v1, 3) && buf[3] == 0x90);
			break;
		case 3:
			CHECK_EQ(btr_image_read(img, 0x6000, buf, 1), -BTR_ERR_NOMAP);
			break;
		case 4: {
			char name[64];
			btr_image_symbolize(img, 0x5001, name, sizeof(name));
			CHECK_STR(name, "JS:*hot+0x1");
			struct btr_function fn;
			CHECK_EQ(btr_image_function(img, 0x5004, &fn), 0);
			CHECK_STR(fn.name, "JS:*hot");
			CHECK_STR(fn.module_name, "perf-7.map");
			break;
		}
		}
	}
	CHECK_EQ(i, 5);
	/* Renamed at once, while the names are all in order (re-JITed code
	 * at the same address, next in the trace): the later name with the
	 * larger extent, also past the new symbol's own smaller size. */
	r = (struct btr_record){ .type = BTR_REC_SYMBOL };
	r.u.sym = (struct btr_rec_symbol){ 7, BTR_SYM_PERF_MAP, 0x5000, 2, "JS:*warm" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	{
		struct btr_function fw;
		CHECK_EQ(btr_image_function(btr_stream_image_pid(st, 7), 0x5004, &fw), 0);
		CHECK_STR(fw.name, "JS:*warm");
		CHECK_EQ(fw.start, 0x5000);
		CHECK_EQ(fw.end, 0x5005);
	}
	/* Bytes under a key that is not theirs: ignored. */
	r = (struct btr_record){ .type = BTR_REC_CODE };
	r.u.code = (struct btr_rec_code){ .pid = 7, .addr = 0x7000, .hash = 12345, .size = 3, .data = v1 };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_image_read(btr_stream_image_pid(st, 7), 0x7000, buf, 1), -BTR_ERR_NOMAP);
	/* Symbols out of order, and a later one at the same address */
	r = (struct btr_record){ .type = BTR_REC_SYMBOL };
	r.u.sym = (struct btr_rec_symbol){ 7, BTR_SYM_PERF_MAP, 0x4000, 4, "early" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	r.u.sym = (struct btr_rec_symbol){ 7, BTR_SYM_PERF_MAP, 0x5000, 2, "JS:*hotter" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	r.u.sym = (struct btr_rec_symbol){ 7, BTR_SYM_PERF_MAP, 0x3000, 4, "earlier" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	struct btr_function fn;
	struct btr_image *img7 = btr_stream_image_pid(st, 7);
	CHECK(btr_image_function(img7, 0x4001, &fn) == 0 && !strcmp(fn.name, "early"));
	CHECK(btr_image_function(img7, 0x3003, &fn) == 0 && !strcmp(fn.name, "earlier"));
	CHECK(btr_image_function(img7, 0x5004, &fn) == 0 && !strcmp(fn.name, "JS:*hotter"));   /* the larger extent */
	CHECK(btr_image_function(img7, 0x4004, &fn) != 0);
	/* An exec empties the process's code. */
	r = (struct btr_record){ .type = BTR_REC_EXEC };
	r.u.module = (struct btr_rec_module){ .pid = 7, .path = "" };
	CHECK_EQ(btr_stream_record(st, &r), 0);
	CHECK_EQ(btr_image_read(btr_stream_image_pid(st, 7), 0x5000, buf, 1), -BTR_ERR_NOMAP);
	btr_stream_free(st);
	btr_trace_reader_free(rd);
	unlink(path);
}

/* Snapshot windows (BTR_REC_WINDOW, format 1.6): thread 7's PT as three
 * windows, the second starting again at offset 0 (windows may overlap),
 * the third after a jump: each decodes as a pass of its own, with a
 * DISCONTINUITY (carrying the record) before it and no gap; the same
 * records without the WINDOW records are gaps. */
static void test_windows(void)
{
	uint8_t pt[256];
	size_t n = encode_pass(pt, sizeof(pt));
	for (int with = 1; with >= 0; with--) {
		const char *path = "test_stream_win.btr";
		struct btr_trace_writer *w;
		struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .chunk_size = 512 };
		CHECK_EQ(btr_trace_writer_new(path, &wo, &w), 0);
		struct btr_record m = { .type = BTR_REC_MACHINE };
		snprintf(m.u.machine.backend, sizeof(m.u.machine.backend), "qemu");
		m.u.machine.flags = BTR_MACHINE_USER_ONLY;
		write_rec(w, &m);
		const uint64_t at[3] = { 0, 0, n + 100 };
		for (uint32_t i = 0; i < 3; i++) {
			struct btr_record r = { .type = BTR_REC_WINDOW };
			r.u.win = (struct btr_rec_window){ .pid = 7, .tid = 7, .reason = i < 2 ? BTR_WINDOW_TRIGGER
											     : BTR_WINDOW_END,
							   .index = i, .stream_offset = at[i], .size = n };
			if (with)
				write_rec(w, &r);
			write_data(w, BTR_REC_PT, 7, at[i], pt, 5);   /* cut inside a packet */
			write_data(w, BTR_REC_PT, 7, at[i] + 5, pt + 5, n - 5);
		}
		CHECK_EQ(btr_trace_writer_close(w), 0);
		struct seen *s = calloc(1, sizeof(*s));
		struct btr_stream_opts so = { .sz = sizeof(so), .branch = on_branch, .event = on_event, .ctx = s };
		struct btr_stream *st;
		CHECK_EQ(btr_stream_open(path, &so, &st), 0);
		if (!st) {
			free(s);
			return;
		}
		CHECK_EQ(btr_image_add_bytes(btr_stream_image(st), code, sizeof(code), CODE_BASE), 0);
		CHECK_EQ(btr_stream_run(st), 0);
		struct btr_stream_stats sst;
		btr_stream_get_stats(st, &sst);
		if (with) {
			CHECK_EQ(s->windows, 3);
			CHECK_EQ(s->win_off[2], n + 100);
			CHECK_EQ(s->ev_count[BTR_SEV_GAP], 0);
			CHECK_EQ(sst.gaps, 0);
			size_t k = count_tid(s, 7);
			CHECK(k >= 15 && k % 3 == 0);
			if (k >= 15 && k % 3 == 0 && k <= MAX_SEEN)
				for (int i = 0; i < 3; i++)
					check_pass(s->b + i * (k / 3), 7);
		} else {
			CHECK_EQ(s->windows, 0);
			CHECK(s->ev_count[BTR_SEV_GAP] >= 2);   /* without them: jumps in the offsets */
		}
		btr_stream_free(st);
		free(s);
	}
}

int main(void)
{
	test_windows();
	test_code_records();
	test_losses();
	test_processes();
	test_pt_bts_lbr();
	test_many_threads();
	test_bts_tail();
	test_filter();
	test_modules();
	test_percpu(1, 0);
	test_percpu(1, 1);
	test_percpu(0, 0);
	printf("stream_marker_fn(1) = %d\n", stream_marker_fn(1));
	return check_done();
}
