#!/usr/bin/env bash
# cli_report_html.sh - `btr report --html DIR`: one self-contained page,
# rendered by headless Chromium (skipped with a message without it): the
# screenshot is not blank and the DOM holds the expected tables and CFGs.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

need_qemu
record_qemu "$tmp/a.btr" flow_loops "$build/prog_flow_loops" 1 || finish cli_report_html
"$btr" record -q -b qemu -o "$tmp/b.btr" -- "$build/prog_flow_loops" 2 >/dev/null 2>&1

"$btr" report --diff "$tmp/b.btr" "$tmp/a.btr" >/dev/null 2>&1; rc=$?
check "--diff without --html is a usage error ($rc)" [ $rc -eq 2 ]
"$btr" report --html "$tmp/missing/deeper" "$tmp/a.btr" >/dev/null 2>"$tmp/err"; rc=$?
check "uncreatable DIR: 3 ($rc)" [ $rc -eq 3 ]
check "uncreatable DIR: one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]

"$btr" report --html "$tmp/html" "$tmp/a.btr"; rc=$?
check "report --html exit 0 ($rc)" [ $rc -eq 0 ]
page=$tmp/html/index.html
check "index.html written" [ -s "$page" ]
check "no temp files left" [ "$(ls "$tmp/html" | wc -l)" -eq 1 ]
# self-contained: no scripts, stylesheets, images or frames fetched
check "no external resources" bash -c "! grep -Eiq '<(script|link|img|iframe)|src=|url\\(' '$page'"
for t in summary threads functions blocks coverage; do
	check "table $t" grep -q "<table id=\"$t-table\"" "$page"
done
check "flow_loops.c in the coverage table" grep -q 'tests/progs/flow_loops.c</td>' "$page"
check "CFGs inline" [ "$(grep -c '<svg' "$page")" -ge 3 ]
check "links to the function sections" grep -q 'href="#fn-0"' "$page"
check "annotated source of fib" grep -q 'fib(int n)' "$page"
# The coverage table's row of a source with a function that never runs
# (prog_oracle_cov) says what `btr cov --format lcov` says of it: lines
# with code LF, lines run LH, functions run "FNH of FNF".
if record_qemu "$tmp/oc.btr" oracle_cov "$build/prog_oracle_cov" 100; then
	"$btr" report --html "$tmp/oc" "$tmp/oc.btr" >/dev/null; rc=$?
	check "report --html of oracle_cov exit 0 ($rc)" [ $rc -eq 0 ]
	"$btr" cov --format lcov --module prog_oracle_cov -o "$tmp/oc.info" "$tmp/oc.btr"; rc=$?
	check "lcov of oracle_cov exit 0 ($rc)" [ $rc -eq 0 ]
	check "oracle_cov's coverage row agrees with its lcov record" python3 - "$tmp/oc/index.html" "$tmp/oc.info" <<'PY'
import re, sys
page, info = open(sys.argv[1]).read(), open(sys.argv[2]).read()
rec = dict(re.findall(r'^(LF|LH|FNF|FNH):(\d+)$', info, re.M))
assert int(rec['FNH']) < int(rec['FNF']), rec   # a function never runs
m = re.search(r'<table id="coverage-table">(.*?)</table>', page, re.S)
row = re.search(r'<tr><td>[^<]*oracle_cov\.c</td><td>(\d+)</td><td>(\d+)</td><td>[^<]*</td><td>(\d+) of (\d+)</td>', m.group(1))
assert row, m.group(1)
got = tuple(int(x) for x in row.groups())
want = tuple(int(rec[k]) for k in ('LF', 'LH', 'FNH', 'FNF'))
assert got == want, (got, want)
PY
fi
"$btr" report --html "$tmp/hd" --diff "$tmp/b.btr" "$tmp/a.btr"; rc=$?
check "report --html --diff exit 0 ($rc)" [ $rc -eq 0 ]
check "--diff: colours by difference" grep -q 'coloured by the difference to' "$tmp/hd/index.html"

# The program's own code first, the C runtime (loader, libc) folded below
# it; sources that are not on this machine summarised, not shown as pages
# of counts without text (issue: the loader dominated every table).
python3 - "$page" <<'PY' >"$tmp/order" 2>&1
import re, sys
page = open(sys.argv[1]).read()
def rows(table):
    m = re.search(r'<table id="%s">(.*?)</table>' % table, page, re.S)
    return re.findall(r'<tr><td>(?:<a [^>]*>)?([^<]*)(?:</a>)?</td><td>([^<]*)</td>', m.group(1)) if m else None
main, rt = rows('functions-table'), rows('runtime-functions-table')
assert main and all(mod == 'prog_flow_loops' for _, mod in main), main
assert [f for f, _ in main][:2] == ['fib', 'main'], main
assert rt and all(re.match(r'(ld-linux|libc\.so)', mod) for _, mod in rt), rt
PY
check "program's functions first, runtime folded: $(tail -1 "$tmp/order")" [ ! -s "$tmp/order" ]
check "no annotated lines without source text" [ "$(grep -cE '^ *[0-9]+ +[0-9]+ *$' "$page")" -eq 0 ]
check "coverage rows only for sources on this machine" python3 - "$page" <<'PY'
import os, re, sys
page = open(sys.argv[1]).read()
m = re.search(r'<table id="coverage-table">(.*?)</table>', page, re.S)
files = re.findall(r'<tr><td>([^<]*)</td>', m.group(1))
sys.exit(0 if files and all(os.access(f, os.R_OK) for f in files) else 1)
PY
# Every CFG node's text has WCAG AA contrast (4.5:1) on its fill.
"$btr" cfg "$tmp/a.btr" --function fib -o "$tmp/fib.dot" 2>/dev/null
check "CFG text contrast >= 4.5:1" python3 - "$tmp/fib.dot" <<'PY'
import re, sys
def lum(h):
    c = [int(h[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    c = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
pairs = re.findall(r'fillcolor="(#[0-9a-f]{6})" fontcolor="(#[0-9a-f]{6})"', open(sys.argv[1]).read())
ratios = [(max(lum(a), lum(b)) + 0.05) / (min(lum(a), lum(b)) + 0.05) for a, b in pairs]
sys.exit(0 if pairs and min(ratios) >= 4.5 else 1)
PY

chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then
	oracle chromium "the report rendered by headless Chromium"
else
	flags="--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
	# One browser run: the screenshot and the DOM (Chromium is slow to start).
	# shellcheck disable=SC2086
	timeout 240 "$chrome" $flags --screenshot="$tmp/shot.png" --dump-dom --window-size=1200,1600 \
		"file://$page" >"$tmp/dom.html" 2>"$tmp/chrome.err"
	check "chromium made a screenshot" [ -s "$tmp/shot.png" ]
	# Not blank: decode the PNG (zlib) and count distinct pixel bytes.
	check "screenshot is not blank" python3 - "$tmp/shot.png" <<'PY'
import sys, zlib, struct
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
pos, idat = 8, b''
while pos < len(d):
    n, = struct.unpack('>I', d[pos:pos+4]); t = d[pos+4:pos+8]
    if t == b'IDAT': idat += d[pos+8:pos+8+n]
    pos += 12 + n
raw = zlib.decompress(idat)
sys.exit(0 if len(set(raw)) > 20 and raw.count(255) < 0.98 * len(raw) else 1)
PY
	for t in summary threads functions blocks coverage; do
		check "DOM has table $t" grep -q "<table id=\"$t-table\"" "$tmp/dom.html"
	done
	check "DOM has the CFG nodes" grep -q 'class="node"' "$tmp/dom.html"
fi
finish cli_report_html
