#!/usr/bin/env bash
# cli_merge.sh - `btr merge` on profiles of three runs of fib (n = 12, 14,
# 10) recorded with `btr record -b qemu`: the merge of two runs holds
# exactly the sum of both profiles (pprof decoded in the test, folded
# stacks, fdata and pre-aggregated counts); merging is associative and
# commutative (byte-identical results in any order and grouping); modules
# matched by build-id; go tool pprof reads the merge with the summed total;
# mixed kinds and bad input refused with one line and no output.
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

for r in A:12 B:14 C:10; do
  x=${r%%:*}; n=${r#*:}
  "$btr" record -q -b qemu -o $x.btr -- "$build/prog_prof_fib" $n >/dev/null 2>&1
  check "record $x" [ -s $x.btr ]
  "$btr" pprof $x.btr -o $x.pb.gz && "$btr" flame $x.btr -o $x.folded && "$btr" bolt $x.btr -o $x.fdata &&
    "$btr" bolt --pre-aggregated $x.btr -o $x.pa
  check "profiles of $x" [ $? -eq 0 ]
done

for k in pb.gz folded fdata pa; do
  "$btr" merge A.$k B.$k -o AB.$k; check "merge $k exit 0" [ $? -eq 0 ]
  "$btr" merge B.$k A.$k -o BA.$k
  check "$k: commutative" cmp -s AB.$k BA.$k
  "$btr" merge AB.$k C.$k -o AB_C.$k
  "$btr" merge B.$k C.$k -o BC.$k
  "$btr" merge A.$k BC.$k -o A_BC.$k
  "$btr" merge C.$k B.$k A.$k -o CBA.$k
  check "$k: associative ((A B) C = A (B C))" cmp -s AB_C.$k A_BC.$k
  check "$k: one merge of three = tree of merges" cmp -s AB_C.$k CBA.$k
done
pycheck merge_pprof AB.pb.gz A.pb.gz B.pb.gz
pycheck merge_folded AB.folded A.folded B.folded
pycheck merge_fdata AB.fdata A.fdata B.fdata 6
pycheck merge_fdata AB.pa A.pa B.pa 3

if oracle go "go tool pprof reading the merged profile (Debian golang-go)"; then
  export HOME=$tmp GOCACHE=$tmp/gocache GOPATH=$tmp/gopath
  go tool pprof -top AB_C.pb.gz >top.txt 2>/dev/null; check "go tool pprof reads the merge" [ $? -eq 0 ]
  total=$(sed -n 's/.*Showing nodes accounting for [0-9]*, [0-9.]*% of \([0-9]*\) total.*/\1/p' top.txt)
  want=$(( $(insns_of A.btr) + $(insns_of B.btr) + $(insns_of C.btr) ))
  check "merged total = sum of the three runs ($total vs $want)" [ "$total" = "$want" ]
  check "merged profile names the program first" grep -q '^File: prog_prof_fib' top.txt
fi

"$btr" merge --help >/dev/null; check "--help exit 0" [ $? -eq 0 ]
"$btr" merge A.fdata 2>/dev/null; check "missing -o exit 2" [ $? -eq 2 ]
"$btr" merge A.fdata B.pa -o mixed.out 2>err; check "mixed kinds exit 3" [ $? -eq 3 ]
check "mixed kinds one line" [ "$(wc -l <err)" -eq 1 ]
check "mixed kinds: the line names the file" grep -q 'B.pa' err
check "mixed kinds leave no output" [ ! -e mixed.out ]
head -c 100 A.pb.gz >cut.pb.gz
"$btr" merge A.pb.gz cut.pb.gz -o cut.out 2>err; check "damaged pprof exit 3" [ $? -eq 3 ]
check "damaged pprof one line" [ "$(wc -l <err)" -eq 1 ]
"$btr" merge /nonexistent -o x 2>err; check "missing input exit 3" [ $? -eq 3 ]
# damaged profiles (bytes flipped, cut, inserted) never crash the merge
gzip -dc A.pb.gz >A.pb
python3 - A.pb A.fdata <<'PY'
import random, sys
r = random.Random(7)
for i, src in enumerate(sys.argv[1:]):
    d = bytearray(open(src, 'rb').read())
    for k in range(25):
        x = bytearray(d)
        for _ in range(r.randint(1, 8)):
            op = r.randint(0, 2)
            p = r.randrange(len(x))
            if op == 0:
                x[p] = r.randrange(256)
            elif op == 1:
                del x[p:p + r.randint(1, 40)]
            else:
                x[p:p] = bytes(r.randrange(256) for _ in range(r.randint(1, 9)))
        open('mut%d_%d' % (i, k), 'wb').write(bytes(x))
PY
crash=0
for f in mut*; do
  base=A.pb; case $f in mut1_*) base=A.fdata;; esac
  "$btr" merge "$base" "$f" -o mut.out 2>/dev/null; rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 3 ] || { crash=1; echo "merge $f: exit $rc"; }
