#!/usr/bin/env bash
# cli_afdo.sh - `btr afdo`: the LLVM sample profile of a clang-16 program
# recorded with `btr record -b qemu` holds the counts its source implies
# (tests/data/afdo_prog.c: sq's head samples and lines = calls, the loop's
# lines = iterations, the indirect call's targets add and sub with their
# counts, tri nested under its call site), llvm-profdata-16 and
# clang-16 -fprofile-sample-use accept it without a warning, and bad input
# gets one line and exit 3.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2
src=$(cd "$(dirname "$0")" && pwd)/data/afdo_prog.c

need_qemu
oracle clang-16 "sample profiles of clang-16 programs (Debian clang-16)" || finish afdo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
cflags="-O2 -gline-tables-only -fdebug-info-for-profiling"
clang-16 $cflags "$src" -o prog; check "clang-16 builds the program" [ $? -eq 0 ]
n=1000
"$btr" record -q -b qemu -o p.btr -- ./prog $n >/dev/null 2>&1; check "record" [ -s p.btr ]
"$btr" afdo p.btr -o p.prof; check "afdo exit 0" [ $? -eq 0 ]
"$btr" afdo p.btr -o - >p2.prof; check "afdo to stdout is the same" cmp -s p.prof p2.prof

# top-level entry "NAME:TOTAL:HEAD" and its body lines " OFF[.DISC]: COUNT ..."
head_of() { awk -F: -v f="$1" '$1==f && NF==3 {print $3}' p.prof; }
# the count of line offset $2 (discriminator ignored: the largest) in top-level function $1, depth 1
line_of() { awk -v f="$1" -v o="$2" '
	/^[^ ]/ {split($0, h, ":"); cur = h[1]; next}
	cur == f && /^ [^ ]/ {split($1, l, "[.:]"); if (l[1] == o && $2 ~ /^[0-9]+$/ && $2 > m) m = $2}
	END {print m + 0}' p.prof; }
calls=$(( (n + 2) / 3 ))
check "sq's head samples are its $calls calls ($(head_of sq))" [ "$(head_of sq)" = $calls ]
check "sq's return line ran $calls times ($(line_of sq 2))" [ "$(line_of sq 2)" = $calls ]
# sq is declared on line 9: its return (line 11) is offset 2; main is on line 26: the
# loop's body (line 31) is offset 5, the call of sq (line 32) offset 6, tri
# (line 34) offset 8, op(acc, i) (line 36) offset 10
check "main's loop body ran $n times ($(line_of main 5))" [ "$(line_of main 5)" = $n ]
check "main's call of sq (offset 6) counts $calls calls" grep -Eq "^ 6(\.[0-9]+)?: $calls sq:$calls\$" p.prof
check "the indirect call lists add:$((n / 2)) and sub:$((n / 2))" \
  grep -Eq "^ 10(\.[0-9]+)?: $n (add:$((n / 2)) sub:$((n / 2))|sub:$((n / 2)) add:$((n / 2)))\$" p.prof
check "add's head samples are $((n / 2))" [ "$(head_of add)" = $((n / 2)) ]
check "tri is nested under main at its call site" grep -Eq '^ 8(\.[0-9]+)?: tri:[0-9]+$' p.prof
check "tri has no top-level entry" [ -z "$(head_of tri)" ]
# tri's own lines nested under that call site, two columns in: its loop
# (line 17, offset 3 from line 14) entered once per call, the n - calls
# values of i that sq does not take
check "tri's loop (offset 3) nested under main's call site, entered $((n - calls)) times" \
  awk -v want=$((n - calls)) '/^ 8(\.[0-9]+)?: tri:/ {t = 1; next}
	t && /^  [^ ]/ {if ($1 ~ /^3(\.[0-9]+)?:$/ && $2 == want) ok = 1; next} {t = 0} END {exit !ok}' p.prof
check "every line well formed" awk '
	/^[^ ]/ {if ($0 !~ /^[^ :]+:[0-9]+:[0-9]+$/) exit 1; next}
	{sub(/^ +/, ""); if ($0 !~ /^[0-9]+(\.[0-9]+)?: ([0-9]+( [^ :]+:[0-9]+)*|[^ :]+:[0-9]+)$/) exit 1}' p.prof

if oracle llvm-profdata-16 "the profile read back by LLVM (Debian llvm-16)"; then
  llvm-profdata-16 merge --sample p.prof -o p.afdo 2>pd.err; check "llvm-profdata-16 merge --sample accepts it" [ $? -eq 0 ]
  check "llvm-profdata-16 says nothing ($(head -c 200 pd.err))" [ ! -s pd.err ]
  llvm-profdata-16 show --sample --function=sq p.afdo >show.out 2>&1
  check "llvm-profdata-16 reads sq's $calls head samples" grep -q "Function: sq: [0-9]*, $calls, " show.out
  llvm-profdata-16 merge --sample --text p.afdo -o back.prof 2>/dev/null
  check "the binary profile converts back to the same functions" \
    cmp -s <(grep -v '^ ' p.prof | sort) <(grep -v '^ ' back.prof | sort)
fi
# btr merge sums sample profiles as llvm-profdata does
"$btr" record -q -b qemu -o q.btr -- ./prog 500 >/dev/null 2>&1
"$btr" afdo q.btr -o q.prof
"$btr" merge p.prof q.prof -o m.prof; check "btr merge of two sample profiles exit 0" [ $? -eq 0 ]
check "merged: sq's head samples $calls + 167" [ "$(awk -F: '$1=="sq" && NF==3 {print $3}' m.prof)" = $((calls + 167)) ]
"$btr" merge q.prof p.prof -o m2.prof
check "merging is commutative" cmp -s m.prof m2.prof
if oracle llvm-profdata-16 "btr merge of sample profiles against llvm-profdata-16 merge"; then
  llvm-profdata-16 merge --sample --text p.prof q.prof -o l.prof 2>/dev/null
  check "btr merge writes what llvm-profdata-16 merge --sample --text writes" cmp -s m.prof l.prof
fi

clang-16 $cflags -fprofile-sample-use=p.prof -Wall "$src" -o prog.pgo 2>cc.err
check "clang-16 -fprofile-sample-use builds with it" [ $? -eq 0 ]
check "clang-16 warns about nothing ($(head -c 200 cc.err))" [ ! -s cc.err ]
check "the optimized program prints the same" [ "$(./prog.pgo 77)" = "$(./prog 77)" ]

# bad input: one line, exit 3
"$btr" afdo --module nosuch p.btr -o x.prof 2>err; rc=$?
check "an unknown module: exit 3 ($rc)" [ $rc -eq 3 ]
check "  one line naming the module" [ "$(wc -l <err)" = 1 ]
check "  one line naming the module" grep -q "nosuch" err
check "  no output file left" [ ! -e x.prof ]
"$btr" record -q -b qemu -o t.btr -- /bin/true >/dev/null 2>&1
"$btr" afdo t.btr -o t.prof 2>err; rc=$?
check "a program without DWARF: exit 3 ($rc)" [ $rc -eq 3 ]
check "  one line saying so" [ "$(wc -l <err)" = 1 ]
check "  one line saying so" grep -q "DWARF" err
"$btr" afdo p.btr 2>err; check "missing -o: exit 2" [ $? -eq 2 ]
finish afdo
