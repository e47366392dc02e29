#!/usr/bin/env bash
# cli_dlclose.sh - module lifetimes (issue 21, item 2): code of a library
# that was dlclosed decodes against the module map that held while it
# ran.  tests/progs/qemu_dlclose.c runs dl_loop(20000) in a dlopened
# library, dlcloses it, maps another library (dl_other) at the very same
# addresses and runs dl_other(1000) there, then dlopens the first library
# again and runs dl_loop(500).  Both functions are assembly with known
# instruction counts (2 + 3n + 1), so the report's function totals are
# exact: dl_loop 60,003 + 1,503, dl_other 3,003, no gap, and the total
# equals the recorder's ground truth and the independent counter's
# (tests/tools/insn_count.c) of the same QEMU run.
# `btr check` finds nothing in it.  The same under -b step (module
# unloads from munmap).  Takes ~8 s.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

src=$(cd "$(dirname "$0")/.." && pwd)
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
[ -r "$build/btr-insn-count.so" ] || { echo "FAIL: btr-insn-count.so not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

prog=$build/prog_qemu_dlclose
libs="$build/libbtr_dl_loop.so $build/libbtr_dl_other.so"
# the recording with the independent counter in the same QEMU run
BTR_COUNT_PLUGIN=$build/btr-insn-count.so BTR_COUNT_OUT=$tmp/counts.txt BTR_QEMU=$src/tests/tools/qemu_count.sh \
  "$btr" record -q -o dl.btr --ground-truth dl.gt -- $prog $libs >rec.out 2>&1
rc=$?
check "record exit 0 (got $rc: $(head -c 300 rec.out))" [ $rc -eq 0 ]
"$btr" report --format json --top 50 dl.btr >dl.json 2>report.err
rc=$?; check "report exit 0 ($(head -c 200 report.err))" [ $rc -eq 0 ]

check "report: no gap, exact function totals, total = ground truth" python3 - dl.json dl.gt <<'PY'
import json, struct, sys
d = json.load(open(sys.argv[1]))
data = open(sys.argv[2], 'rb').read()
gt, off = 0, 0
while off < len(data):
    magic, tid, n = struct.unpack_from('<IIQ', data, off)
    assert magic == 0x54474254, hex(magic)
    gt += n
    off += 16 + 8 * n
assert d['gaps'] == 0, ('gaps', d['gaps'], d['gap_list'])
fn = {}
for f in d['top_functions']:
    fn[f['name']] = fn.get(f['name'], 0) + f['instructions']
assert fn.get('dl_loop') == 60003 + 1503, ('dl_loop', fn.get('dl_loop'))
assert fn.get('dl_other') == 3003, ('dl_other', fn.get('dl_other'))
assert d['instructions'] == gt, ('total', d['instructions'], 'ground truth', gt)
PY
check "report total = the independent counter's" python3 -c "
import json; d = json.load(open('dl.json'))
pids = set(p['pid'] for p in d['processes'])
n = sum(int(l.split()[2]) for l in open('counts.txt') if l.strip() and int(l.split()[0]) in pids)
assert n > 100000 and d['instructions'] == n, (d['instructions'], n, open('counts.txt').read())"

"$btr" check dl.btr >check.out 2>&1; rc=$?
check "check: exit 0, no finding (got $rc: $(head -c 400 check.out))" [ $rc -eq 0 ]
check "check: 0 findings" grep -q '^0 findings' check.out

# the same program under ptrace single-stepping (-b step): module records
# come from /proc/PID/maps, unloads from munmap; same exact totals (~6 s)
if "$btr" info | grep -Eq '^step +yes '; then
  "$btr" record -q -b step -o step.btr -- $prog $libs >srec.out 2>&1; rc=$?
  check "step: record exit 0 (got $rc: $(head -c 300 srec.out))" [ $rc -eq 0 ]
  "$btr" report --format json --top 50 step.btr >step.json 2>/dev/null
  check "step: no gap, dl_loop 61506 and dl_other 3003 instructions" python3 -c "
import json; d = json.load(open('step.json')); fn = {}
for f in d['top_functions']: fn[f['name']] = fn.get(f['name'], 0) + f['instructions']
assert d['gaps'] == 0 and fn.get('dl_loop') == 61506 and fn.get('dl_other') == 3003, (d['gaps'], fn.get('dl_loop'), fn.get('dl_other'))"
  "$btr" check step.btr >scheck.out 2>&1
  check "step: check 0 findings ($(head -c 300 scheck.out))" grep -q '^0 findings' scheck.out
else
  echo "note: step backend unusable here, its part skipped"
fi

finish cli_dlclose
