/* qemu_dlopen: loads libm at run time, calls into it through a pointer,
 * unloads it.  A capture test program: the module map must show libm's
 * load and unload, and the flow inside libm must decode. */
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
	void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 2;
	double (*fcos)(double) = (double (*)(double))dlsym(h, "cos");
	double (*fsqrt)(double) = (double (*)(double))dlsym(h, "sqrt");
	if (!fcos || !fsqrt)
		return 3;
	volatile double acc = 0;
	for (int i = 0; i < 200; i++)
		acc += fcos(i * 0.01) + fsqrt(i);
	dlclose(h);
	return acc > 0 ? 0 : 4;
}
