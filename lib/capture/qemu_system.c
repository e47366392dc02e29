/* qemu_system.c - whole-system recording (`btr record --system`,
 * docs/record.md "Whole-system recording"): boots a kernel under
 * qemu-system-x86_64 with btr's system plugin (agents/qemu-system/), which
 * writes the whole machine's flow, kernel and user code, as PT into the
 * .btr file.  Without --vm-kernel the distribution's kernel in /boot is
 * booted; without --initrd a minimal initramfs is generated here: busybox
 * (busybox-static), CMD with the shared libraries ldd names, and an /init
 * that runs CMD and powers the machine off. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btr/capture.h"
#include "btr/error.h"
#include "internal.h"
#include "output.h"

/* ---- the initramfs: a cpio "newc" archive ---- */

struct cpio {
	FILE *f;
	unsigned ino;
	int err;
};

static void cpio_pad(struct cpio *c)
{
	long pos = ftell(c->f);
	while (pos > 0 && (pos & 3)) {
		fputc(0, c->f);
		pos++;
	}
}

static void cpio_entry(struct cpio *c, const char *name, unsigned mode, unsigned rmaj, unsigned rmin,
		       const void *data, size_t size)
{
	fprintf(c->f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ++c->ino, mode, 0u, 0u,
		S_ISDIR(mode) ? 2u : 1u, 0u, size, 0u, 0u, rmaj, rmin, strlen(name) + 1, 0u);
	fwrite(name, 1, strlen(name) + 1, c->f);
	cpio_pad(c);
	if (size && fwrite(data, 1, size, c->f) != size)
		c->err = 1;
	cpio_pad(c);
}

/* Directories of @path ("lib/x86_64-linux-gnu/libc.so.6") first. */
static void cpio_dirs(struct cpio *c, const char *path)
{
	char d[PATH_MAX];
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(d, sizeof(d), "%.*s", (int)(s - path), path);
		cpio_entry(c, d, S_IFDIR | 0755, 0, 0, NULL, 0);   /* repeats are harmless */
	}
}

/* Host file @src as @name in the archive (mode kept). */
static int cpio_file(struct cpio *c, const char *src, const char *name)
{
	int fd = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		btr_err("%s: cannot be put into the initramfs: %s", src, fd < 0 ? strerror(errno) : "not a file");
		return -BTR_ERR_NOENT;
	}
	uint8_t *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	ssize_t got = buf ? read(fd, buf, (size_t)st.st_size) : -1;
	close(fd);
	if (got != st.st_size) {
		free(buf);
		btr_err("%s: cannot be read", src);
		return -BTR_ERR_IO;
	}
	while (*name == '/')
		name++;
	cpio_dirs(c, name);
	cpio_entry(c, name, S_IFREG | (st.st_mode & 0755), 0, 0, buf, (size_t)got);
	free(buf);
	return 0;
}

/* The shared libraries of @exe as ldd lists them (nothing for a static
 * program): each into the archive at its own path. */
static int cpio_libs(struct cpio *c, const char *exe)
{
	char cmd[PATH_MAX + 32], line[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "ldd '%s' 2>/dev/null", exe);
	if (strchr(exe, '\''))
		return 0;
	FILE *p = popen(cmd, "r");
	if (!p)
		return 0;
	int rc = 0;
	while (fgets(line, sizeof(line), p) && rc == 0) {
		char *s = strstr(line, "=> /");
		s = s ? s + 3 : strchr(line, '/');
		if (!s)
			continue;
		char *e = strchr(s, ' ');
		if (e)
			*e = 0;
		rc = cpio_file(c, s, s);
	}
	pclose(p);
	return rc;
}

/* Writes the generated initramfs for @argv to @path; @argv NULL: one whose
 * /init writes the kernel's /proc/kallsyms to the second serial port
 * (ttyS1) and powers off (kernel_symbols()). */
