#!/usr/bin/env bash
# cli_oracles.sh - btr's outputs against the tools people check them with,
# run for real on the same programs:
#  - gcov (gcc --coverage, gcov --json-format) against `btr cov --format
#    lcov`: function lines and counts, line counts, branch counts with a
#    jump-table switch's case arcs; Cobertura methods hold their lines;
#    `btr cfg` of recursive fib leaves it as often as gcov counts it run;
#  - callgrind's calls= against `btr callgraph`'s call counts (oracle_cov
#    and prof_bolt_relocs);
#  - llvm-bolt-16's "N out of M functions ... have non-empty execution
#    profile" against the functions the trace ran, with static functions of
#    the same name in two files (BOLT's local names, name/N).
# Takes about 8 s (Debug, loaded machine).  Args: $1 btr binary, $2 build
# dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
progs=$(cd "$(dirname "$0")" && pwd)/progs
# python prints "ok WHAT" or "bad WHAT" per check
results() { local st msg; while read -r st msg; do if [ "$st" = ok ]; then ok; else bad "$msg"; fi; done; }

command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 absent"
[ -r "$build/btr-qemu.so" ] || skip "btr-qemu.so not built"
oracle python3 "every comparison of this test" || finish cli_oracles
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
prog=$build/prog_oracle_cov

"$btr" record -q -b qemu -o cov.btr -- "$prog" 100 >/dev/null 2>&1; check "record oracle_cov" [ -s cov.btr ]

# ---- gcov ----------------------------------------------------------------
if oracle gcov "btr cov against gcov" && oracle gcc "btr cov against gcov"; then
  # the flags CMake builds tests/progs with, plus --coverage
  gcc -g -O1 -fno-inline --coverage "$progs/oracle_cov.c" -o gc && ./gc 100
  check "gcov subject runs" [ $? -eq 0 ]
  gcov --branch-probabilities --branch-counts --json-format -o . gc-oracle_cov.gcda >/dev/null 2>&1
  check "gcov json" [ -s gc-oracle_cov.gcov.json.gz ]
  "$btr" cov --format lcov --module prog_oracle_cov -o cov.info cov.btr; check "lcov exit 0" [ $? -eq 0 ]
  "$btr" cov --format cobertura --module prog_oracle_cov -o cov.xml cov.btr; check "cobertura exit 0" [ $? -eq 0 ]
  # the machine code, for the direction of each conditional branch
  oracle objdump "the direction of BRDA's arms" && objdump -d -l --no-show-raw-insn "$prog" >prog.dis
  python3 - gc-oracle_cov.gcov.json.gz cov.info cov.xml "$progs/oracle_cov.c" prog.dis >gcov.cmp <<'EOF'
# Compares what gcov and btr both measure, exactly.  Inherent differences:
# gcov counts the blocks of its instrumented CFG, btr the executions of
# machine instructions, so (1) lines only one lists are skipped (gcov lists
# declarations and case labels, btr the lines of { and } that hold
# prologue or epilogue code); (2) lines marked "oracle: shared" in the
# source hold an instruction that runs on more paths than the statement
# (the common return of the switch; fib's hoisted mov) and are skipped;
# (3) a machine conditional branch's two directions may be in either order
# relative to gcov's arcs, so pairs compare as multisets; (4) a switch is
# one range check (a conditional branch to default) plus an indirect jump:
# gcov's case arcs are the jump's targets plus the range check's default.
import gzip, json, re, sys, xml.etree.ElementTree as ET
gj, info, xmlf, src = sys.argv[1:5]
nres = 0
def res(c, what):
    global nres
    nres += 1
    print(("ok " if c else "bad ") + what)
