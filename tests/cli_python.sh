#!/usr/bin/env bash
# cli_python.sh - the Python package btr (python/btr, docs/python.md) from an
# installed prefix only (`cmake --install` into a temporary prefix, what `make
# install PREFIX=...` runs), with Debian's python3 and its numpy, pandas, dask:
# - `import btr` comes from the prefix and loads the prefix's libbtr.so.0;
# - the branch batches equal `btr script`'s lines on a recorded trace, and
#   pandas.DataFrame(batch) has their columns; processes and threads as `btr
#   report` lists them; symbolize as `btr script` names the addresses;
# - flame (folded) and callgraph equal the CLI's output byte for byte, blocks
#   and the branch counts by kind equal `btr report`'s figures;
# - btr.dask: the fleet profile of three traces and the per-thread sharded
#   decode on a distributed.LocalCluster (2 workers) equal the in-process
#   results, which equal the whole-trace results; by="segment" cuts a trace
#   of one thread into 2 and 3 shards (each with branches of it) whose
#   merged sums equal the whole trace's.
# Args: $1 btr binary, $2 build dir, $3 shared dir.  About 24 s in Debug on a
# busy machine, 14 s of which the LocalCluster (worker processes start and stop).
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3   # Debian's: python3-numpy, -pandas, -dask, -distributed (scripts/deps.sh)

need_qemu
for m in numpy pandas dask distributed; do
	if ! "$py" -c "import $m" 2>/dev/null; then
		if [ "${BTR_REQUIRE_ORACLES:-0}" = 1 ] && [ "${BTR_ALLOW_MISSING_ORACLES:-0}" != 1 ]; then
			bad "python3-$m missing (scripts/deps.sh installs it)"
		else
			skip "python3-$m not installed"
		fi
	fi
done
[ "$fail" -eq 0 ] || finish cli_python

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=$tmp/prefix
cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1 || bad "cmake --install: $(tail -1 "$tmp/install.log")"
pkg=$p/lib/python3/dist-packages
# the numpy dtypes of the binding against the C structs, field by field:
# offsetof and sizeof from the public headers, compiled here
if oracle cc "the binding's dtypes against the C structs' offsetof"; then
	cat >"$tmp/layout.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include "btr/branch.h"
#include "btr/blocks.h"
#define F(s, f, n) printf(#s " " n " %zu %zu\n", offsetof(struct s, f), sizeof(((struct s *)0)->f))
int main(void)
{
	F(btr_branch, from, "from"); F(btr_branch, to, "to"); F(btr_branch, tsc, "tsc");
	F(btr_branch, insns, "insns"); F(btr_branch, tid, "tid"); F(btr_branch, cycles, "cycles");
	F(btr_branch, flags, "flags"); F(btr_branch, kind, "kind"); F(btr_branch, pid, "pid");
	F(btr_block, module, "module"); F(btr_block, start, "start"); F(btr_block, end, "end");
	F(btr_block, count, "count"); F(btr_block, insns, "insns");
	F(btr_edge, from_module, "from_module"); F(btr_edge, to_module, "to_module"); F(btr_edge, from, "from");
	F(btr_edge, to, "to"); F(btr_edge, count, "count"); F(btr_edge, kind, "kind"); F(btr_edge, taken, "taken");
	printf("btr_branch . 0 %zu\nbtr_block . 0 %zu\nbtr_edge . 0 %zu\n", sizeof(struct btr_branch),
	       sizeof(struct btr_block), sizeof(struct btr_edge));
	return 0;
}
C
	cc -I "$src/include" -o "$tmp/layout" "$tmp/layout.c" && "$tmp/layout" >"$tmp/layout.txt"
	check "layout of the C structs printed" [ -s "$tmp/layout.txt" ]
	san=()   # an AddressSanitizer build's library: its runtimes first (as below)
	grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null &&
		san=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
		     ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
	env "${san[@]}" PYTHONPATH=$pkg "$py" - "$tmp/layout.txt" >"$tmp/layout.out" 2>&1 <<'PY'
import sys
from btr import _lib
dt = {"btr_branch": _lib.BRANCH_DTYPE, "btr_block": _lib.BLOCK_DTYPE, "btr_edge": _lib.EDGE_DTYPE}
seen = set()
for line in open(sys.argv[1]):
    s, f, off, size = line.split()
    d = dt[s]
    if f == ".":
        print(("ok" if d.itemsize == int(size) else "bad") + " %s: itemsize %d, sizeof %s" % (s, d.itemsize, size))
        continue
    seen.add((s, f))
    got = d.fields.get(f)
    good = got is not None and got[1] == int(off) and got[0].itemsize == int(size)
    print(("ok" if good else "bad") + " %s.%s: dtype %s, C offset %s size %s" %
          (s, f, got and (got[1], got[0].itemsize), off, size))
