/* test_image_func.c - functions without symbols (.eh_frame FDEs), C++
 * demangling, function lookup by name, modules and line tables
 * (btr_image_function & co., btr/image.h). */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "btr/error.h"
#include "btr/image.h"

#define PROG(n) BTR_BINARY_DIR "/prog_" n

static struct btr_image *open_img(const char *path)
{
	struct btr_image *img = NULL;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, path, 0, 0), 0);
	return img;
}

/* A stripped copy of prog_flow_loops: every function of the program's
 * own code is found again by its FDE, same start and end, named
 * "module+0xOFF". */
static void stripped(void)
{
	char cmd[512], copy[] = "/tmp/btr_stripXXXXXX";
	int fd = mkstemp(copy);
	CHECK(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "strip -o %s %s", copy, PROG("flow_loops"));
	if (system(cmd) != 0) {
		unlink(copy);
		check_skip("strip (binutils) is not available");
	}
	struct btr_image *full = open_img(PROG("flow_loops"));
	struct btr_image *bare = open_img(copy);
	static const char *const names[] = { "main", "fib", "classify", "sum_array", "asm_loops",
					     "op_add", "op_xor" };
	const char *base = strrchr(copy, '/') + 1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct btr_function f, g;
		CHECK_EQ(btr_image_function_by_name(full, names[i], &f), 0);
		CHECK_EQ(f.source, BTR_FUNC_SYMBOL);
		CHECK_STR(f.name, names[i]);
		/* The stripped file has no symbol for it ... */
		struct btr_symbol sym;
		CHECK_EQ(btr_image_symbol(bare, f.start + 1, &sym), -BTR_ERR_NOT_FOUND);
		/* ... but an FDE function with the same extent. */
		CHECK_EQ(btr_image_function(bare, f.start + 1, &g), 0);
		CHECK_EQ(g.source, BTR_FUNC_FDE);
		CHECK_EQ(g.start, f.start);
		CHECK_EQ(g.end, f.end);
		char want[256];
		snprintf(want, sizeof(want), "%s+0x%llx", base, (unsigned long long)f.start);
		CHECK_STR(g.name, want);
		CHECK_STR(g.raw_name, want);
		/* The name finds it back. */
		struct btr_function h;
		CHECK_EQ(btr_image_function_by_name(bare, want, &h), 0);
		CHECK_EQ(h.start, f.start);
		/* Symbolize keeps its module+offset form. */
		char buf[256];
		btr_image_symbolize(bare, f.start, buf, sizeof(buf));
		CHECK_STR(buf, want);
	}
	btr_image_free(full);
	btr_image_free(bare);
	unlink(copy);
}

static void demangle(void)
{
	struct btr_image *img = open_img(PROG("flow_except"));
	struct btr_function f;
	CHECK_EQ(btr_image_function_by_name(img, "thrower", &f), 0);
	CHECK_STR(f.name, "thrower(int)");
	CHECK_STR(f.raw_name, "_ZL7throweri");
	CHECK_EQ(f.source, BTR_FUNC_SYMBOL);
	struct btr_function g;
	CHECK_EQ(btr_image_function_by_name(img, "_ZL7throweri", &g), 0);
	CHECK_EQ(g.start, f.start);
	CHECK_EQ(btr_image_function_by_name(img, "thrower(int)", &g), 0);
	CHECK_EQ(g.start, f.start);
	char buf[256];
	btr_image_symbolize(img, f.start + 2, buf, sizeof(buf));
	CHECK_STR(buf, "thrower(int)+0x2");
	/* btr_image_symbol keeps the linkage name. */
	struct btr_symbol s;
	CHECK_EQ(btr_image_symbol(img, f.start, &s), 0);
	CHECK_STR(s.name, "_ZL7throweri");
	/* PLT stubs are functions too. */
	CHECK_EQ(btr_image_function_by_name(img, "__cxa_throw@plt", &g), 0);
	CHECK_EQ(g.source, BTR_FUNC_PLT);
	CHECK_EQ(btr_image_function_by_name(img, "no_such_function_anywhere", &g), -BTR_ERR_NOT_FOUND);
	btr_image_free(img);
}

struct linectx {
	int rows, main_rows;
	const char *want_file;
};

static int on_line(void *ctx, uint64_t addr, const char *file, int line)
{
	struct linectx *c = ctx;
	c->rows++;
	if (strstr(file, "flow_loops.c"))
		c->main_rows++;
	(void)addr;
	(void)line;
	return 0;
}

static int count_fn(void *ctx, const struct btr_function *fn)
{
	(*(int *)ctx)++;
	CHECK(fn->end > fn->start);
	return 0;
}

