#!/usr/bin/env bash
# cli_pt.sh - `btr pt dump` (and the `btr pt` dispatcher).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
psb='\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82'

# ---- usage ----
"$btr" pt --help >"$tmp/out" 2>&1; rc=$?
check "pt --help exit 0 (got $rc)" [ $rc -eq 0 ]
check "pt --help usage" grep -q '^Usage: btr pt dump' "$tmp/out"
"$btr" pt dump --help >"$tmp/out" 2>&1; rc=$?
check "pt dump --help exit 0" [ $rc -eq 0 ]
"$btr" pt dump >"$tmp/out" 2>"$tmp/err"; rc=$?
check "pt dump without FILE exit 2 (got $rc)" [ $rc -eq 2 ]
"$btr" pt frob >"$tmp/out" 2>"$tmp/err"; rc=$?
check "pt frob exit 2" [ $rc -eq 2 ]
"$btr" pt dump --format json x >"$tmp/out" 2>"$tmp/err"; rc=$?
check "--format json without --stats exit 2" [ $rc -eq 2 ]
"$btr" pt dump "$tmp/missing.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "missing file exit 3 (got $rc)" [ $rc -eq 3 ]
check "missing file: one stderr line naming it" [ "$(wc -l <"$tmp/err")" -eq 1 ]
check "missing file named" grep -q "missing.pt" "$tmp/err"

# ---- a hand-made raw stream: every line checked ----
printf "\x00\x00${psb}\x02\x23\x06\xac\x7d\xef\xbe\xad\xde\xff\x7f\x2d\x34\x12\x59\xc3\x99\x01" >"$tmp/a.pt"
"$btr" pt dump "$tmp/a.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
cat >"$tmp/want" <<'W'
[0000000000000000: skipped 0x2 bytes before the first psb]
0000000000000002  psb
0000000000000012  psbend
0000000000000014  tnt.8 !
0000000000000015  tnt.8 .!.!!.
0000000000000016  fup 3: 0x00007fffdeadbeef
000000000000001d  tip 1: 0x00007fffdead1234
0000000000000020  mtc 0xc3
0000000000000022  mode.exec 64-bit
W
check "raw dump exit 0 (got $rc)" [ $rc -eq 0 ]
check "raw dump stderr empty" [ ! -s "$tmp/err" ]
check "raw dump output" diff -u "$tmp/want" "$tmp/out"
"$btr" pt dump --no-sync "$tmp/a.pt" >"$tmp/out" 2>&1; rc=$?
check "--no-sync starts at byte 0" grep -qx '0000000000000000  pad' <(head -1 "$tmp/out")

# ---- damage: error line, resync at the next PSB, exit 3 at the end ----
printf "${psb}\x06\x05\x00${psb}\x0a\x19\x01" >"$tmp/bad.pt"
"$btr" pt dump "$tmp/bad.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
cat >"$tmp/want" <<'W'
0000000000000000  psb
0000000000000010  tnt.8 !
[0000000000000011: error: bad packet]
0000000000000013  psb
0000000000000023  tnt.8 .!
[0000000000000024: error: truncated packet]
W
check "damaged dump exit 3 (got $rc)" [ $rc -eq 3 ]
check "damaged dump output" diff -u "$tmp/want" "$tmp/out"
check "damaged dump: one stderr line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
check "damaged dump: stderr names file and offset" grep -q "bad.pt: 2 decode errors, the first at offset 0x11" "$tmp/err"

# ---- no PSB at all; an empty file ----
printf '\x06\x06\x06' >"$tmp/nopsb.pt"
"$btr" pt dump "$tmp/nopsb.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "no psb: exit 3" [ $rc -eq 3 ]
check "no psb: error line" grep -qx '\[0000000000000000: error: no psb found\]' "$tmp/out"
"$btr" pt dump --no-sync "$tmp/nopsb.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "no psb, --no-sync: exit 0" [ $rc -eq 0 ]
check "no psb, --no-sync: 3 tnt" [ "$(grep -c 'tnt.8 !$' "$tmp/out")" -eq 3 ]
: >"$tmp/empty.pt"
"$btr" pt dump "$tmp/empty.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "empty file: exit 3, no output" [ $rc -eq 3 -a ! -s "$tmp/out" ]
check "empty file: one line naming it" grep -q "empty.pt: empty file" "$tmp/err"

