#!/usr/bin/env bash
# cli_qemu_select.sh - btr records out of the box when the first
# qemu-x86_64 on PATH cannot load plugins (Debian 13's qemu-user is a
# static build; Debian 12's qemu-user-static stands in for it): `btr info`
# names the rejected one and the one used, `btr record` works with the
# next candidate and its trace decodes to exactly the instructions an
# independent counter (tests/tools/insn_count.c) counts.  An explicit
# BTR_QEMU that cannot load plugins is one clear error, exit 3.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

need_qemu
oracle qemu-x86_64-static "a plugin-less qemu-x86_64 first on PATH (scripts/deps.sh installs qemu-user-static)" ||
	finish cli_qemu_select
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
ln -s "$(command -v qemu-x86_64-static)" "$tmp/bin/qemu-x86_64"
P=$tmp/bin:$PATH

PATH=$P "$btr" info >"$tmp/info.txt" 2>&1
check "info: the qemu backend is usable" grep -q '^qemu  yes ' "$tmp/info.txt"
check "info: the static one on PATH is rejected, with the reason" \
	grep -qF "rejected $tmp/bin/qemu-x86_64 (PATH, QEMU " "$tmp/info.txt"
check "info: ... because it is a static build" \
	grep -q "rejected $tmp/bin/qemu-x86_64 .*: cannot load TCG plugins (static build)" "$tmp/info.txt"
used=$(sed -n 's/^      uses \([^ ]*\) .*/\1/p' "$tmp/info.txt")
check "info: names the one it uses" [ -n "$used" ]
check "info: uses another than the static one ($used)" [ "$used" != "$tmp/bin/qemu-x86_64" ]
PATH=$P "$btr" info --format json >"$tmp/info.json"
check "info json: candidates, the first rejected, the last used" python3 - "$tmp/info.json" "$tmp/bin/qemu-x86_64" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["qemu"]
c = q["candidates"]
assert q["usable"] and len(c) >= 2, c
assert c[0]["path"] == sys.argv[2] and not c[0]["usable"] and "static build" in c[0]["why"], c[0]
assert c[-1]["usable"] and c[-1]["why"] == "" and c[-1]["version"], c[-1]
PY

# record: works, and decodes to exactly the counter's count (a program
# without libc: ld.so's count varies from one run to the next, and the
# counter runs apart from the recording here)
prog=$build/prog_nolibc_step
PATH=$P "$btr" record -q -o "$tmp/t.btr" -- "$prog" >/dev/null 2>"$tmp/rec.err"
check "record with the static qemu first on PATH: $(head -1 "$tmp/rec.err")" [ -s "$tmp/t.btr" ]
PATH=$P "$used" -plugin "$build/btr-insn-count.so,out=$tmp/count.txt" "$prog" >/dev/null
want=$(awk '{s += $3} END {print s}' "$tmp/count.txt")
"$btr" report --format json "$tmp/t.btr" >"$tmp/t.json" 2>"$tmp/rep.err"
got=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["instructions"])' "$tmp/t.json")
check "the counter counted" [ -n "$want" ]
check "decoded instructions $got = counter's $want" [ "$got" = "$want" ]

# an explicit BTR_QEMU is used alone: no silent fallback
BTR_QEMU=$tmp/bin/qemu-x86_64 "$btr" record -q -o "$tmp/x.btr" -- "$prog" >/dev/null 2>"$tmp/x.err"
rc=$?
check "BTR_QEMU=static: exit 3 (got $rc)" [ "$rc" -eq 3 ]
check "BTR_QEMU=static: one line naming it and why" \
	grep -q "^btr: .*$tmp/bin/qemu-x86_64 cannot load TCG plugins (static build)" "$tmp/x.err"
check "BTR_QEMU=static: no output file" [ ! -e "$tmp/x.btr" ]

finish cli_qemu_select
