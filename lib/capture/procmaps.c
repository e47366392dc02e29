/* procmaps.c - the one reader of /proc/PID/maps lines (agent/procmaps.h). */
#include "agent/procmaps.h"

#include <string.h>

FILE *btr_procmaps_open(pid_t pid)
{
	char path[64];
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/maps");
	return fopen(path, "re");
}

int btr_procmaps_next(FILE *f, char *line, int size, struct btr_procmap *m)
{
	while (fgets(line, size, f)) {
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &m->start, &m->end, m->perm, &m->off, &pos) < 4 || !pos)
			continue;
		m->file = line + pos;
		m->file[strcspn(m->file, "\n")] = 0;
		return 1;
	}
	return 0;
}
