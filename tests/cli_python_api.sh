#!/usr/bin/env bash
# cli_python_api.sh - the Python package as a package (python/, docs/python.md):
# - its own tests (python/tests/test_api.py) from an installed prefix: a cut
#   and a damaged trace (a step recording of several chunks) through every
#   reading call and every analysis (DataLostError by default, a warning or
#   nothing with on_loss=), btr.open checking the file, the pickling of every
#   exception type, the table of argument checks, the namespace, to_pandas;
# - `pip install --no-build-isolation --no-index` into a fresh virtual
#   environment (--system-site-packages, offline), libbtr found through
#   pkg-config at install time, and the same tests run from there;
# - an interpreter without numpy: the ImportError names numpy and the interpreter;
# - all_branches(): its peak memory beyond a plain iteration's is at most
#   1.1x the data (ru_maxrss, counted, not timed).
# Args: $1 btr binary, $2 build dir.  About 40 s in Debug on a busy machine.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; src=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3   # Debian's: python3-numpy, -pandas, python3-venv, -setuptools (scripts/deps.sh)

for m in numpy pandas setuptools venv; do
	"$py" -c "import $m" 2>/dev/null || skip "python3 module $m not installed"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=$tmp/prefix
cmake --install "$build" --prefix "$p" >"$tmp/install.log" 2>&1 || bad "cmake --install: $(tail -1 "$tmp/install.log")"
pkg=$p/lib/python3/dist-packages
pyenv=(env -u BTR_LIBRARY -u PKG_CONFIG_PATH)
if grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	pyenv+=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
		ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
fi
check "installed: btr/py.typed, btr/_version.py" test -f "$pkg/btr/py.typed" -a -f "$pkg/btr/_version.py"
hdr=$(sed -n 's/^#define BTR_VERSION_STRING "\(.*\)"/\1/p' "$src/include/btr/version.h")
got=$(cd "$tmp" && "${pyenv[@]}" PYTHONPATH="$pkg" "$py" -s -c 'import btr; print(btr.__version__)')
check "btr.__version__ '$got' = version.h's '$hdr'" [ "$got" = "$hdr" ]

# the traces: a step recording of a program without libc in chunks of 16 KiB
# (the recorder's chunks are a sixteenth of `ulimit -f`), cut in its middle,
# and with a byte of its middle chunk damaged; a text file
d=$tmp/traces
mkdir -p "$d"
(ulimit -f 256; "$btr" record -q -b step -o "$d/whole.btr" -- "$build/prog_nolibc_step" >/dev/null 2>"$tmp/rec.err") ||
	skip "btr record -b step: $(tail -1 "$tmp/rec.err")"
sz=$(stat -c %s "$d/whole.btr")
chunks=$("$btr" trace info "$d/whole.btr" | sed -n 's/^compressed: .*of \([0-9]*\) chunks.*/\1/p')
check "the trace has several chunks ($chunks)" [ "${chunks:-0}" -ge 3 ]
head -c $((sz / 2)) "$d/whole.btr" >"$d/cut.btr"
"$py" - "$d/whole.btr" "$d/bad.btr" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = len(b) // 2
b[i] ^= 0xFF
b[i + 1] ^= 0x55
open(sys.argv[2], "wb").write(bytes(b))
PY
printf 'not a trace\n' >"$d/text.btr"
"$btr" report "$d/cut.btr" >/dev/null 2>&1; rc=$?
check "btr report: the cut trace lost data (exit $rc)" [ $rc -eq 3 ]

# the package's tests from the prefix
suite() {  # $1: label; the rest: the interpreter and its environment
	local label=$1; shift
	(cd "$tmp" && "$@" "$src/python/tests/test_api.py" "$d") >"$tmp/suite.out" 2>"$tmp/suite.err"
	local rc=$?
	while read -r st msg; do
		if [ "$st" = ok ]; then ok; else bad "$label: $msg"; fi
	done <"$tmp/suite.out"
	check "$label: the package's tests ran ($(grep -c '^ok' "$tmp/suite.out") passed, exit $rc): $(tail -1 "$tmp/suite.err")" \
		test $rc -eq 0 -a "$(grep -c '^ok' "$tmp/suite.out")" -ge 11
}
suite "prefix" "${pyenv[@]}" PYTHONPATH="$pkg" "$py" -s

# pip install into a fresh venv (offline, no build isolation): libbtr is
# found through pkg-config at install time (recorded in btr/_install.py)
"$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1 || bad "venv: $(tail -1 "$tmp/venv.log")"
cp -r "$src/python" "$tmp/pysrc"
rm -rf "$tmp/pysrc/build" "$tmp/pysrc/"*.egg-info
(cd "$tmp" && env -u BTR_LIBRARY PKG_CONFIG_PATH="$p/lib/pkgconfig" PIP_NO_INDEX=1 \
	"$tmp/venv/bin/python" -m pip install --no-build-isolation --no-index "$tmp/pysrc") >"$tmp/pip.log" 2>&1
