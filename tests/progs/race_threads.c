/* race_threads.c - threads running the same code at the same moment, for
 * the QEMU recorder's exactness under concurrency (tests/cli_race.sh).
 *
 *   prog_race_threads loop N ITERS   N threads run one shared one-block loop
 *   prog_race_threads func N ITERS   N threads call one shared small function
 *   prog_race_threads pool N ITERS   a pool of N workers takes jobs from a queue
 *   prog_race_threads fork N ITERS   N threads fork (a child that works and
 *                                    exits) and posix_spawn (/bin/true) at once
 *   prog_race_threads fault N ITERS  N threads run one shared loop over memory;
 *                                    in each of 50 rounds every thread also runs
 *                                    it once into an unreadable page (SIGSEGV,
 *                                    handled with siglongjmp): 50 faults per
 *                                    thread, in a block the other threads run
 *                                    meanwhile
 *
 * Every mode starts its threads together at a barrier, so that they run the
 * same translation blocks at the same time.  Exits 0 when the work is done
 * as computed. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pthread_barrier_t start;
static long iters = 20000;
static volatile long total;

/* The loop: at -O1 one block (load, multiply, add, store, increment,
 * compare, branch back to its own start). */
static void *loop_thread(void *arg)
{
	long id = (long)arg;
	pthread_barrier_wait(&start);
	volatile long s = 0;
	for (int r = 0; r < 5; r++)
		for (long i = 0; i < iters; i++)
			s += i * id;
	__atomic_add_fetch(&total, s, __ATOMIC_RELAXED);
	return NULL;
}

static volatile long shared_cell;

/* A small function every thread calls: one block with a memory access,
 * entered by a call and left by a return. */
static __attribute__((noinline)) long small(long x)
{
	return x * 3 + shared_cell;
}

static void *func_thread(void *arg)
{
	long id = (long)arg, s = 0;
	pthread_barrier_wait(&start);
	for (int r = 0; r < 5; r++)
		for (long i = 0; i < iters; i++)
			s += small(i + id);
	__atomic_add_fetch(&total, s, __ATOMIC_RELAXED);
	return NULL;
}

/* A thread pool: workers take job numbers from a shared queue under a
 * mutex and run the same job function. */
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static long next_job, n_jobs;

static __attribute__((noinline)) long job(long j)
{
	volatile long s = 0;
	for (long i = 0; i < 200; i++)
		s += i ^ j;
	return s;
}

static void *pool_thread(void *arg)
{
	(void)arg;
	long s = 0;
	pthread_barrier_wait(&start);
	for (;;) {
		pthread_mutex_lock(&qlock);
		long j = next_job < n_jobs ? next_job++ : -1;
		pthread_mutex_unlock(&qlock);
		if (j < 0)
			break;
		s += job(j);
	}
	__atomic_add_fetch(&total, s, __ATOMIC_RELAXED);
	return NULL;
}

/* Every thread forks a child (which runs the shared loop briefly and exits
 * 7) and spawns /bin/true, all at the same moment. */
static void *fork_thread(void *arg)
{
	long id = (long)arg;
	pthread_barrier_wait(&start);
	pid_t p = fork();
	if (p == 0) {
		volatile long s = 0;
		for (long i = 0; i < iters; i++)
			s += i * id;
		_exit(7);
	}
	char *argv[] = { "true", NULL };
	pid_t q;
	int ok = p > 0 && posix_spawn(&q, "/bin/true", NULL, NULL, argv, environ) == 0;
	int st;
	ok = ok && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 7;
	ok = ok && waitpid(q, &st, 0) == q && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!ok)
		__atomic_add_fetch(&total, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* One loop over memory that all threads run; a thread faults in it on the
 * unreadable page. */
static __attribute__((noinline)) long sum(const volatile long *a, long n, unsigned long m)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += a[(unsigned long)i % m];
	return s;
}

static volatile long data[64];
static const volatile long *bad;   /* 8 readable longs, then an unreadable page */
static __thread sigjmp_buf fault_jmp;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(fault_jmp, 1);
}

static void *fault_thread(void *arg)
{
	(void)arg;
	volatile long s = 0, faults = 0;   /* kept across siglongjmp */
	pthread_barrier_wait(&start);
	for (int r = 0; r < 50; r++) {
		s += sum(data, iters, 64);
		/* the 9th iteration faults, in the loop's block */
		if (sigsetjmp(fault_jmp, 1) == 0)
			s += sum(bad, 16, 1ul << 30);
		else
			faults++;
		s += sum(data, iters, 64);
	}
	__atomic_add_fetch(&total, faults == 50 ? s : 0, __ATOMIC_RELAXED);
	if (faults != 50)
		__atomic_add_fetch(&next_job, 1, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s loop|func|pool|fork N [ITERS]\n", argv[0]);
		return 2;
	}
	long n = atol(argv[2]);
	if (argc > 3)
		iters = atol(argv[3]);
	if (n < 1 || n > 256 || iters < 1)
		return 2;
	void *(*fn)(void *) = !strcmp(argv[1], "loop") ? loop_thread : !strcmp(argv[1], "func") ? func_thread
			      : !strcmp(argv[1], "pool") ? pool_thread : !strcmp(argv[1], "fork") ? fork_thread
			      : !strcmp(argv[1], "fault") ? fault_thread : NULL;
	if (!fn)
		return 2;
	if (fn == fault_thread) {
		char *pg = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pg == MAP_FAILED || mprotect(pg + 4096, 4096, PROT_NONE) != 0)
			return 1;
		bad = (const volatile long *)(pg + 4096 - 8 * sizeof(long));
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_segv;
		sigaction(SIGSEGV, &sa, NULL);
	}
	n_jobs = iters / 10;
	pthread_barrier_init(&start, NULL, (unsigned)n);
	pthread_t t[256];
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, fn, (void *)(i + 1)) != 0)
			return 1;
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (fn == fork_thread)
		return total != 0;
	if (fn == pool_thread)
		return next_job == n_jobs ? 0 : 1;
	if (fn == fault_thread)
		return next_job != 0;
	return 0;
}
