/* check_rop: a ROP chain through libc gadgets.  The program finds a
 * "pop %rdi; ret" and a plain "ret" in libc's code, writes a chain over
 * its saved return address (ret -> pop rdi; ret -> 42 -> done) and returns
 * into it.  A `btr check` fixture: the returns into gadgets must be
 * reported as ROP / hijacked returns. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uintptr_t lo, hi;   /* libc's executable segment */

static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size; (void)data;
	if (!strstr(info->dlpi_name, "libc.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			lo = info->dlpi_addr + p->p_vaddr;
			hi = lo + p->p_memsz;
			return 1;
		}
	}
	return 0;
}

static uintptr_t gadget(const unsigned char *pat, size_t n)
{
	for (uintptr_t a = lo; a + n <= hi; a++)
		if (memcmp((const void *)a, pat, n) == 0)
			return a;
	return 0;
}

__attribute__((noinline, used)) void done(long v)
{
	_exit(v == 42 ? 0 : 3);
}

static uintptr_t chain[4];

__attribute__((noinline, optimize("no-omit-frame-pointer"))) void vuln(void)
{
	/* overwrite the return address and what lies above it */
	volatile uintptr_t *ra = (volatile uintptr_t *)((char *)__builtin_frame_address(0) + 8);
	for (int i = 0; i < 4; i++)
		ra[i] = chain[i];
}

int main(void)
{
	dl_iterate_phdr(find_libc, NULL);
	static const unsigned char pop_rdi[] = {0x5f, 0xc3}, ret[] = {0xc3};
	uintptr_t g1 = gadget(ret, 1), g2 = gadget(pop_rdi, 2);
	if (!g1 || !g2) {
		fprintf(stderr, "check_rop: no gadgets in libc\n");
		return 2;
	}
	chain[0] = g1;
	chain[1] = g2;
	chain[2] = 42;
	chain[3] = (uintptr_t)&done;
	vuln();
	return 1;   /* not reached */
}
