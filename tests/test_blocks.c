/* test_blocks.c - the blocks analysis (btr/blocks.h) against the qemu
 * plugin's ground truth: `btr record -b qemu --ground-truth` logs every
 * executed instruction; from that log alone (decoding each instruction to
 * know which are branches) the test derives every block [first
 * instruction after a branch, branch] and every edge branch -> next
 * instruction with their counts, maps them to (module, link address) and
 * requires the analysis to have exactly the same sets and counts.  Then a
 * function's CFG (btr_funcgraph_build) must give every instruction of the
 * function exactly its ground-truth execution count, and the same must
 * hold for a second run (PIE at another address) with the same input. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "btr/analysis.h"
#include "btr/blocks.h"
#include "btr/diff.h"
#include "btr/error.h"
#include "btr/insn.h"
#include "btr/trace.h"

#define BTR BTR_BINARY_DIR "/btr"

struct key {
	uint32_t m1, m2;
	uint64_t a, b;
	uint64_t count;
	uint8_t taken;
};

static int cmp_key(const void *x, const void *y)
{
	const struct key *p = x, *q = y;
	if (p->m1 != q->m1)
		return p->m1 < q->m1 ? -1 : 1;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	if (p->m2 != q->m2)
		return p->m2 < q->m2 ? -1 : 1;
	if (p->b != q->b)
		return p->b < q->b ? -1 : 1;
	return p->taken < q->taken ? -1 : p->taken > q->taken;
}

/* Sorts and merges equal keys, summing counts; returns the new length. */
static size_t merge(struct key *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_key);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && !cmp_key(&v[k - 1], &v[i]))
			v[k - 1].count += v[i].count;
		else
			v[k++] = v[i];
	}
	return k;
}

struct gt {
	const char *path;
	struct btr_stream *s;
	struct key *blocks, *edges;
	size_t nb, ne;
	uint64_t insns;
	const char **mod_paths;     /* module index of the blocks analysis -> path */
	size_t n_mods;
	int ok;
};

static int gt_begin(void *state, struct btr_stream *s)
{
	((struct gt *)state)->s = s;
	return 0;
}

/* Module key of run-time @addr: the module's path string pointer is not
 * comparable with the analysis' index, so keys use a path table. */
static uint32_t mod_of(struct gt *g, struct btr_image *img, uint64_t addr, uint64_t *off)
{
	struct btr_image_module mi;
	if (btr_image_module_at(img, addr, &mi) != 0) {
		*off = addr;
		return BTR_BLOCKS_NO_MODULE;
	}
	*off = addr - mi.bias;
	for (size_t i = 0; i < g->n_mods; i++)
		if (!strcmp(g->mod_paths[i], mi.path))
			return (uint32_t)i;
	g->mod_paths = realloc(g->mod_paths, (g->n_mods + 1) * sizeof(*g->mod_paths));
	g->mod_paths[g->n_mods] = strdup(mi.path);
	return (uint32_t)g->n_mods++;
}

/* Records the block [start, prev] and the edge prev -> ip (@ip 0: the
 * thread's trace ends at a branch, the exit syscall). */
static void add_branch(struct gt *g, struct btr_image *img, size_t *capb, size_t *cape, int known_start,
		       uint64_t start, uint64_t prev, const struct btr_insn *prev_in, uint64_t ip)
{
	if (g->nb == *capb)
		g->blocks = realloc(g->blocks, (*capb = *capb ? *capb * 2 : 4096) * sizeof(struct key));
	if (g->ne == *cape)
		g->edges = realloc(g->edges, (*cape = *cape ? *cape * 2 : 4096) * sizeof(struct key));
	struct key *e = &g->edges[g->ne++];
	memset(e, 0, sizeof(*e));
	e->m1 = mod_of(g, img, prev, &e->a);
	/* A syscall leaves the traced (user) code: the trace has no target,
	 * the stream gives 0. */
	if (prev_in->kind == BTR_KIND_SYSCALL || !ip) {
		e->m2 = BTR_BLOCKS_NO_MODULE;
		e->b = 0;
	} else {
		e->m2 = mod_of(g, img, ip, &e->b);
	}
	e->count = 1;
	e->taken = ip != prev + prev_in->len || btr_branch_kind_class((enum btr_branch_kind)prev_in->kind) != BTR_LBR_JCC;
	if (known_start) {
		struct key *b = &g->blocks[g->nb++];
		memset(b, 0, sizeof(*b));
		b->m1 = b->m2 = mod_of(g, img, start, &b->a);
		uint64_t eo;
		mod_of(g, img, prev, &eo);
		b->b = eo;
		b->count = 1;
	}
}

