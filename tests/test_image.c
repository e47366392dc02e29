/* test_image.c - lib/image/image.c against real binaries.
 *
 * Addresses, code bytes and load bases come from the running test program
 * itself (prog_symbols --addrs), line numbers from markers in its source,
 * build-ids and PLT stub names from binutils (readelf, objdump): never from
 * our own ELF reader, so a bug there cannot make the test agree with it.
 * Lines of debug files found by .gnu_debuglink are compared with libdw's
 * lines of the unsplit program.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btr/btr.h"
#include "check.h"

#define PROG BTR_BINARY_DIR "/prog_symbols"
#define PROG_NOPIE BTR_BINARY_DIR "/prog_symbols_nopie"
#define PROG_SRC BTR_SOURCE_DIR "/tests/progs/symbols.c"

/* ---- what the program says about itself ---- */

#define MAXF 16
#define MAXMAP 64
struct named {
	char name[64];
	uint64_t addr;
};
struct mapline {
	char path[512];
	uint64_t start, pgoff;
	char perms[8];
};
struct facts {
	uint64_t base;
	char exe[512];
	struct named funcs[MAXF];
	int nfuncs;
	struct named ras[MAXF];
	int nras;
	uint64_t ifunc_resolver, libc_printf, data_marker, bss, bss_size;
	struct mapline maps[MAXMAP];
	int nmaps;
	uint8_t code_beta[32], code_main[64];
};

static int unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return 0;
}

static int run_prog(const char *prog, struct facts *f)
{
	char cmd[1024], line[2048];
	memset(f, 0, sizeof(*f));
	snprintf(cmd, sizeof(cmd), "%s --addrs", prog);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char a[512], b[64], c[256];
		unsigned long long x, y;
		if (sscanf(line, "base %llx", &x) == 1) {
			f->base = x;
		} else if (sscanf(line, "map %511s %llx %llx %7s", a, &x, &y, b) == 4 && f->nmaps < MAXMAP) {
			struct mapline *m = &f->maps[f->nmaps++];
			snprintf(m->path, sizeof(m->path), "%s", a);
			m->start = x;
			m->pgoff = y;
			memcpy(m->perms, b, sizeof(m->perms));
		} else if (sscanf(line, "func %63s %llx", b, &x) == 2 && f->nfuncs < MAXF) {
			memcpy(f->funcs[f->nfuncs].name, b, 64);
			f->funcs[f->nfuncs++].addr = x;
		} else if (sscanf(line, "ra %63s %llx", b, &x) == 2 && f->nras < MAXF) {
			memcpy(f->ras[f->nras].name, b, 64);
			f->ras[f->nras++].addr = x;
		} else if (sscanf(line, "ifunc %63s %llx", b, &x) == 2) {
			f->ifunc_resolver = x;
		} else if (sscanf(line, "exe %511s", a) == 1) {
			snprintf(f->exe, sizeof(f->exe), "%s", a);
		} else if (sscanf(line, "libc printf %llx", &x) == 1) {
			f->libc_printf = x;
		} else if (sscanf(line, "data data_marker %llx", &x) == 1) {
			f->data_marker = x;
		} else if (sscanf(line, "bss bss_buf %llx %llu", &x, &y) == 2) {
			f->bss = x;
			f->bss_size = y;
		} else if (sscanf(line, "code sym_beta %255s", c) == 1) {
			unhex(c, f->code_beta, sizeof(f->code_beta));
		} else if (sscanf(line, "code main %255s", c) == 1) {
			unhex(c, f->code_main, sizeof(f->code_main));
		}
	}
	return pclose(p) == 0 && f->nfuncs >= 6 && f->nras >= 2 ? 0 : -1;
}

static uint64_t func(const struct facts *f, const char *name)
{
	for (int i = 0; i < f->nfuncs; i++)
		if (!strcmp(f->funcs[i].name, name))
			return f->funcs[i].addr;
	fprintf(stderr, "no address for %s\n", name);
	exit(1);
}

static uint64_t ra(const struct facts *f, const char *name)
{
	for (int i = 0; i < f->nras; i++)
		if (!strcmp(f->ras[i].name, name))
			return f->ras[i].addr;
	fprintf(stderr, "no return address for %s\n", name);
	exit(1);
}

