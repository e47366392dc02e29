#!/usr/bin/env python3
"""tests/mutants/run.py - the mutation check (`make mutants`).

Each mutant of tests/mutants/list is a realistic bug made by hand: a file,
an exact text found once in it, its replacement, and the test family (a
`ctest -R` regex) that should catch it.  This script applies each mutant
alone to a scratch copy of the source tree (MUTANTS_DIR/src; the working
tree is never written, so Ctrl-C cannot leave it modified), rebuilds that
copy incrementally, runs the family and restores the file.  A mutant is
killed when a test of its family fails (or times out); it survives when
they all pass.  The score is killed / all; the exit status is 1 below --min
(default 90%), 2 on a bad list or a family that fails without any mutant.

    tests/mutants/run.py [--dir D] [--jobs N] [--build-jobs N] [--min PCT]
                         [--no-baseline] [ID_REGEX]

A killed mutant needs only its first failure, so a family's tests run one
at a time and the first failing one ends it; inside a test,
BTR_TEST_FIRST_FAIL=1 makes the first failed check end the test
(tests/lib.sh, tests/check.h).  The tests run in the order most likely to
kill first: the test that killed this mutant the last time, then those that
killed other mutants of the same file, then the cheapest (the times of the
last baseline).  What was learnt is kept in D/history.json.

--jobs N runs N mutants at once, each in its own scratch tree (D/src and
D/build, then D/src.2 and D/build.2, ...; each is built in full once, then
incrementally); mutants of one file go to the same tree, one after the
other, so that the file is compiled once per mutant.

Before the mutants, each test of the families is run once on the
unmutated copy (the baseline): a family that fails already would kill
every mutant for nothing, so that is an error.  A baseline passed on the
same sources (every file but tests/mutants/ and the other tests' own
tests/cli_*.sh, tests/test_*.c) is not run again.
--no-baseline skips it.
"""
import argparse
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
# built for every mutant: the CLI (and libbtr.so, the Python binding's), the
# agents; the C tests of a family are added by name
CORE = ["btr-cli", "btr-qemu", "btr-step-agent", "btr-insn-count"]
# targets a shell test runs besides the CLI
EXTRA = {"cli_alloc_fail": ["btr_torture"]}


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
    return sorted(p for p in out.decode().split("\0") if p)


def own_test(rel):
    """The test whose own file @rel is (tests/cli_NAME.sh, tests/test_NAME.c),
    else None: a change there concerns that test alone."""
    m = re.match(r"tests/((?:cli|test)_\w+)\.(?:sh|c)$", rel)
    return m.group(1) if m else None


class TreeHash:
    """The sources' hash for the baseline: one of every file but the tests'
    own files, and per test its own file's."""

    def __init__(self):
        self.h = hashlib.sha256()
        self.tests = {}

    def update(self, b):
        self.h.update(b)

    def key(self, test):
        return self.h.hexdigest() + ":" + self.tests.get(test, "")


def sync(dst, digest=None):
    """Copies the files that differ (content), so that untouched files keep
    their mtimes and the rebuild stays incremental.  @digest (a hashlib
    object) is fed every file but those of tests/mutants/."""
    n = 0
    for rel in tracked_files():
        s, d = os.path.join(SRC, rel), os.path.join(dst, rel)
        if not os.path.isfile(s) or os.path.islink(s):
            continue
        with open(s, "rb") as f:
            data = f.read()
        if digest is not None and not rel.startswith("tests/mutants/"):
            if own_test(rel):
                digest.tests[own_test(rel)] = hashlib.sha256(data).hexdigest()
            else:
                digest.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
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


class Tree:
    """One scratch copy and its build directory."""

    def __init__(self, base, k):
        sfx = "" if k == 0 else ".%d" % (k + 1)
        self.k = k
        self.src = os.path.join(base, "src" + sfx)
        self.build = os.path.join(base, "build" + sfx)
        self.log = os.path.join(base, "log%s.txt" % sfx)
        self.mutated = None     # (path, original bytes) while a mutant is written
        self.dirty = []         # targets last built with a mutant in them
        self.proc = None        # the command running now

    def run(self, cmd, timeout=None, **kw):
        with open(self.log, "ab") as f:
            f.write(("\n$ %s\n" % " ".join(cmd)).encode())
            f.flush()
            try:
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, **kw)
            except OSError as e:
                f.write(("cannot run: %s\n" % e).encode())
                return 127
            self.proc = p
            try:
                return p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                p.wait()
                f.write(b"\n(timed out)\n")
                return 124
            finally:
                self.proc = None

    def kill(self):
        p = self.proc
        if p is not None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass

    def restore(self):
        if self.mutated is not None:
            path, data = self.mutated
            with open(path, "wb") as f:
                f.write(data)
            self.mutated = None


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
        t += EXTRA.get(name, [])
    return list(dict.fromkeys(t))


