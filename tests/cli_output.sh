#!/usr/bin/env bash
# cli_output.sh - the output-file rules (docs/cli.md "Output files") for
# every command that writes -o FILE: a device node (made with mknod in a
# temporary directory; skipped when not root) is written through and stays
# a device (/dev/null discards, /dev/full is one ENOSPC line and exit 3);
# a symlink is followed (target replaced, link kept; a link to a device
# writes the device); a directory, a missing directory or a binary format
# on a terminal is refused before any work (`btr record -o DIR -- CMD`
# does not run CMD); `-o -` is stdout and never a file named '-';
# replacing a file says so in one line and keeps its permissions; a failed
# command leaves the old file as it was.
# Args: $1 btr, $2 build dir, $3 shared.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
differs() { ! cmp -s "$1" "$2"; }
lacks() { ! grep -q "$@"; }
# one_line PATTERN FILE: FILE is one line, matching PATTERN (grep -E).
# (Conditions chained with && after `check ...` would run outside it.)
one_line() { [ "$(wc -l <"$2")" -eq 1 ] && grep -Eq "$1" "$2"; }
tmp=$(mktemp -d)
trap 'umount "$tmp/ro" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp"
need_qemu
record_qemu t.btr flow_loops "$build/prog_flow_loops" 1 || finish cli_output
"$btr" bolt t.btr -o p.fdata 2>/dev/null
root=0; [ "$(id -u)" = 0 ] && root=1
[ $root = 1 ] || echo "note: not root: the device node cases (mknod) are skipped"

# THE WRITERS: every form of the registry that writes -o OUT (`btr
# --list-commands`; OUT is replaced by the name under test; names end in
# .dot so that cfg takes them).  Column 1: "b" binary format (refuses a
# terminal), "t" text.
FILE=t.btr PROFILE=p.fdata PROG=/bin/true FUNC=classify OUT=OUT
writers=$(forms writes-file | while IFS=$'\t' read -r _ flags form; do
	case ",$flags," in *,binary,*) k=b ;; *) k=t ;; esac
	echo "$k $(fill "$form")"
