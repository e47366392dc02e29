#!/usr/bin/env bash
# cli_import.sh - `btr import`: perf.data -> .btr on the real recordings.
# Intel PT (quipper/perf.data.intel_pt-4.14): the PT payloads come out
# byte-exact per CPU (checked against an independent Python parser of the
# perf.data AUXTRACE records), packet-decode without errors, flow-decode
# to "no code image" gaps (the binaries are not available), and the 152
# context switches match perf's own. LBR recordings: the imported trace
# gives the same `btr script` output as the perf.data.  Errors: one line,
# exit 3, no output.  Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- usage and errors ----
"$btr" import --help >"$tmp/h" 2>&1; rc=$?
check "--help exit 0" [ $rc -eq 0 ]
check "--help usage" grep -q '^Usage: btr import' "$tmp/h"
for args in "" "--bogus x" "-z 99 x" "a b"; do
	# shellcheck disable=SC2086
	"$btr" import $args >/dev/null 2>&1; rc=$?
	check "'import $args' usage error (got $rc)" [ $rc -eq 2 ]
done
"$btr" import -o "$tmp/m.btr" "$tmp/missing.data" >/dev/null 2>"$tmp/err"; rc=$?
check "missing input: exit 3" [ $rc -eq 3 ]
check "missing input: one line naming it" [ "$(wc -l <"$tmp/err")" -eq 1 -a "$(grep -c missing.data "$tmp/err")" -eq 1 ]
check "missing input: no output" [ ! -e "$tmp/m.btr" ]

pt="$shared/traces/quipper/perf.data.intel_pt-4.14"
if [ ! -r "$pt" ]; then
	echo "note: $pt absent; PT import checks skipped"
else
	# a cut file: exit 3, nothing under the output name
	head -c 100000 "$pt" >"$tmp/cut.data"
	"$btr" import -o "$tmp/cut.btr" "$tmp/cut.data" >/dev/null 2>"$tmp/err"; rc=$?
	check "truncated perf.data: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "truncated perf.data: one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
	check "truncated perf.data: no output, no temp file" [ -z "$(ls "$tmp" | grep cut.btr)" ]

	"$btr" import -q -o "$tmp/pt.btr" "$pt"; rc=$?
	check "import PT: exit 0 (got $rc)" [ $rc -eq 0 ]
	"$btr" trace info --format json "$tmp/pt.btr" >"$tmp/pt.json"
	check "imported: records by type" python3 - "$tmp/pt.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["records_by_type"]
assert d["complete"] and d["format"] == "btr", d
assert t["pt"] == 2 and t["switch"] == 152 and t["module_load"] == 66 and t["exec"] == 1, t
assert d["data_bytes"]["pt"] == 12240 + 137728, d["data_bytes"]
PY
	# PT payload bytes per CPU: an independent parser of the perf.data
	# (file header -> data section -> PERF_RECORD_AUXTRACE, type 71:
	# u64 size, offset, reference; u32 idx, tid, cpu; payload after the
	# header.size bytes) against btr's hex dump of the imported trace
	python3 - "$pt" >"$tmp/oracle" <<'PY'
import struct, sys, hashlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"PERFILE2"
data_off, data_size = struct.unpack_from("<QQ", b, 40)
pos, end, per = data_off, data_off + data_size, {}
while pos < end:
    typ, misc, size = struct.unpack_from("<IHH", b, pos)
    total = size
    if typ == 71:
        psize, off, ref, idx, tid, cpu = struct.unpack_from("<QQQIII", b, pos + 8)
        per.setdefault(cpu, bytearray()).extend(b[pos + size:pos + size + psize])
        total += psize
    pos += total
for cpu in sorted(per):
    print(cpu, len(per[cpu]), hashlib.sha256(per[cpu]).hexdigest())
PY
	"$btr" trace dump -x "$tmp/pt.btr" | python3 -c '
import sys, hashlib, re
per, cur = {}, None
for line in sys.stdin:
    m = re.match(r"^pt tid=\d+ cpu=(-?\d+) ", line)
    if m:
        cur = int(m.group(1)); per.setdefault(cur, bytearray()); continue
    if not line.startswith("  ") or cur is None:
        cur = None if not line.startswith("  ") else cur; continue
    per[cur].extend(bytes.fromhex("".join(line.split()[1:])))
for cpu in sorted(per):
    print(cpu, len(per[cpu]), hashlib.sha256(per[cpu]).hexdigest())
' >"$tmp/btrpt"
	check "oracle found both CPUs' payloads" [ "$(wc -l <"$tmp/oracle")" -eq 2 ]
	check "PT payloads byte-exact per CPU" cmp "$tmp/oracle" "$tmp/btrpt"
	# packet decode: clean
	"$btr" pt dump --stats "$tmp/pt.btr" >"$tmp/stats"; rc=$?
	check "pt dump: exit 0" [ $rc -eq 0 ]
	check "pt dump: no packet errors" grep -q '^errors   0$' "$tmp/stats"
	check "pt dump: 2 streams, 10 PSBs" [ "$(grep -c '^streams  2$\|^  psb        10$' "$tmp/stats")" -eq 2 ]
	# flow decode: without the binaries, gaps saying so
	"$btr" report --format json "$tmp/pt.btr" >"$tmp/rep.json" 2>/dev/null
	check "flow decode: gaps for the missing code" python3 - "$tmp/rep.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["gaps"] > 100, d["gaps"]
assert d["gap_list"] and all(g["reason"] == "no code image at address" for g in d["gap_list"]), d["gap_list"][:3]
PY
	# context switches as perf sees them (multiset of thread, cpu, direction)
	"$btr" trace dump "$tmp/pt.btr" | awk '/^switch/ { split($4, t, "="); split($5, c, "="); printf "%d %d %s\n", t[2], c[2], toupper($2) }' | sort >"$tmp/sw.btr"
	check "152 switch lines" [ "$(wc -l <"$tmp/sw.btr")" -eq 152 ]
	if oracle perf "switch events compared with perf script (Debian linux-perf)"; then
		perf script -i "$pt" --show-switch-events -F tid,cpu 2>/dev/null | \
			awk '/PERF_RECORD_SWITCH/ { c = $2; gsub(/[\[\]]/, "", c); printf "%d %d %s\n", $1, c, $4 }' | sort >"$tmp/sw.perf"
		check "switches equal perf's" cmp "$tmp/sw.perf" "$tmp/sw.btr"
	fi
	# compressed import reads back the same
	"$btr" import -q -z 3 -o "$tmp/ptz.btr" "$pt"
	cmp -s <("$btr" trace dump -x "$tmp/pt.btr") <("$btr" trace dump -x "$tmp/ptz.btr")
	check "zstd import: same records" [ $? -eq 0 ]
fi

# ---- LBR: the imported trace reads like the perf.data ----
for f in "$shared/traces/autofdo/test.lbr" "$shared/traces/quipper/perf.data.branch-4.14"; do
	[ -r "$f" ] || { echo "note: $f absent"; continue; }
	b=$(basename "$f")
	"$btr" import -q -o "$tmp/$b.btr" "$f"; rc=$?
	check "$b: import exit 0" [ $rc -eq 0 ]
	"$btr" script --fields tid,addr,kind,flags "$f" >"$tmp/$b.a"
	"$btr" script --fields tid,addr,kind,flags "$tmp/$b.btr" >"$tmp/$b.b"
	check "$b: script output non-empty" [ -s "$tmp/$b.a" ]
	check "$b: script of the import equals script of the perf.data" cmp "$tmp/$b.a" "$tmp/$b.b"
done

finish cli_import
