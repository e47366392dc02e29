#!/usr/bin/env python3
"""tests/mutants/run.py - the mutation check (`make mutants`).

Each mutant of tests/mutants/list is a realistic bug made by hand: a file,
an exact text found once in it, its replacement, and the test family (a
`ctest -R` regex) that should catch it.  This script applies each mutant
alone to a scratch copy of the source tree (MUTANTS_DIR/src; the working
tree is never written, so Ctrl-C cannot leave it modified), rebuilds that
copy incrementally, runs the family and restores the file.  A mutant is
killed when its family fails (or times out); it survives when the family
passes.  The score is killed / all; the exit status is 1 below --min
(default 90%), 2 on a bad list or a family that fails without any mutant.

    tests/mutants/run.py [--dir D] [--jobs N] [--min PCT] [--no-baseline] [ID_REGEX]

Before the mutants, each family is run once on the unmutated copy (the
baseline): a family that fails already would kill every mutant for
nothing, so that is an error.  --no-baseline skips it.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
# built for every mutant: the CLI (and libbtr.so, the Python binding's), the
# agents; the C tests of a family are added by name
CORE = ["btr-cli", "btr-qemu", "btr-step-agent", "btr-insn-count"]


def parse_list(path):
    """Blocks of `key: value` lines separated by blank lines; `#` comments.
    from/to take the escapes \\n (newline), \\t (tab), \\\\ (a backslash)."""
    muts, cur = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            if not line.strip():
                if cur:
                    muts.append(cur)
                cur = {}
                continue
            m = re.match(r"(\w+): ?(.*)$", line)
            if not m:
                sys.exit("%s:%d: not 'key: value': %s" % (path, n, line))
            k, v = m.group(1), m.group(2)
            if k in ("from", "to"):
                v = re.sub(r"\\([\\nt])", lambda e: {"n": "\n", "t": "\t", "\\": "\\"}[e.group(1)], v)
            if k in cur:
                sys.exit("%s:%d: %s given twice in one mutant" % (path, n, k))
            cur[k] = v
            cur.setdefault("line", n)
    if cur:
        muts.append(cur)
    for m in muts:
        for k in ("id", "file", "from", "to", "tests"):
            if k not in m:
                sys.exit("%s:%d: mutant without '%s'" % (path, m["line"], k))
    ids = [m["id"] for m in muts]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        sys.exit("%s: ids given twice: %s" % (path, " ".join(sorted(dup))))
    return muts


def tracked_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=SRC,
                         check=True, capture_output=True).stdout
    return [p for p in out.decode().split("\0") if p]


def sync(dst):
    """Copies the files that differ (content), so that untouched files keep
    their mtimes and the rebuild stays incremental."""
    n = 0
    for rel in tracked_files():
        s, d = os.path.join(SRC, rel), os.path.join(dst, rel)
        if not os.path.isfile(s) or os.path.islink(s):
            continue
        with open(s, "rb") as f:
            data = f.read()
        try:
            with open(d, "rb") as f:
                if f.read() == data:
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(d), exist_ok=True)
        with open(d, "wb") as f:
            f.write(data)
        shutil.copymode(s, d)
        n += 1
    return n


def run(cmd, log, timeout=None, **kw):
    with open(log, "ab") as f:
        f.write(("\n$ %s\n" % " ".join(cmd)).encode())
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, **kw).returncode
        except subprocess.TimeoutExpired:
            return 124


def family_tests(build, regex):
    out = subprocess.run(["ctest", "-N", "-R", regex], cwd=build, capture_output=True, text=True).stdout
    return re.findall(r"Test\s+#\d+: (\S+)", out)


def targets_for(tests):
    t = list(CORE)
    for name in tests:
        if name.startswith("test_"):
            t.append(name)
        elif name.startswith("fuzz_regress_"):
            t.append("replay_" + name[len("fuzz_regress_"):])
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("MUTANTS_DIR", os.path.join(SRC, "build-mutants")))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    ap.add_argument("--min", type=float, default=90.0)
    ap.add_argument("--timeout", type=int, default=900, help="seconds for one family run")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--list", default=os.path.join(HERE, "list"))
    ap.add_argument("only", nargs="?", help="regex of the ids to try")
    a = ap.parse_args()
    t0 = time.time()
    muts = parse_list(a.list)
    if a.only:
        muts = [m for m in muts if re.search(a.only, m["id"])]
    if not muts:
        sys.exit("no mutant matches")
    src, build = os.path.join(a.dir, "src"), os.path.join(a.dir, "build")
    os.makedirs(src, exist_ok=True)
    log = os.path.join(a.dir, "log.txt")
    open(log, "w").close()
    n = sync(src)
    shared = os.path.realpath(os.path.join(SRC, "..", "shared"))
    link = os.path.join(a.dir, "shared")
    if os.path.isdir(shared) and not os.path.lexists(link):
        os.symlink(shared, link)
    print("mutants: %d, scratch copy %s (%d files updated), log %s" % (len(muts), a.dir, n, log), flush=True)
    # every mutant's text must be found exactly once in the unmutated copy
    bad = 0
    for m in muts:
        with open(os.path.join(src, m["file"]), encoding="utf-8", errors="surrogateescape") as f:
            c = f.read().count(m["from"])
        if c != 1:
            print("%s: its text is found %d times in %s (must be once)" % (m["id"], c, m["file"]))
            bad += 1
    if bad:
        return 2
    env = dict(os.environ, BTR_REQUIRE_ORACLES="1")
    env.pop("BTR_ALLOW_MISSING_ORACLES", None)
    if run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Debug"], log) or \
       run(["cmake", "--build", build, "-j", str(a.jobs)], log):
        print("the unmutated copy does not build: see %s" % log)
        return 2
    fams = {}
    for m in muts:
        tests = family_tests(build, m["tests"])
        if not tests:
            print("%s: no test matches '%s'" % (m["id"], m["tests"]))
            return 2
        fams[m["tests"]] = tests
    ctest = ["ctest", "--output-on-failure", "--timeout", str(a.timeout), "-R"]
    if not a.no_baseline:
        for fam in fams:
            rc = run(ctest + [fam], log, cwd=build, env=env)
            if rc:
                print("baseline: family '%s' fails without a mutant (see %s)" % (fam, log))
                return 2
        print("baseline: %d families pass (%.0f s)" % (len(fams), time.time() - t0), flush=True)

    state = {"file": None, "data": None}

    def restore():
        if state["file"] is not None:
            with open(state["file"], "wb") as f:
                f.write(state["data"])
            state["file"] = None

    def on_signal(sig, frame):
        restore()
        print("\ninterrupted: the scratch copy is restored")
        sys.exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    killed, survived, broken = [], [], []
    for i, m in enumerate(muts, 1):
        path = os.path.join(src, m["file"])
        with open(path, "rb") as f:
            orig = f.read()
        text = orig.decode("utf-8", "surrogateescape")
        state["file"], state["data"] = path, orig
        try:
            with open(path, "wb") as f:
                f.write(text.replace(m["from"], m["to"], 1).encode("utf-8", "surrogateescape"))
            t1 = time.time()
            if run(["cmake", "--build", build, "-j", str(a.jobs), "--target"] + targets_for(fams[m["tests"]]), log):
                verdict = "does not build"
                broken.append(m["id"])
            else:
                rc = run(ctest + [m["tests"]], log, cwd=build, env=env)
                verdict = "killed" if rc else "SURVIVED"
                (killed if rc else survived).append(m["id"])
        finally:
            restore()
        print("[%2d/%d] %-28s %-14s %-30s %4.0f s" % (i, len(muts), m["id"], verdict, m["tests"][:30],
                                                    time.time() - t1), flush=True)
    total = len(killed) + len(survived)
    score = 100.0 * len(killed) / total if total else 0.0
    print("score: %d of %d mutants killed (%.1f%%); %d survived%s%s; %.0f s" %
          (len(killed), total, score, len(survived), (": " + " ".join(survived)) if survived else "",
           ("; %d do not build: %s" % (len(broken), " ".join(broken))) if broken else "",
           time.time() - t0))
    if broken:
        return 2
    return 0 if score >= a.min else 1


if __name__ == "__main__":
    sys.exit(main())
