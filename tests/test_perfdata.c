/* test_perfdata.c - the perf.data reader on real recordings and on
 * synthetic files.
 *
 * Expected numbers for the real files come from Debian's perf 6.1
 * (linux-perf), not from btr:
 *   perf report -D -i FILE       "Aggregated stats" record counts, the raw
 *                                first SAMPLE (ip, pid/tid, time, branch
 *                                stack), AUXTRACE size/offset/tid/cpu,
 *                                AUXTRACE_INFO and TIME_CONV fields
 *   perf report --header-only -I cpuid, event names and configs
 *   perf buildid-list -i FILE    build-ids
 * The files are in BTR_SHARED_DIR/traces (see its README.md).
 */
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>
#include <sys/stat.h>
#include <Zydis/Zydis.h>
#include <zstd.h>

#include "check.h"
#include "btr/error.h"
#include "btr/perfdata.h"

#ifdef BTR_HAVE_LIBIPT
#include <intel-pt.h>
#endif

#define TRACES BTR_SHARED_DIR "/traces"

/* ---- helpers ---- */

static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static int exists(const char *path)
{
	return access(path, R_OK) == 0;
}

struct tally {
	unsigned n[BTR_REC__MAX];
	unsigned total;
	int end;              /* the final return value */
};

/* Reads @r to the end, counting record types. */
static void drain(struct btr_perf_reader *r, struct tally *t)
{
	struct btr_record rec;
	memset(t, 0, sizeof(*t));
	while ((t->end = btr_perf_read(r, &rec)) == 0) {
		if (rec.type > 0 && rec.type < BTR_REC__MAX)
			t->n[rec.type]++;
		t->total++;
	}
}

/* ---- autofdo/test.lbr: Westmere, perf 3.3, 16-deep LBR ---- */

struct mod {
	uint64_t start, size;
	uint32_t pid;
	char path[128];
};

/* Reads @len bytes at virtual address @addr of ELF file @path (from the
 * executable PT_LOAD segment that holds it).  Returns 0 or -1. */
struct elfimg {
	int fd;
	Elf *elf;
};

static int elf_read_va(struct elfimg *img, uint64_t addr, uint8_t *out, size_t len)
{
	size_t n;
	if (elf_getphdrnum(img->elf, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(img->elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (addr < ph.p_vaddr || addr + len > ph.p_vaddr + ph.p_filesz)
			continue;
		off_t off = (off_t)(ph.p_offset + (addr - ph.p_vaddr));
		return pread(img->fd, out, len, off) == (ssize_t)len ? 0 : -1;
	}
	return -1;
}

static void test_autofdo(void)
{
	const char *path = TRACES "/autofdo/test.lbr";
	const char *bin = TRACES "/autofdo/test.binary";
	if (!exists(path) || !exists(bin)) {
		printf("autofdo/test.lbr or test.binary absent: skipped\n");
		return;
	}
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new(path, &r), 0);
	if (!r)
		return;

	struct btr_record rec;
	CHECK_EQ(btr_perf_read(r, &rec), 0);
	CHECK_EQ(rec.type, BTR_REC_MACHINE);
	CHECK_STR(rec.u.machine.backend, "perf");
	/* HEADER_CPUID "GenuineIntel,6,44,2" (Westmere-EP X5660) */
	CHECK_STR(rec.u.machine.cpu_vendor, "GenuineIntel");
	CHECK_EQ(rec.u.machine.cpu_family, 6);
	CHECK_EQ(rec.u.machine.cpu_model, 44);
	CHECK_EQ(rec.u.machine.cpu_stepping, 2);
	CHECK_EQ(rec.u.machine.lbr_depth, 16);
	CHECK_EQ(rec.u.machine.tsc_hz, 0); /* no TIME_CONV in perf 3.3 files */

	/* attr: br_inst_exec:taken, type 4 (raw), config 0x534088,
	 * sample_type IP|TID|TIME|BRANCH_STACK, branch_sample_type ANY, 24 ids */
	CHECK_EQ(btr_perf_reader_attr_count(r), 1);
	struct btr_perf_attr a;
	CHECK_EQ(btr_perf_reader_attr(r, 0, &a), 0);
	CHECK_EQ(a.type, 4);
	CHECK_EQ(a.config, 0x534088);
	CHECK_EQ(a.sample_type, 0x807);
	CHECK_EQ(a.branch_sample_type, 0x8);
	CHECK_EQ(a.nr_ids, 24);
	CHECK_STR(a.name, "br_inst_exec:taken");
	CHECK_EQ(btr_perf_reader_attr(r, 1, &a), -BTR_ERR_INVAL);

	struct elfimg img = { .fd = -1 };
	elf_version(EV_CURRENT);
	img.fd = open(bin, O_RDONLY);
	img.elf = img.fd >= 0 ? elf_begin(img.fd, ELF_C_READ, NULL) : NULL;
	CHECK(img.elf != NULL);
	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);

	struct mod mods[64];
	unsigned nmods = 0, nlbr = 0, entries = 0, unmapped = 0, first = 1, user_entries = 0;
	unsigned bin_from = 0, bin_branch = 0, seq_ok = 0, seq_n = 0;
	uint64_t bin_start = 0, bin_end = 0;
	struct tally t = { 0 };
	int e;
	while ((e = btr_perf_read(r, &rec)) == 0) {
		t.n[rec.type]++;
		if (rec.type == BTR_REC_MODULE_LOAD) {
			const struct btr_rec_module *m = &rec.u.module;
			if (nmods < 64) {
				mods[nmods].start = m->start;
				mods[nmods].size = m->size;
				mods[nmods].pid = m->pid;
				snprintf(mods[nmods].path, sizeof(mods[nmods].path), "%s", m->path);
				nmods++;
			}
			if (!strcmp(m->path, "/export/hda3/tmp/test.binary")) {
				/* PERF_RECORD_MMAP 25532/25532: [0x400000(0xa000) @ 0]: x */
				CHECK_EQ(m->pid, 25532);
				CHECK_EQ(m->start, 0x400000);
				CHECK_EQ(m->size, 0xa000);
				CHECK_EQ(m->pgoff, 0);
				CHECK_EQ(m->prot, 5); /* PROT_READ|PROT_EXEC: not MMAP_DATA */
				bin_start = m->start;
				bin_end = m->start + m->size;
			}
		}
		if (rec.type != BTR_REC_LBR)
			continue;
		const struct btr_rec_lbr *l = &rec.u.lbr;
		nlbr++;
		if (first) {
			/* 174024746063718 0xfc8 PERF_RECORD_SAMPLE: 25532/25532:
			 * 0xffffffff8032d7e0, branch stack nr:16,
			 * 0: ffffffff80330812 -> ffffffff8032d7c0,
			 * 15: ffffffff8032d802 -> ffffffff8037a570 */
			first = 0;
			CHECK_EQ(l->pid, 25532);
			CHECK_EQ(l->tid, 25532);
			CHECK_EQ(l->ip, 0xffffffff8032d7e0ULL);
			CHECK_EQ(l->tsc, 174024746063718ULL);
			CHECK_EQ(l->count, 16);
			CHECK_EQ(l->cpu, -1);
			CHECK_EQ(l->entries[0].from, 0xffffffff80330812ULL);
			CHECK_EQ(l->entries[0].to, 0xffffffff8032d7c0ULL);
			CHECK_EQ(l->entries[15].from, 0xffffffff8032d802ULL);
			CHECK_EQ(l->entries[15].to, 0xffffffff8037a570ULL);
			CHECK_EQ(l->entries[0].flags, BTR_BF_PREDICTED);
			CHECK_EQ(btr_perf_reader_offset(r), 0xfc8);
		}
		CHECK(l->count == 16);
		for (unsigned i = 0; i < l->count; i++) {
			const struct btr_lbr_entry *en = &l->entries[i];
			entries++;
			/* user addresses must be in a user mapping of the
			 * sampled process (the kernel's MMAP, 0..0xffffffff9fffffff,
			 * would cover anything) */
			int found = 0, user = en->from < 0x800000000000ULL;
			for (unsigned k = 0; k < nmods && !found; k++)
				found = en->from >= mods[k].start && en->from - mods[k].start < mods[k].size &&
					(!user || (mods[k].pid == l->pid && mods[k].start < 0x800000000000ULL));
			unmapped += !found;
			user_entries += user;
			/* user branches inside test.binary must be branch
			 * instructions in test.binary's bytes */
			if (bin_end && en->from >= bin_start && en->from < bin_end && en->to < 0x800000000000ULL) {
				uint8_t b[15];
				size_t len = sizeof(b);
				while (len && elf_read_va(&img, en->from, b, len))
					len--;
				ZydisDecodedInstruction insn;
				bin_from++;
				if (len && ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, b, len, &insn))) {
					ZydisInstructionCategory c = insn.meta.category;
					bin_branch += c == ZYDIS_CATEGORY_COND_BR || c == ZYDIS_CATEGORY_UNCOND_BR ||
						      c == ZYDIS_CATEGORY_CALL || c == ZYDIS_CATEGORY_RET;
				}
			}
			/* newest first: the branch after entry i+1 (older)
			 * starts at or after where entry i+1 went */
			if (i + 1 < l->count && en->from < 0x800000000000ULL &&
			    l->entries[i + 1].to < 0x800000000000ULL) {
				seq_n++;
				seq_ok += en->from >= l->entries[i + 1].to;
			}
		}
	}
	CHECK_EQ(e, -BTR_ERR_EOS);
	CHECK_EQ(btr_perf_read(r, &rec), -BTR_ERR_EOS); /* sticky */
	/* perf report -D: MMAP 33, COMM 2, EXIT 2, SAMPLE 9232 */
	CHECK_EQ(t.n[BTR_REC_MODULE_LOAD], 33);
	CHECK_EQ(t.n[BTR_REC_THREAD_NAME], 2);
	CHECK_EQ(t.n[BTR_REC_THREAD_EXIT], 2);
	CHECK_EQ(t.n[BTR_REC_LBR], 9232);
	CHECK_EQ(nlbr, 9232);
	CHECK_EQ(btr_perf_reader_count(r, 1), 33);
	CHECK_EQ(btr_perf_reader_count(r, 9), 9232);
	CHECK_EQ(btr_perf_reader_count(r, 3), 2);
	CHECK(bin_end != 0);
	CHECK_EQ(entries, 9232 * 16);
	CHECK_EQ(unmapped, 0);
	CHECK(user_entries > 100000);
	/* every sampled user branch in test.binary decodes as a branch */
	CHECK(bin_from > 10000);
	CHECK_EQ(bin_branch, bin_from);
	CHECK(seq_n > 0 && seq_ok * 100ull >= seq_n * 99ull);
	printf("autofdo: %u LBR entries, %u from test.binary (%u branches), seq %u/%u\n", entries, bin_from,
	       bin_branch, seq_ok, seq_n);

	struct btr_perf_info info;
	CHECK_EQ(btr_perf_reader_info(r, &info), 0);
	CHECK_STR(info.cpuid, "GenuineIntel,6,44,2");
	CHECK_STR(info.hostname, "lpm42");
	CHECK_EQ(info.pipe_mode, 0);
	CHECK_EQ(info.swapped, 0);
	CHECK_EQ(info.time_is_tsc, 0);
	CHECK_EQ(info.data_offset, 408);
	CHECK_EQ(info.data_size, 3918096);
	if (img.elf)
		elf_end(img.elf);
	if (img.fd >= 0)
		close(img.fd);
	btr_perf_reader_free(r);
}

