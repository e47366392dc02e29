/* symbols.c - a program with known functions for tests/test_image.c.
 *
 * `prog_symbols --addrs` prints, one per line:
 *   base 0xBIAS            load bias of the executable (dl_iterate_phdr)
 *   map PATH 0xSTART 0xPGOFF PERMS   file mappings from /proc/self/maps
 *   func NAME 0xADDR       entry address of each test function
 *   ra NAME 0xADDR         a return address inside NAME, right after the
 *                          call on the line marked LINE:NAME_call
 *   code NAME HEX          the first bytes of NAME as they are in memory
 *   exe PATH, libc printf 0xADDR, data NAME 0xADDR, bss NAME 0xADDR SIZE
 * so the test learns addresses from the running program itself rather
 * than from the ELF file it is testing the reader of.  Lines marked
 * LINE:xxx are found by the test by scanning this source.
 * Without arguments it computes something and exits 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *ras[4];
static char bss_buf[8192];
char data_marker[] = "btr-data-marker";

__attribute__((noinline)) static void *where(void)
{
	return __builtin_return_address(0);
}

__attribute__((noinline)) int sym_alpha(int x) /* LINE:alpha_decl */
{
	return x * 3 + 1; /* LINE:alpha_body */
}

__attribute__((noinline)) int sym_beta(int x)
{
	ras[0] = where(); /* LINE:sym_beta_call */
	return sym_alpha(x) + 7;
}

__attribute__((noinline, used)) static int sym_local(int x)
{
	ras[1] = where(); /* LINE:sym_local_call */
	return x ^ 0x55;
}

__attribute__((noinline)) long sym_loop(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i * (i & 3);
	return s;
}

/* A function symbol without a size (hand-written assembly): lookups of
 * its inner bytes must find it as the nearest preceding symbol. */
__asm__(".text\n"
	".globl sym_nosize\n"
	".type sym_nosize, @function\n"
	"sym_nosize:\n"
	"\tnop\n\tnop\n\tnop\n\tnop\n"
	"\tmovl $42, %eax\n"
	"\tret\n");
int sym_nosize(void);

/* An IFUNC: the STT_GNU_IFUNC symbol's value is the resolver. */
static int sym_ifunc_impl(void)
{
	return 5;
}
__attribute__((used)) static int (*resolve_sym_ifunc(void))(void)
{
	return sym_ifunc_impl;
}
int sym_ifunc(void) __attribute__((ifunc("resolve_sym_ifunc")));

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uint64_t *)data = info->dlpi_addr;
	return 1;  /* the first object is the executable */
}

/* Every file-backed mapping: "map PATH 0xSTART 0xPGOFF PERMS". */
static void print_maps(void)
{
	char line[8192];
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8];
		int pathpos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &pathpos) < 4 ||
		    !pathpos)
			continue;
		char *path = line + pathpos;
		path[strcspn(path, "\n")] = 0;
		if (path[0] == '/')
			printf("map %s 0x%llx 0x%llx %s\n", path, start, off, perms);
	}
	fclose(f);
}

static void print_code(const char *name, const void *p, size_t n)
{
	const unsigned char *b = p;
	printf("code %s ", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	bss_buf[argc] = 0;
	int r = sym_beta(argc) + sym_local(argc) + (int)sym_loop(100) + sym_nosize() + sym_ifunc();
	if (argc > 1 && !strcmp(argv[1], "--addrs")) {
		uint64_t base = 0;
		dl_iterate_phdr(first_object, &base);
		printf("base 0x%llx\n", (unsigned long long)base);
		print_maps();
		printf("func sym_alpha %p\n", (void *)sym_alpha);
		printf("func sym_beta %p\n", (void *)sym_beta);
		printf("func sym_local %p\n", (void *)sym_local);
		printf("func sym_loop %p\n", (void *)sym_loop);
		printf("func sym_nosize %p\n", (void *)sym_nosize);
		printf("func main %p\n", (void *)main);
		printf("ifunc sym_ifunc %p\n", (void *)resolve_sym_ifunc);
		printf("ra sym_beta %p\n", ras[0]);
		printf("ra sym_local %p\n", ras[1]);
		printf("exe %s\n", realpath("/proc/self/exe", NULL));
		printf("libc printf %p\n", (void *)printf);
		printf("data data_marker %p\n", (void *)data_marker);
		printf("bss bss_buf %p %zu\n", (void *)bss_buf, sizeof(bss_buf));
		print_code("sym_beta", (const void *)sym_beta, 32);
		print_code("main", (const void *)main, 64);
		return 0;
	}
	printf("%d\n", r);
	return 0;
}