check "pip install into a fresh venv: $(tail -1 "$tmp/pip.log")" grep -q "Successfully installed btr" "$tmp/pip.log"
where=$(cd "$tmp" && "${pyenv[@]}" "$tmp/venv/bin/python" -c 'import btr, btr._lib as l, os; print(os.path.realpath(btr.__file__)); print(os.path.realpath(l.LIBRARY_PATH))' 2>&1)
check "venv: btr from the venv's site-packages: $(echo "$where" | head -1)" \
	grep -q "^$(realpath "$tmp/venv")/lib/python3[.0-9]*/site-packages/btr/__init__.py$" <<<"$where"
check "venv: libbtr of the prefix (pkg-config): $(echo "$where" | sed -n 2p)" \
	[ "$(echo "$where" | sed -n 2p)" = "$(realpath "$p/lib/libbtr.so.0")" ]
suite "venv" "${pyenv[@]}" "$tmp/venv/bin/python"
# BTR_LIBRARY wins; a wrong one is an ImportError naming it
out=$(cd "$tmp" && env BTR_LIBRARY="$tmp/nonesuch.so" "$tmp/venv/bin/python" -c 'import btr' 2>&1)
check "BTR_LIBRARY naming no file: ImportError naming it" grep -q "ImportError.*nonesuch.so" <<<"$out"

# an interpreter without numpy (here: python3 -S, without its site
# packages): the error names numpy and the interpreter
out=$(cd "$tmp" && "${pyenv[@]}" PYTHONPATH="$pkg" "$py" -S -c 'import btr' 2>&1)
check "no numpy: ImportError naming numpy and the interpreter: $(echo "$out" | tail -1 | head -c 200)" \
	grep -q "ImportError: btr needs numpy, which $(realpath "$py" | sed 's/\./\\./g')\|ImportError: btr needs numpy, which $py" <<<"$out"

# all_branches(): peak RSS beyond a plain iteration's, against the data
"$btr" record -q -o "$tmp/fib.btr" -- "$build/prog_prof_fib" 25 >/dev/null 2>&1
peak() {  # $1: all | iter
	(cd "$tmp" && "${pyenv[@]}" PYTHONPATH="$pkg" "$py" -s - "$tmp/fib.btr" "$1") <<'PY'
import resource, sys
import btr
t = btr.open(sys.argv[1])
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if sys.argv[2] == "all":
    n = len(t.all_branches())
else:
    n = 0
    for b in t.branches():
        n += len(b)
print(n, n * btr.BRANCH_DTYPE.itemsize // 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0)
PY
}
read -r n_all kb_all rss_all <<<"$(peak all)"
read -r n_it kb_it rss_it <<<"$(peak iter)"
check "all_branches: $n_all branches ($kb_all KiB), as many as the batches ($n_it)" \
	test "${n_all:-0}" -gt 500000 -a "${n_all:-0}" = "${n_it:-}"
check "all_branches: peak RSS $rss_all KiB = iteration's $rss_it + at most 1.1x the data ($kb_all KiB)" \
	[ $(( ${rss_all:-1000000000} - ${rss_it:-0} )) -le $(( ${kb_all:-0} * 11 / 10 )) ]

# One report: the report and the script through the package's generic path
# (btr_analysis_create by name, btr_analysis_run) write what `btr report` and
# `btr script` print, the trace named by the path the run opened (the
# report's "trace:" line and JSON "file" were blank on this path)
for fmt in text json; do
	"$btr" report --format $fmt "$tmp/fib.btr" >"$tmp/cli.$fmt" 2>/dev/null
	(cd "$tmp" && "${pyenv[@]}" PYTHONPATH="$pkg" "$py" -s - "$tmp/fib.btr" $fmt >"$tmp/py.$fmt") <<'PY'
import sys
import btr
sys.stdout.buffer.write(btr.open(sys.argv[1]).analyze("report", sys.argv[2]))
PY
	check "report $fmt: the package's generic path = btr report's output" cmp "$tmp/cli.$fmt" "$tmp/py.$fmt"
done
check "report text: the trace named" grep -q "^trace: *$tmp/fib.btr" "$tmp/py.text"
"$btr" script "$tmp/fib.btr" >"$tmp/cli.script" 2>/dev/null
(cd "$tmp" && "${pyenv[@]}" PYTHONPATH="$pkg" "$py" -s - "$tmp/fib.btr" >"$tmp/py.script") <<'PY'
import sys
import btr
sys.stdout.buffer.write(btr.open(sys.argv[1]).analyze("script"))
PY
check "script: the package's generic path = btr script's output ($(wc -l <"$tmp/cli.script") lines)" \
	test -s "$tmp/cli.script" -a "$(cmp "$tmp/cli.script" "$tmp/py.script" 2>&1)" = ""

finish cli_python_api
