/* flow_loops: loops, recursion, calls through function pointers and
 * tables, a switch jump table, LOOP/JRCXZ.  A flow-decoder test program:
 * about 20k instructions inside main, no I/O in the loops. */
#include <stdio.h>
#include <stdlib.h>

static volatile int sink;

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int op_add(int a, int b) { return a + b; }
static int op_sub(int a, int b) { return a - b; }
static int op_mul(int a, int b) { return a * b; }
static int op_xor(int a, int b) { return a ^ b; }
static int (*const ops[4])(int, int) = { op_add, op_sub, op_mul, op_xor };

static int classify(int v)
{
	switch (v % 9) {   /* dense cases: a jump table at -O1 */
	case 0: return v * 3;
	case 1: return v + 7;
	case 2: return v ^ 0x55;
	case 3: return v - 11;
	case 4: return v << 2;
	case 5: return v >> 1;
	case 6: return ~v;
	case 7: return v * v;
	default: return 1;
	}
}

static long asm_loops(long n)
{
	long acc = 0;
#if defined(__x86_64__)
	/* LOOP counts RCX down; JRCXZ skips when RCX is zero. */
	__asm__ volatile("1: add %%rcx, %0\n\tloop 1b\n\t"
			 "jrcxz 2f\n\tadd $1000, %0\n2:\n"
			 : "+r"(acc), "+c"(n) : : "cc");
#endif
	return acc;
}

__attribute__((noinline)) static int sum_array(const int *a, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		if (a[i] & 1)
			s += a[i];
		else
			s -= a[i] / 2;
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	int arr[64];
	for (int i = 0; i < 64; i++)
		arr[i] = (i * 2654435761u) >> 7;
	int acc = 0;
	for (int r = 0; r < 6 * n; r++) {
		acc += sum_array(arr, 64);
		for (int i = 0; i < 40; i++)
			acc += ops[(i + r) & 3](acc, i);
		for (int i = 0; i < 30; i++)
			acc += classify(acc + i);
	}
	acc += fib(13);
	acc += (int)asm_loops(50);
	sink = acc;
	return 0;
}