/* In end(), while the stream's image lives: derive blocks and edges from
 * the ground-truth log. */
static int gt_end(void *state, int status)
{
	struct gt *g = state;
	struct btr_image *img = btr_stream_image_pid(g->s, 0);
	FILE *f = fopen(g->path, "rb");
	CHECK(f != NULL);
	if (!f)
		return 0;
	struct { uint32_t magic, tid; uint64_t n; } h;
	size_t capb = 0, cape = 0;
	/* Per thread: one block list per log; blocks of a thread's
	 * consecutive log chunks continue. */
	uint32_t cur_tid = 0;
	int have_prev = 0, known_start = 0;
	uint64_t prev = 0, start = 0;
	struct btr_insn prev_in;
	while (fread(&h, sizeof(h), 1, f) == 1) {
		CHECK_EQ(h.magic, 0x54474254u);
		if (h.tid != cur_tid) {
			if (have_prev && prev_in.kind != BTR_KIND_NONE)
				add_branch(g, img, &capb, &cape, known_start, start, prev, &prev_in, 0);
			cur_tid = h.tid;
			have_prev = 0;
			known_start = 0;
		}
		for (uint64_t i = 0; i < h.n; i++) {
			uint64_t ip;
			if (fread(&ip, 8, 1, f) != 1) {
				CHECK(0);
				break;
			}
			g->insns++;
			if (!have_prev) {
				start = ip;
				known_start = 1;
			} else if (prev_in.kind != BTR_KIND_NONE) {
				/* prev was a branch: block [start, prev], edge prev -> ip */
				add_branch(g, img, &capb, &cape, known_start, start, prev, &prev_in, ip);
				start = ip;
				known_start = 1;
			}
			if (btr_insn_decode_image(img, ip, BTR_MODE_64, &prev_in) < 0)
				memset(&prev_in, 0, sizeof(prev_in));
			prev = ip;
			have_prev = 1;
		}
	}
	if (have_prev && prev_in.kind != BTR_KIND_NONE)
		add_branch(g, img, &capb, &cape, known_start, start, prev, &prev_in, 0);
	fclose(f);
	g->nb = merge(g->blocks, g->nb);
	g->ne = merge(g->edges, g->ne);
	g->ok = status == 0;
	return 0;
}

static const struct btr_analysis_ops gt_ops = { .name = "gt", .begin = gt_begin, .end = gt_end };

