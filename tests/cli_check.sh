#!/usr/bin/env bash
# cli_check.sh - `btr check` on real recordings (btr record -b qemu): every
# attack fixture of tests/progs/check_*.c (and the LD_PRELOAD library of
# tests/progs/preload/) is caught with the right kind; benign programs -
# ls, gzip, python3, sh, a C++ throw/catch, setjmp/longjmp and signals,
# the project's own test programs, gcc -O2 output (.cold splits, switch
# tables, stripped), ucontext coroutines, an injected call, a Go program
# (also preempted asynchronously), JIT-style code, as and make, names of
# 128 to 4096 characters through PLT and GOT, IFUNC slots, valgrind's
# tools - give zero findings; the shared LBR
# recording gives no high finding; options, exit codes and bad input.
# BTR_SAMPLE_STEP=K (make asan) records one benign program in K.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
src=$(cd "$(dirname "$0")" && pwd)   # tests/

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# ---- usage and bad input (no recording needed) ----
"$btr" check --help >help.txt; check "check --help exit 0" [ $? -eq 0 ]
check "help names --fail-on and --allow" grep -q -- '--allow FILE' help.txt
"$btr" check 2>/dev/null; check "no file: exit 2" [ $? -eq 2 ]
"$btr" check --fail-on severe x.btr 2>/dev/null; check "bad --fail-on: exit 2" [ $? -eq 2 ]
"$btr" check --format xml x.btr 2>/dev/null; check "bad --format: exit 2" [ $? -eq 2 ]
"$btr" check nosuch.btr 2>err; rc=$?
check "missing trace: exit 3" [ $rc -eq 3 ]
check "missing trace: one line" [ "$(wc -l <err)" -eq 1 ]
check "missing trace: the line names it" grep -q nosuch.btr err
echo "not a trace" >junk.btr
"$btr" check junk.btr 2>err; check "junk trace: exit 3" [ $? -eq 3 ]

# ---- LBR: the shared autofdo recording ----
lbr=$shared/traces/autofdo/test.lbr
if [ -r "$lbr" ]; then
  "$btr" check --format json --elf "$shared/traces/autofdo/test.binary" "$lbr" >lbr.json; rc=$?
  # a benign program (AutoFDO's test): no finding at all, so exit 0; the
  # recording is fixed data and the check deterministic, so the counts are
  # exact (147712 branches checked, 3895 in code test.binary lacks)
  check "lbr: exit 0 (got $rc)" [ $rc -eq 0 ]
  check "lbr: sampled, 147712 branches checked, no finding" python3 -c '
import json; d = json.load(open("lbr.json"))
assert d["stats"]["sampled"] is True and d["stats"]["branches"] == 147712, d["stats"]
assert d["stats"]["unknown_code"] == 3895, d["stats"]
assert d["findings"] == [], d["findings"]'
else
  echo "note: $lbr absent, LBR part skipped"
fi

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent (fixtures not recorded)"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"

rec() { local out=$1; shift; "$btr" record -q -b qemu -o "$out" -- "$@" >/dev/null 2>&1; }

# expect_kind NAME KIND SYMBOL: the trace NAME.btr has a high-or-medium
# finding of KIND whose text names SYMBOL; exit status 1.
expect_kind() {
  local name=$1 kind=$2 sym=$3
  "$btr" check --format json "$name.btr" >"$name.json"; local rc=$?
  check "$name: exit 1 (got $rc)" [ $rc -eq 1 ]
  check "$name: a $kind finding naming $sym" python3 - "$name.json" "$kind" "$sym" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
kind, sym = sys.argv[2], sys.argv[3]
fs = d["findings"]
for f in fs:
    assert set(f) >= {"kind", "severity", "thread", "from", "to", "detail"}, f
    assert f["from"].startswith("0x") and f["to"].startswith("0x"), f
    assert isinstance(f["thread"], int) and f["thread"] > 0, f
hit = [f for f in fs if f["kind"] == kind and sym in (f["from_sym"] + " " + f["to_sym"] + " " + f["detail"])]
assert hit, fs
assert len(fs) == 1, ("exactly the attack is reported", fs)
PY
}

