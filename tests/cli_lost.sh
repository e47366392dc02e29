#!/usr/bin/env bash
# cli_lost.sh - a trace that lost data says so in every reader.  $TMPDIR
# (where the QEMU plugin keeps each process's trace) fills up while a
# shell pipeline runs: the recorder keeps OUT.partial, a whole container
# whose processes' traces are cut or missing (BTR_PROC_LOST records).
# report, script, flame, cov, check, callgraph, crash, pt decode and
# trace info (pprof, bolt, timeline share flame's path) then name each cut or missing process in
# one stderr line and exit 3; report --format json has data_lost true and
# the list.  A container cut in the middle names the processes whose end
# is missing, and every form of a reading command of the registry (`btr
# --list-commands`: diff, annotate, cfg, diverge, pprof, bolt, timeline,
# afdo, import too) exits 3 on it.  A whole trace says data_lost false and exits 0.
# Needs root for the tmpfs mount (skipped otherwise).  Args: $1 btr, $2 build dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
tmp=$(mktemp -d)
mnt=""
# shellcheck disable=SC2086
cleanup() { [ -n "$mnt" ] && umount $mnt 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cd "$tmp" || exit 1
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 not installed"

# A whole multi-process trace: nothing lost, exit 0.
python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(3).randbytes(2000000))' >input.bin
head -c 300000 input.bin >small.bin
"$btr" record -q -o whole.btr -- /bin/sh -c 'gzip -c small.bin | cat >/dev/null; /bin/true' >/dev/null ||
  { echo "FAIL: record"; exit 1; }
"$btr" report --format json whole.btr >whole.json 2>err.txt; rc=$?
check "whole trace: report exit 0 (got $rc): $(cat err.txt)" [ $rc -eq 0 ]
check "whole trace: data_lost false" [ "$(jget whole.json 'd["data_lost"]')" = False ]
check "whole trace: empty lost list" [ "$(jget whole.json 'len(d["lost"])')" = 0 ]
check "whole trace: no process says trace_lost" \
  [ "$(jget whole.json 'len([p for p in d["processes"] if "trace_lost" in p])')" = 0 ]
"$btr" report whole.btr >rep.txt 2>err.txt; rc=$?
check "whole trace: text report exits 0 (exit $rc)" [ $rc -eq 0 ]
check "whole trace: text says 'data lost: no'" grep -q "^data lost: *no" rep.txt
check "whole trace: nothing on stderr: $(cat err.txt)" [ ! -s err.txt ]
# modules: one line per file with the processes that mapped it (not libc
# once per process); JSON keeps one entry per mapping, with its pid
check "whole trace: libc listed once: $(grep -c 'libc.so' rep.txt)" [ "$(grep -c '/libc\.so' rep.txt)" -eq 1 ]
check "whole trace: libc's line names the processes: $(grep 'libc.so' rep.txt)" \
  grep -Eq '/libc\.so\.6 .*\[[34] processes: [0-9]+ sh, [0-9]+ (sh|gzip|cat)' rep.txt
check "whole trace: gzip's line names its process" grep -Eq '/gzip +\[pid [0-9]+ gzip\]$' rep.txt
check "whole trace: header counts files and processes: $(grep ^modules: rep.txt)" \
  grep -Eq '^modules: +[0-9]+ \([0-9]+ with code loaded\), [0-9]+ files in [34] processes$' rep.txt
check "whole trace: module_list has libc per process, with pids" \
  [ "$(jget whole.json 'len(set(m["pid"] for m in d["module_list"] if m["path"].endswith("/libc.so.6")))')" -ge 3 ]

# The container cut in the middle (as after a full disk or a SIGKILL of
# btr record): every complete chunk is read, and the processes without an
# exit record (the recorder writes the exits last) are named.
sz=$(stat -c %s whole.btr)
head -c $((sz - 100)) whole.btr >cut.btr
"$btr" report --format json cut.btr >cut.json 2>err.txt; rc=$?
check "cut container: exit 3 (got $rc)" [ $rc -eq 3 ]
check "cut container: data_lost true" [ "$(jget cut.json 'd["data_lost"]')" = True ]
check "cut container: an 'end' entry first: $(jget cut.json 'd["lost"]')" \
  [ "$(jget cut.json '[l["kind"] for l in d["lost"]][0]')" = end ]
