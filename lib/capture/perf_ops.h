/* perf_ops.h - the seam between the hardware recorders and the kernel.
 *
 * Everything the recorder (perf_event.c), the hardware backends
 * (perf_pt.c, perf_bts.c, perf_lbr.c) and their probes (probe.c) ask of
 * the kernel's perf_event interface goes through this table:
 * perf_event_open, mmap / munmap of the ring and AUX area, the event
 * ioctls, poll, close, the number of CPUs, and where the PMUs' sysfs
 * descriptions live.  The ring's control fields (data_head, aux_head,
 * ...) are read from the memory @mmap returns, as from the kernel's page.
 *
 * The real table (perf_ops.c) calls the kernel.  Tests install another
 * one (tests/perf_replay.h) that plays a real perf.data recording back
 * through the same calls, so the recorder above the seam is the one code
 * that runs on real hardware.  Private to lib/capture/ and the tests.
 *
 * Conventions are those of the system calls: -1 (MAP_FAILED for mmap)
 * with errno set on failure.
 */
#ifndef BTR_CAPTURE_PERF_OPS_H
#define BTR_CAPTURE_PERF_OPS_H

#include "btr/perfattr.h"

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

struct btr_perf_ops {
	/* perf_event_open(@attr (BTR_PERF_ATTR_SIZE bytes), @pid, @cpu,
	 * group -1, PERF_FLAG_FD_CLOEXEC): a file descriptor or -1 */
	int (*open)(void *ctx, const struct btr_perf_event_attr *attr, int pid, int cpu);
	/* mmap(NULL, @len, @prot, MAP_SHARED, @fd, @off) */
	void *(*mmap)(void *ctx, int fd, size_t len, int prot, uint64_t off);
	int (*munmap)(void *ctx, void *addr, size_t len);
	/* ioctl(@fd, @req, @arg): PERF_EVENT_IOC_ENABLE / _DISABLE (arg 0),
	 * PERF_EVENT_IOC_SET_FILTER (arg a const char *) */
	int (*ioctl)(void *ctx, int fd, unsigned long req, unsigned long arg);
	int (*poll)(void *ctx, struct pollfd *fds, unsigned n, int timeout_ms);
	int (*close)(void *ctx, int fd);
	/* the configured CPUs (sysconf(_SC_NPROCESSORS_CONF)) */
	long (*ncpus)(void *ctx);
	/* the PMUs' sysfs directory ("/sys/bus/event_source/devices") */
	const char *sysfs_root;
	void *ctx;
};

/* The table in use: the real one unless a test installed another. */
const struct btr_perf_ops *btr_perf_ops_get(void);

/* Installs @ops (NULL: the real table again) and returns the previous
 * one.  For tests; not thread-safe (set it before recording). */
const struct btr_perf_ops *btr_perf_ops_set(const struct btr_perf_ops *ops);

#endif