# ---- attacks ----
rec smash.btr "$build/prog_check_smash";         expect_kind smash return-hijack win
rec rop.btr "$build/prog_check_rop";             expect_kind rop rop-chain vuln
rec fptr.btr "$build/prog_check_fptr";           expect_kind fptr call-non-entry mid_target
rec got.btr "$build/prog_check_got";             expect_kind got got-overwrite getppid
rec gotcall.btr "$build/prog_check_gotcall";     expect_kind gotcall got-overwrite getppid   # -fno-plt style call
rec shell.btr "$build/prog_check_shellcode";     expect_kind shell unbacked-code main
"$btr" check shell.btr >shell.txt
check "shell: the text says how JIT runtimes name their code" grep -q "java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, node --perf-basic-prof" shell.txt
rec ifunc_atk.btr "$build/prog_check_ifunc";    expect_kind ifunc_atk got-overwrite evil   # an IRELATIVE slot
check "ifunc attack: the finding names the IRELATIVE slot and its resolver" grep -q 'IRELATIVE GOT slot.*IFUNC resolver pick' ifunc_atk.json
rec hook.btr "$build/prog_check_hook";           expect_kind hook code-modified hook
check "hook: evidence names target, the file's bytes and the resume point" python3 -c '
import json, re; f = json.load(open("hook.json"))["findings"][0]
assert f["from_sym"] == "target" and f["to_sym"] == "hook", f
assert re.search(r"\[[0-9a-f]{2}( [0-9a-f]{2}){7,}\]", f["detail"]), f["detail"]'
mkdir d && touch d/visible.txt d/btr_hidden_secret
# (btr itself gets the preload too: under ASan it must not insist on coming first)
ASAN_OPTIONS="${ASAN_OPTIONS:-}:verify_asan_link_order=0" \
  LD_PRELOAD=$build/libcheck_hide.so "$btr" record -q -b qemu -o pre.btr -- /bin/ls d >ls.out 2>&1
check "preload: the hook hid the file" [ "$(cat ls.out)" = "visible.txt" ]
expect_kind pre interposition readdir
check "preload: names the library and libc" grep -q 'libcheck_hide.so.*libc.so' pre.json

# text form: "0xFROM -> 0xTO sym -> sym" on the finding's line
"$btr" check smash.btr >smash.txt
check "text: 0xFROM -> 0xTO then sym -> sym" grep -Eq '^high +return-hijack .*0x[0-9a-f]+ -> 0x[0-9a-f]+ vuln\+0x[0-9a-f]+ -> win' smash.txt

# --fail-on: interposition is medium
"$btr" check --fail-on high pre.btr >/dev/null; check "fail-on high, medium finding: exit 0" [ $? -eq 0 ]
"$btr" check --fail-on medium pre.btr >/dev/null; check "fail-on medium: exit 1" [ $? -eq 1 ]
# --allow: a known preload
printf '# our own preload\ninterposition libcheck_hide.so\n' >allow.txt
"$btr" check --allow allow.txt pre.btr >allow.out; rc=$?
check "allowed preload: exit 0 (got $rc)" [ $rc -eq 0 ]
check "allowed preload: counted" grep -q '0 findings.*1 allowed' allow.out
echo "bogus-kind x" >bad_allow.txt
"$btr" check --allow bad_allow.txt pre.btr >/dev/null 2>err; check "bad allow rule: exit 3" [ $? -eq 3 ]
"$btr" check --allow nosuch.txt pre.btr >/dev/null 2>err; check "missing allow file: exit 3" [ $? -eq 3 ]
head -c $(( $(stat -c %s smash.btr) / 2 )) smash.btr >trunc.btr
"$btr" check trunc.btr >/dev/null 2>err; check "truncated trace: exit 3" [ $? -eq 3 ]

