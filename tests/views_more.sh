# views_more.sh - sourced by cli_views.sh: annotate, cfg, diff, and the
# shared --filter/--pid/--tid options on the views.

# ---- annotate ----
# the lines of annotate's output @1 for a conditional jump that ran (a
# count) without its taken / not taken column
jcc_no_col() {
	awk '$1 ~ /^[0-9]+$/ && $2 ~ /^0x/ && $3 ~ /^j/ && $3 != "jmp" && $0 !~ /taken [0-9]+ \(/' "$1"
}
"$btr" annotate --function classify "$tmp/a.btr" >"$tmp/ann.txt" 2>"$tmp/err"; rc=$?
check "annotate exit 0 ($rc)" [ $rc -eq 0 ]
check "annotate: entered 180 times" grep -q '^classify .*entered 180 times' "$tmp/ann.txt"
check "annotate: entry instruction x180" grep -Eq "^ +180  0x$(printf %x $((16#$classify)))" "$tmp/ann.txt"
# the range check's branch: taken + not taken = 180
tn=$(grep -E 'taken [0-9]+ \(' "$tmp/ann.txt" | head -1 | sed -E 's/.*taken ([0-9]+) .* not ([0-9]+) .*/\1 \2/')
check "annotate: jcc taken+not = 180 ($tn)" [ "$(( ${tn% *} + ${tn#* } ))" -eq 180 ]
check "annotate: Zydis text" grep -q 'jmp rax' "$tmp/ann.txt"
check "annotate: every conditional branch that ran has its column: $(jcc_no_col "$tmp/ann.txt" | head -1)" \
	[ -z "$(jcc_no_col "$tmp/ann.txt")" ]
check "annotate: source lines" grep -q 'flow_loops.c:20' "$tmp/ann.txt"
"$btr" annotate --source --function classify "$tmp/a.btr" >"$tmp/src.txt"; rc=$?
check "annotate --source exit 0" [ $rc -eq 0 ]
check "annotate --source: switch line x180" grep -Eq '^ +180 +19 .*switch' "$tmp/src.txt"
check "annotate --source: 4 cases never ran" [ "$(grep -c '#####' "$tmp/src.txt")" -eq 4 ]
# each counted line's count is the line's hits in cov's Cobertura report
# (cli_oracles holds cov's line counts against gcov), up to classify's last
# line with code (30, its closing brace: the 130 calls of the cases 2-4, 7
# and default)
"$btr" cov --format cobertura --module prog_flow_loops -o "$tmp/ann.xml" "$tmp/a.btr" 2>/dev/null
check "annotate --source: the counts of cov's Cobertura lines, to the last (30)" python3 -c '
import re, sys, xml.etree.ElementTree as ET
m = [m for m in ET.parse(sys.argv[2]).iter("method") if m.get("name") == "classify"][0]
want = {int(l.get("number")): int(l.get("hits")) for l in m.iter("line")}
got = {}
for l in open(sys.argv[1]):
    x = re.match(r" *([0-9]+|#####) +([0-9]+)  ", l)
    if x:
        got[int(x.group(2))] = 0 if x.group(1) == "#####" else int(x.group(1))
assert got and max(got) == max(want) == 30, (sorted(got), sorted(want))
assert all(want.get(k) == v for k, v in got.items()), (got, want)' "$tmp/src.txt" "$tmp/ann.xml"
# main's loops, counted from flow_loops.c (n = 1: 6 rounds): a line's count
# is how often it ran (its most-run instruction), not the sum over its
# instructions (a for header's init and test)
"$btr" annotate --source --function main "$tmp/a.btr" >"$tmp/src_main.txt"
check "annotate --source main: lines 59-67 run 64, 64, 6, 6, 240, 240, 180, 180 times" \
	[ "$(awk '$2 ~ /^(59|60|62|63|64|65|66|67)$/ {printf "%s:%s ", $2, $1}' "$tmp/src_main.txt")" = \
	  "59:64 60:64 62:6 63:6 64:240 65:240 66:180 67:180 " ]
