#!/usr/bin/env bash
# bench_xdc.sh - btr's PT flow decoder beside libxdc and libipt, decoding
# the same bytes with the same code image, in one run.
#
# The PT comes from real programs recorded by btr itself
# (`btr record -b qemu --no-retcomp`: libxdc needs return compression off):
# gzip on a generated file, python3 running a small script, and the
# suite's flow_loops test program.  libxdc (MIT) is a benchmark peer built
# here from ../shared/peers/libxdc with Debian's libcapstone-dev into the
# build directory; it is never linked into btr.  Skipped with a message
# when either is absent.
#
# Usage: bench/bench_xdc.sh RELEASE_BUILD_DIR [REPS]
# Prints per program and decoder: PT bytes, edges (one per executed
# control-flow transfer, not-taken conditionals included; btr's count is
# the divisor for every row), best-of-REPS decode time of the whole
# buffer (warm: decoder state kept between repetitions), ns/edge, MB/s and
# the process's peak RSS.
set -u
build=${1:-build-release}
reps=${2:-30}
here=$(cd "$(dirname "$0")/.." && pwd)
btr=$build/btr
[ -x "$btr" ] || { echo "bench_xdc: $btr not built (make release)" >&2; exit 2; }
out=$build/xdc
. "$here/bench/bench_lib.sh"
msg=$(bench_build_xdc "$build" 2>&1) || { echo "bench_xdc: ${msg##*$'\n'}"; exit 0; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/btr-xdc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
bench_text "$tmp/input" 1.2
bench_pyprog "$tmp/prog.py"

record() { # name cmd...
  local name=$1; shift
  "$btr" record -q -b qemu --no-retcomp -o "$tmp/$name.btr" -- "$@" >/dev/null 2>"$tmp/$name.err" ||
    { echo "bench_xdc: recording $name failed: $(head -1 "$tmp/$name.err")"; return 1; }
}
record gzip gzip -c "$tmp/input"
record python3 /usr/bin/python3 "$tmp/prog.py"   # the real ELF, not a pyenv shim
[ -x "$build/prog_flow_loops" ] && record flow_loops "$build/prog_flow_loops"

printf '%-11s %-11s %10s %10s %10s %9s %9s %9s\n' program decoder pt_bytes edges best_ms ns/edge MB/s rss_MiB
for t in gzip python3 flow_loops; do
  [ -f "$tmp/$t.btr" ] || continue
  base=
  for m in btr-cb btr-batch xdc-cb xdc-bitmap; do
    line=$("$out/xdc_compare" "$tmp/$t.btr" "$reps" "$m" 2>"$tmp/err") ||
      { echo "$t $m: failed: $(head -1 "$tmp/err")"; continue; }
    set -- $line
    [ -z "$base" ] && base=$3   # btr's edge count: the shared divisor
    awk -v t="$t" -v m="$1" -v b="$2" -v e="$3" -v s="$4" -v r="$5" -v base="$base" 'BEGIN {
      printf "%-11s %-11s %10d %10d %10.2f %9.2f %9.1f %9.1f\n", t, m, b, e, s * 1e3,
             s * 1e9 / base, b / s / 1e6, r / 1024 }'
    [ -s "$tmp/err" ] && sed 's/^/    note: /' "$tmp/err" | head -2
  done
done
