"""ctypes declarations of the parts of libbtr's public API (include/btr/) the
package uses.  The structures mirror the C headers field for field; a test
(tests/cli_python.sh) checks the sizes the library reports against them."""

import ctypes
import ctypes.util
import os
import sys

try:
    import numpy as np
except ImportError as _e:   # the interpreter's site has no numpy: say which interpreter
    raise ImportError("btr needs numpy, which %s (Python %s) cannot import (%s); install numpy for this "
                      "interpreter (Debian: apt install python3-numpy, for /usr/bin/python3; a venv: "
                      "python -m venv --system-site-packages, or pip install numpy) or run the "
                      "interpreter that has it (docs/python.md)" %
                      (sys.executable or "this interpreter", sys.version.split()[0], _e)) from None

# ---- finding libbtr.so ----------------------------------------------------


def _pkgconfig_libdir():
    """libdir of pkg-config's btr (PKG_CONFIG_PATH as set), or None."""
    import shutil
    import subprocess
    exe = shutil.which("pkg-config") or shutil.which("pkgconf")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--variable=libdir", "btr"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    d = r.stdout.decode(errors="replace").strip()
    return d if r.returncode == 0 and d else None


def _candidates():
    """Where libbtr.so.0 may be, in order: $BTR_LIBRARY (alone); the prefix
    this package was installed into by `make install`
    (PREFIX/lib/python3/dist-packages/btr -> PREFIX/lib); the lib directory
    recorded in _install.py (by `make install`, or by `pip install` from
    pkg-config or BTR_LIBRARY at build time); pkg-config's libdir now; the
    Python environment's prefix; the dynamic linker's search path."""
    env = os.environ.get("BTR_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "..", "..", "..", "libbtr.so.0")
    try:
        from . import _install  # written at install time: the lib dir of the prefix
        yield getattr(_install, "LIBRARY", None) or os.path.join(_install.LIBDIR, "libbtr.so.0")
    except (ImportError, AttributeError):
        pass
    d = _pkgconfig_libdir()
    if d:
        yield os.path.join(d, "libbtr.so.0")
    for pre in dict.fromkeys((sys.prefix, sys.base_prefix)):
        yield os.path.join(pre, "lib", "libbtr.so.0")
    found = ctypes.util.find_library("btr")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (no such file)" % path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("btr: libbtr.so.0 not found; tried: " + "; ".join(tried) +
                      " (set BTR_LIBRARY to its path, or PKG_CONFIG_PATH to the directory of its btr.pc)")


lib, LIBRARY_PATH = _load()
libc = ctypes.CDLL(None)

# ---- structures -----------------------------------------------------------

c_u8, c_u16, c_u32, c_u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
c_i32, c_size = ctypes.c_int32, ctypes.c_size_t
c_char_p, c_void_p = ctypes.c_char_p, ctypes.c_void_p

#: numpy dtype of struct btr_branch (include/btr/branch.h), 48 bytes
BRANCH_DTYPE = np.dtype([
    ("from", "<u8"), ("to", "<u8"), ("tsc", "<u8"), ("insns", "<u8"),
    ("tid", "<u4"), ("cycles", "<u4"), ("flags", "<u2"), ("kind", "u1"),
    ("reserved", "u1"), ("pid", "<u4"),
])
assert BRANCH_DTYPE.itemsize == 48


class Filter(ctypes.Structure):
    _fields_ = [("kinds", c_u32), ("priv", c_u8)]


class StreamElf(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("base", c_u64), ("has_base", ctypes.c_int)]


class Machine(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char * 16), ("cpu_vendor", ctypes.c_char * 16)]


class RecModule(ctypes.Structure):
    _fields_ = [("pid", c_u32), ("prot", c_u32), ("start", c_u64), ("size", c_u64), ("pgoff", c_u64),
                ("tsc", c_u64), ("build_id", c_u8 * 20), ("build_id_len", c_u8), ("path", c_char_p)]


class RecThread(ctypes.Structure):
    _fields_ = [("pid", c_u32), ("tid", c_u32), ("parent_tid", c_u32), ("exit_code", c_i32), ("tsc", c_u64),
                ("name", c_char_p), ("end", c_u32), ("signo", c_i32)]


class RecExit(ctypes.Structure):
    _fields_ = [("pid", c_u32), ("tid", c_u32), ("code", c_i32), ("signo", c_i32), ("ip", c_u64),
                ("addr", c_u64), ("tsc", c_u64)]


class RecProcess(ctypes.Structure):
    _fields_ = [("pid", c_u32), ("ppid", c_u32), ("event", c_u32), ("reason", c_i32), ("tsc", c_u64),
                ("path", c_char_p), ("args", ctypes.POINTER(ctypes.c_char)), ("args_len", c_u32),
                ("detail", c_char_p)]


