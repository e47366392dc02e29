"""Fleet profiles and sharded decoding on Dask (docs/python.md).

    from dask.distributed import Client
    import btr.dask
    client = Client(...)                                  # the current client is used
    folded = btr.dask.profile(paths, "folded")            # blocking: the merged result
    d = btr.dask.profile(paths, "folded", compute=False)  # a dask Delayed
    fut = client.compute(d)                               # a Future (distributed.progress(fut))
    counts = btr.dask.decode_sharded("big.btr", "counts")
    res = btr.dask.profile(paths, "counts", errors="collect")   # Partial(result, failed)

Both map one task per trace (or per shard of one trace) onto the workers and
reduce the results in a tree, fan_in at a time, with btr's associative merge
(`btr merge`: folded stacks, pprof, BOLT fdata) or by adding counts (blocks,
edges, counts).  Without a client (none given and none current, or
client=False) the same tasks and the same tree run here, one after the
other: the result is the same, byte for byte.  Workers need this package
and libbtr, and the trace files (a shared file system, or paths valid on
every worker); the client needs neither the files nor their shards.

errors="raise" (default): the first failing trace fails the job with its
exception (a btr.BtrError or btr.DataLostError arrives as itself);
"skip": failing traces are left out (a warning names them); "collect": the
result is Partial(result, failed), failed a list of (path, reason).  A
trace that lost data fails its task unless on_loss="warn"/"ignore" is
passed as a trace option.
"""

import typing as _t
import warnings as _warnings

import numpy as _np

import btr

#: kind -> (analysis, write format, btr.merge kind)
PROFILES = {
    "folded": ("flame", "folded", "folded"),
    "pprof": ("pprof", "pb", "pprof"),
    "fdata": ("bolt", "fdata", "fdata"),
}
#: kinds whose results are counts, added by key
COUNTS = ("blocks", "edges", "counts")
KINDS = tuple(PROFILES) + COUNTS
ERRORS = ("raise", "skip", "collect")

_BLOCK_KEY = ["module", "start", "end"]
_EDGE_KEY = ["from_module", "from", "to_module", "to", "taken", "kind"]
_BATCH = 1 << 14   # branches a batch in the counts task: its temporaries stay under malloc's mmap threshold


class Partial(_t.NamedTuple):
    """The result of errors="collect": the merged result of the traces
    that succeeded (None if none did) and the (path, reason) of those that
    failed."""
    result: _t.Any
    failed: _t.List[_t.Tuple[str, str]]


def _frame(arr, modules, cols):
    """A blocks/edges array as a DataFrame whose module columns are paths
    (module indices differ between traces)."""
    import pandas as pd
    df = pd.DataFrame(arr)
    names = _np.array([m["path"] for m in modules] + ["[no module]"], dtype=object)
    for c in cols:
        idx = df[c].to_numpy().astype(_np.int64)
        idx[idx == 0xFFFFFFFF] = len(modules)
        df[c] = names[idx] if len(df) else pd.Series([], dtype=object)
    return df


def _counts(trace):
    """Branches by kind, instructions and branches per thread, from the
    branch batches (numpy only).  One buffer for the batches and one for
    each column, reused: no allocation per batch beyond a few small arrays
    (Dask's nanny sets MALLOC_TRIM_THRESHOLD_, so a freed large temporary
    would be unmapped and faulted in again at every batch)."""
    out = _np.empty(_BATCH, dtype=btr.BRANCH_DTYPE)
    kinds = _np.empty(_BATCH, dtype=_np.intp)
    u64 = _np.empty(_BATCH, dtype=_np.uint64)
    tids = _np.empty(_BATCH, dtype=_np.uint32)
    neq = _np.empty(_BATCH, dtype=bool)
    by_kind = _np.zeros(256, dtype=_np.int64)
    per_tid = {}
    insns = 0
    for b in trace.branches(out=out):
        n = len(b)
        k = kinds[:n]
        _np.copyto(k, b["kind"])
        by_kind += _np.bincount(k, minlength=256)
        x = u64[:n]
        _np.copyto(x, b["insns"])
        insns += int(x.sum())
        t = tids[:n]
        _np.copyto(t, b["tid"])
        # runs of one thread: count each run's length by its tid
        _np.not_equal(t[1:], t[:-1], out=neq[:n - 1])
        ends = _np.flatnonzero(neq[:n - 1])
        starts = _np.concatenate(([0], ends + 1))
        lens = _np.diff(_np.concatenate((starts, [n])))
        for tid, c in zip(t[starts].tolist(), lens.tolist()):
            per_tid[tid] = per_tid.get(tid, 0) + c
    u = _np.array(sorted(per_tid), dtype=_np.uint32)
    return {"by_kind": by_kind[:len(btr.KINDS)], "insns": insns, "tids": u,
            "branches_per_tid": _np.array([per_tid[x] for x in u.tolist()], dtype=_np.int64)}


def _check_kind(kind):
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError("kind=%r is not one of %s" % (kind, ", ".join(KINDS)))
    return kind