/* Line number of the "LINE:tag" marker in the program's source. */
static int marker_line(const char *tag)
{
	char want[128], line[1024];
	snprintf(want, sizeof(want), "LINE:%s ", tag);
	FILE *f = fopen(PROG_SRC, "r");
	if (!f)
		return -1;
	for (int n = 1; fgets(line, sizeof(line), f); n++) {
		if (strstr(line, want)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	return -1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* ---- symbols, lines, code of one running program ---- */

static void check_program(const char *prog, const struct facts *f, uint64_t base)
{
	struct btr_image *img;
	struct btr_symbol sym;
	char buf[256];
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, prog, base, 0), 0);
	CHECK(btr_image_generation(img) > 0);

	static const char *const names[] = { "sym_alpha", "sym_beta", "sym_local", "sym_loop",
					     "sym_nosize", "main" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		uint64_t a = func(f, names[i]);
		memset(&sym, 0, sizeof(sym));
		CHECK_EQ(btr_image_symbol(img, a, &sym), 0);
		CHECK_STR(sym.name, names[i]);
		CHECK_EQ(sym.addr, a);
		CHECK(sym.size > 0);
		CHECK_STR(sym.module, prog);
		btr_image_symbolize(img, a, buf, sizeof(buf));
		CHECK_STR(buf, names[i]);
		/* One byte in: every function here is longer than a byte. */
		btr_image_symbolize(img, a + 1, buf, sizeof(buf));
		char want[96];
		snprintf(want, sizeof(want), "%s+0x1", names[i]);
		CHECK_STR(buf, want);
	}
	/* The assembly function has st_size 0: its inner bytes belong to it
	 * as the nearest preceding symbol. */
	uint64_t ns = func(f, "sym_nosize");
	btr_image_symbolize(img, ns + 4, buf, sizeof(buf));
	CHECK_STR(buf, "sym_nosize+0x4");
	/* An IFUNC's symbol sits at its resolver: global sym_ifunc wins over
	 * the resolver's local name. */
	CHECK_EQ(btr_image_symbol(img, f->ifunc_resolver, &sym), 0);
	CHECK_STR(sym.name, "sym_ifunc");

	/* Lines: a return address minus one is on the marked call line. */
	const char *file = NULL;
	int line = 0;
	CHECK_EQ(btr_image_line(img, ra(f, "sym_beta") - 1, &file, &line), 0);
	CHECK(file && ends_with(file, "tests/progs/symbols.c"));
	CHECK_EQ(line, marker_line("sym_beta_call"));
	CHECK_EQ(btr_image_line(img, ra(f, "sym_local") - 1, &file, &line), 0);
	CHECK_EQ(line, marker_line("sym_local_call"));
	/* The entry of sym_alpha is on its declaration or its body line. */
	CHECK_EQ(btr_image_line(img, func(f, "sym_alpha"), &file, &line), 0);
	CHECK(line >= marker_line("alpha_decl") && line <= marker_line("alpha_body"));
	/* Symbolized return address: inside sym_beta, past its entry. */
	btr_image_symbolize(img, ra(f, "sym_beta"), buf, sizeof(buf));
	CHECK(!strncmp(buf, "sym_beta+0x", 11));

	/* Code bytes equal what the running process had in memory. */
	uint8_t code[64];
	CHECK_EQ(btr_image_read(img, func(f, "sym_beta"), code, 32), 32);
	CHECK(!memcmp(code, f->code_beta, 32));
	CHECK_EQ(btr_image_read(img, func(f, "main"), code, 64), 64);
	CHECK(!memcmp(code, f->code_main, 64));
	const uint8_t *p;
	size_t avail;
	CHECK_EQ(btr_image_map(img, func(f, "main"), &p, &avail), 0);
	CHECK(avail >= 64 && !memcmp(p, f->code_main, 64));

	/* Only the executable segment is in: the ELF header page (r--),
	 * .data and .bss are not. */
	CHECK_EQ(btr_image_read(img, f->data_marker, code, 4), -BTR_ERR_NOMAP);
	CHECK_EQ(btr_image_map(img, f->bss, &p, &avail), -BTR_ERR_NOMAP);
	CHECK_EQ(btr_image_map(img, f->base + (base ? 0 : 0x400000), &p, &avail), -BTR_ERR_NOMAP);
	CHECK_EQ(btr_image_map(img, 0x10, &p, &avail), -BTR_ERR_NOMAP);
	CHECK_EQ(btr_image_map(img, UINT64_MAX, &p, &avail), -BTR_ERR_NOMAP);
	/* A data address still names its module (module+offset). */
	btr_image_symbolize(img, f->data_marker, buf, sizeof(buf));
	CHECK(!strncmp(buf, "prog_symbols", 12) && strstr(buf, "+0x"));
	btr_image_symbolize(img, 0x10, buf, sizeof(buf));
	CHECK_STR(buf, "0x10");
	CHECK_EQ(btr_image_symbol(img, 0x10, &sym), -BTR_ERR_NOT_FOUND);
	CHECK_EQ(btr_image_line(img, 0x10, &file, &line), -BTR_ERR_NOT_FOUND);
	btr_image_free(img);

	/* all_segments: data as it is in the file, .bss as zeros. */
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, prog, base, 1), 0);
	CHECK_EQ(btr_image_read(img, f->data_marker, buf, 16), 16);
	CHECK(!memcmp(buf, "btr-data-marker", 16));
	CHECK_EQ(btr_image_map(img, f->bss, &p, &avail), 0);
	CHECK(avail >= f->bss_size);
	int zeros = 1;
	for (uint64_t i = 0; i < f->bss_size; i++)
		zeros &= p[i] == 0;
	CHECK(zeros);
	/* The first mapping is the ELF header. */
	CHECK_EQ(btr_image_read(img, f->maps[0].start, buf, 4), 4);
	CHECK(!memcmp(buf, "\177ELF", 4));
	btr_image_free(img);
}

