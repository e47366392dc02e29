#!/usr/bin/env bash
# cli_write_fail.sh - writing into a file system that fills up: every
# command whose output cannot be written (stdout on /dev/full, a file size
# limit from `ulimit -f`) exits 3 with one line saying why, never 0; `btr
# record` into a full file system (a 256 KiB tmpfs, where mount works) exits
# 3 with one line and leaves nothing under the output name or in $TMPDIR.
# (The writer itself: test_write_fail.)  Args: $1 btr, $2 build dir, $3 shared.
set -u
btr=$(realpath "$1"); build=$(realpath "$2")
fail=0; pass=0
check() { local what=$1; shift; if "$@"; then pass=$((pass+1)); else echo "FAIL: $what" >&2; fail=$((fail+1)); fi; }
tmp=$(mktemp -d)
mnt=""
cleanup() { [ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cd "$tmp"
command -v qemu-x86_64 >/dev/null || { echo "SKIP: qemu-x86_64 not installed (needed to record the input)"; exit 77; }
"$btr" record -q -o t.btr -- "$build/prog_flow_loops" >/dev/null || { echo "FAIL: record"; exit 1; }
addr=$(nm "$build/prog_symbols_nopie" | awk '$3=="main"{print "0x"$1}')

# THE COMMANDS that write to stdout (new commands are added here)
while read -r cmd; do
  [ -z "$cmd" ] && continue
  # shellcheck disable=SC2086
  "$btr" $cmd >/dev/full 2>err.txt; rc=$?
  check "btr $cmd >/dev/full: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "btr $cmd >/dev/full: one stderr line saying why: $(head -c 200 err.txt)" \
    [ "$(wc -l <err.txt)" -eq 1 ] && grep -Eqi "no space|output error|write" err.txt
done <<CMDS
report t.btr
report --format json t.btr
pt dump t.btr
pt decode t.btr
pt decode --insn t.btr
pt decode --stat t.btr
trace dump t.btr
trace info t.btr
trace info --format json t.btr
script t.btr
check t.btr
crash t.btr
callgraph t.btr
diff t.btr t.btr
annotate --function main t.btr
symbolize --elf $build/prog_symbols_nopie $addr
info
info --format json
CMDS

# a file size limit: SIGXFSZ must not kill btr; the write fails with EFBIG
(ulimit -f 64; exec "$btr" pt decode --insn t.btr >insn.txt 2>err.txt); rc=$?
check "ulimit -f: exit 3 (got $rc, not 153 = killed by SIGXFSZ)" [ $rc -eq 3 ]
check "ulimit -f: one line 'File too large': $(cat err.txt)" [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "File too large" err.txt

# record into a full file system
mkdir small tmpd
if mount -t tmpfs -o size=256k tmpfs small 2>/dev/null; then
  mnt=$tmp/small
  head -c 300000 "$btr" >input.bin
  TMPDIR=$tmp/tmpd "$btr" record -q -o small/out.btr -- /bin/gzip -c input.bin >/dev/null 2>err.txt; rc=$?
  check "record into a full file system: exit 3 (got $rc)" [ $rc -eq 3 ]
  check "record into a full file system: one stderr line: $(cat err.txt)" [ "$(wc -l <err.txt)" -eq 1 ]
  check "record into a full file system: nothing under the output name" [ ! -e small/out.btr ]
  check "record into a full file system: no temporary file left: $(ls small)" [ -z "$(ls small)" ]
  check "record into a full file system: \$TMPDIR cleaned" [ -z "$(ls tmpd)" ]
  # the plugin's own file system full: the temporary directory.
  # KNOWN (docs/reliability.md): today btr record dies with SIGBUS here (the
  # recorder touches pages of the plugin's state file, a sparse file mapping
  # that the full tmpfs cannot back) and leaves out2.btr.tmp.PID behind;
  # checked only with BTR_STRICT_FAULTS=1 until the recorder handles it.
  TMPDIR=$tmp/small "$btr" record -q -o out2.btr -- /bin/gzip -c input.bin >/dev/null 2>err.txt; rc=$?
  if [ "${BTR_STRICT_FAULTS:-0}" = 1 ]; then
    check "TMPDIR full: exit 3 (got $rc)" [ $rc -eq 3 ]
    check "TMPDIR full: one stderr line: $(cat err.txt)" [ "$(wc -l <err.txt)" -eq 1 ]
    check "TMPDIR full: no temporary file left: $(ls | grep out2)" [ -z "$(ls | grep out2)" ]
  elif [ $rc -ne 3 ]; then
    echo "KNOWN: record with a full \$TMPDIR: exit $rc (recorder: SIGBUS on the state file mapping)"
  fi
  check "TMPDIR full: nothing under the output name" [ ! -e out2.btr ]
else
  echo "note: cannot mount a tmpfs here (not root?): the full-file-system record cases are skipped"
fi

echo "cli_write_fail: $pass passed, $fail failed"
[ $fail -eq 0 ]
