/* call.c - calls the long-named functions of libcheck_longname.so
 * (longname.h), built twice: prog_benign_longname through the PLT,
 * prog_benign_longname_noplt with -fno-plt (call *name@GOTPCREL(%rip)).
 * Prints 23. */
#include <stdio.h>
#include "longname.h"

int main(void)
{
	int s = 10;
	for (int i = 0; i < 3; i++)
		s = ln128(s) + ln200(0) + ln1000(0) + ln4096(0) - 9;
	printf("%d\n", s + 1 + 2 + 3 + 4);
	return 0;
}