/* ---- quipper/perf.data.intel_pt-4.14: Skylake, AUXTRACE ---- */

static void test_intel_pt(void)
{
	const char *path = TRACES "/quipper/perf.data.intel_pt-4.14";
	size_t size;
	uint8_t *buf = exists(path) ? slurp(path, &size) : NULL;
	if (!buf) {
		printf("quipper/perf.data.intel_pt-4.14 absent: skipped\n");
		return;
	}
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new_mem(buf, size, &r), 0);
	if (!r) {
		free(buf);
		return;
	}
	struct btr_record rec;
	CHECK_EQ(btr_perf_read(r, &rec), 0);
	CHECK_EQ(rec.type, BTR_REC_MACHINE);
	const struct btr_rec_machine *m = &rec.u.machine;
	CHECK_EQ(m->cpu_model, 78);
	CHECK_EQ(m->cpu_stepping, 3);
	/* AUXTRACE_INFO: MTC freq bits 0x3c000, TSC:CTC 100/2, max
	 * non-turbo ratio 12, NoRETComp bit 0x800; attr intel_pt// config
	 * 0x300e601 has TSC (0x400) and MTC (0x200), MTC period
	 * (0xe000 & 0x3c000) >> 14 = 3, no CYC (0x2), no NoRETComp. */
	CHECK_EQ(m->flags, BTR_MACHINE_PT_RETCOMP | BTR_MACHINE_PT_MTC | BTR_MACHINE_PT_TSC);
	CHECK_EQ(m->mtc_freq, 3);
	CHECK_EQ(m->nom_freq, 12);
	CHECK_EQ(m->cpuid15_eax, 2);
	CHECK_EQ(m->cpuid15_ebx, 100);
	/* Time Shift 31, Time Multiplier 1789569706: 1e9 * 2^31 / mult */
	CHECK_EQ(m->tsc_hz, 1200000000);
	CHECK_EQ(m->lbr_depth, 0);

	CHECK_EQ(btr_perf_reader_attr_count(r), 4);
	struct btr_perf_attr a;
	CHECK_EQ(btr_perf_reader_attr(r, 0, &a), 0);
	CHECK_STR(a.name, "intel_pt//");
	CHECK_EQ(a.type, 6);
	CHECK_EQ(a.config, 0x300e601);
	CHECK_EQ(a.nr_ids, 4);
	CHECK_EQ(btr_perf_reader_attr(r, 1, &a), 0);
	CHECK_STR(a.name, "cycles");
	CHECK_EQ(a.sample_type, 0x10107); /* IP|TID|TIME|PERIOD|IDENTIFIER */

	unsigned npt = 0, nexec = 0, after_exec_name = 0;
	uint64_t total = 0;
	int prev_exec = 0, e;
	struct tally t = { 0 };
	while ((e = btr_perf_read(r, &rec)) == 0) {
		t.n[rec.type]++;
		if (prev_exec) {
			CHECK_EQ(rec.type, BTR_REC_THREAD_NAME);
			if (rec.type == BTR_REC_THREAD_NAME)
				after_exec_name += !strcmp(rec.u.thread.name, "echo");
			prev_exec = 0;
		}
		if (rec.type == BTR_REC_EXEC) {
			nexec++;
			prev_exec = 1;
			CHECK_EQ(rec.u.module.pid, 3174);
		}
		if (rec.type == BTR_REC_MODULE_LOAD) {
			const struct btr_rec_module *mm = &rec.u.module;
			if (!strcmp(mm->path, "/usr/bin/coreutils")) {
				/* perf buildid-list: c0a88cf4408ddef75343a69e41602f4d3de34e68 */
				static const uint8_t want[20] = { 0xc0, 0xa8, 0x8c, 0xf4, 0x40, 0x8d, 0xde, 0xf7, 0x53, 0x43,
								  0xa6, 0x9e, 0x41, 0x60, 0x2f, 0x4d, 0x3d, 0xe3, 0x4e, 0x68 };
				CHECK_EQ(mm->build_id_len, 20);
				CHECK(!memcmp(mm->build_id, want, 20));
				CHECK_EQ(mm->pid, 3174);
				CHECK_EQ(mm->start, 0x5cba63156000ULL);
				CHECK_EQ(mm->size, 0x125000);
				CHECK_EQ(mm->prot, 5); /* r-xp */
				/* perf report -D: 641256876396 (its sample_id_all
				 * trailer: pid, tid, time, IDENTIFIER), as TSC */
				CHECK_EQ(mm->tsc, 808741473127ULL);
			}
			if (!strncmp(mm->path, "[kernel.kallsyms]", 17)) {
				/* 672679ceaecf17b7a879e56c56802afc568aa242 */
				CHECK_EQ(mm->build_id_len, 20);
				CHECK_EQ(mm->build_id[0], 0x67);
				CHECK_EQ(mm->build_id[19], 0x42);
				CHECK_EQ(mm->start, 0xffffffffb9600000ULL);
				CHECK_EQ(mm->pid, 0xffffffffu);
			}
		}
		if (rec.type != BTR_REC_PT)
			continue;
		const struct btr_rec_data *d = &rec.u.data;
		/* PERF_RECORD_AUXTRACE size: 0x2fd0 offset: 0 idx: 0 tid: 3174 cpu: 0 at 0x29c0
		 * PERF_RECORD_AUXTRACE size: 0x21a00 offset: 0 idx: 3 tid: 3174 cpu: 3 at 0x7788 */
		static const uint64_t want_size[2] = { 0x2fd0, 0x21a00 }, want_at[2] = { 0x29c0, 0x7788 };
		static const int want_cpu[2] = { 0, 3 };
		if (npt < 2) {
			CHECK_EQ(d->size, want_size[npt]);
			CHECK_EQ(d->cpu, want_cpu[npt]);
			CHECK_EQ(d->stream_offset, 0);
			CHECK_EQ(d->tid, 3174);
			CHECK_EQ(btr_perf_reader_offset(r), want_at[npt]);
			/* the payload follows the 0x30-byte record, in place */
			CHECK(d->data == buf + want_at[npt] + 0x30);
		}
		total += d->size;
		/* PT streams start with PSB: 02 82 repeated 8 times */
		int psb = d->size >= 16;
		for (int i = 0; i < 16 && psb; i++)
			psb = d->data[i] == (i % 2 ? 0x82 : 0x02);
		CHECK(psb);
#ifdef BTR_HAVE_LIBIPT
		/* libipt agrees that the payload is a PT stream */
		struct pt_config cfg;
		pt_config_init(&cfg);
		cfg.begin = (uint8_t *)d->data;
		cfg.end = (uint8_t *)d->data + d->size;
		struct pt_packet_decoder *pd = pt_pkt_alloc_decoder(&cfg);
		CHECK(pd != NULL);
		if (pd) {
			struct pt_packet pkt;
			CHECK_EQ(pt_pkt_sync_forward(pd), 0);
			CHECK(pt_pkt_next(pd, &pkt, sizeof(pkt)) > 0);
			CHECK_EQ(pkt.type, ppt_psb);
			unsigned n = 0;
			while (pt_pkt_next(pd, &pkt, sizeof(pkt)) > 0)
				n++;
			CHECK(n > 1000);
			pt_pkt_free_decoder(pd);
		}
#else
		check_oracle_missing("libipt (built without libipt-dev): the AUX payload parsed by libipt");
#endif
		npt++;
	}
	CHECK_EQ(e, -BTR_ERR_EOS);
	CHECK_EQ(npt, 2);
	CHECK_EQ(total, 0x2fd0 + 0x21a00);
	CHECK_EQ(nexec, 1);
	CHECK_EQ(after_exec_name, 1);
	/* perf report -D: MMAP 56 + MMAP2 10, COMM 3, EXIT 1, AUXTRACE 2,
	 * SAMPLE 15, SWITCH_CPU_WIDE 152, AUX 10, ITRACE_START 2,
	 * FINISHED_ROUND 4, AUXTRACE_INFO 1, TIME_CONV 1 */
	CHECK_EQ(t.n[BTR_REC_MODULE_LOAD], 66);
	CHECK_EQ(t.n[BTR_REC_THREAD_NAME], 3);
	CHECK_EQ(t.n[BTR_REC_THREAD_EXIT], 1);
	CHECK_EQ(t.n[BTR_REC_LBR], 0);
	static const struct { uint32_t type; unsigned n; } counts[] = {
		{ 1, 56 }, { 3, 3 }, { 4, 1 }, { 9, 15 }, { 10, 10 }, { 11, 10 }, { 12, 2 },
		{ 15, 152 }, { 68, 4 }, { 70, 1 }, { 71, 2 }, { 79, 1 },
	};
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		CHECK_EQ(btr_perf_reader_count(r, counts[i].type), counts[i].n);

	struct btr_perf_info info;
	CHECK_EQ(btr_perf_reader_info(r, &info), 0);
	CHECK_EQ(info.auxtrace_type, 1);
	CHECK_EQ(info.time_is_tsc, 1);
	CHECK_STR(info.os_release, "4.14.18");
	CHECK_STR(info.cpudesc, "Intel(R) Core(TM) m7-6Y75 CPU @ 1.20GHz");
	btr_perf_reader_free(r);
	free(buf);
}

/* ---- quipper/perf.data.branch-4.14: Skylake, 32-deep LBR with cycles ---- */