static int record(const char *out, const char *gt, const char *arg)
{
	pid_t p = fork();
	if (p == 0) {
		execl(BTR, BTR, "record", "-q", "-b", "qemu", "-o", out, "--ground-truth", gt, "--",
		      BTR_BINARY_DIR "/prog_flow_loops", arg, (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static long find_mod(const struct btr_blocks_result *r, const struct gt *g, uint32_t gm)
{
	if (gm == BTR_BLOCKS_NO_MODULE)
		return BTR_BLOCKS_NO_MODULE;
	return btr_blocks_module_index(r, g->mod_paths[gm]);
}

static void compare(const char *trace, const char *gtpath, uint64_t *classify_entries,
		    struct btr_analysis **bl_out, struct gt **g_out)
{
	struct btr_analysis *bl, *ga;
	struct gt *g = calloc(1, sizeof(*g));
	g->path = gtpath;
	CHECK_EQ(btr_blocks_new(&bl), 0);
	CHECK_EQ(btr_analysis_new(&gt_ops, g, &ga), 0);
	struct btr_analysis *list[2] = { bl, ga };
	struct btr_analysis_run_info info = { .sz = sizeof(info) };
	CHECK_EQ(btr_analysis_run(trace, NULL, list, 2, &info), 0);
	const struct btr_blocks_result *r = btr_blocks_get(bl);
	CHECK(r != NULL);
	CHECK(g->ok);
	*bl_out = bl;
	*g_out = g;
	btr_analysis_free(ga);
	if (!r)
		return;
	printf("%s: %zu blocks, %zu edges (ground truth %zu, %zu), %llu insns\n", trace, r->n_blocks,
	       r->n_edges, g->nb, g->ne, (unsigned long long)g->insns);
	CHECK(r->has_insns);
	CHECK_EQ(r->insns, g->insns);
	CHECK(g->nb > 500);
	CHECK_EQ(r->n_blocks, g->nb);
	CHECK_EQ(r->n_edges, g->ne);
	size_t bad = 0;
	for (size_t i = 0; i < g->nb && i < r->n_blocks; i++) {
		const struct key *k = &g->blocks[i];
		long m = find_mod(r, g, k->m1);
		size_t j = btr_blocks_lower_bound(r, (uint32_t)m, k->a);
		int found = 0;
		for (; j < r->n_blocks && r->blocks[j].module == (uint32_t)m && r->blocks[j].start == k->a; j++)
			if (r->blocks[j].end == k->b) {
				found = r->blocks[j].count == k->count;
				break;
			}
		if (!found && bad++ < 5)
			fprintf(stderr, "block %s+0x%llx..0x%llx x%llu missing or miscounted\n",
				g->mod_paths[k->m1], (unsigned long long)k->a, (unsigned long long)k->b,
				(unsigned long long)k->count);
	}
	CHECK_EQ(bad, 0);
	bad = 0;
	for (size_t i = 0; i < g->ne; i++) {
		const struct key *k = &g->edges[i];
		long m = find_mod(r, g, k->m1), m2 = find_mod(r, g, k->m2);
		int found = 0;
		for (size_t j = btr_edges_lower_bound(r, (uint32_t)m, k->a);
		     j < r->n_edges && r->edges[j].from_module == (uint32_t)m && r->edges[j].from == k->a; j++)
			if (r->edges[j].to_module == (uint32_t)m2 && r->edges[j].to == k->b &&
			    r->edges[j].taken == k->taken) {
				found = r->edges[j].count == k->count;
				break;
			}
		if (!found && bad++ < 5)
			fprintf(stderr, "edge 0x%llx -> 0x%llx x%llu taken %d missing or miscounted\n",
				(unsigned long long)k->a, (unsigned long long)k->b,
				(unsigned long long)k->count, k->taken);
	}
	CHECK_EQ(bad, 0);

	/* The CFG of classify (a jump table) from the code: per-instruction
	 * counts equal the ground truth's. */
	struct btr_funcgraph *fg = NULL;
	CHECK_EQ(btr_funcgraph_build(bl, "classify", &fg), 0);
	if (fg) {
		long m = btr_blocks_module_index(r, "prog_flow_loops");
		CHECK_EQ(fg->module, m);
		/* Ground-truth count of each instruction: blocks containing it. */
		size_t mismatch = 0;
		for (size_t i = 0; i < fg->n_insns; i++) {
			uint64_t want = 0;
			for (size_t k = 0; k < g->nb; k++) {
				const struct key *b = &g->blocks[k];
				if (find_mod(r, g, b->m1) == m && b->a <= fg->insns[i].addr &&
				    fg->insns[i].addr <= b->b)
					want += b->count;
			}
			if (fg->insns[i].count != want && mismatch++ < 5)
				fprintf(stderr, "classify insn 0x%llx: %llu, ground truth %llu\n",
					(unsigned long long)fg->insns[i].addr,
					(unsigned long long)fg->insns[i].count, (unsigned long long)want);
		}
		CHECK_EQ(mismatch, 0);
		/* From the code: the range check, the table jump, cases 0-7
		 * (case 8 is the default) and the default: 11 blocks, whether
		 * they ran or not.  The jump table's executed edges add up to
		 * the executions of its `jmp`. */
		CHECK_EQ(fg->n_blocks, 11);
		uint64_t ind = 0, jmp = 0;
		for (size_t i = 0; i < fg->n_edges; i++)
			if (fg->edges[i].kind == BTR_KIND_JMP_IND) {
				ind += fg->edges[i].count;
				const struct btr_fg_block *fb = &fg->blocks[fg->edges[i].from];
				jmp = fg->insns[fb->first + fb->n - 1].count;
			}
		CHECK(jmp > 0);
		CHECK_EQ(ind, jmp);
		*classify_entries = fg->entries;
		btr_funcgraph_free(fg);
	}
	CHECK_EQ(btr_funcgraph_build(bl, "no_such_function", &fg), -BTR_ERR_NOT_FOUND);
}

static void free_gt(struct gt *g)
{
	for (size_t i = 0; i < g->n_mods; i++)
		free((char *)g->mod_paths[i]);
	free(g->mod_paths);
	free(g->blocks);
	free(g->edges);
	free(g);
}

/* Ground-truth block of @g matching diff item @it (by module base name). */
static const struct key *gt_block(const struct gt *g, const struct btr_diff_item *it)
{
	for (size_t i = 0; i < g->nb; i++) {
		const struct key *k = &g->blocks[i];
		if (k->m1 == BTR_BLOCKS_NO_MODULE || k->a != it->start || k->b != it->end)
			continue;
		const char *p = g->mod_paths[k->m1], *sl = strrchr(p, '/');
		if (!strcmp(sl ? sl + 1 : p, it->module))
			return k;
	}
	return NULL;
}

/* The diff of the two runs against the two ground truths: every block
 * only in A, only in B or changed is so in the ground truth, with the
 * same counts, and the totals add up to the ground truth's blocks. */
static void check_diff(struct btr_analysis *ba, struct gt *ga, struct btr_analysis *bb, struct gt *gb)
{
	struct btr_diff *d = NULL;
	CHECK_EQ(btr_diff_compute(btr_blocks_get(ba), btr_blocks_get(bb), &d), 0);
	if (!d)
		return;
	size_t bad = 0;
	for (size_t i = 0; i < d->n_blocks_only_a; i++)
		bad += !gt_block(ga, &d->blocks_only_a[i]) || gt_block(gb, &d->blocks_only_a[i]);
	for (size_t i = 0; i < d->n_blocks_only_b; i++)
		bad += gt_block(ga, &d->blocks_only_b[i]) || !gt_block(gb, &d->blocks_only_b[i]);
	for (size_t i = 0; i < d->n_blocks_changed; i++) {
		const struct key *x = gt_block(ga, &d->blocks_changed[i]), *y = gt_block(gb, &d->blocks_changed[i]);
		bad += !x || !y || x->count != d->blocks_changed[i].count_a || y->count != d->blocks_changed[i].count_b ||
		       x->count == y->count;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(d->n_blocks_only_a + d->n_blocks_changed + d->n_blocks_same, ga->nb);
	CHECK_EQ(d->n_blocks_only_b + d->n_blocks_changed + d->n_blocks_same, gb->nb);
	/* Ground truth: blocks of A whose count differs in B (or absent). */
	size_t want_changed = 0;
	for (size_t i = 0; i < ga->nb; i++) {
		const struct key *k = &ga->blocks[i];
		if (k->m1 == BTR_BLOCKS_NO_MODULE)
			continue;
		struct btr_diff_item it = { .start = k->a, .end = k->b };
		const char *p = ga->mod_paths[k->m1], *sl = strrchr(p, '/');
		it.module = sl ? sl + 1 : p;
		const struct key *y = gt_block(gb, &it);
		want_changed += y && y->count != k->count;
	}
	printf("diff: %zu only in A, %zu only in B, %zu changed (ground truth %zu), %zu same\n",
	       d->n_blocks_only_a, d->n_blocks_only_b, d->n_blocks_changed, want_changed, d->n_blocks_same);
	CHECK_EQ(d->n_blocks_changed, want_changed);
	CHECK(want_changed > 0);
	btr_diff_free(d);

	/* Against a run that ran nothing, every block is only in one of
	 * them, with its ground-truth count on its side and 0 on the other. */
	const struct btr_blocks_result none = { 0 };
	struct btr_diff *da = NULL, *db = NULL;
	CHECK_EQ(btr_diff_compute(btr_blocks_get(ba), &none, &da), 0);
	CHECK_EQ(btr_diff_compute(&none, btr_blocks_get(bb), &db), 0);
	if (!da || !db) {
		btr_diff_free(da);
		btr_diff_free(db);
		return;
	}
	bad = 0;
	size_t known = 0;
	for (size_t i = 0; i < da->n_blocks_only_a; i++) {
		const struct btr_diff_item *it = &da->blocks_only_a[i];
		const struct key *x = gt_block(ga, it);
		known += x != NULL;
		bad += it->count_b != 0 || it->delta != -(int64_t)it->count_a || (x && x->count != it->count_a);
	}
	for (size_t i = 0; i < db->n_blocks_only_b; i++) {
		const struct btr_diff_item *it = &db->blocks_only_b[i];
		const struct key *y = gt_block(gb, it);
		known += y != NULL;
		bad += it->count_a != 0 || it->delta != (int64_t)it->count_b || (y && y->count != it->count_b);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(da->n_blocks_only_a, btr_blocks_get(ba)->n_blocks);
	CHECK_EQ(db->n_blocks_only_b, btr_blocks_get(bb)->n_blocks);
	CHECK(known > ga->nb / 2);
	CHECK(da->n_blocks_only_b + da->n_blocks_changed + db->n_blocks_only_a + db->n_blocks_changed == 0);
	btr_diff_free(da);
	btr_diff_free(db);
}

/* Modules are numbered in path order whatever the order they were met in:
 * three copies of one program named c, a and b (met in that order: a cycle
 * of three, which a renumbering by the inverse permutation gets wrong; two
 * modules, or a program, ld.so and libc, only ever swap two), mapped at
 * 0x100000, 0x200000 and 0x300000 in one process, with a block in each. */
static void three_modules(void)
{
	char dir[] = "/tmp/btr-blocks-XXXXXX", path[3][64], trace[96];
	static const char *const names[3] = { "c", "a", "b" };
	if (!mkdtemp(dir)) {
		CHECK(0);
		return;
	}
	size_t n = 0;
	uint8_t *elf = NULL;
	FILE *f = fopen(BTR_BINARY_DIR "/prog_flow_loops", "rb");
	CHECK(f != NULL);
	if (f) {
		elf = malloc(4 << 20);
		n = elf ? fread(elf, 1, 4 << 20, f) : 0;
		fclose(f);
	}
	CHECK(n > 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/%s", dir, names[i]);
		FILE *o = fopen(path[i], "wb");
		CHECK(o && fwrite(elf, 1, n, o) == n);
		if (o)
			fclose(o);
	}
	free(elf);
	snprintf(trace, sizeof(trace), "%s/t.btr", dir);
	struct btr_trace_writer_opts wo = { .sz = sizeof(wo), .no_sync = 1 };
	struct btr_trace_writer *w;
	CHECK_EQ(btr_trace_writer_new(trace, &wo, &w), 0);
	struct btr_record r = { .type = BTR_REC_MACHINE };
	snprintf(r.u.machine.backend, sizeof(r.u.machine.backend), "step");
	CHECK_EQ(btr_trace_write(w, &r), 0);
	for (int i = 0; i < 3; i++) {
		memset(&r, 0, sizeof(r));
		r.type = BTR_REC_MODULE_LOAD;
		/* its code segment: file offset 0x1000 at link address 0x1000 */
		r.u.module = (struct btr_rec_module){ .pid = 5, .prot = 5, .start = 0x100000u * (i + 1) + 0x1000,
						      .size = 0x1000, .pgoff = 0x1000, .path = path[i] };
		CHECK_EQ(btr_trace_write(w, &r), 0);
	}
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_THREAD_START;
	r.u.thread.pid = r.u.thread.tid = 5;
	r.u.thread.name = "";
	CHECK_EQ(btr_trace_write(w, &r), 0);
	/* c:0x1050 -> c:0x1100 .. c:0x1110 -> a:0x1180 .. a:0x1190 ->
	 * b:0x1200 .. b:0x1210 -> c:0x1280 (link addresses in the program's
	 * code): blocks in c, a and b */
	static const uint64_t hops[][2] = {
		{ 0x101050, 0x101100 }, { 0x101110, 0x201180 }, { 0x201190, 0x301200 }, { 0x301210, 0x101280 },
	};
	struct btr_branch b[4];
	memset(b, 0, sizeof(b));
	for (int i = 0; i < 4; i++) {
		b[i].from = hops[i][0];
		b[i].to = hops[i][1];
		b[i].tid = b[i].pid = 5;
		b[i].kind = BTR_KIND_JMP;
		b[i].flags = BTR_BF_TAKEN;
	}
	memset(&r, 0, sizeof(r));
	r.type = BTR_REC_BRANCHES;
	r.u.branches = (struct btr_rec_branches){ .tid = 5, .count = 4, .branches = b };
	CHECK_EQ(btr_trace_write(w, &r), 0);
	CHECK_EQ(btr_trace_writer_close(w), 0);

	struct btr_analysis *bl;
	CHECK_EQ(btr_blocks_new(&bl), 0);
	CHECK_EQ(btr_analysis_run(trace, NULL, &bl, 1, NULL), 0);
	const struct btr_blocks_result *res = btr_blocks_get(bl);
	CHECK(res != NULL);
	if (res) {
		CHECK_EQ(res->n_modules, 3);
		for (size_t i = 0; i + 1 < res->n_modules; i++)   /* path order */
			CHECK(strcmp(res->modules[i].path, res->modules[i + 1].path) < 0);
		static const struct { uint64_t start; const char *name; } want[] = {
			{ 0x1100, "c" }, { 0x1180, "a" }, { 0x1200, "b" },
		};
		int found = 0;
		for (size_t i = 0; i < res->n_blocks; i++) {
			const struct btr_block *k = &res->blocks[i];
			for (int j = 0; j < 3; j++) {
				if (k->start != want[j].start)
					continue;
				found++;
				CHECK(k->module < res->n_modules);
				if (k->module < res->n_modules)
					CHECK_STR(res->modules[k->module].name, want[j].name);
			}
		}
		CHECK_EQ(found, 3);
	}
	btr_analysis_free(bl);
	for (int i = 0; i < 3; i++)
		unlink(path[i]);
	unlink(trace);
	rmdir(dir);
}

int main(void)
{
	three_modules();
	if (access(BTR, X_OK) != 0)
		check_skip("btr binary not built");
	/* only a missing qemu-user skips; a recording that fails is a failure */
	if (system("command -v qemu-x86_64 >/dev/null 2>&1") != 0)
		check_skip("qemu-x86_64 absent (scripts/deps.sh installs qemu-user)");
	int rc = record("blocks_a.btr", "blocks_a.gt", "1");
	CHECK_EQ(rc, 0);
	if (rc)
		return check_done();
	uint64_t e1 = 0, e2 = 0;
	struct btr_analysis *ba = NULL, *bb = NULL;
	struct gt *ga = NULL, *gb = NULL;
	compare("blocks_a.btr", "blocks_a.gt", &e1, &ba, &ga);
	CHECK_EQ(record("blocks_b.btr", "blocks_b.gt", "2"), 0);
	compare("blocks_b.btr", "blocks_b.gt", &e2, &bb, &gb);
	if (ba && bb && ga && gb)
		check_diff(ba, ga, bb, gb);
	btr_analysis_free(ba);
	btr_analysis_free(bb);
	if (ga)
		free_gt(ga);
	if (gb)
		free_gt(gb);
	/* main's loop calls classify 30 times per round, 6*n rounds. */
	CHECK_EQ(e1, 180);
	CHECK_EQ(e2, 360);
	return check_done();
}
