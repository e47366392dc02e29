#!/usr/bin/env bash
# cli_alloc_fail.sh - allocation failure at every point (curl's torture test).
# For each command of the table below and each input, the command is run once
# to count its allocations (A), then A more times with the n-th allocation
# failing (n = 1..A; BTR_ALLOC_FAIL, tests/torture/alloc_shim.c, linked only
# into the test binary btr_torture).  Every run must end with
#   - exit 3 and exactly one line on stderr that says memory ran out, or
#   - exit 0 and the same stdout as the run without failure, or exit 0 with a
#     different stdout only if stderr carries a warning (partial result),
# never a signal, another exit code, a hang, or a leaked block (the shim
# counts blocks never freed; in the sanitizer build LeakSanitizer also checks).
# By default (ctest) the first 16 allocations of each command fail in turn and
# then every STEP-th (the table's first column, times TORTURE_STEP) to keep
# the run time near a minute; TORTURE_FULL=1 tries every n (curl's full
# torture; a few minutes).  TORTURE_SHIFT=K samples the n with
# (n + K) % STEP == 0 instead: `make test` passes the day of the year, so
# that the sampled runs move through every allocation point (each within
# STEP days, at most 50) at the cost of one sampled run; a failure names
# the shift to reproduce it with.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2"); shared=$(realpath -m "${3:-/nonexistent}")
torture=$build/btr_torture
[ -x "$torture" ] || skip "$torture not built"
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 not installed (needed to record the input)"
runs=0
tshift=$((10#${TORTURE_SHIFT:-0}))   # (10#: a day number like 008 is not octal)
echo "cli_alloc_fail: TORTURE_SHIFT=$tshift${TORTURE_FULL:+ TORTURE_FULL=$TORTURE_FULL}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

"$btr" record -q -o small.btr -- "$build/prog_flow_loops" >/dev/null || { echo "FAIL: record"; exit 1; }
inputs="small.btr"
[ -r "$shared/traces/quipper/perf.data.branch-4.14" ] && inputs="$inputs $shared/traces/quipper/perf.data.branch-4.14"
sym_addr=$(nm "$build/prog_symbols_nopie" | awk '$3=="main"{print "0x"$1}')

# THE COMMANDS: every form of the registry that reads a file (`btr
# --list-commands`, tools/btr/commands.c), one line each: STEP CMD...  FILE
# is replaced by each input (a form naming a function, FUNC, runs on the
# recording alone: the perf.data has no code).  STEP: see above, 32 unless
# STEPS below says otherwise (8 for the forms whose paths the others share:
# the stream, the report, blocks, call stacks; larger for forms with many
# allocations or the same allocations as another form; 1 for those with
# few), so that a new command adds a quarter of a full sampling's runs.
declare -A STEPS=(
  ["report FILE"]=8 ["script FILE"]=8 ["check FILE"]=8 ["callgraph FILE"]=8 ["cov --format lcov -o OUT FILE"]=8
  ["report --format json FILE"]=50 ["pt dump FILE"]=1 ["pt decode --stat FILE"]=1 ["trace dump FILE"]=1
  ["trace info FILE"]=1 ["trace info --format json FILE"]=1 ["symbolize --elf ELF ADDR"]=1
)
cmds=$(forms reads-trace; forms reads-elf)


# $1: step, $2: command line (FILE substituted)
torture() {
  local step=$(( $1 * ${TORTURE_STEP:-1} )) cmd=$2 n=0 total rc lines
  # shellcheck disable=SC2086
  BTR_ALLOC_REPORT=count.txt "$torture" $cmd >base.out 2>base.err; rc=$?
  if [ $rc -ne 0 ]; then bad "btr $cmd: exit $rc without failures: $(head -3 base.err)"; return; fi
  total=$(awk '{print $2}' count.txt)
  if [ "$(awk '{print $6}' count.txt)" != 0 ]; then bad "btr $cmd: leaks $(cat count.txt) without failures"; fi
  local ok=0 errs=0 partial=0
  for ((n = 1; n <= total; n++)); do
    if [ "${TORTURE_FULL:-0}" != 1 ] && [ $n -gt 16 ] && [ $(((n + tshift) % step)) -ne 0 ]; then continue; fi
    rm -f count.txt
    # shellcheck disable=SC2086
    BTR_ALLOC_FAIL=$n BTR_ALLOC_REPORT=count.txt timeout 60 "$torture" $cmd >out.txt 2>err.txt; rc=$?
    runs=$((runs+1))
    lines=$(wc -l <err.txt)
    # exit 3: one error line; a module whose symbols ran out of memory is
    # also said as a warning (once: a report goes on with addresses)
    errlines=$(grep -vc '^btr: warning: .*: symbols not loaded: out of memory$' err.txt)
    local what="btr $cmd with allocation $n/$total failing"
    if [ $rc -eq 3 ]; then
      if [ "$errlines" -ne 1 ]; then bad "$what: exit 3 with $errlines stderr lines: $(head -c 400 err.txt)"; continue; fi
      if ! grep -qi "memory" err.txt; then bad "$what: exit 3 but stderr does not say memory ran out: $(cat err.txt)"; continue; fi
      errs=$((errs+1))
    elif [ $rc -eq 0 ]; then
      if cmp -s out.txt base.out; then ok=$((ok+1));
      elif [ "$lines" -ge 1 ]; then partial=$((partial+1));
      else bad "$what: exit 0, different output, no warning"; diff base.out out.txt | head -5 >&2; continue; fi
    else
      bad "$what: exit $rc: $(head -c 400 err.txt)"; continue
    fi
    if [ ! -r count.txt ]; then bad "$what: no allocation report (did not exit normally)"; continue; fi
    if [ "$(awk '{print $6}' count.txt)" != 0 ]; then bad "$what: leaked: $(cat count.txt)"; continue; fi
    ok
  done
  echo "btr $cmd: $total allocations; $errs out-of-memory errors, $ok same results, $partial partial results with a warning"
}

# (OUT ends in .dot: cfg chooses its format by the name)
OUT=out.dot FUNC=main ELF=$build/prog_symbols_nopie ADDR=$sym_addr
while IFS=$'\t' read -r name _ form; do
  [ -z "$form" ] && continue
  st=${STEPS[$form]:-32}
  # a function, or afdo's profile of the traced program: the recorded
  # program (the perf.data's has no module file here)
  if [[ $form == *FUNC* || $name == afdo ]]; then
    FILE=small.btr torture "$st" "$(FILE=small.btr fill "$form")"
  elif [[ $form == *FILE* ]]; then
    for f in $inputs; do torture "$st" "$(FILE=$f fill "$form")"; done
  else
    torture "$st" "$(fill "$form")"
  fi
done <<<"$cmds"

finish cli_alloc_fail "$runs runs"
