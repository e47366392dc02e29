#!/usr/bin/env bash
# cli_qemu_snapshot.sh - `btr record -b qemu --snapshot SIZE` (the flight
# recorder) through the CLI: --trigger mark on a program calling it 3
# times gives 3 windows, each ending at the call, each one's `btr script`
# the tail of an unfiltered recording's script up to that call; report,
# timeline and script show the windows apart (no gap); check finds
# nothing; a SIGUSR2 to btr from outside writes a window of the running
# program; a SIGSEGV writes the thread's last window, which `btr crash`
# shows (the same last branches as an unfiltered recording); three
# threads give a window each at their call.  Usage errors are one line,
# exit 2.  (Decoding each window alone with libipt, the memory held and
# --max-snapshots: tests/test_qemu_snapshot.c.)
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

need_qemu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# notid FILE: script lines without their PID/TID column
notid() { sed 's/^[^ ]* //' "$1"; }
# window_lines SCRIPT TID K: the branches of thread TID in its window K
window_lines() {
	awk -v t="$2" -v k="$3" '
		/^\[window / { split($2, a, "/"); if (a[2] == t) cur = $3; next }
		/^\[/ { next }
		{ split($1, a, "/"); if (a[2] == t && cur == k) print }' "$1"
}
# tail_to SCRIPT TID N PATTERN: the number of thread TID's branches up to
# its N-th one matching PATTERN
tail_to() {
	awk -v t="$2" '{ split($1, a, "/"); if (a[2] == t) print }' "$1" |
		grep -n -m"$3" -- "$4" | tail -1 | cut -d: -f1
}

prog=$build/prog_snap_calls
record_qemu "$tmp/full.btr" "unfiltered" "$prog"
"$btr" script "$tmp/full.btr" >"$tmp/full.txt"
"$btr" record -q -b qemu --snapshot 16K --trigger mark -o "$tmp/s.btr" -- "$prog" >/dev/null 2>"$tmp/err"
rc=$?
check "--snapshot 16K --trigger mark: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
"$btr" script "$tmp/s.btr" >"$tmp/s.txt"
check "script: 4 window lines (3 trigger, 1 end)" [ "$(grep -c '^\[window ' "$tmp/s.txt")" -eq 4 ]
check "script: 3 trigger windows" [ "$(grep -c '^\[window .* trigger\]$' "$tmp/s.txt")" -eq 3 ]
check "script: no gap" [ "$(grep -c '^\[gap' "$tmp/s.txt")" -eq 0 ]
tid=$(head -1 "$tmp/s.txt" | awk '{ split($2, a, "/"); print a[2] }')
ftid=$(head -1 "$tmp/full.txt" | awk '{ split($1, a, "/"); print a[2] }')
for k in 0 1 2; do
	window_lines "$tmp/s.txt" "$tid" $k >"$tmp/w$k"
	n=$(wc -l <"$tmp/w$k")
	check "window $k: thousands of branches ($n)" [ "$n" -gt 1000 ]
	check "window $k ends at the call of mark" grep -q ' -> mark call' <(tail -1 "$tmp/w$k")
	end=$(tail_to "$tmp/full.txt" "$ftid" $((k + 1)) ' -> mark call')
	awk -v t="$ftid" '{ split($1, a, "/"); if (a[2] == t) print }' "$tmp/full.txt" | head -"${end:-0}" |
		tail -"$n" >"$tmp/f$k"
	check "window $k: its script is the tail of the unfiltered script up to call $((k + 1)) of mark" \
		cmp -s <(notid "$tmp/w$k") <(notid "$tmp/f$k")
done
check "the windows are far smaller than the unfiltered trace" \
	[ "$(stat -c %s "$tmp/s.btr")" -lt "$(($(stat -c %s "$tmp/full.btr") / 5))" ]

"$btr" report "$tmp/s.btr" >"$tmp/rep" 2>&1
check "report: 4 windows" grep -q '^windows:      4 snapshots' "$tmp/rep"
check "report: no gap" grep -q '^gaps:         0' "$tmp/rep"
"$btr" report --format json "$tmp/s.btr" >"$tmp/rep.json" 2>&1
check "report --format json: \"windows\": 4" grep -q '"windows": 4,' "$tmp/rep.json"
"$btr" report "$tmp/full.btr" >"$tmp/rep" 2>&1
check "report of a continuous trace: no windows line" [ "$(grep -c '^windows:' "$tmp/rep")" -eq 0 ]
"$btr" timeline -o "$tmp/t.json" "$tmp/s.btr" >/dev/null 2>"$tmp/err"
rc=$?
check "timeline works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
check "timeline: one mark per window" [ "$(grep -c '"name": "snapshot window [0-9]' "$tmp/t.json")" -eq 4 ]
check "timeline: the trigger windows named" [ "$(grep -c 'snapshot window [0-2] (trigger)' "$tmp/t.json")" -eq 3 ]
"$btr" check "$tmp/s.btr" >"$tmp/chk" 2>&1
check "check: nothing found across the windows (exit 0)" [ $? -eq 0 ]

# a SIGUSR2 to btr from outside, while the program runs: each thread's
# window when it next flushes or makes a system call (the program makes
# one per round); STOP is made once btr has passed the request on (its
# count page says so: nothing timed)
mkdir -p "$tmp/td"
TMPDIR=$tmp/td "$btr" record -q -b qemu --snapshot 16K -o "$tmp/u.btr" -- "$prog" wait "$tmp/ready" "$tmp/stop" \
	>/dev/null 2>"$tmp/err" &
bpid=$!
for _ in $(seq 600); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
check "SIGUSR2: the program runs" [ -e "$tmp/ready" ]
kill -USR2 $bpid
req=0
for _ in $(seq 600); do
	f=$(ls "$tmp"/td/btr-record-*/count 2>/dev/null | head -1)
	req=$([ -n "$f" ] && od -An -t u8 -j 40 -N 8 "$f" | tr -d ' ')
	[ "${req:-0}" -gt 0 ] && break
	sleep 0.1
done
check "SIGUSR2: btr passed the request on" [ "${req:-0}" -eq 1 ]
touch "$tmp/stop"
wait $bpid
rc=$?
check "SIGUSR2: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
"$btr" trace dump "$tmp/u.btr" >"$tmp/u.dump"
check "SIGUSR2: a request window" [ "$(grep -c '^window .* reason=request' "$tmp/u.dump")" -eq 1 ]
check "SIGUSR2: then the end window" [ "$(grep -c '^window .* reason=end' "$tmp/u.dump")" -eq 1 ]
"$btr" script "$tmp/u.btr" >"$tmp/u.txt"
check "SIGUSR2: the request window decodes" [ "$(window_lines "$tmp/u.txt" "$(grep -m1 '^thread_start' "$tmp/u.dump" |
	sed 's/.*tid=\([0-9]*\).*/\1/')" 0 | wc -l)" -gt 1000 ]
check "SIGUSR2: no gap" [ "$(grep -c '^\[gap' "$tmp/u.txt")" -eq 0 ]

# a crash: the last window, written by btr from the plugin's state
crash=$build/prog_qemu_crash
"$btr" record -q -b qemu -o "$tmp/cfull.btr" -- "$crash" >/dev/null 2>&1
rc=$?
check "crash, unfiltered: exit 139" [ $rc -eq 139 ]
"$btr" record -q -b qemu --snapshot 16K -o "$tmp/c.btr" -- "$crash" >/dev/null 2>"$tmp/err"
rc=$?
check "crash with --snapshot: exit 139 ($(head -1 "$tmp/err"))" [ $rc -eq 139 ]
"$btr" trace dump "$tmp/c.btr" >"$tmp/c.dump"
check "crash: one window, the killed thread's" [ "$(grep -c '^window .* reason=killed' "$tmp/c.dump")" -eq 1 ]
"$btr" crash "$tmp/c.btr" >"$tmp/c.crash" 2>&1
check "crash: btr crash names the window" grep -q 'snapshot window 0 (killed)' "$tmp/c.crash"
check "crash: SIGSEGV in crash_here" grep -q 'SIGSEGV' "$tmp/c.crash"
"$btr" crash "$tmp/cfull.btr" >"$tmp/cf.crash" 2>&1
check "crash: the same last branches as the unfiltered recording" \
	cmp -s <(grep -v '^process\|snapshot window' "$tmp/c.crash") <(grep -v '^process' "$tmp/cf.crash")
check "crash: the window decodes without a gap" [ "$("$btr" script "$tmp/c.btr" | grep -c '^\[gap')" -eq 0 ]

# three threads: a window each at their call of work
thr=$build/prog_flow_threads
"$btr" record -q -b qemu --snapshot 16K --trigger work -o "$tmp/t.btr" -- "$thr" >/dev/null 2>"$tmp/err"
rc=$?
check "threads: recording works ($(head -1 "$tmp/err"))" [ $rc -eq 0 ]
"$btr" script "$tmp/t.btr" >"$tmp/t.txt"
check "threads: 3 trigger windows" [ "$(grep -c '^\[window .* 0 trigger\]$' "$tmp/t.txt")" -eq 3 ]
check "threads: of 3 threads" [ "$(grep '^\[window .* trigger\]$' "$tmp/t.txt" | cut -d' ' -f2 | sort -u | wc -l)" -eq 3 ]
check "threads: no gap" [ "$(grep -c '^\[gap' "$tmp/t.txt")" -eq 0 ]
# each thread's window ends at its own call of work (the flows before it
# are not compared with an unfiltered run: thread start-up and the
# creating thread's pthread_create depend on timing)
for t in $(grep '^\[window .* trigger\]$' "$tmp/t.txt" | cut -d' ' -f2 | cut -d/ -f2); do
	window_lines "$tmp/t.txt" "$t" 0 | tail -1
done >"$tmp/tlast"
check "threads: each thread's window ends at its call of work" \
	[ "$(grep -c ' -> work call' "$tmp/tlast")" -eq 3 ]

"$btr" info -v >"$tmp/info" 2>&1
check "info -v names qemu's --snapshot" grep -q '^  qemu:  .*--snapshot SIZE' "$tmp/info"

# usage errors: one line, exit 2
for args in "--trigger mark" "-b qemu --snapshot" "--snapshot 1K" "--snapshot 2G" "-b pt --snapshot 64K" "-b step --snapshot 64K" \
	"--snapshot 64K --max-snapshots 0" "--max-snapshots 3"; do
	# shellcheck disable=SC2086
	"$btr" record -q $args -o "$tmp/x.btr" -- "$prog" >/dev/null 2>"$tmp/err"
	rc=$?
	check "record $args: usage error" [ $rc -eq 2 ]
	check "record $args: one line" [ "$(grep -vc '^Try' "$tmp/err")" -eq 1 ]
done
check "no trace left by a usage error" [ ! -e "$tmp/x.btr" ]

finish cli_qemu_snapshot
