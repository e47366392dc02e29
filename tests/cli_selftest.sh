#!/usr/bin/env bash
# cli_selftest.sh - the helpers of tests/lib.sh can fail: each case is a
# little script that sources lib.sh, run in its own bash, and its exit code
# and counters are checked - a failing check counts as a failure and makes
# the script exit non-zero, check returns its verdict, a skip after a
# failure exits 1 (not 77), a missing oracle fails under
# BTR_REQUIRE_ORACLES=1.  Args (unused): $1 btr, $2 build dir, $3 shared.
set -u
. "$(dirname "$0")/lib.sh"
lib=$(cd "$(dirname "$0")" && pwd)/lib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# case NAME WANT_RC WANT_STDOUT_GREP BODY: runs BODY after sourcing lib.sh
case_() {
	local name=$1 want=$2 grepfor=$3 body=$4 rc
	printf '%s\n' ". '$lib'" "$body" >"$tmp/$name.sh"
	(cd "$tmp" && env -u BTR_REQUIRE_ORACLES -u BTR_ALLOW_MISSING_ORACLES -u BTR_TEST_FIRST_FAIL bash "$tmp/$name.sh") >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
	check "$name: exit $want (got $rc; $(tr '\n' ' ' <"$tmp/$name.err" | head -c 200))" [ $rc -eq "$want" ]
	[ -z "$grepfor" ] || check "$name: output has '$grepfor': $(tr '\n' ' ' <"$tmp/$name.out")" grep -q -- "$grepfor" "$tmp/$name.out"
}

case_ all_pass 0 "2 passed, 0 failed" 'check "t" true; check "u" [ 1 -eq 1 ]; finish'
case_ failing_check 1 "1 passed, 1 failed" 'check "t" true; check "f" false; finish'
case_ failing_test_bracket 1 "0 passed, 1 failed" 'check "f" [ 1 -eq 2 ]; finish'
case_ check_returns_verdict 0 "" 'check "f" false && exit 5; check "t" true || exit 6; exit 0'
case_ failure_message_on_stderr 0 "" 'check "the name of it" false 2>err; grep -q "^FAIL: the name of it$" err'
case_ bad_counts_and_returns_1 1 "0 passed, 1 failed" 'bad "x" && exit 5; finish'
case_ first_fail_stops 1 "0 passed, 1 failed (BTR_TEST_FIRST_FAIL" 'export BTR_TEST_FIRST_FAIL=1; check "f" false; echo reached; exit 5'
case_ first_fail_off_goes_on 5 "reached" 'check "f" false; echo reached; exit 5'
case_ ok_counts 0 "2 passed, 0 failed" 'ok; ok "with text"; finish'
case_ clean_skip 77 "SKIP: nothing" 'check "t" true; skip "nothing"'
case_ skip_after_failure 1 "" 'check "f" false; skip "data absent"'
case_ check_skip_after_failure 1 "" 'bad "f"; check_skip "data absent"'
case_ finish_name 0 "me: 3 runs, 1 passed, 0 failed" 'ok; finish me "3 runs"'
case_ oracle_present 0 "1 passed, 0 failed" 'oracle bash "x" && ok; finish'
case_ oracle_missing_noted 0 "note: no-such-tool-xyz not installed" 'oracle no-such-tool-xyz "y" && exit 5; finish'
case_ oracle_missing_required 1 "0 passed, 1 failed" 'export BTR_REQUIRE_ORACLES=1; oracle no-such-tool-xyz "y"; finish'
case_ oracle_missing_allowed 0 "0 passed, 0 failed" 'export BTR_REQUIRE_ORACLES=1 BTR_ALLOW_MISSING_ORACLES=1; oracle no-such-tool-xyz "y"; finish'
case_ record_qemu_failure_counts 1 "0 passed, 1 failed" 'btr=false; record_qemu o.btr x true && exit 5; finish'
case_ record_qemu_success_returns_0 0 "0 passed, 0 failed" 'btr=true; record_qemu o.btr x true || exit 5; finish'
case_ pycheck_failure_counts 1 "" "pycheck no_such_check /dev/null; pycheck_run; finish"

finish cli_selftest