static void modules_lines(void)
{
	struct btr_image *img = open_img(PROG("flow_loops"));
	struct btr_function f;
	CHECK_EQ(btr_image_function_by_name(img, "main", &f), 0);
	struct btr_image_module mi;
	CHECK_EQ(btr_image_module_at(img, f.start, &mi), 0);
	CHECK_STR(mi.name, "prog_flow_loops");
	CHECK(mi.start <= f.start && f.end <= mi.end);
	CHECK(mi.is_elf);
	CHECK_EQ(btr_image_module_at(img, 0x7fff00000000ull, &mi), -BTR_ERR_NOT_FOUND);
	struct linectx c = { 0 };
	CHECK_EQ(btr_image_foreach_line(img, f.start, f.end, on_line, &c), 0);
	CHECK(c.rows > 5);
	CHECK_EQ(c.main_rows, c.rows);
	int nfn = 0;
	CHECK_EQ(btr_image_foreach_function(img, mi.start, mi.end, count_fn, &nfn), 0);
	CHECK(nfn >= 10);
	btr_image_free(img);
}

/* Rows of a PIE at a load bias: btr_image_foreach_line gives run-time
 * addresses, each row's link address (run-time - bias) has the file and
 * line addr2line (binutils, the oracle) gives for it (the last row of
 * an address, as addr2line reports). */
struct biasrows {
	uint64_t addr[512];
	int line[512];
	char file[512][64];
	int n;
};

static int on_biased_line(void *ctx, uint64_t addr, const char *file, int line)
{
	struct biasrows *r = ctx;
	if (r->n < 512) {
		const char *b = strrchr(file, '/');
		r->addr[r->n] = addr;
		r->line[r->n] = line;
		snprintf(r->file[r->n], sizeof(r->file[0]), "%s", b ? b + 1 : file);
		r->n++;
	}
	return 0;
}

static void lines_at_bias(void)
{
	const uint64_t bias = 0x555555554000ull;
	struct btr_image *img = NULL;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, PROG("flow_loops"), bias, 0), 0);
	struct btr_function f;
	CHECK_EQ(btr_image_function_by_name(img, "main", &f), 0);
	CHECK(f.start > bias);
	static struct biasrows r;
	r.n = 0;
	CHECK_EQ(btr_image_foreach_line(img, f.start, f.end, on_biased_line, &r), 0);
	CHECK(r.n > 5);
	char cmd[16384];
	int k = snprintf(cmd, sizeof(cmd), "addr2line -e %s", PROG("flow_loops"));
	for (int i = 0; i < r.n && k < (int)sizeof(cmd) - 32; i++) {
		CHECK(r.addr[i] >= f.start && r.addr[i] < f.end);
		k += snprintf(cmd + k, sizeof(cmd) - (size_t)k, " 0x%llx", (unsigned long long)(r.addr[i] - bias));
	}
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	char line[512];
	int i = 0, same = 0, want = 0;
	while (p && fgets(line, sizeof(line), p) && i < r.n) {
		/* "/path/flow_loops.c:12" or "...:12 (discriminator 1)" */
		char *colon = strrchr(line, ':');
		char *d = strstr(line, " (discriminator");
		if (d) {
			*d = 0;
			colon = strrchr(line, ':');
		}
		if (colon) {
			*colon = 0;
			const char *b = strrchr(line, '/');
			/* several rows at one address: addr2line gives the last */
			int last = i + 1 == r.n || r.addr[i + 1] != r.addr[i];
			want += last;
			same += last && atoi(colon + 1) == r.line[i] && !strcmp(b ? b + 1 : line, r.file[i]);
		}
		i++;
	}
	if (p)
		CHECK_EQ(pclose(p), 0);
	CHECK_EQ(i, r.n);
	CHECK(want > 5);
	CHECK_EQ(same, want);
	btr_image_free(img);
}

/* Debian's python3.11 is stripped (only .dynsym): before FDEs, 78% of its
 * executed instructions fell into one "[python3.11]" bucket.  Now every
 * byte of its code segment but a few (padding) belongs to a function. */
static void python(void)
{
	const char *py = "/usr/bin/python3.11";
	if (access(py, R_OK) != 0) {
		printf("python3.11 absent, part skipped\n");
		return;
	}
	struct btr_image *img = open_img(py);
	struct btr_function f;
	int rc = btr_image_function_by_name(img, "PyObject_Repr", &f);
	CHECK_EQ(rc, 0);
	CHECK_EQ(f.source, BTR_FUNC_SYMBOL);   /* from .dynsym */
	struct btr_image_module mi;
	if (rc != 0 || btr_image_module_at(img, f.start, &mi) != 0) {
		CHECK(0);
		btr_image_free(img);
		return;
	}
	uint64_t n = 0, have = 0, fde = 0;
	/* Sample the executable segment every 64 bytes. */
	for (uint64_t a = mi.start; a < mi.end; a += 64) {
		uint8_t b;
		if (btr_image_read(img, a, &b, 1) != 1)
			continue;
		n++;
		if (btr_image_function(img, a, &f) == 0) {
			have++;
			fde += f.source == BTR_FUNC_FDE;
		}
	}
	printf("python3.11: %llu samples, %llu in functions, %llu of them FDE-delimited\n",
	       (unsigned long long)n, (unsigned long long)have, (unsigned long long)fde);
	CHECK(n > 10000);
	CHECK(have * 1000 > n * 995);
	CHECK(fde * 100 > have * 70);
	btr_image_free(img);
}

int main(void)
{
	stripped();
	demangle();
	modules_lines();
	lines_at_bias();
	python();
	return check_done();
}