static void test_pie(void)
{
	struct facts f;
	CHECK_EQ(run_prog(PROG, &f), 0);
	CHECK(f.base != 0);  /* Debian gcc links PIE by default */
	check_program(PROG, &f, f.base);

	/* The load bias from each of the program's mappings. */
	int nexe = 0;
	for (int i = 0; i < f.nmaps; i++) {
		if (strcmp(f.maps[i].path, f.exe))
			continue;
		int prot = (f.maps[i].perms[0] == 'r' ? PROT_READ : 0) |
			   (f.maps[i].perms[1] == 'w' ? PROT_WRITE : 0) |
			   (f.maps[i].perms[2] == 'x' ? PROT_EXEC : 0);
		uint64_t bias = 1;
		/* The RELRO mapping (r--p after mprotect, rw- in the ELF) can
		 * share its file page with .rodata: only code and the
		 * first and writable mappings are unambiguous. */
		if (!(prot & (PROT_EXEC | PROT_WRITE)) && f.maps[i].pgoff != 0)
			continue;
		CHECK_EQ(btr_elf_load_bias_prot(PROG, f.maps[i].start, f.maps[i].pgoff, prot, &bias), 0);
		CHECK_EQ(bias, f.base);
		nexe++;
	}
	CHECK(nexe >= 3);
	/* The RELRO mapping: its page starts in the file where .rodata's
	 * segment is too; perf records it with its mmap-time rw- protection,
	 * which selects the data segment. */
	for (int i = 0; i < f.nmaps; i++) {
		if (strcmp(f.maps[i].path, f.exe) || strcmp(f.maps[i].perms, "r--p") ||
		    f.maps[i].start - f.maps[i].pgoff == f.base)
			continue;
		uint64_t bias = 1;
		CHECK_EQ(btr_elf_load_bias_prot(PROG, f.maps[i].start, f.maps[i].pgoff,
						PROT_READ | PROT_WRITE, &bias), 0);
		CHECK_EQ(bias, f.base);
		printf("RELRO mapping at 0x%" PRIx64 " placed\n", f.maps[i].start);
	}

	/* libc at its bias, computed from its r-xp mapping: printf by name. */
	for (int i = 0; i < f.nmaps; i++) {
		if (!strstr(f.maps[i].path, "/libc.so") || strcmp(f.maps[i].perms, "r-xp"))
			continue;
		uint64_t bias;
		CHECK_EQ(btr_elf_load_bias(f.maps[i].path, f.maps[i].start, f.maps[i].pgoff, &bias), 0);
		struct btr_image *img;
		struct btr_symbol sym;
		CHECK_EQ(btr_image_new(&img), 0);
		CHECK_EQ(btr_image_add_elf(img, f.maps[i].path, bias, 0), 0);
		CHECK_EQ(btr_image_add_elf(img, PROG, f.base, 0), 0);
		CHECK_EQ(btr_image_symbol(img, f.libc_printf, &sym), 0);
		/* "printf", not an alias such as _IO_printf */
		CHECK_STR(sym.name, "printf");
		CHECK_EQ(sym.addr, f.libc_printf);
		CHECK_STR(sym.module, f.maps[i].path);
		/* Both modules answer in one image. */
		CHECK_EQ(btr_image_symbol(img, func(&f, "sym_loop"), &sym), 0);
		CHECK_STR(sym.name, "sym_loop");
		btr_image_free(img);
		break;
	}
}

static void test_nopie(void)
{
	struct facts f;
	CHECK_EQ(run_prog(PROG_NOPIE, &f), 0);
	CHECK_EQ(f.base, 0);
	CHECK(func(&f, "main") < 0x1000000);  /* linked at its vaddr, ~0x401000 */
	/* ET_EXEC: the base is ignored, whatever it is. */
	check_program(PROG_NOPIE, &f, 0);
	struct btr_image *img;
	struct btr_symbol sym;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, PROG_NOPIE, 0x7f0000000000ull, 0), 0);
	CHECK_EQ(btr_image_symbol(img, func(&f, "sym_beta"), &sym), 0);
	CHECK_STR(sym.name, "sym_beta");
	btr_image_free(img);
	for (int i = 0; i < f.nmaps; i++) {
		if (strcmp(f.maps[i].path, f.exe))
			continue;
		uint64_t bias = 1;
		CHECK_EQ(btr_elf_load_bias_prot(PROG_NOPIE, f.maps[i].start, f.maps[i].pgoff, -1, &bias), 0);
		CHECK_EQ(bias, 0);
	}
}

/* ---- PLT stubs against objdump's names ---- */

static void test_plt(void)
{
	struct facts f;
	CHECK_EQ(run_prog(PROG, &f), 0);
	FILE *p = popen("objdump -d " PROG " 2>/dev/null", "r");
	if (!p) {
		printf("objdump not runnable, PLT check skipped\n");
		return;
	}
	struct btr_image *img;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, PROG, f.base, 0), 0);
	char line[1024], name[512], buf[600];
	unsigned long long off;
	int n = 0, absn = 0;
	while (fgets(line, sizeof(line), p)) {
		/* "<name@plt>:" starts a stub; "<x@plt-0x10>:" is PLT0. */
		if (sscanf(line, "%llx <%511[^>]>:", &off, name) != 2 || !ends_with(name, "@plt"))
			continue;
		btr_image_symbolize(img, f.base + off, buf, sizeof(buf));
		if (!strncmp(name, "*ABS*", 5)) {
			/* objdump names IRELATIVE stubs by the resolver's
			 * address; we name them after the IFUNC. */
			CHECK_STR(buf, "sym_ifunc@plt");
			absn++;
			continue;
		}
		CHECK_STR(buf, name);
		n++;
	}
	pclose(p);
	CHECK(n >= 5);  /* printf, fopen, fgets, ... */
	CHECK_EQ(absn, 1);
	printf("%d PLT stubs named like objdump\n", n + absn);
	btr_image_free(img);
}

/* ---- raw files, bytes, overlap, removal ---- */

static int read_file_bytes(const char *path, long off, void *buf, size_t n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	int ok = fseek(f, off, SEEK_SET) == 0 && fread(buf, 1, n, f) == n;
	fclose(f);
	return ok ? 0 : -1;
}