static void check_branch_file(struct btr_perf_reader *r, const char *what)
{
	struct btr_record rec;
	printf("%s\n", what);
	CHECK_EQ(btr_perf_read(r, &rec), 0);
	CHECK_EQ(rec.type, BTR_REC_MACHINE);
	CHECK_EQ(rec.u.machine.lbr_depth, 32);
	CHECK_EQ(rec.u.machine.tsc_hz, 1200000000);
	unsigned n = 0, with_cycles = 0, mispred = 0, ent = 0, e;
	while ((e = (unsigned)btr_perf_read(r, &rec)) == 0) {
		if (rec.type != BTR_REC_LBR)
			continue;
		const struct btr_rec_lbr *l = &rec.u.lbr;
		if (n == 0) {
			/* 12631245939019 0xaa8 PERF_RECORD_SAMPLE: 5805/5805:
			 * 0xffffffffb42071f2, nr:32, 3 used:
			 * 0: ffffffffb4208e16 -> ffffffffb42071e3 4 cycles P
			 * 1: ffffffffb420b684 -> ffffffffb4208e00 2 cycles P
			 * 2: ffffffffb420b66c -> ffffffffb420b683 0 cycles P
			 * 3..31: 0 -> 0 */
			CHECK_EQ(l->pid, 5805);
			CHECK_EQ(l->tid, 5805);
			CHECK_EQ(l->ip, 0xffffffffb42071f2ULL);
			CHECK_EQ(l->count, 3);
			CHECK_EQ(l->entries[0].from, 0xffffffffb4208e16ULL);
			CHECK_EQ(l->entries[0].to, 0xffffffffb42071e3ULL);
			CHECK_EQ(l->entries[0].cycles, 4);
			CHECK_EQ(l->entries[0].flags, BTR_BF_PREDICTED | BTR_BF_CYCLES);
			CHECK_EQ(l->entries[1].cycles, 2);
			CHECK_EQ(l->entries[2].from, 0xffffffffb420b66cULL);
			CHECK_EQ(l->entries[2].cycles, 0);
			CHECK_EQ(l->entries[2].flags, BTR_BF_PREDICTED);
			/* TIME_CONV shift 31, mult 1789569706, zero
			 * 18446744040838051763: perf_time_to_tsc(12631245939019) */
			CHECK_EQ(l->tsc, 15196940932307ULL);
		}
		if (n == 1) {
			/* 0xdd8: 2: ffffffffb420bce6 -> ffffffffb420bd57 27 cycles M
			 * 31: ffffffffb4341da5 -> ffffffffb4341de2 15 cycles M */
			CHECK_EQ(l->count, 32);
			CHECK_EQ(l->entries[2].from, 0xffffffffb420bce6ULL);
			CHECK_EQ(l->entries[2].cycles, 27);
			CHECK_EQ(l->entries[2].flags, BTR_BF_MISPRED | BTR_BF_CYCLES);
			CHECK_EQ(l->entries[31].to, 0xffffffffb4341de2ULL);
			CHECK_EQ(l->entries[31].cycles, 15);
			CHECK_EQ(l->entries[5].cycles, 251);
		}
		for (unsigned i = 0; i < l->count; i++) {
			ent++;
			with_cycles += l->entries[i].cycles != 0;
			mispred += !!(l->entries[i].flags & BTR_BF_MISPRED);
			CHECK(!!(l->entries[i].flags & BTR_BF_CYCLES) == (l->entries[i].cycles != 0));
		}
		n++;
	}
	CHECK_EQ((int)e, -BTR_ERR_EOS);
	CHECK_EQ(n, 13); /* SAMPLE events: 13 */
	CHECK(with_cycles > ent / 2);
	CHECK(mispred > 0 && mispred < ent);
	CHECK_EQ(btr_perf_reader_count(r, 10), 10); /* MMAP2 */
	CHECK_EQ(btr_perf_reader_count(r, 1), 21);  /* MMAP */
}

/* Builds a pipe-mode stream (16-byte header, HEADER_ATTR and
 * HEADER_FEATURE records, then the data records) from a little-endian
 * file-mode perf.data with one attr and no ids.  Returns its size. */
static size_t to_pipe(const uint8_t *f, size_t size, uint8_t *out)
{
	uint64_t attr_size, attrs_off, data_off, data_sz;
	memcpy(&attr_size, f + 16, 8);
	memcpy(&attrs_off, f + 24, 8);
	memcpy(&data_off, f + 40, 8);
	memcpy(&data_sz, f + 48, 8);
	size_t o = 0;
	memcpy(out, "PERFILE2", 8);
	uint64_t hs = 16;
	memcpy(out + 8, &hs, 8);
	o = 16;
	/* HEADER_ATTR: header, attr (attr_size - 16 bytes), no ids */
	uint32_t t = 64;
	uint16_t misc = 0, sz = (uint16_t)(8 + attr_size - 16);
	memcpy(out + o, &t, 4);
	memcpy(out + o + 4, &misc, 2);
	memcpy(out + o + 6, &sz, 2);
	memcpy(out + o + 8, f + attrs_off, attr_size - 16);
	o += sz;
	/* HEADER_FEATURE CPUID: header, u64 feat 9, u32 len, string */
	static const char cpuid[24] = "GenuineIntel,6,78,3";
	t = 80;
	sz = 8 + 8 + 4 + 24 + 4; /* padded to 8 */
	memset(out + o, 0, sz);
	memcpy(out + o, &t, 4);
	memcpy(out + o + 6, &sz, 2);
	uint64_t feat = 9;
	uint32_t len = 24;
	memcpy(out + o + 8, &feat, 8);
	memcpy(out + o + 16, &len, 4);
	memcpy(out + o + 20, cpuid, 24);
	o += sz;
	if (data_off + data_sz > size)
		return 0;
	memcpy(out + o, f + data_off, data_sz);
	return o + data_sz;
}

static void test_branch(void)
{
	const char *path = TRACES "/quipper/perf.data.branch-4.14";
	size_t size;
	uint8_t *buf = exists(path) ? slurp(path, &size) : NULL;
	if (!buf) {
		printf("quipper/perf.data.branch-4.14 absent: skipped\n");
		return;
	}
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new(path, &r), 0);
	if (r) {
		check_branch_file(r, "branch-4.14 (file mode)");
		struct btr_perf_attr a;
		CHECK_EQ(btr_perf_reader_attr(r, 0, &a), 0);
		CHECK_STR(a.name, "cycles:ppp");
		CHECK_EQ(a.sample_type, 0x907); /* IP|TID|TIME|PERIOD|BRANCH_STACK */
		CHECK(a.flags & BTR_PERF_ATTR_SAMPLE_ID_ALL);
		btr_perf_reader_free(r);
	}
	/* the same events as a pipe-mode stream */
	uint8_t *pipe = malloc(size + 256);
	size_t psize = to_pipe(buf, size, pipe);
	CHECK(psize > 0);
	CHECK_EQ(btr_perf_reader_new_mem(pipe, psize, &r), 0);
	if (r) {
		check_branch_file(r, "branch-4.14 (pipe mode)");
		struct btr_perf_info info;
		CHECK_EQ(btr_perf_reader_info(r, &info), 0);
		CHECK_EQ(info.pipe_mode, 1);
		CHECK_STR(info.cpuid, "GenuineIntel,6,78,3");
		btr_perf_reader_free(r);
	}
	free(pipe);
	free(buf);
}

/* ---- quipper/perf.data.callgraph_and_branch-3.8: old format ---- */

static void test_old_38(void)
{
	const char *path = TRACES "/quipper/perf.data.callgraph_and_branch-3.8";
	if (!exists(path)) {
		printf("quipper/perf.data.callgraph_and_branch-3.8 absent: skipped\n");
		return;
	}
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new(path, &r), 0);
	if (!r)
		return;
	struct btr_record rec;
	CHECK_EQ(btr_perf_read(r, &rec), 0);
	CHECK_EQ(rec.type, BTR_REC_MACHINE);
	CHECK_EQ(rec.u.machine.cpu_model, 42); /* GenuineIntel,6,42,7 */
	CHECK_EQ(rec.u.machine.cpu_stepping, 7);
	CHECK_EQ(rec.u.machine.lbr_depth, 16);
	struct tally t = { 0 };
	int first = 1, e;
	while ((e = btr_perf_read(r, &rec)) == 0) {
		t.n[rec.type]++;
		if (rec.type == BTR_REC_LBR && first) {
			/* 346854363139781 0x2c2c0: 0/0: 0xffffffff96613abf, cpu 0,
			 * 19-entry callchain before the branch stack (nr:16,
			 * one used): 0: ffffffff96612350 -> ffffffff96613a9a */
			first = 0;
			CHECK_EQ(rec.u.lbr.ip, 0xffffffff96613abfULL);
			CHECK_EQ(rec.u.lbr.tid, 0);
			CHECK_EQ(rec.u.lbr.cpu, 0);
			CHECK_EQ(rec.u.lbr.tsc, 346854363139781ULL);
			CHECK_EQ(rec.u.lbr.count, 1);
			CHECK_EQ(rec.u.lbr.entries[0].from, 0xffffffff96612350ULL);
			CHECK_EQ(rec.u.lbr.entries[0].to, 0xffffffff96613a9aULL);
			CHECK_EQ(btr_perf_reader_offset(r), 0x2c2c0);
		}
		if (rec.type == BTR_REC_THREAD_START)
			CHECK(rec.u.thread.tid != 0);
	}
	CHECK_EQ(e, -BTR_ERR_EOS);
	/* perf report -D: MMAP 1793, COMM 229, EXIT 4, FORK 1, SAMPLE 1856 */
	CHECK_EQ(t.n[BTR_REC_MODULE_LOAD], 1793);
	CHECK_EQ(t.n[BTR_REC_THREAD_NAME], 229);
	CHECK_EQ(t.n[BTR_REC_THREAD_EXIT], 4);
	CHECK_EQ(t.n[BTR_REC_THREAD_START], 1);
	CHECK_EQ(t.n[BTR_REC_LBR], 1856);
	struct btr_perf_info info;
	btr_perf_reader_info(r, &info);
	CHECK_STR(info.perf_version, "3.8.11.g047ea3");
	btr_perf_reader_free(r);
}

/* ---- truncation and corruption ---- */

/* Cuts @buf at many offsets: opening either fails with TRUNCATED (or
 * BAD_FORMAT before the magic is complete), or reading returns a prefix
 * of the full record sequence and then TRUNCATED. */
