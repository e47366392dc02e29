/* perf_ops.c - the real kernel behind perf_ops.h: plain system calls. */
#include "perf_ops.h"

#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(sizeof(struct perf_event_attr) >= BTR_PERF_ATTR_SIZE, "perf_event_attr too small");

static int real_open(void *ctx, const struct btr_perf_event_attr *a, int pid, int cpu)
{
	(void)ctx;
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	memcpy(&attr, a, BTR_PERF_ATTR_SIZE);
	attr.size = BTR_PERF_ATTR_SIZE;
	return (int)syscall(SYS_perf_event_open, &attr, (pid_t)pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static void *real_mmap(void *ctx, int fd, size_t len, int prot, uint64_t off)
{
	(void)ctx;
	return mmap(NULL, len, prot, MAP_SHARED, fd, (off_t)off);
}

static int real_munmap(void *ctx, void *addr, size_t len)
{
	(void)ctx;
	return munmap(addr, len);
}

static int real_ioctl(void *ctx, int fd, unsigned long req, unsigned long arg)
{
	(void)ctx;
	return ioctl(fd, req, arg);
}

static int real_poll(void *ctx, struct pollfd *fds, unsigned n, int timeout_ms)
{
	(void)ctx;
	return poll(fds, n, timeout_ms);
}

static int real_close(void *ctx, int fd)
{
	(void)ctx;
	return close(fd);
}

static long real_ncpus(void *ctx)
{
	(void)ctx;
	return sysconf(_SC_NPROCESSORS_CONF);
}

static const struct btr_perf_ops real_ops = {
	.open = real_open,
	.mmap = real_mmap,
	.munmap = real_munmap,
	.ioctl = real_ioctl,
	.poll = real_poll,
	.close = real_close,
	.ncpus = real_ncpus,
	.sysfs_root = "/sys/bus/event_source/devices",
};

static const struct btr_perf_ops *cur_ops = &real_ops;

const struct btr_perf_ops *btr_perf_ops_get(void)
{
	return cur_ops;
}

const struct btr_perf_ops *btr_perf_ops_set(const struct btr_perf_ops *ops)
{
	const struct btr_perf_ops *old = cur_ops;
	cur_ops = ops ? ops : &real_ops;
	return old;
}
