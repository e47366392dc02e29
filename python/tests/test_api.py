"""The btr package's own tests (run by tests/cli_python_api.sh, from an
installed prefix and from a pip-installed virtual environment):

    python3 test_api.py DIR

DIR holds whole.btr (a trace of several chunks), cut.btr (whole.btr cut in
its middle), bad.btr (whole.btr with a damaged chunk), text.btr (not a
trace); FUNCTION (env BTR_TEST_FUNCTION, default "fib") is a function of the
traced program.  Prints "ok NAME" per check, "FAIL NAME: why" for a failure,
and exits 1 if any failed."""

import os
import pathlib
import pickle
import sys
import traceback
import warnings

import numpy as np

import btr

D = sys.argv[1]
FN = os.environ.get("BTR_TEST_FUNCTION", "fib")
WHOLE, CUT, BAD, TEXT = (os.path.join(D, n) for n in ("whole.btr", "cut.btr", "bad.btr", "text.btr"))
failed = 0


def case(name):
    def run(f):
        global failed
        try:
            f()
            print("ok", name)
        except Exception:
            failed += 1
            print("FAIL %s: %s" % (name, traceback.format_exc().strip().splitlines()[-1]))
            traceback.print_exc(file=sys.stderr)
        return f
    return run


def raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), "%r not in %r" % (w, str(e))
        return e
    except Exception as e:
        raise AssertionError("%s raised %s (%s), not %s" % (fn, type(e).__name__, e, exc.__name__))
    raise AssertionError("no %s" % exc.__name__)


def kw(name):
    return {"function": FN} if name in ("annotate", "cfg") else {}


# every reading call: name -> fn(trace, **on_loss) -> a size of the result
READERS = {
    "branches": lambda t, **k: sum(len(b) for b in t.branches(**k)),
    "branches(out=)": lambda t, **k: sum(len(b) for b in t.branches(out=np.empty(100, btr.BRANCH_DTYPE), **k)),
    "all_branches": lambda t, **k: len(t.all_branches(**k)),
    "to_pandas": lambda t, **k: len(t.to_pandas(**k)),
    "blocks": lambda t, **k: t.blocks(**k)["branches"],
    "edges": lambda t, **k: int(t.edges(**k)["count"].sum()),
    "run": lambda t, **k: t.run(btr.Analysis("flame"), btr.Analysis("blocks"), **k)["branches"],
}
for _n in btr.Analysis.NAMES:
    READERS["analyze(%s)" % _n] = (lambda n: lambda t, **k: (lambda r: len(r) if isinstance(r, bytes) else r["branches"])(
        t.analyze(n, **kw(n), **k)))(_n)