def run_one(path, kind: str, trace_opts: _t.Optional[dict] = None, analysis_opts: _t.Optional[dict] = None):
    """One task: decodes trace @path (with btr.Trace options @trace_opts,
    e.g. tid=...) and returns its result of @kind: bytes for a profile, a
    DataFrame for blocks/edges, a dict of arrays for counts."""
    _check_kind(kind)
    t = btr.Trace(path, **(trace_opts or {}))
    try:
        if kind in PROFILES:
            name, fmt, _ = PROFILES[kind]
            return t.analyze(name, fmt, **(analysis_opts or {}))
        if analysis_opts:
            raise TypeError("analysis_opts: kind %r takes none" % kind)
        if kind == "counts":
            return _counts(t)
        r = t.blocks()
        if kind == "blocks":
            return _frame(r["blocks"], r["modules"], ["module"])
        return _frame(r["edges"], r["modules"], ["from_module", "to_module"])
    finally:
        t.close()


def merge_results(parts, kind: str):
    """Merges results of run_one (or of earlier merges) of @kind."""
    _check_kind(kind)
    parts = list(parts)
    if kind in PROFILES:
        return btr.merge(parts, PROFILES[kind][2])
    if kind == "counts":
        per = {}
        for p in parts:
            for tid, c in zip(p["tids"].tolist(), p["branches_per_tid"].tolist()):
                per[tid] = per.get(tid, 0) + c
        u = _np.array(sorted(per), dtype=_np.uint32)
        return {"by_kind": sum(p["by_kind"] for p in parts), "insns": sum(p["insns"] for p in parts),
                "tids": u, "branches_per_tid": _np.array([per[x] for x in u.tolist()], dtype=_np.int64)}
    import pandas as pd
    key = _BLOCK_KEY if kind == "blocks" else _EDGE_KEY
    df = pd.concat(parts, ignore_index=True)
    sums = [c for c in ("count", "insns") if c in df.columns]
    return df.groupby(key, sort=True, as_index=False)[sums].sum()


# ---- tasks: in errors "skip"/"collect" each returns (result or None, failures) ----

def _task(path, kind, trace_opts, analysis_opts, errors, label):
    if errors == "raise":
        return run_one(path, kind, trace_opts, analysis_opts)
    try:
        return (run_one(path, kind, trace_opts, analysis_opts), [])
    except Exception as e:   # what failed and why, for the caller
        return (None, [(label, "%s: %s" % (type(e).__name__, e))])


def _merge_task(parts, kind, errors):
    if errors == "raise":
        return merge_results(parts, kind)
    ok = [r for r, _ in parts if r is not None]
    failed = [f for _, fl in parts for f in fl]
    return (merge_results(ok, kind) if ok else None, failed)


def _finish(part, errors):
    """The graph's last task: the result (raise, skip) or a Partial."""
    if errors == "raise":
        return part
    return part[0] if errors == "skip" else Partial(part[0], part[1])


def _client(client):
    """@client, or the current distributed client (None if there is none
    or @client is False: compute here)."""
    if client is False:
        return None
    if client is not None:
        return client
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:   # no client
        return None


def _graph(tasks, kind, errors, fan_in):
    """dask.delayed tasks (path, trace_opts, analysis_opts, label) and
    their merge tree; returns the root's Delayed (collect form)."""
    from dask import delayed
    if isinstance(fan_in, bool) or not isinstance(fan_in, int) or fan_in < 2:
        raise ValueError("fan_in must be an integer of at least 2, not %r" % (fan_in,))
    if not tasks:
        raise ValueError("nothing to reduce: no traces or shards")
    tag = "skip" if errors != "raise" else "raise"
    items = [delayed(_task, pure=False)(p, kind, to, ao, tag, label) for p, to, ao, label in tasks]
    while True:   # at least one merge (a single trace's result goes through merge_results too)
        groups = [items[i:i + fan_in] for i in range(0, len(items), fan_in)]
        items = [delayed(_merge_task, pure=False)(g, kind, tag) for g in groups]
        if len(items) == 1:
            break
    return items[0]


def _run(root, errors, client, compute):
    from dask import delayed
    if not compute:
        return delayed(_finish, pure=False)(root, errors)
    c = _client(client)
    part = c.compute(root).result() if c is not None else root.compute(scheduler="sync")
    if errors == "skip" and part[1]:
        _warnings.warn("btr.dask: %d trace(s) failed and were left out: %s" %
                       (len(part[1]), "; ".join("%s: %s" % f for f in part[1][:3])), RuntimeWarning, stacklevel=3)
    return _finish(part, errors)


def _check(kind, errors):
    _check_kind(kind)
    if not isinstance(errors, str) or errors not in ERRORS:
        raise ValueError("errors=%r is not one of %s" % (errors, ", ".join(ERRORS)))
    try:
        import dask  # noqa: F401
    except ImportError as e:
        raise ImportError("btr.dask needs dask (Debian: python3-dask, python3-distributed): %s" % e) from None