static void truncate_file(const char *path, unsigned step_max)
{
	size_t size;
	uint8_t *buf = exists(path) ? slurp(path, &size) : NULL;
	if (!buf) {
		printf("%s absent: truncation skipped\n", path);
		return;
	}
	struct btr_perf_reader *r;
	struct tally full;
	CHECK_EQ(btr_perf_reader_new_mem(buf, size, &r), 0);
	if (!r) {
		free(buf);
		return;
	}
	drain(r, &full);
	btr_perf_reader_free(r);
	CHECK_EQ(full.end, -BTR_ERR_EOS);

	size_t step = size / step_max + 1;
	uint64_t data_end = 0, doff = 0, dsz = 0;
	memcpy(&doff, buf + 40, 8);
	memcpy(&dsz, buf + 48, 8);
	data_end = doff + dsz;
	unsigned cuts = 0, bad = 0, open_fail = 0;
	unsigned prev_total = 0;
	for (size_t cut = 0; cut < size; cut += (cut < 4096 ? 1 + cut / 64 : step)) {
		/* an exact-size copy so that sanitizers see any over-read */
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, buf, cut);
		int err = btr_perf_reader_new_mem(c, cut, &r);
		cuts++;
		if (err) {
			open_fail++;
			if (err != -BTR_ERR_TRUNCATED && !(cut < 8 && err == -BTR_ERR_BAD_FORMAT)) {
				bad++;
				fprintf(stderr, "cut %zu: open %s\n", cut, btr_errstr(err));
			}
			free(c);
			continue;
		}
		struct tally t;
		drain(r, &t);
		btr_perf_reader_free(r);
		free(c);
		/* a longer prefix never yields fewer records; once the whole
		 * data section is there, all of them */
		if (t.end != -BTR_ERR_TRUNCATED || t.total > full.total || t.total < prev_total ||
		    (cut >= data_end && t.total != full.total)) {
			bad++;
			fprintf(stderr, "cut %zu: %u records (full %u, prev %u), end %s\n", cut, t.total, full.total,
				prev_total, btr_errstr(t.end));
		}
		prev_total = t.total;
	}
	CHECK_EQ(bad, 0);
	CHECK(open_fail < cuts);
	printf("%s: %u cuts, %u failed at open\n", path, cuts, open_fail);
	free(buf);
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void test_corrupt(void)
{
	const char *path = TRACES "/quipper/perf.data.branch-4.14";
	size_t size;
	uint8_t *buf = exists(path) ? slurp(path, &size) : NULL;
	if (!buf) {
		printf("perf.data.branch-4.14 absent: corruption tests skipped\n");
		return;
	}
	uint8_t *c = malloc(size);
	struct btr_perf_reader *r;
	struct tally t;

	/* record 2 (MMAP at 0x108, see perf report -D) gets size 0 */
	memcpy(c, buf, size);
	put16(c + 0x108 + 6, 0);
	CHECK_EQ(btr_perf_reader_new_mem(c, size, &r), 0);
	if (r) {
		drain(r, &t);
		CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
		CHECK_EQ(t.total, 1); /* MACHINE only: TIME_CONV is not a record */
		CHECK_EQ(btr_perf_read(r, &(struct btr_record){ 0 }), -BTR_ERR_BAD_RECORD);
		CHECK_EQ(btr_perf_reader_offset(r), 0x108);
		btr_perf_reader_free(r);
	}
	/* size 4 (< header) */
	memcpy(c, buf, size);
	put16(c + 0x158 + 6, 4);
	CHECK_EQ(btr_perf_reader_new_mem(c, size, &r), 0);
	if (r) {
		drain(r, &t);
		CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
		CHECK_EQ(t.n[BTR_REC_MODULE_LOAD], 1);
		btr_perf_reader_free(r);
	}
	/* the data section ends in the middle of the MMAP at 0x158 (the
	 * file is complete): that record runs past the data section */
	memcpy(c, buf, size);
	uint64_t dsz = 0x158 + 0x10 - 0xe8;
	memcpy(c + 48, &dsz, 8);
	CHECK_EQ(btr_perf_reader_new_mem(c, size, &r), 0);
	if (r) {
		drain(r, &t);
		CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
		CHECK_EQ(t.n[BTR_REC_MODULE_LOAD], 1);
		btr_perf_reader_free(r);
	}
	/* a record whose size is too small for its fixed fields: the first
	 * SAMPLE (0xaa8) shrunk so that its branch stack does not fit; the
	 * next record header then lands inside the old sample */
	memcpy(c, buf, size);
	put16(c + 0xaa8 + 6, 0x40);
	CHECK_EQ(btr_perf_reader_new_mem(c, size, &r), 0);
	if (r) {
		drain(r, &t);
		CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
		CHECK_EQ(t.n[BTR_REC_LBR], 0);
		btr_perf_reader_free(r);
	}
	/* not perf.data */
	CHECK_EQ(btr_perf_reader_new_mem("PERFILE1xxxxxxxxxxxxxxxx", 24, &r), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_perf_reader_new_mem("", 0, &r), -BTR_ERR_BAD_FORMAT);
	CHECK(r == NULL);
	CHECK_EQ(btr_perf_reader_new(BTR_SOURCE_DIR "/CMakeLists.txt", &r), -BTR_ERR_BAD_FORMAT);
	CHECK_EQ(btr_perf_reader_new(BTR_BINARY_DIR "/no/such/perf.data", &r), -BTR_ERR_NOENT);
	CHECK_EQ(btr_perf_reader_new(NULL, &r), -BTR_ERR_INVAL);
	/* impossible header size */
	memcpy(c, buf, size);
	c[8] = 99;
	CHECK_EQ(btr_perf_reader_new_mem(c, size, &r), -BTR_ERR_BAD_FORMAT);
	/* attrs section past the end */
	memcpy(c, buf, size);
	uint64_t big = size + 100;
	memcpy(c + 24, &big, 8);
	CHECK_EQ(btr_perf_reader_new_mem(c, size, &r), -BTR_ERR_TRUNCATED);
	CHECK_EQ(btr_perf_probe(buf, size), 1);
	CHECK_EQ(btr_perf_probe("\x7f" "ELF\2\1\1\0", 8), 0);
	free(c);
	free(buf);
}

/* ---- synthetic files in both byte orders ---- */

struct wbuf {
	uint8_t b[4096];
	size_t n;
	int be;
};

static void w8(struct wbuf *w, uint8_t v) { w->b[w->n++] = v; }
static void wn(struct wbuf *w, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		w8(w, (uint8_t)(v >> (8 * (w->be ? bytes - 1 - i : i))));
}
static void w16(struct wbuf *w, uint16_t v) { wn(w, v, 2); }
static void w32(struct wbuf *w, uint32_t v) { wn(w, v, 4); }
static void w64(struct wbuf *w, uint64_t v) { wn(w, v, 8); }
static void wstr(struct wbuf *w, const char *s, size_t field)
{
	size_t l = strlen(s);
	for (size_t i = 0; i < field; i++)
		w8(w, i < l ? (uint8_t)s[i] : 0);
}
static void set64(struct wbuf *w, size_t at, uint64_t v)
{
	size_t save = w->n;
	w->n = at;
	w64(w, v);
	w->n = save;
}
static void rec_begin(struct wbuf *w, uint32_t type, uint16_t misc, size_t *start)
{
	*start = w->n;
	w32(w, type);
	w16(w, misc);
	w16(w, 0);
}
static void rec_end(struct wbuf *w, size_t start)
{
	size_t save = w->n;
	w->n = start + 6;
	w16(w, (uint16_t)(save - start));
	w->n = save;
}

/* branch entry flags word as a compiler for a host of that byte order
 * lays out mispred:1 predicted:1 in_tx:1 abort:1 cycles:16 */
static uint64_t br_flags(int be, int mispred, int predicted, int abort_, unsigned cycles)
{
	if (!be)
		return (uint64_t)mispred | (uint64_t)predicted << 1 | (uint64_t)abort_ << 3 | (uint64_t)cycles << 4;
	return (uint64_t)mispred << 63 | (uint64_t)predicted << 62 | (uint64_t)abort_ << 60 | (uint64_t)cycles << 44;
}

/* A file-mode perf.data: one attr (IP|TID|TIME|CPU|BRANCH_STACK, with
 * branch HW_INDEX and sample_id_all), MMAP2 with an inline build-id,
 * COMM(exec), FORK, a SAMPLE with 3 entries (one empty), EXIT, and a
 * CPUID feature. */
