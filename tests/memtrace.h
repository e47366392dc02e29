/* memtrace.h - synthetic traces of any length for the bounded-memory tests
 * (test_memory_*.c), and the peak RSS of a `btr` command run on them.
 *
 * The code is ptgen.h's generated image (@nfunc functions of 256 bytes,
 * about seven basic blocks each) written as a minimal ET_EXEC ELF (one
 * PT_LOAD, no sections) at 0x400000; the trace's module_load record names
 * it, so every command decodes it like a recorded program.  A "unit" is one
 * ptgen walk (PSB+, TIP.PGE, then @unit_bytes of TNT/TIP); a thread's
 * stream is that unit over and over, each copy followed by an OVF packet
 * (so the stream stays valid Intel PT and the call-stack views restart at
 * every copy: the distinct call paths of the trace are those of one unit,
 * whatever the trace's length; BTS: a 24-byte hole in stream_offset).  Threads are written round-robin, one copy
 * per record, so with more than 16 threads the stream's decoder cache
 * evicts and resumes at each copy's PSB.  With @bts the same branches go
 * out as 24-byte BTS records instead (taken branches only; about 50 times
 * more bytes per branch than the dense PT, so GiBs decode in seconds).
 *
 * Every copy executes exactly unit.insns instructions and unit.branches
 * branches (PT): a trace of T threads and K copies has K*T times that, which
 * the tests check so that a command that gave up early cannot pass. */
#ifndef BTR_TEST_MEMTRACE_H
#define BTR_TEST_MEMTRACE_H

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btr/btr.h"
#include "check.h"
#include "ptgen.h"

/* Under ASan, peak RSS measures the sanitizer (shadow memory, the
 * quarantine of freed blocks), not btr: the tests skip. */
#if defined(__SANITIZE_ADDRESS__)
#define MT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MT_ASAN 1
#endif
#endif
static inline void mt_skip_under_asan(void)
{
#ifdef MT_ASAN
	check_skip("peak RSS under ASan measures the sanitizer's quarantine, not btr");
#endif
}

#define MT_BASE 0x400000ull
#define MT_CODE 0x1000ull     /* file offset (and vaddr - MT_BASE) of the code */

struct memtrace {
	char elf[1024];
	struct ptgen g;          /* code + one unit of PT */
	uint8_t *unit;           /* the unit's PT followed by OVF */
	size_t unit_size;
	uint8_t *bts;            /* the unit's taken branches as BTS records */
	size_t bts_size, bts_taken;
};

/* Writes ptgen's image as an ELF file at @path: one PT_LOAD of the code
 * at MT_BASE + MT_CODE and a .symtab naming each function fN (so the views
 * see as many functions as the code has).  Returns 0 or -1. */
