"""btr: branch traces in Python over libbtr (docs/python.md).

    import btr
    t = btr.open("trace.btr")            # a .btr or a perf.data (checked here)
    for batch in t.branches():           # numpy structured arrays (btr.BRANCH_DTYPE)
        ...                              # pandas.DataFrame(batch) is one call
    t.to_pandas()                        # every branch, kinds and modules categorical
    t.processes(), t.threads(), t.modules()
    t.analyze("flame")                   # bytes (folded stacks), any analysis of lib/analysis
    t.blocks()                           # basic-block and edge counts as arrays
    t.symbolize([0x401136])              # ["main+0x6"]
    t.lost, t.losses, t.gaps, t.stats    # what the trace lost, its gaps, its figures

Loss is never silent: a reading call on a trace that lost data (a cut or
damaged file, a process whose trace the recorder lost) raises
btr.DataLostError after the data before the loss, unless asked otherwise
(on_loss="warn": a btr.DataLossWarning and the partial result;
on_loss="ignore": the partial result).

The package is ctypes over libbtr.so.0 (no compiled extension): every
branch is decoded and copied by the library, a batch at a time; Python
touches batches only.
"""

import ctypes as _ctypes
import mmap as _mmap
import operator as _operator
import os as _os
import typing as _t
import warnings as _warnings

from . import _lib   # first: it says which interpreter lacks numpy

import numpy as _np
from ._lib import BLOCK_DTYPE, BRANCH_DTYPE, EDGE_DTYPE, BtrError, DataLossWarning, DataLostError
from ._version import __version__

__all__ = ["open", "Trace", "Analysis", "BtrError", "DataLostError", "DataLossWarning", "BRANCH_DTYPE",
           "BLOCK_DTYPE", "EDGE_DTYPE", "version", "__version__", "kind_name", "KINDS", "merge", "ON_LOSS",
           "TAKEN", "KERNEL", "TSC", "CYCLES", "MISPRED", "PREDICTED", "INSNS", "TSX_ABORT", "TO_KERNEL"]

#: libbtr's version string (the loaded library's; __version__ is this package's)
version: str = _lib.btr_version().decode()

#: branch kind names by value (enum btr_branch_kind)
KINDS: _t.List[str] = []
for _k in range(256):
    _nm = _lib.btr_branch_kind_name(_k).decode()
    if _nm == "?":
        break
    KINDS.append(_nm)
del _k, _nm

# flags of a branch (BTR_BF_*)
TAKEN, KERNEL, TSC, CYCLES, MISPRED, PREDICTED, INSNS, TSX_ABORT, TO_KERNEL = (1 << _i for _i in range(9))

#: what a reading call does when trace data was lost
ON_LOSS = ("raise", "warn", "ignore")

# stream event types (enum btr_stream_event_type)
_EV_MODULE_LOAD, _EV_EXEC, _EV_THREAD_START, _EV_THREAD_EXIT, _EV_THREAD_NAME = 2, 4, 5, 6, 7
_EV_PROCESS_EXIT, _EV_GAP, _EV_PROCESS = 8, 10, 12
_BATCH_NO_DATA = 1
_ERR_TRUNCATED = -12

_PathArg = _t.Union[str, bytes, "_os.PathLike[str]", "_os.PathLike[bytes]"]


# ---- argument checks: TypeError / ValueError naming the argument ----------

def _int(name: str, v: _t.Any, bits: int = 32) -> int:
    if isinstance(v, (bool, _np.bool_)) or not hasattr(type(v), "__index__"):
        raise TypeError("%s must be an integer, not %s" % (name, type(v).__name__))
    v = _operator.index(v)
    if not 0 <= v < (1 << bits):
        raise ValueError("%s=%d is out of range (0 to %d)" % (name, v, (1 << bits) - 1))
    return v


def _path(name: str, v: _t.Any) -> _t.Tuple[str, bytes]:
    """A path argument as (str, bytes): str, bytes and os.PathLike."""
    if not isinstance(v, (str, bytes, _os.PathLike)):
        raise TypeError("%s must be a path (str, bytes or os.PathLike), not %s" % (name, type(v).__name__))
    p = _os.fspath(v)
    b = _os.fsencode(p)
    if not b or b"\0" in b:
        raise ValueError("%s must be a non-empty path without NUL bytes, not %r" % (name, p))
    return _os.fsdecode(p), b


def _paths(name: str, v: _t.Any) -> _t.List[bytes]:
    if isinstance(v, (str, bytes, _os.PathLike)):
        raise TypeError("%s must be a sequence of paths, not one %s" % (name, type(v).__name__))
    try:
        items = list(v)
    except TypeError:
        raise TypeError("%s must be a sequence of paths, not %s" % (name, type(v).__name__)) from None
    return [_path("%s[%d]" % (name, i), x)[1] for i, x in enumerate(items)]


def _str(name: str, v: _t.Any, none: bool = True) -> _t.Optional[str]:
    if v is None and none:
        return None
    if not isinstance(v, str):
        raise TypeError("%s must be a str%s, not %s" % (name, " or None" if none else "", type(v).__name__))
    if "\0" in v:
        raise ValueError("%s must not contain NUL characters" % name)
    return v


