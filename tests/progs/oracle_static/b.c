/* oracle_static: the second static sq (a.c) */
__attribute__((cold, noinline)) static int sq(int x)
{
	return x * 3;
}

int other(int x)
{
	return sq(x) + 1;
}
