#!/usr/bin/env bash
# bench_record.sh - cost of recording: `gzip -c` of a 10 MB file, side by
# side in one run: native, `btr record -b qemu`, valgrind callgrind with
# --collect-jumps=yes, valgrind --tool=none (valgrind's own floor),
# qemu-x86_64 with the cheapest plugin (bench/floor_plugin.c: one callback
# per executed TB storing its address; the floor of plugin recording;
# again with a TB-completion counter checked per TB, the least exactness
# needs),
# qemu-x86_64 alone, and `qemu-x86_64 -d exec,nochain` logging to a file.
# Usage: bench/bench_record.sh BUILD_DIR [SIZE_MB]
# (the qemu -d exec,nochain run is by far the slowest: several minutes for
# 10 MiB; BTR_BENCH_NO_EXECLOG=1 skips it)
# Prints wall time (and user+sys CPU time), the slowdown against native,
# the trace size and bytes per executed instruction (instructions counted
# by btr's flow decoder through `btr report --format json`).
set -u
build=${1:-build}
mb=${2:-10}
btr=$build/btr
[ -x "$btr" ] || { echo "bench_record: $btr not built" >&2; exit 2; }
gzip=$(command -v gzip) || { echo "bench_record: gzip not found" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/btr-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/bench_lib.sh"
# Deterministic, compressible-but-not-trivial input of $mb MiB.
bench_text "$tmp/input" "$mb"
in=$tmp/input

# run CMD...: wall seconds into $wall, user+sys CPU seconds into $cpu
run() {
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f '%U %S' -o "$tmp/time" "$@" >/dev/null 2>"$tmp/run.err"
  t1=$(date +%s.%N)
  wall=$(echo "$t1 - $t0" | bc -l)
  cpu=$(awk 'END { printf "%.3f", $1 + $2 }' "$tmp/time")
}
[ -x /usr/bin/time ] || { echo "bench_record: /usr/bin/time (Debian package time) needed" >&2; exit 2; }

printf 'bench_record: gzip -c of a %d MiB file (%s), load %s\n' "$mb" "$gzip" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %9s %9s %8s %12s\n' "method" "wall s" "cpu s" "x native" "output bytes"

run "$gzip" -c "$in"; native=$wall
printf '%-34s %9.3f %9s %8s %12s\n' "native" "$native" "$cpu" "1.0" "-"

run "$btr" record -q -b qemu -o "$tmp/t.btr" -- "$gzip" -c "$in"
btr_wall=$wall
tsize=$(stat -c %s "$tmp/t.btr" 2>/dev/null || echo 0)
printf '%-34s %9.3f %9s %8.1f %12s\n' "btr record -b qemu" "$wall" "$cpu" "$(echo "$wall / $native" | bc -l)" "$tsize"

if command -v valgrind >/dev/null; then
  run valgrind --tool=callgrind --collect-jumps=yes --callgrind-out-file="$tmp/cg.out" "$gzip" -c "$in"
  printf '%-34s %9.3f %9s %8.1f %12s\n' "valgrind callgrind --collect-jumps" "$wall" "$cpu" \
    "$(echo "$wall / $native" | bc -l)" "$(stat -c %s "$tmp/cg.out" 2>/dev/null || echo 0)"
  rm -f "$tmp/cg.out"
  run valgrind --tool=none "$gzip" -c "$in"
  printf '%-34s %9.3f %9s %8.1f %12s\n' "valgrind --tool=none" "$wall" "$cpu" \
    "$(echo "$wall / $native" | bc -l)" "-"
else
  echo "valgrind: not installed, skipped"
fi

if command -v qemu-x86_64 >/dev/null && bench_floor_plugin "$tmp/floor.so" 2>"$tmp/cc.err"; then
  run qemu-x86_64 -plugin "$tmp/floor.so" "$gzip" -c "$in"
  printf '%-34s %9.3f %9s %8.1f %12s\n' "qemu + per-TB callback (floor)" "$wall" "$cpu" \
    "$(echo "$wall / $native" | bc -l)" "-"
  # the same plus the least exactness needs: a counter on each TB's last
  # instruction, checked by the callback
  run qemu-x86_64 -plugin "$tmp/floor.so,count=on" "$gzip" -c "$in"
  printf '%-34s %9.3f %9s %8.1f %12s\n' "  + TB-completion counter" "$wall" "$cpu" \
    "$(echo "$wall / $native" | bc -l)" "-"
else
  echo "qemu per-TB callback floor: not measured ($(head -1 "$tmp/cc.err" 2>/dev/null))"
fi

if command -v qemu-x86_64 >/dev/null && [ -z "${BTR_BENCH_NO_EXECLOG:-}" ]; then
  # The exec log of 10 MiB of gzip is tens of GB: it goes through a FIFO
  # into `wc -c` (the cost of producing it is measured, the disk is spared).
  mkfifo "$tmp/qemu.log"
  wc -c <"$tmp/qemu.log" >"$tmp/qemu.size" &
  run qemu-x86_64 -d exec,nochain -D "$tmp/qemu.log" "$gzip" -c "$in"
  wait
  printf '%-34s %9.3f %9s %8.1f %12s\n' "qemu-x86_64 -d exec,nochain" "$wall" "$cpu" \
    "$(echo "$wall / $native" | bc -l)" "$(cat "$tmp/qemu.size")"
fi
if command -v qemu-x86_64 >/dev/null; then
  run qemu-x86_64 "$gzip" -c "$in"
  printf '%-34s %9.3f %9s %8.1f %12s\n' "(qemu-x86_64 alone, no plugin)" "$wall" "$cpu" \
    "$(echo "$wall / $native" | bc -l)" "-"
fi

insns=$("$btr" report --format json "$tmp/t.btr" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["instructions"])' 2>/dev/null || echo 0)
if [ "${insns:-0}" -gt 0 ]; then
  printf 'instructions executed (btr flow decoder): %s; trace %s bytes = %.4f bytes/instruction\n' \
    "$insns" "$tsize" "$(echo "$tsize / $insns" | bc -l)"
  printf 'goals: btr record <= 4x native wall (got %.1fx), <= 0.2 bytes/instruction (got %.4f)\n' \
    "$(echo "$btr_wall / $native" | bc -l)" "$(echo "$tsize / $insns" | bc -l)"
else
  echo "instructions: btr report unavailable, bytes/instruction not computed"
fi
