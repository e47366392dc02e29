#!/usr/bin/env bash
# cli_jobs.sh - `-j N` (--jobs) of every command that reads a trace: the
# output (stdout, the files written, stderr, the exit status) with -j 2 is
# byte for byte the one of -j 1, on real traces: the kAFL hardware trace
# (../shared/traces/kafl-qemu, wrapped into a .btr by test_par, as one
# thread and as three), a multi-thread and a multi-process recording of
# `btr record -b qemu`, perf.data with per-CPU AUX PT and with LBR samples
# (../shared/traces/quipper), and a recording of one thread in deep
# recursion (prog_prof_fib) with -j 3 too.  The decoder threads started
# are counted from the debug log (BTR_LOG=debug): N for each stream of a
# -j N run that decodes in threads, none with -j 1; on the traces of one
# thread (SEGS=all), so are the segments its data was cut into at PSBs and
# the decoder threads that decoded a part of it (all N); on per-CPU PT (SEGS=some)
# the segments.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
. "$(dirname "$0")/lib.sh"
btr=$1; build=$2; shared=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# ---- the options
"$btr" report -j 0 x.btr 2>err; check "-j 0 is a usage error" [ $? -eq 2 ]
check "-j 0 names the option" grep -q "bad --jobs '0'" err
"$btr" report --jobs x x.btr 2>/dev/null; check "--jobs x is a usage error" [ $? -eq 2 ]
for c in report cov cfg annotate diff callgraph flame timeline pprof bolt afdo check script crash diverge; do
  "$btr" $c --help | grep -q -- '-j, --jobs N'; check "$c --help names -j" [ $? -eq 0 ]
done