static size_t make_synthetic(struct wbuf *w, int be)
{
	memset(w, 0, sizeof(*w));
	w->be = be;
	w64(w, 0x32454c4946524550ULL); /* "PERFILE2" in the writer's order */
	w64(w, 104);
	w64(w, 64 + 16 + 16); /* attr_size: VER1 attr (72)+... use 80 (VER2) + ids */
	size_t attrs_at = w->n;
	w64(w, 0), w64(w, 0); /* attrs */
	w64(w, 0), w64(w, 0); /* data */
	w64(w, 0), w64(w, 0); /* event_types */
	w64(w, 1ull << 9), w64(w, 0), w64(w, 0), w64(w, 0); /* HEADER_CPUID */
	/* attr (80 bytes, VER2) + ids section */
	size_t a0 = w->n;
	w32(w, 0);          /* type hardware */
	w32(w, 80);         /* size */
	w64(w, 0);          /* config cycles */
	w64(w, 4000);
	w64(w, 0x1 | 0x2 | 0x4 | 0x80 | 0x800); /* IP|TID|TIME|CPU|BRANCH_STACK */
	w64(w, 0);
	w64(w, 1ull << 18 | 1ull << 5); /* sample_id_all, exclude_kernel */
	w32(w, 0), w32(w, 0), w64(w, 0), w64(w, 0);
	w64(w, (1ull << 3) | (1ull << 17) | 1); /* ANY | HW_INDEX | USER */
	w64(w, 0), w64(w, 0); /* no ids */
	set64(w, 16, 80 + 16);
	set64(w, attrs_at, a0);
	set64(w, attrs_at + 8, w->n - a0);
	size_t data = w->n, s;
	/* sample_id trailer for IP|TID|TIME|CPU: tid, time, cpu */
#define TRAILER(time) do { w32(w, 42), w32(w, 43), w64(w, time), w32(w, 2), w32(w, 0); } while (0)
	rec_begin(w, 10, 1u << 14 | 2, &s); /* MMAP2 with build-id, user */
	w32(w, 42), w32(w, 43);
	w64(w, 0x400000), w64(w, 0x1000), w64(w, 0x2000);
	w8(w, 4), w8(w, 0), w16(w, 0);
	w8(w, 0xde), w8(w, 0xad), w8(w, 0xbe), w8(w, 0xef);
	for (int i = 0; i < 16; i++)
		w8(w, 0);
	w32(w, 5), w32(w, 2); /* prot, flags */
	wstr(w, "/bin/prog", 16);
	TRAILER(1000);
	rec_end(w, s);
	rec_begin(w, 3, 1u << 13, &s); /* COMM exec */
	w32(w, 42), w32(w, 43);
	wstr(w, "prog", 8);
	TRAILER(1100);
	rec_end(w, s);
	rec_begin(w, 7, 0, &s); /* FORK */
	w32(w, 42), w32(w, 42), w32(w, 44), w32(w, 43);
	w64(w, 1200);
	TRAILER(1200);
	rec_end(w, s);
	rec_begin(w, 9, 2, &s); /* SAMPLE */
	w64(w, 0x400123);
	w32(w, 42), w32(w, 44);
	w64(w, 1300);
	w32(w, 2), w32(w, 0);
	w64(w, 3);          /* nr */
	w64(w, 77);         /* hw_idx */
	/* entry 0 also carries type CALL (4) in bits 20-23 and spec 2 in
	 * bits 24-25 (mirrored for a big-endian writer) */
	w64(w, 0x400200), w64(w, 0x400100),
		w64(w, br_flags(be, 1, 0, 0, 300) | (be ? (4ull << 40) | (2ull << 38) : (4ull << 20) | (2ull << 24)));
	w64(w, 0x400180), w64(w, 0x400010), w64(w, br_flags(be, 0, 1, 1, 0));
	w64(w, 0), w64(w, 0), w64(w, 0);
	rec_end(w, s);
	rec_begin(w, 4, 0, &s); /* EXIT */
	w32(w, 42), w32(w, 42), w32(w, 44), w32(w, 44);
	w64(w, 1400);
	TRAILER(1400);
	rec_end(w, s);
	rec_begin(w, 15, 3u << 13, &s); /* SWITCH_CPU_WIDE, out + preempted */
	w32(w, 0), w32(w, 0);           /* next pid/tid: idle */
	TRAILER(1500);
	rec_end(w, s);
	set64(w, attrs_at + 16, data);
	set64(w, attrs_at + 24, w->n - data);
	/* feature table: one section for CPUID, then its data */
	size_t tab = w->n;
	w64(w, 0), w64(w, 0);
	size_t fs = w->n;
	w32(w, 20);
	wstr(w, "GenuineIntel,6,85,4", 20);
	set64(w, tab, fs);
	set64(w, tab + 8, w->n - fs);
#undef TRAILER
	return w->n;
}

/* A pipe-mode Intel BTS recording: HEADER_ATTR (the intel_bts event),
 * AUXTRACE_INFO of type 2 (PERF_AUXTRACE_INTEL_BTS), one AUXTRACE buffer
 * per thread (cpu -1) and one per CPU, each with 24-byte BTS records. */
static void make_bts(struct wbuf *wp, int be)
{
	struct wbuf w;
	size_t s;
	memset(&w, 0, sizeof(w));
	w.be = be;
	w64(&w, 0x32454c4946524550ULL);
	w64(&w, 16);
	rec_begin(&w, 64, 0, &s);            /* HEADER_ATTR: attr (VER0, 64 bytes), no ids */
	w32(&w, 7), w32(&w, 64), w64(&w, 0), w64(&w, 1), w64(&w, 0x10086), w64(&w, 0);
	w64(&w, 1ull << 18 | 1ull << 5);     /* sample_id_all, exclude_kernel */
	w32(&w, 0), w32(&w, 0), w64(&w, 0);
	rec_end(&w, s);
	rec_begin(&w, 70, 0, &s);            /* AUXTRACE_INFO */
	w32(&w, 2), w32(&w, 0);
	/* priv (intel-bts.h): PMU type, time_shift, time_mult,
	 * time_zero, cap_user_time_zero, snapshot mode */
	w64(&w, 7), w64(&w, 10), w64(&w, 512), w64(&w, 1000), w64(&w, 1), w64(&w, 0);
	rec_end(&w, s);
	for (int k = 0; k < 2; k++) {
		rec_begin(&w, 71, 0, &s);    /* AUXTRACE: size, offset, reference, idx, tid, cpu, res */
		w64(&w, 48), w64(&w, k ? 0x3000 : 0x18), w64(&w, 0), w32(&w, (uint32_t)k);
		w32(&w, k ? 0 : 43), w32(&w, k ? 1u : 0xffffffffu), w32(&w, 0);
		rec_end(&w, s);
		for (int i = 0; i < 2; i++)  /* from, to, flags (predicted) as the CPU writes them: LE */
			for (int f = 0; f < 3; f++) {
				uint64_t v = f == 2 ? 0x10 : 0x401000 + 0x100 * (uint64_t)(i + k) + (uint64_t)f;
				for (int b = 0; b < 8; b++)
					w8(&w, (uint8_t)(v >> (8 * b)));
			}
	}
	*wp = w;
}

/* Opens @n bytes of @b and drains them; returns the open's error or 0. */
static int open_drain(const uint8_t *b, size_t n, struct tally *t)
{
	struct btr_perf_reader *r;
	memset(t, 0, sizeof(*t));
	int rc = btr_perf_reader_new_mem(b, n, &r);
	if (rc)
		return rc;
	drain(r, t);
	btr_perf_reader_free(r);
	return 0;
}

/* Offset of the first record of @type in the little-endian synthetic
 * file's data section [from, to). */
static size_t find_rec(const struct wbuf *w, size_t from, size_t to, uint32_t type)
{
	for (size_t o = from; o + 8 <= to;) {
		uint32_t t;
		uint16_t sz;
		memcpy(&t, w->b + o, 4);
		memcpy(&sz, w->b + o + 6, 2);
		if (t == type)
			return o;
		if (sz < 8)
			break;
		o += sz;
	}
	return 0;
}

/* The +1 boundaries of every length field the reader trusts: each
 * exactly fitting is read whole, each claiming (or cut to) one byte
 * more than there is is refused. */
