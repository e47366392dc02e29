/* dl_other.c - libbtr_dl_other.so, the library tests/progs/qemu_dlclose.c
 * maps where libbtr_dl_loop.so was after unloading it.  dl_other(n), n >=
 * 1, executes 2 + 3n + 1 instructions (mov, mov, n times sub/dec/jnz,
 * ret); it touches no data, so it runs from a plain file mapping. */
__asm__(".text\n"
	".globl dl_other\n"
	".type dl_other, @function\n"
	"dl_other:\n"
	"	mov %rdi, %rcx\n"
	"	mov $7, %eax\n"
	"1:	sub %rcx, %rax\n"
	"	dec %rcx\n"
	"	jnz 1b\n"
	"	ret\n"
	".size dl_other, .-dl_other\n");
