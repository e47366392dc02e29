#!/usr/bin/env bash
# cli_json_utf8.sh - every command that writes JSON writes valid UTF-8 JSON
# when the trace holds non-ASCII names: a program in a directory whose
# name has a byte that is not UTF-8 (\xff) and a UTF-8 name (é), itself
# named in Cyrillic, with a function named größe.  Well-formed UTF-8 must
# come out as it is, the invalid byte as U+FFFD (btr_json_str).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)

need_qemu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d=$(printf '%s/d\xff\xc3\xa9' "$tmp")
mkdir -p "$d"
prog=$d/прог
cat >"$d/p.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static int größe(int x) { return x * 3 + 1; }
__attribute__((noinline)) static void zerbrechen(int *volatile *p) { **p = 1; }
int main(int argc, char **argv)
{
	int s = 0;
	for (int i = 0; i < 20000 * argc; i++)
		s += größe(i);
	printf("%d\n", s);
	int *volatile null = NULL;
	if (argc > 2)
		zerbrechen(&null);
	return 0;
}
C
gcc -g -O1 -o "$prog" "$d/p.c" || { bad "cannot compile"; finish cli_json_utf8; }
sed 's/\bvuln\b/vülñ/g' "$src/tests/progs/check_rop.c" >"$tmp/rop.c"
gcc -g -O1 -fno-inline -o "$d/rop" "$tmp/rop.c" || bad "cannot compile the rop program"

"$btr" record -o "$tmp/a.btr" -- "$prog" >/dev/null 2>&1
"$btr" record -o "$tmp/b.btr" -- "$prog" x >/dev/null 2>&1
"$btr" record -o "$tmp/c.btr" -- "$prog" x y >/dev/null 2>&1
"$btr" record -o "$tmp/r.btr" -- "$d/rop" >/dev/null 2>&1

# valid FILE WANT...: FILE is UTF-8 JSON; its strings hold every WANT
valid() {
	python3 - "$@" <<'PY'
import json, sys
raw = open(sys.argv[1], 'rb').read()
doc = json.loads(raw.decode('utf-8'))   # strict: invalid UTF-8 raises
text = json.dumps(doc, ensure_ascii=False)
missing = [w for w in sys.argv[2:] if w not in text]
if missing:
    print('missing', missing); sys.exit(1)
PY
}
FFFD=$(printf '\xef\xbf\xbd')
run() {  # run NAME WANTS -- COMMAND...
	local name=$1 wants=$2; shift 3
	"$@" >"$tmp/$name.json" 2>"$tmp/$name.err"
	local rc=$?
	if [ $rc -gt 1 ]; then bad "$name: exit $rc: $(head -1 "$tmp/$name.err")"; return; fi
	# shellcheck disable=SC2086
	if valid "$tmp/$name.json" $wants >"$tmp/$name.v"; then ok; else bad "$name: $(cat "$tmp/$name.v")"; fi
}
run report "größe прог $FFFD" -- "$btr" report --format json "$tmp/a.btr"
run callgraph "größe" -- "$btr" callgraph --format json "$tmp/a.btr"
run check "vülñ" -- "$btr" check --format json "$tmp/r.btr"
run crash "zerbrechen" -- "$btr" crash --format json "$tmp/c.btr"
run diff "прог" -- "$btr" diff --format json "$tmp/a.btr" "$tmp/b.btr"
run timeline "größe" -- "$btr" timeline --format json -o - "$tmp/a.btr"
base=$("$btr" report --format json "$tmp/a.btr" | python3 -c 'import json,sys; print(min(int(m["start"],16) for m in json.load(sys.stdin)["module_list"] if m["path"].endswith("прог")))' 2>/dev/null)
addr=$(nm "$prog" | awk '/größe/ {print $1}')
if [ -n "$base" ] && [ -n "$addr" ]; then
	run symbolize "größe $FFFD" -- "$btr" symbolize --format json --elf "$prog:$((base - 0x1000))" "0x$(printf '%x' $((base - 0x1000 + 0x$addr)))"
else
	bad "symbolize: no module base ($base) or symbol ($addr)"
fi

finish cli_json_utf8
