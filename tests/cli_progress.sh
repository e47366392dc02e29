#!/usr/bin/env bash
# cli_progress.sh - the progress line on stderr (docs/cli.md "Progress") and
# the one-line backend message of `btr record`: never written when stderr is
# a file unless forced, written when forced (BTR_PROGRESS=1, --progress),
# and the results on stdout are the same bytes either way.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2
has_cr() { grep -q $'\r' "$1"; }
no_cr() { ! grep -q $'\r' "$1"; }

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
unset BTR_PROGRESS

# ---- record: the backend line, progress off when stderr is a file ----
# (a shell running three programs: four processes, more than one 256 KiB
# chunk of trace is not needed)
cmd=(sh -c '/bin/true; /bin/true; /bin/true')
"$btr" record -o t.btr -- "${cmd[@]}" >out0 2>err0; rc=$?
check "record exit 0 (got $rc)" [ $rc -eq 0 ]
check "record: no progress when stderr is a file" no_cr err0
check "record: one line on stderr" [ "$(wc -l <err0)" -eq 1 ]
check "record: the line names qemu" grep -q '^btr: recording with qemu' err0
check "record: the line is short (<100 chars)" [ "$(head -1 err0 | wc -c)" -lt 100 ]
check "record: no reasons without -v" bash -c '! grep -q "intel_pt" err0'
"$btr" record -v -o tv.btr -- /bin/true 2>errv; rc=$?
check "record -v exit 0" [ $rc -eq 0 ]
check "record -v: the reasons" grep -q '^btr: backend qemu, no hardware tracing (pt: .*intel_pt.*; bts: .*; lbr: ' errv
"$btr" record -q -o tq.btr -- /bin/true 2>errq
check "record -q: silent" [ ! -s errq ]

# ---- record: forced on (BTR_PROGRESS=1 and --progress) ----
BTR_PROGRESS=1 "$btr" record -o t1.btr -- "${cmd[@]}" >out1 2>err1; rc=$?
check "record forced exit 0" [ $rc -eq 0 ]
check "record forced: progress written" has_cr err1
check "record forced: the recording line" grep -q $'\rbtr: recording: ' err1
check "record forced: erased at the end (ESC[K after the last CR)" \
	python3 -c 'import sys; d=open("err1","rb").read(); i=d.rfind(b"\r"); sys.exit(0 if d[i:i+4]==b"\r\x1b[K" else 1)'
check "record forced: the backend line is a line of its own" grep -q '^btr: recording with qemu' err1
check "record forced: the command's stdout untouched" cmp -s out0 out1
BTR_PROGRESS=0 "$btr" record --progress -o t2.btr -- /bin/true 2>err2
check "record --progress beats BTR_PROGRESS=0" has_cr err2
BTR_PROGRESS=1 "$btr" record --no-progress -o t3.btr -- /bin/true 2>err3
check "record --no-progress beats BTR_PROGRESS=1" no_cr err3
# a record that fails: the error line is clean
BTR_PROGRESS=1 "$btr" record -o /nonexistent-dir/x.btr -- /bin/true 2>errf; rc=$?
check "record to a bad path exit 3" [ $rc -eq 3 ]
check "record to a bad path: the error line, no progress" grep -qx 'btr: /nonexistent-dir/x.btr: no such directory: /nonexistent-dir' errf
check "record to a bad path: no CR" no_cr errf

# ---- record on a terminal: the program's output never shares btr's line ----
# The line ("\rbtr: recording: starting") was drawn while CMD ran, so the
# program's first line landed next to it: "btr: recording: startingline 1".
# Now, on a terminal, it is drawn only while btr alone writes (the trace).
if oracle script "record on a terminal (a pty)"; then
  script -qec "\"$btr\" record -o tp.btr -- sh -c 'echo line 1; echo line 2'" /dev/null >pty.out 2>&1
  check "record on a pty: the program's lines are there" grep -q 'line 2' pty.out
  check "record on a pty: no line holds both btr's progress and the program's output ($(grep -a 'line 1' pty.out | cat -v | head -c 200))" \
    bash -c "! tr '\r' '\n' <pty.out | grep -a 'line [12]' | grep -aq 'btr: recording'"
  check "record on a pty: no progress before the program's output" \
    bash -c "! grep -aq 'btr: recording: ' pty.out"
fi

# ---- reading: every form of the registry that reads a trace and writes
# stdout (`btr --list-commands`), of a command whose --help offers the
# progress line (not pt and trace: they show none); diverge's line counts
# the bytes read of both its traces (its two readers run in threads).
FUNC=__libc_start_main
nprog=0
while IFS=$'\t' read -r name _ form; do
	head=$(awk '{ for (i = 1; i <= NF && $i !~ /^[-A-Z]/; i++) printf "%s ", $i }' <<<"$form")
	# shellcheck disable=SC2086
	"$btr" $head --help 2>&1 | grep -q -- --no-progress || continue
	nprog=$((nprog+1))
	FILE=t.btr; c=$(fill "$form")
	FILE="--progress t.btr"; cp=$(fill "$form")
	# shellcheck disable=SC2086
	"$btr" $c >r0 2>e0; rc0=$?
	# shellcheck disable=SC2086
	BTR_PROGRESS=1 "$btr" $c >r1 2>e1; rc1=$?
	# shellcheck disable=SC2086
	"$btr" $cp >r2 2>e2; rc2=$?
	check "$c: exit 0 ($rc0 $rc1 $rc2)" [ "$rc0 $rc1 $rc2" = "0 0 0" ]
	check "$c: no progress when stderr is a file" no_cr e0
	check "$c: BTR_PROGRESS=1 writes progress" grep -q $'\rbtr: reading the trace: .* of .*%)' e1
	check "$c: --progress writes progress" has_cr e2
	check "$c: stdout identical with progress" cmp -s r0 r1
	check "$c: stdout identical with --progress" cmp -s r0 r2
	check "$c: progress erased at the end" \
		python3 -c 'import sys; d=open("e1","rb").read(); i=d.rfind(b"\r"); sys.exit(0 if d[i:]==b"\r\x1b[K" else 1)'
done < <(forms reads-trace writes-stdout)
check "forms with a progress line: $nprog" [ $nprog -ge 8 ]
BTR_PROGRESS=1 "$btr" report --no-progress t.btr >/dev/null 2>e3
check "report --no-progress beats BTR_PROGRESS=1" no_cr e3
# a trace cut short (after its first 1 MiB chunk): the warning starts on a
# line of its own
"$btr" record -q -o big.btr -- sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done'
check "big trace has several chunks" [ "$(stat -c %s big.btr)" -gt 2200000 ]
head -c $(( $(stat -c %s big.btr) * 2 / 3 )) big.btr >cut.btr
BTR_PROGRESS=1 "$btr" report cut.btr >/dev/null 2>ec
check "cut trace: the warning follows an erased line" \
	python3 -c 'import sys; d=open("ec","rb").read(); sys.exit(0 if b"\r\x1b[Kbtr: " in d and not d.endswith(b"\x1b[K") else 1)'
"$btr" report --help | grep -q -- '--no-progress'; check "report --help names --no-progress" [ $? -eq 0 ]
"$btr" record --help | grep -q -- '--no-progress'; check "record --help names --no-progress" [ $? -eq 0 ]

finish cli_progress
