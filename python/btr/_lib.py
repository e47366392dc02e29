"""ctypes declarations of the parts of libbtr's public API (include/btr/) the
package uses.  The structures mirror the C headers field for field; a test
(tests/cli_python.sh) checks the sizes the library reports against them."""

import ctypes
import ctypes.util
import os

import numpy as np

# ---- finding libbtr.so ----------------------------------------------------


def _candidates():
    env = os.environ.get("BTR_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    # installed: PREFIX/lib/python3/dist-packages/btr -> PREFIX/lib
    yield os.path.join(here, "..", "..", "..", "libbtr.so.0")
    try:
        from . import _install  # written by `make install`: the prefix's lib dir
        yield os.path.join(_install.LIBDIR, "libbtr.so.0")
    except ImportError:
        pass
    found = ctypes.util.find_library("btr")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("btr: libbtr.so.0 not found; tried: " + "; ".join(tried) +
                      " (set BTR_LIBRARY to its path)")


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
                ("fold_block", c_void_p), ("jobs", ctypes.c_uint)]


class StreamStats(ctypes.Structure):
    _fields_ = [("records", c_u64), ("pt_bytes", c_u64), ("bts_bytes", c_u64), ("lbr_snapshots", c_u64),
                ("branches", c_u64), ("filtered", c_u64), ("gaps", c_u64), ("lost_chunks", c_u64),
                ("modules_loaded", ctypes.c_uint), ("modules_missing", ctypes.c_uint),
                ("buildid_mismatch", ctypes.c_uint), ("read_error", ctypes.c_int), ("pt_blocks", c_u64)]


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
btr_image_symbolize = _fn("btr_image_symbolize", None, P, c_u64, c_char_p, c_size)
btr_image_symbol = _fn("btr_image_symbol", ctypes.c_int, P, c_u64, ctypes.POINTER(Symbol))
btr_image_line = _fn("btr_image_line", ctypes.c_int, P, c_u64, ctypes.POINTER(c_char_p), ctypes.POINTER(ctypes.c_int))
btr_analysis_run = _fn("btr_analysis_run", ctypes.c_int, c_char_p, ctypes.POINTER(StreamOpts),
                       ctypes.POINTER(c_void_p), c_size, ctypes.POINTER(RunInfo))
btr_analysis_write = _fn("btr_analysis_write", ctypes.c_int, P, P, c_char_p)
btr_analysis_free = _fn("btr_analysis_free", None, P)
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


class BtrError(Exception):
    """An error of libbtr: .code is the negative enum btr_error."""

    def __init__(self, code, what=""):
        self.code = code
        msg = btr_errstr(code).decode(errors="replace")
        super().__init__("%s: %s" % (what, msg) if what else msg)


def check(rc, what=""):
    if rc < 0:
        raise BtrError(rc, what)
    return rc


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
