/* bench_image.c - lookup speed of struct btr_image.
 *
 *   bench_image [ITERATIONS]
 *
 * Loads this process's own modules (every r-xp file mapping of
 * /proc/self/maps at its real load bias) plus 4096 small byte sections
 * (JIT-like), then times:
 *   map/seq     btr_image_map at addresses advancing 4 bytes at a time
 *               (a decoder walking basic blocks: the last-hit cache)
 *   map/random  btr_image_map at random mapped addresses (binary search)
 *   symbol      btr_image_symbol at random code addresses of libc
 *   line        btr_image_line at random addresses of libc (needs libc6-dbg)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "btr/btr.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct range {
	uint64_t start, end;
	char path[512];
};

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 5000000;
	struct btr_image *img;
	struct range r[64];
	int nr = 0;
	char line[1024], self[512] = "";
	if (btr_image_new(&img) != 0)
		return 1;

	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f) && nr < 64) {
		unsigned long long s, e, off;
		char perms[8], path[512];
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %511s", &s, &e, perms, &off, path) != 5 ||
		    strcmp(perms, "r-xp") || path[0] != '/')
			continue;
		uint64_t bias;
		if (btr_elf_load_bias_prot(path, s, off, PROT_READ | PROT_EXEC, &bias) != 0 ||
		    btr_image_add_elf(img, path, bias, 0) != 0)
			continue;
		if (!self[0])
			snprintf(self, sizeof(self), "%s", path);
		r[nr].start = s;
		r[nr].end = e;
		snprintf(r[nr].path, sizeof(r[nr].path), "%s", path);
		nr++;
	}
	fclose(f);
	uint8_t blob[256];
	memset(blob, 0x90, sizeof(blob));
	for (int i = 0; i < 4096; i++)
		btr_image_add_bytes(img, blob, sizeof(blob), 0x10000000ull + (uint64_t)i * 4096);
	if (nr == 0) {
		fprintf(stderr, "no modules loaded\n");
		return 1;
	}
	printf("%d modules + 4096 byte sections\n", nr);

	/* map, sequential */
	const uint8_t *p;
	size_t avail;
	uint64_t sum = 0;
	double t = now();
	for (long i = 0; i < iters; i++) {
		const struct range *m = &r[(i >> 16) % nr];
		uint64_t a = m->start + ((uint64_t)(i & 0xffff) * 4) % (m->end - m->start);
		if (btr_image_map(img, a, &p, &avail) == 0)
			sum += *p;
	}
	t = now() - t;
	printf("map/seq:    %8.1f ns/op  (%ld lookups)\n", t * 1e9 / (double)iters, iters);

	/* map, random over modules and byte sections */
	long hits = 0;
	t = now();
	for (long i = 0; i < iters; i++) {
		uint64_t x = xorshift(), a;
		if (x & 1) {
			const struct range *m = &r[(x >> 1) % nr];
			a = m->start + (x >> 8) % (m->end - m->start);
		} else {
			a = 0x10000000ull + ((x >> 8) % 4096) * 4096 + (x >> 40) % 256;
		}
		if (btr_image_map(img, a, &p, &avail) == 0) {
			sum += *p;
			hits++;
		}
	}
	t = now() - t;
	printf("map/random: %8.1f ns/op  (%ld of %ld hit)\n", t * 1e9 / (double)iters, hits, iters);

	/* symbols in libc */
	int libc = -1;
	for (int i = 0; i < nr; i++)
		if (strstr(r[i].path, "/libc.so"))
			libc = i;
	if (libc >= 0) {
		struct btr_symbol sym;
		long n = iters / 10, found = 0;
		double t0 = now();
		btr_image_symbol(img, r[libc].start, &sym);  /* loads the tables */
		double tload = now() - t0;
		t = now();
		for (long i = 0; i < n; i++) {
			uint64_t a = r[libc].start + xorshift() % (r[libc].end - r[libc].start);
			found += btr_image_symbol(img, a, &sym) == 0;
		}
		t = now() - t;
		printf("symbol:     %8.1f ns/op  (%ld of %ld in a symbol; table load %.1f ms)\n",
		       t * 1e9 / (double)n, found, n, tload * 1e3);
	}

	/* lines in libc (DWARF from libc6-dbg if installed), else this binary */
	{
		const struct range *m = &r[libc >= 0 ? libc : 0];
		const char *file;
		int ln;
		long n = iters / 100, found = 0;
		double t0 = now();
		btr_image_line(img, m->start, &file, &ln);
		double tload = now() - t0;
		t = now();
		for (long i = 0; i < n; i++) {
			uint64_t a = m->start + xorshift() % (m->end - m->start);
			found += btr_image_line(img, a, &file, &ln) == 0;
		}
		t = now() - t;
		printf("line:       %8.1f ns/op  (%s: %ld of %ld with a line; DWARF load %.1f ms)\n",
		       t * 1e9 / (double)n, strrchr(m->path, '/') + 1, found, n, tload * 1e3);
	}
	btr_image_free(img);
	return sum == 42 ? 2 : 0;  /* keep sum alive */
}
