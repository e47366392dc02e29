#!/usr/bin/env bash
# cli_bolt_counts.sh - `btr bolt` takes the PT decoder's counted branches
# (btr/analysis.h ops->counts, docs/bolt.md "Counted branches") instead of
# every branch in order (BTR_ORDERED=1).  The fdata must be byte-identical
# both ways; the pre-aggregated profile's fall-through ranges are finer
# with counts (they end at every branch), so BOLT itself is the judge:
# llvm-bolt-16 -pa reads each form and writes its profile (-w YAML: every
# function's blocks, their counts, taken and fall-through edge counts), and
# the two YAML profiles must be equal.  On real recordings: an -O1 program
# linked with --emit-relocs, one built here with gcc -O2 (-fno-pie), gzip
# (stripped, -O2, PIE; BOLT finds its functions from .eh_frame), a C++
# program that throws (landing pads), an -O2 program with .cold splits.
# LBR goes in order either way: its output must not change; the hardware
# PT of a perf.data (no binary for BOLT) must give the same fdata and taken
# branches.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
need_qemu
cd "$tmp"

head -c 200000 /dev/urandom | base64 >in.txt
gz=$(readlink -f "$(command -v gzip)")
declare -a recorded=() bins=()
rec_bin() { # NAME BINARY ARGS...: rec, and keep the binary
	rec "$@" && bins+=("$2")
}
rec_bin relocs "$build/prog_prof_bolt_relocs" 200
if oracle gcc "the gcc-built subject"; then
	# the source's own -O2 build, without PIE (fixed addresses)
	gcc -O2 -fno-pie -no-pie -Wl,--emit-relocs "$lib_src/tests/progs/oracle_static/a.c" \
		"$lib_src/tests/progs/oracle_static/b.c" -o o2prog && rec_bin o2 "$tmp/o2prog"
else
	note "gcc absent: no -O2 build of our own"
fi
rec_bin gzip "$gz" -c in.txt
rec_bin except "$build/prog_flow_except"
rec_bin cold "$build/prog_benign_cold_o2"

# both NAME OUT ARGS...: `btr bolt ARGS` with counts (c.OUT) and in order (o.OUT)
both() {
	local name=$1 out=$2
	shift 2
	"$btr" bolt "$@" -o "c.$out" 2>c.err; local rc1=$?
	BTR_ORDERED=1 "$btr" bolt "$@" -o "o.$out" 2>o.err; local rc2=$?
	# (both must work: two failures would compare equal)
	check "$name: exit 0 both ways ($rc1, $rc2: $(head -c 200 c.err))" [ $rc1 -eq 0 -a $rc2 -eq 0 ]
	check "$name: some output" [ -s "c.$out" ]
}

have_bolt=0
oracle llvm-bolt-16 "BOLT's reading of counted and ordered pre-aggregated profiles" && have_bolt=1
for i in "${!recorded[@]}"; do
	n=${recorded[$i]} bin=${bins[$i]}
	both "$n fdata" "$n.fdata" "$n.btr"
	check "$n: fdata byte-identical with counts" cmp -s "c.$n.fdata" "o.$n.fdata"
	both "$n pre-aggregated" "$n.pa" --pre-aggregated "$n.btr"
	cF=$(grep -c '^F ' "c.$n.pa"); oF=$(grep -c '^F ' "o.$n.pa")
	# the counted path did run: its ranges end at not-taken branches too
	check "$n: finer ranges with counts ($cF F lines, in order $oF)" [ "$cF" -gt "$oF" ]
	check "$n: same taken branches" cmp -s <(grep '^B ' "c.$n.pa" | sort) <(grep '^B ' "o.$n.pa" | sort)
	[ $have_bolt = 1 ] || continue
	for f in c o; do
		llvm-bolt-16 "$bin" -o "$f.$n.bolt" -pa -data "$f.$n.pa" -w "$f.$n.yaml" >"$f.$n.log" 2>&1
		rc=$?; check "$n: llvm-bolt-16 -pa reads the $f profile ($(tail -1 "$f.$n.log"))" [ $rc -eq 0 ]
	done
	blocks=$(grep -c 'succ:.*cnt: [1-9]' "o.$n.yaml" 2>/dev/null)
	check "$n: BOLT's profile has counted edges (${blocks:-0} blocks)" [ "${blocks:-0}" -gt 0 ]
	if cmp -s "c.$n.yaml" "o.$n.yaml"; then
		ok
	else
		bad "$n: BOLT's profile differs with counts: $(diff "o.$n.yaml" "c.$n.yaml" | head -6 | tr '\n' ' ')"
	fi
	rm -f "c.$n.bolt" "o.$n.bolt"
done

# LBR is delivered in order either way
lbr=$shared/traces/autofdo/test.lbr
if [ -r "$lbr" ]; then
	both "LBR fdata" lbr.fdata --elf "$shared/traces/autofdo/test.binary" "$lbr"
	check "LBR fdata the same" cmp -s c.lbr.fdata o.lbr.fdata
	check "LBR mispredictions carried" awk '$7>0 {f=1} END {exit !f}' c.lbr.fdata
else
	note "$lbr absent: LBR not compared"
fi
pt=$shared/traces/quipper/perf.data.intel_pt-4.14
if [ -r "$pt" ]; then
	"$btr" bolt "$pt" -o c.pt.pa --pre-aggregated 2>c.err; rc1=$?
	BTR_ORDERED=1 "$btr" bolt "$pt" -o o.pt.pa --pre-aggregated 2>o.err; rc2=$?
	check "quipper PT: same exit both ways ($rc1, $rc2)" [ $rc1 -eq $rc2 ]
	if [ $rc1 -eq 0 ]; then
		# (no binary for BOLT here: the taken branches must be the same;
		# counted ranges also start where tracing resumed, an enable's IP)
		check "quipper PT: same taken branches" cmp -s <(grep '^B ' c.pt.pa | sort) <(grep '^B ' o.pt.pa | sort)
		check "quipper PT: some taken branches" grep -q '^B ' c.pt.pa
		# (its fdata is empty: no symbols for the module's code)
		"$btr" bolt "$pt" -o c.pt.fdata 2>/dev/null; rc1=$?
		BTR_ORDERED=1 "$btr" bolt "$pt" -o o.pt.fdata 2>/dev/null; rc2=$?
		check "quipper PT fdata: exit 0 both ways ($rc1, $rc2)" [ $rc1 -eq 0 -a $rc2 -eq 0 ]
		check "quipper PT fdata the same" cmp -s c.pt.fdata o.pt.fdata
	fi
else
	note "$pt absent: hardware PT not compared"
fi
finish cli_bolt_counts "${#recorded[@]} recordings"
