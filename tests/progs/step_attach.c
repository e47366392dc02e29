/* step_attach: runs about 1.5 s (150 rounds of work and a 10 ms sleep),
 * then prints a checksum that does not depend on timing.  For attaching
 * with `btr record -b step -p PID --duration S`: the output and exit code
 * must be those of an undisturbed run. */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long round_work(unsigned long x)
{
	for (int i = 0; i < 200; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

int main(int argc, char **argv)
{
	unsigned long x = 1;
	int rounds = argc > 1 ? atoi(argv[1]) : 150;
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	for (int r = 0; r < rounds; r++) {
		x = round_work(x);
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	sink = x;
	printf("checksum %lx\n", x);
	return 0;
}
