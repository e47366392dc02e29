#!/usr/bin/env bash
# cli_stack_procs.sh - the stack views on a trace of many processes: a
# shell loop runs prog_prof_fib 10 N times.  A function of a module file
# is one function across processes (docs/callstack.md "One function
# across processes"): `btr callgraph` lists fib and the program's main
# once, called N x 177 and N times (fib(10)'s recursion, from the program's
# structure); the flame graph is the sum of the per-process flame graphs
# (--pid), one line per stack; pprof has one fib function and its samples
# add up to the trace's instructions (and `go tool pprof -top` says so);
# the timeline has 177 fib slices in each of N processes.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
need_qemu
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
cd "$tmp"

n=5
prog=$build/prog_prof_fib
record_qemu loop.btr loop sh -c "for i in $(seq -s ' ' $n); do '$prog' 10; done" || finish cli_stack_procs
"$btr" report --format json loop.btr >report.json
check "report exit 0" [ $? -eq 0 ]
insns=$(python3 -c "import json; print(json.load(open('report.json'))['instructions'])")
pids=$(python3 -c "import json; print(' '.join(str(p['pid']) for p in json.load(open('report.json'))['processes']))")
check "$((n + 1)) processes (the shell and $n children): $pids" [ "$(echo $pids | wc -w)" -eq $((n + 1)) ]

"$btr" callgraph --format json loop.btr -o cg.json
check "callgraph exit 0" [ $? -eq 0 ]
pycheck procs_cg cg.json "$insns" $n prog_prof_fib
"$btr" callgraph loop.btr -o cg.txt
check "callgraph text: one fib row, $((n * 177)) calls" \
	[ "$(grep -Ec '^ +[0-9]+ +[0-9.]+% +[0-9]+ +[0-9.]+% +[0-9]+  fib$' cg.txt)" -eq 1 ]
check "callgraph text: fib row with $((n * 177)) calls" grep -Eq "^ +[0-9]+ +[0-9.]+% +[0-9]+ +[0-9.]+% +$((n * 177))  fib\$" cg.txt

"$btr" flame loop.btr -o all.folded
check "flame exit 0" [ $? -eq 0 ]
per=()
for p in $pids; do
	"$btr" flame --pid "$p" loop.btr -o "pid$p.folded"
	check "flame --pid $p exit 0" [ $? -eq 0 ]
	per+=("pid$p.folded")
done
pycheck procs_flame all.folded "${per[@]}"

"$btr" pprof loop.btr -o loop.pb.gz
check "pprof exit 0" [ $? -eq 0 ]
pycheck procs_pprof loop.pb.gz "$insns" $n
if oracle go "go tool pprof -top of a many-process profile"; then
	total=$(HOME=$tmp GOCACHE=$tmp/gocache go tool pprof -top loop.pb.gz 2>/dev/null | sed -n 's/.* of \([0-9]*\) total.*/\1/p')
	check "go tool pprof: total $total = the trace's $insns instructions" [ "$total" = "$insns" ]
fi

"$btr" timeline loop.btr -o tl.json
check "timeline exit 0" [ $? -eq 0 ]
pycheck procs_timeline tl.json $n

pycheck_run
finish cli_stack_procs