static int make_initrd(const char *path, char *const *argv)
{
	char busybox[PATH_MAX], exe[PATH_MAX];
	if (btr__find_in_path("busybox", busybox, sizeof(busybox)) < 0) {
		btr_err("--system needs busybox for the generated initramfs (apt-get install busybox-static), or --initrd");
		return -BTR_ERR_NOENT;
	}
	if (argv && btr__find_in_path(argv[0], exe, sizeof(exe)) < 0 && (snprintf(exe, sizeof(exe), "%s", argv[0]), 1) &&
	    access(exe, X_OK) < 0) {
		btr_err("%s: not found", argv[0]);
		return -BTR_ERR_CHILD;
	}
	struct cpio c = { .f = fopen(path, "we") };
	if (!c.f) {
		btr_err("%s: %s", path, strerror(errno));
		return -BTR_ERR_IO;
	}
	cpio_entry(&c, ".", S_IFDIR | 0755, 0, 0, NULL, 0);
	static const char *const dirs[] = { "dev", "proc", "sys", "tmp", "bin" };
	for (size_t i = 0; i < BTR_ARRAY_SIZE(dirs); i++)
		cpio_entry(&c, dirs[i], S_IFDIR | 0755, 0, 0, NULL, 0);
	cpio_entry(&c, "dev/console", S_IFCHR | 0600, 5, 1, NULL, 0);
	cpio_entry(&c, "dev/ttyS1", S_IFCHR | 0600, 4, 65, NULL, 0);
	int rc = cpio_file(&c, busybox, "bin/busybox");
	if (!rc)
		rc = cpio_libs(&c, busybox);
	if (!rc && argv)
		rc = cpio_file(&c, exe, exe);
	if (!rc && argv)
		rc = cpio_libs(&c, exe);
	/* /init: CMD, its status on the console, power off (or the symbols
	 * to ttyS1: run as root, so with their addresses). */
	char init[8192];
	size_t n = (size_t)snprintf(init, sizeof(init), "#!/bin/busybox sh\n/bin/busybox mount -t proc proc /proc\n%s%s%s",
				    argv ? "'" : "/bin/busybox cat /proc/kallsyms >/dev/ttyS1",
				    argv ? exe : "", argv ? "'" : "");
	for (int i = 1; argv && argv[i] && n < sizeof(init); i++) {
		if (strchr(argv[i], '\'')) {
			btr_err("--system: argument %d contains a quote (not passed into the VM)", i);
			rc = -BTR_ERR_INVAL;
			break;
		}
		n += (size_t)snprintf(init + n, sizeof(init) - n, " '%s'", argv[i]);
	}
	if (n < sizeof(init))
		n += (size_t)snprintf(init + n, sizeof(init) - n,
				      "\necho \"btr-system: exit status $?\"\n/bin/busybox poweroff -f\n");
	if (n >= sizeof(init)) {
		btr_err("--system: the command line is too long");
		rc = -BTR_ERR_INVAL;
	}
	if (!rc)
		cpio_entry(&c, "init", S_IFREG | 0755, 0, 0, init, n);
	cpio_entry(&c, "TRAILER!!!", 0, 0, 0, NULL, 0);
	if (fclose(c.f) != 0 || c.err) {
		btr_err("%s: write failed", path);
		rc = rc ? rc : -BTR_ERR_IO;
	}
	return rc;
}

/* ---- the kernel ---- */

/* The newest /boot/vmlinuz-*: @kernel, and its System.map to @map.
 * Returns 1, 0 when that map has no text symbols, or an error. */
static int find_kernel(const char *given, char *kernel, size_t ksize, char *map, size_t msize)
{
	if (given) {
		snprintf(kernel, ksize, "%s", given);
	} else {
		struct dirent **ents;
		int n = scandir("/boot", &ents, NULL, versionsort);
		kernel[0] = 0;
		for (int i = 0; i < n; i++) {
			if (!strncmp(ents[i]->d_name, "vmlinuz-", 8))
				snprintf(kernel, ksize, "/boot/%s", ents[i]->d_name);
			free(ents[i]);
		}
		if (n >= 0)
			free(ents);
		if (!kernel[0]) {
			btr_err("--system: no kernel in /boot (apt-get install linux-image-amd64, or give --vm-kernel)");
			return -BTR_ERR_NOENT;
		}
	}
	if (access(kernel, R_OK) < 0) {
		btr_err("%s: %s", kernel, strerror(errno));
		return -BTR_ERR_NOENT;
	}
	/* System.map-VERSION beside vmlinuz-VERSION, else System.map beside it. */
	const char *base = strrchr(kernel, '/');
	size_t dirlen = base ? (size_t)(base - kernel) : 0;
	base = base ? base + 1 : kernel;
	const char *ver = !strncmp(base, "vmlinuz-", 8) ? base + 8 : NULL;
	int n = -1;
	if (ver)
		n = snprintf(map, msize, "%.*s%sSystem.map-%s", (int)dirlen, kernel, dirlen ? "/" : "", ver);
	if (!ver || n < 0 || (size_t)n >= msize || access(map, R_OK) < 0)
		n = snprintf(map, msize, "%.*s%sSystem.map", (int)dirlen, kernel, dirlen ? "/" : "");
	if (n < 0 || (size_t)n >= msize || access(map, R_OK) < 0) {
		btr_err("%s: no System.map beside it (its symbols and interrupt entries are needed)", kernel);
		return -BTR_ERR_NOENT;
	}
	/* Debian's /boot/System.map-* is a one-line placeholder (the real
	 * one is in linux-image-VERSION-dbg). */
	FILE *f = fopen(map, "re");
	char line[512];
	int text = 0;
	while (f && !text && fgets(line, sizeof(line), f))
		text = strstr(line, " T ") || strstr(line, " t ");
	if (f)
		fclose(f);
	return text;   /* 0: Debian's placeholder (the real one is in linux-image-VERSION-dbg) */
}

