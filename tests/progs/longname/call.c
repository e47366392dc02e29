/* call.c - calls the long-named functions of libcheck_longname.so
 * (longname.h), built twice: prog_benign_longname_plt through the PLT,
 * prog_benign_longname_noplt with -fno-plt (call *name@GOTPCREL(%rip)).
 * Prints 23.  With the argument "evil" it first points its GOT slot of
 * the 4096-character function at evil() (a GOT overwrite, which btr check
 * must catch whatever the name's length). */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "longname.h"

static volatile int hits;

__attribute__((noinline, used)) int evil(int x)
{
	hits++;
	return x;
}

static uintptr_t base;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size; (void)data;
	base = info->dlpi_addr;
	return 1;
}

/* Points the program's GOT slot of @name (JUMP_SLOT or GLOB_DAT) at evil. */
static int overwrite(const char *name)
{
	dl_iterate_phdr(find_self, NULL);
	const ElfW(Rela) *rel[2] = { NULL, NULL };
	size_t relsz[2] = { 0, 0 };
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	for (const ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_JMPREL) rel[0] = (const ElfW(Rela) *)d->d_un.d_ptr;
		if (d->d_tag == DT_PLTRELSZ) relsz[0] = d->d_un.d_val;
		if (d->d_tag == DT_RELA) rel[1] = (const ElfW(Rela) *)d->d_un.d_ptr;
		if (d->d_tag == DT_RELASZ) relsz[1] = d->d_un.d_val;
		if (d->d_tag == DT_SYMTAB) sym = (const ElfW(Sym) *)d->d_un.d_ptr;
		if (d->d_tag == DT_STRTAB) str = (const char *)d->d_un.d_ptr;
	}
	uintptr_t *slot = NULL;
	for (int k = 0; k < 2; k++)
		for (size_t i = 0; rel[k] && i < relsz[k] / sizeof(*rel[k]); i++) {
			unsigned type = ELF64_R_TYPE(rel[k][i].r_info);
			if ((type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) &&
			    strcmp(str + sym[ELF64_R_SYM(rel[k][i].r_info)].st_name, name) == 0)
				slot = (uintptr_t *)(base + rel[k][i].r_offset);
		}
	if (!slot)
		return -1;
	long pg = sysconf(_SC_PAGESIZE);
	mprotect((void *)((uintptr_t)slot & ~(uintptr_t)(pg - 1)), (size_t)pg, PROT_READ | PROT_WRITE);
	*slot = (uintptr_t)&evil;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "evil") && overwrite(LN_4096) < 0) {
		fprintf(stderr, "call: no GOT slot of the long name\n");
		return 2;
	}
	int s = 10;
	for (int i = 0; i < 3; i++)
		s = ln128(s) + ln200(0) + ln1000(0) + ln4096(0) - 9;
	printf("%d %d\n", s + 1 + 2 + 3 + 4, hits);
	return 0;
}
