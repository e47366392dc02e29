// flow_except: C++ exceptions (the unwinder walks the stack, calls
// personality routines through pointers, lands in catch blocks).
#include <stdexcept>

static volatile int sink;

__attribute__((noinline)) static int thrower(int d)
{
	if (d == 0)
		throw std::runtime_error("x");
	return thrower(d - 1) + 1;
}

__attribute__((noinline)) static int work(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += (i % 3) ? i : -i;
	return s;
}

int main()
{
	int caught = 0;
	for (int k = 0; k < 2; k++) {
		try {
			sink += thrower(3 + k);
		} catch (const std::exception &e) {
			caught++;
		}
		sink += work(300);
	}
	sink += caught;
	return 0;
}
