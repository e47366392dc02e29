/* benign_eval_o2.c - a benign program `btr check` must pass (tests/cli_check.sh):
 * a recursive evaluator built with -O2 (its btr-build line, CMakeLists.txt).
 * A case that evaluates a subtree for its effect falls through into the
 * next case, so that case's label - a switch-table target - is the
 * instruction right after a recursive call.  Taken for a longjmp, the
 * table jump unwound the shadow stack to the caller's frame and the
 * function's return was then reported as return-mismatch eval+0x9d ->
 * eval+0x79 (ld.bfd showed the same 38 times). */
#include <stdio.h>
#include <stdlib.h>

struct node {
	int op;
	long v;
	struct node *l, *r;
};

static long visits;

__attribute__((noipa)) static long eval(const struct node *n)
{
	visits++;
	switch (n->op) {
	case 0: return n->v;
	case 1: eval(n->r);   /* for its effect (visits), then as case 2 */
		/* fallthrough */
	case 2: return eval(n->l) + 1;
	case 3: eval(n->l);
		/* fallthrough */
	case 4: return eval(n->r) * 2;
	case 5: eval(n->r);
		/* fallthrough */
	case 6: return -eval(n->l);
	default: return 0;
	}
}

static struct node *mk(int depth, unsigned *seed)
{
	struct node *n = calloc(1, sizeof(*n));
	if (!n)
		exit(1);
	*seed = *seed * 1103515245u + 12345u;
	if (!depth) {
		n->v = (*seed >> 8) % 10;
		return n;
	}
	n->op = 1 + (int)((*seed >> 16) % 6);
	n->l = mk(depth - 1, seed);
	n->r = mk(depth - 1, seed);
	return n;
}

int main(int argc, char **argv)
{
	(void)argv;
	unsigned seed = (unsigned)argc;
	long s = eval(mk(6, &seed));
	printf("%ld %ld\n", s, visits);
	return 0;
}
/* btr-build: o2 */
