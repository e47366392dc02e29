/* step_sigtrap: installs its own SIGTRAP handler and raises SIGTRAP twice.
 * Traced, it must behave as without a tracer ("handled 2"); it defeats the
 * --inproc agent, which must say so. */
#include <signal.h>
#include <stdio.h>

static volatile int hits;
static void on_trap(int sig) { hits += sig == SIGTRAP; }

int main(void)
{
	signal(SIGTRAP, on_trap);
	raise(SIGTRAP);
	raise(SIGTRAP);
	printf("handled %d\n", hits);
	return hits == 2 ? 0 : 1;
}
