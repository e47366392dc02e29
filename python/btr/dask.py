"""Fleet profiles and sharded decoding on Dask (docs/python.md).

    from dask.distributed import Client
    import btr.dask
    folded = btr.dask.profile(paths, "folded", client=Client(...))
    counts = btr.dask.decode_sharded("big.btr", "counts", client=client)

Both map one task per trace (or per shard of one trace) onto the workers and
reduce the results in a tree, fan_in at a time, with btr's associative merge
(`btr merge`: folded stacks, pprof, BOLT fdata) or by adding counts (blocks,
edges, counts).  Without a client the same tasks and the same tree run here,
one after the other: the result is the same, byte for byte.  Workers need
this package and libbtr (the same `make install` prefix on PYTHONPATH) and
the trace files (a shared file system, or paths valid on every worker).
"""

import numpy as np

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

_BLOCK_KEY = ["module", "start", "end"]
_EDGE_KEY = ["from_module", "from", "to_module", "to", "taken", "kind"]


def _frame(arr, modules, cols):
    """A blocks/edges array as a DataFrame whose module columns are paths
    (module indices differ between traces)."""
    import pandas as pd
    df = pd.DataFrame(arr)
    names = np.array([m["path"] for m in modules] + ["[no module]"], dtype=object)
    for c in cols:
        idx = df[c].to_numpy().astype(np.int64)
        idx[idx == 0xFFFFFFFF] = len(modules)
        df[c] = names[idx] if len(df) else pd.Series([], dtype=object)
    return df


def _counts(trace):
    """Branches by kind, instructions and branches per thread, from the
    branch batches (numpy only)."""
    by_kind = np.zeros(256, dtype=np.int64)
    tids, per_tid, insns = [], [], 0
    for b in trace.branches():
        by_kind += np.bincount(b["kind"], minlength=256)
        insns += int(b["insns"].sum(dtype=np.uint64))
        u, c = np.unique(b["tid"], return_counts=True)
        tids.append(u)
        per_tid.append(c)
    tid = np.concatenate(tids) if tids else np.empty(0, np.uint32)
    cnt = np.concatenate(per_tid) if per_tid else np.empty(0, np.int64)
    u, inv = np.unique(tid, return_inverse=True)
    return {"by_kind": by_kind[:len(btr.KINDS)], "insns": insns,
            "tids": u, "branches_per_tid": np.bincount(inv, weights=cnt, minlength=len(u)).astype(np.int64)}


def run_one(path, kind, trace_opts=None, analysis_opts=None):
    """One task: decodes trace @path (with btr.Trace options @trace_opts,
    e.g. tid=...) and returns its result of @kind: bytes for a profile, a
    DataFrame for blocks/edges, a dict of arrays for counts."""
    t = btr.Trace(path, **(trace_opts or {}))
    try:
        if kind in PROFILES:
            name, fmt, _ = PROFILES[kind]
            return t.analyze(name, fmt, **(analysis_opts or {}))
        if kind == "counts":
            return _counts(t)
        r = t.blocks()
        if kind == "blocks":
            return _frame(r["blocks"], r["modules"], ["module"])
        return _frame(r["edges"], r["modules"], ["from_module", "to_module"])
    finally:
        t.close()


def merge_results(parts, kind):
    """Merges results of run_one (or of earlier merges) of @kind."""
    parts = list(parts)
    if kind in PROFILES:
        return btr.merge(parts, PROFILES[kind][2])
    if kind == "counts":
        tid = np.concatenate([p["tids"] for p in parts])
        cnt = np.concatenate([p["branches_per_tid"] for p in parts])
        u, inv = np.unique(tid, return_inverse=True)
        return {"by_kind": sum(p["by_kind"] for p in parts), "insns": sum(p["insns"] for p in parts),
                "tids": u, "branches_per_tid": np.bincount(inv, weights=cnt, minlength=len(u)).astype(np.int64)}
    import pandas as pd
    key = _BLOCK_KEY if kind == "blocks" else _EDGE_KEY
    df = pd.concat(parts, ignore_index=True)
    sums = [c for c in ("count", "insns") if c in df.columns]
    return df.groupby(key, sort=True, as_index=False)[sums].sum()


def _tree(client, items, kind, fan_in):
    """Reduces @items (results or futures) fan_in at a time until one is left."""
    if fan_in < 2:
        raise ValueError("fan_in must be at least 2")
    if not items:
        raise ValueError("nothing to reduce: no traces or shards")
    while True:
        groups = [items[i:i + fan_in] for i in range(0, len(items), fan_in)]
        if client is None:
            items = [merge_results(g, kind) for g in groups]
        else:
            items = [client.submit(merge_results, g, kind, pure=False) for g in groups]
        if len(items) == 1:
            return items[0] if client is None else items[0].result()


def _map(client, paths, kind, trace_opts_list, analysis_opts):
    if kind not in KINDS:
        raise ValueError("unknown kind %r (one of %s)" % (kind, ", ".join(KINDS)))
    if client is None:
        return [run_one(p, kind, o, analysis_opts) for p, o in zip(paths, trace_opts_list)]
    return [client.submit(run_one, p, kind, o, analysis_opts, pure=False) for p, o in zip(paths, trace_opts_list)]


def profile(paths, kind="folded", client=None, fan_in=8, analysis_opts=None, **trace_opts):
    """The fleet profile of many traces: one task per trace, tree-reduced.
    @kind: "folded", "pprof", "fdata" (bytes, as `btr merge` writes them),
    "blocks", "edges" (DataFrames of counts keyed by module path and link
    address), "counts" (dict of arrays: by_kind, insns, tids,
    branches_per_tid).  @client: a dask.distributed Client (None: the same
    computation in this process).  @trace_opts: btr.Trace options for every
    trace (root=, debug_dirs=, filter=, ...)."""
    paths = [str(p) for p in paths]
    parts = _map(client, paths, kind, [trace_opts] * len(paths), analysis_opts)
    return _tree(client, parts, kind, fan_in)


def shards(path, by="thread", **trace_opts):
    """The shards decode_sharded splits trace @path into: btr.Trace option
    dicts ({"tid": T} per thread or {"pid": P} per process; [{}] when the
    trace names none).  Found without decoding."""
    t = btr.Trace(path, **trace_opts)
    try:
        if by == "thread":
            ids = sorted({th["tid"] for th in t.threads()})
            key = "tid"
        elif by == "process":
            ids = sorted({p["pid"] for p in t.processes()})
            key = "pid"
        else:
            raise ValueError("by must be 'thread' or 'process'")
    finally:
        t.close()
    return [dict(trace_opts, **{key: i}) for i in ids] or [dict(trace_opts)]


def decode_sharded(path, kind="counts", by="thread", client=None, fan_in=8, analysis_opts=None, **trace_opts):
    """Decodes one trace as independent shards, one per thread (@by
    "thread") or per process ("process"), each a task selecting its
    thread/process (btr.Trace tid=/pid=), and merges their results of @kind
    as profile() does.  Every branch belongs to exactly one thread, and
    blocks, call stacks and counts are per thread, so the result equals
    run_one(path, kind) on the whole trace.  Each shard reads the whole
    file but decodes only its own thread's data (btr.Trace
    skip_unselected); per-CPU data (perf -a) is decoded by every shard.
    Measured figures: docs/python.md."""
    sh = shards(path, by, **trace_opts)
    parts = _map(client, [str(path)] * len(sh), kind, sh, analysis_opts)
    return _tree(client, parts, kind, fan_in)
