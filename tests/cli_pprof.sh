#!/usr/bin/env bash
# cli_pprof.sh - `btr pprof` on fib(22) recorded with `btr record -b qemu`:
# `go tool pprof -top` reads the gzipped profile.proto and names fib the top
# function (57313 calls of fib against the ~10^5 instructions of process
# start-up), the total equals the trace's instructions, lines point into
# prof_fib.c, the mapping carries the program's build-id as readelf prints
# it; the profile decodes by hand too; bad input.
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
prog=$build/prog_prof_fib

"$btr" record -q -b qemu -o fib.btr -- "$prog" 22 >/dev/null 2>&1; check "record" [ -s fib.btr ]
"$btr" pprof fib.btr -o fib.pb.gz; check "pprof exit 0" [ $? -eq 0 ]
check "gzip data" [ "$(head -c 2 fib.pb.gz | od -An -tx1 | tr -d ' ')" = 1f8b ]
"$btr" pprof --raw fib.btr -o fib.pb; check "raw exit 0" [ $? -eq 0 ]
check "raw = gunzipped" cmp -s fib.pb <(gzip -dc fib.pb.gz)
insns=$(insns_of fib.btr)
check "decoded by hand: samples add up to the instructions, fib leads" \
  python3 "$src/profcheck.py" pprof fib.pb "$insns" fib

if oracle go "go tool pprof reading btr's profile (Debian golang-go)"; then
  export HOME=$tmp GOCACHE=$tmp/gocache GOPATH=$tmp/gopath GOFLAGS=-mod=mod
  go tool pprof -top fib.pb.gz >top.txt 2>top.err; check "go tool pprof -top exit 0" [ $? -eq 0 ]
  # the first row under the header is the top function
  top=$(awk '/flat%/ {getline; print $6; exit}' top.txt)
  check "top function is fib (got '$top')" [ "$top" = fib ]
  total=$(sed -n 's/.*Showing nodes accounting for [0-9]*, [0-9.]*% of \([0-9]*\) total.*/\1/p' top.txt)
  check "pprof total = the trace's instructions ($total vs $insns)" [ "$total" = "$insns" ]
  check "sample type instructions" grep -q '^Type: instructions' top.txt
  go tool pprof -top -lines fib.pb.gz >lines.txt 2>/dev/null
  decl=$(grep -n 'int fib(int n)' "$src/progs/prof_fib.c" | cut -d: -f1)
  line=$(awk '$6=="fib" {print $7; exit}' lines.txt | sed 's/.*prof_fib.c://')
  check "fib's line is in prof_fib.c, in fib ($line, declared at $decl)" [ "${line:-0}" -ge "$decl" -a "${line:-0}" -le $((decl + 6)) ]
  go tool pprof -raw fib.pb.gz >raw.txt 2>/dev/null
  bid=$(readelf -n "$prog" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
  check "mapping has the program's build-id $bid" grep -q "prog_prof_fib $bid" raw.txt
  # the program's mapping is a range (start below limit) holding fib's location
  map=$(sed -n 's|^ *\([0-9]*\): \(0x[0-9a-f]*\)/\(0x[0-9a-f]*\)/0x[0-9a-f]* .*/prog_prof_fib .*|\1 \2 \3|p' raw.txt)
  loc=$(sed -n 's|^ *[0-9]*: \(0x[0-9a-f]*\) M=\([0-9]*\) fib .*|\1 \2|p' raw.txt | head -1)
  check "fib's location ($loc) lies in the program's mapping (id start limit: $map)" python3 -c '
import sys
m, lo, hi = sys.argv[1].split(); a, am = sys.argv[2].split()
sys.exit(not (am == m and int(lo, 16) <= int(a, 16) < int(hi, 16)))' "${map:-x x x}" "${loc:-x x}"
  # fib's line is the line of its first instruction, as addr2line names it
  if oracle addr2line "pprof location lines against addr2line (Debian binutils)"; then
    a=$(nm "$prog" | awk '$3 == "fib" {print $1}')
    want=$(addr2line -e "$prog" "0x$a" | sed 's/.*://; s/ .*//')
    got=$(sed -n 's|^ *[0-9]*: 0x[0-9a-f]* M=[0-9]* fib .*prof_fib\.c:\([0-9]*\) .*|\1|p' raw.txt | head -1)
    check "fib's location line '$got' = addr2line's '$want'" test -n "$want" -a "$got" = "$want"
  fi
  # a profile of no samples (--pid of no process) of this trace names the
  # unit the trace counts in, not "branches"
  "$btr" pprof --pid 999999999 fib.btr -o none.pb.gz; check "pprof of no samples exit 0" [ $? -eq 0 ]
  go tool pprof -raw none.pb.gz >none.txt 2>none.err; rc=$?; check "go tool pprof -raw reads it: $(head -1 none.err)" [ $rc -eq 0 ]
  check "no samples: period type instructions count" grep -qx 'PeriodType: instructions count' none.txt
  check "no samples: sample type instructions/count" grep -qx 'instructions/count' none.txt
fi

"$btr" pprof --help >/dev/null; check "--help exit 0" [ $? -eq 0 ]
"$btr" pprof fib.btr 2>/dev/null; check "missing -o exit 2" [ $? -eq 2 ]
"$btr" pprof /nonexistent.btr -o x.pb.gz 2>err; check "missing trace exit 3" [ $? -eq 3 ]
check "missing trace one line" [ "$(wc -l <err)" -eq 1 ]
check "no output left" [ ! -e x.pb.gz ]

finish cli_pprof
