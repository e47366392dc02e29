#!/usr/bin/env bash
# bench_step.sh - trap-flag tracing speed, side by side in one run: the same
# small program (tests/progs/flow_loops.c, ~130k instructions with its
# start-up) run natively, under `btr record -b step` (ptrace, every
# instruction), `-b step --inproc` (the preloaded agent), region tracing
# (`--start main`), and `gdb -batch -ex 'record full' -ex continue` from main.
# Prints wall and CPU seconds, traps (instructions stepped), microseconds per
# trap and steps per second, and the slowdown against the native run.
# Usage: bench/bench_step.sh [BUILD_DIR] [PROGRAM]   (default: build, prog_flow_loops)
set -u
build=${1:-build}
prog=${2:-$build/prog_flow_loops}
btr=$build/btr
[ -x "$btr" ] && [ -x "$prog" ] || { echo "build first: $btr, $prog" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
T=/usr/bin/time

run() {   # label, steps-source, command...
  local label=$1 how=$2; shift 2
  $T -f '%e %U %S' -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err"
  read -r wall usr sys <"$tmp/t"
  local steps=0
  case $how in
    btr) steps=$(sed -n 's/.*; \([0-9]*\) steps, .*/\1/p' "$tmp/err" | tail -1) ;;
    gdb) steps=$(sed -n 's/^Log contains \([0-9]*\) instructions.*/\1/p' "$tmp/err" "$tmp/out" 2>/dev/null | tail -1) ;;
  esac
  [ -n "$steps" ] || steps=0
  awk -v l="$label" -v w="$wall" -v u="$usr" -v s="$sys" -v n="$steps" -v nat="${native:-0}" 'BEGIN {
    cpu = u + s
    printf "%-34s %8.3f %8.3f %9d", l, w, cpu, n
    if (n > 0) printf " %9.1f %10.0f", 1e6 * w / n, n / w; else printf " %9s %10s", "-", "-"
    if (nat > 0) printf " %9.0fx", w / nat; else printf " %10s", "-"
    printf "\n" }'
}

echo "program: $prog"
printf "%-34s %8s %8s %9s %9s %10s %10s\n" "" "wall s" "cpu s" "traps" "us/trap" "traps/s" "slowdown"
$T -f '%e %U %S' -o "$tmp/t" "$prog" >/dev/null; read -r native _ <"$tmp/t"
native=$(awk -v n="$native" 'BEGIN { print (n > 0.001 ? n : 0.001) }')
printf "%-34s %8.3f\n" "native" "$native"
run "btr -b step (ptrace, all)" btr "$btr" record -b step -o "$tmp/a.btr" -- "$prog"
run "btr -b step --inproc (agent)" btr "$btr" record -b step --inproc -o "$tmp/b.btr" -- "$prog"
run "btr -b step --start main (region)" btr "$btr" record -b step --start main -o "$tmp/c.btr" -- "$prog"
if command -v gdb >/dev/null; then
  $T -f '%e %U %S' -o "$tmp/t" gdb -batch -ex 'set pagination off' -ex 'break main' -ex run \
    -ex 'set record full insn-number-max unlimited' -ex 'record full' -ex continue -ex 'info record' \
    "$prog" >"$tmp/out" 2>&1
  cp "$tmp/out" "$tmp/err"
  read -r wall usr sys <"$tmp/t"
  steps=$(sed -n 's/^Log contains \([0-9]*\) instructions.*/\1/p' "$tmp/out" | tail -1)
  awk -v l="gdb record full (from main)" -v w="$wall" -v u="$usr" -v s="$sys" -v n="${steps:-0}" -v nat="$native" 'BEGIN {
    printf "%-34s %8.3f %8.3f %9d", l, w, u + s, n
    if (n > 0) printf " %9.1f %10.0f", 1e6 * w / n, n / w; else printf " %9s %10s", "-", "-"
    printf " %9.0fx\n", w / nat }'
else
  echo "gdb not installed: no peer figures (scripts/deps.sh installs it)"
fi
[ -x "$build/bench_step_trap" ] && { echo; "$build/bench_step_trap" 20000; }
echo "(us/trap and traps/s from wall time; the --inproc agent traces from its constructor on, after the"
echo " dynamic loader; region and gdb rows cover main only; the machine is shared, so repeat for stable figures)"
