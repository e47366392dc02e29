#!/usr/bin/env bash
# cli_qemu_filter.sh - `btr record -b qemu --ip-filter` through the CLI:
# a range in a forked child and in the program it execs (same pid), and in three
# threads entering it at once, traces the same branches as an unfiltered
# recording of the same program restricted to the range (per process and
# thread, in order), without a gap; report says the trace is filtered and
# check finds nothing; bad specs and backends without IP filtering are
# refused with one line; returns that leave to a block translated before
# the range ran say where they went (tests/progs/select_late.c); report
# names the ranges, cov covers only them, check finds nothing at the edges
# of main's range.  (The instruction-exact comparisons with libipt
# are tests/test_qemu_filter.c.)
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

need_qemu
tmp=$(mktemp -d)
not_filtered() { ! grep -q 'IP filter' "$1"; }
trap 'rm -rf "$tmp"' EXIT

# branches whose source is in function $2 of trace $1, one line per
# branch, the tid column replaced by the thread's rank of first appearance
# (tids differ between two runs)
branches_in() {
	"$btr" script -F tid,addr,sym,kind,flags,insns "$1" |
		awk -v f="$2" '$5 == f || index($5, f "+") == 1 {
			if (!($1 in rank)) rank[$1] = n++
			$1 = rank[$1]; print }' | sort -s -n -k1,1
}

# per_thread FILE: FILE's lines grouped by their first column (a thread),
# each group's digest and length, sorted: threads that run at once enter
# in any order
per_thread() {
	local k
	for k in $(cut -d' ' -f1 "$1" | sort -u); do
		echo "$(awk -v k="$k" '$1 == k { $1 = ""; print }' "$1" | md5sum | cut -c1-32) $(grep -c "^$k " "$1")"
	done | sort
}

fork=$build/prog_select_fork
record_qemu "$tmp/full.btr" "fork, unfiltered" "$fork"
"$btr" record -q -b qemu --ip-filter "work@$fork" -o "$tmp/work.btr" -- "$fork" >/dev/null 2>"$tmp/err"
rc=$?
check "fork+exec: filtered recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
branches_in "$tmp/full.btr" work >"$tmp/a"
branches_in "$tmp/work.btr" work >"$tmp/b"
check "fork+exec: unfiltered run has work() in 2 tids (parent; child then exec)" \
	[ "$(cut -d' ' -f1 "$tmp/a" | sort -u | wc -l)" -eq 2 ]
check "fork+exec: work() branches equal, per process" cmp -s "$tmp/a" "$tmp/b"
check "fork+exec: nothing outside work() traced" \
	[ "$("$btr" script -F sym "$tmp/work.btr" | grep -cv '^work')" -eq 0 ]
check "fork+exec: no gap" [ "$("$btr" script "$tmp/work.btr" | grep -c '^\[gap')" -eq 0 ]
check "fork+exec: 2 processes (the child execs) in the filtered trace" \
	grep -q '^processes:    2' <("$btr" report "$tmp/work.btr")

thr=$build/prog_flow_threads
record_qemu "$tmp/tfull.btr" "threads, unfiltered" "$thr"
"$btr" record -q -b qemu --ip-filter "work@$thr" --ip-filter "worker@$thr" -o "$tmp/tw.btr" -- "$thr" \
	>/dev/null 2>"$tmp/err"
rc=$?
check "threads: filtered recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
for f in work worker; do
	branches_in "$tmp/tfull.btr" $f >"$tmp/a"
	branches_in "$tmp/tw.btr" $f >"$tmp/b"
	check "threads: $f() has branches" [ -s "$tmp/a" ]
	check "threads: $f() branches equal per thread" cmp -s <(per_thread "$tmp/a") <(per_thread "$tmp/b")
done
check "threads: 3 threads ran work()" [ "$(branches_in "$tmp/tw.btr" work | cut -d' ' -f1 | sort -u | wc -l)" -eq 3 ]

"$btr" report "$tmp/tw.btr" >"$tmp/rep" 2>&1
check "report says the trace is IP-filtered" grep -q '^backend:      qemu (IP filter: only the flow inside' "$tmp/rep"
check "report: no gap" grep -q '^gaps:         0' "$tmp/rep"
"$btr" report --format json "$tmp/tw.btr" >"$tmp/rep.json" 2>&1
check "report --format json: ip_filtered" grep -q '"ip_filtered": true' "$tmp/rep.json"
"$btr" report "$tmp/tfull.btr" >"$tmp/rep" 2>&1
check "report of an unfiltered trace says nothing of a filter" not_filtered "$tmp/rep"
"$btr" check "$tmp/tw.btr" >"$tmp/chk" 2>&1
check "check: a filtered trace has no findings (exit 0)" [ $? -eq 0 ]

# --start/--stop: three threads enter rec() at once, rec() recurses
st=$build/prog_select_start
record_qemu "$tmp/sfull.btr" "select_start, unfiltered" "$st"
"$btr" record -q -b qemu --start rec -o "$tmp/start.btr" -- "$st" >/dev/null 2>"$tmp/err"
rc=$?
check "--start: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
branches_in "$tmp/sfull.btr" rec >"$tmp/a"
branches_in "$tmp/start.btr" rec >"$tmp/b"
check "--start: rec() has branches in the unfiltered run" [ -s "$tmp/a" ]
check "--start: rec()'s branches equal per thread (recursion: only the outermost return stops)" \
	cmp -s <(per_thread "$tmp/a") <(per_thread "$tmp/b")
check "--start: 3 threads traced" [ "$(cut -d' ' -f1 "$tmp/b" | sort -u | wc -l)" -eq 3 ]
check "--start: only rec() and its callee leaf() traced" \
	[ "$("$btr" script -F sym "$tmp/start.btr" | grep -cEv '^(rec|leaf)(\+| )')" -eq 0 ]
