#!/usr/bin/env bash
# cli_diverge.sh - `btr diverge`: two runs of tests/progs/diverge.c that part
# in a known place (an input-dependent branch deep in a call chain, a loop
# count, an indirect call target, a signal in one run only, a second thread,
# two runs under ASLR) - the first divergence is the line the source marks
# DIVERGE, at the same branch and instruction count in both runs; --all
# meets again after the loop and the region holds exactly the extra
# instructions; JSON parses; report --html --diff shows both stacks side by
# side; perf.data recordings compare; a trace of many processes is one pass
# per thread pair that decodes only that pair; bad input gets one line.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2
need_qemu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
prog=$build/prog_diverge
rec() { "$btr" record -q -b qemu -o "$1" -- "$prog" "$2" "$3" >/dev/null 2>&1; }
for m in d l i s t; do
	rec $m-a.btr $m 3
	rec $m-b.btr $m 7
done
rec i-c.btr i 4
dv() { "$btr" diverge --module prog_diverge "$@"; }
# "  A: branch N, M instructions: 0xF -> 0xT  func+0xo (file:line) -> ...  kind"
where() { sed -n "s/^  $1: branch \([0-9]*\), \([0-9]*\) instructions: .*  \([^ ]*\)+0x[0-9a-f]* (diverge.c:\([0-9]*\)) -> .*/\3:\4 \1 \2/p" "$2" | head -1; }

dv d-a.btr d-b.btr >d.out; rc=$?
check "deep: exit 1 (diverged) ($rc)" [ $rc -eq 1 ]
read -r fa ia na < <(where A d.out); read -r fb ib nb < <(where B d.out)
check "deep: A parts at leaf's branch on line 19 ($fa)" [ "$fa" = leaf:19 ]
check "deep: B parts there too ($fb)" [ "$fb" = leaf:19 ]
check "deep: at the same branch ($ia, $ib) and instruction ($na, $nb) in both" [ "$ia" = "$ib" ]
check "deep: at the same branch ($ia, $ib) and instruction ($na, $nb) in both" [ "$na" = "$nb" ]
check "deep: A jumps over the body (x=3), B falls into it (x=7)" grep -q '^  A: .*jcc$' d.out
check "deep: A jumps over the body (x=3), B falls into it (x=7)" grep -q '^  B: .*jcc not-taken$' d.out
check "deep: the stack is leaf <- mid <- top <- main" \
  bash -c "sed -n '/^  stack A:/,/^  stack B:/p' d.out | grep -o '^    [a-z_]*' | tr -d ' ' | head -4 | tr '\n' ' ' | grep -qx 'leaf mid top main '"
check "deep: 8 branches before" [ "$(sed -n '/branches before/,$p' d.out | grep -c '^    0x')" = 8 ]

