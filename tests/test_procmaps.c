/* test_procmaps.c - the one reader of /proc/PID/maps lines
 * (lib/capture/procmaps.c), used by the step backend, the perf recorders
 * and the QEMU plugin: this process's own maps (a real input), and lines
 * of every shape the kernel writes. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "capture/agent/procmaps.h"

int main(void)
{
	/* our own code is an executable file mapping that contains main */
	char line[4096 + 128];
	struct btr_procmap m;
	int found = 0, n = 0;
	FILE *f = btr_procmaps_open(getpid());
	CHECK(f != NULL);
	while (f && btr_procmaps_next(f, line, sizeof(line), &m)) {
		n++;
		CHECK(m.start < m.end);
		if ((unsigned long long)(uintptr_t)main >= m.start && (unsigned long long)(uintptr_t)main < m.end) {
			found = 1;
			CHECK_EQ(m.perm[2], 'x');
			CHECK(strstr(m.file, "test_procmaps") != NULL);
		}
	}
	if (f)
		fclose(f);
	CHECK(n > 3);
	CHECK(found);
	f = btr_procmaps_open(0);   /* /proc/self/maps */
	CHECK(f && btr_procmaps_next(f, line, sizeof(line), &m) == 1);
	if (f)
		fclose(f);

	static char text[] =
		"00400000-00452000 r-xp 00001000 08:02 173521      /usr/bin/a b\n"
		"not a mapping\n"
		"7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]\n"
		"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
		"7f0000100000-7f0000101000 r--p 00000000 00:00 0\n";
	f = fmemopen(text, sizeof(text) - 1, "r");
	CHECK(f != NULL);
	if (!f)
		return check_done();
	CHECK_EQ(btr_procmaps_next(f, line, sizeof(line), &m), 1);
	CHECK_EQ(m.start, 0x400000ull);
	CHECK_EQ(m.end, 0x452000ull);
	CHECK_EQ(m.off, 0x1000ull);
	CHECK_STR(m.perm, "r-xp");
	CHECK_STR(m.file, "/usr/bin/a b");      /* blanks inside a path stay */
	CHECK_EQ(btr_procmaps_next(f, line, sizeof(line), &m), 1);   /* the bad line is skipped */
	CHECK_STR(m.file, "[vdso]");
	CHECK_EQ(btr_procmaps_next(f, line, sizeof(line), &m), 1);
	CHECK_STR(m.file, "");                  /* anonymous */
	CHECK_EQ(m.end - m.start, 0x21000ull);
	CHECK_EQ(btr_procmaps_next(f, line, sizeof(line), &m), 1);
	CHECK_STR(m.file, "");
	CHECK_STR(m.perm, "r--p");
	CHECK_EQ(btr_procmaps_next(f, line, sizeof(line), &m), 0);
	fclose(f);
	return check_done();
}