g = json.load(gzip.open(gj))
gf = [f for f in g["files"] if f["file"].endswith("oracle_cov.c")][0]
gfn = {f["name"]: (f["start_line"], f["execution_count"]) for f in gf["functions"]}
gline = {l["line_number"]: l["count"] for l in gf["lines"]}
gbr = {l["line_number"]: [b["count"] for b in l["branches"]] for l in gf["lines"] if l["branches"]}
fn, fnda, da, brda = {}, {}, {}, {}
tot, brda_n, brda_hit = {}, 0, 0
cur = False
for ln in open(info):
    ln = ln.strip()
    if ln.startswith("SF:"):
        cur = ln[3:].endswith("oracle_cov.c")
    if not cur:
        continue
    k, _, v = ln.partition(":")
    if k == "FN":
        l, n = v.split(",", 1); fn[n] = int(l)
    elif k == "FNDA":
        c, n = v.split(",", 1); fnda[n] = int(c)
    elif k == "DA":
        l, c = v.split(",")[:2]; da[int(l)] = int(c)
    elif k == "BRDA":
        l, b, a, c = v.split(",")
        brda.setdefault(int(l), {}).setdefault(int(b), []).append(0 if c == "-" else int(c))
        brda_n += 1; brda_hit += c not in ("-", "0")
    elif k in ("LF", "LH", "FNF", "FNH", "BRF", "BRH"):
        tot[k] = int(v)
# functions: gcov's declaration line and entry count
for name, (line, count) in sorted(gfn.items()):
    res(fn.get(name) == line, "FN %s: btr line %s, gcov %d" % (name, fn.get(name), line))
    res(fnda.get(name) == count, "FNDA %s: btr %s, gcov %d" % (name, fnda.get(name), count))
shared = {i + 1 for i, t in enumerate(open(src)) if "oracle: shared" in t}
# the file's totals: FNF/FNH are gcov's function counts; LF/LH, BRF/BRH
# count the DA and BRDA lines btr wrote (LH: lines run at least once)
res(tot.get("FNF") == len(gfn), "FNF %s, gcov's functions %d" % (tot.get("FNF"), len(gfn)))
res(tot.get("FNH") == sum(1 for l, c in gfn.values() if c), "FNH %s, gcov's functions run %d" %
    (tot.get("FNH"), sum(1 for l, c in gfn.values() if c)))
res(tot.get("LF") == len(da), "LF %s, DA lines %d" % (tot.get("LF"), len(da)))
res(tot.get("LH") == sum(1 for c in da.values() if c > 0), "LH %s, DA lines run %d" %
    (tot.get("LH"), sum(1 for c in da.values() if c > 0)))
res(any(c == 1 for c in da.values()), "some line runs exactly once (main's), so LH tells > 0 from > 1")
res(tot.get("BRF") == brda_n, "BRF %s, BRDA lines %d" % (tot.get("BRF"), brda_n))
res(tot.get("BRH") == brda_hit, "BRH %s, BRDA lines taken %d" % (tot.get("BRH"), brda_hit))
# lines
both = sorted(set(gline) & set(da) - shared)
# every line gcov saw run holds code btr saw run, but for the labels and
# declarations gcov counts (case/default labels, a function's opening line)
label = {i + 1 for i, t in enumerate(open(src)) if re.match(r"\s*(case .*|default):\s*$", t)}
ran = {l for l, c in gline.items() if c > 0} - shared - label - {v[0] for v in gfn.values()}
res(ran <= set(da), "lines gcov saw run and btr lists none for: %s" % sorted(ran - set(da)))
res(len(both) == len(set(gline) & set(da) - shared), "lines in both: %d" % len(both))
for l in both:
    res(gline[l] == da[l], "DA line %d: btr %d, gcov %d" % (l, da[l], gline[l]))
# the arms of a conditional branch: BRDA's branch 0 is the machine branch
# taken, 1 not taken (docs/cov.md).  Where a line holds one jcc whose
# target follows a ret or jmp (entered from the jcc alone), branch 0 ran as
# often as gcov counts the target's line, branch 1 the rest of the arcs.
import re
dis = open(sys.argv[5]).read().split("\n") if len(sys.argv) > 5 else []
line_of, jcc, curl, prev, after = {}, {}, None, None, {}
for t in dis:
    m = re.match(r"/.*oracle_cov\.c:(\d+)", t)
    if m:
        curl = int(m.group(1)); continue
    m = re.match(r"\s+([0-9a-f]+):\s+(j\w+)\s+([0-9a-f]+)", t)
    a = re.match(r"\s+([0-9a-f]+):", t)
    if a and curl:
        line_of.setdefault(int(a.group(1), 16), curl)
        after[int(a.group(1), 16)] = prev
        mn = re.match(r"\s+[0-9a-f]+:\s+(\w+)", t)
        prev = mn.group(1) if mn else None
    if m and m.group(2) != "jmp" and curl:
        jcc.setdefault(curl, []).append(int(m.group(3), 16))