# ---- benign runs: zero findings ----
benign() {
  local name=$1
  "$btr" check "$name.btr" >"$name.txt" 2>"$name.err"; local rc=$?
  check "benign $name: exit 0 (got $rc: $(head -3 "$name.txt"))" [ $rc -eq 0 ]
  check "benign $name: 0 findings" grep -q '^0 findings; [1-9]' "$name.txt"
}
echo hello >f.txt
rec ls.btr /bin/ls -la /usr;      benign ls
rec gz.btr /bin/gzip -k -f f.txt; benign gz
rec sh.btr /bin/sh -c 'ls | wc -l'; benign sh   # the shell, ls and wc: the whole tree is recorded
check "sh -c 'ls | wc -l': three processes checked" \
  [ "$("$btr" report --format json sh.btr | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["processes"]))')" -eq 3 ]
for p in flow_except flow_signals flow_loops flow_threads qemu_async qemu_crash qemu_dlopen qemu_mt symbols symbols_nopie; do
  sampled || continue
  rec $p.btr "$build/prog_$p"; benign $p
done
# the step backend (trap-flag tracing, BTS records): the same programs, no findings
for p in flow_except flow_signals flow_threads symbols; do
  sampled || continue
  "$btr" record -q -b step -o st_$p.btr -- "$build/prog_$p" >/dev/null 2>&1
  check "step $p: recorded" [ -s st_$p.btr ]
  benign st_$p
done
if [ -x /usr/bin/python3 ] && sampled; then
  # (math.log1p: libm calls its IFUNC through an IRELATIVE slot)
  rec py.btr /usr/bin/python3 -c 'import json, math; print(json.dumps([1]), math.log1p(.5))'
  benign py
fi

# ---- names of 128 to 4,096 characters, IFUNC slots (issue 40) ----
# exported functions of libcheck_longname.so named by 128, 200, 1000 and
# 4096 characters, called through the PLT and with -fno-plt (before:
# got-overwrite for each -fno-plt call, the PLT jumps not checked at all)
for v in plt noplt; do
  rec longname_$v.btr "$build/prog_benign_longname_$v"; benign longname_$v
  # its GOT slot of the 4096-character name pointed at evil(): caught, named
  rec lnevil_$v.btr "$build/prog_benign_longname_$v" evil; expect_kind lnevil_$v got-overwrite evil
  check "lnevil_$v: the finding names the 4096-character function" python3 -c '
import json, sys; f = json.load(open(sys.argv[1]))["findings"][0]
assert "the GOT slot of ln" + "abcdefgh" * 511 + "abcdef in " in f["detail"], f["detail"][:200]' lnevil_$v.json
done
"$btr" check --format json longname_noplt.btr | python3 -c '
import json, sys; d = json.load(sys.stdin)
assert d["findings"] == [] and d["stats"]["branches"] > 0, d' ; check "longname noplt: json, no finding" [ $? -eq 0 ]
# libm's log1p: an IFUNC that libm calls through an IRELATIVE slot its
# resolver fills (__log1p_fma): from a program linked with -lm, a static-pie
# program (its own IRELATIVE slots), dlopen/dlclose of libm 20 times
# (before: got-overwrite __log1p_ifunc@plt -> __log1p_fma, 1, 2 and 1)
for p in benign_ifunc benign_ifunc_static benign_ifunc_dl; do
  sampled || continue
  rec $p.btr "$build/prog_$p"; benign $p
done

# ---- valgrind's tools: a JIT in a static program without .eh_frame_hdr,
# its code cache mapped from /dev/null (before: 231 findings for
# --tool=none: call-non-entry into the tool's functions, which only
# .eh_frame names; code-modified in its translations; a return-hijack where
# it starts itself on a new stack; 27 "/dev/null: cannot place it" warnings)
if sampled && oracle valgrind "btr check on valgrind's tools (Debian valgrind)"; then
  for tool in ${BTR_CHECK_VG_TOOLS:-none}; do   # (BTR_CHECK_VG_TOOLS='none memcheck': memcheck too)
    rec vg_$tool.btr valgrind -q --tool=$tool /bin/true; benign vg_$tool
    check "vg_$tool: no warning about the /dev/null mapping" [ ! -s vg_$tool.err ]
  done
fi

