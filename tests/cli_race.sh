#!/usr/bin/env bash
# cli_race.sh - the QEMU recorder is exact when threads run the same code at
# the same moment: N threads (2, 4, 8, 32) in one shared one-block loop and
# in one shared small function, a thread pool, fork and posix_spawn from 4
# threads at once (tests/progs/race_threads.c).  Each case is recorded with
# the tests' independent counter in the same QEMU run
# (tests/tools/qemu_count.sh) while a second process keeps the other core
# busy, and every thread's count must equal the counter's, every time, with
# no lost data.  BTR_RACE_REPS (default 5) sets the repetitions of each case,
# BTR_RACE_ONLY (a regular expression) picks cases by name.  BTR_QEMU picks
# the engine (e.g. a self-built QEMU 10, plugin API v4, where the fault
# counter is per thread and fault4 is exact in every run; under 7.2's
# shared counter some of its runs say they lost data instead).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)

need_qemu
[ -r "$build/btr-insn-count.so" ] || { echo "FAIL: btr-insn-count.so not built"; exit 1; }
reps=${BTR_RACE_REPS:-5}
tmp=$(mktemp -d)
burner=
trap '[ -n "$burner" ] && kill "$burner" 2>/dev/null; rm -rf "$tmp"' EXIT
export BTR_COUNT_PLUGIN=$build/btr-insn-count.so
# The engine: $BTR_QEMU when set (e.g. the self-built QEMU 10), else
# qemu-x86_64 on PATH; the counter runs in the same one.
export BTR_COUNT_QEMU=${BTR_COUNT_QEMU:-${BTR_QEMU:-qemu-x86_64}}
prog=$build/prog_race_threads

# Load: a busy loop on the other core, so that threads are preempted in the
# middle of blocks as on a busy machine.
( while :; do :; done ) &
burner=$!

exact=0 runs=0 said=0 faults=
# case NAME ARGS...: $reps recordings of prog_race_threads ARGS; each must
# report exactly the counter's count for every thread and no lost data.
# With faults="K N" (N threads take K faults each): each run is exact (those
# threads K short of the counter, which counts a faulting instruction), or
# says it lost data (report exit 3, a "flow" loss naming a thread, on
# stderr too) - never a silent difference.
case_() {
	local name=$1; shift
	[[ $name =~ ${BTR_RACE_ONLY:-.} ]] || return 0
	local r bad_runs=0 why=
	for r in $(seq 1 "$reps"); do
		local o=$tmp/$name.$r
		runs=$((runs + 1))
		if ! BTR_COUNT_OUT=$o.count BTR_QEMU=$src/tests/tools/qemu_count.sh \
			"$btr" record -q -o "$o.btr" -- "$prog" "$@" >/dev/null 2>"$o.err"; then
			bad_runs=$((bad_runs + 1)); why="record failed: $(head -1 "$o.err")"; continue
		fi
		"$btr" report --format json "$o.btr" >"$o.json" 2>"$o.rerr"
		local rc=$?
		if [ -n "$faults" ] && [ $rc -eq 3 ] && grep -q '"data_lost": *true' "$o.json" &&
			grep -q '"kind": "flow"' "$o.json" && grep -q "the flow of thread" "$o.rerr"; then
			said=$((said + 1)); rm -f "$o".*; continue   # honest: lost, and says where
		fi
		if [ $rc -ne 0 ]; then
			bad_runs=$((bad_runs + 1)); why="report exit $rc: $(head -1 "$o.rerr")"; continue
		fi
		# shellcheck disable=SC2086
		if ! python3 "$src/tests/tools/count_cmp.py" "$o.count" "$o.json" $faults >"$o.cmp"; then
			bad_runs=$((bad_runs + 1)); why="counts differ: $(tr '\n' ';' <"$o.cmp")"; continue
		fi
		if grep -q '"data_lost": *true' "$o.json"; then
			bad_runs=$((bad_runs + 1)); why="data lost"; continue
		fi
		exact=$((exact + 1))
		rm -f "$o".*
	done
	if [ "$bad_runs" -eq 0 ]; then ok; else bad "$name: $bad_runs of $reps runs inexact, e.g. $why"; fi
}

# Work per thread: 5 rounds of ITERS iterations, about 20 million
# instructions per case in all (BTR_RACE_WORK / N iterations): enough that
# the old plugin lost loop iterations in most runs with 8 and 32 threads.
for n in 2 4 8 32; do
	it=$((${BTR_RACE_WORK:-600000} / n))
	case_ "loop$n" loop "$n" "$it"
	case_ "func$n" func "$n" "$it"
done
case_ pool8 pool 8 20000
case_ fork4 fork 4 5000
# A fault in a block other threads run at that moment: where it faulted
# comes from a counter they add to as well.
faults="50 4" case_ fault4 fault 4 500

finish cli_race "$exact of $runs runs exact, $said said they lost data"
