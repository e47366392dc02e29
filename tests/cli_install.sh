#!/usr/bin/env bash
# cli_install.sh - libbtr as a library others build on: `cmake --install`
# into a temporary prefix (what `make install PREFIX=...` runs), then
# - libbtr.so exports only the public API (btr_ names);
# - examples/count_branches.c builds against the prefix with pkg-config
#   only, shared and static, runs, and counts the same branches and
#   instructions as `btr report`;
# - the installed CLI finds its libbtr.so and its QEMU plugin in the prefix.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=$tmp/prefix
cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1 || { bad "cmake --install: $(tail -1 "$tmp/install.log")"; }
for f in bin/btr lib/libbtr.so lib/libbtr.a lib/btr/btr-qemu.so lib/btr/btr-step-agent.so lib/pkgconfig/btr.pc \
	 include/btr/btr.h include/btr/version.h share/doc/btr/cli.md; do
	[ -e "$p/$f" ] && ok || bad "not installed: $f"
done
lib=$(readlink -f "$p/lib/libbtr.so")
case "$lib" in *libbtr.so.[0-9]*) ok ;; *) bad "libbtr.so is not a link to libbtr.so.MAJOR...: $lib" ;; esac
nm -D --defined-only "$p/lib/libbtr.so" | awk '{print $3}' >"$tmp/syms"
[ -s "$tmp/syms" ] && ok || bad "no exported symbols"
others=$(grep -v '^btr_[a-z0-9]' "$tmp/syms" | head -5 | tr '\n' ' ')
[ -z "$others" ] && ok || bad "exported besides btr_: $others"
grep -qx btr_version "$tmp/syms" && grep -qx btr_stream_open "$tmp/syms" && ok || bad "btr_version/btr_stream_open not exported"

export PKG_CONFIG_PATH=$p/lib/pkgconfig
# An AddressSanitizer build (make asan) installs an instrumented library:
# its clients are built with the same sanitizers.
san=()
grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null && san=(-fsanitize=address,undefined)
ver=$(pkg-config --modversion btr)
hdr=$(sed -n 's/^#define BTR_VERSION_STRING "\(.*\)"/\1/p' "$src/include/btr/version.h")
[ -n "$ver" ] && [ "$ver" = "$hdr" ] && ok || bad "pkg-config version '$ver' != header '$hdr'"
# shellcheck disable=SC2046
cc "${san[@]}" -o "$tmp/count" "$src/examples/count_branches.c" $(pkg-config --cflags --libs btr) -Wl,-rpath,"$p/lib" \
	2>"$tmp/cc.err" && ok || bad "build with pkg-config: $(head -3 "$tmp/cc.err")"
# static: libbtr.a and its private dependencies from pkg-config --static
# shellcheck disable=SC2046
cc "${san[@]}" -o "$tmp/count_static" "$src/examples/count_branches.c" $(pkg-config --cflags btr) "$p/lib/libbtr.a" \
	$(pkg-config --static --libs btr | sed 's/-lbtr\b//') 2>"$tmp/cc2.err" && ok ||
	bad "static build with pkg-config --static: $(head -3 "$tmp/cc2.err")"
ldd "$tmp/count" | grep -q "$p/lib/libbtr.so" && ok || bad "the program does not use the installed libbtr.so"

if command -v qemu-x86_64 >/dev/null && "$btr" info | grep -q '^qemu  yes'; then
	# the installed CLI alone: its library and plugin come from the prefix
	env -u BTR_QEMU_PLUGIN "$p/bin/btr" record -o "$tmp/t.btr" -- "$build/prog_flow_loops" >/dev/null 2>"$tmp/rec.err" &&
		ok || bad "installed btr record: $(head -1 "$tmp/rec.err")"
	used=$(ldd "$p/bin/btr" | awk '/libbtr.so/ {print $3}')
	[ -n "$used" ] && [ "$(readlink -f "$used")" = "$(readlink -f "$p/lib/libbtr.so")" ] && ok ||
		bad "installed btr uses '$used', not the prefix's libbtr.so"
	want=$("$btr" report --format json "$tmp/t.btr" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["branches"], d["instructions"])')
	for prog in count count_static; do
		got=$("$tmp/$prog" "$tmp/t.btr" | sed -n 's/^btr [0-9.]*: \([0-9]*\) branches, \([0-9]*\) instructions$/\1 \2/p')
		[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "$prog counts '$got', btr report '$want'"
	done
else
	echo "note: no usable qemu: the installed CLI and the example's counts are not checked"
fi

finish cli_install
