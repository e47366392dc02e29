# bench_lib.sh - helpers the benchmark scripts share (sourced, not run).
#   bench_text FILE MB        deterministic word text of MB MiB (gzip input)
#   bench_pyprog FILE         a small python3 program (json of a dict)
#   bench_build_xdc BUILD     builds BUILD/xdc/xdc_compare (libxdc beside btr);
#                             returns 1 with a SKIP line when a peer is missing
#   bench_floor_plugin OUT    builds the per-TB-callback floor plugin into OUT
#   bench_time OUT CMD...     runs CMD (stdout to OUT.out, stderr to OUT.err) and
#                             writes "wall user+sys peak_rss_KiB status" to OUT
#   bench_median N...         the median of numbers
bench_here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

bench_text() {
  python3 - "$1" "$2" <<'PY'
import sys, random
r = random.Random(42)
words = [''.join(r.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(r.randint(2, 9))) for _ in range(5000)]
n = int(float(sys.argv[2]) * (1 << 20))
with open(sys.argv[1], 'w') as f:
    out = 0
    while out < n:
        line = ' '.join(r.choice(words) for _ in range(12)) + ' %d\n' % r.randint(0, 10**6)
        f.write(line); out += len(line)
PY
}

bench_pyprog() {
  cat > "$1" <<'PY'
import json
d = {str(i): [i, i * i, str(i)] for i in range(3000)}
print(len(json.dumps(d, sort_keys=True)))
PY
}

bench_build_xdc() {
  local build=$1 xdc_src=$bench_here/../shared/peers/libxdc out=$1/xdc cc=${CC:-gcc} f o libs
  if [ ! -f "$xdc_src/libxdc.h" ]; then
    echo "SKIP: $xdc_src not present"; return 1
  fi
  if [ ! -f /usr/include/capstone/capstone.h ]; then
    echo "SKIP: libcapstone-dev not installed (apt-get install libcapstone-dev)"; return 1
  fi
  mkdir -p "$out/obj"
  # libxdc as its own Makefile builds it (-Ofast, LTO), objects in our build dir.
  for f in "$xdc_src"/src/*.c; do
    o=$out/obj/$(basename "$f" .c).o
    [ "$o" -nt "$f" ] || $cc -c -o "$o" "$f" -Ofast -fPIC -fvisibility=hidden -flto -finline-functions \
      -I"$xdc_src" -w || return 1
  done
  libs="$(pkg-config --libs libzstd libdw libelf) -lZydis -lZycore -lpthread -lstdc++ -lz -lm"
  $cc -O2 -flto -o "$out/xdc_compare" "$bench_here/bench/xdc_compare.c" -I"$bench_here/include" \
    -I"$xdc_src" "$out"/obj/*.o "$build/libbtr.a" $libs -l:libcapstone.so.4 -lm
}

bench_floor_plugin() {
  local inc
  inc=$(dirname "$(find "$bench_here/agents" "$bench_here/lib" -name qemu_plugin_api.h 2>/dev/null | head -1)")
  ${CC:-cc} -O2 -shared -fPIC -I"$inc" -o "$1" "$bench_here/bench/floor_plugin.c"
}

bench_time() {
  local out=$1 t0 t1 st
  shift
  t0=$(date +%s.%N)
  /usr/bin/time -f '%U %S %M' -o "$out.t" "$@" >"$out.out" 2>"$out.err"
  st=$?
  t1=$(date +%s.%N)
  awk -v t0="$t0" -v t1="$t1" -v st="$st" '{ printf "%.4f %.4f %d %d\n", t1 - t0, $1 + $2, $3, st }' \
    "$out.t" | tail -1 >"$out"
}

bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2];
    else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
