/* benign_asm_nocfi.c - hand-written assembly without CFI, called through
 * function pointers: the pattern of zstd's Huffman decoder loops
 * (huf_decompress_amd64.S), which in Debian's stripped zstd have neither a
 * symbol nor an FDE, so `btr check` knew no entry there (a false
 * call-non-entry in `zstd -d`).
 *
 * Layout, as the assembler and zstd's binary have it: a function with an
 * FDE (nocfi_before), alignment padding (long NOPs), asm_one (no CFI, no
 * function symbol, no ENDBR64), and asm_two right after asm_one's ret
 * with no padding at all, then asm_three after INT3 padding (0xcc fill, as
 * hand-written assembly and some linkers pad).  asm_one_mid (a label only)
 * is asm_one's second instruction: not a function start.
 *
 * Run without arguments: main calls nocfi_before, asm_one, asm_two and asm_three
 * through pointers and exits with 0 (0 findings: benign).  With the
 * argument "mid" it also calls asm_one_mid once, which must give exactly
 * one call-non-entry, at that address. */
#include <string.h>

long nocfi_before(long x);
long asm_one(long x);
long asm_two(long x);
long asm_three(long x);
long asm_one_mid(long x);

__asm__(".text\n"
	".p2align 4\n"
	".globl nocfi_before\n"
	".type nocfi_before, @function\n"
	"nocfi_before:\n"
	".cfi_startproc\n"
	"	lea 3(%rdi), %rax\n"
	"	ret\n"
	".cfi_endproc\n"
	".size nocfi_before, .-nocfi_before\n"
	/* no .type, no .cfi_*: a label only (STT_NOTYPE), padded to 32 */
	".p2align 5\n"
	"asm_one:\n"
	"	mov %rdi, %rax\n"
	"asm_one_mid:\n"
	"	add $1, %rax\n"
	"	ret\n"
	"asm_two:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	/* asm_two ends 13 bytes past the 32-byte boundary: 3 bytes of INT3 */
	".p2align 4, 0xcc\n"
	"asm_three:\n"
	"	lea 5(%rdi), %rax\n"
	"	ret\n");

typedef long (*fn_t)(long);

int main(int argc, char **argv)
{
	/* volatile: the calls stay indirect */
	fn_t volatile f[4] = { nocfi_before, asm_one, asm_two, asm_three };
	long s = 0;
	for (int i = 0; i < 100; i++)
		for (int k = 0; k < 4; k++)
			s += f[k](i);
	if (argc > 1 && !strcmp(argv[1], "mid")) {
		fn_t volatile m = asm_one_mid;
		m(5);   /* returns whatever %rax held, plus 1: not used */
	}
	/* sum over i of (i+3) + (i+1) + 2i + (i+5) = 5*4950 + 900 */
	return s == 5 * 4950 + 900 ? 0 : 1;
}