static void test_raw(void)
{
	struct btr_image *img;
	uint8_t a[256], b[256];
	const uint8_t *p;
	size_t avail;
	struct stat st;
	CHECK_EQ(stat(PROG, &st), 0);
	CHECK_EQ(btr_image_new(&img), 0);
	unsigned g0 = btr_image_generation(img);
	CHECK_EQ(btr_image_add_file(img, PROG, 0x1000, 0x100, 0x200000), 0);
	CHECK(btr_image_generation(img) != g0);
	CHECK_EQ(read_file_bytes(PROG, 0x1000, a, 0x100), 0);
	CHECK_EQ(btr_image_read(img, 0x200000, b, sizeof(b)), 0x100);  /* stops at the end */
	CHECK(!memcmp(a, b, 0x100));
	CHECK_EQ(btr_image_read(img, 0x200000 + 0x100, b, 1), -BTR_ERR_NOMAP);
	CHECK_EQ(btr_image_read(img, 0x200000 - 1, b, 1), -BTR_ERR_NOMAP);
	CHECK_EQ(btr_image_map(img, 0x2000f0, &p, &avail), 0);
	CHECK_EQ(avail, 0x10);
	CHECK_EQ(p[0], a[0xf0]);
	/* A raw file names addresses file+offset-in-file. */
	char buf[128];
	btr_image_symbolize(img, 0x200010, buf, sizeof(buf));
	CHECK_STR(buf, "prog_symbols+0x1010");
	const char *file;
	int line;
	CHECK_EQ(btr_image_line(img, 0x200010, &file, &line), -BTR_ERR_NO_DEBUGINFO);

	/* size 0: to the end of the file, at an unaligned offset. */
	CHECK_EQ(btr_image_add_file(img, PROG, 3, 0, 0x800003), 0);
	CHECK_EQ(read_file_bytes(PROG, st.st_size - 16, a, 16), 0);
	CHECK_EQ(btr_image_read(img, 0x800003 + (uint64_t)st.st_size - 3 - 16, b, 64), 16);
	CHECK(!memcmp(a, b, 16));
	CHECK_EQ(btr_image_read(img, 0x800003, b, 3), 3);
	CHECK(!memcmp(b, "F\002\001", 3));  /* "\177ELF", ELFCLASS64, ELFDATA2LSB from offset 3 */

	CHECK_EQ(btr_image_add_file(img, PROG, (uint64_t)st.st_size, 0, 0x900000), -BTR_ERR_INVAL);
	CHECK_EQ(btr_image_add_file(img, PROG, 0, (uint64_t)st.st_size + 1, 0x900000), -BTR_ERR_INVAL);
	CHECK_EQ(btr_image_add_file(img, BTR_BINARY_DIR "/no-such-file", 0, 0, 0x900000),
		 -BTR_ERR_NOENT);
	CHECK_EQ(btr_image_add_file(img, BTR_BINARY_DIR, 0, 0, 0x900000), -BTR_ERR_INVAL);
	CHECK_EQ(btr_image_map(img, 0x900000, &p, &avail), -BTR_ERR_NOMAP);
	btr_image_free(img);
}

static void fill(uint8_t *b, int c, size_t n)
{
	memset(b, c, n);
}

/* The byte at @addr, or -1 if unmapped. */
static int byte_at(const struct btr_image *img, uint64_t addr)
{
	uint8_t c;
	return btr_image_read(img, addr, &c, 1) == 1 ? c : -1;
}

static size_t avail_at(const struct btr_image *img, uint64_t addr)
{
	const uint8_t *p;
	size_t avail = 0;
	return btr_image_map(img, addr, &p, &avail) == 0 ? avail : 0;
}

