#!/usr/bin/env bash
# Runs every libFuzzer target in build dir $1 for at most $2 seconds; fails on a crash.
# A fixed seed and run count (FUZZ_SEED, FUZZ_RUNS) make a CI run repeatable: the
# inputs it tries are a prefix of the ones tried locally before the commit.
# For exploratory fuzzing use e.g. FUZZ_SEED=0 FUZZ_RUNS=-1 FUZZ_SECONDS=600 make fuzz.
set -eu
build=$1; secs=$2
shopt -s nullglob
n=0; fail=0
for f in "$build"/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f")
  corpus=$(mktemp -d)
  [ -d "tests/fuzz/corpus/${name#fuzz_}" ] && cp -r "tests/fuzz/corpus/${name#fuzz_}/." "$corpus/"
  if "$f" -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-200000}" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=0 -artifact_prefix="$build/$name-" "$corpus" >"$build/$name.log" 2>&1; then
    echo "fuzz: $name clean (seed ${FUZZ_SEED:-1}, up to ${FUZZ_RUNS:-200000} runs or ${secs}s)"
  else
    echo "fuzz: $name FAILED, see $build/$name.log"; tail -30 "$build/$name.log"; fail=$((fail+1))
  fi
  rm -rf "$corpus"; n=$((n+1))
done
echo "fuzz: $((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
