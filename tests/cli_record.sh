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

# ---- record: a crashing program's stderr is its own ----
# QEMU printed "qemu: uncaught target signal 11 (Segmentation fault) - core
# dumped" onto the program's stderr; it must be byte-identical to the native run
for c in "$build/prog_qemu_crash" "sh -c 'echo err-before >&2; kill -SEGV \$\$'"; do
  { bash -c "$c" >/dev/null 2>crash_native.err; } 2>/dev/null
  # shellcheck disable=SC2086
  eval "\"\$btr\" record -q -o crash2.btr -- $c" >/dev/null 2>crash_btr.err
  check "crash stderr byte-identical to native ($c: $(head -c 200 crash_btr.err))" cmp -s crash_native.err crash_btr.err
done

# btr crash of a qemu trace: the fault address is not recorded (it printed 0x0)
if [ -s crash.btr ]; then
  "$btr" crash crash.btr >crash.txt 2>&1
  check "crash of a qemu trace: fault address unknown, not 0x0 ($(grep fault crash.txt))" \
    grep -qx '  fault address: unknown (this backend does not record it)' crash.txt
  "$btr" crash --format json crash.btr >crash.json 2>&1
  check "crash --format json of a qemu trace: fault_addr null" python3 -c '
import json; c = json.load(open("crash.json"))["crashes"]; assert len(c) == 1 and c[0]["fault_addr"] is None, c'
fi

# ---- record: the program's environment in its native order ----
# QEMU reverses its environment into the guest's: `env -i A=1 B=2 env`
# printed B before A (also after an exec, which starts QEMU again)
for c in "env -i A=1 B=2 C=3 Z=0 env" "env -i A=1 B=2 C=3 sh -c 'exec env -0'"; do
  eval "$c" >env_native.out
  eval "\"\$btr\" record -q -o env.btr -- $c" >env_btr.out
  check "environment order as native ($c: $(tr '\0\n' '  ' <env_btr.out))" cmp -s env_native.out env_btr.out
done

# ---- record: a debugger or tracer under qemu gets a hint ----
# QEMU does not emulate ptrace: strace failed with "PTRACE_TRACEME: Function
# not implemented" and btr said nothing
if command -v strace >/dev/null; then
  "$btr" record -q -o strace.btr -- strace -o /dev/null /bin/true >/dev/null 2>strace.err
  check "strace under qemu: one btr line says ptrace is not emulated ($(grep btr: strace.err | head -c 300))" \
    [ "$(grep -c '^btr: warning: process [0-9]* called ptrace, which QEMU does not emulate' strace.err)" -eq 1 ]
  "$btr" record -q -o true.btr -- /bin/true 2>true.err
  check "no ptrace, no hint" [ ! -s true.err ]
fi

# ---- record: SIGINT/SIGTERM to btr finalize the trace ----
# (python, not "&": a non-interactive shell starts background jobs with
# SIGINT ignored, which the traced command would inherit)
rm -rf int.tmpd; mkdir int.tmpd
python3 - "$btr" <<'PY' >int.rc
import os, subprocess, signal, sys, time
p = subprocess.Popen([sys.argv[1], "record", "-q", "-o", "int.btr", "--", "/bin/sleep", "20"],
                     env=dict(os.environ, TMPDIR=os.path.abspath("int.tmpd")))
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
check "SIGINT: nothing left in \$TMPDIR ($(ls int.tmpd))" [ -z "$(ls -A int.tmpd)" ]
"$btr" record -q -o term.btr -- /bin/sleep 20 & bpid=$!
sleep 2
kill -TERM $bpid
wait $bpid; rc=$?
check "SIGTERM: exit 143 (got $rc)" [ $rc -eq 143 ]
"$btr" trace dump term.btr 2>&1 | grep -q '^process_exit .*signal=15'
check "SIGTERM: trace readable with exit record" [ $? -eq 0 ]

# ---- record: SIGKILL of btr record ----
# Nobody finished the trace, and the traced processes ran on (QEMU and all)
# with their files in $TMPDIR, without a word.  Now a watchdog kills the
# traced tree (a daemon that detached with setsid lives on), removes
# OUTPUT.tmp.PID and says in one line where the plugins' traces are (kept:
# docs/reliability.md).  (Waits for events, bounded; no timing.)
rm -rf kill.tmpd; mkdir kill.tmpd
python3 - "$btr" <<'PY' >kill.out
import os, signal, subprocess, sys, time
env = dict(os.environ, TMPDIR=os.path.abspath('kill.tmpd'))
p = subprocess.Popen([sys.argv[1], 'record', '-q', '-o', 'kill.btr', '--', 'sh', '-c',
                      '(echo > kill.m1; exec sleep 60) & (echo > kill.m2; exec sleep 61) & wait'], env=env,
                     stderr=open('kill.err', 'w'))
