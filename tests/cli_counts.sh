#!/usr/bin/env bash
# cli_counts.sh - the count views (report, cov, cfg, annotate, diff, afdo,
# bolt's fdata; its pre-aggregated form: tests/cli_bolt_counts.sh)
# let the PT decoder count branches on its blocks (btr/ptflow.h "counts")
# instead of delivering each one in order.  Their outputs must be the
# same, byte for byte, as with every branch in order (BTR_ORDERED=1), on
# real recordings: gzip, python3, threads, signals, a process tree with
# exec, a dlclose'd library, and the real hardware PT of perf.data.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
need_qemu

head -c 150000 /dev/urandom | base64 >"$tmp/in.txt"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
declare -a recorded=()
src=$(cd "$(dirname "$0")/.." && pwd)
[ -r "$build/btr-insn-count.so" ] || bad "btr-insn-count.so not built"
# counted NAME CMD...: rec with the independent instruction counter
# (tests/tools/insn_count.c, no btr code) in the same QEMU run
counted() {
	local name=$1
	shift
	BTR_COUNT_PLUGIN=$build/btr-insn-count.so BTR_COUNT_OUT=$tmp/$name.counts \
	BTR_QEMU=$src/tests/tools/qemu_count.sh rec "$name" "$@"
}
counted gzip gzip -c "$tmp/in.txt"
rec python3 "$py" -c 'import json; print(sum(len(json.dumps({"k": i})) for i in range(3000)))'
counted threads "$build/prog_flow_threads"
rec signals "$build/prog_flow_signals"   # (faults: the counter counts a faulting instruction, btr not)
counted proc_tree "$build/prog_proc_tree"
counted dlclose "$build/prog_qemu_dlclose" "$build/libbtr_dl_loop.so" "$build/libbtr_dl_other.so"

# the counted report (the decoder counting on its blocks) against what is not
# btr: each thread's instructions as the independent counter saw them in the
# traced processes
for t in gzip threads proc_tree dlclose; do
	"$btr" report --format json "$tmp/$t.btr" >"$tmp/$t.cj" 2>"$tmp/$t.cerr"
	check "$t: counted instructions per thread = the independent counter's" python3 - "$tmp/$t.cj" "$tmp/$t.counts" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
# the traced processes' lines (btr record's own probe of QEMU is counted too)
pids = {p["pid"] for p in d["processes"]}
want = {}
for l in open(sys.argv[2]):
    p = l.split()
    if len(p) == 3 and int(p[0]) in pids:
        want[int(p[1])] = want.get(int(p[1]), 0) + int(p[2])
got = {}
for t in d["thread_list"]:
    got[t["tid"]] = got.get(t["tid"], 0) + t["instructions"]
assert sum(want.values()) > 10000, want
assert got == want, sorted(set(got.items()) ^ set(want.items()))[:6]
PY
done

# same NAME CMD...: runs CMD with counts and in order; outputs equal (an
# argument OUT.EXT is an output file, c.EXT and o.EXT, compared as stdout)
same() {
	local name=$1 a c=() o=()
	shift
	for a in "$@"; do
		case $a in
		OUT.*) c+=("$tmp/c.${a#OUT.}"); o+=("$tmp/o.${a#OUT.}") ;;
		*) c+=("$a"); o+=("$a") ;;
		esac
	done
	"${c[@]}" >"$tmp/c.out" 2>"$tmp/c.err"; local rc1=$?
	BTR_ORDERED=1 "${o[@]}" >"$tmp/o.out" 2>"$tmp/o.err"; local rc2=$?
	for a in "$@"; do
		case $a in
		OUT.*) cat "$tmp/c.${a#OUT.}" >>"$tmp/c.out"; cat "$tmp/o.${a#OUT.}" >>"$tmp/o.out"
		       rm -f "$tmp/c.${a#OUT.}" "$tmp/o.${a#OUT.}" ;;
		esac
	done
	# (both must work: two failures would compare equal)
	check "$name: exit 0 both ways ($rc1, $rc2: $(head -c 200 "$tmp/c.err"))" [ $rc1 -eq 0 -a $rc2 -eq 0 ]
	check "$name: some output" [ -s "$tmp/c.out" ]
	if cmp -s "$tmp/c.out" "$tmp/o.out" && cmp -s "$tmp/c.err" "$tmp/o.err"; then
		ok
	else
		bad "$name: output differs with counts: $(diff "$tmp/o.out" "$tmp/c.out" | head -3 | tr '\n' ' ')"
	fi
}

for t in "${recorded[@]}"; do
	sampled || continue   # (BTR_SAMPLE_STEP: make asan compares one trace in K)
	f=$tmp/$t.btr
	same "$t report" "$btr" report "$f"
	same "$t report json" "$btr" report --format json --top 50 "$f"
	same "$t cov lcov" "$btr" cov --format lcov -o - "$f"
	same "$t cov drcov" "$btr" cov --format drcov -o - "$f"
	# the module table in path order, whatever order the modules were
	# met in (counted runs meet them in another order than branches one
	# by one: the byte comparison above saw that only on some inputs)
	"$btr" cov --format drcov -o "$tmp/m.drcov" "$f" 2>/dev/null
	sed -n '/^Columns:/,/^BB Table/p' "$tmp/m.drcov" | sed '1d;$d' | sed 's/.*, //' >"$tmp/m.paths"
	check "$t drcov modules in path order: $(tr '\n' ' ' <"$tmp/m.paths")" \
		sh -c '[ -s "$1" ] && LC_ALL=C sort -c "$1"' _ "$tmp/m.paths"
	same "$t diff" "$btr" diff "$f" "$tmp/gzip.btr"
	same "$t bolt fdata" "$btr" bolt -o OUT.fdata "$f"
	hot=$("$btr" report --format json --top 1 "$f" 2>/dev/null |
		"$py" -c 'import json,sys; f=json.load(sys.stdin).get("top_functions") or [{}]; print(f[0].get("name",""))')
	if [ -n "$hot" ]; then
		same "$t cfg $hot" "$btr" cfg --function "$hot" -o OUT.dot "$f"
		same "$t annotate $hot" "$btr" annotate --function "$hot" "$f"
	else
		bad "$t: no hottest function in the report"
	fi
done
# afdo needs line tables: the test program's
"$btr" afdo --elf "$build/prog_flow_threads" -o "$tmp/t.afdo" "$tmp/threads.btr" >/dev/null 2>&1
check "afdo of the threads recording works" [ -s "$tmp/t.afdo" ]
same "threads afdo" "$btr" afdo --elf "$build/prog_flow_threads" -o - "$tmp/threads.btr"

# real hardware PT (perf.data, per-CPU: decoded in order either way)
pt="$shared/traces/quipper/perf.data.intel_pt-4.14"
if [ -f "$pt" ]; then
	same "quipper PT report" "$btr" report --format json "$pt"
else
	note "$pt absent: hardware PT not compared"
fi
finish cli_counts "${#recorded[@]} recordings"
