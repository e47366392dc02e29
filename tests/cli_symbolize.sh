#!/usr/bin/env bash
# cli_symbolize.sh BTR BUILD_DIR SHARED_DIR - `btr symbolize` end to end.
# Addresses come from the running prog_symbols (--addrs), line numbers from
# the LINE: markers in its source, so nothing here trusts btr's ELF reader.
set -u
. "$(dirname "$0")/lib.sh"
BTR=$1
B=$2
SRC=$(cd "$(dirname "$0")" && pwd)/progs/symbols.c
PROG=$B/prog_symbols
[ -x "$PROG" ] || skip "prog_symbols not built"
# (each `COND && ok TEXT || bad TEXT` below counts COND: ok always returns 0)

facts=$("$PROG" --addrs) || { bad "prog_symbols --addrs"; finish cli_symbolize; }
base=$(awk '$1=="base"{print $2}' <<<"$facts")
beta=$(awk '$1=="func" && $2=="sym_beta"{print $3}' <<<"$facts")
loop=$(awk '$1=="func" && $2=="sym_loop"{print $3}' <<<"$facts")
ra=$(awk '$1=="ra" && $2=="sym_beta"{print $3}' <<<"$facts")
ra1=$(printf '0x%x' $((ra - 1)))
call_line=$(grep -n 'LINE:sym_beta_call ' "$SRC" | cut -d: -f1)

# text: "0xADDR name+0xoff file:line"
out=$("$BTR" symbolize --elf "$PROG:$base" "$beta" "$loop" "$ra1")
rc=$?
[ $rc -eq 0 ] && ok "exit 0" || bad "exit $rc"
line1=$(sed -n 1p <<<"$out")
[[ $line1 == "$(printf '0x%x' $((beta))) sym_beta "*symbols.c:* ]] && ok "$line1" || bad "line 1: $line1"
line2=$(sed -n 2p <<<"$out")
[[ $line2 == "$(printf '0x%x' $((loop))) sym_loop "*symbols.c:* ]] && ok "$line2" || bad "line 2: $line2"
line3=$(sed -n 3p <<<"$out")
off=$(printf '0x%x' $((ra - 1 - beta)))
[[ $line3 == "$ra1 sym_beta+$off "*"/tests/progs/symbols.c:$call_line" ]] && ok "$line3" ||
	bad "line 3: '$line3' (want sym_beta+$off ...:$call_line)"

# addresses on stdin, basenames
out=$(printf '%s\n\n  %s\n' "$beta" "$ra1" | "$BTR" symbolize -s --elf "$PROG:$base")
[ "$(wc -l <<<"$out")" -eq 2 ] && ok "stdin: 2 lines" || bad "stdin: $out"
[[ $(sed -n 2p <<<"$out") == *" symbols.c:$call_line" ]] && ok "basenames" || bad "basenames: $out"

# json
out=$("$BTR" symbolize --format json --elf "$PROG:$base" "$ra1" 0x10)
if oracle python3 "symbolize --format json parsed"; then
	python3 - "$out" "$call_line" <<'EOF' && ok "json" || bad "json: $out"
import json, sys
d = json.loads(sys.argv[1])
assert len(d) == 2, d
assert d[0]["symbol"].startswith("sym_beta+0x"), d
assert d[0]["file"].endswith("symbols.c") and d[0]["line"] == int(sys.argv[2]), d
assert d[1] == {"addr": "0x10", "symbol": "0x10", "file": None, "line": 0}, d
EOF
fi

# unknown address: itself and ??:0
out=$("$BTR" symbolize --elf "$PROG:$base" 0x10)
[ "$out" = "0x10 0x10 ??:0" ] && ok "unknown address" || bad "unknown: $out"

# --debug-dir: a stripped copy, its symbols and DWARF in DIR/.build-id/
hex=$(readelf -n "$PROG" 2>/dev/null | awk '/Build ID/{print $3}')
loc=$(awk '$1=="func" && $2=="sym_local"{print $3}' <<<"$facts")
tmp=$(mktemp -d)
if [ -n "$hex" ] && mkdir -p "$tmp/.build-id/${hex:0:2}" &&
	objcopy --only-keep-debug "$PROG" "$tmp/.build-id/${hex:0:2}/${hex:2}.debug" 2>/dev/null &&
	strip --strip-all -o "$tmp/stripped" "$PROG" 2>/dev/null; then
	out=$("$BTR" symbolize --elf "$tmp/stripped:$base" "$loc")
	[[ $out != *sym_local* ]] && ok "stripped: $out" || bad "stripped has sym_local: $out"
	out=$("$BTR" symbolize -d "$tmp" --elf "$tmp/stripped:$base" "$loc")
	[[ $out == "$(printf '0x%x' $((loc))) sym_local "*symbols.c:* ]] && ok "debug dir: $out" ||
		bad "debug dir: $out"
fi
rm -rf "$tmp"

# errors: missing file -> 3 and one line naming it; bad address -> 2
err=$("$BTR" symbolize --elf "$B/no-such-file" 0x10 2>&1 >/dev/null)
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <<<"$err")" -eq 1 ] && [[ $err == *no-such-file* ]] && ok "missing file: $err" ||
	bad "missing file: rc=$rc '$err'"
err=$("$BTR" symbolize --elf "$SRC" 0x10 2>&1 >/dev/null)
rc=$?
[ $rc -eq 3 ] && [[ $err == *symbols.c* ]] && ok "not ELF: $err" || bad "not ELF: rc=$rc '$err'"
"$BTR" symbolize --elf "$PROG" 0xzz >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "bad address -> 2" || bad "bad address: rc=$rc"
"$BTR" symbolize --elf "$PROG:0xqq" 0x10 >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "bad base -> 2" || bad "bad base: rc=$rc"
"$BTR" symbolize 0x10 >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "no --elf -> 2" || bad "no --elf: rc=$rc"
printf 'nonsense\n' | "$BTR" symbolize --elf "$PROG" >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] && ok "bad stdin address -> 2" || bad "bad stdin: rc=$rc"
"$BTR" symbolize --help | grep -q '^Usage: btr symbolize' && ok "--help" || bad "--help"

finish cli_symbolize
