/* bench_ptflow: PT flow reconstruction speed, btr vs libipt's block
 * decoder, on a generated code image and a long random walk over it
 * (tests/ptgen.h): ns per branch edge and MB/s of trace, single-threaded
 * and with btr_ptflow_decode_parallel (-j 2).
 *
 *   bench_ptflow [MB [NFUNC [REPS]]]     (defaults: 64 MB, 4096, 3)
 *
 * Build with -DCMAKE_BUILD_TYPE=Release for meaningful numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "btr/image.h"
#include "btr/ptflow.h"
#include "../tests/ptgen.h"
#ifdef BTR_HAVE_LIBIPT
#include <intel-pt.h>
#endif

/* The machine may be shared: single-threaded runs are timed in thread
 * CPU time (what the decoder costs), -j2 in wall time (what it gains). */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct cnt { uint64_t branches, taken; };

static int on_branch(void *ctx, const struct btr_branch *b)
{
	struct cnt *c = ctx;
	c->branches++;
	c->taken += b->flags & 1;
	return 0;
}

/* The batched callback: the same work per branch, one call per batch. */
static int on_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	struct cnt *c = ctx;
	uint64_t taken = 0;
	for (size_t i = 0; i < n; i++)
		taken += b[i].flags & 1;
	c->branches += n;
	c->taken += taken;
	return 0;
}

/* Untimed check that the batched records equal the per-branch ones. */
static uint64_t mix(uint64_t h, const struct btr_branch *b)
{
	uint64_t v[6] = { b->from, b->to, b->tsc, b->insns, (uint64_t)b->tid << 32 | b->cycles,
			  (uint64_t)b->flags << 16 | (uint64_t)b->kind << 8 | b->reserved };
	for (int i = 0; i < 6; i++)
		h = (h ^ v[i]) * 0x100000001b3ull;
	return h;
}

static int hash_branch(void *ctx, const struct btr_branch *b)
{
	*(uint64_t *)ctx = mix(*(uint64_t *)ctx, b);
	return 0;
}

static int hash_branches(void *ctx, const struct btr_branch *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*(uint64_t *)ctx = mix(*(uint64_t *)ctx, &b[i]);
	return 0;
}

