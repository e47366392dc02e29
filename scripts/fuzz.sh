#!/usr/bin/env bash
# Runs every libFuzzer target in build dir $1 for $2 seconds; fails on a crash.
set -eu
build=$1; secs=$2
shopt -s nullglob
n=0; fail=0
for f in "$build"/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus=$(mktemp -d)
  [ -d "tests/fuzz/corpus/${name#fuzz_}" ] && cp -r "tests/fuzz/corpus/${name#fuzz_}/." "$corpus/"
  if "$f" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=0 -artifact_prefix="$build/$name-" "$corpus" >"$build/$name.log" 2>&1; then
    echo "fuzz: $name ran ${secs}s clean"
  else
    echo "fuzz: $name FAILED, see $build/$name.log"; tail -30 "$build/$name.log"; fail=$((fail+1))
  fi
  rm -rf "$corpus"; n=$((n+1))
done
echo "fuzz: $((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