# ---- benign toolchain output (issue 21): each of these gave findings before ----
# gcc -O2 splits: f's switch table jumps into f.cold (was jump-non-entry),
# stripped too (the parts are linked through their FDEs); a recursive
# evaluator whose switch target follows a recursive call (was
# return-mismatch: the table jump was taken for a longjmp).
for p in benign_cold_o2 benign_eval_o2; do
  sampled || continue
  rec $p.btr "$build/prog_$p"; benign $p
  if oracle strip "check of a stripped program"; then
    strip -o s_$p "$build/prog_$p" && rec s_$p.btr "./s_$p"; benign s_$p
  fi
done
# hand-written assembly without CFI or a function symbol, called through
# pointers (zstd's Huffman decoder loops in Debian's stripped zstd: was
# call-non-entry): a function starts by layout after the FDE range before
# it and right after a ret; stripped too.  A call to its second
# instruction is still caught.
rec nocfi.btr "$build/prog_benign_asm_nocfi"; benign nocfi
rec nocfi_mid.btr "$build/prog_benign_asm_nocfi" mid; expect_kind nocfi_mid call-non-entry asm_one_mid
if oracle strip "check of a stripped program"; then
  strip -o s_nocfi "$build/prog_benign_asm_nocfi" && rec s_nocfi.btr ./s_nocfi; benign s_nocfi
  rec s_nocfi_mid.btr ./s_nocfi mid
  "$btr" check --format json s_nocfi_mid.btr >s_nocfi_mid.json
  check "stripped nocfi mid: one call-non-entry, to asm_one_mid's address" python3 -c "
import json, subprocess
d = json.load(open('s_nocfi_mid.json'))['findings']
nm = subprocess.run(['nm', '$build/prog_benign_asm_nocfi'], capture_output=True, text=True).stdout.split()
mid = int(nm[nm.index('asm_one_mid') - 2], 16)
assert len(d) == 1 and d[0]['kind'] == 'call-non-entry' and int(d[0]['to'], 16) & 0xfff == mid & 0xfff, (d, hex(mid))"
fi
# gcc's __builtin_longjmp: an indirect jump to a label only its function's
# lea takes (Ruby's VM raise: was jump-non-entry)
rec bsetjmp.btr "$build/prog_benign_builtin_setjmp"; benign bsetjmp
# Ruby: fibers switch stacks in coroutine_transfer, an assembly label
# without .type (STT_NOTYPE) reached through the PLT, each switch from the
# same call site; raise/rescue is __builtin_longjmp (before: got-overwrite,
# return-hijack, return-mismatch x2, jump-non-entry x3)
if sampled && oracle ruby "check of ruby fibers and raise/rescue"; then
  rec ruby.btr ruby -e 'f = Fiber.new { 3.times { |i| Fiber.yield i }; :done }; 4.times { f.resume }
g = Fiber.new { |x| Fiber.yield x * 2 }; g.resume(5); begin; raise "x"; rescue => e; e; end'
  benign ruby
fi
# a forked child that longjmps to a setjmp made before the fork (perl's exit
# in a child: return-mismatch before)
rec forkjmp.btr "$build/prog_benign_forkjmp"; benign forkjmp
if sampled && oracle perl "check of a perl fork and exit"; then
  rec perlfork.btr perl -e 'my $p = fork(); if (!$p) { exit(3) } waitpid($p, 0)'; benign perlfork
