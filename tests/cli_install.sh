#!/usr/bin/env bash
# cli_install.sh - libbtr as a library others build on: `cmake --install`
# into a temporary prefix (what `make install PREFIX=...` runs), then
# - libbtr.so exports only the public API (btr_ names), every one in the
#   version node BTR_1.0 (objdump -T), the analyses' internal mux not;
# - libbtr.a defines no global but btr_ names (nm): a program may define
#   pb_free or stream_place and link it statically;
# - examples/count_branches.c builds against the prefix with pkg-config
#   only, shared and static (btr-static.pc: libbtr.a, its dependencies
#   shared, as docs/library.md says), runs, and counts the same branches and
#   instructions as `btr report`; the static one says lost data (exit 3);
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
# (names without their @@VERSION; the version node's own absolute symbol left out)
nm -D --defined-only "$p/lib/libbtr.so" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' >"$tmp/syms"
[ -s "$tmp/syms" ] && ok || bad "no exported symbols"
others=$(grep -v '^btr_[a-z0-9]' "$tmp/syms" | head -5 | tr '\n' ' ')
[ -z "$others" ] && ok || bad "exported besides btr_: $others"
grep -qx btr_version "$tmp/syms" && grep -qx btr_stream_open "$tmp/syms" && ok || bad "btr_version/btr_stream_open not exported"
mux=$(grep -c 'analysis_mux' "$tmp/syms")
check "the analyses' mux is internal ($mux exported)" [ "$mux" -eq 0 ]
# symbol versions: every defined export in BTR_1.0, and the node itself
objdump -T "$p/lib/libbtr.so" >"$tmp/dynsym" 2>&1
check "objdump -T names the version node BTR_1.0" grep -q ' BTR_1\.0 *BTR_1\.0$' "$tmp/dynsym"
unversioned=$(awk '$NF ~ /^btr_/ && $0 !~ / BTR_1\.0 / {print $NF}' "$tmp/dynsym" | head -5 | tr '\n' ' ')
check "every btr_ export is in BTR_1.0 (not: $unversioned)" [ -z "$unversioned" ]
nv=$(grep -c ' BTR_1\.0 *btr_' "$tmp/dynsym")
check "objdump -T lists the API in BTR_1.0 ($nv; nm -D: $(wc -l <"$tmp/syms"))" [ "$nv" -eq "$(wc -l <"$tmp/syms")" ]
# the static library: only btr_ names are global; the rest is local
nm -g --defined-only "$p/lib/libbtr.a" 2>/dev/null | awk 'NF == 3 {print $3}' >"$tmp/asyms"
check "libbtr.a defines global symbols" [ -s "$tmp/asyms" ]
others=$(grep -v '^btr_[a-z0-9]' "$tmp/asyms" | head -8 | tr '\n' ' ')
check "libbtr.a: no global besides btr_ ($(grep -vc '^btr_[a-z0-9]' "$tmp/asyms") others: $others)" [ -z "$others" ]
check "libbtr.a: the same API as libbtr.so" cmp -s <(sort -u "$tmp/asyms") <(sort -u "$tmp/syms")

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
# static, the documented way (docs/library.md): btr-static.pc links
# libbtr.a, its dependencies shared.  With names of its own that libbtr's
# internals use (they clashed once: "multiple definition of pb_free").
echo 'int pb_free, stream_place, check_write, prof_gzip, stream_file_exists;' >"$tmp/clash.c"
# shellcheck disable=SC2046
cc "${san[@]}" -o "$tmp/count_static" "$src/examples/count_branches.c" "$tmp/clash.c" \
	$(pkg-config --cflags --libs btr-static) 2>"$tmp/cc2.err" && ok ||
	bad "static build with pkg-config btr-static: $(head -3 "$tmp/cc2.err")"
check "pkg-config --libs btr-static links libbtr.a: $(pkg-config --libs btr-static)" \
	grep -q -- '-Wl,-Bstatic -lbtr -Wl,-Bdynamic' <(pkg-config --libs btr-static)
check "pkg-config --static --libs btr lists libbtr's dependencies: $(pkg-config --static --libs btr)" \
	grep -q -- '-lZydis .*-lzstd .*-ldw .*-lelf' <(pkg-config --static --libs btr)
ldd "$tmp/count" | grep -q "$p/lib/libbtr.so" && ok || bad "the program does not use the installed libbtr.so"
check "the static program needs no libbtr.so: $(ldd "$tmp/count_static" | grep libbtr)" \
	bash -c "! ldd '$tmp/count_static' | grep -q libbtr"

# A trace for the programs: recorded by the installed CLI with QEMU (its
# library and plugin come from the prefix), or, without a usable QEMU, by
# single-stepping (-b step, ptrace), which needs no plugin.
if command -v qemu-x86_64 >/dev/null && "$btr" info | grep -q '^qemu  yes'; then
	env -u BTR_QEMU_PLUGIN "$p/bin/btr" record -o "$tmp/t.btr" -- "$build/prog_flow_loops" >/dev/null 2>"$tmp/rec.err" &&
		ok || bad "installed btr record: $(head -1 "$tmp/rec.err")"
	used=$(ldd "$p/bin/btr" | awk '/libbtr.so/ {print $3}')
	[ -n "$used" ] && [ "$(readlink -f "$used")" = "$(readlink -f "$p/lib/libbtr.so")" ] && ok ||
		bad "installed btr uses '$used', not the prefix's libbtr.so"
elif "$btr" info | grep -q '^step  yes'; then
	note "no usable qemu: the installed CLI's recording is not checked; the trace is recorded with -b step"
	"$btr" record -q -b step -o "$tmp/t.btr" -- "$build/prog_flow_loops" >/dev/null 2>"$tmp/rec.err" &&
		ok || bad "btr record -b step: $(head -1 "$tmp/rec.err")"
else
	skip "neither qemu nor ptrace stepping works here: no trace for the example programs"
fi
want=$("$btr" report --format json "$tmp/t.btr" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["branches"], d["instructions"])')
check "btr report counts the trace: '$want'" [ -n "$want" ]
for prog in count count_static; do
	got=$("$tmp/$prog" "$tmp/t.btr" | sed -n 's/^btr [0-9.]*: \([0-9]*\) branches, \([0-9]*\) instructions$/\1 \2/p')
	[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "$prog counts '$got', btr report '$want'"
done
# one damaged chunk (a flipped byte mid-file): the static program counts
# what was read and says the loss (exit 3), as btr does
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0x10; open(sys.argv[2], "wb").write(b)' \
	"$tmp/t.btr" "$tmp/bad.btr"
"$tmp/count_static" "$tmp/bad.btr" >"$tmp/bad.out" 2>"$tmp/bad.err"; rc=$?
check "static program on a damaged trace exits 3 (got $rc)" [ "$rc" -eq 3 ]
check "static program says the loss: $(cat "$tmp/bad.err")" grep -q 'trace data was lost' "$tmp/bad.err"
got=$(sed -n 's/^btr [0-9.]*: \([0-9]*\) branches, .*/\1/p' "$tmp/bad.out")
check "static program prints its partial counts: $(cat "$tmp/bad.out")" [ -n "$got" ]
check "static program: fewer branches than the whole trace ($got of ${want% *})" [ "${got:-0}" -lt "${want% *}" ]
"$btr" report "$tmp/bad.btr" >/dev/null 2>&1; rc=$?
check "btr report on the damaged trace exits 3 (got $rc)" [ "$rc" -eq 3 ]

finish cli_install
