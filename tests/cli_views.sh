#!/usr/bin/env bash
# cli_views.sh - the views on a qemu recording of prog_flow_loops: btr cov
# (drcov parsed back against the published layout, lcov accepted by
# genhtml, Cobertura validated against coverage-04.dtd), annotate, cfg and
# diff.  Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prog=$build/prog_flow_loops

need_qemu
record_qemu "$tmp/a.btr" flow_loops "$prog" 1 || finish cli_views
"$btr" record -q -b qemu -o "$tmp/b.btr" -- "$prog" 2 >/dev/null 2>&1
check "second recording" [ -s "$tmp/b.btr" ]
classify=$(nm "$prog" | awk '$3=="classify"{print $1}')

# ---- usage and errors ----
for cmd in cov annotate cfg diff; do
	"$btr" $cmd --help >"$tmp/out" 2>&1; rc=$?
	check "$cmd --help exit 0" [ $rc -eq 0 ]
	check "$cmd --help usage" grep -q "^Usage: btr $cmd" "$tmp/out"
	"$btr" $cmd >/dev/null 2>&1; rc=$?
	check "$cmd without FILE is a usage error ($rc)" [ $rc -eq 2 ]
done
"$btr" cov --format xml -o "$tmp/x" "$tmp/a.btr" >/dev/null 2>&1; rc=$?
check "cov bad format: 2 ($rc)" [ $rc -eq 2 ]
"$btr" cov -o "$tmp/x" "$tmp/missing.btr" >/dev/null 2>"$tmp/err"; rc=$?
check "cov missing trace: 3 ($rc)" [ $rc -eq 3 ]
check "cov missing trace: one line naming it" [ "$(grep -c missing.btr "$tmp/err")" -eq 1 ]
check "cov missing trace: no output left" [ ! -e "$tmp/x" ]

# ---- drcov ----
"$btr" cov --format drcov -o "$tmp/a.drcov" "$tmp/a.btr"; rc=$?
check "cov drcov exit 0 ($rc)" [ $rc -eq 0 ]
python3 - "$tmp/a.drcov" "$classify" <<'PY' >"$tmp/drcov.txt" 2>&1
import sys, struct
data = open(sys.argv[1], 'rb').read()
pos = 0
def line():
    global pos
    e = data.index(b'\n', pos); s = data[pos:e].decode(); pos = e + 1; return s
assert line() == 'DRCOV VERSION: 2'
assert line().startswith('DRCOV FLAVOR: ')
h = line(); assert h.startswith('Module Table: version 2, count '), h
nmod = int(h.split('count ')[1])
assert line() == 'Columns: id, base, end, entry, checksum, timestamp, path'
mods = []
for i in range(nmod):
    f = [x.strip() for x in line().split(',', 6)]
    assert int(f[0]) == i
    mods.append((int(f[1], 16), int(f[2], 16), f[6]))
h = line(); assert h.startswith('BB Table: ') and h.endswith(' bbs'), h
nbb = int(h.split()[2])
rest = data[pos:]
assert len(rest) == nbb * 8, (len(rest), nbb)
prog = [i for i, m in enumerate(mods) if m[2].endswith('/prog_flow_loops')]
assert len(prog) == 1
starts = set()
for k in range(nbb):
    start, size, mid = struct.unpack_from('<IHH', rest, k * 8)
    assert mid < nmod and size > 0
    assert mods[mid][0] + start + size <= mods[mid][1], (hex(start), size, mods[mid])
    if mid == prog[0]:
        starts.add(start)
cl = int(sys.argv[2], 16)
assert cl in starts, 'classify entry block missing'
print('drcov ok', nmod, nbb, len(starts))
PY
check "drcov parses back against the layout: $(tail -1 "$tmp/drcov.txt")" grep -q '^drcov ok' "$tmp/drcov.txt"

# ---- lcov + genhtml ----
"$btr" cov --format lcov --module prog_flow_loops -o "$tmp/a.info" "$tmp/a.btr"; rc=$?
check "cov lcov exit 0 ($rc)" [ $rc -eq 0 ]
check "lcov: one source file" [ "$(grep -c '^SF:' "$tmp/a.info")" -eq 1 ]
check "lcov: SF is flow_loops.c" grep -q '^SF:.*tests/progs/flow_loops.c$' "$tmp/a.info"
# main runs once; classify 30 times per round, 6 rounds for input 1.
check "lcov: main entered once" grep -qx 'FNDA:1,main' "$tmp/a.info"
check "lcov: classify entered 180 times" grep -qx 'FNDA:180,classify' "$tmp/a.info"
check "lcov: fib ran" grep -qE '^FNDA:[1-9][0-9]*,fib$' "$tmp/a.info"
check "lcov: branch records" grep -q '^BRDA:' "$tmp/a.info"
check "lcov: end_of_record" grep -qx 'end_of_record' "$tmp/a.info"
if oracle genhtml "genhtml accepting the lcov file (Debian lcov)"; then
	genhtml --branch-coverage -q -o "$tmp/html" "$tmp/a.info" >"$tmp/gh.out" 2>&1; rc=$?
	check "genhtml accepts the lcov file ($rc: $(tail -1 "$tmp/gh.out"))" [ $rc -eq 0 ]
	check "genhtml wrote index.html" [ -s "$tmp/html/index.html" ]
fi

# ---- Cobertura ----
"$btr" cov --format cobertura --module prog_flow_loops -o "$tmp/a.xml" "$tmp/a.btr"; rc=$?
check "cov cobertura exit 0 ($rc)" [ $rc -eq 0 ]
if oracle xmllint "Cobertura validated against coverage-04.dtd (libxml2-utils)"; then
	xmllint --noout --nonet --dtdvalid "$src/tests/data/coverage-04.dtd" "$tmp/a.xml" 2>"$tmp/xl.err"; rc=$?
	check "Cobertura validates against coverage-04.dtd ($rc)" [ $rc -eq 0 ]
	# a broken document must fail the same validation (the check can fail)
	sed 's/ hits="[0-9]*"//' "$tmp/a.xml" >"$tmp/broken.xml"
	xmllint --noout --nonet --dtdvalid "$src/tests/data/coverage-04.dtd" "$tmp/broken.xml" 2>/dev/null; rc=$?
	check "a Cobertura file without hits does not validate" [ $rc -ne 0 ]
fi
# 180 = 6 rounds x 30 calls (flow_loops.c main, n = 1): classify's entry
# (line 18, its "{") and its switch (line 19) run 180 times; no line of it
# more often.  The method lists all of its lines with code (18-30).
check "cobertura: classify method with 180 hits" python3 -c '
import sys, xml.etree.ElementTree as ET
m = [m for m in ET.parse(sys.argv[1]).iter("method") if m.get("name") == "classify"]
assert len(m) == 1, m
lines = {int(l.get("number")): int(l.get("hits")) for l in m[0].iter("line")}
assert lines.get(18) == 180 and lines.get(19) == 180, lines
assert max(lines.values()) == 180 and min(lines) == 18 and max(lines) == 30, lines' "$tmp/a.xml"

. "$src/tests/views_more.sh"

finish cli_views
