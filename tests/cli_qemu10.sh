#!/usr/bin/env bash
# cli_qemu10.sh - the plugin records with a QEMU of plugin API v4 that does
# not export the user-mode plugin functions (QEMU 10.0 as its source
# builds: no qemu_plugin_path_to_binary, no qemu_plugin_start_code), and
# there the counter that places a fault is per thread.
#  1. btr-qemu.so has no hard reference to those two functions (a QEMU
#     without them refuses a plugin that has one: "undefined symbol").
#  2. With a self-built QEMU (${BTR_QEMU10:-the newest one scripts/build-qemu.sh
#     left in its cache, complete or not}), when there is one: a dynamically
#     linked program and a program without libc are recorded, each thread's
#     count equal to the independent counter's in the same QEMU run, the
#     program's module at the address QEMU loaded it; four threads faulting
#     50 times each in a block all four run (tests/progs/race_threads.c
#     `fault`) are exact in every run, none reported lost (the per-vcpu
#     counter of API v4; with QEMU 7.2's shared counter such a place may be
#     lost, and said so, tests/cli_race.sh).  Skipped with a message when no
#     such QEMU is here.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)
so=$build/btr-qemu.so
[ -r "$so" ] || { echo "FAIL: $so not built"; exit 1; }

if oracle nm "the plugin's undefined symbols"; then
	und=$(nm -D --undefined-only "$so")
	for f in qemu_plugin_path_to_binary qemu_plugin_start_code; do
		check "btr-qemu.so: no hard reference to $f" \
			bash -c '! grep -qE "^ +U $1\$" <<<"$2"' _ "$f" "$und"
	done
fi

q10=${BTR_QEMU10:-}
if [ -z "$q10" ]; then
	cache=${BTR_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/btr}
	q10=$(ls -d "$cache"/qemu-*/bin/qemu-x86_64 2>/dev/null | sort -rV | head -1)
fi
[ -n "$q10" ] && [ -x "$q10" ] ||
	skip "no self-built QEMU (make qemu, or BTR_QEMU10=PATH): only the symbol check ran"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if nm -D --defined-only "$q10" | grep -q ' qemu_plugin_path_to_binary$'; then
	note "$q10 exports the user-mode plugin functions (patched build)"
else
	note "$q10 does not export the user-mode plugin functions"
fi

# each run: `btr record` and the counter in the same QEMU run
export BTR_COUNT_PLUGIN=$build/btr-insn-count.so BTR_COUNT_QEMU=$q10
run() {
	local name=$1 faults=$2
	shift 2
	rm -f "$tmp/$name.count"
	if ! BTR_COUNT_OUT=$tmp/$name.count BTR_QEMU=$src/tests/tools/qemu_count.sh \
		"$btr" record -q -o "$tmp/$name.btr" -- "$@" >/dev/null 2>"$tmp/$name.err"; then
		bad "$name: recording with $q10: $(head -1 "$tmp/$name.err")"
		return 1
	fi
	"$btr" report --format json "$tmp/$name.btr" >"$tmp/$name.json" 2>"$tmp/$name.rerr"
	local rc=$?
	check "$name: report exit 0 (got $rc: $(head -1 "$tmp/$name.rerr"))" [ $rc -eq 0 ]
	[ $rc -eq 0 ] || return 1
	# shellcheck disable=SC2086
	check "$name: every thread's count is the counter's ($(python3 "$src/tests/tools/count_cmp.py" \
		"$tmp/$name.count" "$tmp/$name.json" $faults | tr '\n' ' '))" \
		python3 "$src/tests/tools/count_cmp.py" "$tmp/$name.count" "$tmp/$name.json" $faults
	check "$name: no data lost" grep -q '"data_lost": *false' "$tmp/$name.json"
}

if run ls "" /bin/ls -l /; then
	"$btr" report "$tmp/ls.btr" >"$tmp/ls.txt" 2>&1
	check "ls: the program's module is listed" grep -qE '^  0x[0-9a-f]+-0x[0-9a-f]+ /usr/bin/ls$' "$tmp/ls.txt"
fi
run nolibc "" "$build/prog_nolibc_step"
for r in 1 2 3; do
	run "fault$r" "50 4" "$build/prog_race_threads" fault 4 500
done

finish cli_qemu10 "with $q10"
