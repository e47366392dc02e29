#!/usr/bin/env bash
# cli_callgraph.sh - `btr callgraph` on programs with known call trees
# recorded with `btr record -b qemu`: fib(10)'s call counts and callers
# (from the recursion), inclusive = self for a leaf-only recursion, tail
# calls and longjmp as edges, text/json/dot output, bad input.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
src=$(cd "$(dirname "$0")" && pwd)
insns_of() { "$btr" report --format json "$1" | grep -m1 -o '"instructions": [0-9]*' | grep -o '[0-9]*$'; }

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

for p in prof_fib prof_shapes; do
  "$btr" record -q -b qemu -o $p.btr -- "$build/prog_$p" >/dev/null 2>&1
  check "record $p" [ -s $p.btr ]
done
"$btr" callgraph --format json prof_fib.btr >fib.json; check "json exit 0" [ $? -eq 0 ]
pycheck cg_fib fib.json "$(insns_of prof_fib.btr)"
"$btr" callgraph --format json -o shapes.json prof_shapes.btr; check "json -o exit 0" [ $? -eq 0 ]
pycheck cg_shapes shapes.json
"$btr" callgraph --format dot prof_fib.btr >fib.dot; check "dot exit 0" [ $? -eq 0 ]
pycheck dot fib.dot
"$btr" callgraph prof_fib.btr >fib.txt; check "text exit 0" [ $? -eq 0 ]
check "text: fib line with 177 calls" grep -Eq '^ +[0-9]+ +[0-9.]+% +[0-9]+ +[0-9.]+% +177  fib$' fib.txt
check "text: fib called by main once" grep -Eq '^    <- main +1$' fib.txt

"$btr" callgraph --help >/dev/null; check "--help exit 0" [ $? -eq 0 ]
"$btr" callgraph --format xml prof_fib.btr 2>/dev/null; check "bad format exit 2" [ $? -eq 2 ]
"$btr" callgraph 2>/dev/null; check "no file exit 2" [ $? -eq 2 ]
"$btr" callgraph /nonexistent.btr 2>err; check "missing trace exit 3" [ $? -eq 3 ]
check "missing trace one line" [ "$(wc -l <err)" -eq 1 ]
"$btr" callgraph --weight time prof_fib.btr >/dev/null 2>err; check "time without timestamps exit 3" [ $? -eq 3 ]

lbr=$shared/traces/autofdo/test.lbr
if [ -r "$lbr" ]; then
  "$btr" callgraph --format json --elf "$shared/traces/autofdo/test.binary" "$lbr" >lbr.json
  check "lbr callgraph exit 0" [ $? -eq 0 ]
  check "lbr: deflate calls longest_match" python3 -c '
import json,sys
fs={f["name"]:f for f in json.load(open("lbr.json"))["functions"]}
assert any(e["name"]=="longest_match" for e in fs["deflate"]["callees"])
assert json.load(open("lbr.json"))["unit"]=="branches"'
fi

pycheck_run
finish cli_callgraph
