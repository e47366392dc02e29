/* qemu_guest_str.c - guest strings and string vectors copied out of guest
 * memory through guest_read() (execve arguments), and the guest's argv
 * from QEMU's own command line (read_cmdline).
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

/* Copies a NUL-terminated guest string (NULL if unreadable). */
char *guest_strdup(uint64_t addr)
{
	size_t cap = 256, n = 0;
	char *s = malloc(cap);
	while (s) {
		if (n == cap) {
			char *ns = cap < (1u << 20) ? realloc(s, cap * 2) : NULL;
			if (!ns)
				break;
			s = ns;
			cap *= 2;
		}
		/* Up to the end of the page at a time: a read never crosses
		 * into a page the string may not reach (one system call per
		 * page, not per byte: an execve's environment is kilobytes). */
		size_t k = 4096 - ((addr + n) & 4095);
		if (k > cap - n)
			k = cap - n;
		if (guest_read(addr + n, s + n, k) < 0)
			break;
		char *z = memchr(s + n, 0, k);
		if (z)
			return s;
		n += k;
	}
	free(s);
	return NULL;
}

void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A guest NULL-terminated array of strings, copied; NULL if unreadable. */
char **guest_strv(uint64_t addr)
{
	size_t cap = 16, n = 0;
	char **v = calloc(cap, sizeof(char *));
	while (v && addr) {
		uint64_t p;
		if (guest_read(addr + 8 * n, &p, 8) < 0)
			break;
		if (n + 1 >= cap) {
			char **nv = cap < 65536 ? realloc(v, cap * 2 * sizeof(char *)) : NULL;
			if (!nv)
				break;
			v = nv;
			cap *= 2;
		}
		if (!p) {
			v[n] = NULL;
			return v;
		}
		if (!(v[n] = guest_strdup(p)))
			break;
		v[++n] = NULL;
	}
	free_strv(v);
	return addr ? NULL : calloc(1, sizeof(char *));
}

/* The guest's argv from our own command line, which `btr record` or
 * follow_exec built: qemu [options] BINARY ARGS, "-0 ARGV0" among the
 * options replacing BINARY as argv[0]. */
void read_cmdline(void)
{
	static const char *const with_value[] = { "-plugin", "-0", "-L", "-E", "-U", "-cpu", "-s", "-R",
						  "-B", "-d", "-D", "-p", "-r", "-g", "-trace", "-dfilter" };
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
	size_t rest = strlen(bin) + 1;
	size_t a0 = argv0 ? strlen(argv0) + 1 : rest;
	g.args = malloc(n - i - rest + a0);
	if (g.args) {
		memcpy(g.args, argv0 ? argv0 : bin, a0);
		memcpy(g.args + a0, bin + rest, n - i - rest);
		g.args_len = a0 + n - i - rest;
	}
	free(buf);
}
