/* check_shellcode: a jump into mmap'd shellcode.  The program copies
 * "mov $42, %eax; ret" into anonymous executable memory and calls it.  A
 * `btr check` fixture: the call into memory no file backs must be
 * reported. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int main(void)
{
	static const unsigned char code[] = {0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3};
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	memcpy(m, code, sizeof(code));
	int (*volatile fp)(void) = (int (*)(void))m;
	int r = fp();
	printf("%d\n", r);
	return r == 42 ? 0 : 1;
}