class _RecUnion(ctypes.Union):
    _fields_ = [("machine", Machine), ("module", RecModule), ("thread", RecThread), ("exit", RecExit),
                ("process", RecProcess), ("_pad", c_u8 * 256)]


class Record(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("u", _RecUnion)]


class StreamEvent(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("tid", c_u32), ("pid", c_u32), ("reason", ctypes.c_int),
                ("offset", c_u64), ("rec", ctypes.POINTER(Record)), ("flow", c_void_p), ("path", c_char_p),
                ("image", c_void_p)]


EVENT_CB = ctypes.CFUNCTYPE(ctypes.c_int, c_void_p, ctypes.POINTER(StreamEvent))


class StreamOpts(ctypes.Structure):
    _fields_ = [("sz", c_size), ("filter", ctypes.POINTER(Filter)), ("root", c_char_p),
                ("debug_dirs", ctypes.POINTER(c_char_p)), ("elfs", ctypes.POINTER(StreamElf)),
                ("n_elfs", ctypes.c_uint), ("pid", c_u32), ("tid", c_u32),
                ("branch", c_void_p), ("event", EVENT_CB), ("insn", c_void_p), ("ctx", c_void_p),
                ("branches", c_void_p), ("progress", c_void_p), ("progress_ctx", c_void_p),
                ("skip_unselected", ctypes.c_int), ("counts", c_void_p), ("fold_ok", c_void_p),
                ("fold_block", c_void_p), ("jobs", ctypes.c_uint), ("shard", ctypes.c_uint),
                ("shards", ctypes.c_uint)]


class StreamStats(ctypes.Structure):
    _fields_ = [("records", c_u64), ("pt_bytes", c_u64), ("bts_bytes", c_u64), ("lbr_snapshots", c_u64),
                ("branches", c_u64), ("filtered", c_u64), ("gaps", c_u64), ("lost_chunks", c_u64),
                ("modules_loaded", ctypes.c_uint), ("modules_missing", ctypes.c_uint),
                ("buildid_mismatch", ctypes.c_uint), ("read_error", ctypes.c_int), ("pt_blocks", c_u64)]


class StreamLoss(ctypes.Structure):
    _fields_ = [("kind", c_u32), ("pid", c_u32), ("ppid", c_u32), ("reason", c_i32), ("offset", c_u64),
                ("comm", ctypes.c_char * 32), ("detail", ctypes.c_char * 64)]


class RunInfo(ctypes.Structure):
    _fields_ = [("sz", c_size), ("lost", ctypes.c_int), ("status", ctypes.c_int), ("backend", ctypes.c_char * 32),
                ("stats", StreamStats), ("losses", c_void_p), ("max_losses", c_size), ("n_losses", c_size)]


class ProfileOpts(ctypes.Structure):
    _fields_ = [("sz", c_size), ("weight", ctypes.c_int), ("events", ctypes.c_int), ("from_", c_u64),
                ("to", c_u64), ("min_dur", c_u64), ("module", c_char_p), ("pre_aggregated", ctypes.c_int)]


class CheckOpts(ctypes.Structure):
    _fields_ = [("sz", c_size), ("allow", c_char_p)]


class CfgOpts(ctypes.Structure):
    _fields_ = [("sz", c_size), ("function", c_char_p), ("max_blocks", ctypes.c_uint), ("diff", c_void_p)]


class AnalysisArgs(ctypes.Structure):
    _fields_ = [("sz", c_size), ("blocks", c_void_p), ("function", c_char_p), ("module", c_char_p),
                ("events", ctypes.c_int)]


class BlocksModule(ctypes.Structure):
    _fields_ = [("path", c_char_p), ("name", c_char_p), ("base", c_u64), ("size", c_u64)]


class BlocksResult(ctypes.Structure):
    _fields_ = [("modules", ctypes.POINTER(BlocksModule)), ("n_modules", c_size),
                ("blocks", c_void_p), ("n_blocks", c_size), ("edges", c_void_p), ("n_edges", c_size),
                ("branches", c_u64), ("insns", c_u64), ("has_insns", ctypes.c_int), ("unknown_start", c_u64)]


#: numpy dtype of struct btr_block (include/btr/blocks.h)
BLOCK_DTYPE = np.dtype({"names": ["module", "start", "end", "count", "insns"],
                        "formats": ["<u4", "<u8", "<u8", "<u8", "<u8"],
                        "offsets": [0, 8, 16, 24, 32], "itemsize": 40})
#: numpy dtype of struct btr_edge
EDGE_DTYPE = np.dtype({"names": ["from_module", "to_module", "from", "to", "count", "kind", "taken"],
                       "formats": ["<u4", "<u4", "<u8", "<u8", "<u8", "u1", "u1"],
                       "offsets": [0, 4, 8, 16, 24, 32, 33], "itemsize": 40})


