#!/usr/bin/env bash
# cli_script.sh - `btr script`: the default line format on a recording of
# a suite program (every branch of the stream, one line each, parsable
# columns, filters), the perf-compatible `--fields [ip,]brstack` mode
# byte-compared with Debian's `perf script` on the real LBR recordings,
# and errors.  Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- usage ----
"$btr" script --help >"$tmp/out" 2>&1; rc=$?
check "--help exit 0 (got $rc)" [ $rc -eq 0 ]
check "--help prints usage" grep -q '^Usage: btr script' "$tmp/out"
for args in "" "--bogus x.btr" "--fields nosuch x.btr" "--fields ip x.btr" "--fields brstack,sym x.btr" \
	    "--fields brstack --filter jcc x.btr" "--filter nosuchkind x.btr" "--pid 0 x.btr" "a.btr b.btr"; do
	# shellcheck disable=SC2086
	"$btr" script $args >"$tmp/out" 2>"$tmp/err"; rc=$?
	check "'script $args' is a usage error (got $rc)" [ $rc -eq 2 ]
	check "'script $args' prints nothing on stdout" [ ! -s "$tmp/out" ]
done

# ---- runtime errors: one line naming the file, exit 3 ----
for mode in "" "--fields brstack"; do
	# shellcheck disable=SC2086
	"$btr" script $mode "$tmp/missing.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
	check "[$mode] missing file exit 3 (got $rc)" [ $rc -eq 3 ]
	check "[$mode] missing file: one stderr line naming it" \
		[ "$(wc -l <"$tmp/err")" -eq 1 -a "$(grep -c missing.btr "$tmp/err")" -eq 1 ]
	printf 'this is not a trace at all, just some text that is long enough\n' >"$tmp/text.btr"
	# shellcheck disable=SC2086
	"$btr" script $mode "$tmp/text.btr" >"$tmp/out" 2>"$tmp/err"; rc=$?
	check "[$mode] not a trace: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "[$mode] not a trace: one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
done

# ---- default format on a real recording ----
prog="$build/prog_flow_loops"
if "$btr" record -b qemu -o "$tmp/loops.btr" -- "$prog" >/dev/null 2>"$tmp/rec.err"; then
	"$btr" script "$tmp/loops.btr" >"$tmp/s.txt" 2>"$tmp/err"; rc=$?
	check "script exit 0 (got $rc)" [ $rc -eq 0 ]
	"$btr" report --format json "$tmp/loops.btr" >"$tmp/r.json"
	nbr=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["branches"])' "$tmp/r.json")
	nlines=$(grep -vc '^\[' "$tmp/s.txt")
	check "one line per branch of the stream ($nlines lines, report says $nbr)" [ "$nlines" -eq "$nbr" ]
	check "at least 1000 branches" [ "$nlines" -ge 1000 ]
	# PID/TID TIME 0xFROM -> 0xTO SYM -> SYM KIND FLAGS: exactly 10 columns
	bad_lines=$(grep -v '^\[' "$tmp/s.txt" | grep -Evc '^[0-9]+/[0-9]+ ([0-9]+|-) 0x[0-9a-f]+ -> 0x[0-9a-f]+ [^ ]+ -> [^ ]+ [a-z_0-9]+ [^ ]+$')
	check "every line has the documented columns ($bad_lines do not)" [ "$bad_lines" -eq 0 ]
	pid=$(grep -v '^\[' "$tmp/s.txt" | head -1 | cut -d/ -f1)
	check "the branches carry the recorded pid" [ "$pid" -gt 0 ]
	# the program's own functions are named, and fib calls itself
	check "fib+off -> fib recursion is named" grep -Eq ' fib\+0x[0-9a-f]+ -> fib call ' "$tmp/s.txt"
	check "a return into main" grep -Eq ' -> main\+0x[0-9a-f]+ ret ' "$tmp/s.txt"
	# not-taken conditionals are marked, and instruction counts add up to the report's
	check "not-taken jcc marked N" grep -Eq ' jcc N,insns=[0-9]+$' "$tmp/s.txt"
	ninsn=$(grep -v '^\[' "$tmp/s.txt" | grep -o 'insns=[0-9]*' | cut -d= -f2 | paste -sd+ | bc)
	rinsn=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions"])' "$tmp/r.json")
	check "insns= sum ($ninsn) equals the report's instructions ($rinsn)" [ "$ninsn" = "$rinsn" ]
	# --filter: only returns, and as many as the report counts
	"$btr" script --filter near_ret "$tmp/loops.btr" >"$tmp/ret.txt"
	nret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["branches_by_class"]["near_ret"])' "$tmp/r.json")
	check "--filter near_ret: only ret lines" [ "$(grep -v '^\[' "$tmp/ret.txt" | grep -vc ' ret ')" -eq 0 ]
	check "--filter near_ret: $nret lines" [ "$(grep -vc '^\[' "$tmp/ret.txt")" -eq "$nret" ]
	# --pid: the recorded process gives everything, another none
	"$btr" script --pid "$pid" "$tmp/loops.btr" >"$tmp/pid.txt"
	check "--pid PID keeps every line" cmp -s "$tmp/pid.txt" "$tmp/s.txt"
	"$btr" script --pid $((pid + 100000)) "$tmp/loops.btr" >"$tmp/pid2.txt"
	check "--pid of another process prints no branch" [ "$(grep -vc '^\[' "$tmp/pid2.txt")" -eq 0 ]
	# --fields: chosen columns in the chosen order
	"$btr" script --fields kind,addr "$tmp/loops.btr" >"$tmp/f.txt"
	check "--fields kind,addr" [ "$(grep -v '^\[' "$tmp/f.txt" | grep -Evc '^[a-z_0-9]+ 0x[0-9a-f]+ -> 0x[0-9a-f]+$')" -eq 0 ]
	check "--fields keeps the line count" [ "$(grep -vc '^\[' "$tmp/f.txt")" -eq "$nlines" ]
	# a .btr without LBR records prints no sample in brstack mode
	"$btr" script --fields brstack "$tmp/loops.btr" >"$tmp/b.txt"; rc=$?
	check "brstack of a PT .btr: exit 0 and empty" [ $rc -eq 0 -a ! -s "$tmp/b.txt" ]
