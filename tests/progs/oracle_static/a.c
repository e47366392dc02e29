/* oracle_static: two static functions named sq in two files (a.c, b.c),
 * built by tests/cli_oracles.sh with -Wl,--emit-relocs for llvm-bolt; b.c's
 * is cold, so it lies below a.c's although it follows it in .symtab (BOLT
 * numbers locals by address: b.c's is sq/1, a.c's sq/2). */
static int sq(int x)
{
	return x * x + 1;
}

int other(int);
volatile int sink;

int main(void)
{
	int s = 0;
	for (int i = 0; i < 100000; i++)
		s += sq(i);
	for (int i = 0; i < 1000; i++)
		s += other(i);
	sink = s;
	return 0;
}
