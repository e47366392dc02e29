#!/usr/bin/env bash
# bench_profiles.sh - time and peak RSS of every profile export on qemu
# traces of fib(N) (deep call trees: about 4 branches per call), side by
# side in one run with `btr report` on the same trace (the decode-only
# pass every export includes; there is no outside tool that reads .btr).
# Usage: bench/bench_profiles.sh BUILD_DIR [N...]   (default N: 24 28;
# fib(26) gives ~1.2*10^6 branches, fib(31) ~1.3*10^7, fib(36) ~1.5*10^8; above
# 5*10^7 branches the speedscope and timeline JSON runs are skipped: their
# files would be gigabytes)
set -u
build=${1:-build}
shift || true
ns=${*:-26 31}
btr=$build/btr
prog=$build/prog_prof_fib
[ -x "$btr" ] && [ -x "$prog" ] || { echo "bench_profiles: $btr or $prog not built" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/btr-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
T=/usr/bin/time
[ -x $T ] || { echo "bench_profiles: /usr/bin/time missing (Debian time)" >&2; exit 2; }

run() {  # label, command...: prints seconds and peak RSS
  local label=$1; shift
  $T -f "%e %M" -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err" || { echo "  $label: failed: $(head -1 "$tmp/err")"; return; }
  read -r s kb <"$tmp/t"
  printf "  %-28s %8.2f s %9d KiB peak RSS\n" "$label" "$s" "$kb"
}

for n in $ns; do
  tr=$tmp/fib$n.btr
  "$btr" record -q -b qemu -o "$tr" -- "$prog" "$n" >/dev/null 2>&1
  br=$("$btr" report --format json "$tr" | grep -m1 -o '"branches": [0-9]*' | grep -o '[0-9]*$')
  echo "fib($n): $br branches, trace $(stat -c %s "$tr") bytes"
  run "btr report (baseline)" "$btr" report "$tr"
  run "callgraph --format json" "$btr" callgraph --format json -o "$tmp/cg.json" "$tr"
  run "flame folded" "$btr" flame "$tr" -o "$tmp/f.folded"
  big=$([ "$br" -gt 50000000 ] && echo 1 || echo 0)
  # every call is an event in speedscope's evented format: gigabytes at 10^8
  [ "$big" = 0 ] && run "flame speedscope" "$btr" flame "$tr" -o "$tmp/f.speedscope.json"
  run "flame svg" "$btr" flame "$tr" -o "$tmp/f.svg"
  [ "$big" = 0 ] && run "timeline json" "$btr" timeline "$tr" -o "$tmp/t.json"
  run "timeline pftrace" "$btr" timeline "$tr" -o "$tmp/t.pftrace"
  run "bolt fdata" "$btr" bolt "$tr" -o "$tmp/b.fdata"
  run "pprof" "$btr" pprof "$tr" -o "$tmp/p.pb.gz"
  echo "  sizes: speedscope $(stat -c %s "$tmp/f.speedscope.json" 2>/dev/null || echo -), timeline json $(stat -c %s "$tmp/t.json" 2>/dev/null || echo -), pftrace $(stat -c %s "$tmp/t.pftrace"), svg $(stat -c %s "$tmp/f.svg") bytes"
  rm -f "$tr" "$tmp"/f.* "$tmp"/t.*
done