for s, d in dt.items():
    for f in d.names:
        if f != "reserved" and (s, f) not in seen:
            print("bad %s.%s: a dtype field the C struct does not have" % (s, f))
PY
	while read -r st msg; do if [ "$st" = ok ]; then ok; else bad "$msg"; fi; done <"$tmp/layout.out"
	check "dtypes: all 24 fields and sizes compared" [ "$(grep -c '^ok' "$tmp/layout.out")" -eq 24 ]
fi
check "installed: btr/__init__.py, _lib.py, dask.py, _install.py" \
	test -f "$pkg/btr/__init__.py" -a -f "$pkg/btr/_lib.py" -a -f "$pkg/btr/dask.py" -a -f "$pkg/btr/_install.py"

# the prefix only: no source tree, no build tree, no BTR_LIBRARY.  An
# AddressSanitizer build (make asan) installs an instrumented library: python
# then starts with the sanitizer runtimes preloaded (and leak checks off: the
# interpreter keeps its own objects until exit).
pyenv=(env -u BTR_LIBRARY PYTHONPATH="$pkg")
if grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	pyenv+=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
		ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
fi
run() { (cd "$tmp" && "${pyenv[@]}" "$py" -s "$@"); }

where=$(run -c 'import btr, btr._lib as l, os; print(os.path.realpath(btr.__file__)); print(os.path.realpath(l.LIBRARY_PATH)); print(btr.version)')
check "btr imported from the prefix: $(echo "$where" | head -1)" test "$(echo "$where" | sed -n 1p)" = "$(realpath "$pkg")/btr/__init__.py"
check "libbtr loaded from the prefix: $(echo "$where" | sed -n 2p)" \
	test "$(echo "$where" | sed -n 2p)" = "$(realpath "$p/lib/libbtr.so.0")"
hdr=$(sed -n 's/^#define BTR_VERSION_STRING "\(.*\)"/\1/p' "$src/include/btr/version.h")
check "btr.version '$(echo "$where" | sed -n 3p)' = '$hdr'" test "$(echo "$where" | sed -n 3p)" = "$hdr"

# recorded traces: three threads; recursive calls (fib 12 and 14)
"$btr" record -o "$tmp/thr.btr" -- "$build/prog_flow_threads" >/dev/null 2>"$tmp/rec.err" || bad "record: $(tail -1 "$tmp/rec.err")"
# (prog_prof_fib exits 1 unless N is 10: the recording, not its exit status, counts)
"$btr" record -o "$tmp/fib12.btr" -- "$build/prog_prof_fib" 12 >/dev/null 2>>"$tmp/rec.err"
check "record fib 12" test -s "$tmp/fib12.btr"
"$btr" record -o "$tmp/fib14.btr" -- "$build/prog_prof_fib" 14 >/dev/null 2>>"$tmp/rec.err"
check "record fib 14" test -s "$tmp/fib14.btr"
t=$tmp/thr.btr

# branch batches == btr script (exact), in small batches so that records split
"$btr" script -F tid,time,addr,kind,insns,flags,sym "$t" >"$tmp/script.txt" 2>"$tmp/script.err" || bad "btr script"
check "btr script printed branches" test "$(grep -c ' -> ' "$tmp/script.txt")" -gt 10000
grep -v '^\[gap' "$tmp/script.txt" >"$tmp/script.br"
check "python batches == btr script" run - "$t" "$tmp/script.br" <<'PY'
import sys
import numpy as np, pandas as pd
import btr
t = btr.open(sys.argv[1])
batches = list(t.branches(batch=1000))
assert all(b.dtype == btr.BRANCH_DTYPE for b in batches) and btr.BRANCH_DTYPE.itemsize == 48
assert max(len(b) for b in batches) == 1000 and len(batches) > 10, [len(b) for b in batches][:5]
a = np.concatenate(batches)
df = pd.DataFrame(a)
assert list(df.columns) == list(btr.BRANCH_DTYPE.names) and len(df) == len(a)
lines = open(sys.argv[2]).read().splitlines()
assert len(lines) == len(a), (len(lines), len(a))
want = [l.split()[:9] for l in lines]
for i, (w, b) in enumerate(zip(want, a)):
    tid, time, frm, arrow, to, kind, insns, flags = w[:8]
    fl = flags.split(",")
    got = ("%d/%d" % (b["pid"], b["tid"]), "-" if not b["flags"] & btr.TSC else str(b["tsc"]),
           "0x%x" % b["from"], "0x%x" % b["to"], btr.kind_name(b["kind"]), str(b["insns"]),
           not b["flags"] & btr.TAKEN, b["flags"] & btr.INSNS != 0)
    exp = (tid, time, frm, to, kind, insns, "N" in fl, ("insns=%s" % insns) in fl)
    assert got == exp, (i, got, exp)