static void test_overlap(void)
{
	struct btr_image *img;
	uint8_t buf[0x400];
	CHECK_EQ(btr_image_new(&img), 0);
	fill(buf, 0xaa, 0x100);
	CHECK_EQ(btr_image_add_bytes(img, buf, 0x100, 0x1000), 0);
	fill(buf, 0x11, 0x100);  /* the image owns a copy */
	CHECK_EQ(byte_at(img, 0x1000), 0xaa);
	CHECK_EQ(byte_at(img, 0x10ff), 0xaa);
	CHECK_EQ(byte_at(img, 0x1100), -1);

	/* Newer inside older: older is split in two. */
	fill(buf, 0xbb, 0x40);
	CHECK_EQ(btr_image_add_bytes(img, buf, 0x40, 0x1040), 0);
	CHECK_EQ(byte_at(img, 0x103f), 0xaa);
	CHECK_EQ(avail_at(img, 0x1000), 0x40);
	CHECK_EQ(byte_at(img, 0x1040), 0xbb);
	CHECK_EQ(avail_at(img, 0x1040), 0x40);
	CHECK_EQ(byte_at(img, 0x1080), 0xaa);
	CHECK_EQ(avail_at(img, 0x1080), 0x80);

	/* Newer over the left end of two sections. */
	fill(buf, 0xcc, 0x60);
	CHECK_EQ(btr_image_add_bytes(img, buf, 0x60, 0xff0), 0);
	CHECK_EQ(byte_at(img, 0xff0), 0xcc);
	CHECK_EQ(byte_at(img, 0x104f), 0xcc);
	CHECK_EQ(avail_at(img, 0xff0), 0x60);
	CHECK_EQ(byte_at(img, 0x1050), 0xbb);
	CHECK_EQ(avail_at(img, 0x1050), 0x30);

	/* Newer covering several completely plus the right end of the last. */
	fill(buf, 0xdd, 0x200);
	CHECK_EQ(btr_image_add_bytes(img, buf, 0x108, 0xf00), 0);
	CHECK_EQ(byte_at(img, 0x1007), 0xdd);
	CHECK_EQ(avail_at(img, 0xf00), 0x108);
	CHECK_EQ(byte_at(img, 0x1080), 0xaa);  /* the right part of the first survives */
	CHECK_EQ(byte_at(img, 0x1008), 0xcc);  /* ... the tail of the 0xcc part too */
	CHECK_EQ(byte_at(img, 0x1100), -1);

	/* Removal: a hole in the middle, then everything. */
	CHECK_EQ(btr_image_remove(img, 0x1010, 0x80), 0x80);
	CHECK_EQ(byte_at(img, 0x100f), 0xcc);
	CHECK_EQ(byte_at(img, 0x1010), -1);
	CHECK_EQ(byte_at(img, 0x108f), -1);
	CHECK_EQ(byte_at(img, 0x1090), 0xaa);
	CHECK_EQ(btr_image_remove(img, 0x2000, 0x10), 0);
	CHECK_EQ(btr_image_remove(img, 0, 0x10000), 0x108 + 0x8 + 0x70);
	CHECK_EQ(byte_at(img, 0x1090), -1);
	CHECK_EQ(btr_image_remove(img, 0, 0), -BTR_ERR_INVAL);
	CHECK_EQ(btr_image_add_bytes(img, buf, 0, 0x10), -BTR_ERR_INVAL);
	CHECK_EQ(btr_image_add_bytes(img, buf, 0x10, UINT64_MAX - 4), -BTR_ERR_INVAL);

	/* Many sections: the binary search and the last-hit cache agree. */
	for (int i = 0; i < 1000; i++) {
		uint8_t v = (uint8_t)i;
		CHECK_EQ(btr_image_add_bytes(img, &v, 1, 0x100000 + 2 * (uint64_t)(999 - i)), 0);
	}
	int bad = 0;
	for (int i = 999; i >= 0; i -= 7)
		bad += byte_at(img, 0x100000 + 2 * (uint64_t)(999 - i)) != (uint8_t)i ||
		       byte_at(img, 0x100001 + 2 * (uint64_t)(999 - i)) != -1;
	CHECK_EQ(bad, 0);
	btr_image_free(img);

	/* Bytes over an ELF's code hide the ELF there and only there. */
	struct facts f;
	CHECK_EQ(run_prog(PROG, &f), 0);
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, PROG, f.base, 0), 0);
	uint64_t beta = func(&f, "sym_beta");
	fill(buf, 0xcc, 4);
	CHECK_EQ(btr_image_add_bytes(img, buf, 4, beta), 0);
	CHECK_EQ(byte_at(img, beta), 0xcc);
	CHECK_EQ(byte_at(img, beta + 4), f.code_beta[4]);
	/* the byte before the overlay is the ELF's: what an image of the ELF
	 * alone reads there (whose bytes at beta are the process's, above) */
	struct btr_image *plain;
	CHECK_EQ(btr_image_new(&plain), 0);
	CHECK_EQ(btr_image_add_elf(plain, PROG, f.base, 0), 0);
	CHECK_EQ(byte_at(plain, beta), f.code_beta[0]);
	CHECK(byte_at(plain, beta - 1) >= 0);
	CHECK_EQ(byte_at(img, beta - 1), byte_at(plain, beta - 1));
	CHECK_EQ(byte_at(img, beta - 2), byte_at(plain, beta - 2));
	btr_image_free(plain);
	struct btr_symbol sym;
	CHECK_EQ(btr_image_symbol(img, beta, &sym), -BTR_ERR_NOT_FOUND);
	CHECK_EQ(btr_image_symbol(img, beta + 4, &sym), 0);
	CHECK_STR(sym.name, "sym_beta");
	/* Re-adding the ELF makes it whole again. */
	CHECK_EQ(btr_image_add_elf(img, PROG, f.base, 0), 0);
	CHECK_EQ(byte_at(img, beta), f.code_beta[0]);
	/* Unloading the module: code and symbols go away. */
	CHECK(btr_image_remove(img, f.base, 0x100000) > 0);
	CHECK_EQ(byte_at(img, beta), -1);
	CHECK_EQ(btr_image_symbol(img, beta, &sym), -BTR_ERR_NOT_FOUND);
	btr_image_free(img);
}

/* ---- errors ---- */

static void test_errors(void)
{
	struct btr_image *img;
	char tmp[] = "/tmp/btr-image-XXXXXX";
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, BTR_BINARY_DIR "/no-such-file", 0, 0), -BTR_ERR_NOENT);
	CHECK_EQ(btr_image_add_elf(img, PROG_SRC, 0, 0), -BTR_ERR_BAD_ELF);
	CHECK_EQ(btr_image_add_elf(img, BTR_BINARY_DIR, 0, 0), -BTR_ERR_BAD_ELF);
	/* A truncated ELF: the header is fine, the segments are not there. */
	int fd = mkstemp(tmp);
	CHECK(fd >= 0);
	uint8_t head[0x400];
	CHECK_EQ(read_file_bytes(PROG, 0, head, sizeof(head)), 0);
	CHECK_EQ(write(fd, head, sizeof(head)), (long)sizeof(head));
	close(fd);
	CHECK_EQ(btr_image_add_elf(img, tmp, 0x10000, 0), -BTR_ERR_BAD_ELF);
	unlink(tmp);
	CHECK_EQ(btr_image_generation(img), 0);  /* failures change nothing */
	uint8_t id[64];
	CHECK_EQ(btr_elf_build_id(BTR_BINARY_DIR "/no-such-file", id, sizeof(id)), -BTR_ERR_NOENT);
	CHECK_EQ(btr_elf_build_id(PROG_SRC, id, sizeof(id)), -BTR_ERR_BAD_ELF);
	uint64_t bias;
	CHECK_EQ(btr_elf_load_bias(PROG, 0x1000, 0x7fffffff000ull, &bias), -BTR_ERR_NOT_FOUND);
	btr_image_free(img);
	btr_image_free(NULL);
}

/* ---- no DWARF: a copy with the debug sections stripped ---- */