/* ---- the kernel's symbols when its System.map is a placeholder ---- */

struct ksym {
	uint64_t a;
	size_t i;
	char t, name[200];
};

static int ksym_cmp(const void *x, const void *y)
{
	const struct ksym *a = x, *b = y;
	return a->a != b->a ? (a->a < b->a ? -1 : 1) : (a->i > b->i) - (a->i < b->i);
}

/* The serial output @raw of `cat /proc/kallsyms` (CR LF line ends, module
 * symbols with their "[module]") as a System.map at @out: sorted by
 * address, one "ADDR T NAME" a line.  Returns the text symbols written. */
static long kallsyms_to_map(const char *raw, const char *out)
{
	FILE *f = fopen(raw, "re");
	if (!f)
		return -1;
	struct ksym *v = NULL;
	size_t n = 0, cap = 0;
	char line[512];
	long text = 0;
	while (fgets(line, sizeof(line), f)) {
		struct ksym k = { .i = n };
		if (sscanf(line, "%" SCNx64 " %c %199s", &k.a, &k.t, k.name) != 3 || !k.a)
			continue;
		if (n == cap) {
			struct ksym *nv = realloc(v, (cap = cap ? 2 * cap : 65536) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[n++] = k;
		text += k.t == 't' || k.t == 'T';
	}
	fclose(f);
	qsort(v, n, sizeof(*v), ksym_cmp);
	FILE *o = text > 0 ? fopen(out, "we") : NULL;
	for (size_t i = 0; o && i < n; i++)
		fprintf(o, "%016" PRIx64 " %c %s\n", v[i].a, v[i].t, v[i].name);
	free(v);
	if (!o || fclose(o) != 0)
		return -1;
	return text;
}

/* mkdir -p @dir (new directories @mode); 0 when it is a directory. */
static int mkdir_p(const char *dir, mode_t mode)
{
	char d[PATH_MAX];
	if (snprintf(d, sizeof(d), "%s", dir) >= (int)sizeof(d))
		return -1;
	for (char *s = strchr(d + 1, '/');; s = strchr(s + 1, '/')) {
		if (s)
			*s = 0;
		if (mkdir(d, mode) < 0 && errno != EEXIST)
			return -1;
		if (!s)
			break;
		*s = '/';
	}
	struct stat st;
	return stat(d, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* A System.map for @kernel whose own map @map is a placeholder: the
 * guest's /proc/kallsyms, read in a first boot without a plugin (nokaslr,
 * as the recording boot: the same addresses), kept in btr's cache as
 * kallsyms-KERNEL-SIZE-MTIME (the next recording of the same kernel boots
 * once).  Writes its path to @map; a file to remove afterwards to @tmpmap
 * (no cache directory), else "". */
static int kernel_symbols(const char *qemu, const char *kernel, char *map, size_t msize, char *tmpmap, size_t tsize)
{
	struct stat ks;
	char dir[PATH_MAX], cached[PATH_MAX], raw[PATH_MAX], initrd[PATH_MAX], chardev[PATH_MAX + 32];
	const char *base = strrchr(kernel, '/');
	base = base ? base + 1 : kernel;
	tmpmap[0] = 0;
	if (stat(kernel, &ks) < 0)
		return -BTR_ERR_NOENT;
	int have_dir = btr__cache_dir(dir, sizeof(dir)) == 0;
	if (have_dir) {
		int n = snprintf(cached, sizeof(cached), "%s/kallsyms-%s-%lld-%lld", dir, base, (long long)ks.st_size,
				 (long long)ks.st_mtime);
		if (n < 0 || (size_t)n >= sizeof(cached))
			have_dir = 0;   /* (a path too long: no cache) */
		else if (access(cached, R_OK) == 0) {
			snprintf(map, msize, "%s", cached);
			return 0;
		}
	}
	const char *tmp = getenv("TMPDIR");
	tmp = tmp && *tmp ? tmp : "/tmp";
	snprintf(raw, sizeof(raw), "%s/btr-kallsyms.XXXXXX", tmp);
	snprintf(initrd, sizeof(initrd), "%s/btr-initrd.XXXXXX", tmp);
	int fr = mkstemp(raw), fi = fr >= 0 ? mkstemp(initrd) : -1;
	if (fr >= 0)
		close(fr);
	if (fi >= 0)
		close(fi);
	int rc = fr < 0 || fi < 0 ? -BTR_ERR_IO : make_initrd(initrd, NULL);
	if (!rc && strchr(raw, ',')) {
		btr_err("--system: QEMU's -serial option cannot take a path with a comma (%s)", raw);
		rc = -BTR_ERR_INVAL;
	}
	if (!rc) {
		btr_info("%s: its System.map is a placeholder; booting it once to read its /proc/kallsyms", kernel);
		/* the console (ttyS0) nowhere, ttyS1 into @raw */
		snprintf(chardev, sizeof(chardev), "file:%s", raw);
		char append[] = "console=ttyS0 nokaslr panic=-1 quiet rdinit=/init";
		char *qargv[] = { (char *)qemu, "-display", "none", "-monitor", "none", "-no-reboot", "-m", "256",
				  "-accel", "tcg", "-smp", "1", "-net", "none", "-kernel", (char *)kernel, "-initrd",
				  initrd, "-append", append, "-serial", "null", "-serial", chardev, NULL };
		pid_t pid = fork();
		if (pid == 0) {
			int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (dn >= 0) {
				dup2(dn, 0);
				dup2(dn, 1);
			}
			execv(qemu, qargv);
			_exit(127);
		}
		int st = 0;
		while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			btr_err("%s: the boot that reads its symbols failed (%s)", kernel, pid < 0 ? "fork" : "qemu");
			rc = -BTR_ERR_CHILD;
		}
	}
	if (!rc) {
		/* into the cache (a temporary name first, then renamed: a
		 * reader never sees half a map), else a temporary file */
		char out[PATH_MAX] = "";
		int fo = -1;
		if (have_dir && mkdir_p(dir, 0700) == 0 && (size_t)snprintf(out, sizeof(out), "%s.XXXXXX", cached) < sizeof(out))
			fo = mkstemp(out);
		if (fo < 0) {
			snprintf(out, sizeof(out), "%s/btr-sysmap.XXXXXX", tmp);
			fo = mkstemp(out);
			have_dir = 0;
		}
		if (fo >= 0)
			close(fo);
		long text = fo >= 0 ? kallsyms_to_map(raw, out) : -1;
		if (text < 1000) {
			btr_err("%s: no symbols could be read from its /proc/kallsyms (%ld)", kernel, text);
			if (fo >= 0)
				unlink(out);
			rc = -BTR_ERR_CHILD;
		} else if (have_dir && rename(out, cached) == 0) {
			snprintf(map, msize, "%s", cached);
		} else {
			snprintf(map, msize, "%s", out);
			snprintf(tmpmap, tsize, "%s", out);
		}
	}
	if (fr >= 0)
		unlink(raw);
	if (fi >= 0)
		unlink(initrd);
	return rc;
}

/* ---- recording ---- */

int btr_system_record(const struct btr_capture_opts *opts, struct btr_capture_result *res)
{
	char qemu[PATH_MAX], plugin[PATH_MAX], kernel[PATH_MAX], map[PATH_MAX], initrd[PATH_MAX] = "";
	char partial[PATH_MAX], append[4096], parg[4 * PATH_MAX + 64];
	char tmpmap[PATH_MAX] = "";   /* a System.map made here, not kept (kernel_symbols) */
	memset(res, 0, sizeof(*res));
	if (!opts || !opts->argv || !opts->argv[0] || !opts->output || opts->output_fd > 0)
		return -BTR_ERR_INVAL;
	const char *q = getenv("BTR_QEMU_SYSTEM");
	if (q && *q)
		snprintf(qemu, sizeof(qemu), "%s", q);
	else if (btr__find_in_path("qemu-system-x86_64", qemu, sizeof(qemu)) < 0) {
		btr_err("--system needs qemu-system-x86_64 10 or later (apt-get install "
			"qemu-system-x86/bookworm-backports)");
		return -BTR_ERR_NODEV;
	}
	const char *pe = getenv("BTR_QEMU_SYSTEM_PLUGIN");
	static const char *const rel[] = { "/btr-qemu-system.so", "/../lib/btr/btr-qemu-system.so" };
	if (pe && *pe)
		snprintf(plugin, sizeof(plugin), "%s", pe);
	else if (btr__find_beside_exe(rel, BTR_ARRAY_SIZE(rel), R_OK, plugin, sizeof(plugin)) < 0) {
		btr_err("btr-qemu-system.so not found next to the btr binary (set BTR_QEMU_SYSTEM_PLUGIN)");
		return -BTR_ERR_NOENT;
	}
	int rc = find_kernel(opts->vm_kernel, kernel, sizeof(kernel), map, sizeof(map));
	if (rc < 0)
		return rc;
	int map_text = rc;
	if (opts->vm_initrd) {
		snprintf(initrd, sizeof(initrd), "%s", opts->vm_initrd);
		if (access(initrd, R_OK) < 0) {
			btr_err("%s: %s", initrd, strerror(errno));
			return -BTR_ERR_NOENT;
		}
	} else {
		const char *tmp = getenv("TMPDIR");
		snprintf(initrd, sizeof(initrd), "%s/btr-initrd.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		int fd = mkstemp(initrd);
		if (fd < 0) {
			btr_err("%s: %s", initrd, strerror(errno));
			return -BTR_ERR_IO;
		}
		close(fd);
		if ((rc = make_initrd(initrd, opts->argv)) < 0) {
			unlink(initrd);
			return rc;
		}
	}
	if (map_text == 0 && kernel_symbols(qemu, kernel, map, sizeof(map), tmpmap, sizeof(tmpmap)) < 0)
		btr_warn("%s has no text symbols and the kernel's /proc/kallsyms could not be read: without the "
			 "kernel's interrupt and exception entry points its events are guessed, and the trace has gaps "
			 "and no kernel function names", map);
	/* nokaslr: System.map's addresses are the running kernel's. */
	snprintf(append, sizeof(append), "console=ttyS0 nokaslr panic=-1 quiet rdinit=/init%s%s",
		 opts->vm_append ? " " : "", opts->vm_append ? opts->vm_append : "");
	const char *filter = opts->user && !opts->kernel ? "user" : opts->kernel && !opts->user ? "kernel" : "all";
	snprintf(partial, sizeof(partial), "%s.partial", opts->output);
	const char *name = strrchr(opts->argv[0], '/');
	name = name ? name + 1 : opts->argv[0];
	if (strchr(partial, ',') || strchr(map, ',') || strchr(name, ',')) {
		btr_err("--system: QEMU's -plugin option cannot take a path with a comma (%s)", partial);
		rc = -BTR_ERR_INVAL;
		goto out;
	}
	snprintf(parg, sizeof(parg), "%s,out=%s,sysmap=%s,filter=%s,cmd=%s", plugin, partial, map, filter, name);
	char *qargv[] = { qemu, "-nographic", "-no-reboot", "-m", "256", "-accel", "tcg", "-smp", "1", "-net", "none",
			  "-kernel", kernel, "-initrd", initrd, "-append", append, "-plugin", parg, NULL };
	pid_t pid = fork();
	if (pid < 0) {
		rc = -BTR_ERR_CHILD;
		goto out;
	}
	if (pid == 0) {
		execv(qemu, qargv);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		btr_err("%s ended with %s %d%s", qemu, WIFEXITED(st) ? "status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
			WIFEXITED(st) && WEXITSTATUS(st) == 127 ? " (could not run it)" : "");
		rc = -BTR_ERR_CHILD;
		goto out;
	}
	struct stat ps;
	if (stat(partial, &ps) < 0 || rename(partial, opts->output) < 0) {
		btr_err("%s: the plugin wrote no trace", partial);
		rc = -BTR_ERR_IO;
		goto out;
	}
	res->exited = 1;
	res->processes = 1;
	res->threads = 1;
	res->pt_bytes = (uint64_t)ps.st_size;
	rc = 0;
out:
	if (!opts->vm_initrd && initrd[0])
		unlink(initrd);
	if (tmpmap[0])
		unlink(tmpmap);
	return rc;
}
