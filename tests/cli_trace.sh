#!/usr/bin/env bash
# cli_trace.sh - `btr trace dump|info` on the sample traces written by
# test_trace (run here first if they are missing).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3

sample=$build/trace_sample.btr
plain=$build/trace_sample_plain.btr
if [ ! -s "$sample" ] || [ ! -s "$plain" ]; then
  (cd "$build" && ./test_trace >/dev/null 2>&1)
fi
[ -s "$sample" ] && [ -s "$plain" ] || skip "trace samples absent (test_trace not built?)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- dump ----
"$btr" trace dump "$sample" >"$tmp/dump" 2>"$tmp/err"; rc=$?
check "dump exit 0 (got $rc)" [ $rc -eq 0 ]
check "dump stderr empty" [ ! -s "$tmp/err" ]
check "dump 16 lines" [ "$(wc -l <"$tmp/dump")" -eq 16 ]   # 14 + 2 process records (format 1.1)
check "dump first line machine" grep -q '^machine backend=qemu vendor=GenuineIntel family=6 model=0x55' <(head -1 "$tmp/dump")
check "dump pt line" grep -qx 'pt tid=4242 cpu=-1 offset=0x0 size=3000' "$tmp/dump"
check "dump bts line" grep -qx 'bts tid=4243 cpu=-1 offset=0x18 size=120' "$tmp/dump"
check "dump module path" grep -q '^module_load pid=4242 0x7f0000001000-0x7f000001c000 prot=r-x .*path="/lib/x86_64-linux-gnu/libc.so.6"$' "$tmp/dump"
check "dump thread name escaped" grep -qF 'name="worker \"1\"\\"' "$tmp/dump"
check "dump exit line" grep -q '^process_exit pid=4242 tid=4242 code=0 signal=11 ip=0x401005 addr=0xdead0000' "$tmp/dump"
check "dump last line exit" grep -q '^process_exit' <(tail -1 "$tmp/dump")

"$btr" trace dump -v "$sample" >"$tmp/dumpv"; rc=$?
check "dump -v exit 0" [ $rc -eq 0 ]
check "dump -v lbr entry" grep -q '^  0x401000 -> 0x402000 cycles=100' "$tmp/dumpv"
check "dump -v 16 lbr + 40 branch lines" [ "$(grep -c '^  0x' "$tmp/dumpv")" -eq 56 ]
check "dump -v branch entry" grep -q '^  0xffffffff81000001 -> 0x7fff00000003 jcc taken kernel$' "$tmp/dumpv"

"$btr" trace dump --hex "$sample" >"$tmp/dumpx"; rc=$?
check "dump -x exit 0" [ $rc -eq 0 ]
# pt_bytes[i] = i*7 + (i>>5): first row 00 07 0e 15 ...
check "dump -x first row" grep -q '^  00000000  00 07 0e 15 1c 23 2a 31' "$tmp/dumpx"
check "dump -x rows" [ "$(grep -c '^  [0-9a-f]\{8\} ' "$tmp/dumpx")" -eq $(( (3000+15)/16 + (120+15)/16 )) ]

# The uncompressed copy with small chunks carries the same records (PT
# and branch arrays split into pieces that add up to the same content).
"$btr" trace dump "$plain" >"$tmp/dumpp"; rc=$?
check "dump plain exit 0" [ $rc -eq 0 ]
check "plain == zstd outside PT" diff <(grep -v '^pt \|^branches ' "$tmp/dump") <(grep -v '^pt \|^branches ' "$tmp/dumpp")
check "plain branches sum to 40" [ "$(awk '/^branches / { sub("count=", "", $3); s += $3 } END { print s }' "$tmp/dumpp")" -eq 40 ]
"$btr" trace dump -v "$plain" >"$tmp/dumppv"
check "plain -v same branch lines" diff <(grep '^  0x' "$tmp/dumpv") <(grep '^  0x' "$tmp/dumppv")
check "plain PT pieces sum to 3000" [ "$(awk '/^pt tid=4242/ { sub("size=", "", $5); s += $5 } END { print s }' "$tmp/dumpp")" -eq 3000 ]
check "plain PT split" [ "$(grep -c '^pt tid=4242' "$tmp/dumpp")" -gt 1 ]

# ---- info ----
"$btr" trace info "$sample" >"$tmp/info"; rc=$?
check "info exit 0" [ $rc -eq 0 ]
check "info backend" grep -q '^backend: *qemu$' "$tmp/info"
check "info compressed" grep -q '^compressed: *yes' "$tmp/info"
check "info complete" grep -q '^complete: *yes' "$tmp/info"
check "info records" grep -q "^records: *16$" "$tmp/info"
check "info threads" grep -q '^threads: *2$' "$tmp/info"
check "info modules" grep -q '^modules: *2$' "$tmp/info"
check "info pt bytes" grep -q '^pt bytes: *3000$' "$tmp/info"
check "info bts bytes" grep -q '^bts bytes: *120$' "$tmp/info"
check "info lbr bytes" grep -q '^lbr bytes: *384 (16 entries)$' "$tmp/info"
"$btr" trace info "$plain" >"$tmp/infop"
check "info plain not compressed" grep -q '^compressed: *no' "$tmp/infop"