done
check "damaged inputs: exit 0 or 3, never a crash" [ $crash -eq 0 ]
"$btr" merge A.btr -o x 2>err; check "a trace is not a profile: exit 3" [ $? -eq 3 ]

# Empty and sample-less inputs: the identity of the merge, for every kind
# and in either position (an empty input was refused as "a different kind",
# and an empty input after a no_lbr fdata as "the fdata headers differ").
: >E.empty
printf '\n\n' >E2.empty
printf 'no_lbr cycles:u\n1 fib 10 5\n1 main 4 2\n' >N.fdata
printf 'no_lbr cycles:u\n' >N0.fdata
"$btr" pprof --pid 999999999 A.btr -o P0.pb.gz 2>/dev/null
check "pprof of no samples (--pid of no process) exit 0" [ $? -eq 0 ]
for k in pb.gz folded fdata pa N.fdata; do
  in=A.$k; [ $k = N.fdata ] && in=N.fdata
  "$btr" merge "$in" -o one.$k; check "$k: merge of one input exit 0" [ $? -eq 0 ]
  for e in E.empty E2.empty; do
    "$btr" merge "$in" $e -o x1.$k 2>err; rc=$?
    check "$k then $e: exit 0 (got $rc: $(cat err))" [ $rc -eq 0 ]
    check "$k then $e: the merge is the input alone" cmp -s x1.$k one.$k
    "$btr" merge $e "$in" -o x2.$k 2>err; rc=$?
    check "$e then $k: exit 0 (got $rc: $(cat err))" [ $rc -eq 0 ]
    check "$e then $k: the merge is the input alone" cmp -s x2.$k one.$k
  done
done
"$btr" merge N.fdata N0.fdata -o x.fdata 2>err; rc=$?
check "no_lbr fdata with a sample-less no_lbr fdata: exit 0 (got $rc: $(cat err))" [ $rc -eq 0 ]
check "no_lbr fdata with a sample-less one: the input alone" cmp -s x.fdata one.N.fdata
check "no_lbr merge keeps the header and sums nothing new" \
  [ "$(cat one.N.fdata)" = "$(printf 'no_lbr cycles:u\n1 fib 10 5\n1 main 4 2')" ]
# a pprof of no samples names the unit its trace counts in (instructions:
# a QEMU trace), so it merges with a profile of the same trace, an empty
# input and itself
"$btr" merge A.pb.gz P0.pb.gz -o xa.pb.gz 2>err; rc=$?
check "pprof then a sample-less pprof of the same trace: exit 0 (got $rc: $(cat err))" [ $rc -eq 0 ]
check "pprof then a sample-less pprof: the input alone" cmp -s xa.pb.gz one.pb.gz
"$btr" merge P0.pb.gz -o p0.pb.gz; check "sample-less pprof alone: exit 0" [ $? -eq 0 ]
"$btr" merge P0.pb.gz E.empty P0.pb.gz -o x.pb.gz 2>err; rc=$?
check "sample-less pprof twice and an empty input: exit 0 (got $rc: $(cat err))" [ $rc -eq 0 ]
check "sample-less pprof twice: the input alone" cmp -s x.pb.gz p0.pb.gz
pycheck merge_pprof x.pb.gz P0.pb.gz P0.pb.gz
"$btr" merge A.fdata N.fdata -o x.fdata 2>err; rc=$?
check "LBR and no_lbr fdata still refused (exit $rc)" [ $rc -eq 3 ]
check "LBR and no_lbr: the line says the headers differ" grep -q 'N.fdata: the fdata headers differ' err
"$btr" merge E.empty E2.empty -o x.empty 2>err; rc=$?
check "only empty inputs: exit 0 (got $rc: $(cat err))" [ $rc -eq 0 ]
check "only empty inputs: an empty result" [ -e x.empty ]
check "only empty inputs: nothing in it" [ ! -s x.empty ]

pycheck_run
finish cli_merge
