#!/usr/bin/env bash
# pgo_release.sh - btr with and without its profile-guided build
# (scripts/release-pgo.sh, `make bench-pgo`, docs/performance.md), side by
# side on held-out traces: inputs unlike the training trace (gzip -c of a
# generated 1 MiB word text):
#   gzip     `btr record -b qemu -- gzip -c` of HELD_MB MiB of generated
#            CSV-like numbers (another alphabet, other match lengths)
#   python3  `btr record -b qemu -- python3` of bench_pyprog (json of a dict)
# For each trace: `btr pt decode --stat` (CPU ns per branch), `btr report`
# and `btr cov` (CPU seconds).  CPU time is perf stat's task-clock (a
# software event: no PMU needed; the machines are shared and wall time
# follows their load); RUNS rounds (default 5), the variants interleaved in
# each round; the table gives medians and each variant's gain over the first
# column.  The variants' outputs are compared first (they must agree).
#
# Usage: bench/pgo_release.sh [NAME=DIR]...   (DIR holds a btr; default:
#   release=build-release, then every DIR/pgo/{base,afdo,bolt} of
#   build-release-pgo and build-release-pgo-afdo that exists)
# Environment: RUNS (5), HELD_MB (4), WORK (a temporary directory).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
. "$here/bench_lib.sh"
runs=${RUNS:-5}
held_mb=${HELD_MB:-4}
command -v perf >/dev/null || { echo "pgo_release: perf missing (linux-perf)" >&2; exit 2; }
names=(); dirs=()
if [ $# -gt 0 ]; then
  for a in "$@"; do names+=("${a%%=*}"); dirs+=("$(cd "${a#*=}" && pwd)"); done
else
  [ -x "$src/build-release/btr" ] && { names+=(release); dirs+=("$src/build-release"); }
  for b in build-release-pgo build-release-pgo-afdo; do
    for v in base afdo bolt; do
      [ -x "$src/$b/pgo/$v/btr" ] || continue
      n=${b#build-release-}; n=${n/pgo-afdo/clang}; n=${n/pgo/gcc}
      names+=("$n-$v"); dirs+=("$src/$b/pgo/$v")
    done
  done
fi
[ ${#dirs[@]} -ge 2 ] || { echo "pgo_release: need two variants (make release release-pgo)" >&2; exit 2; }
tmp=${WORK:-$(mktemp -d)}
[ -n "${WORK:-}" ] || trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
btr0=${dirs[0]}/btr

# ---- held-out traces, recorded by the first variant
python3 - "$tmp/held.csv" "$held_mb" <<'PY'
import sys, random
r = random.Random(7)
n = int(float(sys.argv[2]) * (1 << 20))
with open(sys.argv[1], 'w') as f:
    out = 0
    while out < n:
        line = '%d,%.3f,%s,%d\n' % (r.randint(0, 99999), r.gauss(100, 15), r.choice('ABCDEFGH') * r.randint(1, 4),
                                    r.getrandbits(24))
        f.write(line); out += len(line)
PY
bench_pyprog "$tmp/prog.py"
[ -s "$tmp/gzip.btr" ] || "$btr0" record -q -b qemu -o "$tmp/gzip.btr" -- gzip -c "$tmp/held.csv" >/dev/null
[ -s "$tmp/python3.btr" ] || "$btr0" record -q -b qemu -o "$tmp/python3.btr" -- python3 "$tmp/prog.py" >/dev/null
traces=(gzip python3)

cmdline() {   # CMD TRACE -> the btr arguments
  case $1 in
    decode) echo "pt decode --stat $tmp/$2.btr" ;;
    report) echo "report $tmp/$2.btr" ;;
    cov) echo "cov $tmp/$2.btr -o $tmp/$2.drcov" ;;
  esac
}
cmds=(decode report cov)
cpu_time() {   # BTR ARGS... -> CPU seconds
  perf stat -x, -e task-clock -o "$tmp/t.out" -- "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
  awk -F, '$3 == "task-clock" { printf "%.4f\n", $1 / 1000 }' "$tmp/t.out"
}

# ---- the variants agree
for t in "${traces[@]}"; do
  for c in decode report; do
    ref=""
    for i in "${!dirs[@]}"; do
      # shellcheck disable=SC2046
      h=$("${dirs[$i]}/btr" $(cmdline $c $t) 2>&1 | grep -v 'decode time' | md5sum)
      [ -z "$ref" ] && ref=$h
      [ "$h" = "$ref" ] || { echo "pgo_release: ${names[$i]}: btr $c of $t differs from ${names[0]}" >&2; exit 1; }
    done
  done
done

# ---- timing
declare -A br
for t in "${traces[@]}"; do
  br[$t]=$("$btr0" pt decode --stat "$tmp/$t.btr" | awk '$1 == "branches" { print $2 }')
done
: >"$tmp/times"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for _ in $(seq "$runs"); do
  for t in "${traces[@]}"; do
    for c in "${cmds[@]}"; do
      for i in "${!dirs[@]}"; do
        # shellcheck disable=SC2046
        echo "$t $c $i $(cpu_time "${dirs[$i]}/btr" $(cmdline $c $t))" >>"$tmp/times"
      done
    done
  done
done

echo "btr with and without profile-guided optimization: median CPU time of $runs runs (perf stat -e task-clock)"
for i in "${!dirs[@]}"; do printf '  %-12s %s\n' "${names[$i]}" "${dirs[$i]}"; done
for t in "${traces[@]}"; do
  echo "  $t: $(stat -c %s "$tmp/$t.btr") bytes, ${br[$t]} branches"
done
printf '%-8s %-7s %-12s' trace command unit
for n in "${names[@]}"; do printf ' %18s' "$n"; done
echo
for t in "${traces[@]}"; do
  for c in "${cmds[@]}"; do
    unit="cpu s"; [ $c = decode ] && unit="ns/branch"
    printf '%-8s %-7s %-12s' $t $c "$unit"
    base=""
    for i in "${!dirs[@]}"; do
      # shellcheck disable=SC2046
      m=$(bench_median $(awk -v t=$t -v c=$c -v i=$i '$1 == t && $2 == c && $3 == i { print $4 }' "$tmp/times"))
      [ -z "$base" ] && base=$m
      awk -v m="$m" -v b="$base" -v u="$unit" -v n="${br[$t]}" -v first=$((i == 0)) 'BEGIN {
        v = u == "cpu s" ? sprintf("%.3f", m) : sprintf("%.2f", m * 1e9 / n)
        if (first) printf " %18s", v; else printf " %10s (%+5.1f%%)", v, (b - m) * 100 / b }'
    done
    echo
  done
done
echo "gain: (first column - variant) / first column, CPU time; load average $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after; $(nproc) cores"