static inline int mt_write_elf(const struct ptgen *g, const char *path)
{
	size_t nsym = g->nfunc + 1, strsz = 1;
	char *str = malloc(nsym * 12 + 1);
	Elf64_Sym *sym = calloc(nsym, sizeof(*sym));
	if (!str || !sym)
		return -1;
	str[0] = 0;
	for (unsigned i = 0; i < g->nfunc; i++) {
		Elf64_Sym *y = &sym[i + 1];
		y->st_name = (Elf64_Word)strsz;
		y->st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
		y->st_shndx = 1;
		y->st_value = MT_BASE + MT_CODE + (uint64_t)i * PTGEN_FSIZE;
		y->st_size = PTGEN_FSIZE;
		strsz += (size_t)sprintf(str + strsz, "f%u", i) + 1;
	}
	static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
	uint64_t off_sym = MT_CODE + g->code_size, off_str = off_sym + nsym * sizeof(*sym),
		 off_shstr = off_str + strsz, off_sh = (off_shstr + sizeof(shstr) + 7) & ~7ull;
	Elf64_Ehdr eh = { 0 };
	Elf64_Phdr ph = { 0 };
	Elf64_Shdr sh[5];
	memset(sh, 0, sizeof(sh));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = MT_BASE + MT_CODE;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = off_sh;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 5;
	eh.e_shstrndx = 4;
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_vaddr = ph.p_paddr = MT_BASE;
	ph.p_filesz = ph.p_memsz = MT_CODE + g->code_size;
	ph.p_align = 0x1000;
	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_EXECINSTR,
			      .sh_addr = MT_BASE + MT_CODE, .sh_offset = MT_CODE, .sh_size = g->code_size,
			      .sh_addralign = 16 };
	sh[2] = (Elf64_Shdr){ .sh_name = 7, .sh_type = SHT_SYMTAB, .sh_offset = off_sym,
			      .sh_size = nsym * sizeof(*sym), .sh_link = 3, .sh_info = 1, .sh_addralign = 8,
			      .sh_entsize = sizeof(*sym) };
	sh[3] = (Elf64_Shdr){ .sh_name = 15, .sh_type = SHT_STRTAB, .sh_offset = off_str, .sh_size = strsz,
			      .sh_addralign = 1 };
	sh[4] = (Elf64_Shdr){ .sh_name = 23, .sh_type = SHT_STRTAB, .sh_offset = off_shstr,
			      .sh_size = sizeof(shstr), .sh_addralign = 1 };
	static const uint8_t zero[MT_CODE];
	size_t pad = off_sh - off_shstr - sizeof(shstr);
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(&eh, sizeof(eh), 1, f) == 1 && fwrite(&ph, sizeof(ph), 1, f) == 1 &&
		 fwrite(zero, MT_CODE - sizeof(eh) - sizeof(ph), 1, f) == 1 &&
		 fwrite(g->code, g->code_size, 1, f) == 1 && fwrite(sym, sizeof(*sym), nsym, f) == nsym &&
		 fwrite(str, strsz, 1, f) == 1 && fwrite(shstr, sizeof(shstr), 1, f) == 1 &&
		 (!pad || fwrite(zero, pad, 1, f) == 1) && fwrite(sh, sizeof(sh), 1, f) == 1;
	free(str);
	free(sym);
	return f && fclose(f) == 0 && ok ? 0 : -1;
}
static inline void mt_write(struct btr_trace_writer *w, const struct btr_record *rec)
{
	int rc = btr_trace_write(w, rec);
	if (rc < 0) {
		fprintf(stderr, "memtrace: write: %s\n", btr_errstr(rc));
		exit(1);
	}
}

static inline void mt_header(struct btr_trace_writer *w, const struct memtrace *m, unsigned nthreads)
{
	struct btr_record rec = { .type = BTR_REC_MACHINE };
	snprintf(rec.u.machine.backend, sizeof(rec.u.machine.backend), "pt");
	snprintf(rec.u.machine.cpu_vendor, sizeof(rec.u.machine.cpu_vendor), "GenuineIntel");
	rec.u.machine.cpu_family = 6;
	rec.u.machine.cpu_model = 0x55;
	rec.u.machine.flags = BTR_MACHINE_PT_RETCOMP | BTR_MACHINE_PT_TSC | BTR_MACHINE_USER_ONLY;
	mt_write(w, &rec);
	rec = (struct btr_record){ .type = BTR_REC_MODULE_LOAD };
	rec.u.module = (struct btr_rec_module){ .pid = 1000, .prot = 5, .start = MT_BASE,
						.size = (MT_CODE + m->g.code_size + 0xfff) & ~0xfffull,
						.path = m->elf };
	mt_write(w, &rec);
	for (unsigned t = 0; t < nthreads; t++) {
		rec = (struct btr_record){ .type = BTR_REC_THREAD_START };
		rec.u.thread = (struct btr_rec_thread){ .pid = 1000, .tid = 1000 + t, .name = "" };
		mt_write(w, &rec);
	}
}

static inline void mt_footer(struct btr_trace_writer *w, unsigned nthreads)
{
	struct btr_record rec;
	for (unsigned t = nthreads; t-- > 0;) {
		rec = (struct btr_record){ .type = BTR_REC_THREAD_EXIT };
		rec.u.thread = (struct btr_rec_thread){ .pid = 1000, .tid = 1000 + t, .name = "" };
		mt_write(w, &rec);
	}
	rec = (struct btr_record){ .type = BTR_REC_PROCESS_EXIT };
	rec.u.exit = (struct btr_rec_exit){ .pid = 1000, .tid = 1000 };
	mt_write(w, &rec);
}

static int mt_collect_bts(void *ctx, const struct btr_branch *b)
{
	struct memtrace *m = ctx;
	if (!(b->flags & BTR_BF_TAKEN))
		return 0;
	if ((m->bts_taken + 1) * BTR_BTS_RECORD_SIZE > m->bts_size) {
		m->bts_size = m->bts_size ? m->bts_size * 2 : 1 << 20;
		m->bts = realloc(m->bts, m->bts_size);
		if (!m->bts)
			return 1;
	}
	btr_bts_encode(b->from, b->to, 0, m->bts + m->bts_taken++ * BTR_BTS_RECORD_SIZE);
	return 0;
}

