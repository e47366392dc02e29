#!/usr/bin/env bash
# cli_bolt.sh - `btr bolt` on a program recorded with `btr record -b qemu`
# (linked with --emit-relocs): call counts in the fdata equal those of the
# source (is_prime called 2000 times by count_primes, ...); llvm-bolt-16
# accepts the fdata and the pre-aggregated profile, reports that most of the
# program's functions have a profile - as many through the fdata's names as
# through the pre-aggregated addresses - and none is stale, and the optimized
# binary runs; LBR samples (autofdo) with mispredictions; bad input.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
prog=$build/prog_prof_bolt_relocs

"$btr" record -q -b qemu -o p.btr -- "$prog" 200 >/dev/null 2>&1; check "record" [ -s p.btr ]
"$btr" bolt p.btr -o p.fdata; check "fdata exit 0" [ $? -eq 0 ]
"$btr" bolt --pre-aggregated p.btr -o p.pa; check "pre-aggregated exit 0" [ $? -eq 0 ]

# call edges "1 CALLER OFF 1 CALLEE 0 MISPRED COUNT" summed per pair
edge() { awk -v a="$1" -v b="$2" '$1==1 && $2==a && $4==1 && $5==b && $6=="0" {s+=$8} END {print s+0}' p.fdata; }
check "count_primes calls is_prime 2000 times ($(edge count_primes is_prime))" [ "$(edge count_primes is_prime)" = 2000 ]
check "walk calls classify 1000 times" [ "$(edge walk classify)" = 1000 ]
check "walk calls mix 1000 times" [ "$(edge walk mix)" = 1000 ]
check "checksum calls mix 200 times" [ "$(edge checksum mix)" = 200 ]
check "main calls mix 200 times" [ "$(edge main mix)" = 200 ]
check "main calls bubble once" [ "$(edge main bubble)" = 1 ]
rets=$(awk '$1==1 && $2=="is_prime" && $4==1 && $5=="count_primes" {s+=$8} END {print s+0}' p.fdata)
check "is_prime returns 2000 times ($rets)" [ "$rets" = 2000 ]
check "fdata lines well formed" awk 'NF!=8 || ($1!=0 && $1!=1) || ($4!=0 && $4!=1) || $8 !~ /^[0-9]+$/ {exit 1}' p.fdata
check "pa lines well formed" awk '($1=="B" && NF==5) || ($1=="F" && NF==4) {next} {exit 1}' p.pa
# main's calls through the PLT, from objdump's "call ADDR <NAME@plt>": with
# an argument main calls atoi, malloc and free once each (lines 75, 76, 81);
# the fdata names the stubs NAME@PLT (BOLT's names) at the call's offset
main=$(nm "$prog" | awk '$3 == "main" {print $1}')
objdump -d --no-show-raw-insn "$prog" | awk '/^[0-9a-f]+ <main>:/ {m = 1; next} /^$/ {m = 0}
	m && /call.*@plt>$/ {sub(":", "", $1); n = $NF; gsub(/[<>]/, "", n); sub(/@plt$/, "@PLT", n); print $1, n}' |
	while read -r a n; do printf '%x %s\n' $((16#$a - 16#$main)) "$n"; done >plt.sites
awk '$1 == 1 && $2 == "main" && $4 == 1 && $5 ~ /@PLT$/ && $6 == "0" {print $3, $5, $8}' p.fdata | sort >plt.got
check "main's PLT calls: atoi, free, malloc once each ($(tr '\n' ' ' <plt.got))" \
	[ "$(awk '{print $2, $3}' plt.got | sort | tr '\n' ' ')" = "atoi@PLT 1 free@PLT 1 malloc@PLT 1 " ]
check "main's PLT calls at objdump's call sites ($(tr '\n' ' ' <plt.sites))" \
	[ -z "$(awk '{print $1, $2}' plt.got | grep -vxFf plt.sites)" ]
# pre-aggregated "B FROM TO COUNT MISPRED": the branches into is_prime's
# entry (its address as nm gives it) are count_primes' 2000 calls
ip=$(nm "$prog" | awk '$3 == "is_prime" {print $1}' | sed 's/^0*//')
into=$(awk -v t="$ip" '$1=="B" && $3==t {s+=$4} END {print s+0}' p.pa)
check "pa: 2000 branches into is_prime (0x$ip): $into" [ -n "$ip" -a "$into" = 2000 ]

if oracle llvm-bolt-16 "BOLT itself on btr's profiles (Debian bolt-16)"; then
  llvm-bolt-16 "$prog" -o p.bolt -data p.fdata -reorder-blocks=ext-tsp -reorder-functions=hfsort >bolt.out 2>&1
  check "llvm-bolt-16 accepts the fdata" [ $? -eq 0 ]
  # "BOLT-INFO: N out of M functions in the binary (P%) have non-empty execution profile"
  read -r n m < <(sed -n 's/.*BOLT-INFO: \([0-9]*\) out of \([0-9]*\) functions in the binary.*non-empty execution profile.*/\1 \2/p' bolt.out)
  echo "llvm-bolt-16 (fdata): ${n:-?} of ${m:-?} functions have a profile"
  check "bolt reports profiled functions" [ -n "${n:-}" ]
  # the program's 8 functions and the C runtime's that ran: most of the binary
  check "the program's 8 functions matched ($n of $m)" [ "${n:-0}" -ge 8 ]
  check "most functions matched ($n of $m)" [ $((2 * ${n:-0})) -gt "${m:-1}" ]
  check "no stale profile" bash -c "! grep -qi 'stale' bolt.out"
  grep -v '^0 \[unknown\]' p.fdata >p.known
  llvm-bolt-16 "$prog" -o p3.bolt -data p.known >known.out 2>&1
  check "llvm-bolt-16 ignores no function of the fdata ($(grep -o 'profile for [0-9]* objects' known.out))" \
    bash -c "! grep -q 'objects was ignored' known.out"
  ./p.bolt 200; check "optimized binary runs" [ $? -eq 0 ]
  llvm-bolt-16 "$prog" -o p2.bolt -pa -data p.pa >pa.out 2>&1
  check "llvm-bolt-16 -pa accepts the pre-aggregated profile" [ $? -eq 0 ]
  read -r n2 m2 < <(sed -n 's/.*BOLT-INFO: \([0-9]*\) out of \([0-9]*\) functions in the binary.*non-empty execution profile.*/\1 \2/p' pa.out)
  echo "llvm-bolt-16 (-pa): ${n2:-?} of ${m2:-?} functions have a profile"
  check "pa: the program's 8 functions matched ($n2 of $m2)" [ "${n2:-0}" -ge 8 ]
  check "pa: most functions matched ($n2 of $m2)" [ $((2 * ${n2:-0})) -gt "${m2:-1}" ]
  ./p2.bolt 200; check "pa-optimized binary runs" [ $? -eq 0 ]
  # the pre-aggregated profile names no functions (addresses only): the
  # fdata's names must reach as many, static ones (name/N) included
  check "fdata profiles as many functions as -pa ($n, $n2)" [ "${n:-0}" = "${n2:-x}" ]
fi

lbr=$shared/traces/autofdo/test.lbr
if [ -r "$lbr" ]; then
  "$btr" bolt --elf "$shared/traces/autofdo/test.binary" "$lbr" -o lbr.fdata; check "lbr exit 0" [ $? -eq 0 ]
  check "lbr: mispredictions carried" awk '$7>0 {f=1} END {exit !f}' lbr.fdata
  check "lbr: longest_match profiled" grep -q '^1 longest_match ' lbr.fdata
  if oracle llvm-bolt-16 "llvm-bolt-16 reading the LBR fdata"; then
    llvm-bolt-16 "$shared/traces/autofdo/test.binary" -o lbr.bolt -data lbr.fdata >lbr.out 2>&1
    check "llvm-bolt-16 accepts the LBR fdata" grep -q 'have non-empty execution profile' lbr.out
    # every function name btr writes is one BOLT knows: without the lines
    # from outside the module ("0 [unknown] 0", an object of their own)
    # no profile is ignored - the binary's static functions (fill_window,
    # send_tree, ...) as name/N; with plain names 8 objects were ignored
    grep -v '^0 \[unknown\]' lbr.fdata >lbr.known
    llvm-bolt-16 "$shared/traces/autofdo/test.binary" -o lbr2.bolt -data lbr.known >lbr2.out 2>&1
    check "llvm-bolt-16 ignores no function of the LBR fdata ($(grep -o 'profile for [0-9]* objects' lbr2.out))" \
      bash -c "! grep -q 'objects was ignored' lbr2.out"
  fi
fi

"$btr" bolt --help >/dev/null; check "--help exit 0" [ $? -eq 0 ]
"$btr" bolt p.btr 2>/dev/null; check "missing -o exit 2" [ $? -eq 2 ]
"$btr" bolt --module nosuch p.btr -o x.fdata 2>err; check "unknown module exit 3" [ $? -eq 3 ]
check "unknown module one line" [ "$(wc -l <err)" -eq 1 ]
check "unknown module leaves no output" [ ! -e x.fdata ]
"$btr" bolt /nonexistent.btr -o x.fdata 2>err; check "missing trace exit 3" [ $? -eq 3 ]

finish cli_bolt