int main(int argc, char **argv)
{
	size_t mb = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	unsigned nfunc = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 4096;
	int reps = argc > 3 ? atoi(argv[3]) : 3;
	struct ptgen g;
	memset(&g, 0, sizeof(g));
	double t0 = now();
	ptgen_code(&g, 0x400000, nfunc);
	ptgen_walk(&g, mb << 20, 12345, 4096);
	printf("generated %zu bytes of trace, %llu branches, %llu instructions, %u functions (%.1f s)\n",
	       g.pt_size, (unsigned long long)g.branches, (unsigned long long)g.insns, nfunc, now() - t0);

	struct btr_image *img;
	btr_image_new(&img);
	btr_image_add_bytes(img, g.code, g.code_size, g.base);
	double mbytes = (double)g.pt_size / 1e6;

	/* btr, one thread, branch callback */
	double best = 1e9;
	struct btr_ptflow_stats st;
	for (int r = 0; r < reps; r++) {
		struct btr_ptflow *f;
		btr_ptflow_new(img, NULL, &f);
		struct cnt c = { 0 };
		struct btr_ptflow_callbacks cb = { .branch = on_branch, .ctx = &c };
		double t = cpu();
		btr_ptflow_decode(f, g.pt, g.pt_size, &cb);
		t = cpu() - t;
		btr_ptflow_stats(f, &st);
		btr_ptflow_free(f);
		if (t < best)
			best = t;
		if (c.branches != g.branches || st.insns != g.insns || st.gaps)
			printf("MISMATCH: btr %llu branches %llu insns %llu gaps\n", (unsigned long long)c.branches,
			       (unsigned long long)st.insns, (unsigned long long)st.gaps);
	}
	double btr1 = best;
	printf("blocks decoded (cache misses): %llu\n", (unsigned long long)st.blocks_decoded);
	printf("btr  -j1 (callback)  %8.3f s cpu  %7.2f ns/edge  %8.1f MB/s\n", best, best * 1e9 / (double)g.branches, mbytes / best);

	/* btr, one thread, batched branch callback (btr_ptflow_callbacks.branches) */
	best = 1e9;
	for (int r = 0; r < reps; r++) {
		struct btr_ptflow *f;
		btr_ptflow_new(img, NULL, &f);
		struct cnt c = { 0 };
		struct btr_ptflow_callbacks cb = { .branches = on_branches, .ctx = &c };
		double t = cpu();
		btr_ptflow_decode(f, g.pt, g.pt_size, &cb);
		t = cpu() - t;
		btr_ptflow_stats(f, &st);
		btr_ptflow_free(f);
		if (t < best)
			best = t;
		if (c.branches != g.branches || st.insns != g.insns || st.gaps)
			printf("MISMATCH: btr batched %llu branches %llu insns %llu gaps\n",
			       (unsigned long long)c.branches, (unsigned long long)st.insns,
			       (unsigned long long)st.gaps);
	}
	double btr1b = best;
	printf("btr  -j1 (batched)   %8.3f s cpu  %7.2f ns/edge  %8.1f MB/s\n", best, best * 1e9 / (double)g.branches, mbytes / best);
	{
		uint64_t h1 = 0xcbf29ce484222325ull, h2 = h1, h3 = h1;
		struct btr_ptflow *f;
		struct btr_ptflow_callbacks c1 = { .branch = hash_branch, .ctx = &h1 };
		struct btr_ptflow_callbacks c2 = { .branches = hash_branches, .ctx = &h2 };
		struct btr_ptflow_callbacks c3 = { .branches = hash_branches, .ctx = &h3 };
		btr_ptflow_new(img, NULL, &f);
		btr_ptflow_decode(f, g.pt, g.pt_size, &c1);
		btr_ptflow_free(f);
		btr_ptflow_new(img, NULL, &f);
		btr_ptflow_decode(f, g.pt, g.pt_size, &c2);
		btr_ptflow_free(f);
		btr_ptflow_decode_parallel(img, NULL, g.pt, g.pt_size, 2, 0, &c3, NULL);
		printf("branch records: per-branch %s batched %s -j2 batched\n", h1 == h2 ? "==" : "MISMATCH",
		       h1 == h3 ? "==" : "MISMATCH");
	}

	best = 1e9;
	for (int r = 0; r < reps; r++) {
		struct btr_ptflow *f;
		btr_ptflow_new(img, NULL, &f);
		double t = cpu();
		btr_ptflow_decode(f, g.pt, g.pt_size, NULL);
		t = cpu() - t;
		btr_ptflow_stats(f, &st);
		btr_ptflow_free(f);
		if (t < best)
			best = t;
	}
	printf("btr  -j1 (counts)    %8.3f s cpu  %7.2f ns/edge  %8.1f MB/s\n", best, best * 1e9 / (double)g.branches, mbytes / best);

	best = 1e9;
	double pcpu = 0;
	for (int r = 0; r < reps; r++) {
		struct cnt c = { 0 };
		struct btr_ptflow_callbacks cb = { .branch = on_branch, .ctx = &c };
		struct timespec c0, c1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
		double t = now();
		btr_ptflow_decode_parallel(img, NULL, g.pt, g.pt_size, 2, 0, &cb, &st);
		t = now() - t;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
		pcpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
		if (t < best)
			best = t;
		if (c.branches != g.branches || st.insns != g.insns)
			printf("MISMATCH: btr -j2 %llu branches %llu insns\n", (unsigned long long)c.branches,
			       (unsigned long long)st.insns);
	}
	printf("btr  -j2 (callback)  %8.3f s wall    %7.2f ns/edge  %8.1f MB/s  (process cpu %.3f s)\n", best,
	       best * 1e9 / (double)g.branches, mbytes / best, pcpu);

	best = 1e9;
	for (int r = 0; r < reps; r++) {
		struct cnt c = { 0 };
		struct btr_ptflow_callbacks cb = { .branches = on_branches, .ctx = &c };
		struct timespec c0, c1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
		double t = now();
		btr_ptflow_decode_parallel(img, NULL, g.pt, g.pt_size, 2, 0, &cb, &st);
		t = now() - t;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
		pcpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
		if (t < best)
			best = t;
		if (c.branches != g.branches || st.insns != g.insns)
			printf("MISMATCH: btr -j2 batched %llu branches %llu insns\n", (unsigned long long)c.branches,
			       (unsigned long long)st.insns);
	}
	printf("btr  -j2 (batched)   %8.3f s wall    %7.2f ns/edge  %8.1f MB/s  (process cpu %.3f s)\n", best,
	       best * 1e9 / (double)g.branches, mbytes / best, pcpu);

	{
		struct btr_ptflow_callbacks none = { 0 };
		best = 1e9;
		for (int r = 0; r < reps; r++) {
			struct timespec c0, c1;
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
			double t = now();
			btr_ptflow_decode_parallel(img, NULL, g.pt, g.pt_size, 2, 0, &none, &st);
			t = now() - t;
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
			pcpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
			if (t < best)
				best = t;
			if (st.branches != g.branches || st.insns != g.insns)
				printf("MISMATCH: btr -j2 counts\n");
		}
		printf("btr  -j2 (counts)    %8.3f s wall    %7.2f ns/edge  %8.1f MB/s  (process cpu %.3f s)\n", best,
		       best * 1e9 / (double)g.branches, mbytes / best, pcpu);
	}

#ifdef BTR_HAVE_LIBIPT
	char path[] = "/tmp/bench_ptflow_code_XXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0 && write(fd, g.code, g.code_size) == (ssize_t)g.code_size) {
		close(fd);
		struct pt_config c;
		pt_config_init(&c);
		c.begin = g.pt;
		c.end = g.pt + g.pt_size;
		struct pt_block_decoder *d = pt_blk_alloc_decoder(&c);
		/* Fair to libipt: its image section cache keeps the section
		 * mapped, so the block cache (which libipt's block decoder
		 * requests for every section it maps) lives across the run. */
		struct pt_image_section_cache *isc = pt_iscache_alloc(NULL);
		int isid = isc ? pt_iscache_add_file(isc, path, 0, g.code_size, g.base) : -1;
		if (isid >= 0)
			pt_image_add_cached(pt_blk_get_image(d), isc, isid, NULL);
		else
			pt_image_add_file(pt_blk_get_image(d), path, 0, g.code_size, NULL, g.base);
		uint64_t insns = 0, blocks = 0;
		double t = cpu();
		int s;
		for (;;) {
			s = pt_blk_sync_forward(d);
			if (s < 0)
				break;
			for (;;) {
				while (s & pts_event_pending) {
					struct pt_event ev;
					s = pt_blk_event(d, &ev, sizeof(ev));
					if (s < 0)
						break;
				}
				if (s < 0)
					break;
				struct pt_block b;
				s = pt_blk_next(d, &b, sizeof(b));
				insns += b.ninsn;
				blocks++;
				if (s < 0)
					break;
			}
			if (s == -pte_eos)
				break;
		}
		t = cpu() - t;
		pt_blk_free_decoder(d);
		pt_iscache_free(isc);
		printf("libipt pt_blk        %8.3f s cpu  %7.2f ns/edge  %8.1f MB/s  (%llu insns, %llu blocks)\n", t,
		       t * 1e9 / (double)g.branches, mbytes / t, (unsigned long long)insns, (unsigned long long)blocks);
		printf("speedup btr -j1 vs libipt pt_blk: %.1fx (callback), %.1fx (batched)\n", t / btr1, t / btr1b);
	}
	unlink(path);
#endif
	btr_image_free(img);
	ptgen_free(&g);
	return 0;
}
