"""btr: branch traces in Python over libbtr (docs/python.md).

    import btr
    t = btr.open("trace.btr")            # a .btr or a perf.data
    for batch in t.branches():           # numpy structured arrays (btr.BRANCH_DTYPE)
        ...                              # pandas.DataFrame(batch) is one call
    t.processes(), t.threads(), t.modules()
    t.analyze("flame")                   # bytes (folded stacks), any analysis of lib/analysis
    t.blocks()                           # basic-block and edge counts as arrays
    t.symbolize([0x401136])              # ["main+0x6"]

The package is ctypes over libbtr.so.0 (no compiled extension): every
branch is decoded and copied by the library, a batch at a time; Python
touches batches only.
"""

import ctypes
import os

import numpy as np

from . import _lib
from ._lib import BLOCK_DTYPE, BRANCH_DTYPE, EDGE_DTYPE, BtrError

__all__ = ["open", "Trace", "Analysis", "BtrError", "BRANCH_DTYPE", "BLOCK_DTYPE", "EDGE_DTYPE",
           "version", "kind_name", "KINDS", "merge"]

#: libbtr's version string
version = _lib.btr_version().decode()

#: branch kind names by value (enum btr_branch_kind)
KINDS = []
for _k in range(256):
    _nm = _lib.btr_branch_kind_name(_k).decode()
    if _nm == "?":
        break
    KINDS.append(_nm)
del _k, _nm

# flags of a branch (BTR_BF_*)
TAKEN, KERNEL, TSC, CYCLES, MISPRED, PREDICTED, INSNS, TSX_ABORT, TO_KERNEL = (1 << i for i in range(9))

# stream event types (enum btr_stream_event_type)
_EV_MODULE_LOAD, _EV_EXEC, _EV_THREAD_START, _EV_THREAD_EXIT, _EV_THREAD_NAME = 2, 4, 5, 6, 7
_EV_PROCESS_EXIT, _EV_PROCESS = 8, 12


def kind_name(kind):
    """The name of branch kind value @kind ("jcc", "call", ...)."""
    return KINDS[kind] if 0 <= kind < len(KINDS) else "?"


def open(path, **opts):
    """Opens a trace (.btr or perf.data): see Trace."""
    return Trace(path, **opts)


