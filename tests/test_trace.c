/* test_trace.c - the .btr container (lib/trace/trace.c, docs/format.md).
 *
 * Also writes trace_sample.btr into the working directory (the build
 * directory under CTest) for tests/cli_trace.sh. */
#include <dirent.h>
#include <glob.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "btr/trace.h"
#include "btr/error.h"
#include "trace/crc32c.h"

static char dir[512];

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void path_in(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static int file_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* Counts directory entries starting with @prefix. */
static int count_prefix(const char *d, const char *prefix)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	int n = 0;
	if (!dd)
		return 0;
	while ((e = readdir(dd)))
		if (!strncmp(e->d_name, prefix, strlen(prefix)))
			n++;
	closedir(dd);
	return n;
}

static uint8_t *slurp(const char *p, size_t *size)
{
	FILE *f = fopen(p, "rb");
	uint8_t *b;
	long n;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(n ? (size_t)n : 1);
	if (fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*size = (size_t)n;
	return b;
}

static void spit(const char *p, const void *b, size_t n)
{
	/* unlink first: ext4 (auto_da_alloc) flushes a truncated-and-rewritten
	 * file to disk on close, which costs seconds over thousands of cuts. */
	unlink(p);
	FILE *f = fopen(p, "wb");
	if (!f)
		return;
	fwrite(b, 1, n, f);
	fclose(f);
}

/* ---- a fixed set of records of every type ---- */

#define NSAMPLE 16
static uint8_t pt_bytes[3000], bts_bytes[24 * 5];
static struct btr_lbr_entry lbr_e[16];
static struct btr_branch br_e[40];

static void make_samples(struct btr_record *s)
{
	memset(s, 0, sizeof(*s) * NSAMPLE);
	for (size_t i = 0; i < sizeof(pt_bytes); i++)
		pt_bytes[i] = (uint8_t)(i * 7 + (i >> 5));
	for (size_t i = 0; i < sizeof(bts_bytes); i++)
		bts_bytes[i] = (uint8_t)(0xa5 ^ i);
	for (int i = 0; i < 16; i++) {
		lbr_e[i].from = 0x401000 + 16 * i;
		lbr_e[i].to = 0x402000 + 8 * i;
		lbr_e[i].flags = (uint32_t)i & 0x3f;
		lbr_e[i].cycles = 100 + i;
	}
	for (int i = 0; i < 40; i++) {
		br_e[i].from = 0xffffffff81000000ull + i;
		br_e[i].to = 0x7fff00000000ull + 3 * i;
		br_e[i].tsc = 1000000 + i;
		br_e[i].insns = 5 + i;
		br_e[i].tid = 4242;
		br_e[i].cycles = 7 * i;
		br_e[i].flags = (uint16_t)(i * 3);
		br_e[i].kind = (uint8_t)(i % 18);
	}
	int k = 0;
	s[k].type = BTR_REC_MACHINE;
	strcpy(s[k].u.machine.backend, "qemu");
	strcpy(s[k].u.machine.cpu_vendor, "GenuineIntel");
	s[k].u.machine.cpu_family = 6;
	s[k].u.machine.cpu_model = 0x55;
	s[k].u.machine.cpu_stepping = 4;
	s[k].u.machine.lbr_depth = 32;
	s[k].u.machine.flags = BTR_MACHINE_PT_RETCOMP | BTR_MACHINE_USER_ONLY;
	s[k].u.machine.mtc_freq = 3;
	s[k].u.machine.cyc_thresh = 1;
	s[k].u.machine.addr_filter_cfg = 2;
	s[k].u.machine.nom_freq = 28;
	s[k].u.machine.cpuid15_eax = 2;
	s[k].u.machine.cpuid15_ebx = 234;
	s[k].u.machine.tsc_hz = 2800000000ull;
	s[k].u.machine.addr_filter[0][0] = 0x400000;
	s[k].u.machine.addr_filter[0][1] = 0x4fffff;
	s[k].u.machine.addr_filter[3][1] = 0xffffffffffffffffull;
	s[k].u.machine.start_time_ns = 1700000000123456789ull;
	k++;
	s[k].type = BTR_REC_EXEC;
	s[k].u.module.pid = 4242;
	s[k].u.module.prot = 5;
	s[k].u.module.start = 0x400000;
	s[k].u.module.size = 0x2000;
	s[k].u.module.path = "/usr/bin/true";
	s[k].u.module.build_id_len = 20;
	for (int i = 0; i < 20; i++)
		s[k].u.module.build_id[i] = (uint8_t)(0xb0 + i);
	k++;
	s[k].type = BTR_REC_MODULE_LOAD;
	s[k].u.module.pid = 4242;
	s[k].u.module.prot = 5;
	s[k].u.module.start = 0x7f0000001000ull;
	s[k].u.module.size = 0x1b000;
	s[k].u.module.pgoff = 0x1000;
	s[k].u.module.tsc = 99;
	s[k].u.module.path = "/lib/x86_64-linux-gnu/libc.so.6";
	k++;
	s[k].type = BTR_REC_THREAD_START;
	s[k].u.thread.pid = 4242;
	s[k].u.thread.tid = 4242;
	s[k].u.thread.tsc = 100;
	s[k].u.thread.name = "";
	k++;
	s[k].type = BTR_REC_THREAD_START;
	s[k].u.thread.pid = 4242;
	s[k].u.thread.tid = 4243;
	s[k].u.thread.parent_tid = 4242;
	s[k].u.thread.tsc = 150;
	s[k].u.thread.name = "";
	k++;
	s[k].type = BTR_REC_THREAD_NAME;
	s[k].u.thread.pid = 4242;
	s[k].u.thread.tid = 4243;
	s[k].u.thread.name = "worker \"1\"\\";
	k++;
	s[k].type = BTR_REC_PT;
	s[k].u.data.tid = 4242;
	s[k].u.data.cpu = -1;
	s[k].u.data.stream_offset = 0;
	s[k].u.data.size = sizeof(pt_bytes);
	s[k].u.data.data = pt_bytes;
	k++;
	s[k].type = BTR_REC_PT;
	s[k].u.data.tid = 4243;
	s[k].u.data.cpu = 3;
	s[k].u.data.stream_offset = 4096;
	s[k].u.data.size = 0;
	s[k].u.data.data = NULL;
	k++;
	s[k].type = BTR_REC_BTS;
	s[k].u.data.tid = 4243;
	s[k].u.data.cpu = -1;
	s[k].u.data.stream_offset = 24;
	s[k].u.data.size = sizeof(bts_bytes);
	s[k].u.data.data = bts_bytes;
	k++;
	s[k].type = BTR_REC_LBR;
	s[k].u.lbr.pid = 4242;
	s[k].u.lbr.tid = 4243;
	s[k].u.lbr.cpu = 1;
	s[k].u.lbr.count = 16;
	s[k].u.lbr.tsc = 5555;
	s[k].u.lbr.ip = 0x401234;
	s[k].u.lbr.entries = lbr_e;
	k++;
	s[k].type = BTR_REC_BRANCHES;
	s[k].u.branches.tid = 4242;
	s[k].u.branches.count = 40;
	s[k].u.branches.branches = br_e;
	k++;
	s[k].type = BTR_REC_THREAD_EXIT;
	s[k].u.thread.pid = 4242;
	s[k].u.thread.tid = 4243;
	s[k].u.thread.exit_code = -3;
	s[k].u.thread.tsc = 7000;
	s[k].u.thread.name = "";
	s[k].u.thread.end = BTR_THREAD_END_KILLED;   /* format 1.4's fields, read back */
	s[k].u.thread.signo = 9;
	k++;
	s[k].type = BTR_REC_MODULE_UNLOAD;
	s[k].u.module.pid = 4242;
	s[k].u.module.start = 0x7f0000001000ull;
	s[k].u.module.size = 0x1b000;
	s[k].u.module.path = "";
	k++;
	s[k].type = BTR_REC_PROCESS;
	s[k].u.process.pid = 4250;
	s[k].u.process.ppid = 4242;
	s[k].u.process.event = BTR_PROC_EXEC;
	s[k].u.process.tsc = 7500;
	s[k].u.process.path = "/bin/sh";
	s[k].u.process.args = "sh\0-c\0echo hi\0";
	s[k].u.process.args_len = 15;
	s[k].u.process.detail = "";
	k++;
	s[k].type = BTR_REC_PROCESS;
	s[k].u.process.pid = 4251;
	s[k].u.process.ppid = 4250;
	s[k].u.process.event = BTR_PROC_UNTRACED;
	s[k].u.process.reason = -BTR_ERR_UNSUPPORTED;
	s[k].u.process.path = "/usr/bin/x32";
	s[k].u.process.detail = "32-bit program";
	k++;
	s[k].type = BTR_REC_PROCESS_EXIT;
	s[k].u.exit.pid = 4242;
	s[k].u.exit.tid = 4242;
	s[k].u.exit.code = 0;
	s[k].u.exit.signo = 11;
	s[k].u.exit.ip = 0x401005;
	s[k].u.exit.addr = 0xdead0000;
	s[k].u.exit.tsc = 8000;
	k++;
	if (k != NSAMPLE)
		abort();
}

static int branches_equal(const struct btr_branch *x, const struct btr_branch *y, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (x[i].from != y[i].from || x[i].to != y[i].to || x[i].tsc != y[i].tsc ||
		    x[i].insns != y[i].insns || x[i].tid != y[i].tid || x[i].cycles != y[i].cycles ||
		    x[i].flags != y[i].flags || x[i].kind != y[i].kind || x[i].reserved != y[i].reserved)
			return 0;
	return 1;
}

/* Returns 1 if @a (written) and @b (read) carry the same content. */
static int rec_equal(const struct btr_record *a, const struct btr_record *b)
{
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case BTR_REC_MACHINE:
		return !memcmp(&a->u.machine, &b->u.machine, sizeof(a->u.machine));
	case BTR_REC_MODULE_LOAD:
	case BTR_REC_MODULE_UNLOAD:
	case BTR_REC_EXEC: {
		const struct btr_rec_module *x = &a->u.module, *y = &b->u.module;
		return x->pid == y->pid && x->prot == y->prot && x->start == y->start &&
		       x->size == y->size && x->pgoff == y->pgoff && x->tsc == y->tsc &&
		       x->build_id_len == y->build_id_len &&
		       !memcmp(x->build_id, y->build_id, x->build_id_len) && y->path &&
		       !strcmp(x->path ? x->path : "", y->path);
	}
	case BTR_REC_THREAD_START:
	case BTR_REC_THREAD_EXIT:
	case BTR_REC_THREAD_NAME: {
		const struct btr_rec_thread *x = &a->u.thread, *y = &b->u.thread;
		return x->pid == y->pid && x->tid == y->tid && x->parent_tid == y->parent_tid &&
		       x->exit_code == y->exit_code && x->tsc == y->tsc && y->name &&
		       !strcmp(x->name ? x->name : "", y->name) &&
		       (a->type != BTR_REC_THREAD_EXIT || (x->end == y->end && x->signo == y->signo));
	}
	case BTR_REC_PT:
	case BTR_REC_BTS: {
		const struct btr_rec_data *x = &a->u.data, *y = &b->u.data;
		return x->tid == y->tid && x->cpu == y->cpu && x->stream_offset == y->stream_offset &&
		       x->size == y->size && (!x->size || !memcmp(x->data, y->data, x->size));
	}
	case BTR_REC_LBR: {
		const struct btr_rec_lbr *x = &a->u.lbr, *y = &b->u.lbr;
		if (x->pid != y->pid || x->tid != y->tid || x->cpu != y->cpu || x->count != y->count ||
		    x->tsc != y->tsc || x->ip != y->ip)
			return 0;
		for (uint32_t i = 0; i < x->count; i++)
			if (x->entries[i].from != y->entries[i].from || x->entries[i].to != y->entries[i].to ||
			    x->entries[i].flags != y->entries[i].flags ||
			    x->entries[i].cycles != y->entries[i].cycles)
				return 0;
		return 1;
	}
	case BTR_REC_BRANCHES: {
		const struct btr_rec_branches *x = &a->u.branches, *y = &b->u.branches;
		if (x->tid != y->tid || x->count != y->count)
			return 0;
		return branches_equal(x->branches, y->branches, x->count);
	}
	case BTR_REC_PROCESS_EXIT:
		return !memcmp(&a->u.exit, &b->u.exit, sizeof(a->u.exit));
	case BTR_REC_PROCESS: {
		const struct btr_rec_process *x = &a->u.process, *y = &b->u.process;
		return x->pid == y->pid && x->ppid == y->ppid && x->event == y->event &&
		       x->reason == y->reason && x->tsc == y->tsc && x->args_len == y->args_len &&
		       y->path && y->args && y->detail && !strcmp(x->path ? x->path : "", y->path) &&
		       !memcmp(x->args ? x->args : "", y->args, x->args_len) &&
		       !strcmp(x->detail ? x->detail : "", y->detail);
	}
	default:
		return 0;
	}
}

