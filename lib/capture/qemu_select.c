/* qemu_select.c - which qemu-x86_64 the qemu backend runs, and why.
 *
 * Why a choice at all: the backend is a TCG plugin, and not every
 * qemu-x86_64 loads plugins (Debian 13's qemu-user is a static build
 * without -plugin).  So the candidates are tried in a fixed order, each
 * checked cheaply (a static binary is rejected from its ELF header without
 * running it; the others run once with the plugin in probe mode), and the
 * first that loads the plugin is used.  scripts/build-qemu.sh builds one
 * from the distribution's source package when the machine has none.
 */
#include "btr/capture.h"
#include "btr/error.h"
#include "internal.h"
#include "output.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int btr__find_in_path(const char *name, char *buf, size_t size)   /* output.h */
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		if ((size_t)snprintf(buf, size, "%.*s/%s", (int)n, n ? path : ".", name) < size &&
		    access(buf, X_OK) == 0) {
			struct stat st;
			if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
				return 0;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return -BTR_ERR_NOENT;
}

/* Runs @argv (stdin /dev/null, stdout and stderr into @out, at most
 * @size - 1 bytes kept); returns its wait status, or -1. */
static int run_capture(char *const argv[], char *out, size_t size)
{
	int pfd[2], st = -1;
	out[0] = 0;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execv(argv[0], argv);
		dprintf(2, "cannot execute: %s", strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	size_t n = 0;
	char chunk[256];
	ssize_t k;
	while ((k = read(pfd[0], chunk, sizeof(chunk))) > 0 || (k < 0 && errno == EINTR)) {
		size_t take = k > 0 ? (size_t)k : 0;
		if (take > size - 1 - n)
			take = size - 1 - n;
		memcpy(out + n, chunk, take);
		n += take;
	}
	out[n] = 0;
	close(pfd[0]);
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

/* 1: @path is an x86-64 ELF executable without PT_INTERP (statically
 * linked: it cannot dlopen a plugin); 0: it has one; -1: not an ELF file
 * (a wrapper script, say) or unreadable. */
static int elf_static(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int rc = -1;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 256) {
		rc = 1;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph)) {
				rc = -1;
				break;
			}
			if (ph.p_type == PT_INTERP) {
				rc = 0;
				break;
			}
		}
	}
	close(fd);
	return rc;
}

/* "qemu-x86_64 version 7.2.22 (Debian ...)" -> "7.2.22" */
static void qemu_version(const char *path, char *buf, size_t size)
{
	char out[400];
	char *argv[] = { (char *)path, "--version", NULL };
	buf[0] = 0;
	if (run_capture(argv, out, sizeof(out)) != 0)
		return;
	const char *v = strstr(out, "version ");
	if (v) {
		v += 8;
		snprintf(buf, size, "%.*s", (int)strcspn(v, " \n("), v);
	}
}

/* ---- does this QEMU load plugins? ---- */

/* The answers for this process: `btr info` and `btr record` probe each
 * candidate once. */
static struct probe_entry {
	char qemu[PATH_MAX], plugin[PATH_MAX];
	int rc;
	char why[PATH_MAX + 1024];
} probe_cache[2 * BTR_QEMU_MAX_CANDIDATES];
static size_t probe_next;

