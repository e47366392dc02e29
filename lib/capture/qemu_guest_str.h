/* qemu_guest_str.h - guest strings and string vectors copied out of guest
 * memory through guest_read() (execve arguments).
 * Split from qemu_plugin.c (included inside its BTR_QEMU_PLUGIN_BUILD
 * part only, once); private to lib/capture/. */
/* Copies a NUL-terminated guest string (NULL if unreadable). */
static char *guest_strdup(uint64_t addr)
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
		/* Byte-wise reads cross page ends safely; strings are short. */
		if (guest_read(addr + n, s + n, 1) < 0)
			break;
		if (!s[n])
			return s;
		n++;
	}
	free(s);
	return NULL;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A guest NULL-terminated array of strings, copied; NULL if unreadable. */
static char **guest_strv(uint64_t addr)
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
