/* test_memory_blocks: "memory bounded" (docs/report.md, docs/script.md,
 * docs/pt-dump.md, docs/callstack.md) on a trace of many distinct blocks.
 * The code is 65536 generated functions (memtrace.h: 16 MiB of code, a
 * symbol each); a 512 KiB PT walk over it reaches about 70k distinct
 * blocks in 16k functions.  The trace repeats the walk once and four
 * times: the tables grow with the code seen, which is the same in both,
 * so peak RSS must not grow.  report, script, pt dump and flame; see
 * mt_commands for what each must also have produced. */
#include "memtrace.h"

int main(void)
{
	mt_skip_under_asan();
	char btr[1024], dir[900];
	snprintf(btr, sizeof(btr), "%s/btr", BTR_BINARY_DIR);
	snprintf(dir, sizeof(dir), "%s/memory_blocks", BTR_BINARY_DIR);
	if (access(btr, X_OK))
		check_skip("btr binary not built");
	mkdir(dir, 0755);
	struct mt_spec sp[2] = { { .threads = 1, .copies = 1 }, { .threads = 1, .copies = 4 } };
	snprintf(sp[0].path, sizeof(sp[0].path), "%s/x1.btr", dir);
	snprintf(sp[1].path, sizeof(sp[1].path), "%s/x4.btr", dir);
	struct mt_unit u;
	mt_generate(dir, 65536, 512 << 10, sp, 2, &u);
	/* caps: about twice what a Debug build needs (report 44 MiB: the
	 * block and function tables and one 7.5 MiB decoder cache; flame
	 * 43 MiB: 30k functions' call paths) */
	const long cap[4] = { 96 << 10, 64 << 10, 16 << 10, 96 << 10 };
	mt_commands(btr, dir, "65536 functions", sp, &u, MT_REPORT | MT_SCRIPT | MT_DUMP | MT_FLAME, cap, 0);
	unlink(sp[0].path);
	unlink(sp[1].path);
	char elf[1100];
	snprintf(elf, sizeof(elf), "%s/code.elf", dir);
	unlink(elf);
	rmdir(dir);
	return check_done();
}
