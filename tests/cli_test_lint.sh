#!/usr/bin/env bash
# cli_test_lint.sh - the shell tests cannot hide half a condition:
# `check "what" [ A ] && B` counts A alone (tests/lib.sh), so B may fail
# unseen.  tests/lint_checks.py finds a check line with && or || outside
# quotes in every tests/*.sh; this test fails on any.  It first proves the
# lint can fail: a file with the pattern (in each of its forms) is flagged,
# the same conditions written as separate checks are not.  Also a check
# that reads $? after a $(...) in its own words (it tests the substitution).
# Args: $1 btr binary (unused), $2 build dir.
set -u
. "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")" && pwd)
oracle python3 "the check-pattern lint of the shell tests" || finish cli_test_lint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# (each line behind a '|', taken off here, so that no lint of this file
# itself mistakes the samples for checks)
sed 's/^|//' >"$tmp/bad.sh" <<'SH'
|check "two conditions" [ "$a" = 1 ] && [ "$b" = 2 ]
|check "grep and grep" grep -q x f && grep -q y f
|  check "continued" \
|    [ $rc -eq 0 ] && grep -q 'the same' out
|if [ -s f ]; then check "after then" [ 1 = 1 ] || true; fi
|check "with a $(cmd "x" && y) in the message" [ 1 = 1 ] && [ 2 = 2 ]
|cmd 2>err; check "exit 0 ($(head -c 9 err))" [ $? -eq 0 ]
SH
sed 's/^|//' >"$tmp/good.sh" <<'SH'
check "two conditions" [ "$a" = 1 ]
check "two conditions" [ "$b" = 2 ]
check "in one command" bash -c "grep -q x f && grep -q y f"
check "&& in the message only ($(a && b))" [ 1 = 1 ]
[ -s f ] && check "a guard before the check" [ 1 = 1 ]
cmd 2>err; rc=$?; check "exit 0 ($(head -c 9 err))" [ $rc -eq 0 ]
python3 - <<'PY'
|check "x" [ 1 ] && inside a heredoc, not shell
PY
SH
python3 "$src/lint_checks.py" "$tmp/bad.sh" >"$tmp/bad.out"; rc=$?
check "the lint fails on the pattern (exit $rc)" [ $rc -eq 1 ]
check "the lint names each of the 6 forms: $(cat "$tmp/bad.out")" [ "$(wc -l <"$tmp/bad.out")" -eq 6 ]
check "the lint names file and line" grep -q "bad.sh:3: check \"continued\"" "$tmp/bad.out"
python3 "$src/lint_checks.py" "$tmp/good.sh" >"$tmp/good.out"; rc=$?
check "the lint passes one check per condition (exit $rc): $(cat "$tmp/good.out")" [ $rc -eq 0 ]

python3 "$src/lint_checks.py" "$src"/*.sh >"$tmp/all.out"; rc=$?
check "no check in tests/*.sh asserts only part of its condition: $(cat "$tmp/all.out")" [ $rc -eq 0 ]
finish cli_test_lint "$(ls "$src"/*.sh | wc -l) scripts"
