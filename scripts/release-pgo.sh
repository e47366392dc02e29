#!/usr/bin/env bash
# release-pgo.sh - btr's release build, optimized with a profile that btr
# records of itself (issue 24, docs/performance.md).  `make release-pgo`;
# never part of `make test` or `make demo`.
#
#   1. configure OUT (a Release build, -DBTR_EMIT_RELOCS=ON so that
#      llvm-bolt can rewrite libbtr.so and btr, RUNPATH $ORIGIN so that a
#      copy of btr loads the libbtr.so beside it) and build btr, libbtr.so
#      and the QEMU plugin;
#   2. a training trace: `btr record -b qemu -- gzip -c` of a generated
#      TRAIN_MB MiB text (bench/bench_lib.sh bench_text);
#   3. record btr itself under `btr record -b qemu` running each training
#      command on it (TRAIN: `pt decode --stat`, `report`, `cov`);
#   4. `btr bolt` of each recording, for libbtr.so and for btr, merged with
#      `btr merge`;
#   5. llvm-bolt-16 on both (-reorder-blocks=ext-tsp -reorder-functions=hfsort
#      -split-functions -split-all-cold ...).
#   With PGO_AFDO=1 the build uses clang-16 with line tables
#   (-gline-tables-only -fdebug-info-for-profiling), and between 3 and 4
#   `btr afdo` of the same recordings (libbtr.so and btr merged into one
#   profile) rebuilds OUT with -DBTR_PROFILE_SAMPLE_USE; the BOLT profile is
#   then recorded again on that build.
#
# Result, each directory a runnable btr (btr, libbtr.so.0, btr-qemu.so):
#   OUT/pgo/base       as built, no profile (gcc: the code of `make release`)
#   OUT/pgo/afdo       PGO_AFDO=1: clang -fprofile-sample-use
#   OUT/pgo/bolt       llvm-bolt-16 of base (or of afdo with PGO_AFDO=1)
#   OUT/pgo/final  ->  bolt
# and the work files in OUT/pgo/work (traces, profiles, llvm-bolt logs).
# bench/pgo_release.sh times the variants on held-out traces.
#
# Usage: scripts/release-pgo.sh [OUT]    (default build-release-pgo)
# Environment: PGO_AFDO=1, TRAIN_MB (default 1), TRAIN (default
# "decode report cov"), JOBS (default 2), CC (default cc; clang-16 with
# PGO_AFDO=1).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/build-release-pgo}
mkdir -p "$out"
out=$(cd "$out" && pwd)
afdo=${PGO_AFDO:-0}
train_mb=${TRAIN_MB:-1}
train=${TRAIN:-decode report cov}
jobs=${JOBS:-2}
pgo=$out/pgo
work=$pgo/work
log() { echo "release-pgo: $*" >&2; }
die() { echo "release-pgo: $*" >&2; exit 1; }
for t in llvm-bolt-16 qemu-x86_64 gzip python3; do
  command -v $t >/dev/null || die "$t missing (scripts/deps.sh installs bolt-16, qemu-user)"
done
cc=${CC:-cc}
dbg=""
if [ "$afdo" = 1 ]; then
  cc=${CC:-clang-16}
  command -v "$cc" >/dev/null || die "$cc missing (scripts/deps.sh installs clang-16)"
  dbg="-gline-tables-only -fdebug-info-for-profiling"
fi
rm -rf "$pgo" "$out/plugin" "$out/btr-qemu.so"
mkdir -p "$work"