class Symbol(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("addr", c_u64), ("size", c_u64), ("module", c_char_p)]


class MergeKind:
    FDATA, FDATA_PA, PPROF, FOLDED = 1, 2, 3, 4


# ---- functions ------------------------------------------------------------

def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P = c_void_p
PP = ctypes.POINTER(c_void_p)
btr_version = _fn("btr_version", c_char_p)
btr_errstr = _fn("btr_errstr", c_char_p, ctypes.c_int)
btr_filter_parse = _fn("btr_filter_parse", ctypes.c_int, c_char_p, ctypes.POINTER(Filter))
btr_branch_kind_name = _fn("btr_branch_kind_name", c_char_p, ctypes.c_int)
btr_batch_open = _fn("btr_batch_open", ctypes.c_int, c_char_p, ctypes.POINTER(StreamOpts), ctypes.c_uint, PP)
btr_batch_read = _fn("btr_batch_read", ctypes.c_long, P, P, c_size)
btr_batch_finish = _fn("btr_batch_finish", ctypes.c_int, P)
btr_batch_stream = _fn("btr_batch_stream", P, P)
btr_batch_free = _fn("btr_batch_free", None, P)
btr_stream_image_pid = _fn("btr_stream_image_pid", P, P, c_u32)
btr_stream_get_stats = _fn("btr_stream_get_stats", None, P, ctypes.POINTER(StreamStats))
btr_stream_backend = _fn("btr_stream_backend", c_char_p, P)
btr_stream_data_lost = _fn("btr_stream_data_lost", ctypes.c_int, P)
btr_stream_losses = _fn("btr_stream_losses", c_size, P, ctypes.POINTER(StreamLoss), c_size)
btr_image_symbolize = _fn("btr_image_symbolize", None, P, c_u64, c_char_p, c_size)
btr_image_symbol = _fn("btr_image_symbol", ctypes.c_int, P, c_u64, ctypes.POINTER(Symbol))
btr_image_line = _fn("btr_image_line", ctypes.c_int, P, c_u64, ctypes.POINTER(c_char_p), ctypes.POINTER(ctypes.c_int))
btr_analysis_run = _fn("btr_analysis_run", ctypes.c_int, c_char_p, ctypes.POINTER(StreamOpts),
                       ctypes.POINTER(c_void_p), c_size, ctypes.POINTER(RunInfo))
btr_analysis_write = _fn("btr_analysis_write", ctypes.c_int, P, P, c_char_p)
btr_analysis_free = _fn("btr_analysis_free", None, P)
btr_analysis_name = _fn("btr_analysis_name", c_char_p, c_size)
btr_analysis_needs = _fn("btr_analysis_needs", ctypes.c_uint, c_char_p)
btr_analysis_create = _fn("btr_analysis_create", ctypes.c_int, c_char_p, ctypes.POINTER(AnalysisArgs), PP)
NEEDS_BLOCKS, NEEDS_FUNCTION = 1, 2   # BTR_ANALYSIS_NEEDS_*


def analysis_names():
    """The library's analyses (btr_analysis_name: lib/analysis/registry.h)."""
    names = []
    while True:
        n = btr_analysis_name(len(names))
        if n is None:
            return tuple(names)
        names.append(n.decode())


btr_blocks_new = _fn("btr_blocks_new", ctypes.c_int, PP)
btr_blocks_get = _fn("btr_blocks_get", ctypes.POINTER(BlocksResult), P)
btr_cov_new = _fn("btr_cov_new", ctypes.c_int, P, PP)
btr_cov_set_module = _fn("btr_cov_set_module", ctypes.c_int, P, c_char_p)
btr_annotate_new = _fn("btr_annotate_new", ctypes.c_int, P, c_char_p, PP)
btr_cfg_new = _fn("btr_cfg_new", ctypes.c_int, P, ctypes.POINTER(CfgOpts), PP)
btr_check_new = _fn("btr_check_new", ctypes.c_int, ctypes.POINTER(CheckOpts), PP)
PROFILE_CONSTRUCTORS = {}
for _n in ("callgraph", "flame", "timeline", "bolt", "pprof"):
    PROFILE_CONSTRUCTORS[_n] = _fn("btr_%s_new" % _n, ctypes.c_int, ctypes.POINTER(ProfileOpts), PP)
btr_flame_set_title = _fn("btr_flame_set_title", ctypes.c_int, P, c_char_p)
btr_merge_new = _fn("btr_merge_new", ctypes.c_int, ctypes.c_int, PP)
btr_merge_free = _fn("btr_merge_free", None, P)
btr_merge_add = _fn("btr_merge_add", ctypes.c_int, P, c_char_p, c_size)
btr_merge_write = _fn("btr_merge_write", ctypes.c_int, P, P)
btr_merge_detect = _fn("btr_merge_detect", ctypes.c_int, c_char_p, c_size)

