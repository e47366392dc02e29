/* check_ifunc: an overwritten IRELATIVE GOT slot.  pick() is an IFUNC of
 * the program itself: its PLT jump goes through a slot the dynamic linker
 * fills with what resolve_pick() returns (pick_a or pick_b).  The program
 * calls pick() once, finds the slot among its DT_JMPREL relocations
 * (R_X86_64_IRELATIVE), points it at evil() and calls pick() again.  A
 * `btr check` fixture: the second PLT jump must be reported as a GOT
 * overwrite, the first not. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile int sel, hits;

__attribute__((noinline, used)) static int pick_a(void) { return 1; }
__attribute__((noinline, used)) static int pick_b(void) { return 2; }
__attribute__((noinline, used)) int evil(void) { hits++; return 4242; }

typedef int (*pick_fn)(void);

static pick_fn resolve_pick(void)
{
	return sel ? pick_b : pick_a;
}
int pick(void) __attribute__((ifunc("resolve_pick")));

static uintptr_t base;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size; (void)data;
	base = info->dlpi_addr;
	return 1;
}

int main(void)
{
	int first = pick();
	dl_iterate_phdr(find_self, NULL);
	const ElfW(Rela) *rel = NULL;
	size_t relsz = 0;
	for (const ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_JMPREL) rel = (const ElfW(Rela) *)d->d_un.d_ptr;
		if (d->d_tag == DT_PLTRELSZ) relsz = d->d_un.d_val;
	}
	uintptr_t *slot = NULL;
	for (size_t i = 0; rel && i < relsz / sizeof(*rel); i++)
		if (ELF64_R_TYPE(rel[i].r_info) == R_X86_64_IRELATIVE)
			slot = (uintptr_t *)(base + rel[i].r_offset);
	if (!slot) {
		fprintf(stderr, "check_ifunc: no IRELATIVE slot\n");
		return 2;
	}
	long pg = sysconf(_SC_PAGESIZE);
	mprotect((void *)((uintptr_t)slot & ~(uintptr_t)(pg - 1)), (size_t)pg, PROT_READ | PROT_WRITE);
	*slot = (uintptr_t)&evil;
	int p = pick();                   /* through the PLT: now evil() */
	printf("%d %d %d\n", first, p, hits);
	return p == 4242 ? 0 : 1;
}
