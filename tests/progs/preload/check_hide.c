/* check_hide: an LD_PRELOAD "rootkit" library.  Its readdir() calls the
 * real one (dlsym RTLD_NEXT) and skips entries whose name starts with
 * "btr_hidden", so `ls` does not show them.  A `btr check` fixture
 * (cmake/check_fixtures.cmake builds libcheck_hide.so): the PLT calls of
 * ls to readdir must be reported as interposition. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <string.h>

struct dirent *readdir(DIR *d)
{
	static struct dirent *(*real)(DIR *);
	if (!real)
		real = (struct dirent * (*)(DIR *)) dlsym(RTLD_NEXT, "readdir");
	struct dirent *e;
	do
		e = real(d);
	while (e && strncmp(e->d_name, "btr_hidden", 10) == 0);
	return e;
}
