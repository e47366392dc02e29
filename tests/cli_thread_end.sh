#!/usr/bin/env bash
# cli_thread_end.sh - each thread line of `btr report` (text, and JSON
# thread_list) says how the thread ended: exit N (pthread exit, exit_group),
# killed by SIGSEGV (the process died of a signal, every thread with it),
# for the qemu backend (and the crash for -b step).  (An attached process that runs on
# after the recording: tests/cli_step.sh; a cut trace: tests/cli_lost.sh.)
# Args: $1 btr, $2 build dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
prog=$build/prog_fault_threads
# thread_list ends, in tid order: "end/exit_code/signal_name" per thread
ends() { python3 -c '
import json, sys
print(" ".join("%s/%s/%s" % (t["end"], t.get("exit_code", "-"), t.get("signal_name", "-"))
               for t in json.load(open(sys.argv[1]))["thread_list"]))' "$1"; }
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 not installed"
for b in qemu; do
  # main writes through NULL while 2 threads block: SIGSEGV kills all three
  "$btr" record -q -b $b -o crash.btr -- "$prog" crash 2 >/dev/null 2>&1; rc=$?
  check "$b crash: record exits 139 (got $rc)" [ $rc -eq 139 ]
  "$btr" report crash.btr >crash.txt 2>&1; rc=$?
  check "$b crash: report exit 0 (got $rc)" [ $rc -eq 0 ]
  if ! check "$b crash: 3 thread lines say killed by SIGSEGV: $(grep '^  tid' crash.txt)" \
    [ "$(grep -c '^  tid .*, killed by SIGSEGV$' crash.txt)" -eq 3 ]; then
    # (seen once in many runs under load: keep what tells why)
    "$btr" trace dump crash.btr 2>&1 | grep -v '^ *pt ' | head -40 >&2
  fi
  check "$b crash: no thread says exit" [ "$(grep -c '^  tid .*, exit ' crash.txt)" -eq 0 ]
  check "$b crash: trace dump says each thread_exit's end" \
    [ "$("$btr" trace dump crash.btr | grep -c '^thread_exit .* end=killed signal=')" -eq 3 ]
  "$btr" report --format json crash.btr >crash.json 2>/dev/null
  check "$b crash: thread_list $(ends crash.json)" \
    [ "$(ends crash.json)" = "killed/-/SIGSEGV killed/-/SIGSEGV killed/-/SIGSEGV" ]
  # exit(7) while 2 threads spin: exit_group ends them all with 7
  "$btr" record -q -b $b -o group.btr -- "$prog" group 2 >/dev/null 2>&1; rc=$?
  check "$b group: record exits 7 (got $rc)" [ $rc -eq 7 ]
  "$btr" report --format json group.btr >group.json 2>/dev/null
  # (a spinner may not have run yet when main exits: 2 or 3 threads)
  check "$b group: thread_list $(ends group.json)" \
    [ "$(ends group.json | sed 's|exited/7/- ||g; s| *$||')" = "exited/7/-" ]
  # threads that return (exit 0), then main returns 0
  "$btr" record -q -b $b -o exit.btr -- "$prog" exit 2 >/dev/null 2>&1; rc=$?
  check "$b exit: record exits 0 (got $rc)" [ $rc -eq 0 ]
  "$btr" report exit.btr >exit.txt 2>&1
  check "$b exit: 3 thread lines say exit 0" [ "$(grep -c '^  tid .*, exit 0$' exit.txt)" -eq 3 ]
  "$btr" report --format json exit.btr >exit.json 2>/dev/null
  check "$b exit: thread_list $(ends exit.json)" [ "$(ends exit.json)" = "exited/0/- exited/0/- exited/0/-" ]
done
# -b step: the threads' wait statuses say the signal (only the crash:
# stepping ld.so alone takes seconds)
"$btr" record -q -b step -o scrash.btr -- "$prog" crash 2 >/dev/null 2>&1; rc=$?
check "step crash: record exits 139 (got $rc)" [ $rc -eq 139 ]
"$btr" report --format json scrash.btr >scrash.json 2>/dev/null
check "step crash: thread_list $(ends scrash.json)" \
  [ "$(ends scrash.json)" = "killed/-/SIGSEGV killed/-/SIGSEGV killed/-/SIGSEGV" ]
finish cli_thread_end