static void test_length_bounds(void)
{
	struct wbuf w, c;
	struct tally t;
	size_t n = make_synthetic(&w, 0);
	uint64_t attrs_off, attrs_sz, data_off, data_sz;
	memcpy(&attrs_off, w.b + 24, 8);
	memcpy(&attrs_sz, w.b + 32, 8);
	memcpy(&data_off, w.b + 40, 8);
	memcpy(&data_sz, w.b + 48, 8);
	size_t data_end = (size_t)(data_off + data_sz);

	/* whole: every record, then the end */
	CHECK_EQ(open_drain(w.b, n, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_EOS);
	unsigned whole = t.total;
	CHECK(whole >= 6);
	CHECK_EQ(t.n[BTR_REC_LBR], 1);

	/* the feature section (CPUID, at the end of the file): exactly
	 * there is read; one byte cut from it is a truncated file */
	CHECK_EQ(open_drain(w.b, n - 1, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_TRUNCATED);
	CHECK_EQ(t.total, whole);

	/* without the feature table, the data section is the file's end */
	c = w;
	set64(&c, 72, 0);
	CHECK_EQ(open_drain(c.b, data_end, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_EOS);
	CHECK_EQ(t.total, whole);
	/* the file cut one byte into the last record: truncated */
	CHECK_EQ(open_drain(c.b, data_end - 1, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_TRUNCATED);
	CHECK_EQ(t.total, whole - 1);
	/* data.size one byte short of the last record (the file goes on):
	 * that record overruns its section by one byte */
	set64(&c, 48, data_sz - 1);
	CHECK_EQ(open_drain(c.b, n, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
	CHECK_EQ(t.total, whole - 1);
	/* data.size one byte long: a one-byte record header */
	set64(&c, 48, data_sz + 1);
	CHECK_EQ(open_drain(c.b, n, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
	CHECK_EQ(t.total, whole);

	/* the attrs section ending at the file's end is read (the data is
	 * then cut); one byte less is a truncated header */
	CHECK_EQ(open_drain(w.b, (size_t)(attrs_off + attrs_sz), &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_TRUNCATED);
	CHECK_EQ(open_drain(w.b, (size_t)(attrs_off + attrs_sz) - 1, &t), -BTR_ERR_TRUNCATED);

	/* the SAMPLE's header size one byte short of its branch stack:
	 * refused before its LBR record (the next header lands inside it) */
	size_t smp = find_rec(&w, (size_t)data_off, data_end, 9);
	CHECK(smp > 0);
	c = w;
	uint16_t ssz;
	memcpy(&ssz, c.b + smp + 6, 2);
	put16(c.b + smp + 6, (uint16_t)(ssz - 1));
	CHECK_EQ(open_drain(c.b, n, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_BAD_RECORD);
	CHECK_EQ(t.n[BTR_REC_LBR], 0);

	/* pipe mode: the last AUXTRACE's payload size against the file's
	 * end: exactly there both buffers are read, one byte more (or the
	 * file one byte shorter) and the last is refused */
	make_bts(&w, 0);
	CHECK_EQ(open_drain(w.b, w.n, &t), 0);
	CHECK_EQ(t.end, -BTR_ERR_EOS);
	CHECK_EQ(t.n[BTR_REC_BTS], 2);
	CHECK_EQ(open_drain(w.b, w.n - 1, &t), 0);
	CHECK(t.end == -BTR_ERR_BAD_RECORD || t.end == -BTR_ERR_TRUNCATED);
	CHECK_EQ(t.n[BTR_REC_BTS], 1);
	c = w;
	set64(&c, w.n - 48 - 48 + 8, 49);   /* the last AUXTRACE header's size */
	CHECK_EQ(open_drain(c.b, c.n, &t), 0);
	CHECK(t.end == -BTR_ERR_BAD_RECORD || t.end == -BTR_ERR_TRUNCATED);
	CHECK_EQ(t.n[BTR_REC_BTS], 1);
}

static void test_bts_synthetic(void)
{
	for (int be = 0; be < 2; be++) {
		struct wbuf w;
		make_bts(&w, be);
		struct btr_perf_reader *r;
		CHECK_EQ(btr_perf_reader_new_mem(w.b, w.n, &r), 0);
		if (!r)
			continue;
		struct btr_perf_info info;
		btr_perf_reader_info(r, &info);
		CHECK_EQ(info.pipe_mode, 1);
		CHECK_EQ(info.auxtrace_type, 2);
		CHECK_EQ(info.time_is_tsc, 1);   /* the BTS AUXTRACE_INFO time conversion */
		struct btr_record rec;
		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_MACHINE);
		CHECK_EQ(rec.u.machine.flags & BTR_MACHINE_USER_ONLY, BTR_MACHINE_USER_ONLY);
		for (int k = 0; k < 2; k++) {
			CHECK_EQ(btr_perf_read(r, &rec), 0);
			CHECK_EQ(rec.type, BTR_REC_BTS);
			CHECK_EQ(rec.u.data.tid, k ? 0 : 43);
			CHECK_EQ(rec.u.data.cpu, k ? 1 : -1);
			CHECK_EQ(rec.u.data.stream_offset, k ? 0x3000 : 0x18);
			CHECK_EQ(rec.u.data.size, 48);
			uint64_t from;
			memcpy(&from, rec.u.data.data + 24, 8);   /* the second record's from, LE */
			CHECK_EQ(from, 0x401000 + 0x100 * (uint64_t)(1 + k));
		}
		CHECK_EQ(btr_perf_read(r, &rec), -BTR_ERR_EOS);
		btr_perf_reader_free(r);
	}
}

static void test_synthetic(void)
{
	for (int be = 0; be < 2; be++) {
		struct wbuf w;
		size_t n = make_synthetic(&w, be);
		struct btr_perf_reader *r;
		printf("synthetic %s-endian file, %zu bytes\n", be ? "big" : "little", n);
		CHECK_EQ(btr_perf_probe(w.b, n), 1);
		CHECK_EQ(btr_perf_reader_new_mem(w.b, n, &r), 0);
		if (!r)
			continue;
		struct btr_perf_info info;
		btr_perf_reader_info(r, &info);
		CHECK_EQ(info.swapped, be);
		struct btr_record rec;
		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_MACHINE);
		CHECK_EQ(rec.u.machine.cpu_model, 85);
		CHECK_EQ(rec.u.machine.cpu_stepping, 4);
		CHECK_EQ(rec.u.machine.lbr_depth, 3);
		CHECK_EQ(rec.u.machine.flags, BTR_MACHINE_USER_ONLY);

		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_MODULE_LOAD);
		CHECK_EQ(rec.u.module.pid, 42);
		CHECK_EQ(rec.u.module.start, 0x400000);
		CHECK_EQ(rec.u.module.size, 0x1000);
		CHECK_EQ(rec.u.module.pgoff, 0x2000);
		CHECK_EQ(rec.u.module.prot, 5);
		CHECK_EQ(rec.u.module.tsc, 1000);
		CHECK_EQ(rec.u.module.build_id_len, 4);
		CHECK_EQ(rec.u.module.build_id[0], 0xde);
		CHECK_EQ(rec.u.module.build_id[3], 0xef);
		CHECK_STR(rec.u.module.path, "/bin/prog");

		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_EXEC);
		CHECK_EQ(rec.u.module.pid, 42);
		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_THREAD_NAME);
		CHECK_EQ(rec.u.thread.tid, 43);
		CHECK_STR(rec.u.thread.name, "prog");
		CHECK_EQ(rec.u.thread.tsc, 1100);

		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_THREAD_START);
		CHECK_EQ(rec.u.thread.tid, 44);
		CHECK_EQ(rec.u.thread.parent_tid, 43);
		CHECK_EQ(rec.u.thread.tsc, 1200);

		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_LBR);
		CHECK_EQ(rec.u.lbr.ip, 0x400123);
		CHECK_EQ(rec.u.lbr.tid, 44);
		CHECK_EQ(rec.u.lbr.cpu, 2);
		CHECK_EQ(rec.u.lbr.tsc, 1300);
		CHECK_EQ(rec.u.lbr.count, 2); /* the empty third slot is dropped */
		CHECK_EQ(rec.u.lbr.entries[0].from, 0x400200);
		CHECK_EQ(rec.u.lbr.entries[0].to, 0x400100);
		CHECK_EQ(rec.u.lbr.entries[0].flags, BTR_BF_MISPRED | BTR_BF_CYCLES);
		CHECK_EQ(rec.u.lbr.entries[0].cycles, 300);
		CHECK_EQ(rec.u.lbr.entries[1].flags, BTR_BF_PREDICTED | BTR_BF_TSX_ABORT);
		CHECK_EQ(rec.u.lbr.entries[1].to, 0x400010);

		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_THREAD_EXIT);
		CHECK_EQ(rec.u.thread.tid, 44);
		CHECK_EQ(btr_perf_read(r, &rec), 0);
		CHECK_EQ(rec.type, BTR_REC_SWITCH);
		CHECK_EQ(rec.u.sw.pid, 42);
		CHECK_EQ(rec.u.sw.tid, 43);
		CHECK_EQ(rec.u.sw.cpu, 2);
		CHECK_EQ(rec.u.sw.tsc, 1500);
		CHECK_EQ(rec.u.sw.flags, BTR_SWITCH_OUT | BTR_SWITCH_PREEMPT);
		CHECK_EQ(btr_perf_read(r, &rec), -BTR_ERR_EOS);
		btr_perf_reader_free(r);

		/* the whole sample as perf script sees it: every slot, hw_index,
		 * the full flags word */
		CHECK_EQ(btr_perf_reader_new_mem(w.b, n, &r), 0);
		struct btr_perf_sample smp;
		CHECK_EQ(btr_perf_read_sample(r, &smp), 0);
		CHECK_EQ(smp.ip, 0x400123);
		CHECK_EQ(smp.pid, 42);
		CHECK_EQ(smp.tid, 44);
		CHECK_EQ(smp.time, 1300);
		CHECK_EQ(smp.cpu, 2);
		CHECK_EQ(smp.has_branch_stack, 1);
		CHECK_EQ(smp.has_hw_index, 1);
		CHECK_EQ(smp.hw_index, 77);
		CHECK_EQ(smp.nr_branches, 3);
		CHECK_EQ(smp.branches[0].mispred, 1);
		CHECK_EQ(smp.branches[0].predicted, 0);
		CHECK_EQ(smp.branches[0].cycles, 300);
		CHECK_EQ(smp.branches[0].type, 4);
		CHECK_EQ(smp.branches[0].spec, 2);
		CHECK_EQ(smp.branches[1].predicted, 1);
		CHECK_EQ(smp.branches[1].abort, 1);
		CHECK_EQ(smp.branches[1].type, 0);
		CHECK_EQ(smp.branches[2].from, 0);
		CHECK_EQ(btr_perf_read_sample(r, &smp), -BTR_ERR_EOS);
		CHECK_EQ(btr_perf_reader_count(r, 15), 1);
		btr_perf_reader_free(r);

		/* every cut of the synthetic file */
		unsigned bad = 0;
		for (size_t cut = 0; cut < n; cut++) {
			uint8_t *c = malloc(cut ? cut : 1);
			memcpy(c, w.b, cut);
			int err = btr_perf_reader_new_mem(c, cut, &r);
			if (!err) {
				struct tally t;
				drain(r, &t);
				bad += t.end != -BTR_ERR_TRUNCATED;
				btr_perf_reader_free(r);
			} else {
				bad += err != -BTR_ERR_TRUNCATED && err != -BTR_ERR_BAD_FORMAT;
			}
			free(c);
		}
		CHECK_EQ(bad, 0);
	}
}

/* Appends a COMPRESSED record (type 81) holding @n bytes of zstd output. */
static size_t put_compressed(uint8_t *out, const uint8_t *z, size_t n)
{
	uint32_t t = 81;
	uint16_t misc = 0, sz = (uint16_t)(8 + n);
	memcpy(out, &t, 4);
	memcpy(out + 4, &misc, 2);
	memcpy(out + 6, &sz, 2);
	memcpy(out + 8, z, n);
	return 8 + n;
}

/* perf record -z -m 80M: one COMPRESSED record may expand to what a ring
 * buffer flush holds, HEADER_COMPRESSED's mmap_len (u32 version, type,
 * level, ratio, mmap_len): 70 MiB of records, more than the 64 MiB the
 * reader allows without it, are read. */
static void test_compressed_mmap_len(void)
{
	struct wbuf w;
	size_t n = make_synthetic(&w, 0);
	uint64_t data_off, data_sz;
	memcpy(&data_off, w.b + 40, 8);
	memcpy(&data_sz, w.b + 48, 8);
	(void)n;
	const size_t big = 70u << 20, rs = 65528;
	uint8_t *raw = calloc(1, big);
	size_t zcap = ZSTD_compressBound(big), zn = 0;
	uint8_t *z = malloc(zcap);
	static uint8_t file[1 << 16];
	CHECK(raw && z);
	if (!raw || !z) {
		free(raw);
		free(z);
		return;
	}
	size_t used = 0;
	while (used + rs <= big) {   /* FINISHED_ROUND records of 65528 bytes */
		uint32_t t = 68;
		uint16_t misc = 0, sz = (uint16_t)rs;
		memcpy(raw + used, &t, 4);
		memcpy(raw + used + 4, &misc, 2);
		memcpy(raw + used + 6, &sz, 2);
		used += rs;
	}
	zn = ZSTD_compress(z, zcap, raw, used, 3);
	free(raw);
	CHECK(!ZSTD_isError(zn) && zn + 8 < 65536 && 8 + data_off + zn + 64 < sizeof(file));
	if (ZSTD_isError(zn) || zn + 8 >= 65536 || 8 + data_off + zn + 64 >= sizeof(file)) {
		free(z);
		return;
	}
	memcpy(file, w.b, data_off);
	size_t o = data_off + put_compressed(file + data_off, z, zn);
	free(z);
	uint64_t new_sz = o - data_off, feat = 1ull << 27;   /* HEADER_COMPRESSED */
	memcpy(file + 48, &new_sz, 8);
	memcpy(file + 72, &feat, 8);
	uint64_t sec[2] = { o + 16, 20 };
	memcpy(file + o, sec, 16);
	uint32_t comp[5] = { 1, 1, 3, 4, 80u << 20 };   /* version, zstd, level, ratio, mmap_len */
	memcpy(file + o + 16, comp, 20);
	o += 36;
	struct btr_perf_reader *r;
	struct tally t = { 0 };
	CHECK_EQ(btr_perf_reader_new_mem(file, o, &r), 0);
	if (!r)
		return;
	drain(r, &t);
	CHECK_EQ(t.end, -BTR_ERR_EOS);
	CHECK_EQ(btr_perf_reader_count(r, 68), used / rs);   /* every record was read */
	btr_perf_reader_free(r);
}

/* Two events, PERF_SAMPLE_ID without IDENTIFIER (perf before 3.10, or
 * --no-sample-identifier): a sample's id lies after IP, TID, TIME and ADDR,
 * and names its event.  Event 0 (ids 100) has no branch stack, event 1
 * (id 200) has one: its sample must be read with event 1's layout, an LBR
 * record of one entry. */
static void test_sample_id_pos(void)
{
	struct wbuf w;
	memset(&w, 0, sizeof(w));
	w64(&w, 0x32454c4946524550ULL);
	w64(&w, 104);
	w64(&w, 80 + 16);
	size_t attrs_at = w.n;
	for (int i = 0; i < 6; i++)
		w64(&w, 0);                             /* attrs, data, event_types */
	for (int i = 0; i < 4; i++)
		w64(&w, 0);                             /* no features */
	size_t a0 = w.n, ids_at[2];
	for (int k = 0; k < 2; k++) {
		size_t at = w.n;
		w32(&w, 0), w32(&w, 80);
		w64(&w, 0), w64(&w, 4000);
		w64(&w, 0x1 | 0x2 | 0x4 | 0x8 | 0x40 | (k ? 0x800 : 0x100)); /* IP|TID|TIME|ADDR|ID, PERIOD or BRANCH_STACK */
		w64(&w, 0);
		w64(&w, 1ull << 5);                     /* exclude_kernel */
		while (w.n < at + 72)
			w8(&w, 0);
		w64(&w, k ? (1ull << 3 | 1) : 0);       /* ANY | USER */
		ids_at[k] = w.n;
		w64(&w, 0), w64(&w, 8);
	}
	set64(&w, attrs_at, a0);
	set64(&w, attrs_at + 8, w.n - a0);
	for (int k = 0; k < 2; k++) {
		set64(&w, ids_at[k], w.n);
		w64(&w, k ? 200 : 100);
	}
	size_t data = w.n, st;
	rec_begin(&w, 9, 2, &st);                       /* SAMPLE of event 1 */
	w64(&w, 0x400123);
	w32(&w, 42), w32(&w, 43);
	w64(&w, 1300);
	w64(&w, 0x7777);                                /* addr */
	w64(&w, 200);                                   /* id */
	w64(&w, 1);                                     /* nr */
	w64(&w, 0x400200), w64(&w, 0x400100), w64(&w, br_flags(0, 0, 1, 0, 0));
	rec_end(&w, st);
	set64(&w, attrs_at + 16, data);
	set64(&w, attrs_at + 24, w.n - data);

	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new_mem(w.b, w.n, &r), 0);
	if (!r)
		return;
	struct btr_record rec;
	int lbr = 0, e;
	while ((e = btr_perf_read(r, &rec)) == 0) {
		if (rec.type != BTR_REC_LBR)
			continue;
		lbr++;
		CHECK_EQ(rec.u.lbr.count, 1);
		if (rec.u.lbr.count == 1)
			CHECK_EQ(rec.u.lbr.entries[0].from, 0x400200);
	}
	CHECK_EQ(e, -BTR_ERR_EOS);
	CHECK_EQ(lbr, 1);
	btr_perf_reader_free(r);
}

/* HEADER_BUILD_ID with PERF_RECORD_MISC_BUILD_ID_SIZE: a build-id of 16
 * bytes (its size in the byte after the 20 of the field) names the module
 * of an MMAP2 without one inline: the synthetic little-endian file with
 * the MMAP2's inline build-id flag cleared and a BUILD_ID section before
 * its CPUID one.  The module's build-id is those 16 bytes, not 20. */
static void test_build_id_size(void)
{
	struct wbuf w;
	size_t n = make_synthetic(&w, 0);
	uint64_t data_off, data_sz;
	memcpy(&data_off, w.b + 40, 8);
	memcpy(&data_sz, w.b + 48, 8);
	static uint8_t file[8192];
	size_t ft = data_off + data_sz, fs = ft + 16, flen = n - fs;
	memcpy(file, w.b, ft);
	file[data_off + 5] &= (uint8_t)~(1u << 6);   /* misc bit 14: no inline build-id */
	uint64_t feat = 1ull << 2 | 1ull << 9;        /* HEADER_BUILD_ID, HEADER_CPUID */
	memcpy(file + 72, &feat, 8);
	uint8_t e[56] = { 0 };
	uint32_t type = 67, pid = 42;
	uint16_t misc = 1u << 15, sz = sizeof(e);
	memcpy(e, &type, 4);
	memcpy(e + 4, &misc, 2);
	memcpy(e + 6, &sz, 2);
	memcpy(e + 8, &pid, 4);
	for (int i = 0; i < 16; i++)
		e[12 + i] = (uint8_t)(0x11 + i);
	e[12 + 20] = 16;
	memcpy(e + 36, "/bin/prog", 10);
	uint64_t sec[4] = { ft + 32, sizeof(e), ft + 32 + sizeof(e), flen };
	memcpy(file + ft, sec, sizeof(sec));
	memcpy(file + ft + 32, e, sizeof(e));
	memcpy(file + ft + 32 + sizeof(e), w.b + fs, flen);
	size_t o = ft + 32 + sizeof(e) + flen;

	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new_mem(file, o, &r), 0);
	if (!r)
		return;
	struct btr_record rec;
	int found = 0, e2;
	while ((e2 = btr_perf_read(r, &rec)) == 0) {
		if (rec.type != BTR_REC_MODULE_LOAD || strcmp(rec.u.module.path, "/bin/prog"))
			continue;
		found++;
		CHECK_EQ(rec.u.module.build_id_len, 16);
		CHECK_EQ(rec.u.module.build_id[0], 0x11);
		CHECK_EQ(rec.u.module.build_id[15], 0x20);
	}
	CHECK_EQ(e2, -BTR_ERR_EOS);
	CHECK_EQ(found, 1);
	btr_perf_reader_free(r);
}

