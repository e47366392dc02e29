#!/usr/bin/env bash
# cli_python_dask.sh - btr.dask on a distributed.LocalCluster (2 worker
# processes with their nannies), used as the current client (no client=):
# - a fleet with a cut and a damaged trace: errors="raise" raises
#   btr.DataLostError on the client (the exception pickles), "skip" gives the
#   good traces' result with a warning, "collect" gives Partial(result,
#   failed) naming the two paths and why; the result equals the in-process
#   one of the good traces (folded bytes, counts);
# - compute=False gives a dask Delayed, client.compute() a Future;
# - decode_sharded lists the shards on a worker: the client process cannot
#   open the trace (btr.Trace refuses it there) and still gets the result;
# - the counts task on a worker takes at most 1.3x the minor page faults of
#   the same task in-process (the nanny sets MALLOC_TRIM_THRESHOLD_=65536:
#   buffers allocated per batch would be unmapped and faulted in again).
#   Counted, not timed.
# Args: $1 btr binary, $2 build dir.  About 40 s in Debug on a busy machine.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3

need_qemu
for m in numpy pandas dask distributed; do
	"$py" -c "import $m" 2>/dev/null || skip "python3-$m not installed"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=$tmp/prefix
cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1 || bad "cmake --install: $(tail -1 "$tmp/install.log")"
pyenv=(env -u BTR_LIBRARY PYTHONPATH="$p/lib/python3/dist-packages")
if grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	pyenv+=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
		ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
fi

"$btr" record -q -o "$tmp/thr.btr" -- "$build/prog_flow_threads" >/dev/null 2>"$tmp/rec.err" || bad "record: $(tail -1 "$tmp/rec.err")"
"$btr" record -q -o "$tmp/fib.btr" -- "$build/prog_prof_fib" 14 >/dev/null 2>>"$tmp/rec.err"
"$btr" record -q -o "$tmp/big.btr" -- "$build/prog_prof_fib" 26 >/dev/null 2>>"$tmp/rec.err"
check "recorded three traces" test -s "$tmp/thr.btr" -a -s "$tmp/fib.btr" -a -s "$tmp/big.btr"
sz=$(stat -c %s "$tmp/thr.btr")
head -c $((sz / 2)) "$tmp/thr.btr" >"$tmp/cut.btr"
"$py" - "$tmp/thr.btr" "$tmp/bad.btr" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = len(b) // 2
b[i] ^= 0xFF
b[i + 1] ^= 0x55
open(sys.argv[2], "wb").write(bytes(b))
PY

cat >"$tmp/dask_check.py" <<'PY'
import os, resource, sys, warnings
import numpy as np
import btr, btr.dask
from dask.distributed import Client, LocalCluster

d = sys.argv[1]
good = [os.path.join(d, n) for n in ("thr.btr", "fib.btr")]
damaged = [os.path.join(d, n) for n in ("cut.btr", "bad.btr")]
fleet = [good[0], damaged[0], good[1], damaged[1]]


def say(ok, what):
    print(("ok " if ok else "bad ") + what, flush=True)


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    return a == b


def faults(path):
    """minor faults and the counts of one counts task in this process"""
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    res = btr.dask.run_one(path, "counts")
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0, int(res["insns"]), \
        os.environ.get("MALLOC_TRIM_THRESHOLD_")