def until(cond, limit=600):
    for _ in range(limit):
        if cond():
            return True
        time.sleep(0.1)
    return False
def traced():
    n = 0
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            n += env['TMPDIR'].encode() + b'/' in open('/proc/%s/cmdline' % pid, 'rb').read()
        except OSError:
            pass
    return n
print('started', until(lambda: os.path.exists('kill.m1') and os.path.exists('kill.m2')), traced())
p.send_signal(signal.SIGKILL)
p.wait()
print('said', until(lambda: 'was killed' in open('kill.err').read()))
print('left', traced(), len([f for f in os.listdir('.') if f.startswith('kill.btr')]))
PY
check "SIGKILL: the tree had started ($(head -1 kill.out))" grep -Eq '^started True [3-9]' kill.out
check "SIGKILL: the watchdog says it" grep -qx 'said True' kill.out
check "SIGKILL: no traced process left running, no kill.btr* ($(tail -1 kill.out))" grep -qx 'left 0 0' kill.out
check "SIGKILL: one line naming the directory ($(head -c 300 kill.err))" \
  grep -Eq "^btr: btr record \(pid [0-9]+\) was killed: its traced processes were ended; what they recorded is in $PWD/kill.tmpd/btr-record-" kill.err
"$btr" report kill.tmpd/btr-record-*/p*.btr* >/dev/null 2>&1
check "SIGKILL: what was recorded is readable (exit 0 or 3, got $?)" [ $? -le 3 ]

# ---- record: SIGINT/SIGTERM while the trace is written (assembly) ----
# The handlers were reset before assembly: a Ctrl-C at "writing the trace"
# killed btr (130/143, no output, FILE.tmp.PID and the plugins' files left
# in $TMPDIR, not a word).  Now it stops there: what was written stays
# readable (a file: FILE.partial; here a FIFO, cut but closed), every
# process left out is named by a `lost` record (readers exit 3), $TMPDIR is
# empty and one line says what happened; btr then ends by the signal.
# Deterministic: the trace goes to a FIFO that this script stops reading
# after 200000 bytes, so btr is blocked in the middle of the assembly
# (its first 1 MiB chunk) when the signal comes.
for sg in INT TERM; do
  rm -rf asm.fifo asm.tmpd asm.btr asm.err; mkdir asm.tmpd; mkfifo asm.fifo
  python3 - "$btr" "SIG$sg" <<'PY' >asm.rc
import os, signal, subprocess, sys
btr, sig = sys.argv[1], getattr(signal, sys.argv[2])
env = dict(os.environ, TMPDIR=os.path.abspath('asm.tmpd'))
p = subprocess.Popen([btr, 'record', '-q', '-o', 'asm.fifo', '--', 'sh', '-c', 'seq 300000 | md5sum; /bin/true'],
                     stdout=subprocess.DEVNULL, stderr=open('asm.err', 'w'), env=env)
with open('asm.fifo', 'rb') as f:
    head = f.read(200000)
    p.send_signal(sig)
    rest = f.read()
open('asm.btr', 'wb').write(head + rest)
print(p.wait())
PY
  [ $sg = INT ] && n=2 || n=15
  check "SIG$sg in assembly: btr ends by the signal (got $(cat asm.rc))" [ "$(cat asm.rc)" = "-$n" ]
  check "SIG$sg in assembly: one line ($(head -c 300 asm.err))" [ "$(wc -l <asm.err)" -eq 1 ]
  check "SIG$sg in assembly: it says what happened and what is kept" \
    grep -Eq "^btr: error: interrupted by SIG$sg while writing the trace: asm.fifo holds [0-9]+ of [0-9]+ program traces" asm.err
  check "SIG$sg in assembly: nothing left in \$TMPDIR ($(ls asm.tmpd))" [ -z "$(ls -A asm.tmpd)" ]
  "$btr" report --format json asm.btr >asm.json 2>asm.rerr; rc=$?
  check "SIG$sg in assembly: the trace reads, and readers say what is missing (exit 3, got $rc)" [ $rc -eq 3 ]
  check "SIG$sg in assembly: the processes left out are named" python3 -c '
import json; d = json.load(open("asm.json"))
lost = [p for p in d["processes"] if "interrupted" in p.get("lost_reason", "")]
assert d["data_lost"] and lost and all(p["trace_lost"] in ("cut", "missing") for p in lost), d["processes"]'
done

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
