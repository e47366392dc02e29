#!/usr/bin/env bash
# cli_badinput.sh - every command that reads a file meets bad input the same
# way: exit 3, exactly one line on stderr, naming the file; never a crash.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); shared=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

head -c 5000 /dev/urandom >random.bin
: >empty.bin
printf 'BTRTRACE\001\000\000\000garbage' >header-only.btr
printf 'PERFILE2\000\000' >perf-cut.data
mkdir a-directory
files="random.bin empty.bin header-only.btr perf-cut.data a-directory does-not-exist"
if [ -r "$shared/traces/quipper/perf.data.intel_pt-4.14" ]; then
  head -c 4000 "$shared/traces/quipper/perf.data.intel_pt-4.14" >perf-truncated.data
  files="$files perf-truncated.data"
fi

while read -r cmd; do
  for f in $files; do
    # shellcheck disable=SC2086
    "$btr" $cmd "$f" >out.txt 2>err.txt; rc=$?
    what="btr $cmd $f"
    # random bytes are no valid input for any command, but `pt dump` prints
    # what it could and `report`/`trace` read a random file as not-a-trace
    if [ $rc -eq 3 ]; then ok; else bad "$what: exit $rc, expected 3"; fi
    n=$(wc -l <err.txt)
    if [ "$n" -eq 1 ]; then ok; else bad "$what: $n stderr lines, expected 1: $(head -c 300 err.txt)"; fi
    if grep -q -- "$f" err.txt; then ok; else bad "$what: stderr does not name the file: $(head -c 200 err.txt)"; fi
    if [ $rc -ge 128 ]; then bad "$what: crashed (exit $rc)"; fi
  done
done <<'CMDS'
report
report --format json
pt dump
pt decode
pt decode --stat
trace dump
trace info
trace info --format json
check
check --format json
CMDS

# a directory is named as such
"$btr" report a-directory 2>err.txt
if grep -q "is a directory" err.txt; then ok; else bad "report a-directory: $(cat err.txt)"; fi

finish cli_badinput