check "--start: no gap" [ "$("$btr" script "$tmp/start.btr" | grep -c '^\[gap')" -eq 0 ]
# the same function as an IP range: its returns go back into it (recursion)
# and out of it (the outermost), in three threads at once
"$btr" record -q -b qemu --ip-filter "rec@$st" -o "$tmp/rec.btr" -- "$st" >/dev/null 2>"$tmp/err"
rc=$?
check "--ip-filter rec: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
branches_in "$tmp/rec.btr" rec >"$tmp/b"
check "--ip-filter rec: rec()'s branches equal per thread (returns inside and out)" \
	cmp -s <(per_thread "$tmp/a") <(per_thread "$tmp/b")
check "--ip-filter rec: no gap" [ "$("$btr" script "$tmp/rec.btr" | grep -c '^\[gap')" -eq 0 ]
"$btr" record -q -b qemu --start rec --stop leaf -o "$tmp/stop.btr" -- "$st" >/dev/null 2>"$tmp/err"
rc=$?
check "--stop: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
check "--stop leaf: nothing of leaf() traced" \
	[ "$("$btr" script -F sym "$tmp/stop.btr" | grep -c '^leaf')" -eq 0 ]
check "--stop leaf: each of the 9 entries ends at the call of leaf" \
	[ "$("$btr" script -F sym "$tmp/stop.btr" | grep -c ' -> leaf$')" -eq 9 ]
check "--stop: no gap" [ "$("$btr" script "$tmp/stop.btr" | grep -c '^\[gap')" -eq 0 ]
"$btr" record -q -b lbr --start rec -o "$tmp/x.btr" -- "$st" >/dev/null 2>"$tmp/err"
check "--start with -b lbr: usage error" [ $? -eq 2 ]

# a range left by returns to a block QEMU translated before the range ran
# (no exit callback there): every return still says where it went
late=$build/prog_select_late
record_qemu "$tmp/lfull.btr" "select_late, unfiltered" "$late"
"$btr" record -q -b qemu --ip-filter "inside@$late" -o "$tmp/late.btr" -- "$late" >/dev/null 2>"$tmp/err"
rc=$?
check "late: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
branches_in "$tmp/lfull.btr" inside >"$tmp/a"
branches_in "$tmp/late.btr" inside >"$tmp/b"
check "late: inside() has branches" [ -s "$tmp/a" ]
check "late: inside()'s branches equal (returns to a block translated before)" cmp -s "$tmp/a" "$tmp/b"
check "late: no gap" [ "$("$btr" script "$tmp/late.btr" | grep -c '^\[gap')" -eq 0 ]
check "late: every branch leaving inside() has its target" \
	[ "$("$btr" script -F sym "$tmp/late.btr" | grep -c 'unknown')" -eq 0 ]

# readers of filtered traces: report names the ranges, cov covers only
# them, check judges what it saw (main: left by calls, entered again by
# their returns, and left by its own)
"$btr" report "$tmp/tw.btr" >"$tmp/rep" 2>&1
check "report names range work" grep -Eq '^ip filter:    0x[0-9a-f]+-0x[0-9a-f]+@.*prog_flow_threads \(work\)$' "$tmp/rep"
check "report names range worker" grep -Eq '^ip filter: .*\(worker\)$' "$tmp/rep"
"$btr" cov --format lcov -o "$tmp/tw.info" "$tmp/tw.btr" 2>"$tmp/err"
check "cov of a filtered trace works" [ $? -eq 0 ]
check "cov: functions are the ranges only" [ "$(grep '^FN:' "$tmp/tw.info" | cut -d, -f2 | sort | tr '\n' ' ')" = "work worker " ]
q=$build/prog_select_qsort
"$btr" record -q -b qemu --ip-filter "main@$q" -o "$tmp/main.btr" -- "$q" 300 2 >/dev/null 2>"$tmp/err"
rc=$?
check "main: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
"$btr" check "$tmp/main.btr" >"$tmp/chk" 2>&1
rc=$?
check "check: main's range has no findings at the edges ($(tail -1 "$tmp/chk"))" [ $rc -eq 0 ]
check "main: no gap" [ "$("$btr" script "$tmp/main.btr" | grep -c '^\[gap')" -eq 0 ]

"$btr" info -v >"$tmp/info" 2>&1
check "info -v names qemu's --ip-filter" grep -q '^  qemu:  --ip-filter in software' "$tmp/info"

# refusals: one line, exit 2 (usage) or 3 (the file)
"$btr" record -q -b qemu --ip-filter "nosuchfn@$thr" -o "$tmp/x.btr" -- "$thr" >/dev/null 2>"$tmp/err"
check "an unknown symbol: exit 3" [ $? -eq 3 ]
check "... naming it" grep -q "no function 'nosuchfn'" "$tmp/err"
check "... and no trace" [ ! -e "$tmp/x.btr" ]
"$btr" record -q -b qemu --ip-filter "0x1000-0x2000" -o "$tmp/x.btr" -- "$thr" >/dev/null 2>"$tmp/err"
check "a kernel range with -b qemu: usage error" [ $? -eq 2 ]
check "... saying a file is needed" grep -q "give the file" "$tmp/err"
"$btr" record -q -b bts --ip-filter "work@$thr" -o "$tmp/x.btr" -- "$thr" >/dev/null 2>"$tmp/err"
check "--ip-filter with -b bts: usage error" [ $? -eq 2 ]
check "... naming the backends that have it" grep -q -- "--ip-filter needs -b pt, qemu or step" "$tmp/err"

finish cli_qemu_filter
