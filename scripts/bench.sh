#!/usr/bin/env bash
# make bench: runs every benchmark of build dir $1 (a Release build).
# Compiled ones are build/bench_NAME; shell ones bench/bench_NAME.sh.
set -u
build=${1:-build-release}
status=0
for b in "$build"/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || status=1
done
# bench_record: gzip -c of 10 MiB under btr record, callgrind, qemu -d exec
echo "== bench_record.sh"
bash bench/bench_record.sh "$build" 10 || status=1
# btr's flow decoder beside libxdc on PT that btr records from real programs
echo "== bench_xdc.sh"
bash bench/bench_xdc.sh "$build" 30 || status=1
# bench_profiles: every export at ~10^6 and ~10^7 branches (fib 26 31)
echo "== bench_profiles.sh"
bash bench/bench_profiles.sh "$build" 26 31 || status=1
exit $status
