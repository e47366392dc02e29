#!/usr/bin/env bash
# cli_procs.sh - `btr record -b qemu` follows whole programs: fork trees,
# exec, shells and pipelines, posix_spawn, double-fork daemons, threaded
# fork, crashing and killed children, #! scripts (also through
# /usr/bin/env), --no-follow*, --max-processes, many short processes, a
# QEMU without plugin support.  For each recording the decoded instruction
# stream of every thread of every process equals the plugin's ground
# truth, and each process's exit status is the expected one.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)

need_qemu
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# gt_check NAME: every thread's decoded flow equals the ground truth
cat >"$tmp/gt.py" <<'PY'
import struct, sys
gt = {}
data = open(sys.argv[1], 'rb').read()
off = 0
while off < len(data):
    magic, tid, n = struct.unpack_from('<IIQ', data, off); off += 16
    assert magic == 0x54474254, hex(magic)
    gt.setdefault(tid, []).extend(struct.unpack_from('<%dQ' % n, data, off)); off += 8 * n
dec = {}
tid = None
for line in open(sys.argv[2]):
    line = line.strip()
    if line.startswith('[thread '):
        tid = int(line[8:-1]); dec.setdefault(tid, [])
    elif line.startswith('['):
        if 'gap' in line or 'overflow' in line:
            sys.exit('unexpected event: ' + line)
    else:
        dec[tid].append(int(line, 16))
gt = {t: v for t, v in gt.items() if v}
dec = {t: v for t, v in dec.items() if v}
if set(gt) != set(dec):
    sys.exit('threads differ: %s vs %s' % (sorted(gt), sorted(dec)))
for t in gt:
    if gt[t] != dec[t]:
        n = next((i for i, (a, b) in enumerate(zip(gt[t], dec[t])) if a != b), min(len(gt[t]), len(dec[t])))
        sys.exit('tid %d: first difference at instruction %d of %d/%d' % (t, n, len(gt[t]), len(dec[t])))
if len(sys.argv) > 3 and len(gt) < int(sys.argv[3]):
    sys.exit('only %d threads with instructions, want %s' % (len(gt), sys.argv[3]))
PY
# procs.py JSON 'EXPR': evaluates EXPR over the report's processes list P
cat >"$tmp/procs.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
P = d['processes']
def by(cmd):
    return [p for p in P if p['command'] == cmd]
def st(p):
    return ('sig%d' % p['signal']) if 'signal' in p else p.get('exit_code')
ok = eval(sys.argv[2])
if not ok:
    sys.exit('failed: %s\n%s' % (sys.argv[2], json.dumps(P, indent=1)[:3000]))
PY

