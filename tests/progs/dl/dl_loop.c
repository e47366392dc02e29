/* dl_loop.c - libbtr_dl_loop.so, the library tests/progs/qemu_dlclose.c
 * loads, runs and unloads.  The function is written in assembly so that
 * its instruction count is known exactly in every build: for n >= 1,
 * dl_loop(n) executes 2 + 3n + 1 instructions (mov, xor, n times
 * add/dec/jnz, ret). */
__asm__(".text\n"
	".globl dl_loop\n"
	".type dl_loop, @function\n"
	"dl_loop:\n"
	"	mov %rdi, %rcx\n"
	"	xor %eax, %eax\n"
	"1:	add %rcx, %rax\n"
	"	dec %rcx\n"
	"	jnz 1b\n"
	"	ret\n"
	".size dl_loop, .-dl_loop\n");