# ---- a .btr trace (the sample test_trace writes, if built) ----
if [ -s "$build/trace_sample.btr" ]; then
  "$btr" pt dump "$build/trace_sample.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
  # exit 3, always: the sample's PT payload (test_trace.c make_samples)
  # is 3000 bytes of i*7 + (i >> 5), which hold no PSB - one decode error
  check ".btr: exit 3 (got $rc)" [ $rc -eq 3 ]
  check ".btr: one line, the decode error: $(cat "$tmp/err")" \
    [ "$(cat "$tmp/err")" = "btr: $build/trace_sample.btr: 1 decode error, the first at offset 0x0 (no psb found)" ]
  check ".btr: stream header" grep -qx '# stream tid 4242 cpu -1' "$tmp/out"
fi

# ---- a large raw stream crosses the 1 MiB read pieces ----
# 1000 units of PSB, FUP, 100 * (tip, tnt, tip, tnt, mtc, cyc): 1.1 MB, so
# packets straddle the 1 MiB read pieces
{ printf "${psb}\x7d\x00\x10\x40\x00\x00\x00"; for i in $(seq 1 100); do printf '\x2d\x34\x12\x06\x2d\x78\x56\xac\x59\x01\x03'; done; } >"$tmp/unit"
for i in $(seq 1 1000); do cat "$tmp/unit"; done >"$tmp/big.pt"
"$btr" pt dump "$tmp/big.pt" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "big raw dump exit 0 (got $rc)" [ $rc -eq 0 ]
check "big raw dump: 1000 psb" [ "$(grep -c '  psb$' "$tmp/out")" -eq 1000 ]
check "big raw dump: 100000 tip 0x401234" [ "$(grep -c 'tip 1: 0x0000000000401234$' "$tmp/out")" -eq 100000 ]
check "big raw dump: 1000 * (2 + 6 * 100) lines" [ "$(wc -l <"$tmp/out")" -eq 602000 ]
check "big raw dump: last offset" grep -qx "$(printf '%016x' $(( $(stat -c %s "$tmp/big.pt") - 1 )))  cyc 0x0" <(tail -1 "$tmp/out")
"$btr" pt dump --stats --format json "$tmp/big.pt" >"$tmp/out" 2>&1; rc=$?
check "--stats json exit 0" [ $rc -eq 0 ]
check "--stats json counts" grep -q '"packets": 602000, "errors": 0' "$tmp/out"

# ---- perf.data from Skylake hardware ----
pd=$shared/traces/quipper/perf.data.intel_pt-4.14
if [ -r "$pd" ]; then
  "$btr" pt dump "$pd" >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "perf.data dump exit 0 (got $rc)" [ $rc -eq 0 ]
  check "perf.data: two streams" [ "$(grep -c '^# stream tid 3174 cpu [03]$' "$tmp/out")" -eq 2 ]
  # 9980 + 95129 packets, the counts libipt agrees with (test_pt_libipt)
  check "perf.data: 105109 packet lines" [ "$(grep -c '^[0-9a-f]\{16\}  ' "$tmp/out")" -eq 105109 ]
  check "perf.data: only packet, stream lines" [ "$(grep -vc '^[0-9a-f]\{16\}  [a-z]\|^# stream' "$tmp/out")" -eq 0 ]
  check "perf.data: PSB+ fup" grep -qx '0000000000000017  fup 3: 0xffffffffb960d300' "$tmp/out"
  "$btr" pt dump --cpu 3 --stats --format json "$pd" >"$tmp/out" 2>&1
  check "perf.data --cpu 3 stats" grep -q '"packets": 95129, "errors": 0, "streams": 1' "$tmp/out"
else
  echo "note: $pd absent, perf.data part skipped"
fi

# ---- `btr pt decode` is dispatched ----
"$btr" pt decode --help >"$tmp/out" 2>&1; rc=$?
check "pt decode --help exit 0 (got $rc)" [ $rc -eq 0 ]
check "pt decode --help prints its usage" grep -q '^Usage: btr pt decode' "$tmp/out"

finish cli_pt
