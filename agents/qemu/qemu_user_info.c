/* qemu_user_info.c - what QEMU was asked to run: the guest program's path,
 * its argv and where its code starts.  Part of the QEMU plugin
 * (qemu_plugin.h); private to agents/qemu/.
 *
 * QEMU's user-mode plugin functions qemu_plugin_path_to_binary and
 * qemu_plugin_start_code answer the first and the last, but not every
 * plugin-capable qemu-x86_64 exports them: QEMU 10.0 as its source builds
 * leaves them out (linux-user/meson.build names a configuration nothing
 * sets; scripts/build-qemu.sh patches that).  They are weak references
 * (qemu_plugin_api.h), NULL where QEMU lacks them, so the plugin loads
 * into every such QEMU and finds the same facts another way:
 *   - the program: QEMU's own command line (/proc/self/cmdline), which
 *     `btr record` or follow_exec built: qemu [options] PROGRAM ARGS; it
 *     is the path QEMU opened (relative to the working directory, which
 *     the guest has not changed yet at its first block);
 *   - its load address: read_maps (qemu_maps.c) takes the lowest mapping
 *     of the program's file offset 0.  In user mode QEMU maps guest memory
 *     at host address + guest_base, and for x86_64 on x86_64 guest_base is
 *     0 (both 7.2 and 10.0: the guest's mappings show in the host's
 *     /proc/self/maps at their guest addresses, 0x4000000000 on 7.2 and
 *     0x555555556000 on 10.0 for a PIE program), and the host's own
 *     mappings of the same file (the program is a host library, or QEMU
 *     itself) lie above it: QEMU and its libraries are mapped before the
 *     guest, at the top of the address space or at QEMU's own random
 *     PIE base, while the guest program is placed first, low.
 */
#include "qemu_plugin.h"

/* QEMU's options that take a value (linux-user/main.c), so that the
 * first argument after the options is found. */
static const char *const with_value[] = { "-plugin", "-0", "-L", "-E", "-U", "-cpu", "-s", "-R",
					  "-B", "-d", "-D", "-p", "-r", "-g", "-trace", "-dfilter" };

static char cmd_bin[PATH_MAX];

/* The guest's argv (g.args) and program path from our own command line,
 * which `btr record` or follow_exec built: qemu [options] BINARY ARGS,
 * "-0 ARGV0" among the options replacing BINARY as argv[0]. */
void read_cmdline(void)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	ssize_t k;
	while (buf && (k = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)k;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	if (!buf)
		return;
	size_t i = strlen(buf) + 1;   /* skip argv[0] */
	const char *argv0 = NULL;
	while (i < n && buf[i] == '-') {
		const char *o = buf + i;
		i += strlen(o) + 1;
		for (size_t j = 0; j < sizeof(with_value) / sizeof(with_value[0]); j++) {
			if (!strcmp(o, with_value[j]) && i < n) {
				if (!strcmp(o, "-0"))
					argv0 = buf + i;
				i += strlen(buf + i) + 1;
				break;
			}
		}
	}
	if (i >= n) {
		free(buf);
		return;
	}
	const char *bin = buf + i;
	snprintf(cmd_bin, sizeof(cmd_bin), "%s", bin);
	size_t rest = strlen(bin) + 1;
	size_t a0 = argv0 ? strlen(argv0) + 1 : rest;
	free(g.args);
	g.args = malloc(n - i - rest + a0);
	if (g.args) {
		memcpy(g.args, argv0 ? argv0 : bin, a0);
		memcpy(g.args + a0, bin + rest, n - i - rest);
		g.args_len = a0 + n - i - rest;
	}
	free(buf);
}

const char *user_binary(void)
{
	if (qemu_plugin_path_to_binary) {
		const char *p = qemu_plugin_path_to_binary();
		if (p)
			return p;
	}
	if (!cmd_bin[0])
		read_cmdline();
	return cmd_bin;
}

uint64_t user_start_code(void)
{
	return qemu_plugin_start_code ? qemu_plugin_start_code() : 0;
}
