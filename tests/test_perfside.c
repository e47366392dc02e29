/* test_perfside.c - the sideband of a live perf ring turned into btr
 * records (btr_perf_conv_new / btr_perf_convert): records built byte by
 * byte as the kernel writes them for the attr the lbr backend opens
 * (sample_id_all with TID|TIME|CPU|IDENTIFIER), converted, and every
 * field checked. */
#include <unistd.h>
#include <stdint.h>
#include <string.h>

#include "btr/error.h"
#include "btr/perfattr.h"
#include "btr/perfdata.h"
#include "btr/perfring.h"
#include "btr/stream.h"
#include "check.h"

/* Context switches of a real per-CPU PT recording through the stream:
 * who runs on CPU 3 when (perf script --show-switch-events agrees:
 * tests/cli_import.sh compares the switch records with perf). */
static int switches(void)
{
	const char *f = BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14";
	struct btr_stream_opts so = { .sz = sizeof(so) };
	struct btr_stream *s;
	if (access(f, R_OK) != 0)
		return 0;   /* ../shared absent: the only skip */
	int rc = btr_stream_open(f, &so, &s);
	CHECK_EQ(rc, 0);   /* a file that is there but does not open is btr's failure */
	if (rc < 0)
		return 1;
	CHECK(btr_stream_run(s) >= 0);
	uint32_t pid = 0, tid = 0;
	CHECK_EQ(btr_stream_cpu_thread(s, 3, 808740239185ull - 1, &pid, &tid), 0);  /* before any */
	CHECK_EQ(btr_stream_cpu_thread(s, 3, 808740240787ull, &pid, &tid), 1);      /* 1760 in */
	CHECK_EQ(tid, 1760);
	CHECK_EQ(pid, 1760);
	CHECK_EQ(btr_stream_cpu_thread(s, 3, 808740244000ull, &pid, &tid), 1);
	CHECK_EQ(tid, 1760);
	CHECK_EQ(btr_stream_cpu_thread(s, 3, 808740244507ull, &pid, &tid), 0);      /* 1760 out */
	CHECK_EQ(btr_stream_cpu_thread(s, 0, 808740467779ull + 10, &pid, &tid), 1); /* perf itself on cpu 0 */
	CHECK_EQ(tid, 3174);
	CHECK_EQ(btr_stream_cpu_thread(s, 7, 808740467779ull, &pid, &tid), 0);      /* no such CPU */
	btr_stream_free(s);
	return 1;
}

static uint8_t buf[1024];
static size_t n;

static void put(const void *p, size_t k) { memcpy(buf + n, p, k); n += k; }
static void u16(uint16_t v) { put(&v, 2); }
static void u32(uint32_t v) { put(&v, 4); }
static void u64(uint64_t v) { put(&v, 8); }
static void str(const char *s)
{
	size_t k = strlen(s) + 1, pad = (k + 7) & ~(size_t)7;
	memset(buf + n, 0, pad);
	memcpy(buf + n, s, k);
	n += pad;
}
static void begin(uint32_t type, uint16_t misc) { n = 0; u32(type); u16(misc); u16(0); }
/* sample_id_all trailer for TID|TIME|CPU|IDENTIFIER: pid,tid; time; cpu,res; id */
static void trailer(uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu)
{
	u32(pid); u32(tid); u64(time); u32(cpu); u32(0); u64(77);
}
static void end(void) { uint16_t s = (uint16_t)n; memcpy(buf + 6, &s, 2); }