known = 0
for l in sorted(set(gbr) & set(brda)):
    blocks = list(brda[l].values())
    if len(gbr[l]) != 2 or len(blocks) != 1 or len(jcc.get(l, [])) != 1:
        continue
    tl = line_of.get(jcc[l][0])
    if tl is None or tl not in gline or tl in shared or tl == l or after.get(jcc[l][0]) not in ("ret", "jmp"):
        continue
    known += 1
    taken = gline[tl]
    res(blocks[0] == [taken, sum(gbr[l]) - taken],
        "BRDA line %d: [taken, not taken] %s; the jcc goes to line %d, run %d times of %d" %
        (l, blocks[0], tl, taken, sum(gbr[l])))
res(known >= 2, "branches of known direction compared: %d (clamp's, main's)" % known)
# branches
res(set(gbr) == set(brda), "lines with branches: btr %s, gcov %s" % (sorted(brda), sorted(gbr)))
for l in sorted(set(gbr) & set(brda)):
    arcs, blocks = sorted(gbr[l]), list(brda[l].values())
    if len(arcs) == 2:
        res(len(blocks) == 1 and sorted(blocks[0]) == arcs,
            "branches line %d: btr %s, gcov %s" % (l, blocks, gbr[l]))
        continue
    # the switch: a 2-way range check and the jump's targets
    pairs = [b for b in blocks if len(b) == 2]
    targets = [b for b in blocks if len(b) != 2]
    good = len(pairs) == 1 and len(targets) == 1 and any(
        sorted(targets[0] + [x]) == arcs and y == sum(targets[0])
        for x, y in (pairs[0], pairs[0][::-1]))
    res(good, "switch line %d: btr %s, gcov %s" % (l, blocks, gbr[l]))
    res(len(arcs) == 7, "switch line %d: gcov has 7 arcs (%d)" % (l, len(arcs)))
# Cobertura: a method lists the lines of its function - here, every DA line
# from its FN line to the next function's - with the same hits
cls = [c for c in ET.parse(xmlf).getroot().iter("class") if c.get("filename").endswith("oracle_cov.c")][0]
starts = sorted(fn.values())
for m in cls.iter("method"):
    name = m.get("name")
    lo = fn[name]; hi = min([s for s in starts if s > lo] + [1 << 30])
    want = {l: c for l, c in da.items() if lo <= l < hi}
    got = {int(x.get("number")): int(x.get("hits")) for x in m.iter("line")}
    res(got == want, "method %s lines: %s, DA %s" % (name, got, want))
    rate = sum(1 for c in want.values() if c) / len(want) if want else 1.0
    res(abs(float(m.get("line-rate")) - rate) < 1e-3, "method %s line-rate %s, want %.4f" % (name, m.get("line-rate"), rate))
