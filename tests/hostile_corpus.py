#!/usr/bin/env python3
"""hostile_corpus.py LIBBTR OUTDIR [SCALE] - the hostile corpus of
tests/cli_hostile.sh: traces written by someone who wants to hurt the
reader (docs/reliability.md, "Bounds").  Files are written through
libbtr's own trace writer (ctypes, LIBBTR = build/libbtr.so.0), so they are
well-formed traces that say hostile things; perf.data files are written
here byte by byte (pipe mode).  Prints one line per file: NAME KIND, where
KIND is "trace".  Deterministic; SCALE (default 1) multiplies the bombs.

  code-bomb.btr       50 CODE records of 1 MiB at distinct addresses, the
                      same zero bytes under a new (wrong) hash each time
  code-bomb-hashed.btr  distinct 1 MiB blobs with correct hashes
  sym-bomb.btr        SYMBOL records with long distinct names, addresses
                      descending (each one out of order)
  modules-20k.btr     20,000 MODULE_LOAD records with 4,000-byte paths
  names.btr           control characters, ESC/OSC/BEL sequences,
                      newlines and semicolons in a command, a thread name,
                      module paths and symbol names hit by branches
  special-paths.btr   module paths naming a FIFO, /dev/zero, a symlink to
                      it, /dev/tty and a 10 GB sparse file
  jitdump-zero.data   perf.data whose MMAP names jit-1.dump -> /dev/zero
  jitdump-fifo.data   ... a FIFO named jit-2.dump
  jitdump-huge.data   ... a 10 GB sparse file named jit-3.dump
"""
import ctypes
import os
import struct
import sys

lib = ctypes.CDLL(sys.argv[1])
out = os.path.abspath(sys.argv[2])
scale = int(sys.argv[3]) if len(sys.argv) > 3 else 1
os.makedirs(out, exist_ok=True)

# ---- the writer's structures (include/btr/trace.h, include/btr/branch.h)
u8, u16, u32, u64, i32 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32
cp, vp = ctypes.c_char_p, ctypes.c_void_p


class Machine(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char * 16), ("cpu_vendor", ctypes.c_char * 16), ("family", u16),
                ("model", u16), ("stepping", u16), ("lbr_depth", u16), ("flags", u32), ("mtc", u8), ("cyc", u8),
                ("afc", u8), ("res", u8), ("nom", u32), ("c15a", u32), ("c15b", u32), ("tsc_hz", u64),
                ("af", u64 * 8), ("start", u64)]


class Module(ctypes.Structure):
    _fields_ = [("pid", u32), ("prot", u32), ("start", u64), ("size", u64), ("pgoff", u64), ("tsc", u64),
                ("build_id", u8 * 20), ("build_id_len", u8), ("path", cp)]


class Thread(ctypes.Structure):
    _fields_ = [("pid", u32), ("tid", u32), ("parent_tid", u32), ("exit_code", i32), ("tsc", u64),
                ("name", cp), ("end", u32), ("signo", i32)]


class Branch(ctypes.Structure):
    _fields_ = [("frm", u64), ("to", u64), ("tsc", u64), ("insns", u64), ("tid", u32), ("cycles", u32),
                ("flags", u16), ("kind", u8), ("reserved", u8), ("pid", u32)]


class Branches(ctypes.Structure):
    _fields_ = [("tid", u32), ("count", u32), ("branches", ctypes.POINTER(Branch))]


class Process(ctypes.Structure):
    _fields_ = [("pid", u32), ("ppid", u32), ("event", u32), ("reason", i32), ("tsc", u64), ("path", cp),
                ("args", cp), ("args_len", u32), ("detail", cp)]


class Code(ctypes.Structure):
    _fields_ = [("pid", u32), ("flags", u32), ("addr", u64), ("hash", u64), ("size", u32), ("data", vp)]


class Symbol(ctypes.Structure):
    _fields_ = [("pid", u32), ("source", u32), ("addr", u64), ("size", u64), ("name", cp)]


