/* qemu_dlclose: module lifetimes (tests/cli_dlclose.sh).  argv[1] is
 * libbtr_dl_loop.so, argv[2] libbtr_dl_other.so.
 *   1. dlopen argv[1], dl_loop(20000) (60,003 instructions), dlclose;
 *   2. dlopen argv[2] to learn where dl_other lies in it, dlclose;
 *   3. map argv[2]'s file where argv[1] was and run dl_other(1000) there
 *      (3,003 instructions), munmap: another module at the addresses of
 *      the closed one;
 *   4. dlopen argv[1] again, dl_loop(500) (1,503 instructions), dlclose.
 * Exits 0, or 2..9 naming the step that failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef long (*fn)(long);

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	fn f = h ? (fn)dlsym(h, "dl_loop") : 0;
	Dl_info di;
	if (!f || !dladdr((void *)f, &di))
		return 3;
	char *base = di.dli_fbase;
	long r = f(20000);
	dlclose(h);

	h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	fn g = h ? (fn)dlsym(h, "dl_other") : 0;
	if (!g || !dladdr((void *)g, &di))
		return 4;
	size_t off = (size_t)((char *)g - (char *)di.dli_fbase);
	dlclose(h);
	int fd = open(argv[2], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return 5;
	size_t len = ((size_t)st.st_size + 4095) & ~(size_t)4095;
	/* the file's pages at its load base: code lies at file offset ==
	 * link address in a small -z separate-code object */
	void *m = mmap(base, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0);
	close(fd);
	if (m != base)
		return 6;
	r += ((fn)(base + off))(1000);
	munmap(m, len);

	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	f = h ? (fn)dlsym(h, "dl_loop") : 0;
	if (!f)
		return 7;
	r += f(500);
	dlclose(h);
	return r == 200010000 + 125250 + 7 - 500500 ? 0 : 8;
}
