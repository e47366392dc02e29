#!/usr/bin/env bash
# cli_headers.sh - every public header (include/btr/*.h) compiles on its own,
# as the first include of a file, under the strictest flags a user may build
# with: C99, C11 and C17 with -pedantic -Werror (no GNU extensions, no feature
# macros: no PATH_MAX, no enumerator above INT_MAX), and C++17 -pedantic
# -Werror (extern "C", no C-only constructs).  Each header is compiled once
# per language standard; a failing one is named with the compiler's first
# error.  Args: $1 btr binary, $2 build dir.
set -u
. "$(dirname "$0")/lib.sh"
src=$lib_src
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
warn=(-pedantic -Werror -Wall -Wextra)

n=0
for h in "$src"/include/btr/*.h; do
	name=${h##*/}
	n=$((n + 1))
	printf '#include <btr/%s>\nint btr_header_test_%d;\n' "$name" "$n" >"$tmp/t.c"
	cp "$tmp/t.c" "$tmp/t.cc"
	for std in c99 c11 c17; do
		cc -std=$std "${warn[@]}" -I"$src/include" -c "$tmp/t.c" -o "$tmp/t.o" 2>"$tmp/err" && ok ||
			bad "$name under -std=$std -pedantic -Werror: $(grep -m1 'error' "$tmp/err")"
	done
	c++ -std=c++17 "${warn[@]}" -I"$src/include" -c "$tmp/t.cc" -o "$tmp/t.o" 2>"$tmp/err" && ok ||
		bad "$name under C++17 -pedantic -Werror: $(grep -m1 'error' "$tmp/err")"
done
check "the headers were found ($n)" [ "$n" -ge 25 ]

# The umbrella header and every header together, in one C99 file.
{
	for h in "$src"/include/btr/*.h; do printf '#include <btr/%s>\n' "${h##*/}"; done
	echo 'int main(void) { return btr_errstr(0) == 0; }'
} >"$tmp/all.c"
cc -std=c99 "${warn[@]}" -I"$src/include" -c "$tmp/all.c" -o "$tmp/all.o" 2>"$tmp/err" && ok ||
	bad "all headers together under -std=c99: $(grep -m1 'error' "$tmp/err")"

# The 64-bit perf_event_attr bits stay usable as constants (macros, not
# enumerators beyond int: docs/library.md).
cat >"$tmp/pa.c" <<'EOF'
#include <btr/perfattr.h>
#include <stdint.h>
int main(void)
{
	uint64_t bits = BTR_PA_BUILD_ID | BTR_PA_AUX_OUTPUT | BTR_PA_DISABLED;
	return !(bits == ((1ull << 34) | (1ull << 31) | 1ull));
}
EOF
cc -std=c99 "${warn[@]}" -I"$src/include" -o "$tmp/pa" "$tmp/pa.c" 2>"$tmp/err" && ok ||
	bad "perfattr bits program: $(grep -m1 'error' "$tmp/err")"
check "BTR_PA_BUILD_ID is bit 34 and BTR_PA_AUX_OUTPUT bit 31" "$tmp/pa"

finish cli_headers "$n headers"