class U(ctypes.Union):
    _fields_ = [("machine", Machine), ("module", Module), ("thread", Thread), ("branches", Branches),
                ("process", Process), ("code", Code), ("sym", Symbol), ("pad", u8 * 1024)]


class Record(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("u", U)]


class Opts(ctypes.Structure):
    _fields_ = [("sz", ctypes.c_size_t), ("compress", ctypes.c_int), ("chunk_size", ctypes.c_size_t),
                ("no_sync", ctypes.c_int), ("min_fd", ctypes.c_int)]


MACHINE, MODULE_LOAD, THREAD_START, THREAD_NAME, BRANCHES, PROCESS, CODE, SYMBOL = 1, 2, 4, 6, 10, 13, 16, 17
KIND_CALL, KIND_RET, KIND_JMP = 4, 6, 8   # enum btr_branch_kind (include/btr/branch.h)
BF_TAKEN = 1


class Writer:
    def __init__(self, name, compress=3):
        self.path = os.path.join(out, name)
        o = Opts(ctypes.sizeof(Opts), compress, 0, 1, 0)
        self.w = vp()
        rc = lib.btr_trace_writer_new(self.path.encode(), ctypes.byref(o), ctypes.byref(self.w))
        assert rc == 0, "btr_trace_writer_new %s: %d" % (name, rc)
        self.keep = []
        r = Record(MACHINE)
        r.u.machine.backend = b"bts"
        self.put(r)

    def put(self, r):
        rc = lib.btr_trace_write(self.w, ctypes.byref(r))
        assert rc == 0, "btr_trace_write type %d: %d" % (r.type, rc)
        self.keep = []

    def module(self, pid, start, size, path):
        r = Record(MODULE_LOAD)
        r.u.module = Module(pid, 5, start, size, 0, 0, (u8 * 20)(), 0, path)
        self.put(r)

    def process(self, pid, path, args=b""):
        r = Record(PROCESS)
        r.u.process = Process(pid, 0, 1, 0, 0, path, args, len(args), b"")
        self.put(r)

    def thread(self, pid, tid, name=None):
        r = Record(THREAD_START)
        r.u.thread = Thread(pid, tid, 0, 0, 0, b"", 0, 0)
        self.put(r)
        if name is not None:
            r = Record(THREAD_NAME)
            r.u.thread = Thread(pid, tid, 0, 0, 0, name, 0, 0)
            self.put(r)

    def code(self, pid, addr, h, data):
        buf = ctypes.create_string_buffer(data, len(data))
        r = Record(CODE)
        r.u.code = Code(pid, 0, addr, h, len(data), ctypes.cast(buf, vp))
        self.put(r)

    def symbol(self, pid, addr, size, name):
        r = Record(SYMBOL)
        r.u.sym = Symbol(pid, 1, addr, size, name)
        self.put(r)

    def branches(self, tid, pairs):
        arr = (Branch * len(pairs))()
        for i, (frm, to, kind) in enumerate(pairs):
            arr[i] = Branch(frm, to, 0, 0, tid, 0, BF_TAKEN, kind, 0, 0)
        r = Record(BRANCHES)
        r.u.branches = Branches(tid, len(pairs), arr)
        self.put(r)

    def close(self):
        rc = lib.btr_trace_writer_close(self.w)
        assert rc == 0, "close %s: %d" % (self.path, rc)
        print(os.path.basename(self.path), "trace")


# FNV-1a 64 of @data followed by @zeros zero bytes (codeblobs_hash)
P = 0x100000001b3
M = (1 << 64) - 1


def fnv(data, zeros=0):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * P) & M
    return (h * pow(P, zeros, 1 << 64)) & M


MiB = 1 << 20

# ---- code-record bombs: 1 MiB records that compress to almost nothing
w = Writer("code-bomb.btr")
zero = bytes(MiB)
for i in range(50 * scale):
    w.code(1, 0x10000000 + i * MiB, 0x1000 + i, zero)   # the hash is never the bytes' hash
w.close()

w = Writer("code-bomb-hashed.btr")
for i in range(50 * scale):
    head = struct.pack("<Q", i)
    w.code(1, 0x10000000 + i * MiB, fnv(head, MiB - 8), head + bytes(MiB - 8))
