#!/usr/bin/env bash
# bench_views.sh BUILD_DIR: records prog_flow_loops with btr record -b qemu at
# about 10^6 and 10^7 branches (and 10^8 with BENCH_BIG=1) and runs
# bench_views on each: one pass of report+blocks+cov+cfg against decoding
# alone, with peak RSS.  Never a test (timing).
set -eu
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sizes="200 2000"
[ "${BENCH_BIG:-0}" = 1 ] && sizes="$sizes 20000"
for n in $sizes; do
	"$build/btr" record -q -b qemu -o "$tmp/t$n.btr" -- "$build/prog_flow_loops" "$n" >/dev/null
	"$build/bench_views" "$tmp/t$n.btr" classify
done