if __name__ == "__main__":
    big = os.path.join(d, "big.btr")
    faults(big)
    local_faults = min(faults(big)[0] for _ in range(2))
    local = {k: btr.dask.profile(good, k, client=False) for k in ("folded", "counts")}
    whole = btr.dask.run_one(good[0], "counts")
    # edges as a DataFrame: module columns are the paths of the trace's
    # modules, "[no module]" where the raw array says 0xFFFFFFFF (the
    # returns into the kernel's side of syscalls and signals)
    t = btr.Trace(good[1])
    raw = t.blocks()
    t.close()
    paths = [m["path"] for m in raw["modules"]] + ["[no module]"]
    ef = btr.dask.run_one(good[1], "edges")
    want = [paths[min(int(x), len(paths) - 1)] for x in raw["edges"]["to_module"]]
    say(len(ef) == len(raw["edges"]) and (ef["to"].to_numpy() == raw["edges"]["to"]).all()
        and list(ef["to_module"]) == want and "[no module]" in want,
        "edges: to_module the module paths, [no module] for %d of %d" % (want.count("[no module]"), len(want)))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as c:
        for k in ("folded", "counts"):
            try:
                btr.dask.profile(fleet, k)
                say(False, "%s errors=raise: no error" % k)
            except btr.DataLostError as e:
                say(e.path in damaged and e.losses and e.code < 0, "%s errors=raise: %s" % (k, e))
            except Exception as e:
                say(False, "%s errors=raise: %s %s, not btr.DataLostError" % (k, type(e).__name__, e))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = btr.dask.profile(fleet, k, errors="skip")
            say(same(r, local[k]), "%s errors=skip: the good traces' result" % k)
            say(len(w) == 1 and "2 trace(s) failed" in str(w[0].message), "%s errors=skip: one warning naming them: %s"
                % (k, [str(x.message)[:120] for x in w]))
            pr = btr.dask.profile(fleet, k, errors="collect")
            say(isinstance(pr, btr.dask.Partial) and same(pr.result, local[k]), "%s errors=collect: the partial result" % k)
            say(sorted(p for p, _ in pr.failed) == sorted(damaged) and all("data lost" in why for _, why in pr.failed),
                "%s errors=collect: failed %s" % (k, pr.failed))
        dl = btr.dask.profile(good, "folded", compute=False)
        fut = c.compute(dl)
        say(type(dl).__name__ == "Delayed" and type(fut).__name__ == "Future" and fut.result() == local["folded"],
            "compute=False: a Delayed; client.compute: a Future with the result")
        # the client cannot open traces: the shards are listed on a worker
        real_init = btr.Trace.__init__

        def refuse(self, *a, **k):
            raise PermissionError("the client has no access to the traces")
        btr.Trace.__init__ = refuse
        try:
            s = btr.dask.decode_sharded(good[0], "counts")
            say(same(s, whole) and len(s["tids"]) == 3, "decode_sharded: shards listed and computed on the workers")
        except Exception as e:
            say(False, "decode_sharded needs the file on the client: %s: %s" % (type(e).__name__, e))
        finally:
            btr.Trace.__init__ = real_init
        sc = btr.dask.decode_sharded(damaged[0], "counts", errors="collect")
        say(len(sc.failed) >= 1 and all("data lost" in why for _, why in sc.failed),
            "decode_sharded errors=collect: %s" % sc.failed[:1])
        c.submit(faults, big, pure=False).result()
        wf = [c.submit(faults, big, pure=False).result() for _ in range(2)]
        worker_faults = min(f for f, _, _ in wf)
        say(wf[0][2] == "65536", "the worker runs with MALLOC_TRIM_THRESHOLD_=%s" % wf[0][2])
        say(worker_faults <= 1.3 * local_faults, "counts: minor faults on a worker %d, in-process %d (at most 1.3x)"
            % (worker_faults, local_faults))
PY
(cd "$tmp" && timeout 300 "${pyenv[@]}" "$py" -s "$tmp/dask_check.py" "$tmp") >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
while read -r st msg; do
	case $st in ok) ok ;; bad) bad "$msg" ;; esac
done <"$tmp/out.txt"
check "the Dask checks ran (exit $rc): $(grep -v '^distributed\|^ *$' "$tmp/err.txt" | tail -1 | head -c 300)" \
	test $rc -eq 0 -a "$(grep -c '^ok' "$tmp/out.txt")" -ge 15
finish cli_python_dask
