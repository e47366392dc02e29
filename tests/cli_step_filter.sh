#!/usr/bin/env bash
# cli_step_filter.sh - `btr record -b step --ip-filter SPEC`: for the
# deterministic tests/progs/select_qsort.c, each filtered trace's `btr
# script` equals an unfiltered recording's script restricted to the ranges
# (the branches whose source is in them, with their instruction counts),
# for ranges entered by a call and left by a return (work), entered by
# libc's indirect call (qsort's comparator cmp), by a signal (on_sig), by
# returns (main), a range in a shared library left by calls (qsort_r in
# libc), one entered by an indirect jump (qsort through the PLT), two
# ranges at once; a range in a forked child and in the program it execs; in
# three threads.  No gap, no finding of `btr check`; the leaf work() (about
# 1% of the instructions) takes at most 3% of the unfiltered recording's
# steps (counted by the recorder, never timed); report names the ranges and
# cov covers only them.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

"$btr" info >"${TMPDIR:-/tmp}/step_filter_info.$$" 2>/dev/null
grep -Eq '^step +yes ' "${TMPDIR:-/tmp}/step_filter_info.$$" ||
	{ rm -f "${TMPDIR:-/tmp}/step_filter_info.$$"; skip "step backend unusable here"; }
rm -f "${TMPDIR:-/tmp}/step_filter_info.$$"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libc=/lib/x86_64-linux-gnu/libc.so.6

# branches whose source is in one of the functions $2 (a regex
# alternative), one per line without addresses (ASLR differs between runs),
# the thread column replaced by its rank of first appearance
branches_in() {
	"$btr" script -F tid,sym,kind,flags,insns "$1" |
		awk -v re="^($2)(\\\\+|\$)" '$2 ~ re {
			if (!($1 in rank)) rank[$1] = n++
			$1 = rank[$1]; print }' | sort -s -n -k1,1
}
per_thread() {
	local k
	for k in $(cut -d' ' -f1 "$1" | sort -u); do
		echo "$(awk -v k="$k" '$1 == k { $1 = ""; print }' "$1" | md5sum | cut -c1-32) $(grep -c "^$k " "$1")"
	done | sort
}
steps() { sed -n 's/.*; \([0-9]*\) steps, .*/\1/p' "$1" | head -1; }

# filtered NAME PROG ARGS -- SPEC...: records PROG ARGS with the ranges SPEC
filtered() {
	local name=$1 prog=$2 args=$3
	shift 4
	local a=() s
	for s in "$@"; do a+=(--ip-filter "$s"); done
	# shellcheck disable=SC2086
	"$btr" record -b step "${a[@]}" -o "$tmp/$name.btr" -- "$prog" $args >/dev/null 2>"$tmp/$name.err"
	rc=$?
	check "$name: filtered recording works ($(tail -1 "$tmp/$name.err"))" [ $rc -eq 0 ]
}
# same NAME FULL FUNCS: NAME's branches equal FULL's in FUNCS, per thread
same() {
	branches_in "$tmp/$2.btr" "$3" >"$tmp/a"
	branches_in "$tmp/$1.btr" "$3" >"$tmp/b"
	check "$1: the unfiltered run has branches in $3" [ -s "$tmp/a" ]
	check "$1: branches in $3 equal the unfiltered run's ($(wc -l <"$tmp/a") / $(wc -l <"$tmp/b"))" \
		cmp -s <(per_thread "$tmp/a") <(per_thread "$tmp/b")
	check "$1: nothing outside $3 traced" \
		[ "$("$btr" script -F sym "$tmp/$1.btr" | grep -cEv "^($3)(\\+| |\$)")" -eq 0 ]
	check "$1: no gap" [ "$("$btr" script "$tmp/$1.btr" | grep -c '^\[gap')" -eq 0 ]
	"$btr" check "$tmp/$1.btr" >"$tmp/chk" 2>&1
	rc=$?
	check "$1: check judges what it saw: no finding at the edges ($(tail -1 "$tmp/chk"))" [ $rc -eq 0 ]
}

q=$build/prog_select_qsort
"$btr" record -b step -o "$tmp/full.btr" -- "$q" 300 2 >/dev/null 2>"$tmp/full.err"
rc=$?
check "unfiltered recording works ($(tail -1 "$tmp/full.err"))" [ $rc -eq 0 ]
filtered work "$q" "300 2" -- "work@$q"
same work full work
check "work: the trace says it holds only the --ip-filter ranges (report: ip_filtered)" \
	[ "$("$btr" report --format json "$tmp/work.btr" | grep -c '"ip_filtered": true')" -eq 1 ]
check "full: the unfiltered trace does not" \
	[ "$("$btr" report --format json "$tmp/full.btr" | grep -c '"ip_filtered"')" -eq 0 ]
filtered cmp "$q" "300 2" -- "cmp@$q"
same cmp full cmp
filtered on_sig "$q" "300 2" -- "on_sig@$q"
same on_sig full on_sig
filtered main "$q" "300 2" -- "main@$q"
same main full main
filtered two "$q" "300 2" -- "work@$q" "on_sig@$q"
same two full 'work|on_sig'
if [ -r "$libc" ]; then
	filtered qsort_r "$q" "300 2" -- "qsort_r@$libc"
	same qsort_r full qsort_r
	filtered qsort "$q" "300 2" -- "qsort@$libc"
	same qsort full qsort
