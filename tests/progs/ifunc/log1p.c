/* log1p.c - calls libm's log1p, an IFUNC: inside libm it goes through
 * an IRELATIVE GOT slot that the resolver fills with __log1p_fma or
 * __log1p_sse2 (btr check gave got-overwrite for it).  Built three ways
 * (cmake/check_fixtures.cmake): prog_benign_ifunc (-lm),
 * prog_benign_ifunc_static (-static-pie: the program's own IRELATIVE
 * slots), prog_benign_ifunc_dl (-DVIA_DLOPEN: dlopen/dlclose of libm 20
 * times, each load resolving the slots again).  Prints the sum. */
#include <math.h>
#include <stdio.h>
#ifdef VIA_DLOPEN
#include <dlfcn.h>
#endif

int main(int argc, char **argv)
{
	(void)argv;
	volatile double x = 0.5 + argc;
	double s = 0;
#ifdef VIA_DLOPEN
	for (int i = 0; i < 20; i++) {
		void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
		double (*f)(double) = h ? (double (*)(double))dlsym(h, "log1p") : NULL;
		if (!f) {
			fprintf(stderr, "log1p: %s\n", dlerror());
			return 2;
		}
		s += f(x) + f(x * 2);
		dlclose(h);
	}
#else
	for (int i = 0; i < 20; i++)
		s += log1p(x) + log1p(x * 2);
#endif
	printf("%.3f\n", s);
	return 0;
}