dv l-a.btr l-b.btr >l.out
read -r fa ia na < <(where A l.out)
check "loop: parts at the loop's test on line 30 ($fa)" [ "$fa" = loop:30 ]
check "loop: A leaves the loop (3 rounds), B goes on (7)" grep -q '^  A: .*jcc not-taken$' l.out
check "loop: A leaves the loop (3 rounds), B goes on (7)" grep -q '^  B: .*jcc$' l.out
dv --all --format json l-a.btr l-b.btr >l.json
check "loop --all: JSON parses" python3 -c 'import json,sys; json.load(open("l.json"))'
read -r nreg ra rb ta tb met < <(python3 -c '
import json; d = json.load(open("l.json")); t = d["threads"][0]; r = t["regions"]
print(len(r), r[0]["a_instructions"], r[0]["b_instructions"], t["a"]["instructions"], t["b"]["instructions"],
      (r[0]["met_again"] or {}).get("function"))')
check "loop --all: one divergent region ($nreg)" [ "$nreg" = 1 ]
check "loop --all: the runs meet again when after() is called ($met)" [ "$met" = after ]
check "loop --all: the region holds all of B's extra instructions ($rb - $ra = $tb - $ta)" [ $((rb - ra)) -eq $((tb - ta)) ]
check "loop --all: B's 4 more rounds are more than A's exit ($ra < $rb)" [ "$ra" -lt "$rb" ]

dv i-a.btr i-b.btr >i.out; rc=$?
check "indirect: 3 and 7 both call odd(): the same ($rc)" [ $rc -eq 0 ]
check "indirect: 3 and 7 both call odd(): the same ($rc)" grep -q 'the same' i.out
"$btr" diverge --module nosuch i-a.btr i-b.btr >none.out
check "a module no branch comes from: nothing compared, and it says so" grep -q '(0 compared: those from the chosen modules)' none.out
dv i-a.btr i-c.btr >i2.out
read -r fa ia na < <(where A i2.out)
check "indirect: 3 and 4 part at the call on line 65 ($fa)" [ "$fa" = main:65 ]
check "indirect: to odd in A, even in B" grep -q '^  A: .* -> odd+0x0 (diverge.c:[0-9]*)  call_ind' i2.out
check "indirect: to odd in A, even in B" grep -q '^  B: .* -> even+0x0 (diverge.c:[0-9]*)  call_ind' i2.out

dv s-a.btr s-b.btr >s.out
read -r fa ia na < <(where A s.out)
check "signal: parts where B decides to raise it, line 69 ($fa)" [ "$fa" = main:69 ]
"$btr" diverge --all s-a.btr s-b.btr >s-all.out
check "signal --all: B's handler on_usr1 ran in a region (whole traces)" \
  bash -c "python3 - <<'PY'
import subprocess, json, sys
d = json.loads(subprocess.run(['$btr', 'diverge', '--all', '--format', 'json', 's-a.btr', 's-b.btr'], capture_output=True).stdout)
t = d['threads'][0]
sys.exit(0 if t['b']['instructions'] > t['a']['instructions'] and len(t['regions']) >= 1 else 1)
PY"

dv t-a.btr t-b.btr >t.out
check "threads: two pairs" [ "$(grep -c '^thread' t.out)" = 2 ]
check "threads: the main threads ran the same" bash -c "grep '^thread' t.out | head -1 | grep -q 'the same'"
read -r fa ia na < <(where A t.out)
check "threads: the second thread parts in leaf, line 19 ($fa)" [ "$fa" = leaf:19 ]

# the same input twice, and another input, under ASLR (the step backend runs natively)
if "$btr" info | grep -q '^step  yes'; then
  "$btr" record -q -b step -o s1.btr -- "$prog" d 3 >/dev/null 2>&1
  "$btr" record -q -b step -o s3.btr -- "$prog" d 7 >/dev/null 2>&1
  b1=$("$btr" trace dump s1.btr | sed -n 's/^module_load .* \(0x[0-9a-f]*\)-.*prog_diverge"$/\1/p' | head -1)
  b3=$("$btr" trace dump s3.btr | sed -n 's/^module_load .* \(0x[0-9a-f]*\)-.*prog_diverge"$/\1/p' | head -1)
  check "aslr: the program loaded at two addresses ($b1, $b3)" [ -n "$b1" ]
  check "aslr: the program loaded at two addresses ($b1, $b3)" [ "$b1" != "$b3" ]
  dv s1.btr s3.btr >a.out
  read -r fa ia na < <(where A a.out); read -r fb ib nb < <(where B a.out)
  # A (x=3) jumps over the body at line 19; B (x=7) falls into it, which a
  # step trace (taken branches only, as BTS) does not show: B's first
  # different branch is leaf's return, line 22.  (This second half was never
  # asserted before, and expected line 19.)
  check "aslr: A parts at leaf's line 19 ($fa)" [ "$fa" = leaf:19 ]
  check "aslr: B parts at leaf's return, line 22 ($fb)" [ "$fb" = leaf:22 ]
  # (the loader and libc, not compared, may run a few instructions more in one run)
  check "aslr: the stack is leaf <- mid <- top <- main" \
    bash -c "sed -n '/^  stack B:/,/branches before/p' a.out | grep -o '^    [a-z_]*' | tr -d ' ' | head -4 | tr '\n' ' ' | grep -qx 'leaf mid top main '"
  dv s1.btr s1.btr >same.out; rc=$?
  check "a trace against itself: the same, exit 0 ($rc)" [ $rc -eq 0 ]
else
  note "step backend unusable here: ASLR case not checked"
fi

# the HTML report with --diff B shows both sides of the first divergence next to each other
"$btr" report --html html d-a.btr --diff d-b.btr >/dev/null 2>&1
check "report --html --diff: a section where the runs parted" grep -q 'id="divergence"' html/index.html
check "  both sides at leaf's line 19, side by side" \
  bash -c "grep -o '<tr><td>branch [0-9]*, [0-9]* instructions: leaf+0x[0-9a-f]* (diverge.c:19)[^<]*</td><td>branch [0-9]*, [0-9]* instructions: leaf+0x[0-9a-f]* (diverge.c:19)' html/index.html | grep -q ."
check "  the stacks side by side (mid in both columns)" \
  grep -Eq '<tr><td>mid\+0x[0-9a-f]+ \(diverge.c:23\)</td><td>mid\+0x[0-9a-f]+ \(diverge.c:23\)</td></tr>' html/index.html

# perf.data (real recordings): a recording against itself is the same, also across
# the LBR samples' discontinuities; the threads come from names, exits, switches, samples
shared=$3
for f in "$shared/traces/quipper/perf.data.intel_pt-4.14" "$shared/traces/autofdo/test.lbr"; do
  if [ -r "$f" ]; then
    "$btr" diverge "$f" "$f" >pd.out 2>pd.err; rc=$?
    check "perf.data $(basename "$f") against itself: the same, exit 0 ($rc: $(head -c 200 pd.err))" [ $rc -eq 0 ]
    check "perf.data $(basename "$f") against itself: the same, exit 0 ($rc: $(head -c 200 pd.err))" grep -q '^thread .*: the same [1-9][0-9]* branches' pd.out
    check "perf.data $(basename "$f") against itself: the same, exit 0 ($rc: $(head -c 200 pd.err))" bash -c '! grep -q diverged pd.out'
  else
    note "$f absent: perf.data case not checked"
  fi
done

# many processes: each thread pair is one pass over both traces, which must
# decode only that pair's data and place each module file once per pass, not
# once per process (it was quadratic: 200 processes, 57 s).  Counted, not
# timed: opens of libc and the flow decoders' 4 MiB block caches under strace.
"$btr" record -q -b qemu -o loop.btr -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do /bin/true; done' \
  >/dev/null 2>&1
"$btr" diverge loop.btr loop.btr >loop.out; rc=$?
check "a loop of 12 processes against itself: 13 threads the same, exit 0 ($rc)" [ $rc -eq 0 ]
check "a loop of 12 processes against itself: 13 threads the same, exit 0 ($rc)" [ "$(grep -c '^thread .*: the same [1-9][0-9]* branches' loop.out)" -eq 13 ]
if oracle strace "the opens and block caches of diverge counted"; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -o loop.strace -e trace=openat,mmap "$btr" diverge loop.btr loop.btr >loop2.out
  check "  the same under strace" cmp -s loop.out loop2.out
  passes=$((2 * 13)); libc=$(grep -c 'openat(.*/libc\.so\.6"' loop.strace)
  caches=$(grep -c 'mmap(NULL, 4194304, PROT_READ|PROT_WRITE' loop.strace)
  check "  $libc opens of libc in $passes passes (at most 4 each; 13 processes each: ~50)" [ "$libc" -le $((4 * passes)) ]
  check "  $caches decoders in $passes passes (at most 3 each; every thread's: ~25)" [ "$caches" -le $((3 * passes)) ]
fi

# bad input
"$btr" diverge d-a.btr 2>err; rc=$?
check "one trace: exit 2 ($rc)" [ $rc -eq 2 ]
"$btr" diverge d-a.btr nosuch.btr 2>err; rc=$?
check "a missing trace: exit 3, one line naming it ($rc)" [ $rc -eq 3 ]
check "a missing trace: exit 3, one line naming it ($rc)" [ "$(wc -l <err)" = 1 ]
check "a missing trace: exit 3, one line naming it ($rc)" grep -q nosuch.btr err
"$btr" diverge --tid 1:2 d-a.btr d-b.btr 2>err; rc=$?
check "--tid of no thread: exit 3, one line ($rc)" [ $rc -eq 3 ]
check "--tid of no thread: exit 3, one line ($rc)" [ "$(wc -l <err)" = 1 ]
"$btr" diverge --tid x d-a.btr d-b.btr 2>err; rc=$?
check "bad --tid: exit 2 ($rc)" [ $rc -eq 2 ]
finish diverge