/* Writes @path: @nthreads threads of @copies units each, as PT or BTS.
 * Returns the trace's size in bytes. */
static inline uint64_t mt_trace(struct memtrace *m, const char *path, unsigned nthreads, unsigned copies, int bts)
{
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	struct btr_trace_writer *w;
	if (btr_trace_writer_new(path, &wo, &w) < 0) {
		fprintf(stderr, "memtrace: cannot create %s\n", path);
		exit(1);
	}
	mt_header(w, m, nthreads);
	const uint8_t *data = bts ? m->bts : m->unit;
	size_t size = bts ? m->bts_taken * BTR_BTS_RECORD_SIZE : m->unit_size;
	/* BTS has no OVF: a record's stream_offset 24 bytes past the end of
	 * the one before says a record was lost, a GAP event, where the
	 * call-stack views restart (as at PT's OVF) */
	size_t gap = bts ? BTR_BTS_RECORD_SIZE : 0;
	for (unsigned c = 0; c < copies; c++)
		for (unsigned t = 0; t < nthreads; t++) {
			struct btr_record rec = { .type = bts ? BTR_REC_BTS : BTR_REC_PT };
			rec.u.data = (struct btr_rec_data){ .tid = 1000 + t, .cpu = -1,
							    .stream_offset = (uint64_t)c * (size + gap),
							    .size = size, .data = data };
			mt_write(w, &rec);
		}
	mt_footer(w, nthreads);
	int rc = btr_trace_writer_close(w);
	if (rc < 0) {
		fprintf(stderr, "memtrace: %s: %s\n", path, btr_errstr(rc));
		exit(1);
	}
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Writes @path: the unit's PT @copies times as a raw PT file.  Returns
 * its size in bytes. */
static inline uint64_t mt_raw(const struct memtrace *m, const char *path, unsigned copies)
{
	FILE *f = fopen(path, "wb");
	int ok = f != NULL;
	for (unsigned c = 0; ok && c < copies; c++)
		ok = fwrite(m->unit, m->unit_size, 1, f) == 1;
	if (!f || fclose(f) != 0 || !ok) {
		fprintf(stderr, "memtrace: cannot write %s\n", path);
		exit(1);
	}
	return (uint64_t)copies * m->unit_size;
}

/* The code of @nfunc functions (written to @dir/code.elf) and a unit of
 * about @unit_bytes of PT; the BTS form of the unit too. */
static inline void mt_init(struct memtrace *m, const char *dir, unsigned nfunc, size_t unit_bytes)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->elf, sizeof(m->elf), "%s/code.elf", dir);
	ptgen_code(&m->g, MT_BASE + MT_CODE, nfunc);
	ptgen_walk(&m->g, unit_bytes, 99, 4096);
	if (mt_write_elf(&m->g, m->elf) < 0) {
		fprintf(stderr, "memtrace: cannot write %s\n", m->elf);
		exit(1);
	}
	m->unit_size = m->g.pt_size + 2;
	m->unit = malloc(m->unit_size);
	memcpy(m->unit, m->g.pt, m->g.pt_size);
	m->unit[m->g.pt_size] = 0x02;     /* OVF */
	m->unit[m->g.pt_size + 1] = 0xf3;
	/* the unit's branches, decoded once, for the BTS form */
	char one[1100];
	snprintf(one, sizeof(one), "%s/unit.btr", dir);
	mt_trace(m, one, 1, 1, 0);
	struct btr_stream_opts so = { .sz = sizeof(so), .branch = mt_collect_bts, .ctx = m };
	struct btr_stream *s;
	if (btr_stream_open(one, &so, &s) < 0 || btr_stream_run(s) < 0) {
		fprintf(stderr, "memtrace: cannot decode %s\n", one);
		exit(1);
	}
	btr_stream_free(s);
	unlink(one);
}

/* One trace to generate, and its size once written. */
struct mt_spec {
	char path[1024];
	unsigned threads, copies;
	int bts;
	int raw;                         /* a raw PT file (one thread), not a .btr */
	uint64_t size;                   /* out: bytes */
};
/* What one copy of the unit holds. */
struct mt_unit {
	uint64_t insns, branches, taken;
};

/* Generates @n traces in a child process, so that the caller, which then
 * forks the measured commands, stays small: ru_maxrss survives fork and
 * exec, so the child of a big parent starts with the parent's RSS.  The
 * code is left in @dir/code.elf (the traces name it). */
