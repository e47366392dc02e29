#!/usr/bin/env bash
# cli_hostile.sh - hostile files: every sample file (a qemu .btr recorded
# here, plain and zstd-compressed; each perf.data of the shared traces; an ELF
# for symbolize), cut at many offsets and with random bytes changed
# (tests/hostile_mutate.py, fixed seeds), through every reading command.
# Each run must give exit 3 with exactly one line on stderr, or exit 0 (a
# result, partial ones with their gaps or warnings); never a signal, never
# a hang (timeout), never unbounded memory (ulimit -v; in the sanitizer
# build ASan's hard_rss_limit_mb).
# Then THE HOSTILE CORPUS (tests/hostile_corpus.py, docs/reliability.md
# "Bounds"): traces written to hurt the reader - code, symbol and module
# bombs, a jitdump that is /dev/zero, a FIFO or 10 GB, module paths naming
# special files, names that are terminal escapes and line-format syntax -
# through every reading command of tools/btr/cli.h and the Python binding:
# each finishes (10 s of CPU time, 30 s under ASan), with a peak RSS of at most 64 MB +
# 4x the file (ASan: scaled), and writes no control character a terminal
# or a line format would act on.  Run time: about two minutes.
# HOSTILE_SCALE=K multiplies the number of damaged copies (deeper local runs);
# BTR_SAMPLE_STEP=K (make asan) runs one command line in K (tests/lib.sh).
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2"); shared=$(realpath -m "${3:-/nonexistent}")
src=$(cd "$(dirname "$0")" && pwd)
scale=${HOSTILE_SCALE:-1}
runs=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# THE COMMANDS, by the kind of file they read; FILE is the damaged file:
# every form of the registry (`btr --list-commands`, tools/btr/commands.c)
# that reads a trace, or an ELF file.
TRACE_CMDS=$(FILE=FILE OUT=h.dot FUNC=main; forms reads-trace | while IFS=$'\t' read -r _ _ f; do fill "$f"; done)
ELF_CMDS=$(ELF=FILE ADDR="0x401000 0x4011a0"; forms reads-elf | while IFS=$'\t' read -r _ _ f; do fill "$f"; done)
check "the registry's forms that read a trace: $(echo "$TRACE_CMDS" | wc -l)" [ "$(echo "$TRACE_CMDS" | wc -l)" -ge 25 ]
check "the registry's forms that read an ELF file: $(echo "$ELF_CMDS" | wc -l)" [ "$(echo "$ELF_CMDS" | wc -l)" -ge 1 ]

# THE SAMPLES: kind file ntrunc nflip (counts before HOSTILE_SCALE)
samples=""
if command -v qemu-x86_64 >/dev/null; then
  "$btr" record -q -o threads.btr -- "$build/prog_flow_threads" >/dev/null 2>&1 && samples="$samples trace threads.btr 8 8"
  "$btr" record -q -z 3 -o loops-zstd.btr -- "$build/prog_flow_loops" >/dev/null 2>&1 && samples="$samples trace loops-zstd.btr 4 4"
fi
for f in quipper/perf.data.intel_pt-4.14 quipper/perf.data.branch-4.14 quipper/perf.data.callgraph_and_branch-3.8 autofdo/test.lbr; do
  [ -r "$shared/traces/$f" ] && samples="$samples trace $shared/traces/$f 2 2"
done
samples="$samples elf $build/prog_symbols_nopie 4 4"

asan=0
if nm "$btr" 2>/dev/null | grep -q __asan_init || ldd "$btr" 2>/dev/null | grep -q libasan; then asan=1; fi

run() {  # $1: command line
  local rc lines
  runs=$((runs+1))
  if [ $asan -eq 1 ]; then
    # shellcheck disable=SC2086
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:hard_rss_limit_mb=1024" timeout -s KILL 60 "$btr" $1 >out.txt 2>err.txt; rc=$?
  else
    # shellcheck disable=SC2086
    (ulimit -v 1048576; exec timeout -s KILL 30 "$btr" $1 >out.txt 2>err.txt); rc=$?
  fi
  lines=$(wc -l <err.txt)
  if [ $rc -eq 3 ]; then
    # One line for one cause: one error line, or (data lost, the output
    # covers what was read) one "btr: warning:" line per distinct loss -
    # flipped bytes can damage two chunks and, with them, a process's exit
    # record, each said once (docs/cli.md) - and then, if the command
    # fails, its one error line last.  Never a line twice, nothing else.
    if [ "$lines" -eq 1 ] || { [ "$(sort -u err.txt | wc -l)" -eq "$lines" ] &&
        ! head -n -1 err.txt | grep -qv '^btr: warning: ' && ! grep -qv '^btr: ' err.txt &&
        [ "$lines" -le 34 ]; }; then
      ok
    else
      bad "btr $1: exit 3 with $lines stderr lines: $(head -c 300 err.txt)"
    fi
  elif [ $rc -eq 0 ] || { [ $rc -eq 1 ] && [ "${1%% *}" = check ]; }; then
    ok   # check exits 1 for findings (damaged code can look hijacked)
  elif [ $rc -eq 137 ]; then
    bad "btr $1: hang or out of memory (killed after the time limit or memory limit)"
  else
    bad "btr $1: exit $rc: $(head -c 300 err.txt)"
  fi
}