# configure OUT and build the CLI, the library and the plugin
build() {   # PROFILE (empty: none)
  cmake -S "$src" -B "$out" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DBTR_WERROR=OFF -DBTR_EMIT_RELOCS=ON \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$dbg" '-DCMAKE_BUILD_RPATH=$ORIGIN' \
    -DBTR_PROFILE_SAMPLE_USE="$1" >"$work/cmake.log" || die "cmake failed (see $work/cmake.log)"
  if [ "$afdo" = 1 ]; then
    # clang-16 does not compile the QEMU plugin (a declaration right after a
    # case label, agents/qemu/qemu_plugin.c): only the library and the CLI
    # here (btr-cli/fast: without its dependency on the plugin), the plugin
    # with cc in OUT/plugin
    cmake --build "$out" -j "$jobs" --target btr_shared >>"$work/cmake.log" 2>&1 &&
      make -C "$out" -j "$jobs" btr-cli/fast >>"$work/cmake.log" 2>&1 ||
      die "build failed (see $work/cmake.log)"
    if [ ! -e "$out/btr-qemu.so" ]; then
      cmake -S "$src" -B "$out/plugin" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DBTR_WERROR=OFF \
        -DCMAKE_C_COMPILER=cc >>"$work/cmake.log" &&
        cmake --build "$out/plugin" -j "$jobs" --target btr-qemu >>"$work/cmake.log" 2>&1 ||
        die "building the QEMU plugin with cc failed (see $work/cmake.log)"
      cp "$out/plugin/btr-qemu.so" "$out/"
    fi
  else
    cmake --build "$out" -j "$jobs" --target btr-cli btr-qemu >>"$work/cmake.log" 2>&1 ||
      die "build failed (see $work/cmake.log)"
  fi
}
# copy the built btr into a variant directory
save() {   # NAME
  local d=$pgo/$1 so
  so=$(basename "$(readlink -f "$out/libbtr.so.0")")
  mkdir -p "$d"
  cp "$out/btr" "$out/btr-qemu.so" "$out/$so" "$d/"
  ln -sf "$so" "$d/libbtr.so.0"
  [ "$(LD_LIBRARY_PATH='' ldd "$d/btr" | awk '$1 == "libbtr.so.0" { print $3 }')" = "$d/libbtr.so.0" ] ||
    die "$d/btr does not load $d/libbtr.so.0 (RUNPATH: $(readelf -d "$d/btr" | grep -i path))"
}
# btr records itself (the copy in variant NAME) running each training command
record_training() {   # NAME
  local d=$pgo/$1 c args
  for c in $train; do
    case $c in
      decode) args="pt decode --stat $work/train.btr" ;;
      report) args="report $work/train.btr" ;;
      cov) args="cov $work/train.btr -o $work/train.drcov" ;;
      *) die "unknown training command '$c' (TRAIN: decode report cov)" ;;
    esac
    rm -f "$work/train.drcov"
    log "recording '$1/btr $args'"
    # shellcheck disable=SC2086
    "$d/btr" record -q -b qemu -o "$work/$1-$c.btr" -- "$d/btr" $args >/dev/null ||
      die "recording btr $args failed"
  done
}
# one profile of each module (libbtr.so, btr) of all training recordings
profiles() {   # NAME CMD EXT (CMD: bolt or afdo)
  local d=$pgo/$1 m c so
  so=$(readlink -f "$d/libbtr.so.0")
  for m in lib exe; do
    local elf=$d/btr files=()
    [ $m = lib ] && elf=$so
    for c in $train; do
      "$d/btr" $2 "$work/$1-$c.btr" --no-progress --elf "$elf" -o "$work/$1-$c-$m.$3" ||
        die "btr $2 of $1-$c.btr failed"
      files+=("$work/$1-$c-$m.$3")
    done
    "$d/btr" merge "${files[@]}" -o "$work/$1-$m.$3" >/dev/null || die "btr merge failed"
  done
}

log "building $out ($cc $dbg)"
build ""
save base
. "$src/bench/bench_lib.sh"
bench_text "$work/train.txt" "$train_mb"
"$pgo/base/btr" record -q -b qemu -o "$work/train.btr" -- gzip -c "$work/train.txt" >/dev/null ||
  die "recording the training trace failed"
log "training trace: gzip -c of $train_mb MiB, $(stat -c %s "$work/train.btr") bytes"
prev=base
record_training base
if [ "$afdo" = 1 ]; then
  profiles base afdo prof
  "$pgo/base/btr" merge "$work/base-lib.prof" "$work/base-exe.prof" -o "$work/btr.prof" >/dev/null ||
    die "btr merge of the sample profiles failed"
  log "sample profile: $(grep -c '^[^ ]' "$work/btr.prof") functions; rebuilding with -fprofile-sample-use"
  build "$work/btr.prof"
  save afdo
  record_training afdo
  prev=afdo
fi
profiles $prev bolt fdata

# llvm-bolt-16 on libbtr.so and btr
bolt_flags=(-reorder-blocks=ext-tsp -reorder-functions=hfsort -split-functions -split-all-cold
  -split-eh -icf=1 -use-gnu-stack -dyno-stats)
mkdir -p "$pgo/bolt"
so=$(basename "$(readlink -f "$pgo/$prev/libbtr.so.0")")
for m in lib exe; do
  in=$pgo/$prev/btr; o=$pgo/bolt/btr
  [ $m = lib ] && { in=$pgo/$prev/$so; o=$pgo/bolt/$so; }
  llvm-bolt-16 "$in" -o "$o" -data "$work/$prev-$m.fdata" "${bolt_flags[@]}" >"$work/bolt-$m.log" 2>&1 ||
    die "llvm-bolt-16 on $in failed (see $work/bolt-$m.log)"
  log "llvm-bolt-16 $(basename "$in"): $(grep -o '[0-9]* out of [0-9]* functions in the binary ([0-9.]*%)' \
    "$work/bolt-$m.log" | head -1) have a profile"
done
cp "$pgo/$prev/btr-qemu.so" "$pgo/bolt/"
ln -sf "$so" "$pgo/bolt/libbtr.so.0"
[ "$(LD_LIBRARY_PATH='' ldd "$pgo/bolt/btr" | awk '$1 == "libbtr.so.0" { print $3 }')" = "$pgo/bolt/libbtr.so.0" ] ||
  die "$pgo/bolt/btr does not load its own libbtr.so.0"
# the optimized btr says what the one it came from says
for c in "pt decode --stat" "report"; do
  # shellcheck disable=SC2086
  [ "$("$pgo/bolt/btr" $c "$work/train.btr" 2>/dev/null | grep -v 'decode time' | md5sum)" = \
    "$("$pgo/$prev/btr" $c "$work/train.btr" 2>/dev/null | grep -v 'decode time' | md5sum)" ] ||
    die "bolt/btr $c differs from $prev/btr"
done
ln -sfn bolt "$pgo/final"
log "done: $pgo/final/btr (variants: $(cd "$pgo" && ls -d base afdo bolt 2>/dev/null | tr '\n' ' '))"