static void test_no_debuginfo(void)
{
	char tmp[] = "/tmp/btr-image-XXXXXX", cmd[256];
	int fd = mkstemp(tmp);
	CHECK(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "objcopy --strip-debug %s %s 2>/dev/null", PROG, tmp);
	if (system(cmd) != 0) {
		unlink(tmp);
		printf("objcopy not runnable, no-debuginfo check skipped\n");
		return;
	}
	struct facts f;
	CHECK_EQ(run_prog(PROG, &f), 0);
	struct btr_image *img;
	struct btr_symbol sym;
	const char *file;
	int line;
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, tmp, f.base, 0), 0);
	CHECK_EQ(btr_image_symbol(img, func(&f, "sym_alpha"), &sym), 0);
	CHECK_STR(sym.name, "sym_alpha");
	CHECK_EQ(btr_image_line(img, func(&f, "sym_alpha"), &file, &line), -BTR_ERR_NO_DEBUGINFO);
	CHECK_EQ(btr_image_line(img, func(&f, "sym_beta"), &file, &line), -BTR_ERR_NO_DEBUGINFO);
	btr_image_free(img);
	unlink(tmp);
}

/* Build-id of @path as readelf -n prints it, "" if none. */
static void readelf_build_id(const char *path, char *hex, size_t size)
{
	char line[1024], cmd[1024], fmt[32];
	hex[0] = 0;
	snprintf(cmd, sizeof(cmd), "readelf -n %s 2>/dev/null", path);
	snprintf(fmt, sizeof(fmt), " Build ID: %%%zus", size - 1);
	FILE *p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p))
		sscanf(line, fmt, hex);
	pclose(p);
}

/* ---- a stripped copy with its symbols and DWARF in a separate file ---- */

static void test_debug_file(void)
{
	char hex[256], tmpd[] = "/tmp/btr-image-XXXXXX", cmd[4096], dir[512], dbg[1024], stripped[600];
	readelf_build_id(PROG, hex, sizeof(hex));
	if (!hex[0] || !mkdtemp(tmpd)) {
		printf("no build-id or temp dir, debug-file check skipped\n");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", tmpd, hex);
	snprintf(dbg, sizeof(dbg), "%s/%s.debug", dir, hex + 2);
	snprintf(stripped, sizeof(stripped), "%s/stripped", tmpd);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s && objcopy --only-keep-debug %s %s && strip --strip-all -o %s %s",
		 dir, PROG, dbg, stripped, PROG);
	if (system(cmd) != 0) {
		printf("objcopy/strip not runnable, debug-file check skipped\n");
		goto out;
	}
	struct facts f;
	CHECK_EQ(run_prog(PROG, &f), 0);
	struct btr_image *img;
	struct btr_symbol sym;
	const char *file;
	int line;
	/* Without the directory: no .symtab, no DWARF. */
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_add_elf(img, stripped, f.base, 0), 0);
	CHECK_EQ(btr_image_symbol(img, func(&f, "sym_local"), &sym), -BTR_ERR_NOT_FOUND);
	CHECK_EQ(btr_image_line(img, ra(&f, "sym_local") - 1, &file, &line), -BTR_ERR_NO_DEBUGINFO);
	btr_image_free(img);
	/* With it: both, found by build-id. */
	const char *dirs[] = { "/nonexistent-dir", tmpd };
	CHECK_EQ(btr_image_new(&img), 0);
	CHECK_EQ(btr_image_set_debug_dirs(img, dirs, 2), 0);
	CHECK_EQ(btr_image_add_elf(img, stripped, f.base, 0), 0);
	CHECK_EQ(btr_image_symbol(img, func(&f, "sym_local"), &sym), 0);
	CHECK_STR(sym.name, "sym_local");
	CHECK_EQ(sym.addr, func(&f, "sym_local"));
	CHECK_EQ(btr_image_symbol(img, func(&f, "sym_nosize") + 5, &sym), 0);
	CHECK_STR(sym.name, "sym_nosize");
	CHECK_EQ(btr_image_line(img, ra(&f, "sym_local") - 1, &file, &line), 0);
	CHECK_EQ(line, marker_line("sym_local_call"));
	btr_image_free(img);
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpd);
	if (system(cmd) != 0)
		printf("cannot remove %s\n", tmpd);
}

/* ---- debug files found by .gnu_debuglink ---- */

static char *dw_debuginfo_path;  /* NULL: libdwfl's default, as btr's */
static const Dwfl_Callbacks dw_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &dw_debuginfo_path,
};

/* libdw on @path at its link addresses; *@dw: whether it found DWARF. */
static Dwfl *dw_open(const char *path, Dwfl_Module **mod, int *dw)
{
	Dwfl *d = dwfl_begin(&dw_callbacks);
	CHECK(d != NULL);
	dwfl_report_begin(d);
	*mod = dwfl_report_elf(d, "m", path, -1, 0, true);
	dwfl_report_end(d, NULL, NULL);
	CHECK(*mod != NULL);
	Dwarf_Addr b;
	*dw = *mod && dwfl_module_getdwarf(*mod, &b) != NULL;
	return d;
}