static int write_samples(const char *p, int compress, size_t chunk, int repeat)
{
	struct btr_trace_writer_opts o = { sizeof(o), compress, chunk, 1 };
	struct btr_trace_writer *w;
	struct btr_record s[NSAMPLE];
	int rc = btr_trace_writer_new(p, &o, &w);
	if (rc)
		return rc;
	make_samples(s);
	for (int r = 0; r < repeat; r++)
		for (int i = 0; i < NSAMPLE; i++)
			if ((rc = btr_trace_write(w, &s[i]))) {
				btr_trace_writer_abort(w);
				return rc;
			}
	return btr_trace_writer_close(w);
}

/* Reads everything, comparing against the samples repeated; returns the
 * record count, or a negative error. */
static int read_compare(struct btr_trace_reader *r, int repeat, int *mismatch)
{
	struct btr_record s[NSAMPLE], rec;
	int n = 0, rc;
	make_samples(s);
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if (n >= NSAMPLE * repeat || !rec_equal(&s[n % NSAMPLE], &rec)) {
			if (!*mismatch)
				fprintf(stderr, "record %d (%s) differs\n", n, btr_rec_type_name(rec.type));
			(*mismatch)++;
		}
		n++;
	}
	return rc == -BTR_ERR_EOS ? n : rc;
}