# runs NAME TRACE [B]: every reader on TRACE (and B for diff and diverge)
# with -j 1 and -j N for N in JOBS (default 2); FUNC is the function of
# annotate and cfg, MOD the module of bolt and afdo; SEGS=all: one
# thread's data, cut into segments in every thread; SEGS=some: cut
runs() {
  local name=$1 t=$2 b=${3:-$2} j c out k srt
  sampled || true   # (a trace's readers are sampled from the next count on)
  for j in 1 ${JOBS:-2}; do
    mkdir -p "$name.$j"
    (
      cd "$name.$j" || exit 1
      # (BTR_SAMPLE_STEP=K, make asan: one reader in K besides report, the
      # same ones for each -j: this subshell starts from the same count)
      r() { local k=$1; shift; [ "$k" = report ] || sampled || return 0; BTR_LOG=debug "$btr" "$@" >"$k.out" 2>"$k.err"; echo $? >"$k.rc"; }
      r report report -j $j "$t"
      r json report --format json -j $j "$t"
      r html report -j $j "$t" --html html
      r drcov cov -j $j "$t" -o cov.drcov
      r lcov cov -j $j "$t" -o cov.info
      r cob cov -j $j "$t" --format cobertura -o cov.xml
      r annotate annotate -j $j "$t" --function "$FUNC"
      r cfg cfg -j $j "$t" --function "$FUNC" -o cfg.dot
      r diff diff -j $j "$t" "$b"
      r callgraph callgraph -j $j "$t"
      r flame flame -j $j "$t" -o flame.folded
      r timeline timeline -j $j "$t" -o timeline.json
      r pprof pprof -j $j "$t" -o pprof.pb.gz
      r bolt bolt -j $j "$t" --module "$MOD" -o bolt.fdata
      r afdo afdo -j $j "$t" --module "$MOD" -o afdo.prof
      r check check -j $j "$t"
      r script script -j $j "$t"
      r crash crash -j $j "$t"
      r diverge diverge -j $j "$t" "$b"
    )
  done
  # Cobertura's timestamp is the time of writing
  sed -i 's/timestamp="[0-9]*"/timestamp=""/' "$name".*/cov.xml 2>/dev/null
  for j in ${JOBS:-2}; do
    for out in $(cd "$name.1" && find . -type f ! -name '*.err' | sort); do
      check "$name: ${out#./} the same with -j $j" cmp -s "$name.1/$out" "$name.$j/$out"
    done
    for out in "$name".1/*.err; do
      k=$(basename "$out")
      # (diverge decodes its two traces in two threads of its own, at any -j:
      # their messages interleave in no fixed order, so they are compared as
      # a multiset there)
      srt=cat
      [ "$k" = diverge.err ] && srt=sort
      check "$name: ${k%.err} says the same on stderr with -j $j" \
        cmp -s <(grep -v '^btr: debug: ' "$out" | $srt) <(grep -v '^btr: debug: ' "$name.$j/$k" | $srt)
      [ $j = "${JOBS:-2}" ] &&
        check "$name: ${k%.err} -j 1 starts no decoder thread" [ "$(grep -c 'decoder threads started' "$out")" = 0 ]
    done
    # the readers whose decoding is split (the call stack views decode in
    # the caller's thread: their decoder asks their state as it goes;
    # diverge decodes the two traces side by side, a thread at a time)
    for k in report json html drcov lcov cob annotate cfg check script crash; do
      [ -f "$name.$j/$k.rc" ] || continue   # (not sampled)
      check "$name: $k -j $j starts $j decoder threads" grep -q "^btr: debug: stream: $j decoder threads started" "$name.$j/$k.err"
      [ "${SEGS:-}" = all ] &&
        check "$name: $k -j $j cuts the thread's data into segments decoded in all $j decoder threads" \
          grep -Eq "^btr: debug: stream: segments of a thread's data after its first: [1-9][0-9]*, decoded in $j decoder threads" "$name.$j/$k.err"
      [ "${SEGS:-}" = some ] &&
        check "$name: $k -j $j cuts a thread's or CPU's data into segments" \
          grep -Eq "^btr: debug: stream: segments of a thread's data after its first: [1-9][0-9]*, decoded in [1-9]" "$name.$j/$k.err"
    done
    [ -f "$name.$j/diff.rc" ] &&
    check "$name: diff -j $j starts $j decoder threads for each trace" \
      [ "$(grep -c "^btr: debug: stream: $j decoder threads started" "$name.$j/diff.err")" = 2 ]
  done
  check "$name: report -j 1 and -j 2 read something" [ "$(wc -c <"$name.1/report.out")" -gt 200 ]
}

# ---- the kAFL hardware trace (user-mode PT of QEMU, raw code image)
if [ -r "$shared/traces/kafl-qemu/trace.pt" ]; then
  for n in 1 3; do
    "$build/test_par" --write-kafl "$tmp/kafl$n.btr" $n; check "kafl as $n thread(s) written" [ $? -eq 0 ]
    s=some
    [ $n = 1 ] && s=all
    JOBS="2 3" SEGS=$s FUNC=main MOD=qemu runs kafl$n "$tmp/kafl$n.btr"
  done
  check "kafl: the report counts 3 threads" grep -q '^threads: *3' kafl3.1/report.out
else
  note "$shared/traces/kafl-qemu absent: the kAFL trace not checked"
fi

# ---- perf.data: PT in per-CPU AUX buffers, LBR samples
q=$shared/traces/quipper
if [ -r "$q/perf.data.intel_pt-4.14" ]; then
  JOBS="2 3" SEGS=some FUNC=main MOD=coreutils runs perf_pt "$q/perf.data.intel_pt-4.14"
  FUNC=main MOD=libc runs perf_lbr "$q/perf.data.branch-4.14"
else
  note "$q absent: perf.data not checked"
fi

# ---- qemu recordings: threads, processes
if command -v qemu-x86_64 >/dev/null && "$btr" info | grep -q '^qemu  yes'; then
  if record_qemu threads.btr threads "$build/prog_flow_threads"; then
    FUNC=work MOD=prog_flow_threads runs threads "$tmp/threads.btr"
    check "threads: 3 threads" grep -q '^threads: *3' threads.1/report.out
  fi
  # one thread in deep recursion: the return compression crosses the seams
  # (fib(27) is not 55: the program, and so the recorder, exits 1)
  "$btr" record -q -b qemu -o fib.btr -- "$build/prog_prof_fib" 27 >/dev/null 2>fib.rec.err
  check "fib recorded (exit 1: the program's)" [ $? -eq 1 -a -s fib.btr ]
  if [ -s fib.btr ]; then
    JOBS="2 3" SEGS=all FUNC=fib MOD=prog_prof_fib runs fib "$tmp/fib.btr"
    check "fib: one thread" grep -q '^threads: *1$' fib.1/report.out
  fi
  if record_qemu procs.btr procs "$build/prog_proc_tree"; then
    record_qemu procs2.btr procs2 "$build/prog_proc_tree" &&
      FUNC=main MOD=prog_proc_tree runs procs "$tmp/procs.btr" "$tmp/procs2.btr"
    check "procs: more than one process" grep -Eq '^processes: *([2-9]|[1-9][0-9])' procs.1/report.out
  fi
else
  note "the qemu backend is unusable here: recordings not checked"
fi
finish cli_jobs