@case("a whole trace: nothing lost, every reading call without a warning")
def _():
    t = btr.open(WHOLE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sizes = {n: f(t) for n, f in READERS.items()}
    assert all(v > 0 for v in sizes.values()), sizes
    assert t.lost is False and t.losses == [] and t.gaps == [], (t.losses, t.gaps)
    assert t.stats["branches"] == sizes["branches"] and t.stats["lost_chunks"] == 0, t.stats


for _f in ("cut", "bad"):
    @case("%s trace: every reading call raises DataLostError by default, warns or ignores when asked" % _f)
    def _(f=_f):
        path = CUT if f == "cut" else BAD
        whole = READERS["branches"](btr.open(WHOLE))
        for n, call in READERS.items():
            t = btr.open(path)
            e = raises(btr.DataLostError, lambda: call(t), os.path.basename(path), "data lost")
            assert isinstance(e, btr.BtrError) and e.code < 0 and e.losses and e.path == path, (n, e.code, e.losses)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                got = call(btr.open(path), on_loss="warn")
            assert [x.category for x in w] == [btr.DataLossWarning], (n, [str(x.message) for x in w])
            assert "data lost" in str(w[0].message), str(w[0].message)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                assert call(btr.open(path, on_loss="ignore")) == got, n
                assert call(btr.open(path, on_loss="warn"), on_loss="ignore") == got, n
            if n == "branches":   # the partial result: the branches before the loss, no more
                assert 0 < got < whole, (got, whole)
        t = btr.open(path)
        assert t.lost is True and t.losses[0]["kind"] == ("end" if f == "cut" else "chunk"), t.losses
        assert t.stats["branches"] > 0
        if f == "bad":
            assert t.stats["lost_chunks"] == 1 and t.gaps[0]["error"] == "checksum mismatch", t.gaps


@case("btr.open checks the file: not a trace, missing, a directory")
def _():
    e = raises(btr.BtrError, lambda: btr.open(TEXT), "text.btr")
    assert e.code < 0
    raises(FileNotFoundError, lambda: btr.open(os.path.join(D, "none.btr")), "none.btr")
    raises(IsADirectoryError, lambda: btr.open(D))


@case("every exception type pickles with its class, code and message")
def _():
    loss = {"kind": "end", "pid": 0, "ppid": 0, "reason": -12, "error": "truncated input", "offset": 7,
            "comm": "", "detail": ""}
    for e in (btr.BtrError(-9, "x.btr"), btr.BtrError(), btr.DataLostError(-12, "y.btr", [loss]),
              btr.DataLossWarning("lost")):
        f = pickle.loads(pickle.dumps(e))
        assert type(f) is type(e) and str(f) == str(e), (type(f), str(f), str(e))
        if isinstance(e, btr.BtrError):
            assert f.code == e.code and f.what == e.what
    f = pickle.loads(pickle.dumps(btr.DataLostError(-12, "y.btr", [loss])))
    assert f.losses == [loss] and f.path == "y.btr" and "cut at offset 0x7" in str(f), str(f)
    # any code constructs (no ctypes.ArgumentError, no call out of the C int's range)
    for c in ("-9", None, -(1 << 31), 1 << 40, 3.5):
        assert str(btr.BtrError(c, "f")).startswith("f: "), c
    assert "bad magic" in str(btr.BtrError(-9))


# (call, exception, words the message has)
VALIDATION = [
    (lambda: btr.open(WHOLE, pid=2 ** 40), ValueError, ["pid"]),
    (lambda: btr.open(WHOLE, pid=-1), ValueError, ["pid"]),
    (lambda: btr.open(WHOLE, tid="1"), TypeError, ["tid"]),
    (lambda: btr.open(WHOLE, pid=True), TypeError, ["pid"]),
    (lambda: btr.open(123), TypeError, ["path"]),
    (lambda: btr.open(WHOLE, filter="nonsense"), ValueError, ["filter"]),
    (lambda: btr.open(WHOLE, debug_dirs="/usr/lib/debug"), TypeError, ["debug_dirs"]),
    (lambda: btr.open(WHOLE, elfs=["a:zz"]), ValueError, ["elfs[0]"]),
    (lambda: btr.open(WHOLE, on_loss="maybe"), ValueError, ["on_loss"]),
    (lambda: btr.open(WHOLE, colour="red"), TypeError, ["colour"]),
    (lambda: btr.open(WHOLE).branches(batch=0), ValueError, ["batch"]),
    (lambda: btr.open(WHOLE).branches(out=np.empty(4, np.uint8)), ValueError, ["out"]),
    (lambda: btr.open(WHOLE).branches(on_loss=1), TypeError, ["on_loss"]),
    (lambda: btr.open(WHOLE).symbolize("0x1139"), TypeError, ["addrs"]),
    (lambda: btr.open(WHOLE).symbolize([1, "2"]), TypeError, ["addrs[1]"]),
    (lambda: btr.open(WHOLE).symbolize(-1), ValueError, ["addrs"]),
    (lambda: btr.open(WHOLE).symbolize(1, pid=2 ** 33), ValueError, ["pid"]),
    (lambda: btr.open(WHOLE).analyze("annotate"), TypeError, ["function="]),
    (lambda: btr.open(WHOLE).analyze("cfg"), TypeError, ["function="]),
    (lambda: btr.open(WHOLE).analyze("flame", weight="cycles"), ValueError, ["weight"]),
    (lambda: btr.open(WHOLE).analyze("flame", function="main"), TypeError, ["function="]),
    (lambda: btr.open(WHOLE).analyze("flame", colour="red"), TypeError, ["colour"]),
    (lambda: btr.open(WHOLE).analyze("nosuch"), ValueError, ["nosuch"]),
    (lambda: btr.open(WHOLE).analyze("flame", format=3), TypeError, ["format"]),
    (lambda: btr.open(WHOLE).analyze("timeline", from_=-5), ValueError, ["from_"]),
    (lambda: btr.Analysis("flame", colour="red"), TypeError, ["colour"]),
    (lambda: btr.open(WHOLE).run(btr.Analysis("flame"), "blocks"), TypeError, ["analyses[1]"]),
    (lambda: btr.merge([b"a 1\n"], kind="zip"), ValueError, ["kind"]),
    (lambda: btr.merge([b"a 1\n", "b 1\n"], kind="folded"), TypeError, ["profiles[1]"]),
    (lambda: btr.merge(b"a 1\n"), TypeError, ["profiles"]),
]


@case("arguments are checked: TypeError / ValueError naming the argument (%d cases)" % len(VALIDATION))
def _():
    for i, (fn, exc, words) in enumerate(VALIDATION):
        try:
            raises(exc, fn, *words)
        except AssertionError as e:
            raise AssertionError("case %d: %s" % (i, e))


@case("paths: str, bytes and os.PathLike open the same trace")
def _():
    n = [READERS["branches"](btr.open(p)) for p in (WHOLE, os.fsencode(WHOLE), pathlib.Path(WHOLE))]
    assert n[0] == n[1] == n[2] > 0, n


@case("an Analysis runs once; a second run is refused")
def _():
    t, a = btr.open(WHOLE), btr.Analysis("flame")
    first = t.run(a)["branches"]
    assert first > 0
    raises(ValueError, lambda: t.run(a), "run already")


@case("the namespace: __version__, __all__, no numpy/os/ctypes/typing names")
def _():
    pub = {n for n in dir(btr) if not n.startswith("_")}
    assert not pub & {"np", "os", "ctypes", "typing", "warnings", "mmap", "operator", "annotations"}, pub
    assert set(btr.__all__) - {"__version__"} <= pub, set(btr.__all__) - pub
    assert isinstance(btr.__version__, str) and btr.__version__.count(".") == 2
    assert os.path.exists(os.path.join(os.path.dirname(btr.__file__), "py.typed"))
    import inspect
    for f in (btr.open, btr.Trace.__init__, btr.Trace.analyze, btr.Analysis.__init__):
        assert not any(p.kind == p.VAR_KEYWORD for p in inspect.signature(f).parameters.values()), f


@case("branches(out=): every batch is a view of out (no allocation per batch)")
def _():
    out = np.empty(256, btr.BRANCH_DTYPE)
    t = btr.open(WHOLE)
    whole = np.concatenate(list(t.branches(batch=256)))
    got = []
    for b in t.branches(out=out):
        assert np.shares_memory(b, out) and len(b) <= 256
        got.append(b.copy())
    assert np.array_equal(np.concatenate(got), whole)
    assert np.array_equal(t.all_branches(), whole)


@case("to_pandas: categorical kinds, module names, symbols as symbolize says")
def _():
    import pandas as pd
    t = btr.open(WHOLE)
    a = t.all_branches()
    df = t.to_pandas(symbols=True)
    assert len(df) == len(a) and isinstance(df["kind"].dtype, pd.CategoricalDtype)
    assert list(df["kind"].cat.categories) == btr.KINDS
    assert [btr.kind_name(k) for k in a["kind"][:500]] == list(df["kind"][:500])
    for i in range(0, len(a), max(1, len(a) // 50)):
        pid, frm = int(a["pid"][i]), int(a["from"][i])
        mods = [m for m in t.modules() if m["pid"] == pid and m["start"] <= frm < m["start"] + m["size"]]
        want = mods[-1]["path"] if mods else None
        got = df["from_module"].iloc[i]
        assert (got if isinstance(got, str) else None) == want, (i, hex(frm), got, want)
        assert df["from_sym"].iloc[i] == t.symbolize(frm, pid=pid), i
    assert df["from_module"].notna().sum() > len(df) // 2



@case("annotate and cfg keep their function name for the run: objects of its size made in between do not change it")
def _():
    # The analysis borrows the name's bytes until it is freed: a temporary
    # would be freed at once, its memory given to the next object of its
    # size.  Between the analysis' creation (in run) and the pass, make
    # 100000 of them, so that a freed name is overwritten for certain.
    real = btr._lib.btr_analysis_run

    def churn(*args):
        junk = [("X" * len(FN)).encode() for _ in range(100000)]
        rc = real(*args)
        del junk
        return rc
    btr._lib.btr_analysis_run = churn
    try:
        t = btr.open(WHOLE)
        for n in ("annotate", "cfg"):
            a = btr.Analysis(n, function=FN)
            t.run(a)
            out = a.write()
            assert out and FN.encode() in (out if isinstance(out, bytes) else out.encode()), (n, out[:200])
    finally:
        btr._lib.btr_analysis_run = real


sys.exit(1 if failed else 0)
