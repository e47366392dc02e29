#!/usr/bin/env bash
# cli_insn_count.sh - the tests' independent instruction counter
# (tests/tools/insn_count.c, run through tests/tools/qemu_count.sh in the
# same QEMU run as btr's plugin) and btr agree on every thread of every
# process, across fork and exec; and a rep string instruction is one
# instruction for both.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)

need_qemu
[ -r "$build/btr-insn-count.so" ] || { echo "FAIL: btr-insn-count.so not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export BTR_COUNT_PLUGIN=$build/btr-insn-count.so

# counted NAME CMD...: record CMD with the counter beside btr's plugin;
# compare per (pid, tid) sums with btr's per-thread counts.
counted() {
	local name=$1; shift
	BTR_COUNT_OUT=$tmp/$name.count BTR_QEMU=$src/tests/tools/qemu_count.sh \
		"$btr" record -o "$tmp/$name.btr" -- "$@" >/dev/null 2>"$tmp/$name.err" ||
		{ bad "$name: record failed: $(head -1 "$tmp/$name.err")"; return; }
	"$btr" report --format json "$tmp/$name.btr" >"$tmp/$name.json" || { bad "$name: report failed"; return; }
	python3 "$src/tests/tools/count_cmp.py" "$tmp/$name.count" "$tmp/$name.json" >"$tmp/$name.cmp"
	if [ $? -eq 0 ]; then ok; else bad "$name: counts differ: $(tr '\n' ';' <"$tmp/$name.cmp")"; fi
}

counted threads "$build/prog_flow_threads"
counted shell sh -c 'ls / >/dev/null; /bin/true; echo hi | cat >/dev/null'
counted tree "$build/prog_proc_tree"

# rep movsb of 1 byte and of 4000 bytes: the same number of instructions.
for n in 1 2; do
	args=(); [ $n -eq 2 ] && args=(x)
	rm -f "$tmp/rep$n.count"
	BTR_COUNT_OUT=$tmp/rep$n.count qemu-x86_64 -plugin "$BTR_COUNT_PLUGIN,out=$tmp/rep$n.count" \
		"$build/prog_nolibc_rep" "${args[@]}"
	"$btr" record -o "$tmp/rep$n.btr" -- "$build/prog_nolibc_rep" "${args[@]}" >/dev/null 2>&1
	"$btr" report --format json "$tmp/rep$n.btr" >"$tmp/rep$n.json" 2>/dev/null
done
c1=$(awk '{s+=$3} END {print s}' "$tmp/rep1.count"); c2=$(awk '{s+=$3} END {print s}' "$tmp/rep2.count")
j1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions"])' "$tmp/rep1.json")
j2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions"])' "$tmp/rep2.json")
# _start: mov, and, call; cmain's instructions; the rep; syscall: a few
# dozen at most, and the same for both lengths.
if [ -n "$c1" ] && [ "$c1" = "$c2" ] && [ "$c1" -lt 64 ]; then ok; else bad "counter: rep counts $c1 vs $c2"; fi
if [ "$j1" = "$c1" ] && [ "$j2" = "$c2" ]; then ok; else bad "btr: rep counts $j1/$j2, counter $c1/$c2"; fi

finish cli_insn_count