else
	note "$libc absent: no shared-library range"
fi

# the work outside the ranges: counted, not timed
sf=$(steps "$tmp/full.err"); sw=$(steps "$tmp/work.err")
note "steps: unfiltered $sf, work() alone $sw"
check "the unfiltered run took steps" [ "${sf:-0}" -gt 100000 ]
check "work() alone took steps" [ "${sw:-0}" -gt 0 ]
check "work() alone: at most 3% of the unfiltered steps ($sw of $sf)" [ $((${sw:-0} * 100)) -le $((${sf:-0} * 3)) ]
check "the recorder counts the stops outside the ranges" grep -q 'stops outside the ranges' "$tmp/work.err"

# readers: report names the ranges; cov covers only them
"$btr" report "$tmp/two.btr" >"$tmp/rep" 2>&1
check "report: backend step, IP-filtered" grep -q '^backend:      step (IP filter: only the flow inside' "$tmp/rep"
check "report names range work" grep -Eq '^ip filter:    0x[0-9a-f]+-0x[0-9a-f]+@.*prog_select_qsort \(work\)$' "$tmp/rep"
check "report names range on_sig" grep -Eq '^ip filter: .*\(on_sig\)$' "$tmp/rep"
check "report: no gap" grep -q '^gaps:         0' "$tmp/rep"
"$btr" report --format json "$tmp/two.btr" >"$tmp/rep.json" 2>&1
check "report --format json: the ranges" grep -q '"function": "on_sig"' "$tmp/rep.json"
"$btr" report "$tmp/full.btr" >"$tmp/rep" 2>&1
check "report of an unfiltered trace names no range" [ "$(grep -c '^ip filter' "$tmp/rep")" -eq 0 ]
"$btr" cov --format lcov -o "$tmp/two.info" "$tmp/two.btr" 2>"$tmp/err"
check "cov of a filtered trace works" [ $? -eq 0 ]
check "cov: functions are the ranges only" [ "$(grep '^FN:' "$tmp/two.info" | cut -d, -f2 | sort | tr '\n' ' ')" = "on_sig work " ]
check "cov: the ranges' lines all ran" [ "$(grep -c '^DA:[0-9]*,0$' "$tmp/two.info")" -eq 0 ]
"$btr" cov --format lcov -o "$tmp/full.info" "$tmp/full.btr" 2>/dev/null
check "cov of the unfiltered trace lists main and cmp too" [ "$(grep -cE '^FN:[0-9]+,(main|cmp)$' "$tmp/full.info")" -eq 2 ]

# a forked child and the program it execs (the same pid)
f=$build/prog_select_fork
"$btr" record -q -b step -o "$tmp/ffull.btr" -- "$f" >/dev/null 2>"$tmp/err"
rc=$?
check "fork: unfiltered recording works ($(tail -1 "$tmp/err"))" [ $rc -eq 0 ]
filtered fwork "$f" "" -- "work@$f"
same fwork ffull work
check "fork: work() ran in 2 processes" [ "$(branches_in "$tmp/fwork.btr" work | cut -d' ' -f1 | sort -u | wc -l)" -eq 2 ]
check "fork: 2 processes, the child exec'd" grep -q '^processes:    2' <("$btr" report "$tmp/fwork.btr")

# three threads enter the ranges at once
t=$build/prog_flow_threads
"$btr" record -q -b step -o "$tmp/tfull.btr" -- "$t" >/dev/null 2>"$tmp/err"
rc=$?
check "threads: unfiltered recording works ($(tail -1 "$tmp/err"))" [ $rc -eq 0 ]
filtered tw "$t" "" -- "work@$t" "worker@$t"
same tw tfull 'work|worker'

# refusals: one line, exit 2 (usage) or 3 (the file)
"$btr" record -q -b step --ip-filter "nosuchfn@$q" -o "$tmp/x.btr" -- "$q" 10 1 >/dev/null 2>"$tmp/err"
check "an unknown symbol: exit 3" [ $? -eq 3 ]
check "... naming it" grep -q "no function 'nosuchfn'" "$tmp/err"
check "... and no trace" [ ! -e "$tmp/x.btr" ]
"$btr" record -q -b step --ip-filter "0x1000-0x2000" -o "$tmp/x.btr" -- "$q" 10 1 >/dev/null 2>"$tmp/err"
check "a kernel range with -b step: usage error" [ $? -eq 2 ]
check "... saying a file is needed" grep -q "give the file" "$tmp/err"
"$btr" record -q -b step --ip-filter "work@$q" --ring 16 -o "$tmp/x.btr" -- "$q" 10 1 >/dev/null 2>"$tmp/err"
check "--ip-filter with --ring: usage error" [ $? -eq 2 ]
check "... saying so" grep -q -- '--ip-filter with -b step cannot be combined with --ring' "$tmp/err"

finish cli_step_filter