else
	echo "note: btr record -b qemu failed here ($(head -1 "$tmp/rec.err")); default-format checks skipped"
fi

# ---- brstack mode against perf ----
lbr="$shared/traces/autofdo/test.lbr"
q1="$shared/traces/quipper/perf.data.branch-4.14"
q2="$shared/traces/quipper/perf.data.callgraph_and_branch-3.8"
if [ ! -r "$lbr" ] || [ ! -r "$q1" ] || [ ! -r "$q2" ]; then
	echo "note: shared LBR recordings absent; brstack checks skipped"
else
	# the default format reads the LBR files too: one line per non-empty entry
	"$btr" script --fields tid,addr,flags "$q1" >"$tmp/q1.txt"; rc=$?
	check "default format on perf LBR: exit 0" [ $rc -eq 0 ]
	"$btr" script --fields brstack "$q1" | tr ' ' '\n' | grep '^0x' | grep -vc '^0x0/0x0/' >"$tmp/n"
	check "default format: one line per recorded LBR entry" [ "$(wc -l <"$tmp/q1.txt")" -eq "$(cat "$tmp/n")" ]
	check "LBR cycles shown" grep -Eq 'cyc=[0-9]+' "$tmp/q1.txt"
	# each entry's cyc= is the cycle count of its brstack entry (the 6th
	# field, byte-identical to perf script's below; 0 there: no cyc=)
	"$btr" script --fields brstack "$q1" | tr ' ' '\n' | grep '^0x' | grep -v '^0x0/0x0/' |
		awk -F/ '{print $1, $2, $6}' | sort >"$tmp/q1.cyc.want"
	awk '{c = 0; if (match($5, /cyc=[0-9]+/)) c = substr($5, RSTART + 4, RLENGTH - 4); print $2, $4, c}' \
		"$tmp/q1.txt" | sort >"$tmp/q1.cyc.got"
	check "every entry's cyc= is its brstack cycle count ($(grep -c . "$tmp/q1.cyc.got") entries)" \
		cmp -s "$tmp/q1.cyc.want" "$tmp/q1.cyc.got"
	check "LBR mispredictions shown" grep -Eq ' M(,|$)' "$tmp/q1.txt"
	# M and P as often as the brstack entries (byte-identical to perf
	# script's below) say mispredicted and predicted
	"$btr" script --fields brstack "$q1" | tr ' ' '\n' | grep '^0x' | grep -v '^0x0/0x0/' >"$tmp/q1.br"
	for x in M P; do
		nf=$(grep -Ec " ([^ ]*,)?$x(,|$)" "$tmp/q1.txt"); nb=$(grep -c "^0x[0-9a-f]*/0x[0-9a-f]*/$x/" "$tmp/q1.br")
		check "flag $x on $nf lines, $nb brstack entries /$x/" [ "$nf" -gt 0 -a "$nf" -eq "$nb" ]
	done
	# --pid in brstack mode
	"$btr" script --fields brstack --pid 1 "$lbr" >"$tmp/p1"
	check "brstack --pid of an absent process prints nothing" [ ! -s "$tmp/p1" ]
	if oracle perf "brstack compared with perf script (Debian linux-perf)"; then
		for f in "$lbr" "$q1" "$q2"; do
			b=$(basename "$f")
			perf script -i "$f" -F brstack >"$tmp/perf.$b" 2>/dev/null
			"$btr" script --fields brstack "$f" >"$tmp/btr.$b"; rc=$?
			check "$b: brstack exit 0 (got $rc)" [ $rc -eq 0 ]
			check "$b: perf printed samples" [ -s "$tmp/perf.$b" ]
			check "$b: -F brstack byte-identical to perf script" cmp "$tmp/perf.$b" "$tmp/btr.$b"
		done
		# with ip: identical where samples have no callchain
		for f in "$lbr" "$q1"; do
			b=$(basename "$f")
			perf script -i "$f" -F ip,brstack >"$tmp/perf.ip.$b" 2>/dev/null
			"$btr" script -F ip,brstack "$f" >"$tmp/btr.ip.$b"
			check "$b: -F ip,brstack byte-identical to perf script" cmp "$tmp/perf.ip.$b" "$tmp/btr.ip.$b"
		done
		# with a callchain perf symbol-resolves the ip lines; the branch
		# stacks (the " 0x" lines) are still identical
		b=$(basename "$q2")
		perf script -i "$q2" -F ip,brstack 2>/dev/null | grep '^ 0x' >"$tmp/perf.ipb"
		"$btr" script -F ip,brstack "$q2" | grep '^ 0x' >"$tmp/btr.ipb"
		check "$b: -F ip,brstack branch stacks identical" cmp "$tmp/perf.ipb" "$tmp/btr.ipb"
		check "$b: 1856 samples" [ "$(wc -l <"$tmp/btr.ipb")" -eq 1856 ]
	fi