fi
# user-level context switches, which the trace shows as returns and jumps
# into another stack (each gave return-mismatch and return-hijack before):
# makecontext/swapcontext coroutines; a signal handler that injects a call
# (rt_sigreturn resumes a function entry that returns to the interrupted pc,
# as Go's asynchronous preemption does); Go's scheduler (gogo), goroutine
# starts (their return into goexit+1), stack growth and panic/recover
rec ucontext.btr "$build/prog_benign_ucontext"; benign ucontext
rec sigcall.btr "$build/prog_benign_sigcall"; benign sigcall
if sampled && oracle go "btr check on a Go program (Debian golang-go)"; then
  (export HOME=$tmp GOCACHE=$tmp/gocache GOPATH=$tmp/gopath GOFLAGS=-mod=mod
   go build -o gosched "$src/progs/go/benign_sched.go") >gobuild.txt 2>&1
  check "go build benign_sched: $(head -3 gobuild.txt)" [ -x gosched ]
  # without asynchronous preemption: a preemption signal delivered right
  # after a return is recorded with the return going to asyncPreempt (the
  # qemu recorder takes where rt_sigreturn resumes for the return's target),
  # a return-hijack now and then; the injected call itself is tested above
  GODEBUG=asyncpreemptoff=1 rec gosched.btr ./gosched; benign gosched
  # with asynchronous preemption: 8 goroutines on 2 Ps in tight loops of
  # leaf calls; a preemption signal right after the leaf's return was
  # recorded with the return going to asyncPreempt (before: return-hijack
  # in every run of this program, 50 times).  BTR_CHECK_GO_RUNS=20 for the
  # issue's 20 runs.
  (export HOME=$tmp GOCACHE=$tmp/gocache GOPATH=$tmp/gopath GOFLAGS=-mod=mod
   go build -o gopreempt "$src/progs/go/benign_preempt.go") >gobuild2.txt 2>&1
  check "go build benign_preempt: $(head -3 gobuild2.txt)" [ -x gopreempt ]
  for i in $(seq "${BTR_CHECK_GO_RUNS:-1}"); do
    rec gopre$i.btr ./gopreempt; benign gopre$i
    rm -f gopre$i.btr
  done
fi
# JIT-style code: the decoder loses the flow in the stub and meets returns
# compressed against calls it did not see (was code-modified and
# return-mismatch in libc); only the stub's unbacked-code remains, allowed.
rec jit.btr "$build/prog_benign_jit"
echo 'unbacked-code *   # the stub' >jit_allow.txt
"$btr" check --allow jit_allow.txt jit.btr >jit.txt 2>&1; rc=$?
check "benign jit: exit 0 (got $rc: $(head -3 jit.txt))" [ $rc -eq 0 ]
check "benign jit: 0 findings, the stub allowed" grep -Eq '^0 findings; [1-9].*[1-9][0-9]* allowed' jit.txt
# grep -P: PCRE2 compiles the pattern and calls into the code (unbacked-code
# before); code a known JIT engine enters is allowed, counted once per area
if printf 'ann@x.com\n' | grep -qP '(\w+)@(\w+)\.com' 2>/dev/null; then
  printf 'ann@x.com\nbob\n' >mails.txt
  rec grepp.btr grep -cP '(\w+)@(\w+)\.com' mails.txt
  "$btr" check grepp.btr >grepp.txt 2>&1; rc=$?
  check "benign grep -P: exit 0 (got $rc: $(head -3 grepp.txt))" [ $rc -eq 0 ]
  check "benign grep -P: 0 findings, PCRE2's JIT code allowed" grep -Eq '^0 findings; [1-9].*, [1-9][0-9]* allowed$' grepp.txt
fi
# real tools: as (jump-non-entry x3 into its .cold parts: a stripped
# binary), make of three C files (ld.bfd: jump-non-entry, return-mismatch
# x38 in a recursive switch, code-modified in ld.so after the LTO plugin's
# gap)
if sampled && oracle as "the assembled subjects" && oracle gcc "the assembled subjects" && oracle make "the assembled subjects"; then
  gcc -O2 -S -o cold.s "$src/progs/benign_cold_o2.c"
  rec as.btr as --64 -o cold.o cold.s; benign as
  mkdir proj
  printf '#include <stdio.h>\nint b(int); int c(int);\nint main(void) { printf("%%d\\n", b(3) + c(4)); return 0; }\n' >proj/a.c
  echo 'int b(int x) { return x * 2; }' >proj/b.c
  echo 'int c(int x) { return x + 7; }' >proj/c.c
  printf 'prog: a.o b.o c.o\n\tgcc -o prog a.o b.o c.o\n%%.o: %%.c\n\tgcc -O2 -c -o $@ $<\n' >proj/Makefile
  rec make.btr make -C proj
  check "make: built and ran" [ "$(proj/prog)" = 17 ]
  benign make
else
  echo "note: as, gcc or make absent: toolchain recordings skipped"
fi

finish cli_check
