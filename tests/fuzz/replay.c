/* replay.c - runs a libFuzzer target's LLVMFuzzerTestOneInput on files, so
 * that every kept finding (tests/fuzz/regress/NAME/) and the seed corpus
 * (tests/fuzz/corpus/NAME/) are replayed by `ctest` in every build, with
 * gcc and without libFuzzer; the sanitizer build (`make asan`) checks
 * them with ASan + UBSan.  Arguments: files or directories (one level);
 * a missing directory is allowed (no findings kept yet), but a replay of
 * no input at all fails: every target has a seed corpus, and a test that
 * replays nothing proves nothing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s\n", path);
		return 1;
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "replay: out of memory for %s\n", path);
		return 1;
	}
	/* an exact-size copy, so reads past the end are caught */
	uint8_t *exact = malloc(n ? n : 1);
	if (!exact) {
		free(buf);
		return 1;
	}
	memcpy(exact, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int files = 0, bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0)
			continue;   /* an optional directory (no findings yet) */
		if (!S_ISDIR(st.st_mode)) {
			bad += run_file(argv[i]);
			files++;
			continue;
		}
		DIR *d = opendir(argv[i]);
		if (!d)
			continue;
		char **names = NULL;
		size_t nn = 0;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char **nm = realloc(names, (nn + 1) * sizeof(*names));
			if (!nm)
				break;
			names = nm;
			size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
			names[nn] = malloc(len);
			if (!names[nn])
				break;
			snprintf(names[nn++], len, "%s/%s", argv[i], e->d_name);
		}
		closedir(d);
		if (nn)
			qsort(names, nn, sizeof(*names), cmp);
		for (size_t k = 0; k < nn; k++) {
			bad += run_file(names[k]);
			files++;
			free(names[k]);
		}
		free(names);
	}
	printf("replay: %d inputs, %d unreadable\n", files, bad);
	if (files == 0) {
		fprintf(stderr, "replay: FAIL: no inputs (an empty or missing seed corpus):");
		for (int i = 1; i < argc; i++)
			fprintf(stderr, " %s", argv[i]);
		fprintf(stderr, "\n");
		return 1;
	}
	return bad ? 1 : 0;
}
