#!/usr/bin/env bash
# cli_flame.sh - `btr flame` (and the call stacks under it) on programs with
# a known call tree, recorded with `btr record -b qemu`: exact folded stacks
# of a recursive fib, tail calls, longjmp, a signal handler and a C++
# exception, derived from the programs' structure; weights that add up to
# the trace's instruction count; speedscope JSON checked against the file
# format's schema and for balanced events; the SVG parsed; LBR samples
# (autofdo) and a trace of /bin/gzip.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
src=$(cd "$(dirname "$0")" && pwd)

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
# python checks are collected and run in one process at the end
insns_of() { "$btr" report --format json "$1" | grep -m1 -o '"instructions": [0-9]*' | grep -o '[0-9]*$'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

for p in prof_fib prof_shapes prof_except; do
  "$btr" record -q -b qemu -o $p.btr -- "$build/prog_$p" >/dev/null 2>&1
  check "record $p" [ -s $p.btr ]
  "$btr" flame $p.btr -o $p.folded; check "flame $p exit 0" [ $? -eq 0 ]
  # every instruction lands in exactly one stack
  total=$(awk '{s+=$NF} END {print s+0}' $p.folded)
  insns=$(insns_of $p.btr)
  check "$p folded weights add up to the instructions ($total vs $insns)" [ "$total" = "$insns" ]
done

# ---- fib(10): main calls fib(10); fib(n) calls fib(n-1), fib(n-2) for n >= 2.
# Per depth d the folded weight of main;fib^d must be a_d*k_leaf + b_d*k_inner
# (a_d leaf calls, b_d inner calls at that depth: counted here from the
# recursion, not from btr), for one pair of per-call instruction counts.

pycheck fib prof_fib.folded
# Stacks projected onto the program's own functions (library frames dropped):
# the set must be exactly the one the source gives (tests/profcheck.py).
pycheck shapes prof_shapes.folded
pycheck except prof_except.folded



# ---- PLT stubs vanish into the function they jump to
check "no @plt frames with weight" [ "$(grep -c '@plt ' prof_shapes.folded)" -eq 0 ]

# ---- speedscope
"$btr" flame prof_fib.btr -o fib.speedscope.json; check "speedscope exit 0" [ $? -eq 0 ]
pycheck speedscope fib.speedscope.json "$src/data/speedscope-schema.json"
# each frame's line is that of the function's first instruction, as binutils'
# addr2line names the symbol's address
if oracle addr2line "speedscope frame lines against addr2line (Debian binutils)"; then
  for f in fib main; do
    a=$(nm "$build/prog_prof_fib" | awk -v f=$f '$3 == f {print $1}')
    want=$(addr2line -e "$build/prog_prof_fib" "0x$a" | sed 's/.*://; s/ .*//')
    got=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(*[f.get("line") for f in d["shared"]["frames"] if f["name"] == sys.argv[2]])' fib.speedscope.json $f)
    check "speedscope: $f at line '$got', addr2line says '$want'" test -n "$want" -a "$got" = "$want"
  done
fi

# ---- SVG
"$btr" flame prof_fib.btr -o fib.svg --title "fib <10>"; check "svg exit 0" [ $? -eq 0 ]
pycheck svg fib.svg prof_fib.folded

# ---- a function name with XML's special characters (renamed in the symbol
# table by objcopy: no compiler writes one) is escaped in the SVG
if oracle objcopy "the SVG of a function named with < > & \" (Debian binutils)" &&
   oracle gcc "a program whose function gets an odd name (Debian gcc)"; then
  cat >odd.c <<'C'
__attribute__((noinline)) int oddname(int x) { return x * 7 + 1; }
int main(void) { int s = 0; for (int i = 0; i < 3000; i++) s += oddname(i); return s == 1; }
C
  gcc -O1 -o odd odd.c && objcopy --redefine-sym 'oddname=a<b>&"c' odd
  check "odd: compiled and renamed" sh -c "nm odd | grep -q 'a<b>&\"c'"
  "$btr" record -q -b qemu -o odd.btr -- ./odd >/dev/null 2>&1; check "record odd" [ -s odd.btr ]
  "$btr" flame odd.btr -o odd.svg; check "odd svg exit 0" [ $? -eq 0 ]
  check "odd svg: parses as XML, and a frame's title names a<b>&\"c" python3 -c '
import sys, xml.etree.ElementTree as ET
t = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert any((e.text or "").startswith("a<b>&\"c (") for e in t.iter(ns + "title")), "no frame named a<b>&\"c"' odd.svg
fi

# ---- usage and bad input
"$btr" flame --help >/dev/null; check "--help exit 0" [ $? -eq 0 ]
"$btr" flame prof_fib.btr 2>/dev/null; check "missing -o exit 2" [ $? -eq 2 ]
"$btr" flame prof_fib.btr -o x.folded --format nope 2>/dev/null; check "bad format exit 2" [ $? -eq 2 ]
"$btr" flame nonexistent.btr -o x.folded 2>err; rc=$?
check "missing trace exit 3" [ $rc -eq 3 ]
check "missing trace one line" [ "$(wc -l <err)" -eq 1 ]
check "missing trace leaves no output" [ ! -e x.folded ]
"$btr" flame prof_fib.btr -o t.folded --weight time 2>err; rc=$?
check "time weight without timestamps exit 3" [ $rc -eq 3 ]
check "time weight leaves no output" [ ! -e t.folded ]
head -c 3000 prof_fib.btr >trunc.btr
"$btr" flame trunc.btr -o trunc.folded 2>err; rc=$?
check "truncated trace exit 3" [ $rc -eq 3 ]
check "truncated trace one line" [ "$(wc -l <err)" -eq 1 ]

# ---- LBR samples (autofdo): stacks from LBR call/return pairs
lbr=$shared/traces/autofdo/test.lbr
if [ -r "$lbr" ]; then
  "$btr" flame --elf "$shared/traces/autofdo/test.binary" "$lbr" -o lbr.folded; check "lbr flame exit 0" [ $? -eq 0 ]
  total=$(awk '{s+=$NF} END {print s+0}' lbr.folded)
  check "lbr: every branch counted ($total)" [ "$total" = 147712 ]
  # gzip's deflate() calls longest_match(), compress_block() send_bits()
  pycheck lbr lbr.folded
else
  echo "note: $lbr absent, LBR part skipped"
fi

# ---- a trace of /bin/gzip
head -c 40000 "$btr" >in.bin
"$btr" record -q -b qemu -o gz.btr -- /bin/gzip -c in.bin >/dev/null 2>&1
"$btr" flame gz.btr -o gz.folded; check "gzip flame exit 0" [ $? -eq 0 ]
total=$(awk '{s+=$NF} END {print s+0}' gz.folded)
insns=$(insns_of gz.btr)
check "gzip: weights add up ($total vs $insns)" [ "$total" = "$insns" ]
pycheck under_main gz.folded

pycheck_run

finish cli_flame