static int maps_have(const char *what)
{
	char line[1024];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	CHECK(f != NULL);
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* btr_image_line of @split (at base 0, with debug dirs @dirs) against
 * libdw's answer on @full (the unsplit program) at every row address and
 * the byte after it. */
static void same_lines(const char *split, const char *const *dirs, size_t ndirs, const char *full)
{
	struct btr_image *img;
	Dwfl_Module *mod;
	int dw, n = 0, bad = 0;
	Dwfl *d = dw_open(full, &mod, &dw);
	CHECK(dw);
	CHECK_EQ(btr_image_new(&img), 0);
	if (ndirs)
		CHECK_EQ(btr_image_set_debug_dirs(img, dirs, ndirs), 0);
	CHECK_EQ(btr_image_add_elf(img, split, 0, 0), 0);
	Dwarf_Die *cu = NULL;
	Dwarf_Addr cbias;
	while (dw && (cu = dwfl_module_nextcu(mod, cu, &cbias)) != NULL) {
		Dwarf_Lines *lines;
		size_t nl;
		if (dwarf_getsrclines(cu, &lines, &nl) != 0)
			continue;
		for (size_t i = 0; i < nl; i++) {
			Dwarf_Addr row;
			struct btr_image_module mi;
			if (dwarf_lineaddr(dwarf_onesrcline(lines, i), &row) != 0 ||
			    btr_image_module_at(img, row + cbias, &mi) != 0)
				continue;
			for (uint64_t a = row + cbias; a <= row + cbias + 1; a++) {
				int wl = 0, gl = 0;
				const char *gf = NULL;
				Dwfl_Line *l = dwfl_module_getsrc(mod, a);
				const char *wf = l ? dwfl_lineinfo(l, NULL, &wl, NULL, NULL, NULL) : NULL;
				int rc = btr_image_line(img, a, &gf, &gl);
				int ok = wf && wl > 0 ? rc == 0 && gl == wl && !strcmp(gf, wf)
						      : rc == -BTR_ERR_NOT_FOUND;
				if (!ok && bad++ < 5)
					printf("%s 0x%" PRIx64 ": libdw %s:%d, btr %d %s:%d\n", split, a,
					       wf ? wf : "-", wl, rc, gf ? gf : "-", gl);
				n += wf != NULL;
			}
		}
	}
	CHECK(n > 20);
	CHECK_EQ(bad, 0);
	btr_image_free(img);
	dwfl_end(d);
}

/* What btr_image_line says at @addr of @path (base 0), with debug dirs @dir. */
static int line_rc(const char *path, const char *dir, uint64_t addr)
{
	struct btr_image *img;
	const char *file;
	int line;
	CHECK_EQ(btr_image_new(&img), 0);
	if (dir)
		CHECK_EQ(btr_image_set_debug_dirs(img, &dir, 1), 0);
	CHECK_EQ(btr_image_add_elf(img, path, 0, 0), 0);
	int rc = btr_image_line(img, addr, &file, &line);
	btr_image_free(img);
	return rc;
}

static void test_debuglink(void)
{
	char t[] = "/tmp/btr-dlink-XXXXXX", cmd[8192];
	if (!mkdtemp(t)) {
		printf("no temp dir, debuglink check skipped\n");
		return;
	}
	/* full: built without a build-id, so that only the debuglink finds
	 * its debug file, and validated by its CRC.  pd.debug: prog_symbols'
	 * debug file (with a build-id, which validates it, not its CRC). */
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p a b/.debug root%s/c c d e f g h cache\n"
		 "cc -g -O1 -fno-inline -fno-pie -no-pie -Wl,--build-id=none -o full %s\n"
		 "objcopy --only-keep-debug full prog.debug\n"
		 "strip --strip-debug -o linked full\n"
		 "objcopy --add-gnu-debuglink=prog.debug linked\n"
		 "for d in a b c d e; do cp linked $d/prog; done\n"
		 "cp prog.debug a/; cp prog.debug b/.debug/; cp prog.debug root%s/c/\n"
		 "cp prog.debug d/; printf x >> d/prog.debug\n"
		 "objcopy --only-keep-debug %s pd.debug\n"
		 "strip --strip-debug -o f/prog %s; objcopy --add-gnu-debuglink=pd.debug f/prog\n"
		 "cp f/prog g/; cp pd.debug g/; printf x >> g/pd.debug\n"
		 "strip --strip-debug -o h/prog %s; cp prog.debug pd.debug\n"
		 "objcopy --add-gnu-debuglink=pd.debug h/prog; cp pd.debug h/\n",
		 t, t, PROG_SRC, t, PROG, PROG, PROG);
	if (system(cmd) != 0) {
		printf("cc/objcopy/strip not runnable, debuglink check skipped\n");
		goto out;
	}
	char p[16][600], root[600];
	static const char *const names[] = { "full", "a/prog", "b/prog", "c/prog", "d/prog",
					     "e/prog", "f/prog", "g/prog", "h/prog" };
	for (int i = 0; i < 9; i++)
		snprintf(p[i], sizeof(p[i]), "%s/%s", t, names[i]);
	snprintf(root, sizeof(root), "%s/root", t);
	const char *rootdir = root;
	struct facts f;
	CHECK_EQ(run_prog(PROG, &f), 0);
	uint64_t pie_local = ra(&f, "sym_local") - 1 - f.base;  /* link address */

	/* No libdw below: btr's own search must leave libdebuginfod unloaded. */
	unsetenv("DEBUGINFOD_URLS");
	int had_debuginfod = maps_have("libdebuginfod");
	Dwfl_Module *mod;
	int dw;
	Dwfl *d = dw_open(p[0], &mod, &dw);
	uint64_t beta = 0;  /* sym_beta of full, from libdw's symbol table */
	for (int i = 0, n = dwfl_module_getsymtab(mod); i < n; i++) {
		GElf_Sym sym;
		const char *nm = dwfl_module_getsym(mod, i, &sym, NULL);
		if (nm && !strcmp(nm, "sym_beta"))
			beta = sym.st_value;
	}
	dwfl_end(d);
	CHECK(beta != 0);
	/* Wrong CRC (d), no debug file (e): nothing; a wrong CRC with the
	 * right build-id (g): found; the right CRC with another build-id (h):
	 * nothing, as libdwfl validates. */
	CHECK_EQ(line_rc(p[4], NULL, beta), -BTR_ERR_NO_DEBUGINFO);
	CHECK_EQ(line_rc(p[5], NULL, beta), -BTR_ERR_NO_DEBUGINFO);
	CHECK_EQ(line_rc(p[5], NULL, 0x10), -BTR_ERR_NOT_FOUND);
	CHECK_EQ(line_rc(p[6], NULL, pie_local), -BTR_ERR_NO_DEBUGINFO);
	CHECK_EQ(line_rc(p[7], NULL, pie_local), 0);
	CHECK_EQ(line_rc(p[8], NULL, pie_local), -BTR_ERR_NO_DEBUGINFO);
	/* next to the file, in .debug/, under an absolute debug dir */
	CHECK_EQ(line_rc(p[1], NULL, beta), 0);
	CHECK_EQ(line_rc(p[2], NULL, beta), 0);
	CHECK_EQ(line_rc(p[3], rootdir, beta), 0);
	CHECK_EQ(line_rc(p[3], NULL, beta), -BTR_ERR_NO_DEBUGINFO);
	if (had_debuginfod)
		printf("libdebuginfod loaded before the test: its check skipped\n");
	else
		CHECK(!maps_have("libdebuginfod"));
	/* With DEBUGINFOD_URLS set, libdw is asked as before (it finds
	 * nothing: no server listens on port 1). */
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1);
	snprintf(cmd, sizeof(cmd), "%s/cache", t);
	setenv("DEBUGINFOD_CACHE_PATH", cmd, 1);
	CHECK_EQ(line_rc(p[6], NULL, pie_local), -BTR_ERR_NO_DEBUGINFO);
	if (!had_debuginfod && !maps_have("libdebuginfod"))
		printf("libdw loaded no libdebuginfod: DEBUGINFOD_URLS check inconclusive\n");
	unsetenv("DEBUGINFOD_URLS");
	unsetenv("DEBUGINFOD_CACHE_PATH");

	/* The lines are libdw's of the unsplit program, row by row. */
	same_lines(p[1], NULL, 0, p[0]);
	same_lines(p[2], NULL, 0, p[0]);
	same_lines(p[3], &rootdir, 1, p[0]);
	same_lines(p[7], NULL, 0, PROG);
	/* libdw agrees on what is not there. */
	for (int i = 4; i <= 8; i++) {
		d = dw_open(p[i], &mod, &dw);
		CHECK_EQ(dw, i == 7);
		dwfl_end(d);
	}
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t);
	if (system(cmd) != 0)
		printf("cannot remove %s\n", t);
}

