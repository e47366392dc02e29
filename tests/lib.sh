# tests/lib.sh - the one set of helpers of the shell tests (tests/cli_*.sh),
# sourced, never run.  tests/cli_selftest.sh proves that each can fail.
#
# Use, first thing in a script (before any cd; ctest passes absolute paths):
#   . "$(dirname "$0")/lib.sh"
#   check "what" CMD ARGS...   runs CMD ARGS; counts a pass, or a failure with
#                              "FAIL: what" on stderr; returns the verdict (0/1).
#                              The verdict is CMD alone: in `check "x" [ A ] && B`
#                              B is not counted - write two checks, one per
#                              condition (or one CMD that tests both).
#   ok [TEXT]                  counts a pass
#   bad "what"                 counts a failure ("FAIL: what" on stderr); returns 1.
#                              Under BTR_TEST_FIRST_FAIL=1 (`make mutants` sets it:
#                              a mutant is killed by its first failure) the script
#                              ends there, exit 1 (a failure in a subshell ends it).
#   skip "why"                 exit 77 (CTest's "Skipped") with "SKIP: why" - but
#                              exit 1 if a check has failed already: a skip after a
#                              failure is a failure.  (check_skip: the same.)
#   note "text"                "note: text" on stdout (information, counts nothing)
#   need_qemu                  skip unless qemu-x86_64 is installed and `$btr info`
#                              says the qemu backend works (uses $btr)
#   record_qemu OUT NAME CMD...  `$btr record -q -b qemu -o OUT -- CMD...`; 0 if it
#                              worked, else a failure "recording NAME: <its error>"
#   oracle TOOL "what"         0 if TOOL (a command) is there.  If not: with
#                              BTR_REQUIRE_ORACLES=1 (`make test` sets it) a failure
#                              naming TOOL and what goes unchecked, unless
#                              BTR_ALLOW_MISSING_ORACLES=1; else a note.  Returns 1
#                              when missing:  if oracle dot "cfg SVG"; then ...; fi
#   pycheck ARGS...            queues one check of tests/profcheck.py (NAME FILES...)
#   pycheck_run                runs the queued python checks as one check
#   forms [WORD...]            the forms of btr's command registry (`$btr
#                              --list-commands`, tools/btr/commands.c) whose flags
#                              have every WORD (reads-trace, reads-elf,
#                              writes-stdout, writes-file, binary; !WORD: not),
#                              one a line: NAME<TAB>FLAGS<TAB>FORM
#   fill FORM                  FORM with its placeholders replaced by the values
#                              of $FILE $OUT $FUNC $ELF $ADDR $PROG $PROFILE
#   finish [NAME [EXTRA]]      "NAME: EXTRA, N passed, N failed"; exit 1 on a failure, else 0
# The counters are $pass and $fail (set to 0 here).
pass=0
fail=0
py=()
lib_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

ok() { pass=$((pass + 1)); return 0; }
bad() {
	echo "FAIL: $*" >&2
	fail=$((fail + 1))
	if [ "${BTR_TEST_FIRST_FAIL:-0}" = 1 ]; then
		echo "$pass passed, $fail failed (BTR_TEST_FIRST_FAIL=1: stopped at the first failure)"
		exit 1
	fi
	return 1
}
check() {
	local what=$1
	shift
	if "$@"; then ok; else bad "$what"; fi
}
# sampled: true for one case in BTR_SAMPLE_STEP (default 1: every case),
# counting the calls in this shell; TORTURE_SHIFT (make: the day of the
# year) moves which one, so that successive days together run every case.
# `make asan` samples the suite's long case lists this way (Makefile,
# docs/reliability.md "Sanitizers"); make test runs them all.
sample_n=0
sampled() {
	local step=${BTR_SAMPLE_STEP:-1}
	sample_n=$((sample_n + 1))
	[ "$step" -le 1 ] || [ $(( (sample_n + 10#${TORTURE_SHIFT:-0}) % step )) -eq 0 ]
}
skip() {
	if [ "$fail" -ne 0 ]; then
		echo "SKIP requested ($*) after $fail failed checks: reported as a failure" >&2
		echo "$pass passed, $fail failed"
		exit 1
	fi
	echo "SKIP: $*"
	exit 77
}
check_skip() { skip "$@"; }
note() { echo "note: $*"; }
# record_qemu OUT NAME CMD...: `$btr record -q -b qemu -o OUT -- CMD...`
# (its stdout dropped, stderr in OUT.err); 0 if it worked, else a FAIL
# naming NAME with the recorder's first error line.
record_qemu() {
	local out=$1 name=$2
	shift 2
	"$btr" record -q -b qemu -o "$out" -- "$@" >/dev/null 2>"$out.err" && return 0
	bad "recording $name: $(head -1 "$out.err")"
}
# rec NAME CMD...: record_qemu into $tmp/NAME.btr; NAME joins the array
# recorded when it worked
rec() {
	local name=$1
	shift
	record_qemu "$tmp/$name.btr" "$name" "$@" && recorded+=("$name")
}
need_qemu() {
	command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
	"$btr" info | grep -q '^qemu  yes' || skip "qemu backend unusable: $("$btr" info | grep '^qemu')"
}
oracle() {
	local tool=$1
	shift
	command -v "$tool" >/dev/null 2>&1 && return 0
	if [ "${BTR_REQUIRE_ORACLES:-0}" = 1 ] && [ "${BTR_ALLOW_MISSING_ORACLES:-0}" != 1 ]; then
		bad "oracle '$tool' missing (scripts/deps.sh installs it; BTR_ALLOW_MISSING_ORACLES=1 allows this): not checked: $*"
	else
		note "$tool not installed: not checked: $*"
	fi
	return 1
}
pycheck() { py+=("$@" ';;'); }
pycheck_run() {
	local out rc
	out=$(python3 "$lib_src/tests/profcheck.py" "${py[@]}")
	rc=$?
	echo "$out"
	check "python checks ($(echo "$out" | grep -c '^ok') ok)" [ $rc -eq 0 ]
}
finish() {
	echo "${1:+$1: }${2:+$2, }$pass passed, $fail failed"
	[ "$fail" -eq 0 ] || exit 1
	exit 0
}

# The forms of the command registry whose flags have every word of "$@"
# ("!word": not): NAME<TAB>FLAGS<TAB>FORM lines.
forms() {
	"$btr" --list-commands | awk -F'\t' -v want="$*" '
		{ n = split(want, w, " "); split($4, f, ","); delete have
		  for (i in f) have[f[i]] = 1
		  for (i = 1; i <= n; i++) {
			if (substr(w[i], 1, 1) == "!") { if (substr(w[i], 2) in have) next }
			else if (!(w[i] in have)) next
		  }
		  print $1 "\t" $4 "\t" $5 }'
}
# A form with its placeholders filled in (PROFILE before FILE: it holds it).
fill() {
	local x=$1
	x=${x//PROFILE/${PROFILE:-}}; x=${x//FILE/${FILE:-}}; x=${x//OUT/${OUT:-}}; x=${x//FUNC/${FUNC:-}}
	x=${x//ELF/${ELF:-}}; x=${x//ADDR/${ADDR:-}}; x=${x//PROG/${PROG:-}}
	printf '%s\n' "$x"
}