class Trace:
    """A trace file and the options it is read with.

    pid, tid: only this process / thread (0: all).  filter: a branch filter
    expression ("jcc,near_ret", "user", ...; docs/branch-kinds.md).  root,
    debug_dirs, elfs: where module files are found (as the CLI's --root,
    --debug-dir, --elf FILE[:BASE]).  skip_unselected (with pid or tid):
    other threads' per-thread data is skipped, not decoded (the same
    branches, faster; btr_stream_opts.skip_unselected).  jobs: threads the
    analyses' decoding runs in (btr_stream_opts.jobs; 0 means 1 for now;
    the results are the same).
    Nothing is read until asked."""

    def __init__(self, path, pid=0, tid=0, filter=None, root=None, debug_dirs=(), elfs=(), skip_unselected=True,
                 jobs=0):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(2, "No such file or directory", self.path)
        self.pid, self.tid, self.filter, self.skip_unselected = pid, tid, filter, skip_unselected
        self.jobs = jobs
        self.root, self.debug_dirs, self.elfs = root, list(debug_dirs), list(elfs)
        self._info = None
        self._sym = None   # a decode-free batch whose images symbolize

    # -- options --
    def _opts(self, event=None):
        """struct btr_stream_opts and the objects it points into (kept
        alive by the caller with the returned tuple)."""
        keep = []
        o = _lib.StreamOpts(sz=ctypes.sizeof(_lib.StreamOpts), pid=self.pid, tid=self.tid,
                            skip_unselected=int(bool(self.skip_unselected)), jobs=self.jobs)
        if self.filter is not None:
            f = _lib.Filter()
            _lib.check(_lib.btr_filter_parse(self.filter.encode(), ctypes.byref(f)), "filter %r" % self.filter)
            keep.append(f)
            o.filter = ctypes.pointer(f)
        if self.root:
            keep.append(self.root.encode())
            o.root = keep[-1]
        if self.debug_dirs:
            arr = (ctypes.c_char_p * (len(self.debug_dirs) + 1))(*[d.encode() for d in self.debug_dirs], None)
            keep.append(arr)
            o.debug_dirs = arr
        if self.elfs:
            arr = (_lib.StreamElf * len(self.elfs))()
            for i, e in enumerate(self.elfs):
                p, _, base = e.rpartition(":") if ":" in e else (e, "", "")
                arr[i].path = p.encode()
                if base:
                    arr[i].base, arr[i].has_base = int(base, 0), 1
            keep.append(arr)
            o.elfs, o.n_elfs = arr, len(self.elfs)
        if event is not None:
            cb = _lib.EVENT_CB(event)
            keep.append(cb)
            o.event = cb
        return o, keep

    def _batch(self, flags=0, event=None):
        o, keep = self._opts(event)
        b = ctypes.c_void_p()
        _lib.check(_lib.btr_batch_open(self.path.encode(), ctypes.byref(o), flags, ctypes.byref(b)), self.path)
        return b, keep

    # -- branches --
    def branches(self, batch=1 << 16):
        """Yields the trace's branches as numpy structured arrays of up to
        @batch branches (dtype btr.BRANCH_DTYPE: from, to, tsc, insns, tid,
        cycles, flags, kind, reserved, pid), in stream order.  Each array is
        new (keep it as long as you like).  Raises BtrError for a damaged
        file after the branches before the damage."""
        b, keep = self._batch()
        try:
            while True:
                arr = np.empty(batch, dtype=BRANCH_DTYPE)
                n = _lib.btr_batch_read(b, arr.ctypes.data, batch)
                if n < 0:
                    raise BtrError(n, self.path)
                if n == 0:
                    return
                yield arr[:n] if n < batch else arr
        finally:
            _lib.btr_batch_free(b)

    def all_branches(self, batch=1 << 20):
        """Every branch in one array (memory: 48 bytes per branch)."""
        parts = list(self.branches(batch))
        return np.concatenate(parts) if parts else np.empty(0, dtype=BRANCH_DTYPE)

    # -- processes, threads, modules (no decoding) --
    def _scan(self):
        if self._info is not None:
            return self._info
        procs, threads, mods = {}, {}, []

        def proc(pid):
            return procs.setdefault(pid, {"pid": pid, "ppid": 0, "path": "", "args": [], "exit_code": None,
                                          "signal": None, "threads": []})

        def on_event(_ctx, evp):
            ev = evp.contents
            t = ev.type
            if not ev.rec:
                return 0
            r = ev.rec.contents.u
            if t == _EV_PROCESS:
                p = r.process
                d = proc(p.pid)
                if p.ppid:
                    d["ppid"] = p.ppid
                if p.path:
                    d["path"] = p.path.decode(errors="replace")
                if p.args_len:
                    raw = ctypes.string_at(p.args, p.args_len)
                    d["args"] = [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]
            elif t == _EV_THREAD_START or t == _EV_THREAD_NAME or t == _EV_THREAD_EXIT:
                th = r.thread
                d = threads.setdefault(th.tid, {"tid": th.tid, "pid": th.pid, "name": "", "exit_code": None})
                if th.pid:
                    d["pid"] = th.pid
                if t == _EV_THREAD_NAME and th.name:
                    d["name"] = th.name.decode(errors="replace")
                if t == _EV_THREAD_EXIT and th.end == 1:
                    d["exit_code"] = th.exit_code
            elif t == _EV_PROCESS_EXIT:
                x = r.exit
                d = proc(x.pid)
                d["exit_code"], d["signal"] = (x.code, None) if not x.signo else (None, x.signo)
            elif t == _EV_MODULE_LOAD or t == _EV_EXEC:
                m = r.module
                bid = bytes(m.build_id[:m.build_id_len]).hex()
                mods.append({"pid": m.pid or ev.pid, "start": m.start, "size": m.size, "pgoff": m.pgoff,
                             "path": (m.path or b"").decode(errors="replace"), "build_id": bid,
                             "file": ev.path.decode(errors="replace") if ev.path else None})
                if t == _EV_EXEC and m.pid:
                    d = proc(m.pid)
                    if m.path and not d["path"]:
                        d["path"] = m.path.decode(errors="replace")
            return 0

        b, keep = self._batch(flags=1, event=on_event)   # BTR_BATCH_NO_DATA
        stream = _lib.btr_batch_stream(b)
        self._backend = _lib.btr_stream_backend(stream).decode()
        for th in threads.values():
            if th["pid"]:
                proc(th["pid"])["threads"].append(th["tid"])
        self._sym = (b, keep)
        self._info = (list(procs.values()), list(threads.values()), mods)
        return self._info

    def processes(self):
        """The processes the trace names: dicts with pid, ppid, path, args,
        exit_code (or signal), threads (tids).  Read without decoding."""
        return self._scan()[0]

    def threads(self):
        """The threads: dicts with tid, pid, name, exit_code."""
        return self._scan()[1]

    def modules(self):
        """Every module load (and exec): dicts with pid, start, size,
        pgoff, path (as recorded), build_id (hex), file (the file the
        library found for it, None if none)."""
        return self._scan()[2]

    def backend(self):
        """The recorder that wrote the trace ("qemu", "perf", "step", ...)."""
        self._scan()
        return self._backend

    # -- symbols --
    def symbolize(self, addrs, pid=0, lines=False):
        """Names of run-time addresses @addrs (an int or a sequence) in
        process @pid (0: the first process), "function+0xoff" as `btr
        script` prints them; with @lines, (name, file, line) tuples.
        The images are those at the end of the trace."""
        self._scan()
        image = _lib.btr_stream_image_pid(_lib.btr_batch_stream(self._sym[0]), pid)
        one = isinstance(addrs, (int, np.integer))
        buf = ctypes.create_string_buffer(512)
        out = []
        for a in ([addrs] if one else addrs):
            a = int(a)
            _lib.btr_image_symbolize(image, a, buf, len(buf))
            name = buf.value.decode(errors="replace")
            if lines:
                f, ln = ctypes.c_char_p(), ctypes.c_int()
                ok = _lib.btr_image_line(image, a, ctypes.byref(f), ctypes.byref(ln)) == 0
                out.append((name, f.value.decode(errors="replace") if ok else None, ln.value if ok else 0))
            else:
                out.append(name)
        return out[0] if one else out

    def close(self):
        if self._sym is not None:
            _lib.btr_batch_free(self._sym[0])
            self._sym = None
            self._info = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- analyses --
    def run(self, *analyses):
        """Feeds every Analysis of @analyses in one pass over the trace
        (one decode) and returns what the run saw (a dict: backend, lost,
        status, branches, gaps, ...).  Results: each analysis' write() or
        result()."""
        wanted = []
        for a in analyses:
            for d in a._deps():
                if d not in wanted:
                    wanted.append(d)
            if a not in wanted:
                wanted.append(a)
        for a in wanted:
            a._create()
        arr = (ctypes.c_void_p * len(wanted))(*[a._h for a in wanted])
        o, keep = self._opts()
        info = _lib.RunInfo(sz=ctypes.sizeof(_lib.RunInfo))
        rc = _lib.btr_analysis_run(self.path.encode(), ctypes.byref(o), arr, len(wanted), ctypes.byref(info))
        if rc < 0 and info.status != rc:
            raise BtrError(rc, self.path)
        st = info.stats
        return {"backend": info.backend.decode(), "lost": bool(info.lost), "status": info.status,
                "records": st.records, "branches": st.branches, "filtered": st.filtered, "gaps": st.gaps,
                "pt_bytes": st.pt_bytes, "modules_loaded": st.modules_loaded,
                "modules_missing": st.modules_missing}

    def analyze(self, name, format=None, **opts):
        """Runs analysis @name (see Analysis) over the trace and returns
        its result written in @format (None: the analysis' default) as
        bytes; for "blocks", the arrays of Analysis.result()."""
        a = Analysis(name, **opts)
        try:
            self.run(a)
            return a.result() if name == "blocks" else a.write(format)
        finally:
            a.free()

    def blocks(self):
        """Basic-block and edge counts by module-relative (link) address:
        a dict with "modules" (list of dicts: path, name, base, size),
        "blocks" (BLOCK_DTYPE array: module, start, end, count, insns),
        "edges" (EDGE_DTYPE array: from_module, to_module, from, to, count,
        kind, taken), "branches", "insns"."""
        return self.analyze("blocks")