class History:
    """D/history.json: test costs (seconds of their last passing run), the
    test that killed each mutant, the sources of the last passed baseline."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        try:
            with open(path) as f:
                self.h = json.load(f)
        except (OSError, ValueError):
            self.h = {}
        for k in ("cost", "killer", "baseline"):
            self.h.setdefault(k, {})

    def save(self):
        with self.lock:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.h, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)

    def order(self, m, tests, file_of):
        """@tests in the order most likely to kill @m first."""
        h = self.h
        first = h["killer"].get(m["id"])
        same_file = {}
        for mid, t in h["killer"].items():
            if file_of.get(mid) == m["file"]:
                same_file[t] = same_file.get(t, 0) + 1

        def key(t):
            return (t != first, -same_file.get(t, 0), h["cost"].get(t, 1e9), tests.index(t))
        return sorted(tests, key=key)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("MUTANTS_DIR", os.path.join(SRC, "build-mutants")))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("MUTANT_JOBS", "1")),
                    help="mutants run at once, each in its own scratch tree (default 1)")
    ap.add_argument("--build-jobs", type=int, default=0,
                    help="make jobs of each tree's build (default: cores / --jobs, at least 1)")
    ap.add_argument("--min", type=float, default=90.0)
    ap.add_argument("--timeout", type=int, default=900, help="seconds for one test run")
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
    jobs = max(1, min(a.jobs, len(muts)))
    bjobs = a.build_jobs or max(1, (os.cpu_count() or 2) // jobs)
    os.makedirs(a.dir, exist_ok=True)
    trees = [Tree(a.dir, k) for k in range(jobs)]
    digest = TreeHash()
    n = 0
    for t in trees:
        os.makedirs(t.src, exist_ok=True)
        open(t.log, "w").close()
        n += sync(t.src, digest if t.k == 0 else None)
    shared = os.path.realpath(os.path.join(SRC, "..", "shared"))
    link = os.path.join(a.dir, "shared")
    if os.path.isdir(shared) and not os.path.lexists(link):
        os.symlink(shared, link)
    print("mutants: %d, %d scratch tree%s in %s (%d files updated), log %s" %
          (len(muts), jobs, "s" if jobs > 1 else "", a.dir, n, " ".join(t.log for t in trees)), flush=True)
    # every mutant's text must be found exactly once in the unmutated copy
    bad = 0
    for m in muts:
        with open(os.path.join(trees[0].src, m["file"]), encoding="utf-8", errors="surrogateescape") as f:
            c = f.read().count(m["from"])
        if c != 1:
            print("%s: its text is found %d times in %s (must be once)" % (m["id"], c, m["file"]))
            bad += 1
    if bad:
        return 2
    env = dict(os.environ, BTR_REQUIRE_ORACLES="1", BTR_TEST_FIRST_FAIL="1")
    env.pop("BTR_ALLOW_MISSING_ORACLES", None)
    base_env = dict(env)
    base_env.pop("BTR_TEST_FIRST_FAIL")

    # configure and build every tree (in parallel: one thread per tree)
    def prepare(t, out):
        out[t.k] = t.run(["cmake", "-S", t.src, "-B", t.build, "-DCMAKE_BUILD_TYPE=Debug"]) or \
            t.run(["cmake", "--build", t.build, "-j", str(bjobs)])
    res = {}
    th = [threading.Thread(target=prepare, args=(t, res)) for t in trees]
    for x in th:
        x.start()
    for x in th:
        x.join()
    for t in trees:
        if res[t.k]:
            print("the unmutated copy does not build: see %s" % t.log)
            return 2
    print("scratch trees built (%.0f s)" % (time.time() - t0), flush=True)
    fams = {}
    for m in muts:
        tests = family_tests(trees[0].build, m["tests"])
        if not tests:
            print("%s: no test matches '%s'" % (m["id"], m["tests"]))
            return 2
        fams[m["tests"]] = tests
    hist = History(os.path.join(a.dir, "history.json"))
    ctest = ["ctest", "--output-on-failure", "--timeout", str(a.timeout), "-R"]

    def run_test(t, name, e):
        t1 = time.time()
        rc = t.run(ctest + ["^%s$" % re.escape(name)], cwd=t.build, env=e, timeout=a.timeout + 60)
        return rc, time.time() - t1

    if not a.no_baseline:
        # each test once (families share tests), skipping those that passed
        # on the same sources
        known = hist.h["baseline"]   # test -> the sources' key it passed on
        passed = {x for x, k in known.items() if k == digest.key(x)}
        every = list(dict.fromkeys(x for f in fams.values() for x in f))
        todo = [x for x in every if x not in passed]
        todo.sort(key=lambda x: -hist.h["cost"].get(x, 0))   # longest first: the trees end together
        q = queue.Queue()
        for x in todo:
            q.put(x)
        failed = []

        def base(t):
            while True:
                try:
                    x = q.get_nowait()
                except queue.Empty:
                    return
                rc, dt = run_test(t, x, base_env)
                with hist.lock:
                    if rc:
                        failed.append(x)
                    else:
                        hist.h["cost"][x] = round(dt, 1)
                        known[x] = digest.key(x)
                        passed.add(x)
        th = [threading.Thread(target=base, args=(t,)) for t in trees]
        for x in th:
            x.start()
        for x in th:
            x.join()
        hist.save()
        if failed:
            for fam, tests in fams.items():
                f = [x for x in tests if x in failed]
                if f:
                    print("baseline: family '%s' fails without a mutant: %s (see %s)" %
                          (fam, " ".join(f), " ".join(t.log for t in trees)))
            return 2
        print("baseline: %d families, %d tests run, %d passed before on the same sources (%.0f s)" %
              (len(fams), len(todo), len(every) - len(todo), time.time() - t0), flush=True)

    # mutants of one file in one group, run one after the other in one tree
    groups = {}
    for m in muts:
        groups.setdefault(m["file"], []).append(m)
    gq = queue.Queue()
    # the newest mutants first (the end of the list): the likeliest to survive
    pos = {m["id"]: i for i, m in enumerate(muts)}
    for g in sorted(groups.values(), key=lambda g: -max(pos[m["id"]] for m in g)):
        gq.put(g)
    file_of = {m["id"]: m["file"] for m in parse_list(a.list)}
    results = {}
    done = [0]
    plock = threading.Lock()
    stop = threading.Event()

    def one(t, m):
        path = os.path.join(t.src, m["file"])
        with open(path, "rb") as f:
            orig = f.read()
        text = orig.decode("utf-8", "surrogateescape")
        t.mutated = (path, orig)
        killer = None
        t1 = time.time()
        tb = 0.0
        tests = fams[m["tests"]]
        targets = targets_for(tests)
        try:
            with open(path, "wb") as f:
                f.write(text.replace(m["from"], m["to"], 1).encode("utf-8", "surrogateescape"))
            # the targets built with the last mutant are rebuilt as well,
            # so that no binary outside this family's keeps a mutant
            rc = t.run(["cmake", "--build", t.build, "-j", str(bjobs), "--target"] +
                       list(dict.fromkeys(targets + t.dirty)))
            tb = time.time() - t1
            if rc:
                verdict = "does not build"
            else:
                verdict = "SURVIVED"
                for x in hist.order(m, tests, file_of):
                    if stop.is_set():
                        return None
                    rc, dt = run_test(t, x, env)
                    if rc:
                        verdict, killer = "killed", x
                        break
                    with hist.lock:
                        hist.h["cost"][x] = round(dt, 1)
            t.dirty = targets
        finally:
            t.restore()
        with hist.lock:
            if killer:
                hist.h["killer"][m["id"]] = killer
            else:
                hist.h["killer"].pop(m["id"], None)
        hist.save()
        with plock:
            done[0] += 1
            print("[%2d/%d] %-32s %-14s %-30s %4.0f s (build %3.0f s)%s" %
                  (done[0], len(muts), m["id"], verdict, m["tests"][:30], time.time() - t1, tb,
                   "  by %s" % killer if killer else ""), flush=True)
        return verdict

    def worker(t):
        while not stop.is_set():
            try:
                g = gq.get_nowait()
            except queue.Empty:
                return
            for m in g:
                v = one(t, m)
                if v is None:
                    return
                results[m["id"]] = v

    def on_signal(sig, frame):
        stop.set()
        for t in trees:
            t.kill()
            t.restore()
        print("\ninterrupted: the scratch copies are restored")
        os._exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    th = [threading.Thread(target=worker, args=(t,), daemon=True) for t in trees]
    for x in th:
        x.start()
    for x in th:
        while x.is_alive():
            x.join(0.5)
    killed = [m["id"] for m in muts if results.get(m["id"]) == "killed"]
    survived = [m["id"] for m in muts if results.get(m["id"]) == "SURVIVED"]
    broken = [m["id"] for m in muts if results.get(m["id"]) == "does not build"]
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