def profile(paths, kind: str = "folded", *, client=None, compute: bool = True, errors: str = "raise",
            fan_in: int = 8, analysis_opts: _t.Optional[dict] = None, **trace_opts):
    """The fleet profile of many traces: one task per trace, tree-reduced.
    @kind: "folded", "pprof", "fdata" (bytes, as `btr merge` writes them),
    "blocks", "edges" (DataFrames of counts keyed by module path and link
    address), "counts" (dict of arrays: by_kind, insns, tids,
    branches_per_tid).  @client: a dask.distributed Client (None: the
    current one if there is one, else this process; False: this process).
    @compute False: a dask Delayed instead of the result
    (client.compute() makes it a Future).  @errors: see the module.
    @trace_opts: btr.Trace options for every trace (root=, filter=,
    on_loss=, ...); @analysis_opts: the profile analysis' options."""
    _check(kind, errors)
    if isinstance(paths, (str, bytes)):
        raise TypeError("paths must be a sequence of paths, not one %s" % type(paths).__name__)
    paths = [btr._path("paths[%d]" % i, p)[0] for i, p in enumerate(paths)]
    if kind not in PROFILES and analysis_opts:
        raise TypeError("analysis_opts: kind %r takes none" % kind)
    root = _graph([(p, dict(trace_opts), analysis_opts, p) for p in paths], kind, errors, fan_in)
    return _run(root, errors, client, compute)


def shards(path, by: str = "thread", **trace_opts) -> _t.List[dict]:
    """The shards decode_sharded splits trace @path into: btr.Trace option
    dicts ({"tid": T} per thread or {"pid": P} per process; [{}] when the
    trace names none).  Found without decoding."""
    if by not in ("thread", "process"):
        raise ValueError("by=%r is not one of 'thread', 'process'" % (by,))
    t = btr.Trace(path, **trace_opts)
    try:
        if by == "thread":
            ids = sorted({th["tid"] for th in t.threads()})
            key = "tid"
        else:
            ids = sorted({p["pid"] for p in t.processes()})
            key = "pid"
    finally:
        t.close()
    return [dict(trace_opts, **{key: i}) for i in ids] or [dict(trace_opts)]


#: kinds whose results by="segment" shards give exactly: sums over branches
#: (and their straight-line runs, which the decoder brings across a seam);
#: call stacks (folded, pprof) begin empty at each segment
SEGMENT_KINDS = ("fdata",) + COUNTS


def decode_sharded(path, kind: str = "counts", by: str = "thread", *, client=None, compute: bool = True,
                   errors: str = "raise", fan_in: int = 8, analysis_opts: _t.Optional[dict] = None,
                   parts: int = 4, **trace_opts):
    """Decodes one trace as independent shards, one per thread (@by
    "thread") or per process ("process"), each a task selecting its
    thread/process (btr.Trace tid=/pid=), and merges their results of @kind
    as profile() does.  The shards are listed by a task on the cluster
    (the client needs no access to the file).  Every branch belongs to
    exactly one thread, and blocks, call stacks and counts are per thread,
    so the result equals run_one(path, kind) on the whole trace.  Each
    shard reads the whole file but decodes only its own thread's data
    (btr.Trace skip_unselected); per-CPU data (perf -a) is decoded by every
    shard.  @client, @compute, @errors as for profile() (with "skip" or
    "collect", a failing shard is named "PATH [tid=T]").

    @by "segment": @parts tasks (2 to 64), each decoding its share of
    the trace's data (btr.Trace shard=): whole threads, and segments of a
    long thread's (or CPU's) PT cut at PSBs, so that even a trace of one
    thread is decoded in parallel.  Every branch is decoded by exactly one
    task, each decoder brought to the state at its segment's start (the
    straight-line run, return stack, timing), so sums over branches equal
    the whole trace's: kinds "counts", "blocks", "edges", "fdata"
    (SEGMENT_KINDS); "folded" and "pprof" need the call stack across the
    segments and are refused (ValueError)."""
    _check(kind, errors)
    path = btr._path("path", path)[0]
    if by == "segment":
        if kind not in SEGMENT_KINDS:
            raise ValueError("by='segment': kind %r needs call stacks across segments; one of %s" %
                             (kind, ", ".join(SEGMENT_KINDS)))
        n = btr._int("parts", parts)
        if not 2 <= n <= 64:
            raise ValueError("parts=%d is not between 2 and 64" % n)
        tasks = [(path, dict(trace_opts, shard=i, shards=n), analysis_opts, "%s [shard=%d/%d]" % (path, i, n))
                 for i in range(n)]
        return _run(_graph(tasks, kind, errors, fan_in), errors, client, compute)
    if by not in ("thread", "process"):
        raise ValueError("by=%r is not one of 'thread', 'process', 'segment'" % (by,))
    c = _client(client)
    if c is not None:
        sh = c.submit(shards, path, by, pure=False, **trace_opts).result()
    else:
        sh = shards(path, by, **trace_opts)
    key = "tid" if by == "thread" else "pid"
    tasks = [(path, s, analysis_opts, "%s [%s=%s]" % (path, key, s.get(key, "all"))) for s in sh]
    root = _graph(tasks, kind, errors, fan_in)
    return _run(root, errors, c if c is not None else False, compute)
