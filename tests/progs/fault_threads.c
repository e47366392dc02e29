/* fault_threads: a tracer-fault test program (tests/cli_tracer_faults.sh).
 *   fault_threads exit N     N threads work, meet at a barrier and all exit
 *                            at once; then main returns
 *   fault_threads group N    N threads spin; main calls exit() while they run
 *                            (exit_group ends them all at the same moment)
 *   fault_threads spin N S   N threads and main spin for S seconds (a target
 *                            for signals sent to it or to the recorder)
 *   fault_threads crash N    N threads start and block; main writes through
 *                            a NULL pointer (SIGSEGV ends them all) */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
static volatile int stop;
static pthread_barrier_t bar;
static double seconds;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void work(long n)
{
	for (long i = 0; i < n; i++)
		sink += i & 3 ? i : -i;
}

static void *at_once(void *arg)
{
	work(2000 + (long)arg * 100);
	pthread_barrier_wait(&bar);
	return NULL;
}

static void *blocker(void *arg)
{
	work(1000 + (long)arg);
	pthread_barrier_wait(&bar);
	for (;;)
		pause();
	return NULL;
}

static void *spinner(void *arg)
{
	(void)arg;
	double end = now() + seconds;
	while (!stop && (seconds == 0 || now() < end))
		work(1000);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int n = atoi(argv[2]);
	if (n < 1 || n > 256)
		return 2;
	pthread_t t[256];
	if (!strcmp(argv[1], "exit")) {
		pthread_barrier_init(&bar, NULL, (unsigned)n);
		for (long i = 0; i < n; i++)
			pthread_create(&t[i], NULL, at_once, (void *)i);
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	if (!strcmp(argv[1], "group")) {
		for (long i = 0; i < n; i++)
			pthread_create(&t[i], NULL, spinner, NULL);
		work(50000);
		exit(7);
	}
	if (!strcmp(argv[1], "crash")) {
		pthread_barrier_init(&bar, NULL, (unsigned)n + 1);
		for (long i = 0; i < n; i++)
			pthread_create(&t[i], NULL, blocker, NULL);
		pthread_barrier_wait(&bar);   /* every thread has run */
		work(1000);
		volatile int *p = (int *)(long)(sink & 0);   /* NULL */
		*p = 1;
		return 1;
	}
	if (!strcmp(argv[1], "spin") && argc > 3) {
		seconds = atof(argv[3]);
		for (long i = 0; i < n; i++)
			pthread_create(&t[i], NULL, spinner, NULL);
		spinner(NULL);
		stop = 1;
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	return 2;
}
