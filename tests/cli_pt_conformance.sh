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
#    NAME-ptxed.exp, in order, with ptxed's mark of an instruction that
#    ran speculatively in a TSX transaction ("? ADDR"; btr: "ADDR ?").  Cases whose ptxed prints
#    only the instruction count (--quiet --stat:insn) compare the count.
#    A case with `; cpu F/M` lines runs once per distinct set of errata
#    btr applies among those CPUs (asked from btr itself), so every
#    listed CPU's behaviour is checked.
#    The events and errors must match too, by rules (compare_events below)
#    that map libipt's event lines onto btr's, never per case: each event
#    as its kind (and value, for ptwrite and paging) and the number of
#    instructions before it.  A case that expects no instructions is passed
#    by its events; one that expects neither is counted as vacuous, not as
#    a pass (printing nothing cannot pass it).
#    Where the case has TSX aborts, `--stat --format json` must count as
#    aborted_instructions the "? " instructions ptxed printed since the
#    transaction began (or since the PSB+ that found it open) up to its
#    "[aborted]".
#  - dump: `btr pt dump` (with --errata-cpu of the case's first `; cpu`)
#    must print the packets of NAME-ptdump.exp: the same offsets and
#    packet kinds, in order (payload wording differs).
# A case that cannot pass is listed in KNOWN below with the reason; the
# test fails if a listed case starts passing (so the list stays honest).
# The same runs over btr's own cases in tests/ptt (variants of the errata
# libipt's cases cover, libipt's .ptt format), built here by
# tests/tools/pttc.py (GNU as for the code); the expected outputs in them
# were checked against Debian's libipt (see tests/ptt/README).
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
dir="$shared/conformance/libipt-ptt"
if [ ! -d "$dir" ]; then
	skip "$dir absent (libipt conformance cases)"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