w.close()

# ---- symbol bomb: long distinct names, each address below the last
w = Writer("sym-bomb.btr")
n = 60000 * scale
stem = b"jit_function_" + b"x" * 1000
for i in range(n):
    w.symbol(1, 0x20000000 + (n - i) * 16, 16, stem + b"%d" % i)
w.close()

# ---- 20,000 modules with 4,000-byte paths (none exists)
w = Writer("modules-20k.btr")
for i in range(20000):
    path = b"/nonexistent/" + b"p" * 3970 + b"/lib%05d.so" % i
    w.module(1, 0x100000000 + i * 0x10000, 0x1000, path)
w.close()

# ---- names that are terminal escapes and line-format syntax
EVIL = b"evil\x1b]0;pwned\x07\x1b[2J\x9b;semi;colon\nforged 999\r,comma"
w = Writer("names.btr", compress=0)
w.process(7, b"/bin/" + EVIL, b"prog\x00")
w.thread(7, 7, b"thr\x1b[31m\nX")
w.module(7, 0x400000, 0x1000, b"/tmp/" + EVIL + b".so")
# generated code with symbols named EVIL: main-ish caller calls into it
body = bytes([0xc3]) * 0x100   # ret
w.code(7, 0x30000000, fnv(body), body)
w.symbol(7, 0x30000000, 0x80, EVIL + b"_callee")
w.symbol(7, 0x30000080, 0x80, b"caller;" + EVIL)
pairs = []
for _ in range(50):
    pairs.append((0x30000090, 0x30000000, KIND_CALL))
    pairs.append((0x30000000, 0x30000095, KIND_RET))
w.branches(7, pairs)
w.close()

# ---- module paths that name special files (another user can plant these)
fifo = os.path.join(out, "fifo")
if not os.path.exists(fifo):
    os.mkfifo(fifo)
link = os.path.join(out, "link-to-zero")
if not os.path.lexists(link):
    os.symlink("/dev/zero", link)
huge = os.path.join(out, "huge.so")
with open(huge, "wb") as f:
    f.truncate(10 << 30)          # sparse: no disk used
w = Writer("special-paths.btr", compress=0)
for i, p in enumerate((fifo, "/dev/zero", link, "/dev/tty", huge)):
    w.module(1, 0x400000 + i * 0x100000, 0x1000, p.encode())
w.branches(1, [(0x400010, 0x400020, KIND_JMP)])
w.close()


# ---- perf.data (pipe mode) whose MMAP names a jitdump that is not one
def perf_data(name, jit_path):
    recs = []

    def rec(t, body, misc=0):
        body += bytes(-len(body) % 8)
        recs.append(struct.pack("<IHH", t, misc, 8 + len(body)) + body)
    # HEADER_ATTR: a VER0 attr (64 bytes): hardware cycles, sample IP|TID
    attr = struct.pack("<IIQQQQQIIQ", 0, 64, 0, 4000, 0x3, 0, 1 << 5, 0, 0, 0)
    rec(64, attr)
    fn = jit_path.encode() + b"\0"
    rec(1, struct.pack("<IIQQQ", 42, 42, 0x7f0000000000, 0x1000, 0) + fn, misc=2)   # MMAP, user
    rec(9, struct.pack("<QII", 0x7f0000000010, 42, 42), misc=2)                     # SAMPLE
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"PERFILE2" + struct.pack("<Q", 16) + b"".join(recs))
    print(name, "trace")


d = os.path.join(out, "jit")
os.makedirs(d, exist_ok=True)
for k, (name, make) in enumerate((("jitdump-zero.data", lambda p: os.symlink("/dev/zero", p)),
                                  ("jitdump-fifo.data", os.mkfifo),
                                  ("jitdump-huge.data", lambda p: open(p, "wb").truncate(10 << 30)))):
    p = os.path.join(d, "jit-%d.dump" % (k + 1))
    if not os.path.lexists(p):
        make(p)
    perf_data(name, p)
