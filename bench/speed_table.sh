#!/usr/bin/env bash
# speed_table.sh - issue 24's speed table from one run (make bench-speed).
#
#   1. btr's PT flow decoder beside libxdc (warm: decoder state kept over
#      REPS back-to-back decodes in one process): on the real hardware
#      trace ../shared/traces/kafl-qemu (raw PT + flat code image) and on
#      PT that btr records from gzip and python3 (--no-retcomp: libxdc
#      cannot decode return compression).  Edges are counted as libxdc
#      counts them (its edge callback: conditionals taken or not, direct
#      jumps and calls, indirect transfers); libxdc's count divides every
#      row.  "decode" is the best in-process decode of the buffer (thread
#      CPU time); "whole" is the process's user+sys CPU time (getrusage at
#      its end) and wall time over REPS decodes, image loading and start-up
#      included.  The decoders run in rounds (each once per round) and
#      xdc/btr is the median of the rounds' ratios: the host's speed drifts
#      over minutes, and a round sees one speed.
#   2. every analysis against `btr pt decode --stat` on one trace that
#      `btr record -b qemu -- gzip -c` writes for a MB_ANALYSIS MiB file:
#      ratio of CPU time (user+sys) and of wall time, the median of the
#      ratios of RUNS pairs (a decode, then the view: the host's speed
#      drifts over minutes, a pair sees the same); diff reads the trace
#      twice, so its ratio is against two decodes.
#   3. -j: every reading command with -j 2 against -j 1 (wall time, the
#      median of the ratios of RUNS pairs), on a single-thread trace
#      (`gzip -c` of MB_JOBS MiB) and on a multi-thread one (`xz -T2` of
#      MB_JOBS/5 MiB in two blocks, so that two threads compress); the
#      outputs are compared too (same: byte for byte).  The wall ratio
#      means something only on an idle machine; BTR_LOG=debug btr CMD -j 2
#      gives the busiest thread's CPU time, which bounds it.
#   4. `btr record -b qemu -- gzip -c` of MB_RECORD MiB against native,
#      qemu-x86_64 alone and the per-TB-callback floor plugin
#      (bench/floor_plugin.c), for every QEMU here that loads btr's plugin
#      (BENCH_QEMUS, else the one on PATH, the system's and the self-built
#      one: e.g. Debian 12's 7.2, plugin API v1, and QEMU 10, v4); trace
#      bytes per executed instruction.
#
# Every figure is the median of RUNS runs; peak RSS (/usr/bin/time %M) is
# the maximum over the runs.  The machine's
# load average is printed before each part: other work on the machine
# inflates wall times (CPU times less so).  Never a test: timing gates
# nothing.
#
# Usage: bench/speed_table.sh [RELEASE_BUILD_DIR] [RUNS]
# Environment: REPS (decodes per process, default 30), MB_ANALYSIS (5),
# MB_RECORD (10), MB_JOBS (5), PARTS (default "xdc views jobs record"),
# JOBS_ST / JOBS_MT (a single- / multi-thread trace for part 3 instead of
# recording them).
set -u
build=${1:-build-release}
runs=${2:-3}
reps=${REPS:-30}
mb_an=${MB_ANALYSIS:-5}
mb_rec=${MB_RECORD:-10}
mb_jobs=${MB_JOBS:-5}
parts=${PARTS:-xdc views jobs record}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/bench_lib.sh"
btr=$build/btr
[ -x "$btr" ] || { echo "speed_table: $btr not built (make release)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "speed_table: /usr/bin/time (Debian package time) needed" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/btr-speed.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }

# measure NAME CMD...: runs CMD $runs times; sets med_wall, med_cpu, max_rss
# (KiB) and ok (0 if any run failed; its first error line in $tmp/NAME.err)
measure() {
  local name=$1 i walls= cpus= rss=0 w c m st
  shift
  ok=1
  for i in $(seq "$runs"); do
    bench_time "$tmp/$name.$i" "$@"
    read -r w c m st <"$tmp/$name.$i"
    [ "$st" = 0 ] || { ok=0; cp "$tmp/$name.$i.err" "$tmp/$name.err"; }
    walls="$walls $w"; cpus="$cpus $c"
    [ "$m" -gt "$rss" ] && rss=$m
  done
  med_wall=$(bench_median $walls)
  med_cpu=$(bench_median $cpus)
  max_rss=$rss
}

printf 'speed_table: %s, %s cores, %s runs per figure (medians), btr %s\n' "$(date -u '+%F %T UTC')" \
  "$(nproc)" "$runs" "$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"

# ---------------------------------------------------------------- part 1
if [[ " $parts " == *" xdc "* ]]; then
  echo
  echo "== 1. flow decode: btr beside libxdc (warm, $reps decodes per process); load $(load)"
  if xdc_msg=$(bench_build_xdc "$build" 2>&1); then
    xc=$build/xdc/xdc_compare
    kafl=$here/../shared/traces/kafl-qemu
    declare -a traces=()
    if [ -f "$kafl/trace.pt" ] && [ -f "$kafl/code.bin" ] && [ -f "$kafl/range" ]; then
      read -r lo hi <"$kafl/range"
      traces+=("kafl-qemu|--raw $kafl/trace.pt $kafl/code.bin $lo $lo $hi")
    else
      echo "(kafl-qemu: $kafl not present, skipped)"
    fi
    bench_text "$tmp/xdc_input" 1.2
    bench_pyprog "$tmp/prog.py"
    "$btr" record -q -b qemu --no-retcomp -o "$tmp/gzip.btr" -- gzip -c "$tmp/xdc_input" >/dev/null 2>&1 &&
      traces+=("gzip|$tmp/gzip.btr") || echo "(recording gzip failed)"
    "$btr" record -q -b qemu --no-retcomp -o "$tmp/python3.btr" -- /usr/bin/python3 "$tmp/prog.py" \
      >/dev/null 2>&1 && traces+=("python3|$tmp/python3.btr") || echo "(recording python3 failed)"
    printf '%-10s %-10s %9s %9s %9s %9s %9s %8s\n' trace decoder edges "decode" "whole" "whole" \
      "xdc/btr" "rss"
    printf '%-10s %-10s %9s %9s %9s %9s %9s %8s\n' "" "" "" "cpu ns/e" "cpu ns/e" "wall ns/e" \
      "(whole)" "MiB"
    modes="xdc-cb btr-batch btr-cb xdc-bitmap"
    for tr in "${traces[@]}"; do
      tname=${tr%%|*}; targs=${tr#*|}
      # Rounds, not blocks: each round runs every decoder once, so the
      # host's drift over minutes falls on all of them alike; xdc/btr is
      # the median of the rounds' ratios.
      declare -A failed=()
      for i in $(seq "$runs"); do
        for m in $modes; do
          bench_time "$tmp/xdc_${tname}_$m.$i" "$xc" $targs "$reps" "$m"
          read -r _ _ _ st <"$tmp/xdc_${tname}_$m.$i"
          [ "$st" = 0 ] || failed[$m]=1
        done
      done
      div=
      for m in $modes; do
        if [ -n "${failed[$m]:-}" ]; then
          echo "$tname $m: failed: $(head -1 "$(ls "$tmp/xdc_${tname}_$m".*.err | head -1)")"; continue
        fi
        # stdout of each run: mode, PT bytes, edges, best decode seconds, whole CPU seconds
        read -r _ _ edges _ _ <"$tmp/xdc_${tname}_$m.1.out"
        [ -z "$div" ] && div=$edges   # libxdc's edge count (xdc-cb runs first)
        best=$(bench_median $(cat "$tmp/xdc_${tname}_$m".*.out | awk '{ print $6 }'))
        # whole-process CPU as the process measured it (time(1) rounds to 10 ms)
        cpu=$(bench_median $(cat "$tmp/xdc_${tname}_$m".*.out | awk '{ print $7 }'))
        wall=$(bench_median $(cat $(seq -f "$tmp/xdc_${tname}_$m.%g" "$runs") | awk '{ print $1 }'))
        rss=$(cat $(seq -f "$tmp/xdc_${tname}_$m.%g" "$runs") | awk '$3 > r { r = $3 } END { print r }')
        ratio=-
        if [ "$m" != xdc-cb ] && [ -z "${failed[xdc-cb]:-}" ]; then
          ratio=$(printf '%.2fx' "$(bench_median $(for i in $(seq "$runs"); do
            paste "$tmp/xdc_${tname}_xdc-cb.$i.out" "$tmp/xdc_${tname}_$m.$i.out" |
              awk '{ printf "%.4f\n", $7 / $14 }'; done))")
        fi
        awk -v t="$tname" -v m="$m" -v e="$edges" -v b="$best" -v d="$div" -v c="$cpu" \
            -v w="$wall" -v r="$reps" -v x="$ratio" -v rss="$rss" 'BEGIN {
          printf "%-10s %-10s %9d %9.2f %9.2f %9.2f %9s %8.1f\n", t, m, e, b * 1e9 / d, c * 1e9 / r / d,
                 w * 1e9 / r / d, x, rss / 1024 }'
      done
      unset failed
    done
    echo "goal: btr whole process >= 1.2x faster than libxdc warm (xdc/btr of btr-batch >= 1.20x) on every real hardware trace"
  else
    echo "libxdc comparison skipped: $(echo "$xdc_msg" | tail -1)"
  fi
