#!/usr/bin/env bash
# cli_timeline.sh - `btr timeline` on programs recorded with
# `btr record -b qemu`: Chrome JSON whose B/E events nest and keep time order
# per thread, fib(10)'s 177 calls at recursion depths 1..10 inside main, the
# Perfetto protobuf holding exactly the same slices (decoded in the test),
# --from/--to windows and --min-dur, several threads, bad input.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
src=$(cd "$(dirname "$0")" && pwd)

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

"$btr" record -q -b qemu -o fib.btr -- "$build/prog_prof_fib" >/dev/null 2>&1; check "record fib" [ -s fib.btr ]
"$btr" record -q -b qemu -o mt.btr -- "$build/prog_qemu_mt" >/dev/null 2>&1; check "record mt" [ -s mt.btr ]

"$btr" timeline fib.btr -o fib.json; check "json exit 0" [ $? -eq 0 ]
"$btr" timeline fib.btr -o fib.pftrace; check "pftrace exit 0" [ $? -eq 0 ]
pycheck timeline_fib fib.json fib.pftrace
"$btr" timeline --from 50000 --to 90000 --min-dur 100 fib.btr -o win.json; check "window exit 0" [ $? -eq 0 ]
pycheck timeline_window win.json 50000 90000 100
"$btr" timeline mt.btr -o mt.json; check "mt exit 0" [ $? -eq 0 ]
pycheck timeline_mt mt.json
# each thread_name record names its own thread: "tid N" with tid N, and the
# pid and tid of that thread's slices (pid and tid differ but for the first)
check "mt: thread_name records carry their threads' pid and tid" python3 -c '
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
meta = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M"}
slic = {(e["pid"], e["tid"]) for e in ev if e["ph"] in "BE"}
assert all(e["args"]["name"] == "tid %d" % e["tid"] for e in ev if e["ph"] == "M"), ev[:3]
assert len(slic) >= 3 and len({p for p, t in slic}) == 1 and meta == slic, (meta, slic)' mt.json
# the shared stream options: --tid keeps one thread
tid=$(grep -o '"tid": [0-9]*' mt.json | tail -1 | grep -o '[0-9]*$')
"$btr" timeline --tid "$tid" mt.btr -o one.json; check "--tid exit 0" [ $? -eq 0 ]
check "--tid: only thread $tid" [ "$(grep -o '"tid": [0-9]*' one.json | sort -u | grep -o '[0-9]*$')" = "$tid" ]
"$btr" timeline --format pftrace mt.btr -o - >mt.pb; check "pftrace to stdout exit 0" [ $? -eq 0 ]
check "pftrace to stdout not empty" [ -s mt.pb ]

# many processes (a shell loop): one thread per process, each with its own
# events; write() reads only each thread's span of the event file, not the
# whole file once per thread (quadratic: 50 s for 600 processes).  Counted
# in read() calls (not time): re-reading per thread needs at least
# threads * events * 24 / 4096 of them, the fix a small fraction.
"$btr" record -q -b qemu -o loop.btr -- sh -c 'for i in $(seq 20); do /bin/true; done' >/dev/null 2>&1
check "record loop" [ -s loop.btr ]
"$btr" timeline loop.btr -o loop.json; check "loop exit 0" [ $? -eq 0 ]
check "loop: 22 threads named" [ "$(grep -c '"thread_name"' loop.json)" -eq 22 ]
check "loop: every thread has events" [ "$(grep -v thread_name loop.json | grep -o '"tid": [0-9]*' | sort -u | wc -l)" -eq 22 ]
if oracle strace "the reads of timeline counted"; then
	# (LeakSanitizer cannot run under ptrace: leaks are checked by the other runs)
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		strace -f -qq -o loop.strace -e trace=read "$btr" timeline loop.btr -o loop2.json
	check "loop under strace exit 0" [ $? -eq 0 ]
	check "loop under strace same output" cmp -s loop.json loop2.json
	nev=$(grep -c '"ph": "[BE]"' loop.json); reads=$(grep -c '^[0-9]* *read(' loop.strace)
	check "loop: $reads read() calls for $nev events in 22 threads (re-reading: >= $((22 * nev * 24 / 4096)))" \
		[ "$reads" -lt $((22 * nev * 24 / 4096 / 4)) ]
fi

"$btr" timeline --help >/dev/null; check "--help exit 0" [ $? -eq 0 ]
"$btr" timeline fib.btr 2>/dev/null; check "missing -o exit 2" [ $? -eq 2 ]
"$btr" timeline --from 10 --to 5 fib.btr -o x.json 2>/dev/null; check "bad window exit 2" [ $? -eq 2 ]
"$btr" timeline --from 10 --to 10 fib.btr -o x.json 2>/dev/null; check "empty window (--to = --from) exit 2" [ $? -eq 2 ]
"$btr" timeline --from x fib.btr -o x.json 2>/dev/null; check "bad number exit 2" [ $? -eq 2 ]
"$btr" timeline /nonexistent.btr -o x.json 2>err; check "missing trace exit 3" [ $? -eq 3 ]
check "missing trace one line" [ "$(wc -l <err)" -eq 1 ]
check "missing trace leaves no output" [ ! -e x.json ]
echo garbage >bad.btr
"$btr" timeline bad.btr -o x.json 2>err; check "bad trace exit 3" [ $? -eq 3 ]
check "bad trace leaves no output" [ ! -e x.json ]

pycheck_run
finish cli_timeline
