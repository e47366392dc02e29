#!/usr/bin/env bash
# cli_pt_conformance.sh - libipt's conformance suite through `btr pt decode`
# and `btr pt dump`.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
#
# The cases are read at run time from SHARED/conformance/libipt-ptt (never
# copied here; see its README): for each NAME.ptt with NAME.pt and NAME.bin
#  - flow: `btr pt decode NAME.pt --raw NAME.bin:ORG --insn` (plus the
#    options the case's `; opt:ptxed` and `; cpu` lines imply, mapped onto
#    btr's) must print exactly the executed instruction addresses of
#    NAME-ptxed.exp, in order (a leading "? " - speculative, in a TSX
#    transaction - is part of the flow too).  Cases whose ptxed prints
#    only the instruction count (--quiet --stat:insn) compare the count.
#    A case with `; cpu F/M` lines runs once per distinct set of errata
#    btr applies among those CPUs (asked from btr itself), so every
#    listed CPU's behaviour is checked.
#  - dump: `btr pt dump` (with --errata-cpu of the case's first `; cpu`)
#    must print the packets of NAME-ptdump.exp: the same offsets and
#    packet kinds, in order (payload wording differs).
# A case that cannot pass is listed in KNOWN below with the reason; the
# test fails if a listed case starts passing (so the list stays honest).
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
dir="$shared/conformance/libipt-ptt"
if [ ! -d "$dir" ]; then
	skip "$dir absent (libipt conformance cases)"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Hundreds of short btr runs: skip the sanitizer's leak scan at each exit
# (the other tests check leaks), it dominates their cost.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# Cases that cannot pass, "kind:name reason" (kind flow or dump).
declare -A KNOWN=(
	["dump:ptdump-trunc-resync"]="after the bad packet at 0x21 this libipt's ptdump resumes at a PSB that starts before the error (0x19, backing up over the 02 82 pairs of the MNT payload it already printed); btr resumes at the first PSB after the error, as Debian's libipt 2.0 does - test_pt_libipt checks btr against that libipt and fails if btr backs up"
)

nflow=0; ndump=0; known_hit=0

# result KIND NAME OK DETAIL: counts, honours KNOWN.
result() {
	local key="$1:$2"
	if [ -n "${KNOWN[$key]+x}" ]; then
		if [ "$3" = 1 ]; then
			bad "$key passes now but is listed as known (${KNOWN[$key]}): remove it from KNOWN"
		else
			echo "known: $key: ${KNOWN[$key]}"
			known_hit=$((known_hit+1))
		fi
		return
	fi
	if [ "$3" = 1 ]; then ok; else bad "$key: $4"; fi
}

# Errata btr applies for CPU F/M (cached: one btr run per distinct CPU).
# (Everything below parses with bash builtins: hundreds of sed/grep forks
# would cost more than the btr runs.)
declare -A ERRATA=()
errata_of() {
	local cpu=$1 pt=$2 out
	if [ -z "${ERRATA[$cpu]+x}" ]; then
		out=$("$btr" pt decode "$pt" --cpu "$cpu" --stat --format json 2>/dev/null)
		[[ $out =~ \"errata\":\ *\"([^\"]*)\" ]] && ERRATA[$cpu]=${BASH_REMATCH[1]} || ERRATA[$cpu]="?"
	fi
	E=${ERRATA[$cpu]}
}

# exp_dump FILE NOOFF: "offset kind" (or "kind") lines of a ptdump .exp in D
exp_dump() {
	local line; D=()
	while IFS= read -r line; do
		if [ "$2" = 1 ]; then
			[[ $line =~ ^([a-z][a-z0-9.]*) ]] && D+=("${BASH_REMATCH[1]}")
		else
			[[ $line =~ ^([0-9a-f]{16})\ +([a-z0-9.]+) ]] && D+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]}")
		fi
	done <"$1"
}

# same for btr's dump output in $1 (a string)
got_dump() {
	local line; G=()
	while IFS= read -r line; do
		[[ $line =~ ^([0-9a-f]{16})\ +([a-z0-9.]+) ]] || continue
		[ "$3" = 1 ] && [ "${BASH_REMATCH[2]}" = cyc ] && continue
		if [ "$2" = 1 ]; then G+=("${BASH_REMATCH[2]}"); else G+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"); fi
	done <<<"$1"
}

