#!/usr/bin/env bash
# bench_memory.sh BUILD [GIB] [PT_GIB] - bounded memory (docs/reliability.md):
# records gzip under qemu as a template, then for a BTS trace of GIB GiB
# (default 2) and a PT trace of PT_GIB GiB (default 0.25; dense qemu PT decodes
# at about 0.1 GiB per CPU minute with the report) written into $TMPDIR
# (/tmp) by bench_bigtrace: decodes and reports each in fresh processes and
# prints the peak RSS with the trace size.  The files are deleted afterwards.
# Needs GIB + PT_GIB free space.  Use a Release build (make release).
set -eu
build=$(realpath "${1:-build-release}"); gib=${2:-2}; ptgib=${3:-0.25}
dir=$(mktemp -d "${TMPDIR:-/tmp}/btr-bench-memory-XXXXXX")
trap 'rm -rf "$dir"' EXIT
head -c 2000000 "$build/btr" >"$dir/input"
"$build/btr" record -q -o "$dir/template.btr" -- /bin/gzip -c "$dir/input" >/dev/null
for kind in bts pt; do
  size=$gib; [ $kind = pt ] && size=$ptgib
  "$build/bench_bigtrace" gen "$dir/template.btr" "$dir/big.btr" "$size" $kind
  ls -l "$dir/big.btr"
  "$build/bench_bigtrace" run "$dir/big.btr"
  rm -f "$dir/big.btr"
done