int main(void)
{
	struct btr_perf_event_attr a;
	uint64_t bst;
	CHECK_EQ(btr_lbr_filter_parse("any", &bst), 0);
	CHECK_EQ(btr_lbr_attr(bst, 1000, &a), 0);
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_conv_new(&a, sizeof(a), &r), 0);
	struct btr_record out[2];
	struct btr_record dummy;
	CHECK_EQ(btr_perf_read(r, &dummy), -BTR_ERR_EOS);

	/* MMAP2 (inode variant) */
	begin(BTR_PERF_RECORD_MMAP2, 2);
	u32(100); u32(101); u64(0x555555554000); u64(0x3000); u64(0x1000);
	u32(8); u32(1); u64(12345); u64(1);
	u32(5); u32(2);
	str("/usr/bin/prog");
	trailer(100, 101, 5000, 3);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 1);
	CHECK_EQ(out[0].type, BTR_REC_MODULE_LOAD);
	CHECK_EQ(out[0].u.module.pid, 100);
	CHECK(out[0].u.module.start == 0x555555554000ull);
	CHECK_EQ(out[0].u.module.size, 0x3000);
	CHECK_EQ(out[0].u.module.pgoff, 0x1000);
	CHECK_EQ(out[0].u.module.prot, 5);
	CHECK_EQ(out[0].u.module.tsc, 5000);   /* no time conversion: perf clock */
	CHECK_STR(out[0].u.module.path, "/usr/bin/prog");

	/* COMM with the exec flag: EXEC then THREAD_NAME */
	begin(BTR_PERF_RECORD_COMM, 1u << 13);
	u32(100); u32(100); str("newprog");
	trailer(100, 100, 6000, 3);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 2);
	CHECK_EQ(out[0].type, BTR_REC_EXEC);
	CHECK_EQ(out[0].u.module.pid, 100);
	CHECK_EQ(out[1].type, BTR_REC_THREAD_NAME);
	CHECK_EQ(out[1].u.thread.tid, 100);
	CHECK_STR(out[1].u.thread.name, "newprog");
	CHECK_EQ(out[1].u.thread.tsc, 6000);

	/* FORK and EXIT: pid, ppid, tid, ptid, time */
	begin(BTR_PERF_RECORD_FORK, 0);
	u32(100); u32(100); u32(102); u32(100); u64(7000);
	trailer(100, 102, 7000, 1);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 1);
	CHECK_EQ(out[0].type, BTR_REC_THREAD_START);
	CHECK_EQ(out[0].u.thread.pid, 100);
	CHECK_EQ(out[0].u.thread.tid, 102);
	CHECK_EQ(out[0].u.thread.parent_tid, 100);
	CHECK_EQ(out[0].u.thread.tsc, 7000);
	buf[0] = BTR_PERF_RECORD_EXIT;
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 1);
	CHECK_EQ(out[0].type, BTR_REC_THREAD_EXIT);
	CHECK_EQ(out[0].u.thread.tid, 102);

	/* SAMPLE: IDENTIFIER, IP, TID, TIME, CPU, PERIOD, BRANCH_STACK */
	begin(BTR_PERF_RECORD_SAMPLE, 2);
	u64(77); u64(0x401000); u32(100); u32(101); u64(8000); u32(2); u32(0); u64(1000);
	u64(3);
	u64(0x401010); u64(0x401100); u64(1u | (5u << 4));        /* mispred, 5 cycles */
	u64(0x401200); u64(0x401300); u64(2u);                     /* predicted */
	u64(0); u64(0); u64(0);                                    /* an empty slot */
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 1);
	CHECK_EQ(out[0].type, BTR_REC_LBR);
	CHECK_EQ(out[0].u.lbr.pid, 100);
	CHECK_EQ(out[0].u.lbr.tid, 101);
	CHECK_EQ(out[0].u.lbr.cpu, 2);
	CHECK_EQ(out[0].u.lbr.ip, 0x401000);
	CHECK_EQ(out[0].u.lbr.count, 2);
	CHECK_EQ(out[0].u.lbr.entries[0].from, 0x401010);
	CHECK_EQ(out[0].u.lbr.entries[0].flags, BTR_BF_MISPRED | BTR_BF_CYCLES);
	CHECK_EQ(out[0].u.lbr.entries[0].cycles, 5);
	CHECK_EQ(out[0].u.lbr.entries[1].flags, BTR_BF_PREDICTED);

	/* records the recorder handles itself: nothing made */
	begin(BTR_PERF_RECORD_ITRACE_START, 0);
	u32(100); u32(101);
	trailer(100, 101, 9000, 0);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 0);
	begin(BTR_PERF_RECORD_AUX, 0);
	u64(0); u64(4096); u64(BTR_PERF_AUX_TRUNCATED);
	trailer(100, 101, 9000, 0);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 0);
	/* malformed: size beyond the buffer, size < 8, body too short */
	CHECK_EQ(btr_perf_convert(r, buf, n - 8, out), -BTR_ERR_BAD_RECORD);
	begin(BTR_PERF_RECORD_FORK, 0);
	u32(1);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), -BTR_ERR_BAD_RECORD);
	CHECK_EQ(btr_perf_reader_count(r, BTR_PERF_RECORD_SAMPLE), 1);
	btr_perf_reader_free(r);
	/* with the mmap page's time conversion, times become TSC
	 * (perf_time_to_tsc: ((t - zero) / mult << shift) + remainder part) */
	CHECK_EQ(btr_perf_conv_new(&a, sizeof(a), &r), 0);
	CHECK_EQ(btr_perf_conv_set_time(r, 0, 0, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_perf_conv_set_time(r, 10, 512, 1000), 0);   /* tsc = (t - 1000) * 2 */
	begin(BTR_PERF_RECORD_FORK, 0);
	u32(100); u32(100); u32(103); u32(100); u64(6000);
	trailer(100, 103, 6000, 1);
	end();
	CHECK_EQ(btr_perf_convert(r, buf, n, out), 1);
	CHECK_EQ(out[0].u.thread.tsc, 10000);
	btr_perf_reader_free(r);
	CHECK_EQ(btr_perf_conv_new(&a, 32, &r), -BTR_ERR_INVAL);
	if (!switches())
		printf("note: quipper/perf.data.intel_pt-4.14 absent; switch checks skipped\n");
	return check_done();
}