# rec NAME WANT_RC [btr record options] -- CMD...: record with ground truth,
# check the exit status, the decoded flow and write NAME.json; btr's
# instruction counts per thread and in total must equal those of the
# independent counter (tests/tools/insn_count.c, in the same QEMU runs:
# the ground truth comes from btr's own plugin, edited by gt_unlog to match
# PT; tests/tools/insn_compare.py says which differences are definitional)
rec() {
  local name=$1 want=$2; shift 2
  local counter=()
  [ -r "$build/btr-insn-count.so" ] && counter=(env BTR_QEMU="$src/tests/tools/qemu_count.sh" \
    BTR_COUNT_PLUGIN="$build/btr-insn-count.so" BTR_COUNT_OUT="$tmp/$name.count")
  rm -f "$tmp/$name.count"
  # writable for every user a process may become (the privdrop case)
  [ ${#counter[@]} -gt 0 ] && : >"$tmp/$name.count" && chmod 0666 "$tmp/$name.count"
  "${counter[@]}" "$btr" record -q -o "$tmp/$name.btr" --ground-truth "$tmp/$name.gt" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  check "$name: record exit $want (got $rc: $(head -c 300 "$tmp/$name.err"))" [ $rc -eq "$want" ]
  "$btr" pt decode "$tmp/$name.btr" --insn >"$tmp/$name.insn" 2>"$tmp/$name.derr"
  rc=$?; check "$name: decode exit 0 ($(head -c 200 "$tmp/$name.derr"))" [ $rc -eq 0 ]
  check "$name: decoded flow equals ground truth" python3 "$tmp/gt.py" "$tmp/$name.gt" "$tmp/$name.insn" "${MIN_THREADS:-1}"
  if ! python3 "$tmp/gt.py" "$tmp/$name.gt" "$tmp/$name.insn" "${MIN_THREADS:-1}" >/dev/null 2>&1; then
    # say where: the events and the trace's records
    grep -n '^\[' "$tmp/$name.insn" | head -20 >&2
    "$btr" trace dump "$tmp/$name.btr" 2>&1 | grep -v '^ *pt ' | head -60 >&2
  fi
  "$btr" report --format json "$tmp/$name.btr" >"$tmp/$name.json" 2>"$tmp/$name.rerr"
  rc=$?; check "$name: report exit 0 ($(head -c 200 "$tmp/$name.rerr"))" [ $rc -eq 0 ]
  if [ ${#counter[@]} -gt 0 ]; then
    python3 "$src/tests/tools/insn_compare.py" "$tmp/$name.count" "$tmp/$name.json" >"$tmp/$name.cmp" 2>&1
    rc=$?; check "$name: instructions == the independent counter's ($(tr '\n' ' ' <"$tmp/$name.cmp"))" [ $rc -eq 0 ]
  fi
}
procs() { local name=$1; shift; check "$name: $1" python3 "$tmp/procs.py" "$tmp/$name.json" "$1"; }

# ---- a fork tree three levels deep ----
MIN_THREADS=5 rec tree 0 -- "$build/prog_proc_tree"
procs tree "len(P) == 5 and len(set(p['pid'] for p in P)) == 5"
procs tree "sorted(st(p) for p in P) == [0, 10, 11, 20, 21]"
procs tree "P[0]['ppid'] == 0 and all(p['ppid'] in [q['pid'] for q in P] for p in P[1:])"
procs tree "sorted(st(p) for p in P if p['ppid'] in [q['pid'] for q in P if q['ppid'] == P[0]['pid']]) == [20, 21]"
procs tree "all(p['instructions'] > 0 and p['threads'] == 1 for p in P)"
procs tree "len(set(p['instructions'] for p in P)) == 5"
"$btr" report "$tmp/tree.btr" >"$tmp/tree.txt"
check "tree: text report shows the process tree" grep -q '^      pid [0-9]* (ppid [0-9]*) .*exit 2[01]$' "$tmp/tree.txt"
# --pid narrows every reader to one process
child=$(python3 -c "import json; P=json.load(open('$tmp/tree.json'))['processes']; print([p for p in P if p.get('exit_code') == 21][0]['pid'])")
"$btr" report --pid "$child" --format json "$tmp/tree.btr" >"$tmp/tree_pid.json"
check "tree: report --pid: one process" python3 -c "
import json; d=json.load(open('$tmp/tree_pid.json')); P=d['processes']; full=[p for p in json.load(open('$tmp/tree.json'))['processes'] if p['pid']==$child][0]
assert len(P) == 1 and P[0]['pid'] == $child and d['instructions'] == full['instructions'], (P, d['instructions'])"
# ... and decodes only its data: one flow decoder (a 4 MiB block cache each),
# not one per process of the tree (counted under strace, not timed)
if oracle strace "the decoders' block caches counted"; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$tmp/pid.strace" -e trace=mmap \
    "$btr" report --pid "$child" --format json "$tmp/tree.btr" >"$tmp/tree_pid2.json"
  check "tree: report --pid under strace: the same" cmp -s "$tmp/tree_pid.json" "$tmp/tree_pid2.json"
  dec=$(grep -c 'mmap(NULL, 4194304, PROT_READ|PROT_WRITE' "$tmp/pid.strace")
  check "tree: report --pid decodes one process's data ($dec decoders, at most 2 of 5 processes)" [ "$dec" -le 2 ]
fi
"$btr" pt decode --insn --pid "$child" "$tmp/tree.btr" >"$tmp/tree_pid.insn"
check "tree: pt decode --pid: only its thread" [ "$(grep '^\[thread' "$tmp/tree_pid.insn" | sort -u)" = "[thread $child]" ]
check "tree: pt decode --tid: its instructions" [ "$("$btr" pt decode --insn --tid "$child" "$tmp/tree.btr" | grep -vc '^\[')" = "$(grep -vc '^\[' "$tmp/tree_pid.insn")" ]
check "tree: trace dump --pid: only its records" bash -c "\"$btr\" trace dump --pid $child \"$tmp/tree.btr\" | grep -v '^machine' | grep -v '^pt ' | grep -qv 'pid=$child ' && exit 1 || exit 0"
check "tree: trace dump --pid: has its PT" bash -c "\"$btr\" trace dump --pid $child \"$tmp/tree.btr\" | grep -q '^pt tid=$child '"

# ---- fork, then exec (the child execs the program again, the parent /bin/true) ----
MIN_THREADS=2 rec exec 0 -- "$build/prog_proc_exec"
procs exec "len(P) == 2 and sorted(st(p) for p in P) == [0, 7]"
procs exec "[p['execs'] for p in P] == [1, 1] and P[0]['path'] == '/bin/true' and P[1]['command'] == 'proc_exec child'"
"$btr" trace dump "$tmp/exec.btr" >"$tmp/exec.dump"
check "exec: process exec records" [ "$(grep -c '^process .*event=exec' "$tmp/exec.dump")" -eq 2 ]

# ---- a shell pipeline ----
rec sh 0 -- /bin/sh -c 'ls / | wc -l'
check "sh: output passes through" [ "$(cat "$tmp/sh.out")" = "$(ls / | wc -l)" ]
procs sh "len(P) == 3 and all(st(p) == 0 for p in P)"
procs sh "sorted(p['command'] for p in P[1:]) == ['ls /', 'wc -l'] and all(p['instructions'] > 10000 for p in P)"

# ---- posix_spawn ----
rec spawn 0 -- "$build/prog_proc_spawn"
procs spawn "len(P) == 2 and [st(p) for p in P] == [0, 4] and P[1]['command'].endswith('spawned')"

# ---- a double-fork daemon outliving everyone ----
rec daemon 0 -- "$build/prog_proc_daemon"
procs daemon "len(P) == 3 and [st(p) for p in P] == [0, 0, 9] and P[2]['instructions'] > P[1]['instructions']"

# ---- children that close every descriptor they did not open ----
# (close_range(3, ~0U) before an exec, as Python's subprocess does; a
# close() loop, as gnupg's spawn does): the plugin's trace, state and
# ground-truth files are put back ("input/output error while recording",
# no trace, before), and the counter's lines are all there
rec closefds 0 -- "$build/prog_proc_closefds" /bin/true
# (the two children announce themselves, in the order they first run: the
# list's order is the scheduler's)
procs closefds "len(P) == 3 and st(P[0]) == 0 and sorted(st(p) for p in P[1:]) == [0, 12] and [p['command'] for p in P if st(p) == 0 and p is not P[0]] == ['/bin/true']"
procs closefds "all(p['instructions'] > 10000 and p['threads'] == 1 for p in P)"

# ---- a shell that opens its own descriptors 3-9 (`exec 4>file`: dup2 onto
# the number) ----
# The plugin's files live at the top of RLIMIT_NOFILE: a guest's dup2 onto a
# small number once sent the trace into the script's files ("input/output
# error while recording", and the files full of trace data)
cat >"$tmp/fds.sh" <<SH
for n in 3 4 5 6 7 8 9; do eval "exec \$n>$tmp/fd\$n.txt"; done
for n in 3 4 5 6 7 8 9; do echo "line \$n" >&\$n; done
/bin/true
SH
rec fds 0 -- /bin/bash "$tmp/fds.sh"
check "fds: each of the script's files holds its one line" \
  bash -c "for n in 3 4 5 6 7 8 9; do [ \"\$(cat '$tmp'/fd\$n.txt)\" = \"line \$n\" ] || exit 1; done"
procs fds "len(P) == 2 and all(st(p) == 0 for p in P) and d['gaps'] == 0"

# ---- the same onto the plugin's own numbers (the top of RLIMIT_NOFILE) ----
# A guest may name any number: bash's `exec N>file` asks fcntl(N, F_GETFD)
# and dup2()s onto N, `echo >&N` dup2()s from it.  The plugin moves its
# trace, state and ground-truth files out of the way, so each file gets its
# lines, a number the script never opened is EBADF as without btr, and the
# trace stays whole and exact (rec: ground truth, independent counter).
# Before: the file stayed empty, the trace lost its data and said nothing.
# (the plugin's range: from the soft limit minus 128, qemu_state_file.c;
# computed here, so that the script is one bash process and /bin/true)
lim=$(ulimit -n); { [ "$lim" = unlimited ] || [ "$lim" -gt 65536 ]; } && lim=65536
if [ "$lim" -ge 512 ]; then lo=$((lim - 128)); else lo=$((lim / 2)); fi
cat >"$tmp/hifds.sh" <<SH
for ((n = $lo; n < $lo + 8; n++)); do eval "exec \$n>$tmp/hi\$((n - $lo)).txt"; done
for ((n = $lo; n < $lo + 8; n++)); do echo "line \$((n - $lo))" >&\$n; done
echo unopened >&$((lo + 8)) || echo "ebadf \$?" >$tmp/hi_ebadf.txt
/bin/true
SH
rec hifds 0 -- /bin/bash "$tmp/hifds.sh"
check "hifds: each file holds its one line" \
  bash -c "for n in 0 1 2 3 4 5 6 7; do [ \"\$(cat '$tmp'/hi\$n.txt)\" = \"line \$n\" ] || exit 1; done"
check "hifds: a number the script never opened is EBADF, as natively" grep -qx 'ebadf 1' "$tmp/hi_ebadf.txt"
procs hifds "len(P) == 2 and all(st(p) == 0 for p in P) and d['gaps'] == 0 and not d.get('data_lost')"

# ---- a privilege drop, then exec (setpriv, su) ----
# The recording's directory (mode 0700, btr's user) was closed to the new
# user: the exec'd program's QEMU could not load the plugin ("Could not load
# plugin ... error code -1"), the program never ran and the report said
# 1 process, data lost: no.  Needs root (useradd, setpriv).
if [ "$(id -u)" -ne 0 ] || ! command -v useradd >/dev/null || ! command -v setpriv >/dev/null; then
  note "privdrop: not root or no useradd/setpriv: the privilege-drop case is not run"
else
  pu=btrpriv$$
  useradd -M -s /bin/sh "$pu" 2>/dev/null
  trap 'rm -rf "$tmp"; userdel "$pu" 2>/dev/null' EXIT   # also if the test is stopped
  puid=$(id -u "$pu" 2>/dev/null)
  if [ -z "$puid" ]; then
    bad "privdrop: useradd $pu failed"
  else
    chmod 0755 "$tmp"
    rec privdrop 0 -- setpriv --reuid="$pu" --regid="$pu" --clear-groups /bin/sh -c 'id -u; /bin/true'
    check "privdrop: the shell ran as the new user (printed $(head -c 40 "$tmp/privdrop.out"))" grep -qx "$puid" "$tmp/privdrop.out"
    procs privdrop "[p['command'].split()[0] for p in P] == ['/bin/sh', 'id', '/bin/true'] and all(st(p) == 0 for p in P) and d['gaps'] == 0"
    procs privdrop "all(p['instructions'] > 10000 and not p['untraced'] for p in P)"
  fi
  userdel "$pu" 2>/dev/null
fi

# ---- a threaded process that forks ----
MIN_THREADS=4 rec mtfork 0 -- "$build/prog_proc_mtfork"
procs mtfork "len(P) == 2 and [st(p) for p in P] == [0, 6] and P[0]['threads'] == 3 and P[1]['threads'] == 1"
# threads translate new code up to each fork: the children's blocks must
# find their information (gaps "no code image" in 5 of 8 recordings before)
MIN_THREADS=7 rec forktrans 0 -- "$build/prog_proc_forktrans"
procs forktrans "len(P) == 5 and [st(p) for p in P] == [0, 5, 5, 5, 5] and P[0]['threads'] == 3"

# ---- children that crash or are killed ----
rec crash 0 -- "$build/prog_proc_crash"
procs crash "len(P) == 3 and sorted(str(st(p)) for p in P) == ['0', 'sig11', 'sig9']"
"$btr" report "$tmp/crash.btr" >"$tmp/crash.txt"
check "crash: text says killed by SIGSEGV and SIGKILL" bash -c "grep -q 'killed by SIGSEGV' '$tmp/crash.txt' && grep -q 'killed by SIGKILL' '$tmp/crash.txt'"

# ---- #! scripts: direct, through /usr/bin/env, nested, found in PATH ----
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "script $*"\nexit 5\n' >"$tmp/bin/s1.sh"
printf '#!/usr/bin/env sh\n%s/bin/s1.sh from-env\n' "$tmp" >"$tmp/bin/s2.sh"
printf '#!%s/bin/s1.sh nested-arg\n' "$tmp" >"$tmp/bin/s3.sh"
chmod +x "$tmp/bin/"*.sh
rec script 5 -- "$tmp/bin/s1.sh" a b
check "script: output" [ "$(cat "$tmp/script.out")" = "script a b" ]
procs script "len(P) == 1 and st(P[0]) == 5 and P[0]['command'] == '/bin/sh $tmp/bin/s1.sh a b'"
PATH="$tmp/bin:$PATH" rec envscript 5 -- s2.sh
check "envscript: output" [ "$(cat "$tmp/envscript.out")" = "script from-env" ]
# env was followed: it exec'd sh (found in PATH), which ran the script
procs envscript "P[0]['command'] == 'sh $tmp/bin/s2.sh' and P[0]['execs'] == 1 and P[0]['path'].endswith('sh')"
procs envscript "len(P) == 2 and all(st(p) == 5 for p in P) and P[1]['command'] == '/bin/sh $tmp/bin/s1.sh from-env'"
rec nested 5 -- "$tmp/bin/s3.sh" x
check "nested: interpreter gets its argument and the script" [ "$(cat "$tmp/nested.out")" = "script nested-arg $tmp/bin/s3.sh x" ]

# ---- --no-follow*, --max-processes ----
"$btr" record -q -o "$tmp/nf.btr" --no-follow -- /bin/sh -c '/bin/true; /bin/true; exit 3'
check "no-follow: exit status passes" [ $? -eq 3 ]
"$btr" report --format json "$tmp/nf.btr" >"$tmp/nf.json"
procs nf "len(P) == 3 and P[0]['instructions'] > 0 and all(p['untraced'] and p['instructions'] == 0 for p in P[1:])"
procs nf "all(p['untraced_reason'] == '--no-follow-fork' for p in P[1:]) and st(P[0]) == 3"
"$btr" record -q -o "$tmp/nfe.btr" --no-follow-exec -- /bin/sh -c '/bin/true; exit 0'
"$btr" report --format json "$tmp/nfe.btr" >"$tmp/nfe.json"
procs nfe "len(P) == 2 and P[1]['instructions'] > 0 and P[1]['untraced'] and P[1]['untraced_reason'] == '--no-follow-exec'"
"$btr" record -o "$tmp/max.btr" --max-processes 3 -- /bin/sh -c 'for i in 1 2 3 4 5; do /bin/true; done' 2>"$tmp/max.err"
check "max-processes: exit 0" [ $? -eq 0 ]
check "max-processes: btr says how many ran untraced" grep -q '6 processes, 3 of them (or programs they ran) untraced' "$tmp/max.err"
"$btr" report --format json "$tmp/max.btr" >"$tmp/max.json"
procs max "len(P) == 6 and d['untraced'] == 3 and sum(1 for p in P if p['instructions'] > 0) == 3"
procs max "all(p['untraced_reason'] == '--max-processes 3 reached' for p in P if p['untraced'])"
"$btr" report "$tmp/max.btr" | grep -q '^processes:    6 (3 untraced)$'
check "max-processes: text report counts them" [ $? -eq 0 ]

# ---- a set-uid program runs untraced, with the reason ----
suid=$(for f in /usr/bin/mount /bin/mount /usr/bin/su /usr/bin/passwd; do [ -u "$f" ] && echo "$f" && break; done)
if [ -n "$suid" ]; then
  "$btr" record -q -o "$tmp/suid.btr" -- /bin/sh -c "$suid --version >/dev/null; exit 0"
  "$btr" report --format json "$tmp/suid.btr" >"$tmp/suid.json"
  procs suid "len(P) == 2 and P[1].get('untraced_reason') == 'set-uid program' and P[1]['command'] == '$suid --version' and st(P[1]) == 0"
fi

# ---- many short processes ----
N=${BTR_PROCS_N:-60}
start=$(date +%s)
"$btr" record -q -o "$tmp/loop.btr" -- sh -c "for i in \$(seq $N); do /bin/true; done"
check "loop: exit 0" [ $? -eq 0 ]
echo "loop of $N processes recorded in $(( $(date +%s) - start )) s"
"$btr" report --format json "$tmp/loop.btr" >"$tmp/loop.json"
procs loop "len(P) == $N + 2 and len(set(p['pid'] for p in P)) == $N + 2 and all(st(p) == 0 for p in P)"
procs loop "len(by('/bin/true')) == $N and all(p['instructions'] > 1000 for p in by('/bin/true')) and d['gaps'] == 0"
# a decoder per process, but their block caches (4 MiB tables, faulted in
# page by page) are reused, not mapped anew for each (counted, not timed:
# the kernel's share of reading this trace was half)
if oracle strace "the decoders' block caches counted"; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -qq -o "$tmp/loop.strace" -e trace=mmap \
    "$btr" report --format json "$tmp/loop.btr" >"$tmp/loop2.json"
  check "loop: report under strace: the same" cmp -s "$tmp/loop.json" "$tmp/loop2.json"
  maps=$(grep -c 'mmap(NULL, 4194304, PROT_READ|PROT_WRITE' "$tmp/loop.strace")
  check "loop: $maps block caches mapped for $N + 2 processes (at most 2)" [ "$maps" -le 2 ]
fi

# ---- a QEMU without plugin support ----
mkdir -p "$tmp/fakeqemu"
cat >"$tmp/fakeqemu/qemu-x86_64" <<'SH'
#!/bin/sh
# answers like Debian 13's static qemu-user, which lacks -plugin
for a in "$@"; do [ "$a" = -plugin ] && { echo "qemu-x86_64: unknown option 'plugin'" >&2; exit 1; }; done
exit 0
SH
chmod +x "$tmp/fakeqemu/qemu-x86_64"
BTR_QEMU="$tmp/fakeqemu/qemu-x86_64" "$btr" info >"$tmp/info.txt"
check "fake qemu: info says no with the reason" grep -q "^qemu  no .*cannot load TCG plugins.*unknown option 'plugin'.*BTR_QEMU" "$tmp/info.txt"
BTR_QEMU="$tmp/fakeqemu/qemu-x86_64" "$btr" info --format json >"$tmp/info.json"
check "fake qemu: info json usable false" python3 -c "import json; q=json.load(open('$tmp/info.json'))['qemu']; assert q['usable'] is False and 'plugin' in q['reason']"
BTR_QEMU="$tmp/fakeqemu/qemu-x86_64" "$btr" record -b qemu -o "$tmp/fake.btr" -- /bin/true 2>"$tmp/fake.err"
check "fake qemu: record exit 3" [ $? -eq 3 ]
check "fake qemu: one line" [ "$(wc -l <"$tmp/fake.err")" -eq 1 ]
check "fake qemu: no trace file" [ ! -e "$tmp/fake.btr" ]

# ---- the text report names programs as they were ----
# A module list line named each process by its last program: children that
# mapped the shell before their exec showed as `/usr/bin/dash [3 processes:
# sh, rm, true]`; a process that exec'd several programs showed only its
# last argv.  Now the module line names the program that mapped it, and the
# process line the exec chain.
"$btr" record -q -o "$tmp/names.btr" -- /bin/sh -c '/bin/rm -f /nonexistent-x; exec /bin/sh -c "exec /bin/true"' \
  >/dev/null 2>&1
"$btr" report "$tmp/names.btr" >"$tmp/names.txt" 2>&1
shl=$(grep -E '^  0x[0-9a-f]+-0x[0-9a-f]+ /usr/bin/dash' "$tmp/names.txt" | head -1)
check "names: the shell's module line names only shells ($shl)" \
  bash -c '[[ "$1" == *"[2 processes: "* ]] && [[ "$1" != *" rm"* ]] && [[ "$1" != *" true"* ]]' _ "$shl"
check "names: the process that exec'd twice shows its chain ($(grep -m1 'pid .* execs' "$tmp/names.txt"))" \
  grep -Eq '^  pid [0-9]+ /bin/true \[2 execs: (dash|sh) -> (dash|sh) -> true\]:' "$tmp/names.txt"

finish cli_procs
