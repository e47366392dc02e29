/* step_agent.c - btr-step-agent.so, the in-process agent of
 * `btr record -b step --inproc` (see lib/capture/agent/step_agent.h,
 * the ring it shares with the recorder).  Built by agents/step/CMakeLists.txt;
 * not part of libbtr.
 *
 * Why in-process: a ptrace single step costs two context switches into
 * btr and a waitpid per instruction; here the trap is a signal delivered
 * to the program itself, and the handler's work is one store.  Limits
 * (docs/record.md): only the thread that loaded the agent is traced
 * (other threads run untraced and are counted), tracing begins in the
 * agent's constructor (after the dynamic loader and libc start-up), signal
 * handlers run untraced (the kernel clears TF for them), and a program
 * that installs its own SIGTRAP handler ends tracing (it is told apart and
 * reported).  Static programs cannot preload anything: btr falls back to
 * ptrace for them.
 */
#include "step_agent.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define TF 0x100

static struct sa_hdr *hdr;
static __thread int traced;

static inline void set_tf(int on)
{
	if (on)
		__asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
	else
		__asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "memory", "cc");
}

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	(void)sig;
	if (si->si_code != TRAP_TRACE)
		return;   /* an int3 or a kill: not a step */
	if (!traced || !hdr || hdr->state != SA_TRACING) {
		/* A thread the agent does not trace inherited TF through clone. */
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)TF;
		if (hdr && !traced)
			__atomic_fetch_add(&hdr->untraced_threads, 1, __ATOMIC_RELAXED);
		return;
	}
	uint64_t h = hdr->head;
	while (h - __atomic_load_n(&hdr->tail, __ATOMIC_ACQUIRE) >= SA_CAP)
		syscall(SYS_sched_yield);   /* btr drains: wait for room */
	hdr->ip[h % SA_CAP] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	__atomic_store_n(&hdr->head, h + 1, __ATOMIC_RELEASE);
	uc->uc_mcontext.gregs[REG_EFL] |= TF;
}

static void defeated(const char *why)
{
	if (!hdr || hdr->state != SA_TRACING)
		return;
	set_tf(0);
	snprintf(hdr->why, sizeof(hdr->why), "%s", why);
	__atomic_store_n(&hdr->state, SA_DEFEATED, __ATOMIC_RELEASE);
}

/* The program's own SIGTRAP handler would receive our traps: stop tracing
 * and say so rather than let it see them. */
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static int (*real)(int, const struct sigaction *, struct sigaction *);
	if (!real)
		real = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
	if (sig == SIGTRAP && act && traced)
		defeated("the program installs its own SIGTRAP handler");
	return real(sig, act, old);
}

__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t h)
{
	static sighandler_t (*real)(int, sighandler_t);
	if (!real)
		real = (sighandler_t (*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
	if (sig == SIGTRAP && traced)
		defeated("the program installs its own SIGTRAP handler");
	return real(sig, h);
}

__attribute__((constructor)) static void agent_start(void)
{
	const char *path = getenv(SA_ENV);
	if (!path)
		return;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	void *m = mmap(NULL, sizeof(struct sa_hdr), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	hdr = m;
	if (hdr->magic != SA_MAGIC)
		return;
	/* Not inherited by what the program runs (exec'd children). */
	unsetenv(SA_ENV);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	int (*real)(int, const struct sigaction *, struct sigaction *) =
		(int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
	if (!real || real(SIGTRAP, &sa, NULL) < 0)
		return;
	hdr->tid = (int32_t)syscall(SYS_gettid);
	traced = 1;
	__atomic_store_n(&hdr->state, SA_TRACING, __ATOMIC_RELEASE);
	set_tf(1);
}

__attribute__((destructor)) static void agent_stop(void)
{
	if (!hdr || !traced || hdr->state != SA_TRACING)
		return;
	set_tf(0);
	__atomic_store_n(&hdr->state, SA_DONE, __ATOMIC_RELEASE);
	/* Let btr read the last IPs while the code is still mapped. */
	for (int i = 0; i < 5000 && __atomic_load_n(&hdr->tail, __ATOMIC_ACQUIRE) != hdr->head; i++)
		usleep(1000);
}
