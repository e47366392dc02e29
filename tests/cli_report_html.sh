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

"$btr" record -q -b qemu -o "$tmp/a.btr" -- "$build/prog_flow_loops" 1 >/dev/null 2>"$tmp/err" ||
	skip "btr record -b qemu failed: $(cat "$tmp/err")"
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
"$btr" report --html "$tmp/hd" --diff "$tmp/b.btr" "$tmp/a.btr"; rc=$?
check "report --html --diff exit 0 ($rc)" [ $rc -eq 0 ]
check "--diff: colours by difference" grep -q 'coloured by the difference to' "$tmp/hd/index.html"

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
