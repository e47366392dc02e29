/* check_smash: a stack smash that redirects a return.  vuln() overwrites
 * its own saved return address (as an overflowing copy would) with the
 * address of win(), which never was called.  A `btr check` fixture: the
 * return from vuln must be reported as a hijacked return. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline, used)) void win(void)
{
	sink = 1;
	_exit(0);   /* the stack is broken: leave at once */
}

/* The frame pointer makes the return address slot [rbp+8] certain. */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) void vuln(const char *src)
{
	char buf[16];
	strncpy(buf, src, sizeof(buf) - 1);
	buf[15] = 0;
	sink += buf[0];
	uintptr_t evil = (uintptr_t)&win;
	/* the overflow: 8 bytes past the saved rbp */
	*(volatile uintptr_t *)((char *)__builtin_frame_address(0) + 8) = evil;
}

int main(int argc, char **argv)
{
	vuln(argc > 1 ? argv[1] : "AAAA");
	return 1;   /* not reached */
}