static void test_crc(void)
{
	CHECK_EQ(btr_crc32c(0, "123456789", 9), 0xE3069283u);
	CHECK_EQ(btr_crc32c(0, NULL, 0), 0);
	/* RFC 3720 B.4: 32 bytes of zeros. */
	uint8_t z[32] = { 0 };
	CHECK_EQ(btr_crc32c(0, z, 32), 0x8A9136AAu);
	uint8_t buf[1000];
	for (int i = 0; i < 1000; i++)
		buf[i] = (uint8_t)rnd();
	uint32_t whole = btr_crc32c(0, buf, 1000);
	for (int cut = 0; cut <= 1000; cut += 37)
		CHECK_EQ(btr_crc32c(btr_crc32c(0, buf, (size_t)cut), buf + cut, (size_t)(1000 - cut)), whole);
	/* Bit-at-a-time reference for odd lengths and misaligned starts. */
	for (int start = 0; start < 9; start++) {
		uint32_t c = 0xffffffffu;
		for (int i = start; i < 200; i++) {
			c ^= buf[i];
			for (int k = 0; k < 8; k++)
				c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		}
		CHECK_EQ(btr_crc32c(0, buf + start, (size_t)(200 - start)), ~c);
		CHECK_EQ(btr_crc32c_sw(0, buf + start, (size_t)(200 - start)), ~c);
	}
	/* Hardware and table paths agree on every length and alignment. */
	int diff = 0;
	for (size_t start = 0; start < 8; start++)
		for (size_t len = 0; len + start <= 1000; len += 1 + len / 8)
			diff += btr_crc32c(0x1234567u, buf + start, len) != btr_crc32c_sw(0x1234567u, buf + start, len);
	CHECK_EQ(diff, 0);
	CHECK_EQ(btr_crc32c_sw(0, "123456789", 9), 0xE3069283u);
}

/* The writer in a child (path, or fd when @p is NULL) into a pipe/FIFO
 * that the parent drains into memory: the records read back whole. */
static void stream_roundtrip(const char *p, int rfd, int wfd, const char *what)
{
	pid_t pid = fork();
	if (pid == 0) {
		close(rfd);
		struct btr_trace_writer_opts o = { sizeof(o), 0, 0, 1 };
		struct btr_trace_writer *w;
		struct btr_record s[NSAMPLE];
		int rc = p ? btr_trace_writer_new(p, &o, &w) : btr_trace_writer_new_fd(wfd, "pipe", &o, &w);
		if (rc)
			_exit(2);
		if (!btr_trace_writer_streaming(w) || btr_trace_writer_retarget(w, "x.partial") != -BTR_ERR_UNSUPPORTED)
			_exit(3);
		make_samples(s);
		for (int i = 0; i < NSAMPLE; i++)
			if (btr_trace_write(w, &s[i]))
				_exit(4);
		_exit(btr_trace_writer_close(w) ? 5 : 0);
	}
	if (wfd >= 0)
		close(wfd);
	if (rfd < 0)
		rfd = open(p, O_RDONLY);
	size_t n = 0, cap = 1 << 20;
	uint8_t *b = malloc(cap);
	ssize_t k;
	while (rfd >= 0 && b && n < cap && (k = read(rfd, b + n, cap - n)) > 0)
		n += (size_t)k;
	if (rfd >= 0)
		close(rfd);
	int st = 0;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "%s: writer exit status %d\n", what, WEXITSTATUS(st));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct btr_trace_reader *r = NULL;
	int mism = 0;
	CHECK_EQ(btr_trace_reader_new_mem(b, n, &r), 0);
	if (r)
		CHECK_EQ(read_compare(r, 1, &mism), NSAMPLE);
	CHECK_EQ(mism, 0);
	btr_trace_reader_free(r);
	free(b);
}

/* Where the output leads (docs/cli.md "Output files"): a symlink's target
 * is replaced and the link kept, with the target's permissions; a FIFO
 * or an fd is written through, never replaced; a directory and a dangling
 * symlink are refused. */
static void test_targets(void)
{
	char tgt[600], lnk[600], fifo[600], sub[600];
	struct btr_trace_writer *w = NULL;
	struct stat st;

	path_in(tgt, sizeof(tgt), "target.btr");
	path_in(lnk, sizeof(lnk), "link.btr");
	unlink(lnk);
	FILE *f = fopen(tgt, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	chmod(tgt, 0640);
	CHECK_EQ(symlink("target.btr", lnk), 0);
	CHECK_EQ(write_samples(lnk, 0, 0, 1), 0);
	CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode));
	CHECK(stat(tgt, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (st.st_mode & 0777) == 0640);
	CHECK_EQ(count_prefix(dir, "target.btr.tmp"), 0);

	path_in(fifo, sizeof(fifo), "fifo.btr");
	unlink(fifo);
	CHECK_EQ(mkfifo(fifo, 0600), 0);
	stream_roundtrip(fifo, -1, -1, "fifo");
	CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
	CHECK_EQ(count_prefix(dir, "fifo.btr.tmp"), 0);

	int pfd[2];
	CHECK_EQ(pipe(pfd), 0);
	stream_roundtrip(NULL, pfd[0], pfd[1], "pipe");

	path_in(sub, sizeof(sub), "adir.btr");
	mkdir(sub, 0755);
	CHECK_EQ(btr_trace_writer_new(sub, NULL, &w), -BTR_ERR_ISDIR);
	unlink(lnk);
	CHECK_EQ(symlink("nowhere/x.btr", lnk), 0);
	CHECK_EQ(btr_trace_writer_new(lnk, NULL, &w), -BTR_ERR_NOENT);
	CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode));
	CHECK_EQ(btr_trace_writer_new_fd(-1, "x", NULL, &w), -BTR_ERR_INVAL);
}