static inline void mt_generate(const char *dir, unsigned nfunc, size_t unit_bytes, struct mt_spec *specs, size_t n,
			       struct mt_unit *unit)
{
	size_t shsz = sizeof(*unit) + n * sizeof(*specs);
	uint8_t *sh = mmap(NULL, shsz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		exit(1);
	memcpy(sh + sizeof(*unit), specs, n * sizeof(*specs));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct memtrace m;
		struct mt_unit *u = (struct mt_unit *)sh;
		struct mt_spec *sp = (struct mt_spec *)(sh + sizeof(*unit));
		mt_init(&m, dir, nfunc, unit_bytes);
		u->insns = m.g.insns;
		u->branches = m.g.branches;
		u->taken = m.bts_taken;
		for (size_t i = 0; i < n; i++)
			sp[i].size = sp[i].raw ? mt_raw(&m, sp[i].path, sp[i].copies)
					       : mt_trace(&m, sp[i].path, sp[i].threads, sp[i].copies, sp[i].bts);
		_exit(0);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "memtrace: generating the traces failed\n");
		exit(1);
	}
	memcpy(unit, sh, sizeof(*unit));
	memcpy(specs, sh + sizeof(*unit), n * sizeof(*specs));
	munmap(sh, shsz);
}
/* Reads @path whole (NUL-terminated); NULL if it cannot. */
static inline char *mt_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0, r;
	char *b = malloc(cap);
	while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0)
		if ((n += r) + 1 == cap)
			b = realloc(b, cap *= 2);
	fclose(f);
	if (b)
		b[n] = 0;
	return b;
}