done)
check "the registry's writers: $(echo "$writers" | wc -l)" [ "$(echo "$writers" | wc -l)" -ge 12 ]
run() { # run "ARGS with OUT" NAME: runs btr, stdout to so.txt, stderr to err.txt; sets rc
	local args=${1//OUT/$2}
	# shellcheck disable=SC2086
	"$btr" $args >so.txt 2>err.txt </dev/null; rc=$?
}

while read -r kind line; do
	[ -z "$line" ] && continue
	sampled || continue   # (BTR_SAMPLE_STEP: make asan tries one writer in K)
	cmd=${line%% *}
	w="btr $line"
	rm -rf sub; mkdir sub; cd sub
	cp ../t.btr ../p.fdata .
	if [ $root = 1 ]; then
		# a character device: /dev/null's numbers
		mknod n.dot c 1 3
		run "$line" n.dot
		check "$w [OUT=null device]: exit 0 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 0 ]
		check "$w [OUT=null device]: still a device node" [ -c n.dot ]
		nullok=$([ -c n.dot ] && [ $rc -eq 0 ] && echo 1)
		# /dev/full's numbers: every write fails with ENOSPC
		mknod f.dot c 1 7
		run "$line" f.dot
		check "$w [OUT=full device]: exit 3 (got $rc)" [ $rc -eq 3 ]
		check "$w [OUT=full device]: one line saying no space: $(cat err.txt)" \
			one_line "[Nn]o space left on device" err.txt
		check "$w [OUT=full device]: still a device node" [ -c f.dot ]
		# a symlink to a device writes the device
		ln -s n.dot ldev.dot
		run "$line" ldev.dot
		check "$w [OUT=symlink to a device]: exit 0 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 0 ]
		check "$w [OUT=symlink to a device]: link kept" [ -L ldev.dot ]
		check "$w [OUT=symlink to a device]: device kept" [ -c n.dot ]
		# the real /dev/null, only once the copy above was left alone (and
		# when it is a device to begin with: cfg wants a .dot name)
		if [ -n "$nullok" ] && [ -c /dev/null ] && [ "$cmd" != cfg ]; then
			run "$line" /dev/null
			check "$w [OUT=/dev/null]: exit 0 (got $rc)" [ $rc -eq 0 ]
			check "$w [OUT=/dev/null]: still a device" [ -c /dev/null ]
		fi
	fi
	# a symlink to a file: the target is replaced, the link kept
	echo old >ref; echo old >target.dot; ln -s target.dot link.dot
	run "$line" link.dot
	check "$w [OUT=symlink to a file]: exit 0 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 0 ]
	check "$w [OUT=symlink to a file]: the link is still a link" [ -L link.dot ]
	check "$w [OUT=symlink to a file]: the target was written" differs target.dot ref
	# replacing a file: one line, the file's permissions kept
	echo old >old.dot; chmod 640 old.dot
	run "${line/ -q / }" old.dot   # (-q would keep the note quiet)
	check "$w [OUT=existing file]: exit 0 (got $rc)" [ $rc -eq 0 ]
	check "$w [OUT=existing file]: one line 'replaced existing old.dot': $(cat err.txt)" \
		[ "$(grep -c "^btr: warning: replaced existing old.dot$" err.txt)" -eq 1 ]
	check "$w [OUT=existing file]: written" differs old.dot ref
	check "$w [OUT=existing file]: permissions kept (got $(stat -c %a old.dot))" [ "$(stat -c %a old.dot)" = 640 ]
	# a directory: refused before any work, one line.  The input is
	# missing: a command that looked at it first would say that instead
	# (and record runs a command that leaves a marker).
	early=${line//\/bin\/true//bin/touch marker}
	early=${early//t.btr/gone.btr}; early=${early//p.fdata/gone.fdata}
	mkdir d.dot
	run "$early" d.dot
	check "$w [OUT=directory]: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "$w [OUT=directory]: one line 'is a directory': $(cat err.txt)" \
		one_line "d.dot: is a directory" err.txt
	[ "$cmd" = record ] && check "$w [OUT=directory]: the command did not run" [ ! -e marker ]
	# a missing directory: refused before any work
	run "$early" nodir/x.dot
	check "$w [OUT=missing dir]: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "$w [OUT=missing dir]: one line naming it: $(cat err.txt)" \
		one_line "nodir/x.dot: no such directory: nodir" err.txt
	[ "$cmd" = record ] && check "$w [OUT=missing dir]: the command did not run" [ ! -e marker ]
	# -o -: stdout (record with a command refuses: CMD's stdout is the same)
	if [ "$cmd" != cfg ]; then
		run "$line" -
		if [ "$cmd" = record ]; then
			check "$w [OUT=-]: refused, exit 2 (got $rc)" [ $rc -eq 2 ]
		else
			check "$w [OUT=-]: exit 0 (got $rc: $(head -c 200 err.txt))" [ $rc -eq 0 ]
			check "$w [OUT=-]: the output is on stdout" [ -s so.txt ]
		fi
		check "$w [OUT=-]: no file named '-'" [ ! -e ./- ]
		if [ "$kind" = b ] && [ "$cmd" != record ]; then
			# a binary format refuses a terminal
			python3 - "$btr" ${line//OUT/-} >pty.txt 2>&1 <<'PY'
import os, pty, select, subprocess, sys, time
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=subprocess.PIPE)
os.close(s)
end = time.time() + 60
while p.poll() is None and time.time() < end:   # drain the terminal: a writer must not block
    if select.select([m], [], [], 0.1)[0]:
        try:
            os.read(m, 65536)
        except OSError:
            break
if p.poll() is None:
    p.kill()
err = p.communicate()[1]
sys.stdout.write("%d %s" % (p.returncode, err.decode(errors="replace")))
PY
			check "$w [OUT=- on a terminal]: refused, exit 2: $(head -c 200 pty.txt)" \
				grep -q "^2 .*not writing .* to the terminal" pty.txt
		fi
	fi
	cd ..
done <<<"$writers"

# a failed command leaves the file it would replace as it was
echo old >keep.btr
echo garbage >bad.btr
"$btr" import -q bad.btr -o keep.btr 2>err.txt; rc=$?
check "failed import: exit 3 (got $rc)" [ $rc -eq 3 ]
check "failed import: the old file untouched" [ "$(cat keep.btr)" = old ]
check "failed import: no note about replacing: $(cat err.txt)" lacks replaced err.txt
echo old >keep.svg
"$btr" flame bad.btr -o keep.svg 2>/dev/null; rc=$?
check "failed flame: exit 3 (got $rc)" [ $rc -eq 3 ]
check "failed flame: the old file untouched" [ "$(cat keep.svg)" = old ]
check "failed flame: no temporary file: $(ls keep.svg*)" [ "$(ls keep.svg*)" = keep.svg ]

# the default output btr.btr is replaced with the note
"$btr" record -q -b qemu -- /bin/true 2>err.txt; rc=$?
check "record, default output: exit 0 (got $rc)" [ $rc -eq 0 ]
check "record, default output: btr.btr written" [ -s btr.btr ]
"$btr" record -b qemu -- /bin/true 2>err.txt
check "record again: says it replaced btr.btr: $(cat err.txt)" grep -q "^btr: warning: replaced existing btr.btr$" err.txt

# report --html DIR: DIR/index.html follows the same rules; a DIR that is
# a file is refused before decoding
echo x >notadir
"$btr" report --html notadir gone.btr 2>err.txt; rc=$?
check "report --html FILE: exit 3 (got $rc)" [ $rc -eq 3 ]
check "report --html FILE: one line naming it, before reading the trace: $(cat err.txt)" one_line "notadir" err.txt

# /dev/fd/N (and /dev/stdout, the same code, not used here: btr before
# this renamed over the /dev/stdout link itself) is the open descriptor:
# appended to as the shell opened it, never replaced; record refuses its
# own CMD's stdout
echo keep >app.txt
"$btr" flame t.btr -o /dev/fd/1 >>app.txt 2>err.txt; rc=$?
check "flame -o /dev/fd/1 >>FILE: exit 0 (got $rc)" [ $rc -eq 0 ]
check "flame -o /dev/fd/1 >>FILE: what was there kept" [ "$(head -1 app.txt)" = keep ]
check "flame -o /dev/fd/1 >>FILE: appended" [ "$(wc -l <app.txt)" -gt 1 ]
check "flame -o /dev/fd/1 >>FILE: nothing said about replacing: $(cat err.txt)" lacks replaced err.txt
"$btr" record -q -b qemu -o /dev/fd/1 -- /bin/touch marker 2>err.txt | cat >/dev/null; rc=${PIPESTATUS[0]}
check "record -o /dev/fd/1 -- CMD: refused, exit 2 (got $rc)" [ $rc -eq 2 ]
check "record -o /dev/fd/1 -- CMD: CMD did not run" [ ! -e marker ]

# an unwritable directory (a read-only tmpfs: root may write anywhere
# else): refused before any work
mkdir ro
if mount -t tmpfs -o ro,size=64k tmpfs ro 2>/dev/null; then
	"$btr" record -q -b qemu -o ro/x.btr -- /bin/touch marker 2>err.txt; rc=$?
	check "record -o READONLY/x.btr: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "record -o READONLY/x.btr: one line naming the directory: $(cat err.txt)" \
		one_line "ro/x.btr: cannot create files in ro: Read-only file system" err.txt
	check "record -o READONLY/x.btr: the command did not run" [ ! -e marker ]
	"$btr" flame gone.btr -o ro/x.svg 2>err.txt; rc=$?
	check "flame -o READONLY/x.svg: exit 3, one line before reading the trace: $(cat err.txt)" \
		one_line "ro/x.svg: cannot create files in ro" err.txt
	umount ro
else
	echo "note: cannot mount a read-only tmpfs here: the unwritable-directory case is skipped"
fi

finish cli_output