fi

# ---------------------------------------------------------------- part 2
if [[ " $parts " == *" views "* ]]; then
  echo
  bench_text "$tmp/an_input" "$mb_an"
  "$btr" record -q -b qemu -o "$tmp/an.btr" -- gzip -c "$tmp/an_input" >/dev/null 2>&1 ||
    { echo "speed_table: recording gzip for the analyses failed" >&2; exit 3; }
  hot=$("$btr" report --format json --top 1 "$tmp/an.btr" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = d.get("functions") or d.get("hot_functions") or []
print(f[0].get("name") or f[0].get("symbol") if f else "")' 2>/dev/null)
  [ -n "$hot" ] || hot=$("$btr" report --top 1 "$tmp/an.btr" | awk '/^top functions/ { getline; print $4; exit }')
  echo "== 2. analyses against decode: btr record -b qemu -- gzip -c of $mb_an MiB" \
    "($(stat -c %s "$tmp/an.btr") bytes; hottest function $hot); load $(load)"
  measure decode "$btr" pt decode --stat "$tmp/an.btr"
  dec_cpu=$med_cpu; dec_wall=$med_wall
  br=$("$btr" pt decode --stat "$tmp/an.btr" 2>/dev/null | awk '$1 == "branches" { print $2 }')
  printf '%-10s %8s %8s %7s %7s %8s  %s\n' view "cpu s" "wall s" "x cpu" "x wall" "rss MiB" goal
  printf '%-10s %8.3f %8.3f %7s %7s %8.1f  (%s branches, %.2f ns/branch cpu)\n' decode "$dec_cpu" \
    "$dec_wall" 1.00 1.00 "$(echo "$max_rss / 1024" | bc -l)" "$br" \
    "$(echo "$dec_cpu * 1000000000 / $br" | bc -l)"
  # view|goal|args ('T' is the trace)
  for v in "report|1.3|report T" "cov|1.3|cov T -o $tmp/o.drcov" \
           "cfg|1.3|cfg T --function $hot -o $tmp/o.dot" "annotate|1.3|annotate T --function $hot" \
           "bolt|1.3|bolt T -o $tmp/o.fdata" "diff|1.3|diff T T" \
           "flame|1.6|flame T -o $tmp/o.folded" "pprof|1.6|pprof T -o $tmp/o.pb.gz" \
           "callgraph|1.6|callgraph T" "check|2.0|check T"; do
    name=${v%%|*}; rest=${v#*|}; goal=${rest%%|*}; args=${rest#*|}
    # the word T is the trace (only whole words: $tmp may hold a T)
    read -ra words <<<"$args"
    for i in "${!words[@]}"; do [ "${words[$i]}" = T ] && words[$i]=$tmp/an.btr; done
    # paired: each run of the view right after a run of the decode, and
    # the ratio taken per pair (the host's speed drifts over the minutes
    # the table takes; a pair sees the same conditions)
    n=1; [ "$name" = diff ] && n=2
    ok=1; rss=0; cpus=; walls=; xcs=; xws=
    for r in $(seq "$runs"); do
      bench_time "$tmp/p_$name.d$r" "$btr" pt decode --stat "$tmp/an.btr"
      bench_time "$tmp/p_$name.v$r" "$btr" "${words[@]}"
      read -r dw dc _ _ <"$tmp/p_$name.d$r"
      read -r w c m st <"$tmp/p_$name.v$r"
      [ "$st" = 0 ] || { ok=0; cp "$tmp/p_$name.v$r.err" "$tmp/v_$name.err"; }
      [ "$m" -gt "$rss" ] && rss=$m
      cpus="$cpus $c"; walls="$walls $w"
      xcs="$xcs $(awk -v a="$c" -v b="$dc" -v n="$n" 'BEGIN { print a / (n * b) }')"
      xws="$xws $(awk -v a="$w" -v b="$dw" -v n="$n" 'BEGIN { print a / (n * b) }')"
    done
    if [ "$ok" = 0 ]; then
      echo "$name: failed: $(head -1 "$tmp/v_$name.err")"; continue
    fi
    awk -v v="$name" -v c="$(bench_median $cpus)" -v w="$(bench_median $walls)" -v xc="$(bench_median $xcs)" \
        -v xw="$(bench_median $xws)" -v n="$n" -v rss="$rss" -v g="$goal" 'BEGIN {
      printf "%-10s %8.3f %8.3f %7.2f %7.2f %8.1f  <= %.1fx %s%s\n", v, c, w, xc, xw, rss / 1024, g,
             xc <= g ? "met" : "NOT met", n == 2 ? " (two traces: against 2 decodes)" : "" }'
  done
fi

# ---------------------------------------------------------------- part 3
if [[ " $parts " == *" jobs "* ]]; then
  echo
  bench_text "$tmp/jobs_input" "$mb_jobs"
  head -c $((mb_jobs * 1048576 / 5)) "$tmp/jobs_input" >"$tmp/jobs_small"
  # JOBS_ST, JOBS_MT: traces to use instead (a machine where recording is not possible now)
  if [ -n "${JOBS_ST:-}" ]; then cp "$JOBS_ST" "$tmp/st.btr"; else
    "$btr" record -q -b qemu -o "$tmp/st.btr" -- gzip -c "$tmp/jobs_input" >/dev/null 2>&1 ||
      { echo "speed_table: recording gzip for -j failed" >&2; exit 3; }
  fi
  if [ -n "${JOBS_MT:-}" ]; then cp "$JOBS_MT" "$tmp/mt.btr"; else
    "$btr" record -q -b qemu -o "$tmp/mt.btr" -- xz -T2 --block-size=$((mb_jobs * 1048576 / 10)) -c \
      "$tmp/jobs_small" >/dev/null 2>&1 || { echo "speed_table: recording xz -T2 for -j failed" >&2; exit 3; }
  fi
  echo "== 3. -j 2 against -j 1 (wall): gzip -c of $mb_jobs MiB (1 thread, $(stat -c %s "$tmp/st.btr") bytes)," \
    "xz -T2 of $((mb_jobs * 1024 / 5)) KiB ($("$btr" report "$tmp/mt.btr" | awk '$1 == "threads:" { print $2 }') threads," \
    "$(stat -c %s "$tmp/mt.btr") bytes); load $(load)"
  printf '%-10s %-6s %8s %8s %8s %8s %7s %8s  %s\n' view trace "-j1 s" "-j2 s" "-j1 cpu" "-j2 cpu" "x wall" output goal
  for v in "report|report T" "cov|cov T -o O.drcov" "flame|flame T -o O.folded" "callgraph|callgraph T" \
           "pprof|pprof T -o O.pb.gz" "timeline|timeline T -o O.json" "check|check T" "script|script T"; do
    name=${v%%|*}; args=${v#*|}
    for tr in st mt; do
      ok=1; w1s=; w2s=; c1s=; c2s=; xs=; same=same
      for r in $(seq "$runs"); do
        for j in 1 2; do
          read -ra words <<<"$args"
          for i in "${!words[@]}"; do
            [ "${words[$i]}" = T ] && words[$i]=$tmp/$tr.btr
            words[$i]=${words[$i]/#O./$tmp/j$j.}
          done
          bench_time "$tmp/jb_${name}_$tr.$j.$r" "$btr" "${words[@]}" -j $j
          [ "$r" = 1 ] && cp "$tmp/jb_${name}_$tr.$j.$r.out" "$tmp/jout.$j" 2>/dev/null
        done
        read -r w1 c1 _ st1 <"$tmp/jb_${name}_$tr.1.$r"
        read -r w2 c2 _ st2 <"$tmp/jb_${name}_$tr.2.$r"
        [ "$st1" = 0 ] && [ "$st2" = 0 ] || ok=0
        w1s="$w1s $w1"; w2s="$w2s $w2"; c1s="$c1s $c1"; c2s="$c2s $c2"
        xs="$xs $(awk -v a="$w2" -v b="$w1" 'BEGIN { print (b > 0 ? a / b : 0) }')"
      done
      cmp -s "$tmp/jout.1" "$tmp/jout.2" || same=DIFF
      for f in "$tmp"/j1.*; do
        [ -e "$f" ] && { cmp -s "$f" "${f/\/j1./\/j2.}" || same=DIFF; }
      done
      rm -f "$tmp"/j1.* "$tmp"/j2.*
      if [ "$ok" = 0 ]; then echo "$name $tr: failed"; continue; fi
      awk -v v="$name" -v t="$tr" -v w1="$(bench_median $w1s)" -v w2="$(bench_median $w2s)" \
          -v c1="$(bench_median $c1s)" -v c2="$(bench_median $c2s)" -v x="$(bench_median $xs)" -v s="$same" 'BEGIN {
        printf "%-10s %-6s %8.3f %8.3f %8.3f %8.3f %7.2f %8s  <= 0.65x %s\n", v, t, w1, w2, c1, c2, x, s,
               x <= 0.65 ? "met" : "NOT met" }'
    done
  done
  echo "st: one thread (gzip); mt: two threads (xz -T2).  x wall: median of the ratios -j2/-j1 of the pairs."
fi

# ---------------------------------------------------------------- part 4
if [[ " $parts " == *" record "* ]]; then
  echo
  gz=$(command -v gzip)
  bench_text "$tmp/rec_input" "$mb_rec"
  echo "== 4. recording: $gz -c of $mb_rec MiB; load $(load)"
  printf '%-32s %8s %8s %8s %8s %8s\n' method "wall s" "cpu s" "x wall" "x cpu" "rss MiB"
  row() { # label
    awk -v l="$1" -v w="$med_wall" -v c="$med_cpu" -v nw="$nat_wall" -v nc="$nat_cpu" -v r="$max_rss" \
      'BEGIN { printf "%-32s %8.3f %8.3f %8.2f %8.2f %8.1f\n", l, w, c, w / nw, c / nc, r / 1024 }'
  }
  measure native "$gz" -c "$tmp/rec_input"
  nat_wall=$med_wall; nat_cpu=$med_cpu
  row native
  # Every engine here that loads btr's plugin, each measured alone and under
  # btr: BENCH_QEMUS (space-separated paths), else qemu-x86_64 on PATH,
  # /usr/bin/qemu-x86_64 and the newest self-built one (scripts/build-qemu.sh's
  # cache), each file once.
  cache=${BTR_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/btr}
  engines=() seen=" "
  for q in ${BENCH_QEMUS:-$(command -v qemu-x86_64) /usr/bin/qemu-x86_64 \
      $(ls -d "$cache"/qemu-*/bin/qemu-x86_64 2>/dev/null | sort -rV | head -1)}; do
    r=$(realpath "$q" 2>/dev/null) || continue
    [[ $seen == *" $r "* ]] && continue
    seen="$seen$r "
    if BTR_QEMU=$q "$btr" info 2>/dev/null | grep -q '^qemu  yes'; then
      engines+=("$q")
    else
      echo "($q: does not load btr's plugin, skipped)"
    fi
  done
  bench_floor_plugin "$tmp/floor.so" 2>"$tmp/cc.err" || echo "floor plugin: not built: $(head -1 "$tmp/cc.err")"
  for q in "${engines[@]}"; do
    v=$("$q" --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')
    echo "-- QEMU $v: $q"
    measure "qemu$v" "$q" "$gz" -c "$tmp/rec_input"
    row "qemu-x86_64 alone"
    if [ -s "$tmp/floor.so" ]; then
      measure "floor$v" "$q" -plugin "$tmp/floor.so" "$gz" -c "$tmp/rec_input"
      row "qemu + per-TB callback (floor)"
      measure "floor2$v" "$q" -plugin "$tmp/floor.so,count=on" "$gz" -c "$tmp/rec_input"
      row "  + TB-completion counter"
    fi
    measure "record$v" env BTR_QEMU="$q" "$btr" record -q -b qemu -o "$tmp/rec.btr" -- "$gz" -c "$tmp/rec_input"
    rec_wall=$med_wall; rec_cpu=$med_cpu
    row "btr record -b qemu"
    tsize=$(stat -c %s "$tmp/rec.btr" 2>/dev/null || echo 0)
    insns=$("$btr" pt decode --stat "$tmp/rec.btr" 2>/dev/null | awk '$1 == "instructions" { print $2 }')
    # judged on CPU time too: on a loaded machine native wall time stretches
    # (gzip waits for a core) far more than its CPU time
    awk -v s="$tsize" -v i="${insns:-0}" -v w="$rec_wall" -v nw="$nat_wall" -v c="$rec_cpu" \
        -v nc="$nat_cpu" 'BEGIN {
      printf "trace %d bytes, %d instructions: %.4f B/insn\n", s, i, i ? s / i : 0
      printf "goals: record <= 4x native (wall %.2fx: %s; cpu %.2fx: %s), <= 0.2 B/insn (%s)\n",
             w / nw, w / nw <= 4 ? "met" : "NOT met", c / nc, c / nc <= 4 ? "met" : "NOT met",
             i && s / i <= 0.2 ? "met" : "NOT met" }'
  done
  [ ${#engines[@]} -gt 0 ] || echo "no qemu-x86_64 here loads btr's plugin (make qemu)"
fi
echo
echo "load at the end: $(load)"
