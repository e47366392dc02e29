#!/usr/bin/env bash
# cli_write_fail.sh - writing into a file system that fills up: every
# command whose output cannot be written (stdout on /dev/full, a file size
# limit from `ulimit -f`) exits 3 with one line saying why, never 0; `btr
# record` into a full file system (a 256 KiB tmpfs, where mount works) exits
# 3 with one line and leaves nothing under the output name or in $TMPDIR;
# what was written before the disk filled up is kept as OUT.partial; a full
# or filling $TMPDIR (the plugin's working files) is said in one line too.
# (The writer itself: test_write_fail.)  Args: $1 btr, $2 build dir, $3 shared.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
tmp=$(mktemp -d)
mnt=""
# shellcheck disable=SC2086
cleanup() { [ -n "$mnt" ] && umount $mnt 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cd "$tmp"
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 not installed (needed to record the input)"
"$btr" record -q -o t.btr -- "$build/prog_flow_loops" >/dev/null || { echo "FAIL: record"; exit 1; }
addr=$(nm "$build/prog_symbols_nopie" | awk '$3=="main"{print "0x"$1}')

# THE COMMANDS that write to stdout: every such form of the registry
# (`btr --list-commands`, tools/btr/commands.c)
FILE=t.btr FUNC=main ELF=$build/prog_symbols_nopie ADDR=$addr
nforms=0
while IFS=$'\t' read -r _ _ form; do
  cmd=$(fill "$form")
  nforms=$((nforms+1))
  # shellcheck disable=SC2086
  "$btr" $cmd >/dev/full 2>err.txt; rc=$?
  check "btr $cmd >/dev/full: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "btr $cmd >/dev/full: one stderr line saying why: $(head -c 200 err.txt): exactly one line" [ "$(wc -l <err.txt)" -eq 1 ]
  check "btr $cmd >/dev/full: one stderr line saying why: $(head -c 200 err.txt): the text" grep -Eqi "no space|output error|write" err.txt
done < <(forms writes-stdout)
check "the registry's forms that write to stdout: $nforms" [ $nforms -ge 18 ]

# a file size limit: SIGXFSZ must not kill btr; the write fails with EFBIG
(ulimit -f 64; exec "$btr" pt decode --insn t.btr >insn.txt 2>err.txt); rc=$?
check "ulimit -f: exit 3 (got $rc, not 153 = killed by SIGXFSZ)" [ $rc -eq 3 ]
check "ulimit -f: one line 'File too large': $(cat err.txt): exactly one line" [ "$(wc -l <err.txt)" -eq 1 ]
check "ulimit -f: one line 'File too large': $(cat err.txt): the text" grep -q "File too large" err.txt

# record into a full file system
mkdir small tmpd mid tsmall
mounted() { mount -t tmpfs -o size="$1" tmpfs "$2" 2>/dev/null && mnt="$mnt $tmp/$2"; }
if mounted 256k small && mounted 4m mid && mounted 64k tsmall; then
  # Incompressible inputs of fixed size, the same for every build (the
  # btr binary, used before, is smaller in a Release build and its trace
  # then fit into the 8 MiB of case 4).
  python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(1).randbytes(300000))' >input.bin
  python3 -c 'import random, sys; sys.stdout.buffer.write(random.Random(3).randbytes(3000000))' >input3.bin
  # (1) the output's file system is full before a whole chunk is written:
  # one line, exit 3, nothing left at all
  TMPDIR=$tmp/tmpd "$btr" record -q -o small/out.btr -- /bin/gzip -c input.bin >/dev/null 2>err.txt; rc=$?
  check "record into a full file system: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "record into a full file system: one line 'no space left on device': $(cat err.txt): exactly one line" [ "$(wc -l <err.txt)" -eq 1 ]
  check "record into a full file system: one line 'no space left on device': $(cat err.txt): the text" grep -q "no space left on device" err.txt
  check "record into a full file system: nothing under the output name" [ ! -e small/out.btr ]
  check "record into a full file system: no temporary file left: $(ls small)" [ -z "$(ls small)" ]
  check "record into a full file system: \$TMPDIR cleaned" [ -z "$(ls tmpd)" ]
  # (2) it fills up after some chunks: those are kept as OUT.partial,
  # which the reader takes up to its last complete chunk and calls cut
  TMPDIR=$tmp/tmpd "$btr" record -q -o mid/out.btr -- /bin/gzip -c input3.bin >/dev/null 2>err.txt; rc=$?
  check "output fills up: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "output fills up: one line naming the kept file: $(cat err.txt): exactly one line" [ "$(wc -l <err.txt)" -eq 1 ]
  check "output fills up: one line naming the kept file: $(cat err.txt): the text" grep -q "no space left on device.*kept in mid/out.btr.partial" err.txt
  check "output fills up: nothing under the output name" [ ! -e mid/out.btr ]
  check "output fills up: only the .partial file: $(ls mid)" [ "$(ls mid)" = out.btr.partial ]
  "$btr" trace info mid/out.btr.partial >info.txt 2>&1; rc=$?
  # (exit 3 and "truncated input": the file is cut, as after a SIGKILL)
  check "output fills up: trace info reads the kept chunks and says cut (exit $rc)" [ $rc -eq 3 ]
  check "output fills up: trace info says it was cut: $(grep complete info.txt)" grep -q "complete: *no" info.txt
  "$btr" report mid/out.btr.partial >rep.txt 2>/dev/null
  check "output fills up: report decodes the kept chunks: $(head -3 rep.txt)" \
    grep -Eq "^branches: +[1-9]" rep.txt
  check "output fills up: \$TMPDIR cleaned" [ -z "$(ls tmpd)" ]
  # (3) $TMPDIR, where the plugin keeps each process's trace and state,
  # is full from the start: one line saying so before anything runs
  TMPDIR=$tmp/tsmall "$btr" record -q -o out2.btr -- /bin/gzip -c input.bin >/dev/null 2>err.txt; rc=$?
  check "TMPDIR full: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "TMPDIR full: one line naming TMPDIR: $(cat err.txt): exactly one line" [ "$(wc -l <err.txt)" -eq 1 ]
  check "TMPDIR full: one line naming TMPDIR: $(cat err.txt): the text" grep -q "tsmall.*No space left on device" err.txt
  check "TMPDIR full: nothing under the output name" [ ! -e out2.btr ]
  check "TMPDIR full: no file left: $(ls | grep out2; ls tsmall)" [ -z "$(ls | grep out2; ls tsmall)" ]
  # (4) $TMPDIR fills up while recording: the plugin's state pages are
  # reserved before use (no SIGBUS), its writes fail, and what it wrote
  # comes out as OUT.partial with one line
  umount "$tmp/mid"; mounted 8m mid
  TMPDIR=$tmp/mid "$btr" record -q -o out3.btr -- /bin/gzip -c input3.bin >/dev/null 2>err.txt; rc=$?
  check "TMPDIR fills up: exit 3, not a signal (got $rc)" [ $rc -eq 3 ]
  check "TMPDIR fills up: one line: $(cat err.txt): exactly one line" [ "$(wc -l <err.txt)" -eq 1 ]
  check "TMPDIR fills up: one line: $(cat err.txt): the text" grep -q "mid: no space left on device while recording.*out3.btr.partial" err.txt
  check "TMPDIR fills up: nothing under the output name" [ ! -e out3.btr ]
  "$btr" report out3.btr.partial >rep.txt 2>&1; rc=$?
  # (exit 3: the .partial file is a whole container, but gzip's trace in
  # it is cut; tests/cli_lost.sh checks what every reader says)
  check "TMPDIR fills up: report reads the .partial file and says data was lost (exit $rc): exit 3" [ $rc -eq 3 ]
  check "TMPDIR fills up: report reads the .partial file: branches > 0" grep -Eq "^branches: +[1-9]" rep.txt
  check "TMPDIR fills up: report names gzip's cut trace" grep -q "(gzip): the trace stops while it ran on" rep.txt
  check "TMPDIR fills up: TMPDIR cleaned: $(ls mid)" [ -z "$(ls mid)" ]
else
  echo "note: cannot mount a tmpfs here (not root?): the full-file-system record cases are skipped"
fi

finish cli_write_fail