# libc's symbols carry versions ("__libc_start_main@@GLIBC_2.34"); the name the
# stack views print finds the function, which the program entered once
"$btr" annotate --function __libc_start_main "$tmp/a.btr" >"$tmp/lsm.txt" 2>"$tmp/err"; rc=$?
check "annotate a versioned libc symbol by its name: exit 0, entered once ($rc: $(head -1 "$tmp/err"))" [ $rc -eq 0 ]
check "annotate a versioned libc symbol by its name: exit 0, entered once ($rc: $(head -1 "$tmp/err"))" grep -q '^__libc_start_main.*libc\.so\.6.*entered 1 times' "$tmp/lsm.txt"
"$btr" annotate --function no_such_fn "$tmp/a.btr" >/dev/null 2>"$tmp/err"; rc=$?
check "annotate unknown function: 3 ($rc)" [ $rc -eq 3 ]
check "annotate unknown function: one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]

# ---- cfg ----
if oracle dot "cfg rendered by Graphviz dot"; then
	"$btr" cfg --function classify -o "$tmp/c.svg" "$tmp/a.btr"; rc=$?
	check "cfg svg exit 0 ($rc)" [ $rc -eq 0 ]
	# 11 blocks from the code (range check, table jump, cases 0-7, default)
	# plus the "leave" node
	check "cfg svg: 11 block nodes" [ "$(grep -c '<g id="b[0-9]*" class="node"' "$tmp/c.svg")" -eq 11 ]
	check "cfg svg: 12 nodes" [ "$(grep -c 'class="node"' "$tmp/c.svg")" -eq 12 ]
	# cases 2, 3, 4 and 7 never ran (lcov DA: lines 22-24, 27 are 0): grey
	zero=$(grep -cE '^DA:(2[0-9]),0$' "$tmp/a.info")
	check "cfg svg: $zero grey never-run blocks" [ "$(grep -c 'fill="#e0e0e0"' "$tmp/c.svg")" -eq "$zero" ]
	check "cfg svg: the hottest block dark red" grep -q 'fill="#800026"' "$tmp/c.svg"
	"$btr" cfg --function classify -o "$tmp/c.png" "$tmp/a.btr"; rc=$?
	check "cfg png exit 0 ($rc)" [ $rc -eq 0 ]
	check "cfg png is a PNG" [ "$(head -c 4 "$tmp/c.png" | tail -c 3)" = "PNG" ]
	"$btr" cfg --function classify --diff "$tmp/b.btr" -o "$tmp/d.svg" "$tmp/a.btr"; rc=$?
	check "cfg --diff exit 0 ($rc)" [ $rc -eq 0 ]
	check "cfg --diff: blocks B ran more are red" grep -q 'fill="#de2d26"' "$tmp/d.svg"
fi
# the --diff labels: classify's entry block ran 180 times in A, 360 in B
"$btr" cfg --function classify --diff "$tmp/b.btr" -o "$tmp/d.dot" "$tmp/a.btr"; rc=$?
check "cfg --diff dot exit 0 ($rc)" [ $rc -eq 0 ]
check "cfg --diff dot: the entry block says A x180  B x360" grep -q 'A x180  B x360"' "$tmp/d.dot"
"$btr" cfg --function classify --max-blocks 4 -o "$tmp/c.dot" "$tmp/a.btr" 2>"$tmp/err"; rc=$?
check "cfg dot collapse exit 0 ($rc)" [ $rc -eq 0 ]
check "cfg collapse says so" grep -q 'collapsed' "$tmp/err"
check "cfg collapse label" grep -q 'cold blocks collapsed' "$tmp/c.dot"
"$btr" cfg --function classify -o "$tmp/c.txt" "$tmp/a.btr" >/dev/null 2>&1; rc=$?
check "cfg bad extension: 2 ($rc)" [ $rc -eq 2 ]
"$btr" cfg --function nope -o "$tmp/n.svg" "$tmp/a.btr" >/dev/null 2>&1; rc=$?
check "cfg unknown function: 3 ($rc)" [ $rc -eq 3 ]
check "cfg unknown function: no file" [ ! -e "$tmp/n.svg" ]

# ---- diff ----
"$btr" diff "$tmp/a.btr" "$tmp/a.btr" >"$tmp/same.txt"; rc=$?
check "diff of a trace with itself: 0 ($rc)" [ $rc -eq 0 ]
check "diff A A: nothing differs" grep -q '^blocks: 0 only in A, 0 only in B, 0 changed' "$tmp/same.txt"
"$btr" diff --format json "$tmp/a.btr" "$tmp/b.btr" >"$tmp/d.json"; rc=$?
check "diff json exit 0 ($rc)" [ $rc -eq 0 ]
check "diff json: classify's entry doubled (180 -> 360)" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
c=[x for x in d["blocks_changed"] if x["module"]=="prog_flow_loops" and int(x["start"],16)==int(sys.argv[2],16)]
sys.exit(0 if c and c[0]["count_a"]==180 and c[0]["count_b"]==360 and c[0]["delta"]==180 else 1)' "$tmp/d.json" "$classify"
check "diff json: every delta is count_b - count_a, and some are negative or positive" python3 -c '
import json,sys; d=json.load(open(sys.argv[1]))
v=[x for k in ("blocks_only_a","blocks_only_b","blocks_changed","edges_only_a","edges_only_b") for x in d[k]]
sys.exit(0 if v and all(x["delta"]==x["count_b"]-x["count_a"] for x in v) and any(x["delta"]>0 for x in v) else 1)' "$tmp/d.json"
# docs/diff.md: the changed blocks largest |B - A| first (the default
# --top 20 of them): the first is the largest of all, none grows after it
check "diff json: changed blocks largest |delta| first" python3 -c '
import json,sys; d=[abs(x["delta"]) for x in json.load(open(sys.argv[1]))["blocks_changed"]]
sys.exit(0 if len(d) > 2 and d[0] > d[-1] and all(a >= b for a, b in zip(d, d[1:])) else 1)' "$tmp/d.json"

# ---- --pid / --tid / --filter on the views ----
tid=$("$btr" report --format json "$tmp/a.btr" | python3 -c 'import json,sys; print(json.load(sys.stdin)["thread_list"][0]["tid"])')
"$btr" annotate --tid "$tid" --function classify "$tmp/a.btr" >"$tmp/ann_tid.txt"; rc=$?
check "annotate --tid (the only thread) exit 0" [ $rc -eq 0 ]
check "annotate --tid: same counts" cmp -s "$tmp/ann.txt" "$tmp/ann_tid.txt"
"$btr" cov --pid 999999 -o "$tmp/none.drcov" "$tmp/a.btr"; rc=$?
check "cov --pid (absent) exit 0" [ $rc -eq 0 ]
check "cov --pid (absent): no blocks" grep -aq '^BB Table: 0 bbs' "$tmp/none.drcov"
"$btr" annotate --filter near_ret --function classify "$tmp/a.btr" >"$tmp/ann_ret.txt"; rc=$?
check "annotate --filter exit 0" [ $rc -eq 0 ]
check "annotate --filter near_ret: the jcc is not seen as a branch" \
	bash -c "! grep -q 'taken [0-9]* (' '$tmp/ann_ret.txt'"

# ---- a qemu trace of /bin/gzip (stripped: functions from FDEs) ----
if [ -x /bin/gzip ]; then
	head -c 100000 "$src/lib/pt/ptflow.c" >"$tmp/in.txt"
	check "gzip's input is not empty" [ -s "$tmp/in.txt" ]
	"$btr" record -q -b qemu -o "$tmp/gz.btr" -- /bin/gzip -c "$tmp/in.txt" >/dev/null 2>&1
	f=$("$btr" report --format json "$tmp/gz.btr" | python3 -c '
import json,sys; d=json.load(sys.stdin); print([x["name"] for x in d["top_functions"] if x["name"].startswith("gzip+0x")][0])')
	check "gzip: hottest functions named gzip+0xOFF ($f)" [ -n "$f" ]
	"$btr" cov --module gzip -o "$tmp/gz.drcov" "$tmp/gz.btr"; rc=$?
	check "gzip cov exit 0 ($rc)" [ $rc -eq 0 ]
	check "gzip drcov has blocks" grep -aqE '^BB Table: [1-9][0-9]* bbs' "$tmp/gz.drcov"
	"$btr" annotate --function "$f" "$tmp/gz.btr" >"$tmp/gz.ann"; rc=$?
	check "gzip annotate $f exit 0 ($rc)" [ $rc -eq 0 ]
	check "gzip annotate: entered N times" grep -qE "^gzip\+0x[0-9a-f]+ .*entered [1-9][0-9]* times" "$tmp/gz.ann"
	# every conditional branch that ran has its taken / not taken column,
	# also one that was never taken ("taken 0 (0.0%) not N")
	check "gzip annotate: a conditional branch never taken shows 'taken 0'" grep -q 'taken 0 (0\.0%) not [1-9]' "$tmp/gz.ann"
	check "gzip annotate: every conditional branch that ran has its column: $(jcc_no_col "$tmp/gz.ann" | head -1)" \
		[ -z "$(jcc_no_col "$tmp/gz.ann")" ]
	"$btr" cfg --function "$f" -o "$tmp/gz.dot" "$tmp/gz.btr"; rc=$?
	check "gzip cfg exit 0 ($rc)" [ $rc -eq 0 ]
fi

# ---- the real LBR recording (perf.data) with its binary ----
lbr=$shared/traces/autofdo/test.lbr; lbin=$shared/traces/autofdo/test.binary
if [ -r "$lbr" ] && [ -r "$lbin" ]; then
	"$btr" cov --elf "$lbin" -o "$tmp/lbr.drcov" "$lbr"; rc=$?
	check "test.lbr cov exit 0 ($rc)" [ $rc -eq 0 ]
	check "test.lbr drcov: module test.binary at 0x400000" \
		grep -aq '0x0000000000400000, .*test.binary$' "$tmp/lbr.drcov"
	"$btr" cov --elf "$lbin" --format lcov -o "$tmp/lbr.info" "$lbr"; rc=$?
	check "test.lbr lcov exit 0 ($rc)" [ $rc -eq 0 ]
	check "test.lbr lcov: deflate.c lines" grep -q '^SF:.*deflate.c$' "$tmp/lbr.info"
	"$btr" annotate --elf "$lbin" --function longest_match "$lbr" >"$tmp/lbr.ann"; rc=$?
	check "test.lbr annotate longest_match exit 0 ($rc)" [ $rc -eq 0 ]
	check "test.lbr annotate: deflate.c lines" grep -q 'deflate.c:[0-9]' "$tmp/lbr.ann"
	"$btr" cfg --elf "$lbin" --function longest_match -o "$tmp/lbr.dot" "$lbr"; rc=$?
	check "test.lbr cfg exit 0 ($rc)" [ $rc -eq 0 ]
else
	echo "shared test.lbr absent: LBR views skipped"
fi

# ---- stripped python3.11: functions by FDE instead of one [python3.11] bucket ----
if [ -x /usr/bin/python3.11 ]; then
	"$btr" record -q -b qemu -o "$tmp/py.btr" -- /usr/bin/python3.11 -c 'x = sum(range(2000))' >/dev/null 2>&1
	"$btr" report --format json "$tmp/py.btr" >"$tmp/py.json"; rc=$?
	check "python3.11 report exit 0 ($rc)" [ $rc -eq 0 ]
	check "python3.11: no [python3.11] bucket, no function above 40% of the instructions" python3 -c '
import json,sys; d=json.load(open(sys.argv[1])); t=d["instructions"]
f=d["top_functions"]
sys.exit(0 if t > 0 and not any(x["name"]=="[python3.11]" for x in f) and f[0]["instructions"] < 0.4*t
         and any(x["name"].startswith("python3.11+0x") for x in f) else 1)' "$tmp/py.json"
fi
