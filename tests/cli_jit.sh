#!/usr/bin/env bash
# cli_jit.sh - code without a file (issue 23).  tests/progs/jit_rewrite.c
# writes a function into an anonymous executable mapping, runs it 200
# times, rewrites it in place with another function (other bytes, other
# instruction boundaries at the same addresses), runs that 200 times,
# writes the first version back and runs it 200 times more.  The QEMU
# recorder keeps each version's bytes (CODE records, the repeat of the
# first version by reference only), so the report decodes every
# instruction: no gap, the code's total exactly 2 * 200 * 1503 +
# 200 * 2003, and the whole total equal to the recorder's ground truth
# and to the independent counter's (tests/tools/insn_count.c) of the same
# QEMU run.  The program's perf map names the code jit_loop, which every
# view shows (report, script, flame, cov, cfg) and `btr check` takes for
# legitimate JIT code.  The same program run again writes a jitdump file
# instead (./jit-PID.dump, mapped executable as the specification says):
# the recorder reads it at the end, and the report names the code
# jit_dumped with the same exact count.  Takes ~5 s.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

src=$(cd "$(dirname "$0")/.." && pwd)
need_qemu
[ -r "$build/btr-insn-count.so" ] || { echo "FAIL: btr-insn-count.so not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

BTR_COUNT_PLUGIN=$build/btr-insn-count.so BTR_COUNT_OUT=$tmp/counts.txt BTR_QEMU=$src/tests/tools/qemu_count.sh \
  "$btr" record -q -o jit.btr --ground-truth jit.gt -- "$build/prog_jit_rewrite" >rec.out 2>&1
rc=$?
check "record exit 0 (got $rc: $(head -c 300 rec.out))" [ $rc -eq 0 ]
"$btr" trace dump jit.btr >dump.txt 2>&1
check "trace: code records, the first version's second run only by reference" python3 - dump.txt <<'PY'
import sys
code = [l.split() for l in open(sys.argv[1]) if l.startswith('code ')]
assert len(code) >= 3, code
whole = [c for c in code if 'size=11' in c or 'size=17' in c]
assert [c[3] for c in whole] == ['size=11', 'size=17', 'size=11'], whole
assert 'repeat' not in whole[0] and 'repeat' not in whole[1] and 'repeat' in whole[2], whole
PY
"$btr" report --format json --top 50 jit.btr >jit.json 2>report.err
rc=$?; check "report exit 0 ($(head -c 200 report.err))" [ $rc -eq 0 ]
check "report: no gap, the JIT code's exact total, total = ground truth" python3 - jit.json jit.gt <<'PY'
import json, struct, sys
d = json.load(open(sys.argv[1]))
data = open(sys.argv[2], 'rb').read()
gt, off = 0, 0
while off < len(data):
    magic, tid, n = struct.unpack_from('<IIQ', data, off)
    gt += n
    off += 16 + 8 * n
assert d['gaps'] == 0, ('gaps', d['gaps'], d['gap_list'][:5])
top = d['top_functions'][0]
assert top['name'] == 'jit_loop' and top['instructions'] == 2 * 200 * 1503 + 200 * 2003, top
assert d['instructions'] == gt, ('total', d['instructions'], 'ground truth', gt)
PY
check "report total = the independent counter's" python3 -c "
import json; d = json.load(open('jit.json'))
pids = set(p['pid'] for p in d['processes'])
n = sum(int(l.split()[2]) for l in open('counts.txt') if l.strip() and int(l.split()[0]) in pids)
assert n > 1000000 and d['instructions'] == n, (d['instructions'], n)"

pid=$(python3 -c "import json; print(json.load(open('jit.json'))['processes'][0]['pid'])")
rm -f "/tmp/perf-$pid.map"   # the program's perf map, read by the recorder

"$btr" script jit.btr >script.txt 2>&1
check "script: the call into the JIT code names it" grep -q -- '-> jit_loop call_ind' script.txt
"$btr" flame jit.btr -o flame.txt >/dev/null 2>&1
check "flame: main;run;jit_loop with its instructions" grep -q ';main;run;jit_loop 1001800$' flame.txt
"$btr" cov jit.btr -o cov.txt >/dev/null 2>&1
check "cov: the JIT code is a module of the drcov table" grep -q ", perf-$pid.map\$" cov.txt
"$btr" cfg jit.btr --function jit_loop -o cfg.dot >cfg.out 2>&1
check "cfg: a graph of jit_loop ($(head -c 200 cfg.out))" grep -q 'jit_loop' cfg.dot
"$btr" check jit.btr >check.out 2>&1; rc=$?
check "check: exit 0, no finding (got $rc: $(head -c 300 check.out))" [ $rc -eq 0 ]

# the jitdump instead of the perf map
"$btr" record -q -o jd.btr -- "$build/prog_jit_rewrite" 200 500 jitdump >jrec.out 2>&1
rc=$?
check "jitdump: record exit 0 (got $rc: $(head -c 300 jrec.out))" [ $rc -eq 0 ]
"$btr" trace dump jd.btr >jdump.txt 2>&1
check "jitdump: three symbol records from the dump" [ "$(grep -c '^symbol .* source=jitdump name="jit_dumped"' jdump.txt)" -eq 3 ]
"$btr" report --format json --top 5 jd.btr >jd.json 2>jd.err
check "jitdump: report without warnings ($(head -c 200 jd.err))" [ ! -s jd.err ]
check "jitdump: no gap, jit_dumped with the code's exact total" python3 -c "
import json; d = json.load(open('jd.json')); top = d['top_functions'][0]
assert d['gaps'] == 0 and top['name'] == 'jit_dumped' and top['instructions'] == 1001800, (d['gaps'], top)"
"$btr" check jd.btr >jcheck.out 2>&1
check "jitdump: check 0 findings ($(head -c 300 jcheck.out))" grep -q '^0 findings' jcheck.out

finish cli_jit