parts=${HOSTILE_PARTS:-mutate corpus}
set -- $samples
[ "${parts#*mutate}" = "$parts" ] && set --
while [ $# -ge 4 ]; do
  kind=$1; file=$2; nt=$(( $3 * scale )); nf=$(( $4 * scale )); shift 4
  [ -r "$file" ] || continue
  d=$tmp/m-$(basename "$file")
  python3 "$src/hostile_mutate.py" "$file" "$d" 1 "$nt" "$nf" || { bad "mutate $file"; continue; }
  if [ "$kind" = trace ]; then cmds=$TRACE_CMDS; else cmds=$ELF_CMDS; fi
  before=$fail
  for m in "$d"/*; do
    while read -r line; do
      [ -n "$line" ] && sampled && run "${line//FILE/$m}"
    done <<<"$cmds"
  done
  echo "$(basename "$file"): $(ls "$d" | wc -l) damaged copies, $((fail-before)) failures"
  rm -rf "$d"
done

# ---- THE HOSTILE CORPUS -------------------------------------------------
# (HOSTILE_PARTS=corpus runs it alone, =mutate the part above alone)
corpus=$tmp/corpus
if [ "${parts#*corpus}" = "$parts" ]; then finish cli_hostile "$runs runs"; fi
preload=""   # the sanitizer build's library needs its runtime first
[ $asan -eq 1 ] && preload=$(gcc -print-file-name=libasan.so)
LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 python3 "$src/hostile_corpus.py" "$build/libbtr.so.0" "$corpus" \
  >corpus.list 2>corpus.err || bad "hostile_corpus.py: $(tail -1 corpus.err)"

# Programs whose DWARF names hostile files, recorded here: a source file
# name holding a newline and lcov syntax (names-dwarf.btr), and source
# files that are a FIFO and a device (special-dwarf.btr, for annotate
# --source and the HTML report).
if command -v qemu-x86_64 >/dev/null && command -v cc >/dev/null; then
  body='int f(int x) { return 3 * x; }
int main(int c, char **v) { (void)v; int s = 0; for (int i = 0; i < 5; i++) s += f(c + i); return s == 1; }'
  printf '#line 1 "%s/src\\nSF:forged;x.c"\n%s\n' "$tmp" "$body" >names-dwarf.c
  printf '#line 1 "%s/fifo"\nint f(int x) { return 3 * x; }\n#line 1 "/dev/zero"\nint main(int c, char **v) { (void)v; int s = 0; for (int i = 0; i < 5; i++) s += f(c + i); return s == 1; }\n' "$corpus" >special-dwarf.c
  for p in names-dwarf special-dwarf; do
    if cc -g -O0 -o "$p" "$p.c" 2>"$p.err" && "$btr" record -q -o "$corpus/$p.btr" -- "./$p" >/dev/null 2>>"$p.err"; then
      echo "$p.btr trace" >>corpus.list
    else
      bad "recording $p: $(head -1 "$p.err")"
    fi
  done
fi

# The commands: the registry's forms that read a trace (FILE: the corpus
# file; OUT: an output file), and a few more options of theirs.
CORPUS_CMDS="$(FILE=FILE OUT=OUT.dot FUNC=main; forms reads-trace | while IFS=$'\t' read -r _ _ f; do fill "$f"; done)
report --html OUT.d FILE
annotate --source --function main FILE"

asan_env="${ASAN_OPTIONS:-}:quarantine_size_mb=16:malloc_context_size=4:detect_leaks=0"
# Time is CPU time (user + system: what the input makes btr do, whatever
# the machine's load); the wall-clock limit only catches hangs.
climit=10 tlimit=60
[ $asan -eq 1 ] && climit=30 tlimit=180
# one run: $1 corpus file, $2 the command line; sets $crc and checks
crun() {
  local f=$1 line=$2 size kb limit rss lines
  runs=$((runs+1))
  rm -rf out.txt err.txt rss.txt o.*
  size=$(stat -c %s "$f")
  limit=$(( 65536 + 4 * size / 1024 ))          # KB: 64 MB + 4x the file
  [ $asan -eq 1 ] && limit=$(( 3 * limit + 65536 ))  # shadow memory, redzones
  line=${line//FILE/$f}; line=${line//OUT/o}
  # shellcheck disable=SC2086
  ASAN_OPTIONS=$asan_env timeout -s KILL "$tlimit" /usr/bin/time -f '%M %U %S' -o rss.txt "$btr" $line >out.txt 2>err.txt
  crc=$?
  local cpu
  read -r rss cpu <<<"$(tail -1 rss.txt 2>/dev/null | awk '{printf "%d %d", $1, $2 + $3 + 0.999}')"
  lines=$(wc -l <err.txt)
  local what="btr $2 on $(basename "$f")"
  if [ $crc -eq 137 ] || [ $crc -eq 124 ]; then
    bad "$what: did not finish (killed after $tlimit s)"; return
  fi
  if [ -n "$cpu" ] && [ "$cpu" -gt $climit ]; then
    bad "$what: $cpu s of CPU time, over $climit s"; return
  fi
  case $crc in
    0|1) ;;   # 1: check's findings, diff's and diverge's differences
    3) grep -qv '^btr: ' err.txt && { bad "$what: exit 3 with other lines than btr's: $(head -c 200 err.txt)"; return; }
       [ "$(tail -1 err.txt | grep -c '^btr: warning: ')" -eq 0 ] || [ "$lines" -le 1 ] ||
         { bad "$what: exit 3 without its error line: $(head -c 200 err.txt)"; return; } ;;
    *) bad "$what: exit $crc: $(head -c 300 err.txt)"; return ;;
  esac
  if [ -z "$rss" ] || [ "$rss" -gt "$limit" ]; then
    bad "$what: peak RSS ${rss:-?} KB, over $limit KB (64 MB + 4x the file)"; return
  fi
  # terminal escapes and forged lines: no control character but tab and
  # newline in what a terminal shows or a line format holds
  local t
  [ -f o.drcov ] && sed -i '/^BB Table/,$d' o.drcov   # (binary after its header)
  for t in out.txt err.txt o.folded o.info o.drcov o.prof; do
    [ -f "$t" ] || continue
    if LC_ALL=C grep -aq $'[\x01-\x08\x0b-\x1f\x7f]' "$t"; then
      bad "$what: $t holds a control character: $(LC_ALL=C grep -a -m1 $'[\x01-\x08\x0b-\x1f\x7f]' "$t" | cat -v | head -c 200)"
      return
    fi
  done
  ok
}

# the Python binding: every record through the scan, every branch, a
# symbolization, the report; a BtrError is one line and exit 3
cat >py.py <<'PY'
import sys
import btr
try:
    t = btr.open(sys.argv[1])
    t.processes(); t.threads(); mods = t.modules()
    n = sum(len(b) for b in t.branches())
    t.symbolize([m["start"] for m in mods[:100]])
    t.analyze("report")
    print("ok", n)
except btr.BtrError as e:
    print("btr: %s" % e, file=sys.stderr)
    sys.exit(3)
PY
cat >py.sh <<PYSH
#!/bin/sh
BTR_LIBRARY=$build/libbtr.so.0 PYTHONPATH=$src/../python exec python3 $tmp/py.py "\$2"
PYSH
chmod +x py.sh

cruns_before=$runs
while read -r name kind; do
  f=$corpus/$name
  [ "$kind" = trace ] || continue
  before=$fail
  while read -r form; do
    sampled && crun "$f" "$form"
  done <<<"$CORPUS_CMDS"
  # the Python binding, under the same limits (not in the sanitizer
  # build: its library needs the ASan runtime loaded first)
  if [ $asan -eq 0 ]; then
    btr_save=$btr; btr=$tmp/py.sh
    crun "$f" "python FILE"
    btr=$btr_save
  fi
  echo "$name: $((fail-before)) failures"
done <corpus.list
check "the corpus was run" [ $((runs - cruns_before)) -gt $((100 / ${BTR_SAMPLE_STEP:-1})) ]

finish cli_hostile "$runs runs"