/* perf record -z: the synthetic little-endian file with its data section
 * zstd-compressed into two COMPRESSED records, split inside a record so
 * that the reader has to carry the partial record over. */
static void test_compressed_synthetic(void)
{
	struct wbuf w;
	size_t n = make_synthetic(&w, 0);
	uint64_t data_off, data_sz;
	memcpy(&data_off, w.b + 40, 8);
	memcpy(&data_sz, w.b + 48, 8);
	const uint8_t *data = w.b + data_off;
	size_t split = 100; /* inside the MMAP2 record (0..~112) */

	uint8_t z[2][2048], file[8192];
	size_t zn[2];
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_inBuffer in = { data, split, 0 };
	ZSTD_outBuffer out = { z[0], sizeof(z[0]), 0 };
	CHECK(!ZSTD_isError(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_flush)));
	zn[0] = out.pos;
	in = (ZSTD_inBuffer){ data + split, data_sz - split, 0 };
	out = (ZSTD_outBuffer){ z[1], sizeof(z[1]), 0 };
	CHECK(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end) == 0);
	zn[1] = out.pos;
	ZSTD_freeCCtx(cc);

	size_t o = data_off;
	memcpy(file, w.b, data_off);
	o += put_compressed(file + o, z[0], zn[0]);
	/* perf pads records to 8 bytes: not needed by the reader */
	o += put_compressed(file + o, z[1], zn[1]);
	uint64_t new_sz = o - data_off;
	memcpy(file + 48, &new_sz, 8);
	/* feature table (CPUID) after the data, as in the original */
	size_t ft = data_off + data_sz, fs = ft + 16, flen = n - fs;
	uint64_t off = o + 16, len = flen;
	memcpy(file + o, &off, 8);
	memcpy(file + o + 8, &len, 8);
	memcpy(file + o + 16, w.b + fs, flen);
	o += 16 + flen;

	struct btr_perf_reader *a, *b;
	CHECK_EQ(btr_perf_reader_new_mem(w.b, n, &a), 0);
	CHECK_EQ(btr_perf_reader_new_mem(file, o, &b), 0);
	if (!a || !b) {
		btr_perf_reader_free(a);
		btr_perf_reader_free(b);
		return;
	}
	struct btr_record ra, rb;
	int ea, eb;
	unsigned recs = 0, same = 0;
	for (;;) {
		ea = btr_perf_read(a, &ra);
		eb = btr_perf_read(b, &rb);
		if (ea || eb)
			break;
		recs++;
		if (ra.type != rb.type)
			continue;
		if (ra.type == BTR_REC_LBR)
			same += ra.u.lbr.count == rb.u.lbr.count && ra.u.lbr.entries[0].from == rb.u.lbr.entries[0].from &&
				ra.u.lbr.entries[0].cycles == rb.u.lbr.entries[0].cycles && ra.u.lbr.tsc == rb.u.lbr.tsc;
		else if (ra.type == BTR_REC_MODULE_LOAD)
			same += !strcmp(ra.u.module.path, rb.u.module.path) && ra.u.module.start == rb.u.module.start &&
				ra.u.module.build_id_len == rb.u.module.build_id_len;
		else if (ra.type == BTR_REC_MACHINE)
			same += ra.u.machine.lbr_depth == rb.u.machine.lbr_depth && rb.u.machine.cpu_model == 85;
		else if (ra.type == BTR_REC_SWITCH)
			same += ra.u.sw.tid == rb.u.sw.tid && ra.u.sw.tsc == rb.u.sw.tsc && ra.u.sw.flags == rb.u.sw.flags;
		else
			same += ra.u.thread.tid == rb.u.thread.tid;
	}
	printf("compressed synthetic: %u records\n", recs);
	CHECK_EQ(ea, -BTR_ERR_EOS);
	CHECK_EQ(eb, -BTR_ERR_EOS);
	CHECK_EQ(recs, 8); /* machine, mmap2, exec, comm, fork, sample, exit, switch */
	CHECK_EQ(same, recs);
	CHECK_EQ(btr_perf_reader_count(b, 81), 2);
	CHECK_EQ(btr_perf_reader_count(b, 9), 1);
	btr_perf_reader_free(a);
	btr_perf_reader_free(b);

	/* corrupt zstd data: COMPRESS, not a crash */
	file[data_off + 8 + 4] ^= 0xff;
	CHECK_EQ(btr_perf_reader_new_mem(file, o, &b), 0);
	if (b) {
		struct tally t;
		drain(b, &t);
		CHECK_EQ(t.end, -BTR_ERR_COMPRESS);
		btr_perf_reader_free(b);
	}
	/* only the first COMPRESSED record: the stream ends inside a record */
	file[data_off + 8 + 4] ^= 0xff;
	new_sz = 8 + zn[0];
	memcpy(file + 48, &new_sz, 8);
	CHECK_EQ(btr_perf_reader_new_mem(file, o, &b), 0);
	if (b) {
		struct tally t;
		drain(b, &t);
		CHECK_EQ(t.end, -BTR_ERR_TRUNCATED);
		btr_perf_reader_free(b);
	}
}

