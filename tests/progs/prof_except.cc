// prof_except: a C++ exception thrown three frames below the function that
// catches it: main -> ex_catcher -> ex_mid -> ex_thrower (throws); the
// unwinder lands in ex_catcher's handler, which calls ex_after
// (tests/cli_flame.sh).
#include <stdexcept>

volatile int sink;

extern "C" __attribute__((noinline)) void ex_after(void)
{
	for (int i = 0; i < 4; i++)
		sink += i;
}

extern "C" __attribute__((noinline)) void ex_thrower(int v)
{
	if (v > 0)
		throw std::runtime_error("boom");
	sink++;
}

extern "C" __attribute__((noinline)) void ex_mid(int v)
{
	ex_thrower(v);
	sink++;
}

extern "C" __attribute__((noinline)) void ex_catcher(int v)
{
	try {
		ex_mid(v);
	} catch (const std::exception &) {
		ex_after();
	}
}

int main(int argc, char **)
{
	ex_catcher(argc);
	return 0;
}