# symbolize: btr script's source symbols of the first 200 branches of one process
pid = int(a["pid"][0])
sel = a[a["pid"] == pid][:200]
names = t.symbolize(sel["from"], pid=pid)
scr = [l.split()[8] for l in lines if l.startswith("%d/" % pid)][:200]
assert names == scr, [(x, y) for x, y in zip(names, scr) if x != y][:3]
print("ok", len(a), "branches in", len(batches), "batches")
PY

# processes and threads (no decoding) == btr report's lists
"$btr" report --format json "$t" >"$tmp/report.json" 2>/dev/null || bad "btr report"
check "processes/threads == btr report" run - "$t" "$tmp/report.json" <<'PY'
import json, sys
import btr
t = btr.open(sys.argv[1])
r = json.load(open(sys.argv[2]))
assert sorted(th["tid"] for th in t.threads()) == sorted(th["tid"] for th in r["thread_list"]), (t.threads(), r["thread_list"])
assert len(t.processes()) == 1 and len(t.processes()[0]["threads"]) == 3, t.processes()
assert t.processes()[0]["path"].endswith("prog_flow_threads") and t.backend() == "qemu"
assert any(m["path"].endswith("prog_flow_threads") for m in t.modules())
PY

# analyses == the CLI
"$btr" flame -o "$tmp/cli.folded" "$t" 2>/dev/null || bad "btr flame"
"$btr" callgraph "$t" >"$tmp/cli.cg" 2>/dev/null || bad "btr callgraph"
check "analyses == btr flame, callgraph, report" run - "$t" "$tmp/cli.folded" "$tmp/cli.cg" "$tmp/report.json" <<'PY'
import json, sys
import numpy as np
import btr, btr.dask
t = btr.open(sys.argv[1])
assert t.analyze("flame") == open(sys.argv[2], "rb").read()
assert t.analyze("callgraph", "text") == open(sys.argv[3], "rb").read()
r = json.load(open(sys.argv[4]))
bl = t.blocks()
assert bl["branches"] == r["branches"] and bl["insns"] == r["instructions"], (bl["branches"], bl["insns"])
assert bl["blocks"]["count"].sum() > 0 and len(bl["edges"]) > 100
# the edges' fields hold what they name: taken is 0 or 1, both occur; a
# not-taken edge is a conditional (kind jcc) to the next instruction
e = bl["edges"]
assert set(e["taken"].tolist()) == {0, 1}, sorted(set(e["taken"].tolist()))
nt = e[e["taken"] == 0]
assert set(btr.kind_name(int(k)) for k in nt["kind"]) == {"jcc"}, set(nt["kind"].tolist())
assert ((nt["to"] > nt["from"]) & (nt["to"] - nt["from"] <= 15)).all()
assert (e["from_module"] == e["from_module"][0]).sum() > 0 and (e["count"] > 0).all()
b = bl["blocks"]
assert (b["end"] >= b["start"]).all() and (b["insns"] >= b["count"]).all()
c = btr.dask.run_one(sys.argv[1], "counts")
got = {btr.kind_name(k): int(n) for k, n in enumerate(c["by_kind"]) if k}
assert got == r["branches_by_kind"], (got, r["branches_by_kind"])
assert c["insns"] == r["instructions"]
per = {th["tid"]: th["branches"] for th in r["thread_list"]}
assert dict(zip(c["tids"].tolist(), c["branches_per_tid"].tolist())) == per
PY

# Dask: a LocalCluster of 2 worker processes == in-process == whole trace
# (a file, not stdin: the worker processes start by importing the main module)
cat >"$tmp/dask_check.py" <<'PY'
import sys
import numpy as np
import btr, btr.dask
from dask.distributed import Client, LocalCluster
paths = sys.argv[1:]
if __name__ == "__main__":
    local = {k: btr.dask.profile(paths, k, fan_in=2) for k in ("folded", "pprof", "blocks", "counts")}
    # the fleet's counts are the sum of each trace's
    each = [btr.dask.run_one(p, "counts") for p in paths]
    assert local["counts"]["insns"] == sum(e["insns"] for e in each)
    assert (local["counts"]["by_kind"] == sum(e["by_kind"] for e in each)).all()
    # folded: the merge of three is each stack's weights added
    tot = {}
    for p in paths:
        for l in btr.open(p).analyze("flame").decode().splitlines():
            s, w = l.rsplit(" ", 1)
            tot[s] = tot.get(s, 0) + int(w)
    got = {l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1]) for l in local["folded"].decode().splitlines()}
    assert got == tot
    whole = {k: btr.dask.merge_results([btr.dask.run_one(paths[2], k)], k) for k in ("counts", "blocks", "folded")}
    shard = {k: btr.dask.decode_sharded(paths[2], k) for k in ("counts", "blocks", "folded")}
    assert len(btr.dask.shards(paths[2])) == 3
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, Client(cl) as c:
        for k, v in local.items():
            d = btr.dask.profile(paths, k, client=c, fan_in=2)
            if k in ("blocks",):
                assert d.equals(v), k
            elif k == "counts":
                assert all(np.array_equal(d[x], v[x]) for x in v), k
            else:
                assert d == v, k
        for k in ("counts", "blocks", "folded"):
            d = btr.dask.decode_sharded(paths[2], k, client=c)
            for a in (shard[k], whole[k]):
                if k == "blocks":
                    assert d.equals(a), k
                elif k == "counts":
                    assert all(np.array_equal(d[x], a[x]) for x in a), k
                else:
                    assert d == a, k
    print("ok dask")
