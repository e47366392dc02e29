#!/usr/bin/env bash
# cli_wording.sh - error and status lines say the real cause (issue 21,
# item 7): a missing file is "no such file or directory"; a command that
# cannot be recorded is refused without naming the qemu backend when
# another one was asked for; the step probe says what it measured, not a
# guess about the hypervisor; a file size limit (`ulimit -f`) is one line
# naming the user's output and the limit, with what was recorded kept in
# OUT.partial that btr report reads (-b step), or refused before the start
# with the reason (-b qemu, whose working files in $TMPDIR need more).
# Args: $1 btr, $2 build dir, $3 shared.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2")
lacks() { ! grep -q "$@"; }
# one_line PATTERN FILE: FILE is one line, matching PATTERN (grep -E).
# (Conditions chained with && after `check ...` would run outside it.)
one_line() { [ "$(wc -l <"$2")" -eq 1 ] && grep -Eq "$1" "$2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# ENOENT
"$btr" report missing.btr 2>err.txt; rc=$?
check "missing trace: exit 3 (got $rc)" [ $rc -eq 3 ]
check "missing trace: 'no such file or directory': $(cat err.txt)" \
	grep -qx "btr: missing.btr: no such file or directory" err.txt

# a command that is no program: the line names btr's rule, not a backend
printf 'not a program\n' >junk; chmod +x junk
for b in step qemu; do
	"$btr" record -q -b $b -o j.btr -- ./junk 2>err.txt; rc=$?
	check "-b $b, not a program: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "-b $b, not a program: one line naming btr's rule: $(cat err.txt)" one_line "btr records only those" err.txt
	check "-b $b, not a program: the line does not name qemu: $(cat err.txt)" lacks -i qemu err.txt
done

# the step probe: what it measured
if "$btr" info | grep -q '^step  yes'; then
	"$btr" info >info.txt 2>&1
	check "info, step line: no guess about KVM: $(grep '^step' info.txt)" lacks KVM info.txt
	check "info, step line: says what BTF did: $(grep '^step' info.txt)" \
		grep -Eq "^step .*(BTF honoured: block stepping|BTF not honoured: a trap per instruction)" info.txt
	"$btr" record -b step -o s.btr -- "$build/prog_nolibc_step" 2>err.txt >/dev/null
	check "record -b step: a status line: $(cat err.txt)" grep -q "^btr: step: " err.txt
	check "record -b step status line: no guess about KVM: $(cat err.txt)" lacks KVM err.txt

	# ulimit -f: the trace stops at the limit; one line naming the output
	# and the cause; the complete chunks kept in OUT.partial
	(ulimit -f 100; exec "$btr" record -q -b step -o out.btr -- /bin/true >/dev/null 2>err.txt); rc=$?
	check "ulimit -f, -b step: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "ulimit -f, -b step: one line naming out.btr, the limit and the kept file: $(cat err.txt)" \
		one_line "^btr: error: out.btr: .*ulimit -f.*kept in out.btr.partial" err.txt
	check "ulimit -f, -b step: nothing under the output name" [ ! -e out.btr ]
	check "ulimit -f, -b step: no temporary file: $(ls)" [ -z "$(ls | grep 'out.btr.tmp')" ]
	check "ulimit -f, -b step: out.btr.partial kept" [ -s out.btr.partial ]
	"$btr" report out.btr.partial >rep.txt 2>/dev/null
	check "ulimit -f, -b step: btr report reads out.btr.partial: $(head -3 rep.txt)" \
		grep -Eq "^branches: +[1-9]" rep.txt
else
	echo "note: -b step unusable here: the step and ulimit -f cases are skipped"
fi
if "$btr" info | grep -q '^qemu  yes'; then
	(ulimit -f 100; exec "$btr" record -q -b qemu -o q.btr -- /bin/touch marker 2>err.txt); rc=$?
	check "ulimit -f, -b qemu: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "ulimit -f, -b qemu: one line naming q.btr and the limit, no internal file: $(cat err.txt)" \
		one_line "^btr: error: q.btr: .*ulimit -f.*-b step" err.txt
	check "ulimit -f, -b qemu: no internal file named: $(cat err.txt)" lacks btr-record- err.txt
	check "ulimit -f, -b qemu: refused before the start" [ ! -e marker ]
	check "ulimit -f, -b qemu: no q.btr" [ ! -e q.btr ]
fi

finish cli_wording