static void test_roundtrip(void)
{
	char p[600];
	int mism = 0;
	struct btr_trace_reader *r;
	struct btr_trace_info info;

	for (int comp = 0; comp <= 1; comp++) {
		path_in(p, sizeof(p), comp ? "rt_zstd.btr" : "rt_plain.btr");
		CHECK_EQ(write_samples(p, comp ? 3 : 0, 0, 1), 0);
		CHECK(file_exists(p));
		CHECK_EQ(btr_trace_reader_new(p, &r), 0);
		if (!r)
			continue;
		mism = 0;
		CHECK_EQ(read_compare(r, 1, &mism), NSAMPLE);
		CHECK_EQ(mism, 0);
		/* The error is sticky. */
		struct btr_record rec;
		CHECK_EQ(btr_trace_read(r, &rec), -BTR_ERR_EOS);
		btr_trace_reader_info(r, &info);
		CHECK_EQ(info.format, BTR_TRACE_FMT_BTR);
		CHECK_EQ(info.major, 1);
		CHECK_EQ(info.complete, 1);
		CHECK_EQ(info.chunks, 1);
		CHECK_EQ(info.records, NSAMPLE);
		CHECK_EQ(info.compressed_chunks, comp);
		CHECK_EQ(!!(info.flags & BTR_TRACE_F_ZSTD), comp);
		CHECK_EQ(info.writer_pid, getpid());
		CHECK(!strncmp(info.creator, "btr ", 4));
		CHECK(info.created_ns > 1600000000ull * 1000000000ull);
		if (comp)
			CHECK(info.stored_bytes < info.raw_bytes);
		btr_trace_reader_free(r);

		/* Same through the memory reader. */
		size_t n;
		uint8_t *b = slurp(p, &n);
		CHECK(b != NULL);
		CHECK_EQ(btr_trace_reader_new_mem(b, n, &r), 0);
		mism = 0;
		if (r)
			CHECK_EQ(read_compare(r, 1, &mism), NSAMPLE);
		CHECK_EQ(mism, 0);
		btr_trace_reader_free(r);
		free(b);
	}
	/* No temporary files left next to the outputs. */
	CHECK_EQ(count_prefix(dir, "rt_plain.btr.tmp"), 0);
	CHECK_EQ(count_prefix(dir, "rt_zstd.btr.tmp"), 0);
}

static void test_many_chunks(void)
{
	char p[600];
	struct btr_trace_reader *r;
	struct btr_trace_info info;
	for (int comp = 0; comp <= 1; comp++) {
		int mism = 0;
		path_in(p, sizeof(p), "many.btr");
		CHECK_EQ(write_samples(p, comp ? 1 : 0, 4096, 300), 0);
		CHECK_EQ(btr_trace_reader_new(p, &r), 0);
		if (!r)
			continue;
		/* PT (3000 bytes) records are split when they straddle a chunk
		 * boundary, so compare after reassembling them. */
		struct btr_record s[NSAMPLE], rec;
		make_samples(s);
		int idx = 0, rc, bad = 0;
		uint64_t pt_done = 0;
		while ((rc = btr_trace_read(r, &rec)) == 0) {
			const struct btr_record *e = &s[idx % NSAMPLE];
			if (rec.type == BTR_REC_PT && e->type == BTR_REC_PT && e->u.data.size) {
				if (rec.u.data.stream_offset != pt_done || rec.u.data.tid != e->u.data.tid ||
				    rec.u.data.size > e->u.data.size - pt_done ||
				    memcmp(rec.u.data.data, e->u.data.data + pt_done, rec.u.data.size))
					bad++;
				pt_done += rec.u.data.size;
				if (pt_done == e->u.data.size) {
					pt_done = 0;
					idx++;
				}
				continue;
			}
			if (!rec_equal(e, &rec))
				bad++;
			idx++;
		}
		CHECK_EQ(rc, -BTR_ERR_EOS);
		CHECK_EQ(idx, NSAMPLE * 300);
		CHECK_EQ(bad, 0);
		btr_trace_reader_info(r, &info);
		CHECK(info.chunks > 100);
		/* Every chunk honours the size limit (header + payload). */
		CHECK(info.raw_bytes <= info.chunks * 4096);
		if (comp)
			CHECK(info.compressed_chunks > 0);
		btr_trace_reader_free(r);
		(void)mism;
	}
}

static void test_large(void)
{
	char p[600];
	const size_t big = 3u << 20 | 12345;
	uint8_t *data = malloc(big);
	struct btr_branch *br = malloc(100000 * sizeof(*br));
	struct btr_trace_reader *r;
	struct btr_trace_writer *w;
	struct btr_trace_info info;

	for (int comp = 0; comp <= 1; comp++) {
		for (size_t i = 0; i < big; i++)
			data[i] = comp ? (uint8_t)(i % 251 < 200 ? 0 : i) : (uint8_t)rnd();
		for (int i = 0; i < 100000; i++) {
			memset(&br[i], 0, sizeof(br[i]));
			br[i].from = rnd();
			br[i].to = rnd();
			br[i].kind = (uint8_t)(i % 18);
			br[i].tid = 77;
		}
		struct btr_trace_writer_opts o = { sizeof(o), comp ? 5 : 0, 0, 1 };
		path_in(p, sizeof(p), "large.btr");
		CHECK_EQ(btr_trace_writer_new(p, &o, &w), 0);
		if (!w)
			continue;
		struct btr_record rec = { .type = BTR_REC_PT };
		rec.u.data.tid = 9;
		rec.u.data.cpu = -1;
		rec.u.data.stream_offset = 1000;
		rec.u.data.size = big;
		rec.u.data.data = data;
		CHECK_EQ(btr_trace_write(w, &rec), 0);
		struct btr_record rb = { .type = BTR_REC_BRANCHES };
		rb.u.branches.tid = 77;
		rb.u.branches.count = 100000;
		rb.u.branches.branches = br;
		CHECK_EQ(btr_trace_write(w, &rb), 0);
		CHECK_EQ(btr_trace_writer_close(w), 0);

		CHECK_EQ(btr_trace_reader_new(p, &r), 0);
		if (!r)
			continue;
		uint64_t off = 1000, got = 0;
		uint32_t nb = 0;
		int rc, bad = 0, pieces = 0;
		while ((rc = btr_trace_read(r, &rec)) == 0) {
			if (rec.type == BTR_REC_PT) {
				pieces++;
				if (rec.u.data.stream_offset != off || rec.u.data.tid != 9 ||
				    got + rec.u.data.size > big ||
				    memcmp(rec.u.data.data, data + got, rec.u.data.size))
					bad++;
				off += rec.u.data.size;
				got += rec.u.data.size;
			} else if (rec.type == BTR_REC_BRANCHES) {
				if (nb + rec.u.branches.count > 100000 ||
				    !branches_equal(rec.u.branches.branches, br + nb, rec.u.branches.count))
					bad++;
				nb += rec.u.branches.count;
			} else {
				bad++;
			}
		}
		CHECK_EQ(rc, -BTR_ERR_EOS);
		CHECK_EQ(got, big);
		CHECK_EQ(nb, 100000);
		CHECK_EQ(bad, 0);
		CHECK(pieces >= 4); /* 3 MiB in 1 MiB chunks */
		btr_trace_reader_info(r, &info);
		CHECK(info.raw_bytes <= info.chunks * (uint64_t)BTR_TRACE_CHUNK_DEFAULT);
		if (comp)
			CHECK(info.stored_bytes < info.raw_bytes / 2);
		btr_trace_reader_free(r);
	}
	free(data);
	free(br);
}

/* Offsets where each chunk ends and how many records it holds, parsed
 * independently of lib/trace/trace.c from the layout in docs/format.md. */
