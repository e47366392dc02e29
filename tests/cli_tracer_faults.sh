#!/usr/bin/env bash
# cli_tracer_faults.sh - faults around a recording (docs/reliability.md):
# a traced program whose threads all exit at once, that calls exit() while
# threads run, or that is SIGKILLed, leaves a complete, decodable trace;
# btr record interrupted by SIGINT, SIGTERM or SIGHUP finalizes the trace;
# btr record killed with SIGKILL leaves nothing under the output name, and
# what it recorded is in $TMPDIR/btr-record-*/pPID.btr.tmp.N (one per process), which
# `btr trace info` reads up to its last complete chunk and reports as cut.
# (Crashes by SIGSEGV/SIGABRT: test_qemu_record and cli_record.  Fork and
# exec: the process tests.)  Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
prog=$build/prog_fault_threads
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 not installed"
[ -x "$prog" ] && [ -r "$build/btr-qemu.so" ] || skip "prog_fault_threads or btr-qemu.so not built"
if grep -q __asan_init "$prog"; then skip "test program built with ASan"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
mkdir tmpd
export TMPDIR=$tmp/tmpd

# json field of `btr report --format json`
jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }
# $1 trace: complete, readable, decodable
valid() {
  local t=$1 what=$2
  "$btr" trace info "$t" >"$t.info" 2>&1; check "$what: trace info exit 0" [ $? -eq 0 ]
  check "$what: trace complete" grep -q '^complete: *yes' "$t.info"
  "$btr" report --format json "$t" >"$t.json" 2>"$t.err"; rc=$?; check "$what: report exit 0 ($(head -c 200 "$t.err"))" [ $rc -eq 0 ]
  check "$what: no trace data lost" [ "$(jget "$t.json" 'd["data_lost"]')" = False ]
  local gaps threads
  gaps=$(jget "$t.json" 'd["gaps"]'); threads=$(jget "$t.json" 'd["threads"]')
  if [ "${3:-}" != signal ] || [ "${BTR_STRICT_FAULTS:-0}" = 1 ]; then
    # the program ends itself (exit, exit_group with threads running): a
    # thread stopped between two blocks ends with FUP + TIP.PGD at its
    # last branch, so no gap
    check "$what: report has no gaps (got $gaps)" [ "$gaps" = 0 ]
  else
    # KNOWN (docs/reliability.md): a signal that ends the program (SIGKILL,
    # or SIGINT/TERM/HUP that btr passes on) can land while the plugin
    # updates a thread's state: at most one gap per thread, at its end.
    # Why this is allowed - a recorder limit, not a decoder bug: each guest
    # thread is a host thread of qemu-user, and the plugin keeps its state
    # (PT buffer, pending TNT bits, previous block, return stack) in a
    # MAP_SHARED file that btr record finishes after QEMU is gone
    # (lib/capture/agent/qemu_state.h).  SIGKILL stops every thread at an
    # arbitrary instruction; a fatal SIGINT/TERM/HUP is taken by one vCPU
    # thread at a TB boundary, but QEMU 7.2 then aborts the whole process
    # while the other threads run on - inside the plugin's per-block
    # callback too.  A thread stopped between two of that callback's stores
    # (say the packet bytes written, the TNT count not yet) leaves packets
    # that do not agree with the code, which the decoder reports as a gap
    # rather than invent a path.  Only a commit protocol in the plugin's
    # hot path (two state copies and one publishing store) would remove
    # it.  So: at most one gap per thread, and that gap must be the
    # thread's last event (nothing decoded after it); BTR_STRICT_FAULTS=1
    # requires no gap at all.  Measured 2026-11-25 (Debug, loaded 2-core
    # machine): 1 gap in 6 strict runs (SIGKILL: the killed thread's last
    # jmp_ind into libc, then the gap, then only its TIP.PGD); the docs
    # record 1 in 8 earlier.
    check "$what: at most one gap per thread (got $gaps for $threads)" [ "$gaps" -le "$threads" ]
    if [ "$gaps" != 0 ]; then
      echo "KNOWN: $what: $gaps thread(s) cut while the plugin updated their state (recorder)"
      # (btr pt decode: per-thread sections "[thread TID]", event lines "[...]")
      "$btr" pt decode "$t" >"$t.flow" 2>/dev/null
      check "$what: each gap is its thread's last decoded event, one per thread" python3 -c '
import sys
tid, gapped = None, set()
for line in open(sys.argv[1]):
    if line.startswith("[thread "):
        tid = line.split()[1].rstrip("]")
    elif line.startswith("[gap "):
        assert tid not in gapped, "two gaps in thread %s" % tid
        gapped.add(tid)
    elif not line.startswith("[") and tid in gapped:
        sys.exit("thread %s goes on after its gap: %s" % (tid, line.strip()))
assert gapped, "report counts a gap that pt decode does not show"' "$t.flow"
    fi
  fi
}

