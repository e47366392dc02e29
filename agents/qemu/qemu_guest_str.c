/* qemu_guest_str.c - guest strings and string vectors copied out of guest
 * memory through guest_read() (execve arguments).
 * Part of the QEMU plugin (qemu_plugin.h); private to agents/qemu/. */
#include "qemu_plugin.h"

/* Reads guest memory without trusting the guest's pointer: a bad one
 * makes the system call fail with EFAULT, which QEMU reports to the
 * guest, and must not crash us. */
int guest_read(uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len };
	struct iovec remote = { (void *)(uintptr_t)(addr + g.guest_base), len };
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

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