def _choice(name: str, v: _t.Any, choices: _t.Sequence[str]) -> str:
    if not isinstance(v, str):
        raise TypeError("%s must be a str (one of %s), not %s" % (name, ", ".join(map(repr, choices)),
                                                                 type(v).__name__))
    if v not in choices:
        raise ValueError("%s=%r is not one of %s" % (name, v, ", ".join(map(repr, choices))))
    return v


def _flag(name: str, v: _t.Any) -> bool:
    if not isinstance(v, (bool, _np.bool_, int)) or (isinstance(v, int) and not isinstance(v, bool) and v not in (0, 1)):
        raise TypeError("%s must be True or False, not %r" % (name, v))
    return bool(v)


def kind_name(kind: int) -> str:
    """The name of branch kind value @kind ("jcc", "call", ...)."""
    return KINDS[kind] if 0 <= kind < len(KINDS) else "?"


def open(path: _PathArg, *, pid: int = 0, tid: int = 0, filter: _t.Optional[str] = None,
         root: _t.Optional[_PathArg] = None, debug_dirs: _t.Sequence[_PathArg] = (),
         elfs: _t.Sequence[str] = (), skip_unselected: bool = True, on_loss: str = "raise") -> "Trace":
    """Opens a trace (.btr or perf.data) and checks that the library reads
    it (FileNotFoundError, IsADirectoryError, BtrError otherwise): see Trace."""
    return Trace(path, pid=pid, tid=tid, filter=filter, root=root, debug_dirs=debug_dirs, elfs=elfs,
                 skip_unselected=skip_unselected, on_loss=on_loss)


