/* qemu_stderr.c - QEMU's own messages on the guest's stderr.
 *
 * QEMU linux-user prints "qemu: uncaught target signal 11 (Segmentation
 * fault) - core dumped" to its stderr when the guest dies from a signal
 * that dumps core.  QEMU's stderr is the guest's descriptor 2, so a crashing
 * program's stderr gained a line it never wrote (natively the kernel prints
 * nothing; the shell's "Segmentation fault" comes from the shell).  QEMU
 * writes through the C library's `stderr`, which this plugin shares (the
 * guest's own C library is another one, in guest memory): the plugin puts a
 * stream there that passes every write on to descriptor 2 except that line.
 *
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

static const char uncaught[] = "qemu: uncaught target signal ";

static ssize_t err_write(void *cookie, const char *buf, size_t size)
{
	(void)cookie;
	size_t n = size;
	if (n >= sizeof(uncaught) - 1 && !memcmp(buf, uncaught, sizeof(uncaught) - 1)) {
		const char *nl = memchr(buf, '\n', n);
		size_t skip = nl ? (size_t)(nl - buf) + 1 : n;
		buf += skip;
		n -= skip;
	}
	while (n) {
		ssize_t k = write(2, buf, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;   /* as a plain stderr: the message is lost */
		buf += k;
		n -= (size_t)k;
	}
	return (ssize_t)size;
}

void qemu_stderr_filter(void)
{
	cookie_io_functions_t io = { .write = err_write };
	FILE *f = fopencookie(NULL, "w", io);
	if (!f)
		return;
	setvbuf(f, NULL, _IONBF, 0);   /* one write per fprintf, as unbuffered stderr */
	fflush(stderr);
	stderr = f;
}
