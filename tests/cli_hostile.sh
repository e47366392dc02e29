#!/usr/bin/env bash
# cli_hostile.sh - hostile files: every sample file (a qemu .btr recorded
# here, plain and zstd-compressed; each perf.data of the shared traces; an ELF
# for symbolize), cut at many offsets and with random bytes changed
# (tests/hostile_mutate.py, fixed seeds), through every reading command.
# Each run must give exit 3 with exactly one line on stderr, or exit 0 (a
# result, partial ones with their gaps or warnings); never a signal, never
# a hang (timeout), never unbounded memory (ulimit -v; in the sanitizer
# build ASan's hard_rss_limit_mb).  Run time: about a minute.
# HOSTILE_SCALE=K multiplies the number of damaged copies (deeper local runs).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2"); shared=$(realpath -m "${3:-/nonexistent}")
src=$(cd "$(dirname "$0")" && pwd)
scale=${HOSTILE_SCALE:-1}
runs=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# THE COMMANDS, by the kind of file they read; FILE is the damaged file.
# New reading commands (script, cov, annotate, cfg, callgraph, ...) are
# added to TRACE_CMDS.
TRACE_CMDS=$(cat <<'CMDS'
report FILE
report --format json FILE
pt dump FILE
pt decode FILE
pt decode --stat FILE
trace dump FILE
trace info FILE
script FILE
check --format json FILE
crash FILE
cov --format lcov -o h.info FILE
annotate --function main FILE
diff FILE FILE
callgraph FILE
flame -o h.folded FILE
bolt -o h.fdata FILE
import -o h.btr FILE
CMDS
)
ELF_CMDS=$(cat <<CMDS
symbolize --elf FILE 0x401000 0x4011a0
CMDS
)

# THE SAMPLES: kind file ntrunc nflip (counts before HOSTILE_SCALE)
samples=""
if command -v qemu-x86_64 >/dev/null; then
  "$btr" record -q -o threads.btr -- "$build/prog_flow_threads" >/dev/null 2>&1 && samples="$samples trace threads.btr 8 8"
  "$btr" record -q -z 3 -o loops-zstd.btr -- "$build/prog_flow_loops" >/dev/null 2>&1 && samples="$samples trace loops-zstd.btr 4 4"
fi
for f in quipper/perf.data.intel_pt-4.14 quipper/perf.data.branch-4.14 quipper/perf.data.callgraph_and_branch-3.8 autofdo/test.lbr; do
  [ -r "$shared/traces/$f" ] && samples="$samples trace $shared/traces/$f 2 2"
done
samples="$samples elf $build/prog_symbols_nopie 4 4"

asan=0
if nm "$btr" 2>/dev/null | grep -q __asan_init || ldd "$btr" 2>/dev/null | grep -q libasan; then asan=1; fi

run() {  # $1: command line
  local rc lines
  runs=$((runs+1))
  if [ $asan -eq 1 ]; then
    # shellcheck disable=SC2086
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:hard_rss_limit_mb=1024" timeout -s KILL 60 "$btr" $1 >out.txt 2>err.txt; rc=$?
  else
    # shellcheck disable=SC2086
    (ulimit -v 1048576; exec timeout -s KILL 30 "$btr" $1 >out.txt 2>err.txt); rc=$?
  fi
  lines=$(wc -l <err.txt)
  if [ $rc -eq 3 ]; then
    # One line for one cause: one error line, or (data lost, the output
    # covers what was read) one "btr: warning:" line per distinct loss -
    # flipped bytes can damage two chunks and, with them, a process's exit
    # record, each said once (docs/cli.md) - and then, if the command
    # fails, its one error line last.  Never a line twice, nothing else.
    if [ "$lines" -eq 1 ] || { [ "$(sort -u err.txt | wc -l)" -eq "$lines" ] &&
        ! head -n -1 err.txt | grep -qv '^btr: warning: ' && ! grep -qv '^btr: ' err.txt &&
        [ "$lines" -le 34 ]; }; then
      ok
    else
      bad "btr $1: exit 3 with $lines stderr lines: $(head -c 300 err.txt)"
    fi
  elif [ $rc -eq 0 ] || { [ $rc -eq 1 ] && [ "${1%% *}" = check ]; }; then
    ok   # check exits 1 for findings (damaged code can look hijacked)
  elif [ $rc -eq 137 ]; then
    bad "btr $1: hang or out of memory (killed after the time limit or memory limit)"
  else
    bad "btr $1: exit $rc: $(head -c 300 err.txt)"
  fi
}

set -- $samples
while [ $# -ge 4 ]; do
  kind=$1; file=$2; nt=$(( $3 * scale )); nf=$(( $4 * scale )); shift 4
  [ -r "$file" ] || continue
  d=$tmp/m-$(basename "$file")
  python3 "$src/hostile_mutate.py" "$file" "$d" 1 "$nt" "$nf" || { bad "mutate $file"; continue; }
  if [ "$kind" = trace ]; then cmds=$TRACE_CMDS; else cmds=$ELF_CMDS; fi
  before=$fail
  for m in "$d"/*; do
    while read -r line; do
      [ -n "$line" ] && run "${line//FILE/$m}"
    done <<<"$cmds"
  done
  echo "$(basename "$file"): $(ls "$d" | wc -l) damaged copies, $((fail-before)) failures"
  rm -rf "$d"
done

finish cli_hostile "$runs runs"
