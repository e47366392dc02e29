/* qemu_crash: dies from SIGSEGV in crash_here() (no handler) after some
 * work, so that `btr record` must keep the trace up to the crash and name
 * the signal and the faulting IP.  With an argument "abort" it calls
 * abort() instead. */
#include <stdlib.h>
#include <string.h>

volatile long sink;
volatile long *volatile nowhere;

__attribute__((noinline)) void crash_here(long v)
{
	sink += v;
	*nowhere = v;   /* faults: nowhere is NULL */
	sink -= v;
}

int main(int argc, char **argv)
{
	for (long i = 0; i < 1000; i++)
		sink += i & 7 ? i : -i;
	if (argc > 1 && !strcmp(argv[1], "abort"))
		abort();
	crash_here(sink);
	return 0;
}