fi

# Decoder gaps are lines too: code whose file is gone by decoding time (a
# copy of a program, deleted after the recording) cannot be decoded, and
# every gap report counts (the PT decoder's GAP and OVERFLOW events, not
# only the container's) is a [gap ...] line.  (Code without a file, a JIT
# stub, decodes since the recorder keeps its bytes: tests/cli_jit.sh.)
if ! "$btr" info | grep -q '^qemu  yes'; then
	note "qemu backend unusable: the decoder-gap lines are not checked"
elif cp "$build/prog_benign_jit" "$tmp/gone" && "$btr" record -q -o "$tmp/jit.btr" -- "$tmp/gone" >/dev/null 2>&1; then
	rm -f "$tmp/gone"
	want=$("$btr" report --format json "$tmp/jit.btr" | python3 -c 'import json,sys; print(json.load(sys.stdin)["gaps"])')
	got=$("$btr" script "$tmp/jit.btr" | grep -c '^\[gap [0-9]*/[0-9]* offset 0x[0-9a-f]* ')
	check "jit: report's gaps are there (${want:-?})" [ "${want:-0}" -gt 0 ]
	check "jit: one [gap] line per gap of the report ($got of ${want:-?})" [ "$got" = "$want" ]
else
	bad "record prog_benign_jit"
fi

finish cli_script