own="$tmp/own"
mkdir -p "$own"
if ! python3 "$(dirname "$0")/tools/pttc.py" "$own" "$(dirname "$0")"/ptt/*.ptt; then
	bad "tests/ptt: pttc.py could not build btr's own cases (python3 and GNU as needed)"
fi
nown=0
# Hundreds of short btr runs: skip the sanitizer's leak scan at each exit
# (the other tests check leaks), it dominates their cost.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# Cases that cannot pass, "kind:name reason" (kind flow, dump, or events:
# the instructions match, the events differ).
declare -A KNOWN=(
	["events:psb-fup-ptw-trig"]="btr reports a PTWRITE event when it reads the PTW packet, before the flow reaches the PTWRITE instruction (the IP of the FUP after a PTW with its IP bit); libipt after that instruction"
	["events:tip_pge-ptw-fup-tip_pgd"]="PTWRITE event reported at the PTW packet, ahead of the flow (as psb-fup-ptw-trig)"
	["events:ptxed-resync-nomap-ptw-fup"]="PTWRITE event reported at the PTW packet, ahead of the flow (as psb-fup-ptw-trig)"
	["events:ptet-vmexit-vmentry"]="btr reports each PIP when it reads it; libipt binds a PIP of a VM exit/entry (event trace) to that transition, one instruction later"
	["events:ptet-evd_cr2-cfe_iret"]="an EVD (cr2) before a CFE that takes none (IRET): libipt rejects the stream (unexpected packet context), btr accepts it"
	["events:ptet-evd_vmxq-cfe_intr"]="an EVD (vmxq) before a CFE that takes none (an interrupt outside a VM exit): libipt rejects the stream (unexpected packet context), btr accepts it"
	["dump:ptdump-trunc-resync"]="after the bad packet at 0x21 this libipt's ptdump resumes at a PSB that starts before the error (0x19, backing up over the 02 82 pairs of the MNT payload it already printed); btr resumes at the first PSB after the error, as Debian's libipt 2.0 does - test_pt_libipt checks btr against that libipt and fails if btr backs up"
)

nflow=0; ndump=0; known_hit=0; vacuous=0; nevents=0

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
			[[ $line =~ ^\<?([a-z][a-z0-9.]*) ]] && D+=("${BASH_REMATCH[1]}")
		else
			# "<invalid>": bytes decoded as one invalid packet (SKZ84)
			[[ $line =~ ^([0-9a-f]{16})\ +\<?([a-z0-9.]+) ]] && D+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]}")
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

# ---- events and errors ----
# ev_line LINE N: appends LINE's event to EV as "NNNNNNNN KIND[:VALUE]"
# (N: the instructions before it, zero-padded so that a string sort keeps
# positions in order), for both libipt's ptxed and btr's lines:
#   D  disabled (ptxed [disabled...])         [disable IP]
#   O  overflow ([overflow])                   [overflow at offset X]
#   E  a decode error ([OFF, IP: error: ...])  [gap at offset X: ...], except
#      the gap that follows btr's own [overflow] line (the overflow's)
#   TB/TC/X  [begin transaction] [committed] [aborted]
#            [tsx-begin IP] [tsx-commit IP] [tsx-abort IP]
#   S  [stopped]                               [tracestop IP]
#   W:V  [ptwrite: V]                          [ptwrite 0xV]
#   P:V  [paging, cr3: V]                      [paging 0xV]
# Not compared: enable events (btr also enables at a PSB+ and after every
# gap, libipt only at TIP.PGE), ptxed's config errors (about its options,
# e.g. --cpu 0/0), and the events btr does not report or reports in its
# own terms (docs/pt-decode.md, "Events and libipt": interrupt, exec mode,
# CFE/EVD, power, timing and VMCS events).
ev_line() {
	local l=$1 n; printf -v n '%08d' "$2"
	case $l in
	*"config error"*) ;;
	*"error:"*) EV+=("$n E") ;;
	"[gap "*) [ "${EV_OVF-0}" = 1 ] || EV+=("$n E") ;;
	"[disable"*|"["[0-9a-f]*" disabled"*) EV+=("$n D") ;;
	"[overflow"*|"["[0-9a-f]*" overflow]") EV+=("$n O"); EV_OVF=1; return ;;
	"[begin transaction"*|"[tsx-begin"*) EV+=("$n TB") ;;
	"[committed"*|"[tsx-commit"*) EV+=("$n TC") ;;
	"[aborted"*|"[tsx-abort"*) EV+=("$n X") ;;
	"[stopped"*|"[tracestop"*) EV+=("$n S") ;;
	"[ptwrite"*)
		[[ $l =~ ^\[ptwrite:?\ (0x)?([0-9a-f]+) ]] && EV+=("$n W:$((16#${BASH_REMATCH[2]}))") ;;
	"[paging"*)
		[[ $l =~ ^\[paging(,\ cr3:)?\ (0x)?([0-9a-f]+) ]] && EV+=("$n P:$((16#${BASH_REMATCH[3]}))") ;;
	esac
	EV_OVF=0
}
# ev_norm RESYNC: the rules that make the two decoders' event sequences
# comparable, applied to EV on both sides alike:
#  - an error is "the flow broke after N instructions": several at one
#    position count once (libipt may report one failure from its query and
#    again from its walk);
#  - a disable right after an error (no instruction between) is libipt
#    ending the broken flow; btr's gap says the same: dropped;
#  - without ptxed's --resync-on-error libipt stops at the first error
#    (RESYNC 0): what follows it is not compared;
#  - events between the same two instructions are compared as a set (libipt
#    orders them by its queries, btr by packets).
ev_norm() {
	local out=() e last_e=
	for e in "${EV[@]}"; do
		case ${e#* } in
		E) [ "$last_e" = "${e%% *}" ] && continue; last_e=${e%% *}; out+=("$e")
		   [ "$1" = 0 ] && break ;;
		D) [ "$last_e" = "${e%% *}" ] && continue; out+=("$e") ;;
		*) out+=("$e") ;;
		esac
	done
	EV=()
	[ ${#out[@]} -gt 0 ] && mapfile -t EV < <(printf '%s\n' "${out[@]}" | sort)
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

for ptt in "$dir"/*.ptt "$own"/*.ptt; do
	[ -f "$ptt" ] || continue
	case $ptt in "$own"/*) nown=$((nown+1)) ;; esac
	sampled || continue   # (BTR_SAMPLE_STEP: make asan runs one case in K)
	n=${ptt##*/}; n=${n%.ptt}
	cdir=${ptt%/*}
	pt="$cdir/$n.pt"; bin="$cdir/$n.bin"
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
	if [ -f "$cdir/$n-ptdump.exp" ]; then
		ndump=$((ndump+1))
		dargs=(--raw)
		[[ $dopt == *" --no-sync "* ]] && dargs+=(--no-sync)
		# the case's CPU: packet-level errata (SKD007)
		[ ${#cpus[@]} -gt 0 ] && dargs+=(--errata-cpu "${cpus[0]}")
		nooff=0; [[ $dopt == *" --no-offset "* ]] && nooff=1
		# ptdump --no-cyc hides CYC packets (a display option)
		nocyc=0; [[ $dopt == *" --no-cyc "* ]] && nocyc=1
		exp_dump "$cdir/$n-ptdump.exp" $nooff
		got_dump "$("$btr" pt dump "${dargs[@]}" "$pt" 2>/dev/null)" $nooff $nocyc
		d=$(first_diff D G)
		if [ ${#D[@]} -gt 0 ] && [ -z "$d" ]; then
			result dump "$n" 1
		else
			result dump "$n" 0 "packets differ: $d"
		fi
	fi

	# ---- flow ----
	exp="$cdir/$n-ptxed.exp"
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
	W=(); want=; EV=(); spec=0; aborted=-1
	while IFS= read -r line; do
		if [[ $line =~ ^(\?\ )?([0-9a-f]{16}) ]]; then
			W+=("${BASH_REMATCH[1]}${BASH_REMATCH[2]}")
			[ -n "${BASH_REMATCH[1]}" ] && spec=$((spec+1))
		elif [[ $line == "[aborted"* ]]; then
			aborted=$(( (aborted < 0 ? 0 : aborted) + spec )); spec=0
			ev_line "$line" ${#W[@]}
		elif [[ $line == "[begin transaction"* || $line == "[committed"* ]]; then
			spec=0
			ev_line "$line" ${#W[@]}
		elif [[ $line =~ ^insn:\ *([0-9]+) ]]; then
			want=${BASH_REMATCH[1]}
		elif [[ $line == "["* ]]; then
			ev_line "$line" ${#W[@]}
		fi
	done <"$exp"
	resync=0; [[ $xopt == *" --resync-on-error "* ]] && resync=1
	ev_norm $resync
	WE=("${EV[@]}")
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
	ok=1; detail=; evfail=0
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
			G=(); EV=()
			while IFS= read -r line; do
				if [[ $line =~ ^([0-9a-f]{16})(\ \?)?$ ]]; then
					G+=("${BASH_REMATCH[2]:+? }${BASH_REMATCH[1]}")
				elif [[ $line == "["* ]]; then
					ev_line "$line" ${#G[@]}
				fi
			done < <("$btr" pt decode "${args[@]}" "${copt[@]}" --insn 2>/dev/null)
			ev_norm $resync
			GE=("${EV[@]}")
			d=$(first_diff W G)
			if [ -z "$d" ] && [ "$aborted" -ge 0 ]; then
				out=$("$btr" pt decode "${args[@]}" "${copt[@]}" --stat --format json 2>/dev/null)
				[[ $out =~ \"aborted_instructions\":\ *([0-9]+) ]] && got=${BASH_REMATCH[1]} || got=none
				[ "$got" = "$aborted" ] || d="aborted_instructions $got, want $aborted"
			fi
			if [ -n "$d" ]; then
				ok=0; detail="cpu $cpu: $d"
			else
				d=$(first_diff WE GE)
				[ -n "$d" ] && { ok=0; evfail=1; detail="cpu $cpu: events: $d (want ${WE[*]}; got ${GE[*]})"; }
			fi
		fi
	done
	if [ $count_only = 0 ] && [ ${#W[@]} -eq 0 ] && [ ${#WE[@]} -eq 0 ] && [ $ok = 1 ]; then
		# nothing to execute and no event to report: passed by printing
		# nothing, which proves nothing
		vacuous=$((vacuous+1))
		echo "vacuous: flow:$n expects no instructions and no compared events"
		continue
	fi
	[ $count_only = 0 ] && [ ${#WE[@]} -gt 0 ] && nevents=$((nevents+1))
	if [ -n "${KNOWN[events:$n]+x}" ] && [ $evfail = 1 ]; then
		result events "$n" 0 "$detail"
	elif [ -n "${KNOWN[events:$n]+x}" ] && [ $ok = 1 ]; then
		result events "$n" 1
	else
		result flow "$n" $ok "$detail"
	fi
done

check "btr's own cases (tests/ptt) ran: $nown" [ "$nown" -ge 10 ]
check "more than 100 cases ran ($pass passed, $known_hit known): is $dir complete?" [ $((pass + known_hit)) -gt $((100 / ${BTR_SAMPLE_STEP:-1})) ]
finish "libipt conformance" "$known_hit known, $vacuous vacuous ($nflow flow runs, $nevents with events compared, $ndump dumps)"