int btr_qemu_probe_plugin(const char *qemu, const char *plugin, char *why, size_t why_size)
{
	if (!qemu || !plugin)
		return -BTR_ERR_INVAL;
	struct probe_entry *e = NULL;
	for (size_t i = 0; i < BTR_ARRAY_SIZE(probe_cache) && !e; i++)
		if (!strcmp(probe_cache[i].qemu, qemu) && !strcmp(probe_cache[i].plugin, plugin))
			e = &probe_cache[i];
	if (!e) {
		e = &probe_cache[probe_next++ % BTR_ARRAY_SIZE(probe_cache)];
		snprintf(e->qemu, sizeof(e->qemu), "%s", qemu);
		snprintf(e->plugin, sizeof(e->plugin), "%s", plugin);
		e->rc = 0;
		e->why[0] = 0;
		char out[400] = "";
		if (elf_static(qemu) == 1) {
			snprintf(out, sizeof(out), "static build");
		} else {
			char parg[PATH_MAX + 16];
			snprintf(parg, sizeof(parg), "%s,probe=on", plugin);
			char *prog = access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
			char *argv[] = { (char *)qemu, "-plugin", parg, prog, NULL };
			if (run_capture(argv, out, sizeof(out)) == 0)
				out[0] = 0;
			else if (!out[0])
				snprintf(out, sizeof(out), "exit status not 0");
			out[strcspn(out, "\n")] = 0;
		}
		if (out[0]) {
			/* "qemu-x86_64: Could not load plugin SO: SO: undefined
			 * symbol: X": the reason is what follows the last SO */
			const char *r = out;
			size_t pl = strlen(plugin);
			for (const char *s = strstr(out, plugin); s; s = strstr(s + 1, plugin))
				if (s[pl] == ':' && s[pl + 1] == ' ' && s[pl + 2])
					r = s + pl + 2;
			e->rc = -BTR_ERR_NODEV;
			snprintf(e->why, sizeof(e->why),
				 "%s cannot load TCG plugins (%s%.160s%s): build one with `make qemu` "
				 "(scripts/build-qemu.sh) or point BTR_QEMU at a qemu-x86_64 built with --enable-plugins",
				 qemu, strcmp(out, "static build") ? "\"" : "", r, strcmp(out, "static build") ? "\"" : "");
		}
	}
	if (why && why_size)
		snprintf(why, why_size, "%s", e->why);
	return e->rc;
}

/* ---- the candidates ---- */

/* The directory scripts/build-qemu.sh caches its builds in (output.h). */
int btr__cache_dir(char *buf, size_t size)
{
	const char *c = getenv("BTR_QEMU_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	if (c && *c)
		return (size_t)snprintf(buf, size, "%s", c) < size ? 0 : -1;
	if (x && *x)
		return (size_t)snprintf(buf, size, "%s/btr", x) < size ? 0 : -1;
	if (h && *h)
		return (size_t)snprintf(buf, size, "%s/.cache/btr", h) < size ? 0 : -1;
	return -1;
}

/* The newest complete build in the cache: CACHE/qemu-VERSION/bin/qemu-x86_64
 * beside CACHE/qemu-VERSION/complete. */
static int find_cached(char *buf, size_t size)
{
	char dir[PATH_MAX], best[NAME_MAX + 1] = "";
	if (btr__cache_dir(dir, sizeof(dir)) < 0)
		return -BTR_ERR_NOENT;
	DIR *d = opendir(dir);
	if (!d)
		return -BTR_ERR_NOENT;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "qemu-", 5) || (best[0] && strverscmp(de->d_name, best) <= 0))
			continue;
		char p[PATH_MAX + 2 * NAME_MAX];
		snprintf(p, sizeof(p), "%s/%s/complete", dir, de->d_name);
		if (access(p, F_OK) < 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s/bin/qemu-x86_64", dir, de->d_name);
		if (access(p, X_OK) == 0)
			snprintf(best, sizeof(best), "%s", de->d_name);
	}
	closedir(d);
	if (!best[0] || (size_t)snprintf(buf, size, "%s/%s/bin/qemu-x86_64", dir, best) >= size)
		return -BTR_ERR_NOENT;
	return 0;
}

/* PREFIX/lib/btr/qemu-x86_64 for btr in PREFIX/bin (`make install`). */
static int find_installed(char *buf, size_t size)
{
	static const char *const rel[] = { "/../lib/btr/qemu-x86_64" };
	return btr__find_beside_exe(rel, BTR_ARRAY_SIZE(rel), X_OK, buf, size);
}

/* Lists the candidates that exist, each file once (by device and inode),
 * without probing them. */
