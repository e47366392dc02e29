#!/usr/bin/env bash
# cli_record.sh - `btr record` and `btr info` from the outside: exit codes,
# pass-through of stdio and exit status, bad input, crash and Ctrl-C.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# ---- info ----
"$btr" info >info.txt 2>err; rc=$?
check "info exit 0" [ $rc -eq 0 ]
check "info 5 lines" [ "$(wc -l <info.txt)" -eq 5 ]
for b in pt bts lbr qemu step; do
  check "info line for $b" grep -Eq "^$b +(yes|no) +[^ ]" info.txt
done
check "info qemu usable" grep -Eq '^qemu +yes ' info.txt
"$btr" info --format json >info.json; rc=$?
check "info json exit 0" [ $rc -eq 0 ]
check "info json shape" python3 -c '
import json,sys
d=json.load(open("info.json"))
assert set(d)=={"pt","bts","lbr","qemu","step"}, d
for k,v in d.items():
    assert isinstance(v["usable"],bool) and isinstance(v["reason"],str) and v["reason"], (k,v)
assert d["qemu"]["usable"] is True
'
"$btr" info --format xml >/dev/null 2>&1; check "info bad format exit 2" [ $? -eq 2 ]
"$btr" info --help >/dev/null; check "info --help exit 0" [ $? -eq 0 ]

# ---- record: usage ----
"$btr" record --help >help.txt; check "record --help exit 0" [ $? -eq 0 ]
check "record --help mentions --ground-truth" grep -q -- --ground-truth help.txt
# -p attaches: --attach is its name (every other command's --pid selects a
# process of a trace); --pid is the old spelling and still works
check "record --help names -p --attach" grep -q -- '-p, --attach PID' help.txt
for o in --attach --pid; do
  "$btr" record $o x >out 2>err; rc=$?
  check "record $o x exit 2 (got $rc)" [ $rc -eq 2 ]
  check "record $o x: bad process id" grep -q "bad process id 'x'" err
done
"$btr" record -o x.btr 2>/dev/null; check "record without command exit 2" [ $? -eq 2 ]
"$btr" record -b nosuch -- /bin/true 2>/dev/null; check "record bad backend exit 2" [ $? -eq 2 ]

# ---- record: pass-through ----
out=$(echo "hello through qemu" | "$btr" record -q -o cat.btr -- /bin/cat); rc=$?
check "stdin/stdout pass through" [ "$out" = "hello through qemu" ]
check "cat exit 0" [ $rc -eq 0 ]
check "cat trace written" [ -s cat.btr ]
"$btr" trace dump cat.btr >cat.dump 2>&1
check "trace has machine qemu first" grep -q '^machine backend=qemu' <(head -1 cat.dump)
check "trace has module /usr/bin/cat or /bin/cat" grep -Eq 'module_load .*path="(/usr)?/bin/cat"' cat.dump
check "trace has ld.so" grep -q 'module_load .*ld-linux-x86-64' cat.dump
check "trace has pt" grep -q '^pt tid=' cat.dump
check "trace ends with process_exit code=0" grep -q '^process_exit .*code=0 signal=0' <(tail -1 cat.dump)

"$btr" record -q -o st.btr -- /bin/sh -c 'echo err >&2; exit 7' 2>st.err; rc=$?
check "exit status 7 passes through (got $rc)" [ $rc -eq 7 ]
check "stderr passes through" grep -qx err st.err
"$btr" trace dump st.btr | grep -q '^process_exit .*code=7 signal=0'; check "exit record code 7" [ $? -eq 0 ]

# exec: QEMU runs the new program natively; the trace records the exec
"$btr" record -q -o exec.btr -- /bin/sh -c 'exec /bin/true'; rc=$?
check "exec exit 0" [ $rc -eq 0 ]
"$btr" trace dump exec.btr >exec.dump 2>&1
check "exec record names /bin/true" grep -Eq '^exec .*"/bin/true"' exec.dump
check "exec trace has process_exit" grep -q '^process_exit .*code=0 signal=0' exec.dump

# -b auto says which backend and why, on stderr
"$btr" record -o auto.btr -- /bin/true 2>auto.err; rc=$?
check "auto exit 0" [ $rc -eq 0 ]
check "auto names its backend" grep -q '^btr: recording with qemu' auto.err

