#!/usr/bin/env bash
# cli_contract.sh - what docs/contract.md pins, checked on a real recording:
# the JSON members of report, check and info; branch lines with 0x hex
# addresses; pt decode --insn's 16 hex digits; pt dump's hex offsets; the
# exit codes 0, 1, 2, 3 and record's pass-through of the program's status.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

need_qemu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t=$tmp/t.btr
"$btr" record -o "$t" -- "$build/prog_flow_loops" >/dev/null 2>&1 || bad "record flow_loops"

members() {  # members FILE KEY... : the JSON object in FILE has every KEY
	python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
missing = [k for k in sys.argv[2:] if k not in d]
if missing: print('missing', missing); sys.exit(1)
PY
}
"$btr" report --format json "$t" >"$tmp/r.json" || bad "report json exit"
members "$tmp/r.json" instructions branches branches_by_class threads modules gaps data_lost backend && ok || bad "report json members"
python3 - "$tmp/r.json" <<'PY' && ok || bad "branches_by_class keys are the LBR_SELECT classes"
import json, sys
d = json.load(open(sys.argv[1]))['branches_by_class']
names = {'cpl_eq_0', 'cpl_neq_0', 'jcc', 'near_rel_call', 'near_ind_call', 'near_ret', 'near_ind_jmp', 'near_rel_jmp', 'far_branch'}
sys.exit(0 if set(d) and set(d) <= names else 1)
PY
# every member docs/contract.md pins for a command's JSON ("`btr CMD ...
# --format json` has `a` and `b`", "`btr CMD --format json`: an object with
# at least `a`, `b`, ..."), read from the page, checked in that command's
# output on this trace (numbers where the page says so)
python3 - "$lib_src/docs/contract.md" "$btr" "$t" <<'PY' >"$tmp/contract.out"
import json, re, subprocess, sys
doc, btr, trace = sys.argv[1:4]
text = open(doc).read()
items = re.split(r"\n(?=- )", text)
n = 0
for it in items:
    it = " ".join(it.split())
    m = re.match(r"- `btr ([a-z ]+?)( --[a-z]+)*( --format json)( --[a-z]+)*`(: an object with at least| has)(.*)", it)
    if not m:
        continue
    head = re.match(r"- `btr ([^`]*)`", it).group(1).split()
    if head[0] in ("info", "check"):
        continue   # not of this trace alone: checked below
    body = re.split(r"\(\[|\. ", m.group(6))[0]
    want = re.findall(r"`([a-z_]+)`", body)
    r = subprocess.run([btr] + head + [trace], capture_output=True, text=True)
    try:
        d = json.loads(r.stdout)
    except ValueError:
        print("bad btr %s: not JSON (exit %d)" % (" ".join(head), r.returncode)); continue
    for k in want:
        n += 1
        ok = k in d and (not "(numbers)" in it or isinstance(d[k], int))
        print("%s btr %s: member %s%s" % ("ok" if ok else "bad", " ".join(head), k, "" if ok else " missing or not a number"))
print("ok %d members pinned" % n if n >= 12 else "bad only %d members found on the page" % n)
PY
while read -r st msg; do if [ "$st" = ok ]; then ok; else bad "$msg"; fi; done <"$tmp/contract.out"
check "contract members: pt decode's tsx_aborts checked" grep -q "^ok btr pt decode --stat --format json: member tsx_aborts" "$tmp/contract.out"
check "contract members: report's aborted_instructions checked" grep -q "^ok btr report --format json: member aborted_instructions" "$tmp/contract.out"
"$btr" info --format json >"$tmp/i.json" || bad "info json exit"
python3 - "$tmp/i.json" <<'PY' && ok || bad "info json: usable and reason per backend"
import json, sys
d = json.load(open(sys.argv[1]))
for b in ('pt', 'bts', 'lbr', 'qemu', 'step'):
    assert isinstance(d[b]['usable'], bool) and isinstance(d[b]['reason'], str), b
PY
"$btr" check --format json "$t" >"$tmp/c.json"; rc=$?
[ $rc -eq 0 ] && ok || bad "check of a benign program exits $rc"
members "$tmp/c.json" findings && ok || bad "check json has findings"
# check_rop: a real finding, exit 1, and the finding's members
"$btr" record -o "$tmp/rop.btr" -- "$build/prog_check_rop" >/dev/null 2>&1
"$btr" check --format json "$tmp/rop.btr" >"$tmp/rop.json"; rc=$?
[ $rc -eq 1 ] && ok || bad "check of check_rop exits $rc, not 1"
python3 - "$tmp/rop.json" <<'PY' && ok || bad "finding members kind severity thread from to detail"
import json, re, sys
f = json.load(open(sys.argv[1]))['findings']
assert f
for x in f:
    for k in ('kind', 'severity', 'thread', 'from', 'to', 'detail'):
        assert k in x, k
    assert re.fullmatch(r'0x[0-9a-f]+', x['from']) and re.fullmatch(r'0x[0-9a-f]+', x['to'])
PY
# the JSON findings are the text's: kind, position, from, to and their symbols
"$btr" check "$tmp/rop.btr" >"$tmp/rop.txt"
python3 - "$tmp/rop.json" "$tmp/rop.txt" <<'PY' && ok || bad "check: JSON findings differ from the text's"
import json, re, sys
js = [(x['kind'], x['position'], int(x['from'], 16), int(x['to'], 16), x['from_sym'], x['to_sym'])
      for x in json.load(open(sys.argv[1]))['findings']]
tx = [(m.group(1), int(m.group(2)), int(m.group(3), 16), int(m.group(4), 16), m.group(5), m.group(6))
      for m in re.finditer(r'^\S+ +(\S+) pid \d+ tid \d+ #(\d+): 0x([0-9a-f]+) -> 0x([0-9a-f]+) (\S+) -> (\S+)',
                           open(sys.argv[2]).read(), re.M)]
assert js and js == tx, (js, tx)
assert all(f != t for k, p, f, t, fs, ts in js), js
PY
"$btr" script "$t" | head -200 >"$tmp/s.txt"
[ -s "$tmp/s.txt" ] && ! grep -qvE '0x[0-9a-f]+ -> 0x[0-9a-f]+' "$tmp/s.txt" && ok || bad "script lines carry 0xFROM -> 0xTO"
"$btr" pt decode --insn "$t" | head -200 >"$tmp/d.txt"
[ -s "$tmp/d.txt" ] && [ "$(grep -cE '^[0-9a-f]{16}( |$)' "$tmp/d.txt")" -ge 150 ] && ok || bad "pt decode --insn lines start with 16 hex digits"
"$btr" pt dump "$t" | head -50 >"$tmp/p.txt"
[ -s "$tmp/p.txt" ] && ! grep -v '^#' "$tmp/p.txt" | grep -qvE '^[0-9a-f]{16}  ' && ok || bad "pt dump lines start with a hex offset"

# exit codes
"$btr" report --no-such-option "$t" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && ok || bad "unknown option exits $rc, not 2"
"$btr" report "$tmp/absent.btr" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q absent.btr "$tmp/e" && ok || bad "missing trace: exit $rc, one line naming it"
"$btr" record -o "$tmp/x.btr" -- sh -c 'exit 7' >/dev/null 2>&1; rc=$?
[ $rc -eq 7 ] && ok || bad "record passes exit 7 through, got $rc"
"$btr" record -o "$tmp/k.btr" -- sh -c 'kill -TERM $$' >/dev/null 2>&1; rc=$?
[ $rc -eq 143 ] && ok || bad "record of a program killed by SIGTERM exits $rc, not 143"

finish cli_contract