/* ---- build-id against readelf -n ---- */

static void test_build_id(void)
{
	char hex[256];
	readelf_build_id(PROG, hex, sizeof(hex));
	uint8_t id[64], want[64];
	int n = btr_elf_build_id(PROG, id, sizeof(id));
	if (!hex[0]) {
		CHECK_EQ(n, -BTR_ERR_NOT_FOUND);
		return;
	}
	size_t len = strlen(hex) / 2;
	CHECK_EQ(unhex(hex, want, len), 0);
	CHECK_EQ(n, (long long)len);
	CHECK(!memcmp(id, want, len));
	/* Short buffer: full length returned, prefix copied. */
	uint8_t small[4];
	CHECK_EQ(btr_elf_build_id(PROG, small, sizeof(small)), (long long)len);
	CHECK(!memcmp(small, want, 4));
	CHECK_EQ(btr_elf_build_id(PROG, NULL, 0), (long long)len);

	/* Finding the file: by scanning a directory... */
	char path[4096];
	const char *dirs[] = { BTR_BINARY_DIR };
	CHECK_EQ(btr_elf_find_build_id(want, len, dirs, 1, path, sizeof(path)), 0);
	uint8_t got[64];
	CHECK_EQ(btr_elf_build_id(path, got, sizeof(got)), (long long)len);
	CHECK(!memcmp(got, want, len));
	/* ... and through a .build-id/xx/rest.debug tree. */
	char tmpd[] = "/tmp/btr-image-XXXXXX", sub[512], link[1024];
	CHECK(mkdtemp(tmpd) != NULL);
	snprintf(sub, sizeof(sub), "%s/.build-id", tmpd);
	mkdir(sub, 0700);
	snprintf(sub, sizeof(sub), "%s/.build-id/%.2s", tmpd, hex);
	mkdir(sub, 0700);
	snprintf(link, sizeof(link), "%s/%s.debug", sub, hex + 2);
	CHECK_EQ(symlink(PROG, link), 0);
	const char *dirs2[] = { "/nonexistent-dir", tmpd };
	CHECK_EQ(btr_elf_find_build_id(want, len, dirs2, 2, path, sizeof(path)), 0);
	CHECK_STR(path, link);
	CHECK_EQ(btr_elf_find_build_id(want, len, dirs2, 2, path, 8), -BTR_ERR_INVAL);
	want[0] ^= 0xff;
	CHECK_EQ(btr_elf_find_build_id(want, len, dirs2, 2, path, sizeof(path)), -BTR_ERR_NOT_FOUND);
	unlink(link);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/.build-id", tmpd);
	rmdir(sub);
	rmdir(tmpd);
}

int main(void)
{
	if (access(PROG, X_OK) != 0 || access(PROG_NOPIE, X_OK) != 0)
		check_skip("prog_symbols not built");
	test_debuglink();  /* first: it checks what the process has loaded */
	test_pie();
	test_nopie();
	test_plt();
	test_raw();
	test_overlap();
	test_errors();
	test_no_debuginfo();
	test_debug_file();
	test_build_id();
	return check_done();
}
