#!/usr/bin/env bash
# cli_pt_btr.sh - `btr pt decode` on .btr traces: the flow printed per thread
# must equal the recorder's ground truth instruction by instruction (also
# across signals pending when a handler returns: flow_sigpend), and
# --stat must count the same.  Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
"$btr" --help | grep -q '^  record' || skip "btr record not built"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for prog in flow_loops flow_threads flow_signals flow_sigpend; do
  exe="$build/prog_$prog"
  "$btr" record -q -o "$tmp/$prog.btr" --ground-truth "$tmp/$prog.gt" -- "$exe" >/dev/null 2>"$tmp/err"
  rc=$?; check "$prog: record exit 0 ($(head -c 200 "$tmp/err"))" [ $rc -eq 0 ]
  "$btr" pt decode "$tmp/$prog.btr" --insn >"$tmp/$prog.insn" 2>"$tmp/err"
  rc=$?; check "$prog: decode --insn exit 0 ($(head -c 200 "$tmp/err"))" [ $rc -eq 0 ]
  # every non-event line is exactly 16 lowercase hex digits (CONTRACT.md)
  check "$prog: --insn lines are 16 hex digits" \
    bash -c "! grep -v '^\[' '$tmp/$prog.insn' | grep -qvE '^[0-9a-f]{16}$'"
  check "$prog: decoded flow equals ground truth" python3 - "$tmp/$prog.gt" "$tmp/$prog.insn" <<'PY'
import struct, sys
gt = {}
data = open(sys.argv[1], 'rb').read()
off = 0
while off < len(data):
    magic, tid, n = struct.unpack_from('<IIQ', data, off); off += 16
    assert magic == 0x54474254, hex(magic)
    gt.setdefault(tid, []).extend(struct.unpack_from('<%dQ' % n, data, off)); off += 8 * n
dec = {}
tid = None
for line in open(sys.argv[2]):
    line = line.strip()
    if line.startswith('[thread '):
        tid = int(line[8:-1]); dec.setdefault(tid, [])
    elif line.startswith('['):
        if 'gap' in line or 'overflow' in line:
            sys.exit('unexpected event: ' + line)
    else:
        dec[tid].append(int(line, 16))
assert set(gt) == set(dec), (sorted(gt), sorted(dec))
for t in gt:
    if gt[t] != dec[t]:
        n = next((i for i, (a, b) in enumerate(zip(gt[t], dec[t])) if a != b), min(len(gt[t]), len(dec[t])))
        sys.exit('tid %d: first difference at instruction %d of %d/%d' % (t, n, len(gt[t]), len(dec[t])))
PY
  n=$(grep -vc '^\[' "$tmp/$prog.insn")
  s=$("$btr" pt decode "$tmp/$prog.btr" --stat | awk '/^instructions/ {print $2}')
  check "$prog: --stat counts the printed instructions ($s vs $n)" [ "$s" = "$n" ]
  # the decoders' block count comes through the stream (it used to read 0)
  b=$("$btr" pt decode "$tmp/$prog.btr" --stat | awk '$1 == "blocks" {print $2}')
  bj=$("$btr" pt decode "$tmp/$prog.btr" --stat --format json | grep -o '"blocks_decoded": [0-9]*' | grep -o '[0-9]*$')
  check "$prog: --stat counts decoded blocks (text $b)" [ "${b:-0}" -gt 0 ]
  check "$prog: --stat json counts the same blocks (text $b, json $bj)" [ "${b:-}" = "${bj:-}" ]
  # -j is for raw PT: a trace file says so and decodes the same
  sj=$("$btr" pt decode "$tmp/$prog.btr" --stat -j 2 2>"$tmp/jerr" | awk '/^instructions/ {print $2}')
  check "$prog: -j 2 on a trace file: the same count ($sj vs $s)" [ "$sj" = "$s" ]
  check "$prog: -j 2 on a trace file: says it runs in one thread" \
    grep -q "^btr: warning: .*$prog.btr: -j applies to a raw PT stream; a trace file is decoded in one thread$" "$tmp/jerr"
done
# The instruction flow cannot show it, the branches can: with SIGUSR1 pending
# at SIGALRM's rt_sigreturn, a return or indirect call that SIGALRM came
# right after goes to its real target, and SIGALRM interrupts the code there,
# not the next handler's entry.
"$btr" script "$tmp/flow_sigpend.btr" >"$tmp/sigpend.txt" 2>/dev/null
nh=$(grep -Ec ' -> (on_usr|on_alarm) (ret|call_ind|jmp_ind|jcc)' "$tmp/sigpend.txt")
na=$(grep -Ec ' (on_usr|on_alarm) -> on_alarm async' "$tmp/sigpend.txt")
check "flow_sigpend: $nh branches go to a handler's entry, $na signals interrupt one (none)" [ "$nh" = 0 ]
check "flow_sigpend: $nh branches go to a handler's entry, $na signals interrupt one (none)" [ "$na" = 0 ]
check "flow_sigpend: SIGALRM interrupted the program's code ($(grep -c ' -> on_alarm async' "$tmp/sigpend.txt") times)" \
  grep -Eq ' (collatz|f1|f2|main)(\+0x[0-9a-f]+)? -> on_alarm async' "$tmp/sigpend.txt"

# --filter: only the matching branches, as many as --stat counts of that kind
"$btr" pt decode "$tmp/flow_loops.btr" --filter near_ret >"$tmp/ret.txt"
check "--filter near_ret exit 0" [ $? -eq 0 ]
nret=$(grep -v '^\[' "$tmp/ret.txt" | grep -c ' ret$')
nall=$(grep -vc '^\[' "$tmp/ret.txt")
sret=$("$btr" pt decode "$tmp/flow_loops.btr" --stat | awk '$1 == "ret" {print $2}')
check "--filter near_ret prints only rets ($nret of $nall)" [ "$nret" -eq "$nall" ]
check "--filter near_ret prints some rets" [ "$nret" -gt 0 ]
check "--filter near_ret prints every ret ($nret vs --stat $sret)" [ "$nret" = "$sret" ]
"$btr" pt decode "$tmp/flow_loops.btr" --filter bogus >/dev/null 2>&1
check "--filter bogus exits 2" [ $? -eq 2 ]

# a corrupt trace: exit 3 with one line naming the file
head -c 300 "$tmp/flow_loops.btr" >"$tmp/cut.btr"
"$btr" pt decode "$tmp/cut.btr" --stat >/dev/null 2>"$tmp/err"; rc=$?
check "truncated .btr exits 3 (got $rc)" [ $rc -eq 3 ]
check "truncated .btr names the file" grep -q "cut.btr" "$tmp/err"

finish cli_pt_btr
