#!/usr/bin/env bash
# cli_python_tables.sh - the Python binding's numpy arrays against what is
# not the binding (tests/test_python_dtypes.py):
# - every field of the branch, block and edge dtypes against offsetof and
#   sizeof of the C structs, from a program compiled against include/btr/;
# - the blocks and edges of a recorded trace, field by field, against the
#   CLI's tables of them: `btr diff OTHER TRACE --format json` lists every
#   block and edge of TRACE as "only in B" when OTHER (another static
#   program) shares no module with it.
# The binding is loaded from the source tree with the build's libbtr.so.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3

need_qemu
if ! "$py" -c "import numpy" 2>/dev/null; then
	if [ "${BTR_REQUIRE_ORACLES:-0}" = 1 ] && [ "${BTR_ALLOW_MISSING_ORACLES:-0}" != 1 ]; then
		bad "python3-numpy missing (scripts/deps.sh installs it)"
		finish cli_python_tables
	fi
	skip "python3-numpy not installed"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lib=$(ls "$build"/libbtr.so.0 2>/dev/null || ls "$build"/libbtr.so* | head -1)
check "libbtr.so built ($lib)" test -r "$lib"
san=()   # an AddressSanitizer build's library: its runtimes first
grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null &&
	san=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
	     ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
pyrun() { env "${san[@]}" BTR_LIBRARY="$lib" PYTHONPATH="$src/python" "$py" -s "$src/tests/test_python_dtypes.py" "$@"; }
# each ok/bad line of the script is one assertion
lines() { while read -r st msg; do if [ "$st" = ok ]; then ok; else bad "$msg"; fi; done <"$1"; }

# ---- dtypes against offsetof and sizeof
if oracle cc "the binding's dtypes against the C structs' offsetof"; then
	cat >"$tmp/layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "btr/branch.h"
#include "btr/blocks.h"
#define F(s, f) printf(#s " " #f " %zu %zu\n", offsetof(struct s, f), sizeof(((struct s *)0)->f))
int main(void)
{
	F(btr_branch, from); F(btr_branch, to); F(btr_branch, tsc); F(btr_branch, insns);
	F(btr_branch, tid); F(btr_branch, cycles); F(btr_branch, flags); F(btr_branch, kind);
	F(btr_branch, pid);
	F(btr_block, module); F(btr_block, start); F(btr_block, end); F(btr_block, count);
	F(btr_block, insns);
	F(btr_edge, from_module); F(btr_edge, to_module); F(btr_edge, from); F(btr_edge, to);
	F(btr_edge, count); F(btr_edge, kind); F(btr_edge, taken);
	printf("btr_branch . 0 %zu\nbtr_block . 0 %zu\nbtr_edge . 0 %zu\n", sizeof(struct btr_branch),
	       sizeof(struct btr_block), sizeof(struct btr_edge));
	return 0;
}
C
	cc -I "$src/include" -o "$tmp/layout" "$tmp/layout.c" 2>"$tmp/cc.err"
	check "layout program compiled: $(head -1 "$tmp/cc.err")" test -x "$tmp/layout"
	"$tmp/layout" >"$tmp/layout.txt"
	pyrun layout "$tmp/layout.txt" >"$tmp/layout.out" 2>&1
	check "layout script ran: $(grep -v '^ok\|^bad' "$tmp/layout.out" | tail -1)" test -s "$tmp/layout.out"
	lines "$tmp/layout.out"
	check "dtypes: all 24 fields and sizes compared" [ "$(grep -c '^ok' "$tmp/layout.out")" -eq 24 ]
fi

# ---- blocks and edges against btr diff's tables
"$btr" record -q -b qemu -o "$tmp/t.btr" -- "$build/prog_nolibc_step" >/dev/null 2>"$tmp/rec.err"
check "record prog_nolibc_step: $(tail -1 "$tmp/rec.err")" test -s "$tmp/t.btr"
"$btr" record -q -b qemu -o "$tmp/o.btr" -- "$build/prog_nolibc_fork" >/dev/null 2>>"$tmp/rec.err"
check "record prog_nolibc_fork: $(tail -1 "$tmp/rec.err")" test -s "$tmp/o.btr"
"$btr" diff --format json "$tmp/o.btr" "$tmp/t.btr" >"$tmp/diff.json" 2>"$tmp/diff.err"; rc=$?
check "btr diff exit 0 (got $rc: $(head -1 "$tmp/diff.err"))" [ $rc -eq 0 ]
check "btr diff: no block of the trace is shared with the other" \
	"$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(d["blocks_same"] or d["n_blocks_changed"])' \
	"$tmp/diff.json"
pyrun tables "$tmp/t.btr" "$tmp/diff.json" >"$tmp/tables.out" 2>&1
check "tables script ran: $(grep -v '^ok\|^bad' "$tmp/tables.out" | tail -1)" test -s "$tmp/tables.out"
lines "$tmp/tables.out"
check "tables: blocks, edges and both arms compared" [ "$(grep -c '^ok' "$tmp/tables.out")" -eq 3 ]

finish cli_python_tables
