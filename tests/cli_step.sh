#!/usr/bin/env bash
# cli_step.sh - `btr record -b step` from the outside: attach/detach leaves
# the process unharmed, the flight recorder and `btr crash` (text, json,
# symbols, fault address), `btr info` names the stepping mode, usage errors.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2

"$btr" info >info.txt 2>/dev/null
grep -Eq '^step +yes ' info.txt || { why=$(grep '^step' info.txt); rm -f info.txt; skip "step backend unusable here: $why"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mv info.txt "$tmp/"
cd "$tmp"

# ---- info names the mode ----
check "info step mode" grep -Eq '^step +yes .*-b step uses PTRACE_SINGLE(STEP|BLOCK)' info.txt
check "info step BTF probe" grep -Eq '^step +yes .*PTRACE_SINGLEBLOCK took [0-9]+ traps' info.txt

# ---- attach / detach: the process runs on with unchanged output ----
# (3 s: under load the recorder may take a second to start, and the
# process must still run when it detaches)
"$build/prog_step_attach" 300 >ref.txt &
refpid=$!
"$build/prog_step_attach" 300 >att.txt &
pid=$!
sleep 0.2
"$btr" record -q -b step -p $pid --duration 0.4 -o att.btr; rc=$?
check "attach exit 0 (got $rc)" [ $rc -eq 0 ]
wait $pid; prc=$?
wait $refpid
check "attached process exit 0 (got $prc)" [ $prc -eq 0 ]
check "attached process output unchanged" [ "$(tail -1 att.txt)" = "$(tail -1 ref.txt)" ]
check "attached process ran to its end" grep -q '^checksum ' att.txt
"$btr" report att.btr >att.rep 2>&1
check "attach trace has branches" grep -Eq '^branches: +[1-9]' att.rep
check "attach trace has instruction counts" grep -Eq '^instructions: +[1-9]' att.rep
check "attach trace names the program" grep -q 'prog_step_attach' att.rep
# the thread ran on after the detach: not "exit 0"
check "attach: the thread line says it still ran: $(grep "tid $pid" att.rep)" \
  grep -Eq "tid $pid .*, still running when the recording stopped$" att.rep
"$btr" report --format json att.btr >att.json 2>/dev/null
check "attach: thread_list end running, no exit_code" python3 -c '
import json, sys
t = [t for t in json.load(open("att.json"))["thread_list"] if t["tid"] == int(sys.argv[1])][0]
sys.exit(not (t["end"] == "running" and "exit_code" not in t))' $pid
check "attach process record" sh -c "'$btr' trace dump att.btr | grep -q '^process pid=$pid ppid=0 event=start'"
# not there any more: one line, exit 3
"$btr" record -q -b step -p 999999 -o gone.btr 2>err; rc=$?
check "attach to no process: exit 3 (got $rc)" [ $rc -eq 3 ]
check "attach to no process: one line" [ "$(wc -l <err)" -eq 1 ]
check "attach to no process: no file" [ ! -e gone.btr ]

# ---- flight recorder + btr crash ----
"$btr" record -q -b step --ring 8 -o crash.btr -- "$build/prog_nolibc_crash"; rc=$?
check "crash: btr exits 128+11 (got $rc)" [ $rc -eq 139 ]
"$btr" crash crash.btr >crash.txt; rc=$?
check "crash exit 0" [ $rc -eq 0 ]
check "crash signal" grep -q '^process [0-9]* thread [0-9]*: SIGSEGV' crash.txt
check "crash faulting instruction" grep -Eq '^  at 0x[0-9a-f]+ poke .*nolibc_crash.c:8$' crash.txt
check "crash instruction text" grep -Eq '^  instruction: mov ' crash.txt
check "crash fault address" grep -q '^  fault address: 0x1234$' crash.txt
check "crash 8 branches" grep -q '^  last 8 branches, oldest first:$' crash.txt
check "crash last branch is the call into poke" sh -c "grep -E '^ +1  ' crash.txt | grep -Eq 'step1\+0x[0-9a-f]+ .*nolibc_crash.c:[0-9]+ -> 0x[0-9a-f]+ poke .*nolibc_crash.c:8  call$'"
check "crash ret from step2 before it" sh -c "grep -E '^ +2  ' crash.txt | grep -Eq 'step2\+0x[0-9a-f]+ .* -> .*step1\+.*  ret$'"
"$btr" crash --format json crash.btr >crash.json; rc=$?
check "crash json exit 0" [ $rc -eq 0 ]
check "crash json content" python3 -c '
import json, re, signal
d = json.load(open("crash.json"))
c = d["crashes"]
assert len(c) == 1 and c[0]["signal_name"] == "SIGSEGV" and c[0]["fault_addr"] == "0x1234", c
# the number is the signal the name names (python'"'"'s signal module), the
# pid and tid those of the text output
assert c[0]["signal"] == int(signal.SIGSEGV), c[0]["signal"]
m = re.search(r"^process (\d+) thread (\d+): SIGSEGV", open("crash.txt").read(), re.M)
assert m and (c[0]["pid"], c[0]["tid"]) == (int(m.group(1)), int(m.group(2))), (m and m.groups(), c[0]["pid"], c[0]["tid"])
assert c[0]["ip"]["symbol"] == "poke" and c[0]["ip"]["file"].endswith("nolibc_crash.c")
b = c[0]["branches"]
assert len(b) == 8 and b[-1]["kind"] == "call" and b[-1]["to"]["symbol"] == "poke", b[-1]
assert b[-1]["from"]["symbol"].startswith("step1+") and b[-1]["from"]["line"] > 0
'
# every address's source line, in the text and the JSON, as binutils'
# addr2line names it (the program is static: addresses are link addresses)
if oracle addr2line "btr crash's source lines against addr2line (Debian binutils)"; then
  check "crash: text and JSON lines of every branch end = addr2line's" python3 - "$build/prog_nolibc_crash" <<'PY'
import json, re, subprocess, sys
text = [(int(m.group(1), 16), int(m.group(2)), int(m.group(3), 16), int(m.group(4)))
        for m in re.finditer(r"^ +\d+  0x([0-9a-f]+) \S+ \S+:(\d+) -> 0x([0-9a-f]+) \S+ \S+:(\d+)  \w+$",
                             open("crash.txt").read(), re.M)]
js = [(int(b["from"]["addr"], 16), b["from"]["line"], int(b["to"]["addr"], 16), b["to"]["line"])
      for b in json.load(open("crash.json"))["crashes"][0]["branches"]]
assert len(text) == 8 and len(js) == 8, (len(text), len(js))
addrs = sorted({a for t in text + js for a in (t[0], t[2])})
out = subprocess.run(["addr2line", "-e", sys.argv[1]] + ["0x%x" % a for a in addrs],
                     capture_output=True, text=True, check=True).stdout.splitlines()
line = {a: int(o.rsplit(":", 1)[1].split()[0]) for a, o in zip(addrs, out)}
for what, rows in (("text", text), ("json", js)):
    for f, fl, t, tl in rows:
        assert (fl, tl) == (line[f], line[t]), (what, hex(f), fl, line[f], hex(t), tl, line[t])
# the JSON's ends are the text's
assert js == text, (js, text)
PY
fi
# the same last branches as decoded from a qemu (Intel PT) trace of the same static program
if command -v qemu-x86_64 >/dev/null && [ -r "$build/btr-qemu.so" ]; then
  "$btr" record -q -b qemu -o qcrash.btr -- "$build/prog_nolibc_crash" 2>/dev/null
  "$btr" crash -n 8 qcrash.btr >qcrash.txt
  grep -E '^ +[0-9]+  0x' crash.txt >s.lines; grep -E '^ +[0-9]+  0x' qcrash.txt >q.lines
  check "crash: step ring == last 8 taken branches of the qemu trace" \
    sh -c "[ -s s.lines ] && cmp -s s.lines q.lines"
  check "crash: same faulting instruction as qemu" \
    sh -c "[ \"\$(grep '^  at ' crash.txt)\" = \"\$(grep '^  at ' qcrash.txt)\" ]"
fi
# the ring keeps the last N branches only, and --filter selects LBR classes
"$btr" record -q -b step --ring 4 --filter call,near_ret -o crash2.btr -- "$build/prog_nolibc_crash"
"$btr" crash crash2.btr >crash2.txt
check "filtered ring: 4 branches" grep -q '^  last 4 branches, oldest first:$' crash2.txt
check "filtered ring: only calls and returns" sh -c "[ \$(grep -Ec '  (call|ret)$' crash2.txt) -eq 4 ]"
# a trace without a crash
"$btr" record -q -b step -o nocrash.btr -- "$build/prog_nolibc_step" >/dev/null
"$btr" crash nocrash.btr >nc.txt; rc=$?
check "no crash exit 0" [ $rc -eq 0 ]
check "no crash message" grep -q '^no crash' nc.txt
"$btr" crash missing.btr 2>err; rc=$?
check "crash missing file exit 3" [ $rc -eq 3 ]
check "crash missing file one line" [ "$(wc -l <err)" -eq 1 ]

# ---- --inproc: falls back where it cannot work, and says why ----
"$btr" record -b step --inproc -o st.btr -- "$build/prog_nolibc_step" >out.txt 2>err; rc=$?
check "inproc static: exit 0" [ $rc -eq 0 ]
check "inproc static: says it falls back" grep -q 'program is static.*falling back to ptrace' err
check "inproc static: ptrace trace" grep -q 'PTRACE_SINGLE' err
check "inproc static: program output" grep -q 'nolibc_step ok' out.txt
"$btr" record -b step --inproc -o sg.btr -- "$build/prog_step_sigtrap" >out.txt 2>err; rc=$?
check "inproc SIGTRAP handler: program unharmed (rc $rc)" [ $rc -eq 0 ]
check "inproc SIGTRAP handler: output" grep -q '^handled 2$' out.txt
check "inproc SIGTRAP handler: says so" grep -q 'installs its own SIGTRAP handler' err
check "inproc SIGTRAP handler: untraced record" sh -c "'$btr' trace dump sg.btr | grep -q 'event=untraced.*own SIGTRAP handler'"
"$btr" record -b step --inproc -o dy.btr -- "$build/prog_step_dyn" >out.txt 2>err; rc=$?
check "inproc dynamic: exit 0" [ $rc -eq 0 ]
check "inproc dynamic: agent ran" grep -q 'in-process agent' err
"$btr" report dy.btr >dy.rep
check "inproc dynamic: instruction counts" grep -Eq '^instructions: +[1-9]' dy.rep

# ---- usage errors ----
"$btr" record -b qemu -p 1 -o x.btr 2>/dev/null; rc=$?
check "-p with qemu: usage (got $rc)" [ $rc -eq 2 ]
"$btr" record -b step --duration 1 -o x.btr -- /bin/true 2>/dev/null; rc=$?
check "--duration without -p: usage" [ $rc -eq 2 ]
"$btr" record -b step --filter jcc -o x.btr -- /bin/true 2>/dev/null; rc=$?
check "--filter without --ring: usage" [ $rc -eq 2 ]
"$btr" record -b step --ring 4 --filter bogus -o x.btr -- /bin/true 2>/dev/null; rc=$?
check "bad filter: usage" [ $rc -eq 2 ]
"$btr" record -q -b step --start no_such_function -o x.btr -- "$build/prog_nolibc_step" 2>err; rc=$?
check "unknown --start symbol: exit 3 (got $rc)" [ $rc -eq 3 ]
check "unknown --start symbol: names it" grep -q no_such_function err
check "unknown --start symbol: no file" [ ! -e x.btr ]

finish cli_step