class Analysis:
    """One analysis of lib/analysis, created by name:

    blocks                       counts (Analysis.result(): arrays)
    cov (module=)                drcov, lcov, cobertura
    annotate (function=)         text
    cfg (function=, max_blocks=) dot
    callgraph                    text, json, dot
    flame (title=)               folded, speedscope (events=True), svg
    timeline (from_, to, min_dur)json, pftrace
    bolt (module=, pre_aggregated=) fdata
    pprof                        pb (gzipped), pb-raw
    check (allow=)               text, json, ...

    Profiles take weight="insns" (default) or "time".  cov, annotate and
    cfg are built over a blocks analysis, created and run with them."""

    PROFILES = ("callgraph", "flame", "timeline", "bolt", "pprof")
    NAMES = ("blocks", "cov", "annotate", "cfg", "check") + PROFILES

    def __init__(self, name, **opts):
        if name not in self.NAMES:
            raise ValueError("unknown analysis %r (one of %s)" % (name, ", ".join(self.NAMES)))
        self.name, self.opts = name, opts
        self._h = None
        self._blocks = Analysis("blocks") if name in ("cov", "annotate", "cfg") else None
        self._keep = []

    def _deps(self):
        return [self._blocks] if self._blocks else []

    def _create(self):
        if self._h is not None:
            return
        h = ctypes.c_void_p()
        o, n = self.opts, self.name
        if n == "blocks":
            rc = _lib.btr_blocks_new(ctypes.byref(h))
        elif n == "cov":
            rc = _lib.btr_cov_new(self._blocks._h, ctypes.byref(h))
            if rc == 0 and o.get("module"):
                rc = _lib.btr_cov_set_module(h, o["module"].encode())
        elif n == "annotate":
            rc = _lib.btr_annotate_new(self._blocks._h, o["function"].encode(), ctypes.byref(h))
        elif n == "cfg":
            self._keep.append(o["function"].encode())
            co = _lib.CfgOpts(sz=ctypes.sizeof(_lib.CfgOpts), function=self._keep[-1],
                              max_blocks=o.get("max_blocks", 0))
            rc = _lib.btr_cfg_new(self._blocks._h, ctypes.byref(co), ctypes.byref(h))
        elif n == "check":
            co = _lib.CheckOpts(sz=ctypes.sizeof(_lib.CheckOpts),
                                allow=o["allow"].encode() if o.get("allow") else None)
            rc = _lib.btr_check_new(ctypes.byref(co), ctypes.byref(h))
        else:
            weight = {"insns": 0, "time": 1}[o.get("weight", "insns")]
            if o.get("module"):
                self._keep.append(o["module"].encode())
            po = _lib.ProfileOpts(sz=ctypes.sizeof(_lib.ProfileOpts), weight=weight, events=int(o.get("events", 0)),
                                  from_=o.get("from_", 0), to=o.get("to", 0), min_dur=o.get("min_dur", 0),
                                  module=self._keep[-1] if o.get("module") else None,
                                  pre_aggregated=int(o.get("pre_aggregated", 0)))
            rc = _lib.PROFILE_CONSTRUCTORS[n](ctypes.byref(po), ctypes.byref(h))
            if rc == 0 and n == "flame" and o.get("title"):
                rc = _lib.btr_flame_set_title(h, o["title"].encode())
        if rc < 0:
            if h.value:
                _lib.btr_analysis_free(h)
            raise BtrError(rc, "analysis %s" % n)
        self._h = h.value

    def write(self, format=None):
        """The result in @format (None: the default) as bytes."""
        if self._h is None:
            raise ValueError("analysis %s has not run" % self.name)
        rc, data = _lib.to_bytes(lambda f: _lib.btr_analysis_write(self._h, f, format.encode() if format else None))
        if rc < 0:
            raise BtrError(rc, "%s%s" % (self.name, " --format %s" % format if format else ""))
        return data

    def result(self):
        """blocks: the counts as arrays (see Trace.blocks); other
        analyses: write() in their default format."""
        if self.name != "blocks":
            return self.write()
        if self._h is None:
            raise ValueError("analysis blocks has not run")
        rp = _lib.btr_blocks_get(self._h)
        if not rp:
            raise ValueError("the blocks analysis has no result")
        r = rp.contents
        mods = [{"path": r.modules[i].path.decode(errors="replace"), "name": r.modules[i].name.decode(errors="replace"),
                 "base": r.modules[i].base, "size": r.modules[i].size} for i in range(r.n_modules)]

        def arr(ptr, n, dt):
            if not n:
                return np.empty(0, dtype=dt)
            return np.frombuffer(ctypes.string_at(ptr, n * dt.itemsize), dtype=dt).copy()

        return {"modules": mods, "blocks": arr(r.blocks, r.n_blocks, BLOCK_DTYPE),
                "edges": arr(r.edges, r.n_edges, EDGE_DTYPE), "branches": r.branches, "insns": r.insns,
                "has_insns": bool(r.has_insns), "unknown_start": r.unknown_start}

    def free(self):
        if self._h is not None:
            _lib.btr_analysis_free(self._h)
            self._h = None
        if self._blocks:
            self._blocks.free()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


_MERGE_KINDS = {"fdata": 1, "fdata-pa": 2, "pprof": 3, "folded": 4}


def merge(profiles, kind=None):
    """Merges profiles (bytes) of one kind ("folded", "pprof", "fdata",
    "fdata-pa"; None: detected from the first) with btr's associative merge
    (`btr merge`) and returns the merged profile as bytes."""
    profiles = list(profiles)
    if kind is None:
        if not profiles:
            raise ValueError("merge: no profiles and no kind")
        k = _lib.btr_merge_detect(profiles[0], len(profiles[0]))
    else:
        k = _MERGE_KINDS[kind]
    m = ctypes.c_void_p()
    _lib.check(_lib.btr_merge_new(k, ctypes.byref(m)), "merge")
    try:
        for p in profiles:
            _lib.check(_lib.btr_merge_add(m, p, len(p)), "merge")
        rc, data = _lib.to_bytes(lambda f: _lib.btr_merge_write(m, f))
        _lib.check(rc, "merge")
        return data
    finally:
        _lib.btr_merge_free(m)
