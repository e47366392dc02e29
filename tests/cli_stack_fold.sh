#!/usr/bin/env bash
# cli_stack_fold.sh - the stack views (flame, pprof, callgraph, timeline)
# let the PT decoder leave out not-taken conditional branches while the
# call stack says they change nothing (btr/analysis.h fold_ok; docs/
# pt-decode.md "Not-taken conditionals left out").  Their outputs must be
# the same, byte for byte, as with every branch in order (BTR_ORDERED=1),
# on real recordings: gzip, python3, perl, threads, signals, prof_shapes
# (tail calls, longjmp, code running into the next function), a process
# tree with exec, a dlclose'd library, a make of two files, and the
# quipper perf.data files (LBR, PT).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
need_qemu

head -c 100000 /dev/urandom | base64 >"$tmp/in.txt"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
declare -a recorded=() traces=()
rec gzip gzip -c "$tmp/in.txt"
rec python3 "$py" -c 'print(sum(range(20000)))'
if oracle perl "the folded stacks against perl's"; then
	rec perl perl -e 'my %h; $h{$_ % 97} += $_ for 1..20000; print scalar(keys %h), "\n"'
fi
rec threads "$build/prog_flow_threads"
rec signals "$build/prog_flow_signals"
rec shapes "$build/prog_prof_shapes"
rec proc_tree "$build/prog_proc_tree"
rec dlclose "$build/prog_qemu_dlclose" "$build/libbtr_dl_loop.so" "$build/libbtr_dl_other.so"
if oracle make "the subject built with make" && oracle cc "the subject built with make"; then
	mkdir "$tmp/proj"
	printf 'int f(int);\nint main(void) { return f(3) != 9; }\n' >"$tmp/proj/a.c"
	printf 'int f(int x) { return x * x; }\n' >"$tmp/proj/b.c"
	printf 'p: a.o b.o\n\tcc -o p a.o b.o\n%%.o: %%.c\n\tcc -c $<\n' >"$tmp/proj/Makefile"
	rec make make -s -C "$tmp/proj"
fi
for n in "${recorded[@]}"; do traces+=("$tmp/$n.btr"); done
for f in perf.data.branch-4.14 perf.data.intel_pt-4.14 perf.data.callgraph_and_branch-3.8; do
	if [ -f "$shared/traces/quipper/$f" ]; then
		traces+=("$shared/traces/quipper/$f")
	else
		note "$shared/traces/quipper/$f absent: not compared"
	fi
done

# views T: every output of the stack views of trace T into $tmp/$2/
views() {
	local t=$1 d=$tmp/$2
	rm -rf "$d"
	mkdir "$d"
	"$btr" flame "$t" -o "$d/f.folded" 2>"$d/f.err" &&
	"$btr" flame "$t" -o "$d/f.speedscope.json" 2>>"$d/f.err" &&
	"$btr" pprof --raw "$t" -o "$d/p.pb" 2>"$d/p.err" &&
	"$btr" callgraph "$t" >"$d/c.txt" 2>"$d/c.err" &&
	"$btr" callgraph --format json "$t" >"$d/c.json" 2>>"$d/c.err" &&
	"$btr" timeline "$t" -o "$d/t.json" 2>"$d/t.err"
}
for t in "${traces[@]}"; do
	sampled || continue   # (BTR_SAMPLE_STEP: make asan reads one trace in K)
	name=$(basename "$t")
	views "$t" fold; rc1=$?
	BTR_ORDERED=1 views "$t" ordered; rc2=$?
	# (both must work: two failures would compare equal)
	check "$name: the views work both ways ($rc1, $rc2: $(cat "$tmp"/fold/*.err | head -c 200))" \
		[ $rc1 -eq 0 -a $rc2 -eq 0 ]
	check "$name: a flame graph" [ -s "$tmp/fold/f.speedscope.json" ]
	if d=$(diff -rq "$tmp/ordered" "$tmp/fold" 2>&1); then
		ok
	else
		bad "$name: the stack views differ with not-taken conditionals left out: $(echo "$d" | head -3 | tr '\n' ' ')"
	fi
done
# the recordings of btr have stacks: not an empty comparison
check "gzip: functions in the flame graph" [ "$(BTR_ORDERED=1 "$btr" flame "$tmp/gzip.btr" -o - | wc -l)" -gt 5 ]
finish cli_stack_fold "${#traces[@]} traces"
