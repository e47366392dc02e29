/* test_memory_big: "memory bounded ... never by the length of the trace"
 * (docs/report.md, docs/callstack.md, docs/pt-dump.md) on a trace far
 * larger than the memory the commands may use.  A 512 KiB PT walk over
 * 1024 generated functions (memtrace.h) as BTS records (24 bytes per
 * taken branch, the cheapest data to decode per byte): 4 and 16 copies,
 * 104 MiB and 415 MiB, for report and flame; the PT walk itself 12 and
 * 48 times (6 and 24 MiB) for pt dump, in a .btr and as a raw file.  Peak RSS must not grow and must
 * stay far below the trace's size.  BTR_MEMORY_SCALE=K multiplies the
 * copies: K=5 is a 2.03 GiB trace (Debug, by hand: report 7.3 MiB, flame
 * 9.6 MiB, 23 s in all on an idle machine).  5-40 s by default, depending
 * on the machine's load.  Script on long traces: test_memory_blocks
 * and test_memory_threads (a Debug build prints about a million lines a
 * second).  The files are deleted at the end. */
#include "memtrace.h"

int main(void)
{
	mt_skip_under_asan();
	char btr[1024], dir[900];
	snprintf(btr, sizeof(btr), "%s/btr", BTR_BINARY_DIR);
	snprintf(dir, sizeof(dir), "%s/memory_big", BTR_BINARY_DIR);
	if (access(btr, X_OK))
		check_skip("btr binary not built");
	const char *sc = getenv("BTR_MEMORY_SCALE");
	unsigned k = sc && atoi(sc) > 0 ? (unsigned)atoi(sc) : 1;
	mkdir(dir, 0755);
	struct mt_spec sp[6] = { { .threads = 1, .copies = 4 * k, .bts = 1 },
				 { .threads = 1, .copies = 16 * k, .bts = 1 },
				 { .threads = 1, .copies = 12 * k },
				 { .threads = 1, .copies = 48 * k },
				 { .threads = 1, .copies = 12 * k, .raw = 1 },
				 { .threads = 1, .copies = 48 * k, .raw = 1 } };
	snprintf(sp[0].path, sizeof(sp[0].path), "%s/bts1.btr", dir);
	snprintf(sp[1].path, sizeof(sp[1].path), "%s/bts4.btr", dir);
	snprintf(sp[2].path, sizeof(sp[2].path), "%s/pt1.btr", dir);
	snprintf(sp[3].path, sizeof(sp[3].path), "%s/pt4.btr", dir);
	snprintf(sp[4].path, sizeof(sp[4].path), "%s/pt1.pt", dir);
	snprintf(sp[5].path, sizeof(sp[5].path), "%s/pt4.pt", dir);
	struct mt_unit u;
	mt_generate(dir, 1024, 512 << 10, sp, 6, &u);
	/* caps (Debug: report 7 MiB, flame 10 MiB, pt dump 5 MiB) */
	const long cap[4] = { 24 << 10, 0, 12 << 10, 24 << 10 };
	mt_commands(btr, dir, "BTS", sp, &u, MT_REPORT | MT_FLAME, cap, 0);
	mt_commands(btr, dir, "PT", sp + 2, &u, MT_DUMP, cap, 0);
	mt_commands(btr, dir, "raw PT", sp + 4, &u, MT_DUMP, cap, 0);
	/* the bound is far below the trace's size */
	CHECK(sp[1].size > 16 * ((uint64_t)cap[0] << 10));
	CHECK(sp[3].size > ((uint64_t)cap[2] << 10));
	for (int i = 0; i < 6; i++)
		unlink(sp[i].path);
	char elf[1100];
	snprintf(elf, sizeof(elf), "%s/code.elf", dir);
	unlink(elf);
	rmdir(dir);
	return check_done();
}