print("ok ran %d" % nres)
EOF
  results <gcov.cmp
  # every comparison ran: as many results as the script made, and its end
  n=$(sed -n 's/^ok ran \([0-9]*\)$/\1/p' gcov.cmp)
  check "gcov comparison ran to its end ($n results)" [ -n "$n" ]
  check "gcov comparison: $n results printed" [ "$(grep -c '^\(ok\|bad\) ' gcov.cmp)" = "$((n + 1))" ]
  if oracle lcov "lcov -a merging btr's and gcov's files"; then
    # merged with lcov -a (btr's file first): one FN per function, on
    # gcov's line, and both runs' counts added up
    lcov -q --capture --directory . --rc lcov_branch_coverage=1 -o gcov.info >/dev/null 2>&1
    lcov -q --rc lcov_branch_coverage=1 -a cov.info -a gcov.info -o merged.info >/dev/null 2>&1
    check "lcov -a merges btr's and gcov's files" [ -s merged.info ]
    check "merged: FN lines are gcov's" [ "$(grep '^FN:' merged.info | sort)" = "$(grep '^FN:' gcov.info | sort)" ]
    check "merged: FNDA twice gcov's" [ "$(grep '^FNDA:' merged.info | sort)" = \
      "$(awk -F'[:,]' '/^FNDA:/ {print "FNDA:" 2*$2 "," $3}' gcov.info | sort)" ]
  fi
  # fib's CFG: a return leaves the function - the leave edges carry every
  # one of gcov's 177 executions of fib, and a block that returns has no
  # edge inside (the block after a recursive call is entered from the call)
  "$btr" cfg cov.btr --function fib -o fib.dot; check "cfg exit 0" [ $? -eq 0 ]
  gfib=$(python3 -c 'import gzip, json, sys
print([f["execution_count"] for f in json.load(gzip.open(sys.argv[1]))["files"][0]["functions"] if f["name"] == "fib"][0])' \
    gc-oracle_cov.gcov.json.gz)
  leave=$(awk '/ -> out / {gsub(/.*label="/, ""); gsub(/".*/, ""); s+=$0} END {print s+0}' fib.dot)
  check "cfg fib: leave $leave = gcov's executions $gfib" [ "$leave" = "$gfib" ]
  inside=$(awk '/ -> out / {r[$1]=1} / -> n[0-9]/ {e[$1]++} END {for (n in r) s+=e[n]; print s+0}' fib.dot)
  check "cfg fib: no edge from a returning block inside the function ($inside)" [ "$inside" = 0 ]
  echo "gcov vs btr lcov: $(grep -c '^ok' gcov.cmp) comparisons equal, $(grep -c '^bad' gcov.cmp) differ"
fi

# ---- callgrind -------------------------------------------------------------
# cg_calls NAME TRACE PROG FUNCTIONS ARGS..: callgrind's calls= per (caller,
# callee) of the program's own FUNCTIONS equal btr callgraph's.  Pairs that
# involve the C runtime's start-up code are left out: callgrind counts a
# jump to a function's entry (frame_dummy's tail jump) as a call, btr's call
# stacks only calls.
cg_calls() {
  local name=$1 trace=$2 prog=$3 own=$4; shift 4
  valgrind --tool=callgrind --separate-recs=1 --compress-strings=no --compress-pos=no \
    --callgrind-out-file="$name.cg" "$prog" "$@" >/dev/null 2>&1
  check "$name: callgrind ran" [ -s "$name.cg" ]
  "$btr" callgraph --format json -o "$name.json" "$trace"; check "$name: callgraph exit 0" [ $? -eq 0 ]
  python3 - "$name.cg" "$name.json" "$prog" "$own" >"$name.cmp" <<'EOF'
import json, sys
cgf, js, prog, own = sys.argv[1:5]
own = set(own.split(","))
cg, ob, fn, cob, cfn = {}, None, None, None, None
for ln in open(cgf):
    ln = ln.rstrip("\n")
    if ln.startswith("ob="):
        ob = ln[3:]
    elif ln.startswith("fn="):
        fn = ln[3:]; cob = None
    elif ln.startswith("cob="):
        cob = ln[4:]
    elif ln.startswith("cfn="):
        cfn = ln[4:]
    elif ln.startswith("calls="):
        if ob == prog and (cob or ob) == prog and fn in own and cfn in own:
            cg[(fn, cfn)] = cg.get((fn, cfn), 0) + int(ln[6:].split()[0])
        cob = None
bt = {}
for f in json.load(open(js))["functions"]:
    if f["module"] == prog and f["name"] in own:
        for c in f["callees"]:
            if c["name"] in own:
                bt[(f["name"], c["name"])] = bt.get((f["name"], c["name"]), 0) + c["calls"]
print(("ok " if len(cg) >= 6 else "bad ") + "callgrind pairs: %s" % sorted(cg.items()))
for k in sorted(set(cg) | set(bt)):
    print(("ok " if cg.get(k) == bt.get(k) else "bad ") + "calls %s -> %s: btr %s, callgrind %s" % (k[0], k[1], bt.get(k), cg.get(k)))
EOF
  results <"$name.cmp"
  check "$name: callgrind comparison ran" [ "$(grep -c '^ok' "$name.cmp")" -ge 7 ]
  echo "callgrind vs btr callgraph ($name): $(grep -c '^ok' "$name.cmp") comparisons equal, $(grep -c '^bad' "$name.cmp") differ"
}
if oracle valgrind "btr callgraph against callgrind"; then
  cg_calls oracle_cov cov.btr "$prog" main,drive,classify,clamp,fib,never 100
  relocs=$build/prog_prof_bolt_relocs
  "$btr" record -q -b qemu -o relocs.btr -- "$relocs" 200 >/dev/null 2>&1; check "record prof_bolt_relocs" [ -s relocs.btr ]
  cg_calls prof_bolt_relocs relocs.btr "$relocs" main,mix,is_prime,count_primes,bubble,checksum,classify,walk 200
fi

# ---- llvm-bolt ---------------------------------------------------------------
if oracle llvm-bolt-16 "btr bolt against llvm-bolt-16" && oracle gcc "btr bolt against llvm-bolt-16"; then
  gcc -O2 -g -fno-inline -Wl,--emit-relocs "$progs/oracle_static/a.c" "$progs/oracle_static/b.c" -o st
  check "static subject built" [ -x st ]
  "$btr" record -q -b qemu -o st.btr -- ./st >/dev/null 2>&1; check "record static subject" [ -s st.btr ]
  "$btr" bolt st.btr -o st.fdata; check "bolt exit 0" [ $? -eq 0 ]
  # b.c's cold sq lies below a.c's: BOLT calls it sq/1 (other calls it
  # 1000 times) and a.c's sq/2 (main calls it 100000 times)
  edge() { awk -v a="$1" -v b="$2" '$1==1 && $2==a && $4==1 && $5==b && $6=="0" {s+=$8} END {print s+0}' st.fdata; }
  check "other calls sq/1 1000 times ($(edge other sq/1))" [ "$(edge other sq/1)" = 1000 ]
  check "main calls sq/2 100000 times ($(edge main sq/2))" [ "$(edge main sq/2)" = 100000 ]
  llvm-bolt-16 ./st -o st.bolt -data st.fdata >bolt.out 2>&1; check "llvm-bolt-16 accepts the fdata" [ $? -eq 0 ]
  read -r n m < <(sed -n 's/.*BOLT-INFO: \([0-9]*\) out of \([0-9]*\) functions in the binary.*non-empty execution profile.*/\1 \2/p' bolt.out)
  # profiled functions BOLT cannot optimize (not "simple") are counted apart
  k=$(sed -n 's/.*BOLT-INFO: \([0-9]*\) functions\{0,1\} with profile could not be optimized.*/\1/p' bolt.out)
  # the functions of the binary the trace ran (PLT stubs are no functions
  # to BOLT)
  ran=$("$btr" callgraph --format json st.btr | python3 -c '
import json, sys
print(sum(1 for f in json.load(sys.stdin)["functions"] if f["module"] == sys.argv[1] and not f["name"].endswith("@plt")))' "$tmp/st")
  echo "llvm-bolt-16: ${n:-?} of ${m:-?} functions profiled, ${k:-0} more not optimizable; the trace ran $ran"
  check "every function that ran has a profile (bolt ${n:-?} + ${k:-0}, trace $ran)" [ $(( ${n:-0} + ${k:-0} )) -eq "$ran" ]
  check "no stale profile" bash -c "! grep -qi 'stale' bolt.out"
  ./st.bolt; check "optimized binary runs" [ $? -eq 0 ]
fi

finish cli_oracles