/* The first number after "KEY": in JSON @s, or -1. */
static inline long long mt_json(const char *s, const char *key)
{
	char k[80];
	snprintf(k, sizeof(k), "\"%s\":", key);
	const char *p = s ? strstr(s, k) : NULL;
	return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

/* Runs argv with stdout to @out, or (@out NULL) into a pipe whose lines
 * this process counts into *@lines (not those starting with '[': the
 * [gap ...] and [error ...] notes of script and pt dump); returns the exit code, and the child's
 * peak RSS in KiB (wait4's ru_maxrss) in *@rss_kib. */
static inline int mt_run(char *const argv[], const char *out, long *rss_kib, uint64_t *lines)
{
	int pfd[2] = { -1, -1 };
	if (!out && pipe(pfd) < 0)
		return -1;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = out ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : pfd[1];
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(126);
		if (!out)
			close(pfd[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	if (!out) {
		close(pfd[1]);
		static char buf[1 << 16];
		ssize_t n;
		uint64_t nl = 0;
		int bol = 1, note = 0;
		while ((n = read(pfd[0], buf, sizeof(buf))) > 0)
			for (ssize_t i = 0; i < n; i++) {
				if (bol)
					note = buf[i] == '[';
				bol = buf[i] == '\n';
				nl += bol && !note;
			}
		close(pfd[0]);
		if (lines)
			*lines = nl;
	}
	int st;
	struct rusage ru;
	if (pid < 0 || wait4(pid, &st, 0, &ru) != pid)
		return -1;
	*rss_kib = ru.ru_maxrss;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Peak RSS (KiB) of `BTR ARGS... TRACE`, stdout to @out or counted into
 * *@lines (see mt_run); checks exit 0. */
static inline long mt_rss(const char *btr, const char *const *args, const char *trace, const char *out,
			  uint64_t *lines)
{
	char *argv[16];
	size_t n = 0;
	argv[n++] = (char *)btr;
	while (*args && n < 14)
		argv[n++] = (char *)*args++;
	argv[n++] = (char *)trace;
	argv[n] = NULL;
	long rss = -1;
	int rc = mt_run(argv, out, &rss, lines);
	CHECK_EQ(rc, 0);
	return rss;
}

/* The assertion of every bounded-memory test: @big is the same command on
 * a trace 4x as long as @small's; its peak RSS must not have grown by more
 * than 1/8 plus 4 MiB (allocator noise: a per-branch leak or a buffer of
 * the whole trace grows by far more) plus @slack_kib, and both must be
 * under @cap_kib, an absolute bound that does not depend on the trace's
 * length. */
static inline void mt_check_bound(const char *what, long small, long big, long cap_kib, long slack_kib,
				  uint64_t big_bytes)
{
	printf("%-28s peak RSS %6.1f MiB -> %6.1f MiB (trace x4: %7.1f MiB; cap %.0f MiB)\n", what,
	       small / 1024.0, big / 1024.0, big_bytes / 1048576.0, cap_kib / 1024.0);
	CHECK(small > 0 && big > 0);
	CHECK(big <= small + small / 8 + 4096 + slack_kib);
	CHECK(small <= cap_kib);
	CHECK(big <= cap_kib);
}

enum { MT_REPORT = 1, MT_SCRIPT = 2, MT_DUMP = 4, MT_FLAME = 8 };

/* Runs the commands of @which on @sp[0] and @sp[1] (the same threads, 4x
 * the copies), checks what each did against the unit (so that a command
 * that stopped early or printed nothing cannot pass) and bounds their peak
 * RSS with mt_check_bound, @cap_kib[i] (i: the bit of @which) and
 * @slack_kib. */
static inline void mt_commands(const char *btr, const char *dir, const char *label, const struct mt_spec *sp,
			       const struct mt_unit *u, unsigned which, const long cap_kib[4], long slack_kib)
{
	char json[1100], what[96];
	snprintf(json, sizeof(json), "%s/report.json", dir);
	long rss[2];
	uint64_t lines[2];
	if (which & MT_REPORT) {
		static const char *const a[] = { "report", "--format", "json", NULL };
		for (int i = 0; i < 2; i++) {
			rss[i] = mt_rss(btr, a, sp[i].path, json, NULL);
			char *j = mt_slurp(json);
			uint64_t k = (uint64_t)sp[i].copies * sp[i].threads;
			if (sp[i].bts) {
				CHECK_EQ(mt_json(j, "branches"), k * u->taken);
			} else {
				CHECK_EQ(mt_json(j, "instructions"), k * u->insns);
				CHECK_EQ(mt_json(j, "branches"), k * u->branches);
			}
			CHECK_EQ(mt_json(j, "threads"), sp[i].threads);
			if (i == 1)
				printf("%s: %lld functions, %lld distinct blocks, %lld threads, %lld branches\n", label,
				       mt_json(j, "functions"), mt_json(j, "blocks"), mt_json(j, "threads"),
				       mt_json(j, "branches"));
			free(j);
		}
		unlink(json);
		snprintf(what, sizeof(what), "%s: report", label);
		mt_check_bound(what, rss[0], rss[1], cap_kib[0], slack_kib, sp[1].size);
	}
	if (which & MT_SCRIPT) {
		static const char *const a[] = { "script", NULL };
		for (int i = 0; i < 2; i++) {
			rss[i] = mt_rss(btr, a, sp[i].path, NULL, &lines[i]);
			uint64_t k = (uint64_t)sp[i].copies * sp[i].threads;
			CHECK_EQ(lines[i], k * (sp[i].bts ? u->taken : u->branches));
		}
		snprintf(what, sizeof(what), "%s: script", label);
		mt_check_bound(what, rss[0], rss[1], cap_kib[1], slack_kib, sp[1].size);
	}
	if (which & MT_DUMP) {
		static const char *const a[] = { "pt", "dump", NULL }, *const araw[] = { "pt", "dump", "--raw", NULL };
		for (int i = 0; i < 2; i++)
			rss[i] = mt_rss(btr, sp[i].raw ? araw : a, sp[i].path, NULL, &lines[i]);
		/* every copy's packets, in every thread: 4x the lines */
		CHECK(lines[0] > (uint64_t)sp[0].copies * sp[0].threads * 100);
		CHECK(lines[1] >= 4 * lines[0] - 4 * sp[0].threads && lines[1] <= 4 * lines[0]);
		snprintf(what, sizeof(what), "%s: pt dump", label);
		mt_check_bound(what, rss[0], rss[1], cap_kib[2], slack_kib, sp[1].size);
	}
	if (which & MT_FLAME) {
		static const char *const a[] = { "flame", "-o", "-", NULL };
		for (int i = 0; i < 2; i++) {
			rss[i] = mt_rss(btr, a, sp[i].path, NULL, &lines[i]);
			CHECK(lines[i] > 0);
		}
		/* the same call paths in both: one folded line each */
		CHECK_EQ(lines[1], lines[0]);
		snprintf(what, sizeof(what), "%s: flame (folded)", label);
		mt_check_bound(what, rss[0], rss[1], cap_kib[3], slack_kib, sp[1].size);
	}
}

#endif
