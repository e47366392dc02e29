#!/usr/bin/env bash
# bench_record_ir.sh - where recording's cost goes, in host instructions.
#
# On the shared 2-core VMs CPU times of the same run vary by 30-50% with
# the load, which hides a change of a few percent.  This counts instead:
# valgrind's cachegrind runs qemu-x86_64 (JIT code included, with
# --smc-check=all) on `gzip -c` of MB MiB and prints the host
# instructions (Ir) per executed guest TB for qemu alone, the floor plugin
# (bench/floor_plugin.c), the floor with its completion counter, and
# btr's plugin driven directly (as `btr record` runs it, without the
# launcher), split into the translated code (JIT, inline counters
# included), the TB callback and the rest.  Deterministic: two runs give
# the same figures to a few parts in a million.  On the 2026-11 VMs the
# CPU time of these runs followed Ir closely: time ~ qemu's time + 1.55x
# native per 10^9 extra Ir per MiB (see docs/record.md).  Never a test.
#
# Usage: bench/bench_record_ir.sh [RELEASE_BUILD_DIR] [MB]   (MB default 1)
set -u
build=${1:-build-release}
mb=${2:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/bench_lib.sh"
command -v valgrind >/dev/null || { echo "bench_record_ir: valgrind not installed" >&2; exit 2; }
command -v qemu-x86_64 >/dev/null || { echo "bench_record_ir: qemu-x86_64 not installed" >&2; exit 2; }
plugin=$(cd "$build" && pwd)/btr-qemu.so
[ -f "$plugin" ] || { echo "bench_record_ir: $plugin not built (make release)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/btr-recir.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
gz=$(command -v gzip)
bench_text "$tmp/in" "$mb"
bench_floor_plugin "$tmp/floor.so" || exit 2
mkdir "$tmp/dir"

# cg NAME QEMU_ARGS...: one cachegrind run; prints "total jit callback"
# (Ir): JIT code has no symbol (???), the callback is on_exec* or tb_exec*
cg() {
  local name=$1
  shift
  valgrind --tool=cachegrind --cache-sim=no --smc-check=all --cachegrind-out-file="$tmp/cg.$name" \
    qemu-x86_64 "$@" "$gz" -c "$tmp/in" >/dev/null 2>"$tmp/$name.err" ||
    { echo "bench_record_ir: $name failed: $(tail -1 "$tmp/$name.err")" >&2; return 1; }
  cg_annotate "$tmp/cg.$name" 2>/dev/null | tr -d , | awk '
    /PROGRAM TOTALS/ { tot = $1 }
    /\?\?\?:\?\?\?$/ { jit = $1 }
    /:(on_exec|on_exec_count|tb_exec|tb_exec_slow|tb_flush_done|tb_done)$/ { cb += $1 }
    END { print tot + 0, jit + 0, cb + 0 }'
}
# The executed TBs: the floor's callback runs once per TB (its Ir per call
# is fixed: the count of instructions of on_exec).
read -r q_tot q_jit q_cb < <(cg qemu) || exit 1
read -r f_tot f_jit f_cb < <(cg floor -plugin "$tmp/floor.so") || exit 1
read -r c_tot c_jit c_cb < <(cg floorc -plugin "$tmp/floor.so,count=on") || exit 1
read -r b_tot b_jit b_cb < <(cg btr -plugin "$plugin,dir=$tmp/dir") || exit 1
per_call=$(objdump -d --no-show-raw-insn "$tmp/floor.so" | awk '/<on_exec>:/ { on = 1; next } on && /\t/ { n++ } on && /\tret/ { exit } END { print n }')
tbs=$(( f_cb / per_call ))
printf 'bench_record_ir: %s -c of %s MiB under cachegrind; %d TBs executed (floor callback: %d Ir each)\n' \
  "$gz" "$mb" "$tbs" "$per_call"
printf '%-34s %14s %10s %10s %10s %10s\n' run "Ir total" "Ir/TB" "JIT/TB" "cb/TB" "rest/TB"
row() { awk -v l="$1" -v t="$2" -v j="$3" -v c="$4" -v n="$tbs" \
  'BEGIN { printf "%-34s %14.0f %10.1f %10.1f %10.1f %10.1f\n", l, t, t / n, j / n, c / n, (t - j - c) / n }'; }
row "qemu-x86_64 alone" "$q_tot" "$q_jit" "$q_cb"
row "qemu + per-TB callback (floor)" "$f_tot" "$f_jit" "$f_cb"
row "  + TB-completion counter" "$c_tot" "$c_jit" "$c_cb"
row "qemu + btr-qemu.so" "$b_tot" "$b_jit" "$b_cb"