# ---- all threads exit at once ----
"$btr" record -q -o exit16.btr -- "$prog" exit 16; rc=$?
check "16 threads exiting at once: exit 0 (got $rc)" [ $rc -eq 0 ]
valid exit16.btr "16 threads exiting at once"
check "17 threads started and exited" [ "$("$btr" trace dump exit16.btr | grep -c '^thread_exit')" = 17 ]
check "report counts 17 threads" [ "$(jget exit16.btr.json 'd["threads"]')" = 17 ]
check "16 threads exiting at once: no gaps" [ "$(jget exit16.btr.json 'd["gaps"]')" = 0 ]

# ---- exit() while 8 threads run (exit_group) ----
"$btr" record -q -o group.btr -- "$prog" group 8; rc=$?
check "exit_group with 8 running threads: exit 7 (got $rc)" [ $rc -eq 7 ]
valid group.btr "exit_group"
check "exit_group: exit record with code 7" grep -q 'exit: *pid [0-9]* code 7 signal 0' group.btr.info

# Starts `btr record` on the spinner in its own session (SIGINT not ignored,
# unlike a background job of this shell), waits until PT data is flowing,
# sends signal $2 to: btr ("btr"), the traced program ("child") or both
# ("group"); prints btr's exit status (or "killed").
spin_and_signal() {
  python3 - "$btr" "$prog" "$1" "$2" "$3" "$TMPDIR" <<'PY'
import glob, os, signal, subprocess, sys, time
btr, prog, out, sig, who, tmpd = sys.argv[1:7]
p = subprocess.Popen([btr, "record", "-q", "-o", out, "--", prog, "spin", "2", "60"],
                     start_new_session=True, stdout=subprocess.DEVNULL)
deadline = time.time() + 60
def data():
    return sum(os.path.getsize(f) for f in glob.glob(tmpd + "/btr-record-*/*.btr*"))
while time.time() < deadline and data() < 256 * 1024 and p.poll() is None:
    time.sleep(0.1)
child = int(open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()[0])
s = getattr(signal, sig)
if who == "btr":
    os.kill(p.pid, s)
elif who == "child":
    os.kill(child, s)
else:
    os.killpg(p.pid, s)
try:
    print(p.wait(timeout=60))
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    print("hang")
PY
}

# ---- the traced program is SIGKILLed ----
rc=$(spin_and_signal killed.btr SIGKILL child)
check "traced program SIGKILLed: btr exits 137 (got $rc)" [ "$rc" = 137 ]
valid killed.btr "traced program SIGKILLed" signal
check "SIGKILL: exit record with signal 9" grep -q 'exit: .*signal 9' killed.btr.info

# ---- btr interrupted: the trace is finalized ----
for s in SIGINT:2 SIGTERM:15 SIGHUP:1; do
  name=${s%:*}; num=${s#*:}
  rc=$(spin_and_signal "int-$name.btr" "$name" btr)
  check "$name to btr: exit $((128 + num)) (got $rc)" [ "$rc" = $((128 + num)) ]
  valid "int-$name.btr" "$name to btr" signal
  check "$name to btr: exit record with signal $num" grep -q "exit: .*signal $num " "int-$name.btr.info"
  check "$name to btr: no temporary file left" [ -z "$(ls | grep "int-$name.btr.tmp")" ]
done
check "no temporary directory left behind" [ -z "$(ls tmpd)" ]

# ---- btr killed with SIGKILL (with the program: the whole session) ----
rc=$(spin_and_signal lost.btr SIGKILL group)
check "SIGKILL to btr: killed (got $rc)" [ "$rc" = -9 ]
check "SIGKILL to btr: nothing under the output name" [ ! -e lost.btr ]
part=$(ls tmpd/btr-record-*/p*.btr.tmp.* 2>/dev/null | head -1)
check "SIGKILL to btr: the recorded data is in \$TMPDIR/btr-record-*/pPID.btr.tmp.N" [ -n "$part" ]
if [ -n "$part" ]; then
  "$btr" trace info "$part" >part.info 2>part.err; rc=$?
  check "partial trace: trace info exit 3 (got $rc)" [ $rc -eq 3 ]
  check "partial trace: one stderr line: $(cat part.err)" [ "$(wc -l <part.err)" = 1 ]
  check "partial trace: it says the trace was cut: $(cat part.err)" grep -q truncated part.err
  check "partial trace: marked incomplete" grep -q '^complete: *no' part.info
  n=$(awk '/^records:/{print $2}' part.info)
  check "partial trace: records up to the last complete chunk ($n)" [ "${n:-0}" -gt 3 ]
  check "partial trace: PT data kept" [ "$(awk '/^pt bytes:/{print $3}' part.info)" -gt 100000 ]
  "$btr" report "$part" >part.rep 2>part.rerr
  check "partial trace: report gives a partial result" grep -q '^instructions: *[1-9]' part.rep
  check "partial trace: report warns that the input was cut" grep -q 'truncated' part.rerr
fi

finish cli_tracer_faults
