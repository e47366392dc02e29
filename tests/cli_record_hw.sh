#!/usr/bin/env bash
# cli_record_hw.sh - the hardware backends (pt, bts, lbr) on this machine:
# where the PMU is missing each refuses with ONE line naming what is
# missing and the alternatives, exit 3, and leaves no file; -b auto says
# why it passed them over; hardware-only options are usage errors with
# the software backends.  Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$btr" info --format json >"$tmp/info.json"
usable() { python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))[sys.argv[2]]["usable"] else 1)' "$tmp/info.json" "$1"; }

declare -A need=([pt]="intel_pt" [bts]="intel_bts" [lbr]="PERF_SAMPLE_BRANCH_STACK")
for b in pt bts lbr; do
	if usable "$b"; then
		echo "note: $b is usable on this machine; the refusal checks for it are skipped"
		continue
	fi
	"$btr" record -b "$b" -o "$tmp/$b.btr" -- /bin/true >"$tmp/out" 2>"$tmp/err"; rc=$?
	check "$b: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "$b: exactly one stderr line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
	check "$b: names what is missing (${need[$b]})" grep -q "${need[$b]}" "$tmp/err"
	check "$b: names the alternatives" grep -q -- "-b qemu.*-b step" "$tmp/err"
	check "$b: no output file" [ ! -e "$tmp/$b.btr" ]
	check "$b: no temporary file left" [ -z "$(ls "$tmp" | grep "^$b.btr")" ]
	check "$b: nothing on stdout" [ ! -s "$tmp/out" ]
	# an existing file of that name is left alone
	echo keep >"$tmp/keep.btr"
	"$btr" record -b "$b" --user --kernel -o "$tmp/keep.btr" -- /bin/true 2>/dev/null
	check "$b: an existing output file is untouched" [ "$(cat "$tmp/keep.btr")" = keep ]
	# the same refusal with the hardware options
	"$btr" record -b "$b" -a -o "$tmp/a.btr" >/dev/null 2>"$tmp/err"; rc=$?
	check "$b -a: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "$b -a: one line" [ "$(wc -l <"$tmp/err")" -eq 1 ]
	# info agrees
	check "$b: btr info gives the same reason" \
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))[sys.argv[2]]["reason"]; sys.exit(0 if r and r in open(sys.argv[3]).read() else 1)' \
		"$tmp/info.json" "$b" "$tmp/err"
done

# -b auto passes the hardware over with every reason, and records with qemu
if ! usable pt && ! usable bts && ! usable lbr && usable qemu; then
	"$btr" record -v -o "$tmp/auto.btr" -- /bin/true >/dev/null 2>"$tmp/err"; rc=$?
	check "auto: exit 0 (got $rc)" [ $rc -eq 0 ]
	check "auto: says qemu" grep -q "^btr: backend qemu" "$tmp/err"
	for b in pt bts lbr; do
		check "auto: gives the $b reason" grep -q "$b: " "$tmp/err"
	done
	check "auto: wrote the trace" [ -s "$tmp/auto.btr" ]
fi

# usage errors: hardware options with a software backend, --pid with a command
for args in "-b qemu --user" "-b qemu --ip-filter 0x1-0x2" "-b qemu --snapshot" "-b qemu --lbr-filter any" \
	    "-b pt --pid 1 -- /bin/true" "-b pt --pid 1 -a" "-b pt --pid abc" "-b lbr --period 0 -- /bin/true" \
	    "-b pt --aux-size 1000 -- /bin/true"; do
	# shellcheck disable=SC2086
	"$btr" record $args -o "$tmp/u.btr" -- /bin/true >/dev/null 2>"$tmp/err"; rc=$?
	check "'record $args' is a usage error (got $rc)" [ $rc -eq 2 ]
	check "'record $args' leaves no file" [ ! -e "$tmp/u.btr" ]
done

# ---- btr info details ----
"$btr" info --format json --sysfs "$(dirname "$0")/data/sysfs-skl" >"$tmp/i.json"; rc=$?
check "info --sysfs: exit 0" [ $rc -eq 0 ]
check "info json: backends keep usable/reason, details from the sample tree" python3 - "$tmp/i.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for b in ("pt", "bts", "lbr", "qemu", "step"):
    assert isinstance(d[b]["usable"], bool) and isinstance(d[b]["reason"], str) and d[b]["reason"], b
p = d["pt"]["pmu"]
assert p["present"] and p["type"] == 8
assert p["format"]["tsc"] == {"word": 0, "mask": "0x400"}, p["format"]["tsc"]
assert p["format"]["mtc_period"]["mask"] == "0x3c000"
assert p["caps"]["mtc_periods"] == 0x249 and p["caps"]["num_address_ranges"] == 2
assert d["bts"]["pmu"]["type"] == 7 and isinstance(d["bts"]["ds"], bool)
assert d["lbr"]["depth"] == 32 and d["lbr"]["pmu_name"] == "skylake"
assert set(d) == {"pt", "bts", "lbr", "qemu", "step"}, set(d)
m = d["pt"]["machine"]
assert d["bts"]["machine"] == m and d["lbr"]["machine"] == m
assert m["vendor"] and isinstance(m["hypervisor"], bool) and isinstance(m["perf_event_paranoid"], int)
assert isinstance(d["pt"]["cpuid"]["supported"], bool)
PY
"$btr" info >"$tmp/i5.txt"
check "info without -v: the five backend lines" [ "$(wc -l <"$tmp/i5.txt")" -eq 5 ]
"$btr" info -v >"$tmp/i.txt"
check "info -v starts with the same five lines" cmp "$tmp/i5.txt" <(head -5 "$tmp/i.txt")
for s in "^machine:" "perf_event_paranoid: " "^pt:" "CPUID" "^bts:" "DS (CPUID.1:EDX\[21\])" "^lbr:" "depth:" "format:"; do
	check "info text shows '$s'" grep -q "$s" "$tmp/i.txt"
done
if [ -r /proc/sys/kernel/perf_event_paranoid ]; then
	check "info text: the paranoid value" grep -q "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid) (" "$tmp/i.txt"
fi
"$btr" info -v --sysfs "$(dirname "$0")/data/sysfs-alt" >"$tmp/a.txt"
check "info text: formats in kernel notation" grep -q "mtc_period=config:44,46,48,50" "$tmp/a.txt"
check "info text: config2 formats" grep -q "psb_period=config2:60-63" "$tmp/a.txt"

finish cli_record_hw