class Trace:
    """A trace file and the options it is read with.

    pid, tid: only this process / thread (0: all).  filter: a branch filter
    expression ("jcc,near_ret", "user", ...; docs/branch-kinds.md).  root,
    debug_dirs, elfs: where module files are found (as the CLI's --root,
    --debug-dir, --elf FILE[:BASE]).  skip_unselected (with pid or tid):
    other threads' per-thread data is skipped, not decoded (the same
    branches, faster; btr_stream_opts.skip_unselected).  jobs: threads the
    analyses' decoding runs in (btr_stream_opts.jobs; 0 means 1 for now;
    the results are the same).  shard, shards (shards > 1): only this
    shard of the trace's data is decoded (btr_stream_opts.shard: whole
    threads and segments of long threads' PT cut at PSBs; every branch is
    in exactly one shard; btr.dask.decode_sharded by="segment").  on_loss: what the
    reading calls do when data was lost ("raise": DataLostError, "warn":
    a DataLossWarning and the partial result, "ignore"); each call can
    override it.  The file is opened once here to check it is a trace;
    nothing else is read until asked."""

    def __init__(self, path: _PathArg, *, pid: int = 0, tid: int = 0, filter: _t.Optional[str] = None,
                 root: _t.Optional[_PathArg] = None, debug_dirs: _t.Sequence[_PathArg] = (),
                 elfs: _t.Sequence[str] = (), skip_unselected: bool = True, on_loss: str = "raise",
                 jobs: int = 0, shard: int = 0, shards: int = 0) -> None:
        self._sym = None   # a decode-free batch whose images symbolize
        self._info = None
        self._pass = None  # stats and losses of the last whole decoding pass
        self._gaps = None
        self.path, self._bpath = _path("path", path)
        self.pid, self.tid = _int("pid", pid), _int("tid", tid)
        self.filter = _str("filter", filter)
        self.root = None if root is None else _path("root", root)[0]
        self._root = None if root is None else _path("root", root)[1]
        self._debug_dirs = _paths("debug_dirs", debug_dirs)
        self.debug_dirs = [_os.fsdecode(d) for d in self._debug_dirs]
        if isinstance(elfs, (str, bytes)):
            raise TypeError("elfs must be a sequence of 'FILE[:BASE]' strings, not one %s" % type(elfs).__name__)
        self.elfs = [_str("elfs[%d]" % i, e, none=False) for i, e in enumerate(elfs)]
        self._elfs = []
        for i, e in enumerate(self.elfs):
            p, base = e, None
            if ":" in e:
                p, _, b = e.rpartition(":")
                try:
                    base = int(b, 0)
                except ValueError:
                    raise ValueError("elfs[%d]=%r: BASE %r is not a number" % (i, e, b)) from None
            self._elfs.append((_path("elfs[%d]" % i, p)[1], base))
        self.skip_unselected = _flag("skip_unselected", skip_unselected)
        self.jobs = _int("jobs", jobs)
        self.shard, self.shards = _int("shard", shard), _int("shards", shards)
        if self.shards > 64 or (self.shards > 1 and self.shard >= self.shards):
            raise ValueError("shard=%d of shards=%d: 0 <= shard < shards <= 64" % (self.shard, self.shards))
        self.on_loss = _choice("on_loss", on_loss, ON_LOSS)
        self._filter = None
        if self.filter is not None:
            f = _lib.Filter()
            rc = _lib.btr_filter_parse(self.filter.encode(), _ctypes.byref(f))
            if rc < 0:
                raise ValueError("filter=%r: %s" % (self.filter, _lib.errstr(rc)))
            self._filter = f
        _os.stat(self.path)   # FileNotFoundError, PermissionError, ... naming the file
        if _os.path.isdir(self._bpath):
            raise IsADirectoryError(21, "Is a directory (a trace file is needed)", self.path)
        b, keep = self._batch(flags=_BATCH_NO_DATA)   # BtrError: not a trace
        _lib.btr_batch_free(b)

    def __repr__(self) -> str:
        return "btr.Trace(%r)" % self.path

    # -- options --
    def _opts(self, event=None):
        """struct btr_stream_opts and the objects it points into (kept
        alive by the caller with the returned tuple)."""
        keep = []
        o = _lib.StreamOpts(sz=_ctypes.sizeof(_lib.StreamOpts), pid=self.pid, tid=self.tid,
                            skip_unselected=int(self.skip_unselected), jobs=self.jobs, shard=self.shard,
                            shards=self.shards)
        if self._filter is not None:
            o.filter = _ctypes.pointer(self._filter)
        if self._root:
            o.root = self._root
        if self._debug_dirs:
            arr = (_ctypes.c_char_p * (len(self._debug_dirs) + 1))(*self._debug_dirs, None)
            keep.append(arr)
            o.debug_dirs = arr
        if self._elfs:
            arr = (_lib.StreamElf * len(self._elfs))()
            for i, (p, base) in enumerate(self._elfs):
                arr[i].path = p
                if base is not None:
                    arr[i].base, arr[i].has_base = base, 1
            keep.append(arr)
            o.elfs, o.n_elfs = arr, len(self._elfs)
        if event is not None:
            cb = _lib.EVENT_CB(event)
            keep.append(cb)
            o.event = cb
        return o, keep

    def _batch(self, flags=0, event=None):
        o, keep = self._opts(event)
        b = _ctypes.c_void_p()
        _lib.check(_lib.btr_batch_open(self._bpath, _ctypes.byref(o), flags, _ctypes.byref(b)), self.path)
        return b, keep

    def _on_loss(self, on_loss):
        return self.on_loss if on_loss is None else _choice("on_loss", on_loss, ON_LOSS)

    def _loss(self, rc, losses, on_loss, stacklevel=3):
        """Data was lost (@losses, @rc the read's return): raise, warn or not."""
        code = rc if rc < 0 else next((d["reason"] for d in losses if d["reason"] < 0), _ERR_TRUNCATED)
        err = DataLostError(code, self.path, losses)
        if on_loss == "raise":
            raise err
        if on_loss == "warn":
            _warnings.warn(DataLossWarning(str(err)), stacklevel=stacklevel + 1)

    def _end(self, b, rc, on_loss):
        """A batch reader @b ended with @rc (0 or an error): losses are
        recorded and reported, other errors raised."""
        stream = _lib.btr_batch_stream(b)
        losses = _lib.stream_losses(stream)
        st = _lib.StreamStats()
        _lib.btr_stream_get_stats(stream, _ctypes.byref(st))
        self._pass = {"stats": _lib.stats_dict(st), "losses": losses}
        if losses:
            self._loss(rc, losses, on_loss, stacklevel=4)
        elif rc < 0:
            raise BtrError(rc, self.path)

    # -- branches --
    def branches(self, batch: int = 1 << 16, *, out: _t.Optional[_np.ndarray] = None,
                 on_loss: _t.Optional[str] = None) -> _t.Iterator[_np.ndarray]:
        """Yields the trace's branches as numpy structured arrays of up to
        @batch branches (dtype btr.BRANCH_DTYPE: from, to, tsc, insns, tid,
        cycles, flags, kind, reserved, pid), in stream order.  Each array is
        new (keep it as long as you like), unless @out is given: a
        BRANCH_DTYPE array that every batch is read into (up to len(out)
        branches; each yielded array is a view of it, valid until the next
        one: no allocation per batch).  After the branches before a loss
        or damage: DataLostError (on_loss="raise"), or BtrError for other
        errors."""
        on_loss = self._on_loss(on_loss)
        if out is not None:
            if not isinstance(out, _np.ndarray):
                raise TypeError("out must be a numpy array of btr.BRANCH_DTYPE, not %s" % type(out).__name__)
            if out.dtype != BRANCH_DTYPE or out.ndim != 1 or not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError("out must be a writeable, contiguous 1-d array of btr.BRANCH_DTYPE")
            if len(out) == 0:
                raise ValueError("out must have room for at least one branch")
            batch = len(out)
        else:
            batch = _int("batch", batch)
            if batch == 0:
                raise ValueError("batch must be at least 1")
        return self._branches(batch, out, on_loss)

    def _branches(self, batch, out, on_loss):
        b, keep = self._batch()
        try:
            addr = out.ctypes.data if out is not None else None
            while True:
                if out is None:
                    arr = _np.empty(batch, dtype=BRANCH_DTYPE)
                    n = _lib.btr_batch_read(b, arr.ctypes.data, batch)
                else:
                    arr = out
                    n = _lib.btr_batch_read(b, addr, batch)
                if n <= 0:
                    self._end(b, n, on_loss)
                    return
                yield arr[:n] if n < batch or out is not None else arr
        finally:
            _lib.btr_batch_free(b)

    def all_branches(self, *, on_loss: _t.Optional[str] = None) -> _np.ndarray:
        """Every branch in one array (48 bytes per branch).  The array is
        filled in place as it grows (an anonymous mapping enlarged with
        mremap, no copies): the peak memory is the data's."""
        on_loss = self._on_loss(on_loss)
        item = BRANCH_DTYPE.itemsize
        cap, n = 1 << 16, 0
        mm = _mmap.mmap(-1, cap * item, flags=_mmap.MAP_PRIVATE)   # (a shared mapping cannot grow)
        b, keep = self._batch()
        try:
            addr = None
            while True:
                if n == cap:
                    cap *= 2
                    mm.resize(cap * item)
                    addr = None
                    if hasattr(_mmap, "MADV_HUGEPAGE"):   # fewer page faults where THP is "madvise"
                        try:
                            mm.madvise(_mmap.MADV_HUGEPAGE)
                        except OSError:
                            pass
                if addr is None:
                    ref = _ctypes.c_char.from_buffer(mm)
                    addr = _ctypes.addressof(ref)
                    del ref
                got = _lib.btr_batch_read(b, addr + n * item, cap - n)
                if got <= 0:
                    self._end(b, got, on_loss)
                    break
                n += got
        finally:
            _lib.btr_batch_free(b)
        if n == 0:
            return _np.empty(0, dtype=BRANCH_DTYPE)
        mm.resize(n * item)
        return _np.frombuffer(mm, dtype=BRANCH_DTYPE)

    def to_pandas(self, branches: _t.Optional[_np.ndarray] = None, *, modules: bool = True,
                  symbols: bool = False, on_loss: _t.Optional[str] = None):
        """The branches (@branches, a BRANCH_DTYPE array such as a batch;
        None: all_branches()) as a pandas.DataFrame: the dtype's columns,
        "kind" categorical with btr.KINDS as categories; with @modules,
        "from_module" and "to_module", categorical module paths (NaN
        outside every module, e.g. the kernel); with @symbols, "from_sym"
        and "to_sym" ("function+0xoff", each distinct address symbolized
        once).  Modules and symbols are those of each branch's process as
        they stand at the end of the trace."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Trace.to_pandas needs pandas (Debian: python3-pandas): %s" % e) from None
        modules, symbols = _flag("modules", modules), _flag("symbols", symbols)
        if branches is None:
            a = self.all_branches(on_loss=on_loss)
        else:
            if not isinstance(branches, _np.ndarray) or branches.dtype != BRANCH_DTYPE:
                raise TypeError("branches must be a numpy array of btr.BRANCH_DTYPE")
            a = branches
        df = pd.DataFrame(a)
        codes = a["kind"].astype(_np.int16)
        codes[codes >= len(KINDS)] = -1
        df["kind"] = pd.Categorical.from_codes(codes, categories=KINDS)
        if modules or symbols:
            self._scan()
            pids = _np.unique(a["pid"]) if len(a) else []
        if modules:
            for col in ("from", "to"):
                df[col + "_module"] = self._modules_of(a[col], a["pid"], pids, pd)
        if symbols:
            for col in ("from", "to"):
                df[col + "_sym"] = self._symbols_of(a[col], a["pid"], pids, pd)
        return df

    def _modules_of(self, addrs, apid, pids, pd):
        names = sorted({m["path"] for m in self.modules()})
        index = {p: i for i, p in enumerate(names)}
        codes = _np.full(len(addrs), -1, dtype=_np.int32)
        for pid in pids:
            ranges = []   # the modules mapped at the end, in load order (a later one replaces what it covers)
            for m in self.modules():
                if m["pid"] == pid and m["size"]:
                    s, e = m["start"], m["start"] + m["size"]
                    ranges = [r for r in ranges if r[1] <= s or r[0] >= e] + [(s, e, index[m["path"]])]
            if not ranges:
                continue
            ranges.sort()
            starts = _np.array([r[0] for r in ranges], dtype=_np.uint64)
            ends = _np.array([r[1] for r in ranges], dtype=_np.uint64)
            mod = _np.array([r[2] for r in ranges], dtype=_np.int32)
            sel = _np.flatnonzero(apid == pid)
            x = addrs[sel]
            i = _np.searchsorted(starts, x, side="right") - 1
            ok = (i >= 0) & (x < ends[_np.maximum(i, 0)])
            codes[sel[ok]] = mod[i[ok]]
        return pd.Categorical.from_codes(codes, categories=names)

    def _symbols_of(self, addrs, apid, pids, pd):
        out = _np.empty(len(addrs), dtype=object)
        for pid in pids:
            sel = _np.flatnonzero(apid == pid)
            u, inv = _np.unique(addrs[sel], return_inverse=True)
            out[sel] = _np.array(self.symbolize(u, pid=int(pid)), dtype=object)[inv]
        return pd.Categorical(out)

    # -- what the trace lost, its gaps and figures --
    def _info_pass(self):
        """One decoding pass that counts (btr_batch_finish): stats,
        losses and the GAP events."""
        if self._gaps is not None:
            return
        gaps = []

        def on_event(_ctx, evp):
            ev = evp.contents
            if ev.type == _EV_GAP:
                gaps.append({"tid": ev.tid, "pid": ev.pid, "reason": ev.reason, "error": _lib.errstr(ev.reason),
                             "offset": ev.offset})
            return 0

        b, keep = self._batch(event=on_event)
        try:
            rc = _lib.btr_batch_finish(b)
            try:
                self._end(b, rc, "ignore")
            except BtrError:
                raise
        finally:
            _lib.btr_batch_free(b)
        self._gaps = gaps

    @property
    def lost(self) -> bool:
        """True if trace data was lost (see losses)."""
        return bool(self.losses)

    @property
    def losses(self) -> _t.List[dict]:
        """The causes of lost data (btr_stream_losses), as dicts: kind
        ("chunk", "end", "cut", "missing", "flow"), pid, ppid, reason,
        error, offset, comm, detail; [] for a whole trace.  From the last
        whole pass over the branches, or one decoding pass of its own."""
        if self._pass is None:
            self._info_pass()
        return list(self._pass["losses"])

    @property
    def gaps(self) -> _t.List[dict]:
        """The gaps of the decoded data (GAP events: a thread's data lost
        or skipped), as dicts: tid, pid, reason, error, offset.  One
        decoding pass of its own (cached)."""
        self._info_pass()
        return list(self._gaps)

    @property
    def stats(self) -> dict:
        """struct btr_stream_stats of the last whole pass (or one of its
        own): records, pt_bytes, branches, filtered, gaps, lost_chunks,
        modules_loaded, modules_missing, read_error, ..."""
        if self._pass is None:
            self._info_pass()
        return dict(self._pass["stats"])

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
                    raw = _ctypes.string_at(p.args, p.args_len)
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

        b, keep = self._batch(flags=_BATCH_NO_DATA, event=on_event)
        stream = _lib.btr_batch_stream(b)
        self._backend = _lib.btr_stream_backend(stream).decode()
        for th in threads.values():
            if th["pid"]:
                proc(th["pid"])["threads"].append(th["tid"])
        self._sym = (b, keep)
        self._info = (list(procs.values()), list(threads.values()), mods)
        return self._info

    def processes(self) -> _t.List[dict]:
        """The processes the trace names: dicts with pid, ppid, path, args,
        exit_code (or signal), threads (tids).  Read without decoding."""
        return self._scan()[0]

    def threads(self) -> _t.List[dict]:
        """The threads: dicts with tid, pid, name, exit_code."""
        return self._scan()[1]

    def modules(self) -> _t.List[dict]:
        """Every module load (and exec): dicts with pid, start, size,
        pgoff, path (as recorded), build_id (hex), file (the file the
        library found for it, None if none)."""
        return self._scan()[2]

    def backend(self) -> str:
        """The recorder that wrote the trace ("qemu", "perf", "step", ...)."""
        self._scan()
        return self._backend

    # -- symbols --
    def symbolize(self, addrs: _t.Union[int, _t.Iterable[int]], pid: int = 0, lines: bool = False) -> _t.Any:
        """Names of run-time addresses @addrs (an int or a sequence of
        ints) in process @pid (0: the first process), "function+0xoff" as
        `btr script` prints them; with @lines, (name, file, line) tuples.
        The images are those at the end of the trace."""
        pid = _int("pid", pid)
        lines = _flag("lines", lines)
        one = isinstance(addrs, (int, _np.integer)) and not isinstance(addrs, bool)
        if isinstance(addrs, (str, bytes, bool, float)) or addrs is None:
            raise TypeError("addrs must be an int or a sequence of ints, not %s" % type(addrs).__name__)
        if one:
            items = [_int("addrs", addrs, 64)]
        elif isinstance(addrs, _np.ndarray):
            if addrs.dtype.kind not in "ui":
                raise TypeError("addrs must be integers, not an array of %s" % addrs.dtype)
            if addrs.size and (addrs.dtype.kind == "i" and addrs.min() < 0):
                raise ValueError("addrs: %d is out of range (0 to 2**64-1)" % addrs.min())
            items = addrs.ravel().tolist()
        else:
            try:
                seq = list(addrs)
            except TypeError:
                raise TypeError("addrs must be an int or a sequence of ints, not %s" % type(addrs).__name__) from None
            items = [_int("addrs[%d]" % i, a, 64) for i, a in enumerate(seq)]
        self._scan()
        image = _lib.btr_stream_image_pid(_lib.btr_batch_stream(self._sym[0]), pid)
        buf = _ctypes.create_string_buffer(512)
        out = []
        for a in items:
            _lib.btr_image_symbolize(image, a, buf, len(buf))
            name = buf.value.decode(errors="replace")
            if lines:
                f, ln = _ctypes.c_char_p(), _ctypes.c_int()
                ok = _lib.btr_image_line(image, a, _ctypes.byref(f), _ctypes.byref(ln)) == 0
                out.append((name, f.value.decode(errors="replace") if ok else None, ln.value if ok else 0))
            else:
                out.append(name)
        return out[0] if one else out

    def close(self) -> None:
        if self._sym is not None:
            _lib.btr_batch_free(self._sym[0])
            self._sym = None
            self._info = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- analyses --
    def run(self, *analyses: "Analysis", on_loss: _t.Optional[str] = None) -> dict:
        """Feeds every Analysis of @analyses in one pass over the trace
        (one decode) and returns what the run saw (a dict: backend, lost,
        losses, status, branches, gaps, ...).  Results: each analysis'
        write() or result().  Data lost: DataLostError (on_loss="raise"),
        a warning ("warn") or nothing ("ignore"); the results are then
        those of the data before the loss."""
        on_loss = self._on_loss(on_loss)
        if not analyses:
            raise TypeError("run needs at least one btr.Analysis")
        wanted = []
        for i, a in enumerate(analyses):
            if not isinstance(a, Analysis):
                raise TypeError("analyses[%d] must be a btr.Analysis, not %s" % (i, type(a).__name__))
            if a._ran:
                raise ValueError("analysis %s has run already (create a new btr.Analysis for another run)" % a.name)
            for d in a._deps():
                if d not in wanted:
                    wanted.append(d)
            if a not in wanted:
                wanted.append(a)
        for a in wanted:
            a._create()
        arr = (_ctypes.c_void_p * len(wanted))(*[a._h for a in wanted])
        o, keep = self._opts()
        losses = (_lib.StreamLoss * 64)()
        info = _lib.RunInfo(sz=_ctypes.sizeof(_lib.RunInfo), losses=_ctypes.cast(losses, _ctypes.c_void_p),
                            max_losses=len(losses))
        rc = _lib.btr_analysis_run(self._bpath, _ctypes.byref(o), arr, len(wanted), _ctypes.byref(info))
        for a in wanted:
            a._ran = True
        lost = [_lib.loss_dict(losses[i]) for i in range(min(info.n_losses, len(losses)))]
        if info.lost and not lost:
            lost = [{"kind": "?", "pid": 0, "ppid": 0, "reason": info.status, "error": _lib.errstr(info.status),
                     "offset": 0, "comm": "", "detail": ""}]
        st = _lib.stats_dict(info.stats)
        if rc < 0 and not info.lost:
            raise BtrError(rc, self.path)
        self._pass = {"stats": st, "losses": lost}
        if info.lost:
            self._loss(rc if rc < 0 else info.status, lost, on_loss)
        return dict(st, backend=info.backend.decode(), lost=bool(info.lost), losses=lost, status=info.status)

    def analyze(self, name: str, format: _t.Optional[str] = None, *, on_loss: _t.Optional[str] = None,
                module: _t.Optional[str] = None, function: _t.Optional[str] = None,
                max_blocks: _t.Optional[int] = None, title: _t.Optional[str] = None,
                events: _t.Optional[bool] = None, from_: _t.Optional[int] = None, to: _t.Optional[int] = None,
                min_dur: _t.Optional[int] = None, pre_aggregated: _t.Optional[bool] = None,
                weight: _t.Optional[str] = None, allow: _t.Optional[str] = None) -> _t.Any:
        """Runs analysis @name (see Analysis, which takes the other
        keywords) over the trace and returns its result written in
        @format (None: the analysis' default) as bytes; for "blocks", the
        arrays of Analysis.result()."""
        format = _str("format", format)
        a = Analysis(name, module=module, function=function, max_blocks=max_blocks, title=title, events=events,
                     from_=from_, to=to, min_dur=min_dur, pre_aggregated=pre_aggregated, weight=weight, allow=allow)
        if name == "blocks" and format is not None:
            raise ValueError("format: the blocks analysis has no formats (its result is arrays)")
        try:
            self.run(a, on_loss=on_loss)
            return a.result() if name == "blocks" else a.write(format)
        finally:
            a.free()

    def blocks(self, *, on_loss: _t.Optional[str] = None) -> dict:
        """Basic-block and edge counts by module-relative (link) address:
        a dict with "modules" (list of dicts: path, name, base, size),
        "blocks" (BLOCK_DTYPE array: module, start, end, count, insns),
        "edges" (EDGE_DTYPE array: from_module, to_module, from, to, count,
        kind, taken), "branches", "insns"."""
        return self.analyze("blocks", on_loss=on_loss)

    def edges(self, *, on_loss: _t.Optional[str] = None) -> _np.ndarray:
        """The edges of blocks() (EDGE_DTYPE array)."""
        return self.blocks(on_loss=on_loss)["edges"]


class Analysis:
    """One analysis of lib/analysis, created by name:

    blocks                       counts (Analysis.result(): arrays)
    cov (module=)                drcov, lcov, cobertura
    annotate (function=)         text
    cfg (function=, max_blocks=) dot
    callgraph                    text, json, dot
    flame (title=, events=)      folded, speedscope (events=True), svg
    timeline (from_, to, min_dur)json, pftrace
    bolt (module=, pre_aggregated=) fdata
    pprof                        pb (gzipped), pb-raw
    check (allow=)               text, json, ...
    report, afdo, ... (function=, module=, events=)
                                 any other analysis of the library's list
                                 (btr_analysis_name), with its defaults

    Profiles take weight="insns" (default) or "time".  cov, annotate and
    cfg are built over a blocks analysis, created and run with them.  An
    option an analysis does not take, or a missing function=, is a
    TypeError; a bad value a ValueError.  An Analysis runs once."""

    PROFILES = ("callgraph", "flame", "timeline", "bolt", "pprof")
    NAMES = _lib.analysis_names()   # the library's list (btr_analysis_name)
    #: the options each analysis takes
    OPTIONS = {"blocks": (), "cov": ("module",), "annotate": ("function",), "cfg": ("function", "max_blocks"),
               "check": ("allow",), "callgraph": ("weight",), "flame": ("weight", "title", "events"),
               "timeline": ("weight", "from_", "to", "min_dur"), "bolt": ("weight", "module", "pre_aggregated"),
               "pprof": ("weight",)}
    #: what the other analyses of the library take (struct btr_analysis_args)
    GENERIC_OPTIONS = ("function", "module", "events")
    WEIGHTS = ("insns", "time")

    def __init__(self, name: str, *, module: _t.Optional[str] = None, function: _t.Optional[str] = None,
                 max_blocks: _t.Optional[int] = None, title: _t.Optional[str] = None,
                 events: _t.Optional[bool] = None, from_: _t.Optional[int] = None, to: _t.Optional[int] = None,
                 min_dur: _t.Optional[int] = None, pre_aggregated: _t.Optional[bool] = None,
                 weight: _t.Optional[str] = None, allow: _t.Optional[str] = None) -> None:
        self._h = None
        self._blocks = None
        self._ran = False
        name = _choice("name", name, self.NAMES)
        given = {k: v for k, v in (("module", module), ("function", function), ("max_blocks", max_blocks),
                                   ("title", title), ("events", events), ("from_", from_), ("to", to),
                                   ("min_dur", min_dur), ("pre_aggregated", pre_aggregated),
                                   ("weight", weight), ("allow", allow)) if v is not None}
        for k in given:
            if k not in self.OPTIONS.get(name, self.GENERIC_OPTIONS):
                takes = ", ".join(o + "=" for o in self.OPTIONS.get(name, self.GENERIC_OPTIONS)) or "no options"
                raise TypeError("analysis %s does not take %s= (it takes %s)" % (name, k, takes))
        if _lib.btr_analysis_needs(name.encode()) & _lib.NEEDS_FUNCTION and "function" not in given:
            raise TypeError("analysis %s needs function= (the function's name)" % name)
        for k in ("module", "function", "title", "allow"):
            if k in given:
                _str(k, given[k], none=False)
        for k in ("from_", "to", "min_dur"):
            if k in given:
                _int(k, given[k], 64)
        if "max_blocks" in given:
            _int("max_blocks", given["max_blocks"])
        for k in ("events", "pre_aggregated"):
            if k in given:
                given[k] = _flag(k, given[k])
        if "weight" in given:
            _choice("weight", given["weight"], self.WEIGHTS)
        self.name, self.opts = name, given
        self._blocks = Analysis("blocks") if _lib.btr_analysis_needs(name.encode()) & _lib.NEEDS_BLOCKS else None
        self._keep = []

    def __repr__(self) -> str:
        return "btr.Analysis(%r%s)" % (self.name, "".join(", %s=%r" % kv for kv in self.opts.items()))

    def _deps(self):
        return [self._blocks] if self._blocks else []

    def _create(self):
        if self._h is not None:
            return
        h = _ctypes.c_void_p()
        o, n = self.opts, self.name
        if n == "blocks":
            rc = _lib.btr_blocks_new(_ctypes.byref(h))
        elif n == "cov":
            rc = _lib.btr_cov_new(self._blocks._h, _ctypes.byref(h))
            if rc == 0 and o.get("module"):
                rc = _lib.btr_cov_set_module(h, o["module"].encode())
        elif n == "annotate":
            self._keep.append(o["function"].encode())   # borrowed by the analysis until it is freed
            rc = _lib.btr_annotate_new(self._blocks._h, self._keep[-1], _ctypes.byref(h))
        elif n == "cfg":
            self._keep.append(o["function"].encode())
            co = _lib.CfgOpts(sz=_ctypes.sizeof(_lib.CfgOpts), function=self._keep[-1],
                              max_blocks=o.get("max_blocks", 0))
            rc = _lib.btr_cfg_new(self._blocks._h, _ctypes.byref(co), _ctypes.byref(h))
        elif n == "check":
            co = _lib.CheckOpts(sz=_ctypes.sizeof(_lib.CheckOpts),
                                allow=o["allow"].encode() if o.get("allow") else None)
            rc = _lib.btr_check_new(_ctypes.byref(co), _ctypes.byref(h))
        elif n not in self.PROFILES:
            # any other analysis of the library, by name with its defaults
            self._keep += [o[k].encode() if o.get(k) else None for k in ("function", "module")]
            args = _lib.AnalysisArgs(sz=_ctypes.sizeof(_lib.AnalysisArgs), function=self._keep[-2],
                                     module=self._keep[-1], events=int(o.get("events", 0)),
                                     blocks=self._blocks._h if self._blocks else None)
            rc = _lib.btr_analysis_create(n.encode(), _ctypes.byref(args), _ctypes.byref(h))
        else:
            weight = self.WEIGHTS.index(o.get("weight", "insns"))
            if o.get("module"):
                self._keep.append(o["module"].encode())
            po = _lib.ProfileOpts(sz=_ctypes.sizeof(_lib.ProfileOpts), weight=weight, events=int(o.get("events", 0)),
                                  from_=o.get("from_", 0), to=o.get("to", 0), min_dur=o.get("min_dur", 0),
                                  module=self._keep[-1] if o.get("module") else None,
                                  pre_aggregated=int(o.get("pre_aggregated", 0)))
            rc = _lib.PROFILE_CONSTRUCTORS[n](_ctypes.byref(po), _ctypes.byref(h))
            if rc == 0 and n == "flame" and o.get("title"):
                rc = _lib.btr_flame_set_title(h, o["title"].encode())
        if rc < 0:
            if h.value:
                _lib.btr_analysis_free(h)
            raise BtrError(rc, "analysis %s" % n)
        self._h = h.value

    def write(self, format: _t.Optional[str] = None) -> bytes:
        """The result in @format (None: the default) as bytes."""
        format = _str("format", format)
        if self._h is None or not self._ran:
            raise ValueError("analysis %s has not run" % self.name)
        rc, data = _lib.to_bytes(lambda f: _lib.btr_analysis_write(self._h, f, format.encode() if format else None))
        if rc < 0:
            raise BtrError(rc, "%s%s" % (self.name, " --format %s" % format if format else ""))
        return data

    def result(self) -> _t.Any:
        """blocks: the counts as arrays (see Trace.blocks); other
        analyses: write() in their default format."""
        if self.name != "blocks":
            return self.write()
        if self._h is None or not self._ran:
            raise ValueError("analysis blocks has not run")
        rp = _lib.btr_blocks_get(self._h)
        if not rp:
            raise ValueError("the blocks analysis has no result")
        r = rp.contents
        mods = [{"path": r.modules[i].path.decode(errors="replace"), "name": r.modules[i].name.decode(errors="replace"),
                 "base": r.modules[i].base, "size": r.modules[i].size} for i in range(r.n_modules)]

        def arr(ptr, n, dt):
            if not n:
                return _np.empty(0, dtype=dt)
            return _np.frombuffer(_ctypes.string_at(ptr, n * dt.itemsize), dtype=dt).copy()

        return {"modules": mods, "blocks": arr(r.blocks, r.n_blocks, BLOCK_DTYPE),
                "edges": arr(r.edges, r.n_edges, EDGE_DTYPE), "branches": r.branches, "insns": r.insns,
                "has_insns": bool(r.has_insns), "unknown_start": r.unknown_start}

    def free(self) -> None:
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


_MERGE_KINDS = {"fdata": 1, "fdata-pa": 2, "pprof": 3, "folded": 4, "afdo": 5}


def merge(profiles: _t.Iterable[bytes], kind: _t.Optional[str] = None) -> bytes:
    """Merges profiles (bytes) of one kind ("folded", "pprof", "fdata",
    "fdata-pa", "afdo"; None: detected from the first) with btr's
    associative merge (`btr merge`) and returns the merged profile as bytes."""
    if isinstance(profiles, (bytes, bytearray, memoryview, str)):
        raise TypeError("profiles must be a sequence of bytes objects, not one %s" % type(profiles).__name__)
    profiles = list(profiles)
    for i, p in enumerate(profiles):
        if not isinstance(p, (bytes, bytearray, memoryview)):
            raise TypeError("profiles[%d] must be bytes, not %s" % (i, type(p).__name__))
    profiles = [bytes(p) for p in profiles]
    if kind is None:
        if not profiles:
            raise ValueError("merge: no profiles and no kind")
        k = _lib.btr_merge_detect(profiles[0], len(profiles[0]))
        if k not in _MERGE_KINDS.values():
            raise ValueError("profiles[0]: not a profile btr merges (give kind=, one of %s)" % ", ".join(_MERGE_KINDS))
    else:
        k = _MERGE_KINDS[_choice("kind", kind, tuple(_MERGE_KINDS))]
    m = _ctypes.c_void_p()
    _lib.check(_lib.btr_merge_new(k, _ctypes.byref(m)), "merge")
    try:
        for i, p in enumerate(profiles):
            _lib.check(_lib.btr_merge_add(m, p, len(p)), "merge: profiles[%d]" % i)
        rc, data = _lib.to_bytes(lambda f: _lib.btr_merge_write(m, f))
        _lib.check(rc, "merge")
        return data
    finally:
        _lib.btr_merge_free(m)