del _n


def _libc_fn(name, restype, *argtypes):
    f = getattr(libc, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


open_memstream = _libc_fn("open_memstream", P, ctypes.POINTER(c_void_p), ctypes.POINTER(c_size))
libc_fclose = _libc_fn("fclose", ctypes.c_int, P)
libc_free = _libc_fn("free", None, P)


def errstr(code):
    """btr_errstr(@code) for any value (an int out of the C int's range,
    or not an int at all, is "unknown error" without calling the library)."""
    try:
        c = int(code)
    except (TypeError, ValueError):
        return "unknown error"
    if not -(1 << 31) < c < (1 << 31):
        return "unknown error"
    return btr_errstr(c).decode(errors="replace")


class BtrError(Exception):
    """An error of libbtr: .code is the negative enum btr_error, .what
    names what failed (the file, the analysis).  Pickles with its code
    (a Dask worker's error arrives as a BtrError)."""

    def __init__(self, code=-1, what=""):
        self.code = code
        self.what = what
        msg = errstr(code)
        super().__init__("%s: %s" % (what, msg) if what else msg)

    def __reduce__(self):
        return (type(self), (self.code, self.what), self.__dict__)


LOSS_KINDS = {1: "chunk", 2: "end", 3: "cut", 4: "missing", 5: "flow"}


def loss_dict(x):
    """struct btr_stream_loss as a dict."""
    return {"kind": LOSS_KINDS.get(x.kind, "?"), "pid": x.pid, "ppid": x.ppid, "reason": x.reason,
            "error": errstr(x.reason) if x.reason else "", "offset": x.offset,
            "comm": x.comm.decode(errors="replace"), "detail": x.detail.decode(errors="replace")}


def describe_loss(d):
    """One loss (loss_dict) in words, as `btr report` says it."""
    k = d["kind"]
    who = "process %d%s" % (d["pid"], " (%s)" % d["comm"] if d["comm"] else "")
    if k == "chunk":
        s = "a damaged chunk at offset 0x%x was skipped" % d["offset"]
    elif k == "end":
        s = "the trace is cut at offset 0x%x" % d["offset"]
    elif k == "cut":
        s = "%s: the trace ends before its exit" % who
    elif k == "missing":
        s = "%s: no trace" % who
    else:
        s = "thread %d: flow unknown" % d["pid"]
    if d["error"]:
        s += " (%s)" % d["error"]
    if d["detail"]:
        s += ": " + d["detail"]
    return s


class DataLostError(BtrError):
    """Trace data was lost (a cut or damaged file, a process whose trace
    the recorder lost): .losses lists the causes (dicts: kind, pid, ppid,
    reason, error, offset, comm, detail), .path the file.  Raised by the
    reading calls after the data before the loss was read (on_loss="raise")."""

    def __init__(self, code=-1, what="", losses=()):
        self.losses = list(losses)
        BtrError.__init__(self, code, what)
        why = "; ".join(describe_loss(d) for d in self.losses[:4])
        if len(self.losses) > 4:
            why += "; and %d more" % (len(self.losses) - 4)
        self.args = ("%s: data lost%s" % (what or "trace", ": " + why if why else ""),)

    @property
    def path(self):
        return self.what

    def __reduce__(self):
        return (type(self), (self.code, self.what, self.losses), self.__dict__)

    def __str__(self):
        return self.args[0]


class DataLossWarning(UserWarning):
    """Trace data was lost and the call was asked (on_loss="warn") to go on."""


def check(rc, what=""):
    if rc < 0:
        raise BtrError(rc, what)
    return rc


def stream_losses(stream):
    """The losses of @stream as dicts ([] when nothing was lost)."""
    if not btr_stream_data_lost(stream):
        return []
    n = btr_stream_losses(stream, None, 0)
    arr = (StreamLoss * max(n, 1))()
    n = btr_stream_losses(stream, arr, n)
    return [loss_dict(arr[i]) for i in range(min(n, len(arr)))]


def stats_dict(st):
    return {f: getattr(st, f) for f, _ in StreamStats._fields_}


def to_bytes(write):
    """Runs write(FILE *) on an in-memory FILE and returns what it wrote."""
    ptr, size = c_void_p(), c_size()
    f = open_memstream(ctypes.byref(ptr), ctypes.byref(size))
    if not f:
        raise MemoryError("open_memstream")
    try:
        rc = write(f)
    finally:
        libc_fclose(f)
        data = ctypes.string_at(ptr, size.value) if ptr.value else b""
        libc_free(ptr)
    return rc, data