check "cut container: the shell is named: $(cat err.txt)" \
  grep -q "process [0-9]* (sh): the trace ends before its exit" err.txt
check "cut container: gzip is named" grep -q "process [0-9]* (gzip): the trace ends before its exit" err.txt
check "cut container: says where it is cut" grep -q "the trace is cut at offset 0x[0-9a-f]* (truncated input)" err.txt

# Every form of a command that reads a trace - the registry's
# (`btr --list-commands`, tools/btr/commands.c) - exits 3 on a cut
# container, with a line saying it is cut or lost data.
# cut_forms FILE WHAT: each form on FILE; prints how many ran.
cut_forms() {
  local FILE=$1 what=$2 n=0 name form c rc
  while IFS=$'\t' read -r name _ form; do
    n=$((n+1))
    OUT=$FILE.$n.dot
    c=$(fill "$form")
    # afdo writes one module's profile: the traced program (sh) has no DWARF
    [ "$name" = afdo ] && c="$c --module gzip"
    # shellcheck disable=SC2086
    "$btr" $c >out.txt 2>err.txt; rc=$?
    check "$what: btr $c exits 3 (got $rc): $(head -c 300 err.txt)" [ $rc -eq 3 ]
    check "$what: btr $c says so: $(head -c 300 err.txt)" \
      grep -q "truncated input\|the trace is cut\|the trace ends before\|trace data was lost" err.txt
  done < <(forms reads-trace)
  nforms=$n
}
FUNC=__libc_start_main
cut_forms cut.btr "cut container"
check "the registry's forms that read a trace: $nforms" [ $nforms -ge 25 ]
# cut inside its first chunk (the file header and a few bytes): no record
# is read; still exit 3 and a line (diverge exited 1 without one)
head -c 200 whole.btr >cut1.btr
n=$nforms
cut_forms cut1.btr "cut in the first chunk"
check "the registry's forms run on the file cut in its first chunk: $nforms" [ $nforms -eq $n ]

mkdir mid
if ! mount -t tmpfs -o size=6m tmpfs mid 2>/dev/null; then
  note "cannot mount a tmpfs here (not root?): the \$TMPDIR-fills-up cases are skipped"
  finish cli_lost
fi
mnt="$tmp/mid"
# gzip fills $TMPDIR; the shell, gzip and cat are cut, the two programs
# started after it (true, ls) have no trace at all.
TMPDIR=$tmp/mid "$btr" record -q -o out.btr -- /bin/sh -c \
  'gzip -c input.bin | cat >/dev/null; /bin/true; ls / >/dev/null' >/dev/null 2>rec.txt; rc=$?
check "TMPDIR fills up: record exit 3 (got $rc): $(cat rec.txt)" [ $rc -eq 3 ]
check "TMPDIR fills up: OUT.partial kept" [ -s out.btr.partial ]
p=out.btr.partial
"$btr" report --format json $p >rep.json 2>err.txt; rc=$?
check "report json: exit 3 (got $rc)" [ $rc -eq 3 ]
check "report json: data_lost true" [ "$(jget rep.json 'd["data_lost"]')" = True ]
echo "lost: $(jget rep.json '[(l["kind"], l["pid"], l["comm"]) for l in d["lost"]]')"
nlost=$(jget rep.json 'len(d["lost"])')
# gzip fills $TMPDIR: its trace, its parent shell's (whose later records
# could not be written) and maybe cat's are cut; what starts after (true,
# ls) has no trace at all (or runs untraced when not even the plugin's
# state could be copied).
check "report json: the root shell is cut" \
  [ "$(jget rep.json '[l["kind"] for l in d["lost"] if l["pid"]==d["processes"][0]["pid"]]')" = "['cut']" ]
