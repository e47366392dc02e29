/* procmaps.h - the one reader of /proc/PID/maps lines
 * (lib/capture/procmaps.c, libc only), used by the capture backends of
 * lib/capture/ (step, the perf recorders) and by the QEMU plugin
 * (agents/qemu/), which reads the guest's /proc/self/maps and links it
 * from libbtr like the rest of the library code it calls.  Shared by the
 * agents and the recorders only; not public. */
#ifndef BTR_CAPTURE_PROCMAPS_H
#define BTR_CAPTURE_PROCMAPS_H

#include <stdio.h>
#include <sys/types.h>

/* One line of /proc/PID/maps: range, permissions ("r-xp"), file offset and
 * the file ("" for anonymous memory, "[vdso]" ...), inside the caller's line. */
struct btr_procmap {
	unsigned long long start, end, off;
	char perm[8];
	char *file;
};

/* /proc/@pid/maps (@pid 0: /proc/self/maps) opened for reading, or NULL. */
FILE *btr_procmaps_open(pid_t pid);
/* Reads the next mapping from @f into @m, using the caller's @line of
 * @size bytes (@m->file points into it); lines that are not a mapping are
 * skipped.  Returns 1, or 0 at the end. */
int btr_procmaps_next(FILE *f, char *line, int size, struct btr_procmap *m);

#endif