static void list_candidates(const char *hint, struct btr_qemu_selection *out)
{
	memset(out, 0, sizeof(*out));
	out->chosen = -1;
	const char *env = getenv("BTR_QEMU");
	if (!hint && env && *env)
		hint = env;
	char p[PATH_MAX];
	if (hint) {
		int ok = strchr(hint, '/') ? access(hint, X_OK) == 0 && snprintf(p, sizeof(p), "%s", hint) > 0
					   : btr__find_in_path(hint, p, sizeof(p)) == 0;
		if (ok) {
			snprintf(out->c[0].path, sizeof(out->c[0].path), "%s", p);
			out->c[0].source = "BTR_QEMU";
			out->n = 1;
		}
		return;
	}
	struct stat seen[BTR_QEMU_MAX_CANDIDATES];
	for (int k = 0; k < 4; k++) {
		static const char *const src[] = { "PATH", "system", "self-built", "installed" };
		int rc = -1;
		switch (k) {
		case 0: rc = btr__find_in_path("qemu-x86_64", p, sizeof(p)); break;
		case 1:
			snprintf(p, sizeof(p), "/usr/bin/qemu-x86_64");
			rc = access(p, X_OK);
			break;
		case 2: rc = find_cached(p, sizeof(p)); break;
		case 3: rc = find_installed(p, sizeof(p)); break;
		}
		struct stat st;
		if (rc < 0 || stat(p, &st) < 0)
			continue;
		int dup = 0;
		for (size_t i = 0; i < out->n; i++)
			dup |= seen[i].st_dev == st.st_dev && seen[i].st_ino == st.st_ino;
		if (dup)
			continue;
		seen[out->n] = st;
		snprintf(out->c[out->n].path, sizeof(out->c[0].path), "%s", p);
		out->c[out->n].source = src[k];
		out->n++;
	}
}

int btr_qemu_find(const char *hint, char *buf, size_t size)
{
	struct btr_qemu_selection *s = malloc(sizeof(*s));
	if (!s)
		return -BTR_ERR_NOMEM;
	list_candidates(hint, s);
	int rc = s->n ? 0 : -BTR_ERR_NOENT;
	if (s->n)
		snprintf(buf, size, "%s", s->c[0].path);
	free(s);
	return rc;
}

int btr_qemu_select(const char *hint, const char *plugin, struct btr_qemu_selection *out)
{
	if (!plugin || !out)
		return -BTR_ERR_INVAL;
	list_candidates(hint, out);
	for (size_t i = 0; i < out->n; i++) {
		struct btr_qemu_candidate *c = &out->c[i];
		int st = elf_static(c->path);
		if (st >= 0)   /* not a wrapper script: ask it */
			qemu_version(c->path, c->version, sizeof(c->version));
		char why[PATH_MAX + 1024];
		if (btr_qemu_probe_plugin(c->path, plugin, why, sizeof(why)) == 0) {
			c->usable = true;
			out->chosen = (int)i;
			out->n = i + 1;
			return 0;
		}
		/* the reason without the path and the remedy */
		const char *r = strstr(why, "cannot load");
		const char *end = r ? strstr(r, "): ") : NULL;
		snprintf(c->why, sizeof(c->why), "%.*s", r ? (int)(end ? end - r + 1 : (ptrdiff_t)strlen(r)) : 0,
			 r ? r : "");
	}
	return -BTR_ERR_NODEV;
}

int btr_qemu_find_plugin(const char *hint, char *buf, size_t size)
{
	const char *env = getenv("BTR_QEMU_PLUGIN");
	if (!hint && env && *env)
		hint = env;
	if (hint) {
		if (access(hint, R_OK) < 0)
			return -BTR_ERR_NOENT;
		if (!realpath(hint, buf))
			snprintf(buf, size, "%s", hint);
		return 0;
	}
	static const char *const rel[] = { "/btr-qemu.so", "/../lib/btr/btr-qemu.so" };
	return btr__find_beside_exe(rel, BTR_ARRAY_SIZE(rel), R_OK, buf, size);
}