check "report json: gzip's process is cut" \
  [ "$(jget rep.json '[p.get("trace_lost") for p in d["processes"] if p["command"].startswith("gzip")]')" = "['cut']" ]
check "report json: only cut and missing processes" \
  [ "$(jget rep.json 'set(l["kind"] for l in d["lost"]) <= {"cut", "missing"}')" = True ]
check "report json: the processes say trace_lost, as many as the lost list" \
  [ "$(jget rep.json 'len([p for p in d["processes"] if "trace_lost" in p])')" = "$nlost" ]
check "report json: true and ls are missing or untraced" \
  [ "$(jget rep.json 'len([p for p in d["processes"] if p.get("trace_lost")=="missing" or p["untraced"]])')" = 2 ]
check "report json: the missing ones are children of sh" \
  [ "$(jget rep.json 'all(l["ppid"]==d["processes"][0]["pid"] for l in d["lost"] if l["kind"]=="missing")')" = True ]
check "report json: the reason is the full disk" \
  [ "$(jget rep.json 'set(l["reason"] for l in d["lost"])')" = "{'no space left on device'}" ]
"$btr" report $p >rep.txt 2>err.txt; rc=$?
check "report text: exit 3 (got $rc)" [ $rc -eq 3 ]
check "report text: 'data lost: yes'" grep -q "^data lost: *yes" rep.txt
check "report text: gzip's line says cut" grep -Eq "gzip -c input.bin( \[[^]]*\])?: .*trace cut while it ran" rep.txt
check "report: one stderr line per cause ($nlost): $(cat err.txt)" [ "$(wc -l <err.txt)" -eq "$nlost" ]
check "report: stderr names gzip" grep -q "process [0-9]* (gzip): the trace stops while it ran on" err.txt
nmiss=$(grep -c "no trace (" rep.txt)
while read -r what cmd; do
  # shellcheck disable=SC2086
  "$btr" $cmd $p >/dev/null 2>err.txt; rc=$?
  check "$what: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "$what: one line per cause ($nlost): $(head -c 300 err.txt)" [ "$(grep -c warning err.txt)" -eq "$nlost" ]
  check "$what: names sh and gzip as cut" grep -q "(sh): the trace stops" err.txt
  check "$what: names sh and gzip as cut" grep -q "(gzip): the trace stops" err.txt
  check "$what: names the missing processes ($nmiss)" [ "$(grep -c "ran but is not in the trace" err.txt)" -eq "$nmiss" ]
done <<CMDS
script script --filter far_branch
flame flame -o f.folded
cov cov -o c.info
check check
callgraph callgraph
crash crash
pt-decode pt decode --stat
trace-info trace info
CMDS

# The ground-truth log (a test option) on the full file system too: once a
# write fails the log is closed and the rest dropped.  Four threads go on
# logging; before, their buffers overflowed (and a thread started after the
# close wrote through a null buffer): the traced program died of SIGBUS or
# SIGSEGV inside the plugin.
rm -rf "${mnt:?}"/*
TMPDIR=$tmp/mid "$btr" record -q -o gt.btr --ground-truth "$mnt/gt" -- "$build/prog_qemu_mt" >/dev/null 2>gtrec.txt; rc=$?
# (exit 0 or 3: whether the traces still fit after the log filled the disk
# depends on the threads' timing)
check "ground truth fills TMPDIR: the program ran to its end (record exit $rc): $(head -c 300 gtrec.txt)" \
  [ $rc -eq 0 -o $rc -eq 3 ]
check "ground truth fills TMPDIR: no signal in the plugin" bash -c "! grep -q 'target signal' gtrec.txt"
check "ground truth fills TMPDIR: says the log is cut once" \
  [ "$(grep -c "$mnt/gt: cannot write the ground truth (No space left on device): the rest is left out" gtrec.txt)" -eq 1 ]
finish cli_lost
