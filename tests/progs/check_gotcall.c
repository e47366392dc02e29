/* check_gotcall: a GOT overwrite in code built without PLT calls
 * (-fno-plt style: `call *getppid@GOTPCREL(%rip)`, a GLOB_DAT slot).  The
 * program finds its GOT slot of getppid through its dynamic section (RELA
 * relocations), points it at evil(), and calls getppid().  A `btr check`
 * fixture: the call through the slot must be reported as a GOT
 * overwrite. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

pid_t getppid(void) __attribute__((noplt));

static volatile int hits;

__attribute__((noinline, used)) pid_t evil(void)
{
	hits++;
	return 4242;
}

static uintptr_t base;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size; (void)data;
	base = info->dlpi_addr;
	return 1;
}

int main(void)
{
	dl_iterate_phdr(find_self, NULL);
	const ElfW(Rela) *rel = NULL;
	size_t relsz = 0;
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	for (const ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_RELA) rel = (const ElfW(Rela) *)d->d_un.d_ptr;
		if (d->d_tag == DT_RELASZ) relsz = d->d_un.d_val;
		if (d->d_tag == DT_SYMTAB) sym = (const ElfW(Sym) *)d->d_un.d_ptr;
		if (d->d_tag == DT_STRTAB) str = (const char *)d->d_un.d_ptr;
	}
	uintptr_t *slot = NULL;
	for (size_t i = 0; rel && i < relsz / sizeof(*rel); i++)
		if (ELF64_R_TYPE(rel[i].r_info) == R_X86_64_GLOB_DAT &&
		    strcmp(str + sym[ELF64_R_SYM(rel[i].r_info)].st_name, "getppid") == 0)
			slot = (uintptr_t *)(base + rel[i].r_offset);
	if (!slot) {
		fprintf(stderr, "check_gotcall: no GLOB_DAT slot for getppid\n");
		return 2;
	}
	long pg = sysconf(_SC_PAGESIZE);
	mprotect((void *)((uintptr_t)slot & ~(uintptr_t)(pg - 1)), (size_t)pg, PROT_READ | PROT_WRITE);
	*slot = (uintptr_t)&evil;
	pid_t p = getppid();                /* call *slot: now evil() */
	printf("%d %d\n", (int)p, hits);
	return p == 4242 ? 0 : 1;
}