"$btr" trace info --format json "$sample" >"$tmp/json"; rc=$?
check "info json exit 0" [ $rc -eq 0 ]
if oracle python3 "trace info --format json parsed"; then
  check "info json content" python3 - "$tmp/json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "btr" and d["version"].startswith("1."), d
assert d["complete"] is True and d["compressed"] is True
assert d["records"] == 16 and d["records_by_type"]["process"] == 2 and d["records_by_type"]["pt"] == 2 and d["records_by_type"]["thread_start"] == 2
assert d["data_bytes"] == {"pt": 3000, "bts": 120, "lbr": 384}, d["data_bytes"]
assert d["threads"] == 2 and d["modules"] == 2 and d["branches"] == 40
assert d["backend"] == "qemu"
assert d["exit"]["signal"] == 11 and d["exit"]["ip"] == "0x401005"
EOF
fi

# ---- errors: exit 3, one line on stderr naming the file ----
"$btr" trace dump "$tmp/missing.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "missing exit 3 (got $rc)" [ $rc -eq 3 ]
check "missing one line naming file" [ "$(wc -l <"$tmp/err")" -eq 1 ]
check "missing names file" grep -q "missing.btr" "$tmp/err"

echo "hello, not a trace" >"$tmp/text.btr"
"$btr" trace info "$tmp/text.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "bad magic exit 3" [ $rc -eq 3 ]
check "bad magic message" grep -q "text.btr: .*bad magic" "$tmp/err"
check "bad magic one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]

: >"$tmp/empty.btr"
"$btr" trace dump "$tmp/empty.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "empty exit 3" [ $rc -eq 3 ]
check "empty truncated" grep -q "empty.btr: truncated" "$tmp/err"

size=$(stat -c %s "$plain")
head -c $((size - 20)) "$plain" >"$tmp/cut.btr"
"$btr" trace dump "$tmp/cut.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "truncated exit 3" [ $rc -eq 3 ]
check "truncated message" grep -q "cut.btr: truncated input at offset 0x" "$tmp/err"
check "truncated one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
# Only the end chunk is cut: every record is still printed.
check "truncated keeps records" diff "$tmp/out" "$tmp/dumpp"
"$btr" trace info "$tmp/cut.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "truncated info exit 3" [ $rc -eq 3 ]
check "truncated info incomplete" grep -q '^complete: *no' "$tmp/out"

# Damage one byte in the middle: that chunk is skipped, the rest shown.
cp "$plain" "$tmp/bad.btr"
python3 -c "
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)" "$tmp/bad.btr"
"$btr" trace dump "$tmp/bad.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "checksum exit 3" [ $rc -eq 3 ]
check "checksum message" grep -q "bad.btr: 1 damaged chunk(s) skipped (checksum mismatch)" "$tmp/err"
check "checksum one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
check "checksum loses some records" [ "$(wc -l <"$tmp/out")" -lt "$(wc -l <"$tmp/dumpp")" ]
check "checksum keeps the last record" grep -q '^process_exit' "$tmp/out"
check "checksum keeps the first record" grep -q '^machine' "$tmp/out"

# ---- perf.data through the same reader ----
pd=$shared/traces/quipper/perf.data.branch-4.14
if [ -f "$pd" ]; then
  "$btr" trace info --format json "$pd" >"$tmp/pjson" 2>"$tmp/err"; rc=$?
  check "perf.data info exit 0 (got $rc)" [ $rc -eq 0 ]
  check "perf.data info json" python3 - "$tmp/pjson" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "perf" and d["backend"] == "perf", d
assert d["records_by_type"]["lbr"] > 0 and d["lbr_entries"] > 0 and d["data_bytes"]["lbr"] == 24 * d["lbr_entries"]
EOF
  "$btr" trace dump -v "$pd" >"$tmp/pdump"; rc=$?
  check "perf.data dump exit 0" [ $rc -eq 0 ]
  check "perf.data dump machine first" grep -q '^machine backend=perf' <(head -1 "$tmp/pdump")
  check "perf.data dump lbr entries" grep -q '^  0x[0-9a-f]* -> 0x[0-9a-f]*' "$tmp/pdump"
else
  echo "note: $pd absent, perf.data part skipped"
fi

# ---- usage ----
"$btr" trace >/dev/null 2>&1; check "no subcommand exit 2" [ $? -eq 2 ]
"$btr" trace frob x >/dev/null 2>&1; check "unknown subcommand exit 2" [ $? -eq 2 ]
"$btr" trace dump >/dev/null 2>&1; check "dump no file exit 2" [ $? -eq 2 ]
"$btr" trace dump a b >/dev/null 2>&1; check "dump two files exit 2" [ $? -eq 2 ]
"$btr" trace info --format xml "$sample" >/dev/null 2>&1; check "bad format exit 2" [ $? -eq 2 ]
"$btr" trace dump --bogus "$sample" >/dev/null 2>&1; check "bad option exit 2" [ $? -eq 2 ]
"$btr" trace --help >"$tmp/out"; rc=$?
check "help exit 0" [ $rc -eq 0 ]
check "help text" grep -q "Usage: btr trace dump" "$tmp/out"
"$btr" trace info --help >/dev/null; check "info --help exit 0" [ $? -eq 0 ]
"$btr" trace dump --help >/dev/null; check "dump --help exit 0" [ $? -eq 0 ]

finish cli_trace
