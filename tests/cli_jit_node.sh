#!/usr/bin/env bash
# cli_jit_node.sh - a JIT runtime (issue 23): `node --perf-basic-prof` on a
# hot JavaScript loop under the qemu recorder.  V8 compiles the loop's
# function into its code range (no file) and names it in its perf map;
# node also maps a copy of its embedded builtins out of its own file where
# the ELF headers do not place them.  The report decodes all of it: no
# gap, the total equal to the independent counter's (tests/tools/
# insn_count.c) of the same QEMU run, and the compiled function
# ("JS:*hotLoop ..." optimized, or "JS:^hotLoop ..." baseline when the
# optimizing compiler has not finished under load; named from the perf
# map) among the top five.
# Skipped without node (Debian's nodejs).  Takes ~30 s (node's start-up
# is 700 million instructions under QEMU).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

src=$(cd "$(dirname "$0")/.." && pwd)
need_qemu
oracle node "traces of node's generated code" || finish cli_jit_node
node=$(command -v node)
[ -r "$build/btr-insn-count.so" ] || { echo "FAIL: btr-insn-count.so not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
cat >hot.js <<'JS'
function hotLoop(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * 7) % 1000003;
  return s;
}
let t = 0;
for (let k = 0; k < 100; k++) t += hotLoop(20000);
console.log(t);
JS

BTR_COUNT_PLUGIN=$build/btr-insn-count.so BTR_COUNT_OUT=$tmp/counts.txt BTR_QEMU=$src/tests/tools/qemu_count.sh \
  "$btr" record -q -o node.btr -- "$node" --perf-basic-prof hot.js >rec.out 2>&1
rc=$?
check "record exit 0 (got $rc: $(head -c 300 rec.out))" [ $rc -eq 0 ]
check "node ran the loop" grep -qx 92580300 rec.out
"$btr" report --format json --top 5 node.btr >node.json 2>report.err
rc=$?; check "report exit 0 ($(head -c 200 report.err))" [ $rc -eq 0 ]
pid=$(python3 -c "import json; print(json.load(open('node.json'))['processes'][0]['pid'])" 2>/dev/null)
rm -f "/tmp/perf-$pid.map"
check "report: no gap, compiled JS hotLoop among the top five, total = the independent counter's" python3 - node.json counts.txt <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['gaps'] == 0, ('gaps', d['gaps'], d['gap_list'][:5])
names = [f['name'] for f in d['top_functions']]
assert any(n.startswith(('JS:*hotLoop', 'JS:^hotLoop', 'JS:+hotLoop')) for n in names), names
pids = set(p['pid'] for p in d['processes'])
n = sum(int(l.split()[2]) for l in open(sys.argv[2]) if l.strip() and int(l.split()[0]) in pids)
assert d['instructions'] == n, ('total', d['instructions'], 'counter', n)
PY

# A benign program: no finding.  Before, 4: an indirect call into node's
# copy of its builtins at 0x7f... judged against the file's link addresses
# (call-non-entry), and V8's on-stack replacement entering JIT code through
# return addresses it writes (return-hijack).
if grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  # node's start alone is 1.7e8 branches: two checks of it and a second
  # recording take over 10 minutes under ASan (cli_check covers the check
  # code there on smaller programs)
  note "sanitizer build: the check part is skipped"
  finish cli_jit_node
fi
"$btr" check node.btr >check.txt 2>check.err; rc=$?
check "check: no finding in node (exit $rc): $(head -c 600 check.txt) $(head -c 200 check.err)" [ $rc -eq 0 ]
# Without the perf map, V8's code is unnamed: node is a known JIT engine, so
# it is allowed (206 unbacked-code and return-hijack findings before).
"$btr" record -q -o plain.btr -- "$node" hot.js >plain.out 2>&1
"$btr" check plain.btr >plain.txt 2>&1; rc=$?
check "check: node without a perf map: no finding, its JIT code allowed (exit $rc): $(head -c 400 plain.txt)" \
  bash -c "[ $rc -eq 0 ] && grep -Eq '^0 findings; [1-9].*, [1-9][0-9]* allowed$' plain.txt"

finish cli_jit_node