# first difference of arrays named $1 and $2, or nothing
first_diff() {
	local -n a=$1 b=$2
	local i n=${#a[@]}
	[ ${#b[@]} -gt $n ] && n=${#b[@]}
	for ((i = 0; i < n; i++)); do
		if [ "${a[i]-}" != "${b[i]-}" ]; then
			echo "line $((i+1)): want '${a[i]-(end)}', got '${b[i]-(end)}'"
			return
		fi
	done
}

for ptt in "$dir"/*.ptt; do
	n=${ptt##*/}; n=${n%.ptt}
	pt="$dir/$n.pt"; bin="$dir/$n.bin"
	[ -f "$pt" ] || continue
	org=; cpus=(); xopt=" "; dopt=" "
	while IFS= read -r line; do
		if [[ $line =~ ^org[[:space:]]+(0x[0-9a-fA-F]+) ]]; then
			[ -z "$org" ] && org=${BASH_REMATCH[1]}
		elif [[ $line =~ ^\;[[:space:]]*cpu[[:space:]]+([0-9]+/[0-9]+) ]]; then
			cpus+=("${BASH_REMATCH[1]}")
		elif [[ $line =~ ^\;[[:space:]]*opt:ptxed[[:space:]]+(.*)$ ]]; then
			xopt+="${BASH_REMATCH[1]} "
		elif [[ $line =~ ^\;[[:space:]]*opt:ptdump[[:space:]]+(.*)$ ]]; then
			dopt+="${BASH_REMATCH[1]} "
		fi
	done <"$ptt"

	# ---- dump ----
	if [ -f "$dir/$n-ptdump.exp" ]; then
		ndump=$((ndump+1))
		dargs=(--raw)
		[[ $dopt == *" --no-sync "* ]] && dargs+=(--no-sync)
		# the case's CPU: packet-level errata (SKD007)
		[ ${#cpus[@]} -gt 0 ] && dargs+=(--errata-cpu "${cpus[0]}")
		nooff=0; [[ $dopt == *" --no-offset "* ]] && nooff=1
		# ptdump --no-cyc hides CYC packets (a display option)
		nocyc=0; [[ $dopt == *" --no-cyc "* ]] && nocyc=1
		exp_dump "$dir/$n-ptdump.exp" $nooff
		got_dump "$("$btr" pt dump "${dargs[@]}" "$pt" 2>/dev/null)" $nooff $nocyc
		d=$(first_diff D G)
		if [ ${#D[@]} -gt 0 ] && [ -z "$d" ]; then
			result dump "$n" 1
		else
			result dump "$n" 0 "packets differ: $d"
		fi
	fi

	# ---- flow ----
	exp="$dir/$n-ptxed.exp"
	[ -f "$exp" ] && [ -f "$bin" ] || continue
	args=("$pt" --raw "$bin:$org")
	# ptxed's address filter (--filter:addrN_cfg 1 = FilterEn range A..B)
	# is btr's --ip-filter A-B (SKL014 needs to know filtering is on).
	for k in 0 1 2 3; do
		if [[ $xopt == *" --filter:addr${k}_cfg 1 "* ]] &&
		   [[ $xopt =~ --filter:addr${k}_a\ ([0-9a-fx]+) ]] && a=${BASH_REMATCH[1]} &&
		   [[ $xopt =~ --filter:addr${k}_b\ ([0-9a-fx]+) ]]; then
			args+=(--ip-filter "$a-${BASH_REMATCH[1]}")
		fi
	done
	[[ $xopt == *" --no-retcomp "* ]] && args+=(--no-retcomp)
	count_only=0
	[[ $xopt == *" --quiet "* && $xopt == *" --stat:insn "* ]] && count_only=1
	W=(); want=
	while IFS= read -r line; do
		if [[ $line =~ ^(\?\ )?([0-9a-f]{16}) ]]; then
			W+=("${BASH_REMATCH[2]}")
		elif [[ $line =~ ^insn:\ *([0-9]+) ]]; then
			want=${BASH_REMATCH[1]}
		fi
	done <"$exp"
	# one run per distinct errata set among the listed CPUs
	runs=()
	if [ ${#cpus[@]} -eq 0 ]; then
		runs=(none)
	else
		declare -A seen=()
		for cpu in "${cpus[@]}"; do
			errata_of "$cpu" "$pt"
			[ -n "${seen[x$E]+x}" ] && continue
			seen[x$E]=1
			runs+=("$cpu")
		done
		unset seen
	fi
	ok=1; detail=
	for cpu in "${runs[@]}"; do
		nflow=$((nflow+1))
		copt=(); [ "$cpu" != none ] && copt=(--cpu "$cpu")
		if [ $count_only = 1 ]; then
			out=$("$btr" pt decode "${args[@]}" "${copt[@]}" --stat --format json 2>/dev/null)
			got=; [[ $out =~ \"instructions\":\ *([0-9]+) ]] && got=${BASH_REMATCH[1]}
			if [ -z "$want" ] || [ "$got" != "$want" ]; then
				ok=0; detail="cpu $cpu: $got instructions, want $want"
			fi
		else
			G=()
			while IFS= read -r line; do
				[[ $line =~ ^[0-9a-f]{16}$ ]] && G+=("$line")
			done < <("$btr" pt decode "${args[@]}" "${copt[@]}" --insn 2>/dev/null)
			d=$(first_diff W G)
			if [ -n "$d" ]; then
				ok=0; detail="cpu $cpu: $d"
			fi
		fi
	done
	result flow "$n" $ok "$detail"
done

check "more than 100 cases ran ($pass passed, $known_hit known): is $dir complete?" [ $((pass + known_hit)) -gt 100 ]
finish "libipt conformance" "$known_hit known ($nflow flow runs, $ndump dumps)"
