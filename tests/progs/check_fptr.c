/* check_fptr: a function pointer aimed into the middle of a function.
 * mid_target is written in assembly so that the address of its second
 * instruction is known (mid_inner, a label, not a function symbol).  A
 * `btr check` fixture: the indirect call must be reported as a call to a
 * non-entry. */
#include <stdio.h>

__asm__(".text\n"
	".globl mid_target\n"
	".type mid_target, @function\n"
	"mid_target:\n"
	"  movl $1, %eax\n"
	".globl mid_inner\n"
	"mid_inner:\n"
	"  movl $2, %eax\n"
	"  ret\n"
	".size mid_target, .-mid_target\n");

int mid_target(void);
extern char mid_inner[];

int main(void)
{
	int (*volatile fp)(void) = mid_target;
	int a = fp();                       /* legitimate: a function entry */
	fp = (int (*)(void))(void *)mid_inner;
	int b = fp();                       /* hijacked: the middle of mid_target */
	printf("%d %d\n", a, b);
	return a == 2 && b == 2 ? 0 : 1;   /* both run the second mov */
}