struct chunkpos {
	size_t start, end;
	uint32_t count;
};

static int parse_chunks(const uint8_t *b, size_t n, struct chunkpos *c, int max)
{
	size_t off = 38 + (b[36] | b[37] << 8);
	int k = 0;
	CHECK_EQ(b[16] | b[17] << 8, off);
	while (off + 32 <= n && k < max) {
		uint32_t stored = b[off + 12] | b[off + 13] << 8 | b[off + 14] << 16 | (uint32_t)b[off + 15] << 24;
		c[k].start = off;
		c[k].count = b[off + 16] | b[off + 17] << 8;
		c[k].end = off + 32 + stored;
		off = c[k].end;
		k++;
	}
	CHECK_EQ(off, n);
	return k;
}

static void test_truncation(void)
{
	char p[600], q[600];
	size_t n;
	struct chunkpos c[64];
	path_in(p, sizeof(p), "small.btr");
	CHECK_EQ(write_samples(p, 0, 512, 2), 0);
	uint8_t *b = slurp(p, &n);
	if (!b)
		return;
	int nc = parse_chunks(b, n, c, 64);
	CHECK(nc >= 6);
	size_t hdr = c[0].start;
	int bad = 0, badfile = 0;
	for (size_t len = 0; len <= n; len++) {
		struct btr_trace_reader *r;
		struct btr_record rec;
		int rc = btr_trace_reader_new_mem(b, len, &r);
		if (len < hdr) {
			if (rc != -BTR_ERR_TRUNCATED)
				bad++;
			continue;
		}
		if (rc) {
			bad++;
			continue;
		}
		int got = 0, want = 0;
		for (int i = 0; i < nc; i++)
			if (c[i].end <= len)
				want += (int)c[i].count;
		while ((rc = btr_trace_read(r, &rec)) == 0)
			got++;
		if (got != want || rc != (len == n ? -BTR_ERR_EOS : -BTR_ERR_TRUNCATED)) {
			if (!bad)
				fprintf(stderr, "cut at %zu: %d records (want %d), rc %d\n", len, got, want, rc);
			bad++;
		}
		btr_trace_reader_free(r);

		/* The file reader, on every 5th cut (and the boundaries). */
		if (len % 5 && len != hdr && len != n)
			continue;
		path_in(q, sizeof(q), "cut.btr");
		spit(q, b, len);
		rc = btr_trace_reader_new(q, &r);
		if (rc) {
			badfile++;
			continue;
		}
		got = 0;
		while ((rc = btr_trace_read(r, &rec)) == 0)
			got++;
		if (got != want || rc != (len == n ? -BTR_ERR_EOS : -BTR_ERR_TRUNCATED))
			badfile++;
		btr_trace_reader_free(r);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(badfile, 0);
	free(b);
}

static void test_corruption(void)
{
	char p[600];
	size_t n;
	struct chunkpos c[64];
	path_in(p, sizeof(p), "corrupt.btr");
	CHECK_EQ(write_samples(p, 1, 512, 2), 0);
	uint8_t *b = slurp(p, &n);
	if (!b)
		return;
	int nc = parse_chunks(b, n, c, 64);
	size_t hdr = c[0].start;
	int total = 0;
	for (int i = 0; i < nc; i++)
		total += (int)c[i].count;
	int bad = 0, hdr_bad = 0;
	for (size_t pos = 0; pos < n; pos++) {
		struct btr_trace_reader *r;
		struct btr_record rec;
		b[pos] ^= 0x10;
		int rc = btr_trace_reader_new_mem(b, n, &r);
		if (pos < hdr) {
			/* Header damage: magic, version or checksum, never 0
			 * (every header byte is covered by the CRC). */
			if (rc != -BTR_ERR_BAD_MAGIC && rc != -BTR_ERR_BAD_VERSION && rc != -BTR_ERR_CHECKSUM)
				hdr_bad++;
			if (!rc)
				btr_trace_reader_free(r);
			b[pos] ^= 0x10;
			continue;
		}
		int k = 0;
		while (k + 1 < nc && c[k].end <= pos)
			k++;
		int got = 0, sums = 0, last;
		if (rc) {
			bad++;
			b[pos] ^= 0x10;
			continue;
		}
		for (;;) {
			rc = btr_trace_read(r, &rec);
			if (rc == 0) {
				got++;
				continue;
			}
			if (rc == -BTR_ERR_CHECKSUM && sums++ < 5)
				continue;
			break;
		}
		last = rc;
		/* Exactly the damaged chunk is lost; the end chunk's loss shows
		 * as a missing end marker. */
		int want_last = k == nc - 1 ? -BTR_ERR_TRUNCATED : -BTR_ERR_EOS;
		if (sums != 1 || got != total - (int)c[k].count || last != want_last) {
			if (!bad)
				fprintf(stderr, "flip at %zu (chunk %d): %d records of %d, %d checksum errors, rc %d\n",
					pos, k, got, total, sums, last);
			bad++;
		}
		struct btr_trace_info info;
		btr_trace_reader_info(r, &info);
		if (info.bad_chunks != 1)
			bad++;
		btr_trace_reader_free(r);
		b[pos] ^= 0x10;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(hdr_bad, 0);
	free(b);
}

static void put32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/* Builds a file: header from a real writer + one hand-made chunk with
 * @payload, + end chunk.  Returns its size. */
static size_t craft(uint8_t *out, const uint8_t *payload, uint32_t len, uint32_t count,
		    uint16_t minor)
{
	char p[600];
	size_t n;
	path_in(p, sizeof(p), "empty.btr");
	CHECK_EQ(write_samples(p, 0, 0, 0), 0);
	uint8_t *b = slurp(p, &n);
	size_t hdr = 38 + (b[36] | b[37] << 8);
	memcpy(out, b, hdr);
	free(b);
	if (minor) {
		out[10] = (uint8_t)minor;
		out[11] = (uint8_t)(minor >> 8);
		put32le(out + 20, 0);
		put32le(out + 20, btr_crc32c(0, out, hdr));
	}
	uint8_t *h = out + hdr;
	put32le(h, 0x43525442u);
	put32le(h + 4, 0);
	put32le(h + 8, len);
	put32le(h + 12, len);
	put32le(h + 16, count);
	put32le(h + 20, btr_crc32c(0, payload, len));
	put32le(h + 24, 0);
	put32le(h + 28, btr_crc32c(0, h, 28));
	memcpy(h + 32, payload, len);
	h += 32 + len;
	put32le(h, 0x43525442u);
	put32le(h + 4, 2);
	put32le(h + 8, 16);
	put32le(h + 12, 16);
	put32le(h + 16, 0);
	uint8_t end[16] = { 1, 0, 0, 0, 0, 0, 0, 0, (uint8_t)count };
	put32le(h + 20, btr_crc32c(0, end, 16));
	put32le(h + 24, 0);
	put32le(h + 28, btr_crc32c(0, h, 28));
	memcpy(h + 32, end, 16);
	return (size_t)(h + 48 - out);
}

static int read_all(const uint8_t *b, size_t n, struct btr_record *first, int *count)
{
	struct btr_trace_reader *r;
	struct btr_record rec;
	int rc = btr_trace_reader_new_mem(b, n, &r);
	*count = 0;
	if (rc)
		return rc;
	while ((rc = btr_trace_read(r, &rec)) == 0) {
		if (!*count && first)
			*first = rec;
		(*count)++;
	}
	btr_trace_reader_free(r);
	return rc;
}

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif

/* read_all() in a child process whose address space is limited to 4 GiB
 * (not under ASan, whose shadow memory needs more): its error code, or
 * -1000 if the child did not end normally. */
static int read_bounded(const uint8_t *b, size_t n)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
#ifndef ASAN_BUILD
		struct rlimit rl = { 4ull << 30, 4ull << 30 };
		if (setrlimit(RLIMIT_AS, &rl))
			_exit(99);
#endif
		int cnt;
		_exit(-read_all(b, n, NULL, &cnt) & 0xff);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1000;
	return -WEXITSTATUS(st);
}

static void test_malformed(void)
{
	uint8_t file[4096], pl[256];
	struct btr_record rec;
	int cnt;
	size_t n;

	/* Forward compatibility: an unknown type 200 is skipped by length, a
	 * process_exit with 4 extra trailing bytes is read, minor version 7
	 * accepted. */
	memset(pl, 0, sizeof(pl));
	pl[0] = 200; pl[4] = 5;                 /* type 200, 5 bytes */
	uint8_t *x = pl + 13;
	x[0] = BTR_REC_PROCESS_EXIT; x[4] = 44; /* 40 + 4 */
	x[8] = 0x11; x[16] = 0xfe; x[17] = 0xff; x[18] = 0xff; x[19] = 0xff; /* pid 0x11, code -2 */
	x[20] = 6;                               /* signo */
	n = craft(file, pl, 13 + 8 + 44, 2, 7);
	memset(&rec, 0, sizeof(rec));
	CHECK_EQ(read_all(file, n, &rec, &cnt), -BTR_ERR_EOS);
	CHECK_EQ(cnt, 1);
	CHECK_EQ(rec.type, BTR_REC_PROCESS_EXIT);
	CHECK_EQ(rec.u.exit.pid, 0x11);
	CHECK_EQ(rec.u.exit.code, -2);
	CHECK_EQ(rec.u.exit.signo, 6);

	/* A record whose fields are shorter than its type needs. */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_PROCESS_EXIT; pl[4] = 10;
	n = craft(file, pl, 18, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	CHECK_EQ(cnt, 0);
	/* Length overrunning the chunk. */
	pl[4] = 200;
	n = craft(file, pl, 18, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* +1 boundaries of the record length: a record of an unknown type
	 * (skipped by its length) that ends exactly at the chunk's end is
	 * read; one byte longer overruns the chunk by exactly one byte. */
	memset(pl, 0, sizeof(pl));
	pl[0] = 200; pl[4] = 10;
	n = craft(file, pl, 18, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_EOS);
	pl[4] = 11;
	n = craft(file, pl, 18, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* a chunk ending in a partial record header (7 of its 8 bytes) */
	pl[4] = 0;
	n = craft(file, pl, 8 + 7, 2, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	n = craft(file, pl, 8 + 8, 2, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_EOS);
	/* LBR: the count's entries fill the record exactly, or need one more */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_LBR; pl[4] = 32 + 24;
	pl[8 + 12] = 1;
	n = craft(file, pl, 8 + 56, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_EOS);
	CHECK_EQ(cnt, 1);
	pl[8 + 12] = 2;
	n = craft(file, pl, 8 + 56, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* BRANCHES: the count's branches (44 bytes each) fill the record
	 * exactly, or need one more */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_BRANCHES; pl[4] = 8 + 44;
	pl[8 + 4] = 1;
	pl[8 + 8] = 0x34; pl[8 + 9] = 0x12;      /* from 0x1234 */
	n = craft(file, pl, 8 + 52, 1, 0);
	memset(&rec, 0, sizeof(rec));
	CHECK_EQ(read_all(file, n, &rec, &cnt), -BTR_ERR_EOS);
	CHECK_EQ(cnt, 1);
	CHECK_EQ(rec.type, BTR_REC_BRANCHES);
	pl[8 + 4] = 2;
	n = craft(file, pl, 8 + 52, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	CHECK_EQ(cnt, 0);
	/* PT: the size equals the bytes present (the +1 case is below) */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_PT; pl[4] = 24 + 10;
	pl[8 + 16] = 10;
	n = craft(file, pl, 8 + 34, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_EOS);
	CHECK_EQ(cnt, 1);
	/* a module path one byte longer than the record holds */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_MODULE_LOAD; pl[4] = 43 + 7;
	pl[8 + 41] = 8;
	memcpy(pl + 8 + 43, "/bin/sh", 7);
	n = craft(file, pl, 8 + 50, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* the file header's length: one byte short of its creator string
	 * (the CRC cannot be checked: a damaged header), or exact */
	memset(pl, 0, sizeof(pl));
	pl[0] = 200; pl[4] = 10;
	{
		size_t hdr;
		n = craft(file, pl, 18, 1, 0);
		hdr = 38 + (file[36] | file[37] << 8);
		uint32_t hl = (uint32_t)hdr - 1;
		put32le(file + 16, hl);
		CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_CHECKSUM);
		put32le(file + 16, (uint32_t)hdr);
		CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_EOS);
		/* ... and the same short header made consistent otherwise:
		 * the creator's last byte cut out (the chunks follow at the
		 * header length it says) and the CRC computed over the bytes it
		 * says.  Only the length check refuses it: read, its creator
		 * would take the first byte of the first chunk. */
		memmove(file + hdr - 1, file + hdr, n - hdr);
		put32le(file + 16, hl);
		put32le(file + 20, 0);
		put32le(file + 20, btr_crc32c(0, file, hl));
		CHECK_EQ(read_all(file, n - 1, NULL, &cnt), -BTR_ERR_CHECKSUM);
		/* the same with the creator's length fixed is a good file */
		file[36] = (uint8_t)(hl - 38);
		file[37] = (uint8_t)((hl - 38) >> 8);
		put32le(file + 20, 0);
		put32le(file + 20, btr_crc32c(0, file, hl));
		CHECK_EQ(read_all(file, n - 1, NULL, &cnt), -BTR_ERR_EOS);
	}
	/* Record count in the chunk header disagrees. */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_PROCESS_EXIT;
	pl[4] = 10;
	n = craft(file, pl, 18, 3, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* PT record claiming more data than it holds. */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_PT; pl[4] = 24 + 10;
	pl[8 + 16] = 11; /* size 11, 10 present */
	n = craft(file, pl, 8 + 34, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* LBR with a huge count (2^31 - 1 entries of 24 bytes: 48 GiB, in a
	 * record holding one): refused before anything is allocated for what
	 * it claims.  Read in a child under a 4 GiB address-space limit, so
	 * that allocating the claim fails (NOMEM) even where the kernel would
	 * overcommit it: the reader must say BAD_RECORD, never NOMEM. */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_LBR; pl[4] = 32 + 24;
	pl[8 + 12] = 0xff; pl[8 + 13] = 0xff; pl[8 + 14] = 0xff; pl[8 + 15] = 0x7f;
	n = craft(file, pl, 8 + 56, 1, 0);
	CHECK_EQ(read_bounded(file, n), -BTR_ERR_BAD_RECORD);
	/* Module with a string running past the record. */
	memset(pl, 0, sizeof(pl));
	pl[0] = BTR_REC_MODULE_LOAD; pl[4] = 43 + 3;
	pl[8 + 41] = 9; /* path length 9, 1 byte present */
	n = craft(file, pl, 8 + 46, 1, 0);
	CHECK_EQ(read_all(file, n, NULL, &cnt), -BTR_ERR_BAD_RECORD);
	/* ... and the same with the right length is fine. */
	pl[4] = 43 + 9; pl[8 + 41] = 7;
	memcpy(pl + 8 + 43, "/bin/sh", 7);
	n = craft(file, pl, 8 + 52, 1, 0);
	memset(&rec, 0, sizeof(rec));
	CHECK_EQ(read_all(file, n, &rec, &cnt), -BTR_ERR_EOS);
	CHECK_EQ(cnt, 1);

	/* End-chunk totals catch a whole chunk cut out of the middle. */
	char p[600];
	size_t fn;
	struct chunkpos c[64];
	path_in(p, sizeof(p), "splice.btr");
	CHECK_EQ(write_samples(p, 0, 512, 1), 0);
	uint8_t *b = slurp(p, &fn);
	int nc = parse_chunks(b, fn, c, 64);
	CHECK(nc >= 3);
	memmove(b + c[1].start, b + c[1].end, fn - c[1].end);
	CHECK_EQ(read_all(b, fn - (c[1].end - c[1].start), NULL, &cnt), -BTR_ERR_BAD_RECORD);
	free(b);
}

/* btr_file_kind: the one place that knows the magics. */
static void test_file_kind(void)
{
	CHECK_EQ(btr_file_kind("BTRTRACE\x01\x00", 10), BTR_FILE_BTR);
	CHECK_EQ(btr_file_kind("PERFILE2", 8), BTR_FILE_PERF);
	CHECK_EQ(btr_file_kind("2ELIFREP", 8), BTR_FILE_PERF);   /* the other byte order */
	CHECK_EQ(btr_file_kind("BTRTRAC", 7), BTR_FILE_OTHER);    /* too short to say */
	CHECK_EQ(btr_file_kind("\x02\x82\x02\x82\x02\x82\x02\x82", 8), BTR_FILE_OTHER);   /* raw PT */
	CHECK_EQ(btr_file_kind(NULL, 0), BTR_FILE_OTHER);
}

static void test_magic_version(void)
{
	char p[600];
	size_t n;
	struct btr_trace_reader *r = (void *)1;
	path_in(p, sizeof(p), "ver.btr");
	CHECK_EQ(write_samples(p, 0, 0, 1), 0);
	uint8_t *b = slurp(p, &n);
	if (!b)
		return;
	b[8] = 2; /* major 2 */
	CHECK_EQ(btr_trace_reader_new_mem(b, n, &r), -BTR_ERR_BAD_VERSION);
	CHECK(r == NULL);
	spit(p, b, n);
	CHECK_EQ(btr_trace_reader_new(p, &r), -BTR_ERR_BAD_VERSION);
	b[8] = 1;
	b[0] = 'X';
	CHECK_EQ(btr_trace_reader_new_mem(b, n, &r), -BTR_ERR_BAD_MAGIC);
	spit(p, b, n);
	CHECK_EQ(btr_trace_reader_new(p, &r), -BTR_ERR_BAD_MAGIC);
	spit(p, "hello\n", 6);
	CHECK_EQ(btr_trace_reader_new(p, &r), -BTR_ERR_BAD_MAGIC);
	spit(p, "BTR", 3);
	CHECK_EQ(btr_trace_reader_new(p, &r), -BTR_ERR_TRUNCATED);
	spit(p, "", 0);
	CHECK_EQ(btr_trace_reader_new(p, &r), -BTR_ERR_TRUNCATED);
	CHECK_EQ(btr_trace_reader_new_mem(NULL, 0, &r), -BTR_ERR_TRUNCATED);
	CHECK_EQ(btr_trace_reader_new_mem("", 0, &r), -BTR_ERR_TRUNCATED);
	path_in(p, sizeof(p), "does-not-exist.btr");
	CHECK_EQ(btr_trace_reader_new(p, &r), -BTR_ERR_NOENT);
	CHECK_EQ(btr_trace_reader_new(dir, &r), -BTR_ERR_ISDIR);
	free(b);
}

static void test_writer_errors(void)
{
	char p[700];
	struct btr_trace_writer *w = (void *)1;

	path_in(p, sizeof(p), "no/such/dir/x.btr");
	CHECK_EQ(btr_trace_writer_new(p, NULL, &w), -BTR_ERR_NOENT);
	CHECK(w == NULL);

	/* Unwritable directory: a 0555 directory, or /sys when running as
	 * root (root ignores the mode bits). */
	char ro[600];
	const char *rodir = ro;
	path_in(ro, sizeof(ro), "readonly");
	mkdir(ro, 0755);
	chmod(ro, 0555);
	if (geteuid() == 0)
		rodir = "/sys";
	snprintf(p, sizeof(p), "%s/btr-test-%d.btr", rodir, (int)getpid());
	CHECK_EQ(btr_trace_writer_new(p, NULL, &w), -BTR_ERR_PERM);
	CHECK(w == NULL);
	char pre[64];
	snprintf(pre, sizeof(pre), "btr-test-%d", (int)getpid());
	CHECK_EQ(count_prefix(rodir, pre), 0);
	chmod(ro, 0755);

	/* Bad options and records. */
	struct btr_trace_writer_opts o = { sizeof(o), 99, 0 };
	path_in(p, sizeof(p), "opts.btr");
	unlink(p);
	CHECK_EQ(btr_trace_writer_new(p, &o, &w), -BTR_ERR_INVAL);
	CHECK(!file_exists(p));
	CHECK_EQ(btr_trace_writer_new(p, NULL, &w), 0);
	struct btr_record rec = { .type = (enum btr_rec_type)0 };
	CHECK_EQ(btr_trace_write(w, &rec), -BTR_ERR_INVAL);
	rec.type = BTR_REC_PT;
	rec.u.data.size = 5; /* data NULL */
	CHECK_EQ(btr_trace_write(w, &rec), -BTR_ERR_INVAL);
	rec.type = BTR_REC_LBR;
	rec.u.lbr.count = BTR_TRACE_MAX_LBR + 1;
	rec.u.lbr.entries = lbr_e;
	CHECK_EQ(btr_trace_write(w, &rec), -BTR_ERR_INVAL);
	/* ... which does not poison the writer. */
	rec.type = BTR_REC_PROCESS_EXIT;
	rec.u.exit.code = 3;
	CHECK_EQ(btr_trace_write(w, &rec), 0);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	int cnt;
	size_t n;
	uint8_t *b = slurp(p, &n);
	CHECK(b != NULL);
	CHECK_EQ(read_all(b, n, NULL, &cnt), -BTR_ERR_EOS);
	CHECK_EQ(cnt, 1);
	free(b);
}

static void test_abort_flush(void)
{
	char p[600], tmp[700];
	struct btr_trace_writer *w;
	struct btr_record s[NSAMPLE], rec;
	struct btr_trace_reader *r;

	make_samples(s);
	path_in(p, sizeof(p), "abort.btr");
	unlink(p);
	CHECK_EQ(btr_trace_writer_new(p, NULL, &w), 0);
	if (!w)
		return;
	/* The temporary file: one random name beside the trace (O_EXCL). */
	char pat[720];
	glob_t gl;
	snprintf(pat, sizeof(pat), "%s.tmp.??????", p);
	tmp[0] = 0;
	if (glob(pat, 0, NULL, &gl) == 0) {
		CHECK_EQ(gl.gl_pathc, 1);
		snprintf(tmp, sizeof(tmp), "%s", gl.gl_pathv[0]);
		globfree(&gl);
	}
	for (int i = 0; i < NSAMPLE; i++)
		CHECK_EQ(btr_trace_write(w, &s[i]), 0);
	CHECK(!file_exists(p));
	CHECK(file_exists(tmp));
	/* Before a flush the records are still in memory. */
	CHECK_EQ(btr_trace_reader_new(tmp, &r), 0);
	if (r) {
		CHECK_EQ(btr_trace_read(r, &rec), -BTR_ERR_TRUNCATED);
		btr_trace_reader_free(r);
	}
	/* After it they are readable, then the missing end marker shows. */
	CHECK_EQ(btr_trace_flush(w), 0);
	CHECK_EQ(btr_trace_flush(w), 0);
	CHECK_EQ(btr_trace_reader_new(tmp, &r), 0);
	if (r) {
		int mism = 0;
		CHECK_EQ(read_compare(r, 1, &mism), -BTR_ERR_TRUNCATED);
		struct btr_trace_info info;
		btr_trace_reader_info(r, &info);
		CHECK_EQ(info.records, NSAMPLE);
		CHECK_EQ(info.complete, 0);
		CHECK_EQ(mism, 0);
		btr_trace_reader_free(r);
	}
	btr_trace_writer_abort(w);
	CHECK(!file_exists(p));
	CHECK(!file_exists(tmp));
	CHECK_EQ(count_prefix(dir, "abort.btr"), 0);

	/* Closing over an existing file replaces it; until then the old one
	 * is untouched. */
	spit(p, "old", 3);
	CHECK_EQ(btr_trace_writer_new(p, NULL, &w), 0);
	CHECK_EQ(btr_trace_write(w, &s[0]), 0);
	size_t n;
	uint8_t *b = slurp(p, &n);
	CHECK(b && n == 3);
	free(b);
	CHECK_EQ(btr_trace_writer_close(w), 0);
	CHECK_EQ(btr_trace_reader_new(p, &r), 0);
	if (r) {
		CHECK_EQ(btr_trace_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_MACHINE);
		btr_trace_reader_free(r);
	}
	CHECK_EQ(count_prefix(dir, "abort.btr.tmp"), 0);
}

/* perf.data goes through lib/perf/perfdata.c behind the same API. */
static void test_perfdata(void)
{
	static const char *const files[] = { BTR_SHARED_DIR "/traces/quipper/perf.data.branch-4.14",
					     BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14" };
	for (int f = 0; f < 2; f++) {
		struct btr_trace_reader *r;
		struct btr_record rec;
		struct btr_trace_info info;
		int n = 0, lbr = 0, pt = 0, machine_first = 0, rc;
		if (!file_exists(files[f])) {
			printf("note: %s absent, perf.data part skipped\n", files[f]);
			continue;
		}
		for (int mem = 0; mem <= 1; mem++) {
			size_t size = 0;
			uint8_t *b = NULL;
			if (mem) {
				b = slurp(files[f], &size);
				CHECK_EQ(btr_trace_reader_new_mem(b, size, &r), 0);
			} else {
				CHECK_EQ(btr_trace_reader_new(files[f], &r), 0);
			}
			if (!r) {
				free(b);
				continue;
			}
			n = lbr = pt = 0;
			while ((rc = btr_trace_read(r, &rec)) == 0) {
				if (!n)
					machine_first = rec.type == BTR_REC_MACHINE &&
							!strcmp(rec.u.machine.backend, "perf");
				lbr += rec.type == BTR_REC_LBR && rec.u.lbr.count > 0;
				pt += rec.type == BTR_REC_PT && rec.u.data.size > 0;
				n++;
			}
			CHECK_EQ(rc, -BTR_ERR_EOS);
			CHECK(machine_first);
			CHECK(f == 0 ? lbr > 0 : pt > 0);
			btr_trace_reader_info(r, &info);
			CHECK_EQ(info.format, BTR_TRACE_FMT_PERF);
			CHECK_EQ(info.records, n);
			CHECK_EQ(info.complete, 1);
			btr_trace_reader_free(r);
			free(b);
		}
	}
}

/* The file used by tests/cli_trace.sh: every record type, compressed. */
static void write_cli_sample(void)
{
	CHECK_EQ(write_samples("trace_sample.btr", 3, 0, 1), 0);
	CHECK_EQ(write_samples("trace_sample_plain.btr", 0, 1024, 1), 0);
}

/* The names trace dump and report print for enum btr_thread_end. */
static void test_thread_end_names(void)
{
	CHECK_STR(btr_thread_end_name(BTR_THREAD_END_UNKNOWN), "unknown");
	CHECK_STR(btr_thread_end_name(BTR_THREAD_END_EXITED), "exited");
	CHECK_STR(btr_thread_end_name(BTR_THREAD_END_KILLED), "killed");
	CHECK_STR(btr_thread_end_name(BTR_THREAD_END_RUNNING), "running");
	CHECK_STR(btr_thread_end_name(4), "unknown");
	CHECK_STR(btr_thread_end_name(UINT32_MAX), "unknown");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "%s/test_trace.d", BTR_BINARY_DIR);
	mkdir(dir, 0755);
	test_crc();
	test_thread_end_names();
	test_roundtrip();
	test_targets();
	test_many_chunks();
	test_large();
	test_truncation();
	test_corruption();
	test_malformed();
	test_file_kind();
	test_magic_version();
	test_writer_errors();
	test_abort_flush();
	test_perfdata();
	write_cli_sample();
	return check_done();
}
