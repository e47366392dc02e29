/* benign_builtin_setjmp.c - gcc's __builtin_setjmp/__builtin_longjmp, as
 * Ruby's VM uses them (EC_JUMP_TAG: `raise` unwinds to rb_vm_exec): the
 * longjmp is an indirect jump to a label of the setjmp's function that
 * follows no call and is no function entry; only that function's own
 * `lea label(%rip)` (storing it in the buffer) takes its address.  Before,
 * `btr check` gave jump-non-entry for the jump and return-mismatch for the
 * first return after it (the frames it skipped stayed on the shadow
 * stack).  Exits 0 after 50 round trips through three frames. */
static void *volatile buf[5];
static volatile int depth_seen;

__attribute__((noinline)) static void thrower(int n)
{
	depth_seen = n;
	__builtin_longjmp((void **)buf, 1);
}

/* through a pointer: gcc would see that thrower does not return */
static void (*volatile throw_fn)(int) = thrower;

__attribute__((noinline)) static void middle(int n)
{
	if (n > 0)
		middle(n - 1);
	else
		throw_fn(n + 7);
	depth_seen = -1;   /* not reached */
}

__attribute__((noinline)) static int catcher(int n)
{
	if (__builtin_setjmp((void **)buf) == 0) {
		middle(n % 3);
		return -1;   /* not reached */
	}
	return depth_seen;
}

int main(void)
{
	int s = 0;
	for (int i = 0; i < 50; i++)
		s += catcher(i);
	return s == 50 * 7 ? 0 : 1;
}
