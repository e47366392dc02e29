#!/usr/bin/env bash
# Runs every libFuzzer target in build dir $1 for at most $2 seconds each,
# FUZZ_JOBS at a time (make fuzz: JOBS); fails on a crash.  A fixed seed and run count
# (FUZZ_SEED, FUZZ_RUNS) make a CI run repeatable: the inputs it tries are a
# prefix of the ones tried locally before the commit.
# For exploratory fuzzing use e.g. FUZZ_SEED=0 FUZZ_RUNS=-1 FUZZ_SECONDS=600 make fuzz;
# FUZZ_ONLY="pt stream" runs only those targets; FUZZ_KEEP=DIR keeps each
# target's grown corpus in DIR/NAME (reused by the next run).
#
# Seeds (docs/reliability.md): tests/fuzz/corpus/NAME, the kept findings
# tests/fuzz/regress/NAME, and at run time, never copied into the repository,
# the recordings of ../shared/traces and the test programs of the build
# (the table below).  A finding: reproduce with `$1/fuzz_NAME FILE`, fix, and
# put FILE into tests/fuzz/regress/NAME/ (ctest's fuzz_regress_NAME replays it).
set -eu
build=$1; secs=$2
shared=${FUZZ_SHARED:-../shared}
shopt -s nullglob
tr=$shared/traces

# target -> extra seed files from the shared traces and the build
seeds() {
  case $1 in
    perfdata|stream|trace) echo "$tr"/quipper/perf.data.* "$tr"/autofdo/test.lbr ;;
    image) echo "$tr"/autofdo/test.binary "$build"/prog_symbols "$build"/prog_symbols_nopie ;;
    *) ;;
  esac
}
# target -> libFuzzer options (inputs larger than max_len are cut to it)
opts() {
  case $1 in
    perfdata|stream|trace|image) echo "-max_len=262144" ;;
    *) echo "-max_len=65536" ;;
  esac
}

# one target: $1 the fuzzer; prints its one result line, exit 1 on a finding
one() {
  local f=$1 name short corpus d s stats
  name=$(basename "$f"); short=${name#fuzz_}
  if [ -n "${FUZZ_KEEP:-}" ]; then corpus=$FUZZ_KEEP/$short; mkdir -p "$corpus"; else corpus=$(mktemp -d); fi
  for d in "tests/fuzz/corpus/$short" "tests/fuzz/regress/$short"; do
    [ -d "$d" ] && cp -r "$d/." "$corpus/"
  done
  for s in $(seeds "$short"); do
    [ -r "$s" ] && cp "$s" "$corpus/seed-$(basename "$s")"
  done
  local rc=0
  # shellcheck disable=SC2046
  if "$f" -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-200000}" -max_total_time="$secs" -rss_limit_mb=2048 \
       -timeout=25 $(opts "$short") -print_final_stats=1 -artifact_prefix="$build/$name-" "$corpus" >"$build/$name.log" 2>&1; then
    stats=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$build/$name.log" | tail -1 | sed -E 's/^#([0-9]+)[^c]*cov: ([0-9]+) ft: ([0-9]+).*exec\/s: ([0-9]+).*/runs \1 edges \2 features \3 exec\/s \4/')
    echo "fuzz: $name clean (seed ${FUZZ_SEED:-1}, up to ${FUZZ_RUNS:-200000} runs or ${secs}s): $stats"
  else
    echo "fuzz: $name FAILED, see $build/$name.log"; tail -30 "$build/$name.log"; rc=1
  fi
  [ -n "${FUZZ_KEEP:-}" ] || rm -rf "$corpus"
  return $rc
}

# FUZZ_JOBS targets at once (make fuzz: JOBS, one a core); each target's
# lines are printed whole when it ends
jobs_max=${FUZZ_JOBS:-1}
out=$(mktemp -d)
n=0; fail=0; running=0
reap() {  # wait for one target, print what it said
  local r=0
  wait -n || r=$?
  running=$((running-1))
  [ $r -eq 0 ] || fail=$((fail+1))
}
for f in "$build"/fuzz_*; do
  [ -x "$f" ] || continue
  name=$(basename "$f"); short=${name#fuzz_}
  if [ -n "${FUZZ_ONLY:-}" ] && ! [[ " $FUZZ_ONLY " == *" $short "* ]]; then continue; fi
  [ $running -lt "$jobs_max" ] || reap
  { r=0; one "$f" >"$out/$name" 2>&1 || r=$?; cat "$out/$name"; exit $r; } &
  running=$((running+1))
  n=$((n+1))
done
while [ $running -gt 0 ]; do reap; done
rm -rf "$out"
echo "fuzz: $((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