PY
check "btr.dask on a LocalCluster == in-process" timeout 120 "${pyenv[@]}" "$py" -s \
	"$tmp/dask_check.py" "$tmp/fib12.btr" "$tmp/fib14.btr" "$t"

# decode_sharded by="segment": one thread's PT cut at PSBs into 2 and 3
# shards, each decoding a part of the one thread (counted: every shard has
# branches), merged equal to the whole trace for the sums over branches;
# call stacks across segments (folded) are refused
"$btr" record -q -o "$tmp/fib24.btr" -- "$build/prog_prof_fib" 24 >/dev/null 2>>"$tmp/rec.err"
check "record fib 24 (exit 1: fib(24) is not 55)" test -s "$tmp/fib24.btr"
cat >"$tmp/segment_check.py" <<'PY'
import sys
import numpy as np
import btr, btr.dask
p = sys.argv[1]
assert len(btr.dask.shards(p)) == 1
for n in (2, 3):
    per = [btr.dask.run_one(p, "counts", {"shard": i, "shards": n}) for i in range(n)]
    assert all(len(c["tids"]) == 1 and c["branches_per_tid"][0] > 10000 for c in per), (n, per)
    for k in ("counts", "blocks", "edges", "fdata"):
        try:
            whole = btr.dask.merge_results([btr.dask.run_one(p, k)], k)
        except btr.BtrError:
            assert k == "fdata" and "kafl" in p   # (no module file there: no BOLT profile)
            continue
        d = btr.dask.decode_sharded(p, k, by="segment", parts=n, client=False)
        if k in ("blocks", "edges"):
            assert d.equals(whole), (n, k)
        elif k == "counts":
            assert all(np.array_equal(d[x], whole[x]) for x in whole), (n, k)
        else:
            assert d == whole, (n, k)
try:
    btr.dask.decode_sharded(p, "folded", by="segment", client=False)
    raise SystemExit("folded by segment not refused")
except ValueError as e:
    assert "call stacks" in str(e)
try:
    btr.Trace(p, shard=2, shards=2)
    raise SystemExit("shard=2 of 2 not refused")
except ValueError:
    pass
print("ok segments")
PY
check "btr.dask decode_sharded by segment: one thread in 2 and 3 shards == whole" timeout 300 "${pyenv[@]}" "$py" -s \
	"$tmp/segment_check.py" "$tmp/fib24.btr"
# (the qemu recorder writes its PSBs where a block begins; hardware anywhere:
# the kAFL trace as one thread, whose seams need the decoder's state carried)
shared=${3:-}
if [ -n "$shared" ] && [ -r "$shared/traces/kafl-qemu/trace.pt" ]; then
	"$build/test_par" --write-kafl "$tmp/kafl1.btr" 1
	check "kAFL trace wrapped as one thread" test -s "$tmp/kafl1.btr"
	check "btr.dask decode_sharded by segment: the kAFL thread in 2 and 3 shards == whole" timeout 600 \
		"${pyenv[@]}" "$py" -s "$tmp/segment_check.py" "$tmp/kafl1.btr"
else
	note "the kAFL trace is absent: segments of a hardware trace not checked"
fi

# errors are exceptions naming the file, not crashes
check "a missing file raises FileNotFoundError" run -c "
import btr
try:
    btr.open('$tmp/none.btr')
except FileNotFoundError as e:
    assert 'none.btr' in str(e)
else:
    raise SystemExit('no error')"
printf 'not a trace' >"$tmp/bad.btr"
check "a bad file raises BtrError" run -c "
import btr
try:
    list(btr.open('$tmp/bad.btr').branches())
except btr.BtrError as e:
    assert 'bad.btr' in str(e) and e.code < 0, e
else:
    raise SystemExit('no error')"

finish cli_python