# ---- record: bad input ----
"$btr" record -o nf.btr -- /nonexistent/prog 2>nf.err; rc=$?
check "missing command exit 3 (got $rc)" [ $rc -eq 3 ]
check "missing command one line" [ "$(wc -l <nf.err)" -eq 1 ]
check "missing command names it" grep -q /nonexistent/prog nf.err
check "missing command leaves no trace" [ ! -e nf.btr ]
"$btr" record -q -o nf2.btr -- no-such-command-btr 2>nf2.err; rc=$?
check "command not in PATH exit 3" [ $rc -eq 3 ]
check "no trace for command not in PATH" [ ! -e nf2.btr ]
printf 'not a program\n' >plain.txt; chmod +x plain.txt
"$btr" record -q -o ne.btr -- ./plain.txt 2>ne.err; rc=$?
check "not an executable exit 3" [ $rc -eq 3 ]
check "not an executable leaves no trace" [ ! -e ne.btr ]
check "not an executable leaves no temporary file ($(ls | grep ne.btr))" [ -z "$(ls | grep ne.btr)" ]
"$btr" record -q -o /nonexistent-dir/out.btr -- /bin/sh -c 'touch ran' 2>uw.err; rc=$?
check "unwritable output exit 3" [ $rc -eq 3 ]
check "unwritable output: command did not run" [ ! -e ran ]
check "unwritable output names the file" grep -q /nonexistent-dir/out.btr uw.err

# ---- record: crash ----
# (not when built with ASan: such a guest exhausts memory under QEMU)
if [ -x "$build/prog_qemu_crash" ] && ! grep -q __asan_init "$build/prog_qemu_crash"; then
  "$btr" record -q -o crash.btr -- "$build/prog_qemu_crash" 2>/dev/null; rc=$?
  check "crash exit 139 (got $rc)" [ $rc -eq 139 ]
  "$btr" trace dump crash.btr >crash.dump 2>&1
  check "crash trace readable, exit record signal 11 with ip" grep -Eq '^process_exit .*signal=11 ip=0x[0-9a-f]{4,}' crash.dump
  check "crash trace has pt" grep -q '^pt tid=' crash.dump
fi

# ---- record: SIGINT/SIGTERM to btr finalize the trace ----
# (python, not "&": a non-interactive shell starts background jobs with
# SIGINT ignored, which the traced command would inherit)
python3 - "$btr" <<'PY' >int.rc
import subprocess, signal, sys, time
p = subprocess.Popen([sys.argv[1], "record", "-q", "-o", "int.btr", "--", "/bin/sleep", "20"])
time.sleep(2)
p.send_signal(signal.SIGINT)
print(p.wait())
PY
check "SIGINT: exit 130 (got $(cat int.rc))" [ "$(cat int.rc)" = 130 ]
"$btr" trace dump int.btr >int.dump 2>&1; rc=$?
check "SIGINT: trace readable" [ $rc -eq 0 ]
check "SIGINT: exit record signal 2" grep -q '^process_exit .*signal=2' int.dump
check "SIGINT: thread exit recorded" grep -q '^thread_exit' int.dump
check "SIGINT: no temp files left" [ -z "$(ls | grep 'int.btr.tmp')" ]
"$btr" record -q -o term.btr -- /bin/sleep 20 & bpid=$!
sleep 2
kill -TERM $bpid
wait $bpid; rc=$?
check "SIGTERM: exit 143 (got $rc)" [ $rc -eq 143 ]
"$btr" trace dump term.btr 2>&1 | grep -q '^process_exit .*signal=15'
check "SIGTERM: trace readable with exit record" [ $? -eq 0 ]

# ---- info's "usable" is a promise: record -b NAME works exactly when it says yes ----
for b in pt bts lbr qemu step; do
  u=$(python3 -c 'import json,sys; print(json.load(open("info.json"))[sys.argv[1]]["usable"])' "$b")
  "$btr" record -q -b "$b" -o "usable-$b.btr" -- /bin/true >/dev/null 2>&1; rc=$?
  if [ "$u" = True ]; then
    check "info says $b usable: record -b $b exits 0 (got $rc)" [ $rc -eq 0 ]
    check "info says $b usable: record -b $b wrote a trace" [ -s "usable-$b.btr" ]
  else
    check "info says $b unusable: record -b $b exits 3 (got $rc)" [ $rc -eq 3 ]
    check "info says $b unusable: no trace left" [ ! -e "usable-$b.btr" ]
  fi
done

finish cli_record
