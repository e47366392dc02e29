/* check_hook: an inline hook that patches a function's prologue at run
 * time.  The program makes the page of target() writable and overwrites
 * its first bytes with "movabs $hook, %rax; jmp *%rax" (a detour), then
 * calls target(), which now runs hook().  A `btr check` fixture: the trace
 * must show that the code at target() is not what the file holds. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline, used)) int hook(int x)
{
	sink += x;
	return 1000 + x;
}

__attribute__((noinline)) int target(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += (i & 1) ? i : sink;
	return s;
}

int main(void)
{
	int before = target(5);
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t t = (uintptr_t)&target;
	uintptr_t p0 = t & ~(uintptr_t)(pg - 1);
	if (mprotect((void *)p0, (size_t)(t + 16 - p0), PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return 2;
	unsigned char patch[12] = {0x48, 0xb8};
	uintptr_t h = (uintptr_t)&hook;
	memcpy(patch + 2, &h, 8);
	patch[10] = 0xff;
	patch[11] = 0xe0;
	memcpy((void *)t, patch, sizeof(patch));
	__builtin___clear_cache((char *)t, (char *)t + sizeof(patch));
	int after = target(5);
	printf("%d %d\n", before, after);
	return after == 1005 ? 0 : 1;
}
