#!/usr/bin/env bash
# bench_memory.sh BUILD [GIB] - bounded memory (docs/reliability.md): records
# gzip under qemu as a template, writes a trace of GIB GiB (default 2) in
# $TMPDIR (/tmp) with bench_bigtrace, decodes it and reports it in fresh
# processes and prints the peak RSS of each with the trace size; the trace is
# deleted afterwards.  Needs GIB + a little free space.  Use a Release build.
set -eu
build=$(realpath "${1:-build-release}"); gib=${2:-2}
dir=$(mktemp -d "${TMPDIR:-/tmp}/btr-bench-memory-XXXXXX")
trap 'rm -rf "$dir"' EXIT
head -c 2000000 "$build/btr" >"$dir/input"
"$build/btr" record -q -o "$dir/template.btr" -- /bin/gzip -c "$dir/input" >/dev/null
"$build/bench_bigtrace" gen "$dir/template.btr" "$dir/big.btr" "$gib"
ls -l "$dir/big.btr"
"$build/bench_bigtrace" run "$dir/big.btr"
