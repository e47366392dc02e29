/* qemu_exec.h - what a program run by execve really is, as the kernel
 * sees it: `#!` scripts resolved to their interpreter, and whether the
 * final binary can run under qemu-x86_64 with the btr plugin.
 *
 * Why here: QEMU linux-user performs a guest execve as a host execve, so
 * the kernel would run the new program (or a script's interpreter)
 * natively and untraced.  The plugin (agents/qemu/qemu_plugin.c) and the recorder
 * (qemu.c) therefore resolve the program themselves and start
 * qemu-x86_64 on the real binary with the argv the kernel would build.
 * Shared by the plugin (agents/qemu) and the recorder only.
 */
#ifndef BTR_QEMU_EXEC_H
#define BTR_QEMU_EXEC_H

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define QX_MAX_DEPTH 4     /* nested interpreters, as the kernel's limit */
#define QX_BUF 256         /* the kernel reads this much of a script (BINPRM_BUF_SIZE) */

struct qx {
	char path[PATH_MAX];             /* the binary qemu must run */
	char **argv;                     /* its argv (malloc'd array; strings are the
					  * caller's or in @strs); NULL-terminated */
	int argc;
	const char *untraced;            /* non-NULL: runs natively, this says why */
	int untraced_err;                /* negative enum btr_error for @untraced */
	char strs[QX_MAX_DEPTH][2][QX_BUF]; /* interpreters and their arguments */
};

static inline void qx_free(struct qx *x)
{
	free(x->argv);
	x->argv = NULL;
}

/* Parses a "#!" line in @buf (@n bytes) into interpreter @interp and
 * optional argument @arg (the rest of the line, trimmed; "" if none).
 * Returns 0, or -1 if there is no interpreter. */
static inline int qx_shebang(const char *buf, size_t n, char *interp, char *arg)
{
	char line[QX_BUF];
	size_t k = 0;
	for (size_t i = 2; i < n && buf[i] != '\n' && k < sizeof(line) - 1; i++)
		line[k++] = buf[i];
	line[k] = 0;
	char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	char *e = p;
	while (*e && *e != ' ' && *e != '\t')
		e++;
	if (e == p)
		return -1;
	char *a = *e ? e + 1 : e;
	*e = 0;
	snprintf(interp, QX_BUF, "%s", p);
	while (*a == ' ' || *a == '\t')
		a++;
	size_t al = strlen(a);
	while (al && (a[al - 1] == ' ' || a[al - 1] == '\t' || a[al - 1] == '\r'))
		a[--al] = 0;
	snprintf(arg, QX_BUF, "%s", a);
	return 0;
}

/* Resolves execve(@file, @argv) like the kernel: scripts become
 * "interp [arg] file argv[1..]", nested up to QX_MAX_DEPTH.  Fills @x
 * (free with qx_free).  Returns 0 (check x->untraced), or a positive
 * errno the real execve would also fail with (ENOENT, EACCES, ENOEXEC,
 * ELOOP, ENOMEM): the caller then lets the real execve report it. */
static inline int qx_resolve(struct qx *x, const char *file, char *const *argv)
{
	memset(x, 0, sizeof(*x) - sizeof(x->strs));
	int argc = 0;
	while (argv && argv[argc])
		argc++;
	x->argv = calloc((size_t)argc + 2 * QX_MAX_DEPTH + 2, sizeof(char *));
	if (!x->argv)
		return ENOMEM;
	for (int i = 0; i < argc; i++)
		x->argv[i] = argv[i];
	x->argc = argc;
	const char *cur = file;
	for (int depth = 0;; depth++) {
		struct stat st;
		if (stat(cur, &st) < 0)
			return errno;
		if (!S_ISREG(st.st_mode) || access(cur, X_OK) < 0)
			return EACCES;
		int fd = open(cur, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		char buf[QX_BUF];
		ssize_t n = read(fd, buf, sizeof(buf));
		close(fd);
		if (n < 0)
			return errno;
		if (n >= 2 && buf[0] == '#' && buf[1] == '!') {
			if (depth == QX_MAX_DEPTH)
				return ELOOP;
			char *interp = x->strs[depth][0], *arg = x->strs[depth][1];
			if (qx_shebang(buf, (size_t)n, interp, arg) < 0)
				return ENOEXEC;
			/* argv[0] is replaced by interp [arg] script. */
			int add = arg[0] ? 2 : 1;
			int rest = x->argc > 0 ? x->argc - 1 : 0;
			memmove(x->argv + add + 1, x->argv + (x->argc > 0 ? 1 : 0), (size_t)rest * sizeof(char *));
			x->argv[0] = interp;
			if (arg[0])
				x->argv[1] = arg;
			x->argv[add] = (char *)cur;
			x->argc = add + 1 + rest;
			x->argv[x->argc] = NULL;
			cur = interp;
			continue;
		}
		snprintf(x->path, sizeof(x->path), "%s", cur);
		if (x->argc == 0) {
			/* The kernel allows an empty argv; QEMU needs argv[0]. */
			x->argv[0] = x->path;
			x->argc = 1;
		}
		Elf64_Ehdr *eh = (Elf64_Ehdr *)(void *)buf;
		if (n < (ssize_t)sizeof(Elf32_Ehdr) || memcmp(buf, ELFMAG, SELFMAG))
			return ENOEXEC;
		if (eh->e_ident[EI_CLASS] == ELFCLASS32) {
			x->untraced = "32-bit program";
			x->untraced_err = -BTR_ERR_UNSUPPORTED;
		} else if (n < (ssize_t)sizeof(*eh) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
			   eh->e_machine != EM_X86_64) {
			x->untraced = "not an x86-64 program";
			x->untraced_err = -BTR_ERR_UNSUPPORTED;
		} else if (st.st_mode & (S_ISUID | S_ISGID)) {
			x->untraced = (st.st_mode & S_ISUID) ? "set-uid program" : "set-gid program";
			x->untraced_err = -BTR_ERR_PERM;
		}
		return 0;
	}
}

/* argv as the PROCESS record stores it: each argument NUL-terminated.
 * Writes at most @size bytes into @out and returns the length used. */
static inline size_t qx_pack_args(char *const *argv, int argc, char *out, size_t size)
{
	size_t k = 0;
	for (int i = 0; i < argc && argv[i]; i++) {
		size_t l = strlen(argv[i]) + 1;
		if (k + l > size)
			break;
		memcpy(out + k, argv[i], l);
		k += l;
	}
	return k;
}

#endif
