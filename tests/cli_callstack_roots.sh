#!/usr/bin/env bash
# cli_callstack_roots.sh - the frames at the root of every call stack and
# what the timeline says it left out:
# - an untyped assembly label names its code: a static program's `_start`
#   (an asm label, STT_NOTYPE) is the root frame of every folded stack, and
#   `btr symbolize` names it; with the loader's debug file (libc6-dbg),
#   ld.so's own `_start` is the root of a dynamic program's stacks;
# - the timeline's calls_left_out counts only calls left out (none for a
#   short program), not PLT stubs, which are folded into their callers.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

need_qemu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

prog=$build/prog_nolibc_step
entry=$(readelf -h "$prog" | awk '/Entry point/ {print $4}')
out=$("$btr" symbolize --elf "$prog" "$entry" 0x$(printf '%x' $((entry + 3))))
[ "$(echo "$out" | awk '{print $2}' | tr '\n' ' ')" = "_start _start+0x3 " ] && ok || bad "symbolize of the entry: $out"
"$btr" record -o "$tmp/s.btr" -- "$prog" >/dev/null 2>&1 || bad "record nolibc_step"
"$btr" flame "$tmp/s.btr" -o "$tmp/s.folded" || bad "flame nolibc_step"
roots=$(cut -d';' -f1 "$tmp/s.folded" | sed 's/ [0-9]*$//' | sort -u | tr '\n' ' ')
[ "$roots" = "_start " ] && ok || bad "static program's root frames: $roots"

"$btr" record -o "$tmp/d.btr" -- "$build/prog_flow_loops" >/dev/null 2>&1 || bad "record flow_loops"
ldso=$(readlink -f /lib64/ld-linux-x86-64.so.2)
id=$(readelf -n "$ldso" | awk '/Build ID/ {print $3}')
if [ -r "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ]; then
	"$btr" flame "$tmp/d.btr" -o "$tmp/d.folded" || bad "flame flow_loops"
	roots=$(cut -d';' -f1 "$tmp/d.folded" | sed 's/ [0-9]*$//' | sort -u | tr '\n' ' ')
	# ld.so's _start, then the program's _start replaces it (a jmp *%r12:
	# a tail call), so every stack starts at a _start.
	[ "$roots" = "_start " ] && ok || bad "dynamic program's root frames: $roots"
else
	echo "note: no debug file for $ldso (libc6-dbg): its _start root not checked"
fi

"$btr" timeline "$tmp/d.btr" --format json -o "$tmp/t.json" || bad "timeline"
python3 - "$tmp/t.json" <<'PY' && ok || bad "timeline: calls_left_out must be 0, plt_calls_folded > 0"
import json, sys
o = json.load(open(sys.argv[1]))['otherData']
print(o)
sys.exit(0 if o['calls_left_out'] == 0 and o['plt_calls_folded'] > 0 else 1)
PY

finish cli_callstack_roots