/* ---- a fresh recording by this machine's perf, if it has one ---- */

/* Runs `perf report -D -i @file` and reads its "Aggregated stats" counts
 * of the record types in @names into @out. */
static int perf_stats(const char *file, const char *const *names, unsigned n, unsigned *out)
{
	char cmd[512], line[256];
	snprintf(cmd, sizeof(cmd), "perf report -D -i '%s' 2>/dev/null", file);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	int in_stats = 0;
	memset(out, 0, n * sizeof(*out));
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "Aggregated stats"))
			in_stats = 1;
		if (!in_stats)
			continue;
		for (unsigned i = 0; i < n; i++) {
			char key[64];
			unsigned v;
			snprintf(key, sizeof(key), "%s events:", names[i]);
			const char *k = strstr(line, key);
			/* " MMAP events:" must not match "MMAP2 events:" */
			if (k && (k == line || k[-1] == ' ') && sscanf(k + strlen(key), "%u", &v) == 1 && !out[i])
				out[i] = v;
		}
	}
	return pclose(p) == 0 && in_stats ? 0 : -1;
}

static void check_live(const char *file, int pipe_mode)
{
	static const char *const names[] = { "MMAP", "COMM", "EXIT", "SAMPLE", "MMAP2", "FORK" };
	static const uint32_t types[] = { 1, 3, 4, 9, 10, 7 };
	unsigned want[6];
	if (perf_stats(file, names, 6, want)) {
		printf("perf report -D failed on %s: live check skipped\n", file);
		return;
	}
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new(file, &r), 0);
	if (!r)
		return;
	struct btr_perf_info info;
	btr_perf_reader_info(r, &info);
	CHECK_EQ(info.pipe_mode, pipe_mode);
	struct tally t;
	struct btr_record rec;
	unsigned true_maps = 0, exec_pid = 0;
	memset(&t, 0, sizeof(t));
	while ((t.end = btr_perf_read(r, &rec)) == 0) {
		t.n[rec.type]++;
		if (rec.type == BTR_REC_EXEC)
			exec_pid = rec.u.module.pid;
		if (rec.type == BTR_REC_MODULE_LOAD && exec_pid && rec.u.module.pid == exec_pid) {
			size_t l = strlen(rec.u.module.path);
			true_maps += l >= 5 && !strcmp(rec.u.module.path + l - 5, "/true");
		}
	}
	CHECK_EQ(t.end, -BTR_ERR_EOS);
	for (unsigned i = 0; i < 6; i++) {
		if (btr_perf_reader_count(r, types[i]) != want[i])
			fprintf(stderr, "%s: %s: btr %" PRIu64 ", perf %u\n", file, names[i],
				btr_perf_reader_count(r, types[i]), want[i]);
		CHECK_EQ(btr_perf_reader_count(r, types[i]), want[i]);
	}
	CHECK_EQ(t.n[BTR_REC_MODULE_LOAD], want[0] + want[4]);
	CHECK_EQ(t.n[BTR_REC_THREAD_EXIT], want[2]);
	CHECK(want[1] > 0 && want[2] > 0 && want[4] > 0);
	CHECK(exec_pid != 0);
	CHECK_EQ(true_maps, 1);
	btr_perf_reader_free(r);
}

static void test_live(void)
{
	char dir[] = "/tmp/btr_perfdata_XXXXXX", file[128], pfile[128], cmd[512];
	if (system("perf --version >/dev/null 2>&1") != 0) {
		check_oracle_missing("perf (linux-perf): the live recordings read back against perf report -D");
		return;
	}
	if (!mkdtemp(dir))
		return;
	snprintf(file, sizeof(file), "%s/perf.data", dir);
	snprintf(pfile, sizeof(pfile), "%s/pipe.data", dir);
	snprintf(cmd, sizeof(cmd), "perf record -q -N -e cpu-clock -c 20000 -o %s -- /bin/true >/dev/null 2>&1", file);
	if (system(cmd) != 0) {
		printf("perf record not permitted here: live recording skipped\n");
	} else {
		printf("live perf record (file mode)\n");
		check_live(file, 0);
		snprintf(cmd, sizeof(cmd), "perf record -q -N -e cpu-clock -c 20000 -o - -- /bin/true > %s 2>/dev/null",
			 pfile);
		if (system(cmd) == 0) {
			printf("live perf record (pipe mode)\n");
			check_live(pfile, 1);
		}
		/* perf record -z (zstd COMPRESSED records), if this perf has it */
		snprintf(cmd, sizeof(cmd), "perf record -q -N -z -e cpu-clock -c 20000 -o %s -- /bin/true >/dev/null 2>&1",
			 file);
		if (system(cmd) == 0) {
			printf("live perf record -z\n");
			check_live(file, 0);
		}
	}
	unlink(file);
	unlink(pfile);
	snprintf(file, sizeof(file), "%s/perf.data.old", dir);   /* perf's second record moved the first */
	unlink(file);
	rmdir(dir);
}

/* A JIT runtime's jitdump (tools/perf/Documentation/jitdump-specification.txt)
 * named by the MMAP of its marker: the reader hands out, right after that
 * MMAP, a symbol and a code record per code load (the code bytes at the
 * load's address), as `perf inject --jit` reads it. */
static void test_jitdump(void)
{
	char dump[256];
	snprintf(dump, sizeof(dump), "%s/jit-42.dump", BTR_BINARY_DIR);
	static const uint8_t code[] = { 0x31, 0xc0, 0xc3 };
	struct wbuf *w = calloc(1, sizeof(*w));
	if (!w)
		return;
	/* the jitdump: header, one JIT_CODE_LOAD "js_fn" of 3 bytes at 0x7f0000001000 */
	w32(w, 0x4A695444), w32(w, 1), w32(w, 40), w32(w, 62), w32(w, 0), w32(w, 42), w64(w, 0), w64(w, 0);
	w32(w, 0), w32(w, 56 + 6 + 3), w64(w, 5);
	w32(w, 42), w32(w, 42), w64(w, 0x7f0000001000), w64(w, 0x7f0000001000), w64(w, 3), w64(w, 1);
	wstr(w, "js_fn", 6);
	for (size_t i = 0; i < sizeof(code); i++)
		w8(w, code[i]);
	FILE *f = fopen(dump, "wb");
	CHECK(f != NULL);
	if (f) {
		fwrite(w->b, 1, w->n, f);
		fclose(f);
	}
	/* the perf.data: one attr, data = the marker's MMAP (no sample_id_all) */
	memset(w, 0, sizeof(*w));
	w64(w, 0x32454c4946524550ULL);
	w64(w, 104);
	w64(w, 80 + 16);
	size_t attrs_at = w->n;
	w64(w, 0), w64(w, 0), w64(w, 0), w64(w, 0), w64(w, 0), w64(w, 0);
	w64(w, 0), w64(w, 0), w64(w, 0), w64(w, 0);
	size_t a0 = w->n;
	w32(w, 0), w32(w, 80), w64(w, 0), w64(w, 4000), w64(w, 0x1 | 0x2), w64(w, 0), w64(w, 1ull << 5);
	w32(w, 0), w32(w, 0), w64(w, 0), w64(w, 0), w64(w, 0), w64(w, 0), w64(w, 0);
	set64(w, attrs_at, a0);
	set64(w, attrs_at + 8, w->n - a0);
	size_t data = w->n, s;
	rec_begin(w, 1, 2, &s); /* MMAP, user */
	w32(w, 42), w32(w, 42), w64(w, 0x7f0000000000), w64(w, 0x1000), w64(w, 0);
	wstr(w, dump, (strlen(dump) + 8) & ~(size_t)7);
	rec_end(w, s);
	set64(w, attrs_at + 16, data);
	set64(w, attrs_at + 24, w->n - data);
	struct btr_perf_reader *r;
	CHECK_EQ(btr_perf_reader_new_mem(w->b, w->n, &r), 0);
	struct btr_record rec;
	int seen = 0;
	while (r && btr_perf_read(r, &rec) == 0) {
		if (rec.type == BTR_REC_MODULE_LOAD)
			CHECK(seen++ == 0 && !strcmp(rec.u.module.path, dump));
		else if (rec.type == BTR_REC_SYMBOL)
			CHECK(seen++ == 1 && rec.u.sym.pid == 42 && rec.u.sym.addr == 0x7f0000001000 &&
			      rec.u.sym.size == 3 && rec.u.sym.source == BTR_SYM_JITDUMP && !strcmp(rec.u.sym.name, "js_fn"));
		else if (rec.type == BTR_REC_CODE)
			CHECK(seen++ == 2 && rec.u.code.addr == 0x7f0000001000 && rec.u.code.size == 3 && rec.u.code.data &&
			      !memcmp(rec.u.code.data, code, 3));
	}
	CHECK_EQ(seen, 3);
	btr_perf_reader_free(r);
	unlink(dump);
	free(w);
}

int main(void)
{
	test_jitdump();
	test_synthetic();
	test_bts_synthetic();
	test_length_bounds();
	test_compressed_synthetic();
	test_build_id_size();
	test_sample_id_pos();
	test_compressed_mmap_len();
	test_corrupt();
	test_autofdo();
	test_intel_pt();
	test_branch();
	test_old_38();
	test_live();
	truncate_file(TRACES "/quipper/perf.data.branch-4.14", 2000);
	truncate_file(TRACES "/quipper/perf.data.intel_pt-4.14", 600);
	truncate_file(TRACES "/quipper/perf.data.callgraph_and_branch-3.8", 150);
	if (!exists(TRACES "/quipper/perf.data.branch-4.14") && !exists(TRACES "/autofdo/test.lbr"))
		check_skip("real perf.data recordings absent (" TRACES ")");
	return check_done();
}
