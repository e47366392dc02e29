#!/usr/bin/env bash
# cli_jit_luajit.sh - another JIT runtime (issue 23): LuaJIT compiles a hot
# Lua loop into machine code in an anonymous mapping (no file, and
# Debian's LuaJIT writes no perf map); its `if` makes a side trace, which
# LuaJIT links by patching the parent trace's exit jump.  The qemu recorder keeps the bytes
# of that code, so the report decodes all of it: no gap, the total equal
# to the independent counter's (tests/tools/insn_count.c) of the same QEMU
# run, and the compiled trace's code - outside every module - holds a
# large share of the instructions; `btr check` allows that code (a known
# JIT engine's).  Skipped without luajit (Debian's
# luajit; scripts/deps.sh installs it).  Takes ~5 s.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

src=$(cd "$(dirname "$0")/.." && pwd)
need_qemu
oracle luajit "traces of LuaJIT's generated code" || finish cli_jit_luajit
luajit=$(command -v luajit)
[ -r "$build/btr-insn-count.so" ] || { echo "FAIL: btr-insn-count.so not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

BTR_COUNT_PLUGIN=$build/btr-insn-count.so BTR_COUNT_OUT=$tmp/counts.txt BTR_QEMU=$src/tests/tools/qemu_count.sh \
  "$btr" record -q -o lj.btr -- "$luajit" -e 'local s = 0 for i = 1, 2000000 do if i % 3 == 0 then s = s + (i % 7) * 3 else s = s - 1 end end print(s)' \
  >rec.out 2>&1
rc=$?
check "record exit 0 (got $rc: $(head -c 300 rec.out))" [ $rc -eq 0 ]
check "luajit ran the loop" grep -qx 4666660 rec.out
"$btr" report --format json --top 5 lj.btr >lj.json 2>report.err
rc=$?; check "report exit 0 ($(head -c 200 report.err))" [ $rc -eq 0 ]
check "report: no gap, total = the independent counter's, the JIT code a quarter or more" python3 - lj.json counts.txt <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d['gaps'] == 0, ('gaps', d['gaps'], d['gap_list'][:5])
pids = set(p['pid'] for p in d['processes'])
n = sum(int(l.split()[2]) for l in open(sys.argv[2]) if l.strip() and int(l.split()[0]) in pids)
assert d['instructions'] == n, ('total', d['instructions'], 'counter', n)
jit = sum(f['instructions'] for f in d['top_functions'] if not f.get('module'))
assert jit * 4 >= d['instructions'], ('jit share', jit, d['instructions'], d['top_functions'])
PY
# btr check: the JIT code Debian's luajit (LuaJIT linked into the program,
# no libluajit-5.1.so) enters is allowed as a known engine's (unbacked-code
# findings before), and LuaJIT patching a trace's exit jump to lead to the
# side trace the `if` makes is no code-modified (the check compared the
# jump with the trace's first version)
"$btr" check lj.btr >check.txt 2>&1; rc=$?
check "check: exit 0 (got $rc: $(head -3 check.txt))" [ $rc -eq 0 ]
check "check: 0 findings, LuaJIT's code allowed" grep -Eq '^0 findings; [1-9].*, [1-9][0-9]* allowed$' check.txt
finish cli_jit_luajit
