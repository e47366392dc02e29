#!/usr/bin/env bash
# bench/pgo.sh - profile-guided optimization with btr's profiles, measured
# (issue: PGO where perf cannot help; docs/pgo.md).
#
# For each subject, built with clang-16 from Debian:
#   base    -O2 (with -gline-tables-only -fdebug-info-for-profiling and
#           --emit-relocs, which change no code)
#   instr   -O2 with instrumented PGO (-fprofile-instr-generate, a training
#           run, llvm-profdata-16 merge, -fprofile-instr-use)
#   afdo    -O2 -fprofile-sample-use with `btr afdo` of `btr record -b qemu`
#           of base on the training input (-fprofile-sample-accurate: the
#           profile is exact, code it does not name did not run)
#   bolt    llvm-bolt-16 applied to base with `btr bolt` of the same trace
# and timed on a held-apart input (never the training input): ROUNDS rounds,
# the variants interleaved in each, CPU time (user+sys) of each run; the
# table gives the median and the gain over base.  Timing is CPU time
# (perf stat's task-clock, a software event: no PMU needed) because the
# machines are shared (wall time follows the load).
#
# Subjects: sqlite (the amalgamation from the npm registry - a SQL parser
# and bytecode VM - driven by bench/pgo/sqlite_driver.c; training
# bench/pgo/train.sql, held-apart bench/pgo/held.sql) and btr itself (its
# CLI and library as one executable; training: `btr report` of a trace of
# gzip, held-apart: `btr report` of a trace of python3).
#
# Usage: bench/pgo.sh [BTR] [WORKDIR]   (BTR: the btr that records; default
#        build/btr; WORKDIR: default /tmp/btr-pgo; SUBJECTS="sqlite btr",
#        ROUNDS=7).  Never part of the tests.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
btr=$(readlink -f "${1:-$src/build/btr}")
work=${2:-/tmp/btr-pgo}
rounds=${ROUNDS:-7}
subjects=${SUBJECTS:-"sqlite btr"}
mkdir -p "$work"
cd "$work"
for t in clang-16 llvm-profdata-16 llvm-bolt-16 perf; do
	command -v $t >/dev/null || { echo "pgo: $t missing (scripts/deps.sh installs clang-16, llvm-16, bolt-16, linux-perf)" >&2; exit 2; }
done
dbg="-gline-tables-only -fdebug-info-for-profiling"
log() { echo "pgo: $*" >&2; }

# cpu_time CMD...: CPU seconds of one run (perf's task-clock, which counts
# to the microsecond; output discarded)
cpu_time() {
	perf stat -x, -e task-clock -o t.out -- "$@" >/dev/null 2>&1 || { log "failed: $*"; return 1; }
	awk -F, '$3 == "task-clock" {printf "%.4f\n", $1 / 1000}' t.out
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# ---- subject: sqlite ----
sqlite_fetch() {
	[ -r sqlite/sqlite3.c ] && return 0
	log "fetching the SQLite amalgamation (npm: better-sqlite3@13.2.0)"
	npm pack better-sqlite3@13.2.0 >/dev/null 2>&1
	mkdir -p sqlite
	tar xzf better-sqlite3-13.2.0.tgz -C sqlite --strip-components=3 package/deps/sqlite3/sqlite3.c package/deps/sqlite3/sqlite3.h
}
sqlite_build() {   # OUT FLAGS...
	local out=$1
	shift
	clang-16 "$@" -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION -Isqlite "$here/pgo/sqlite_driver.c" \
		sqlite/sqlite3.c -o "$out" -Wl,--emit-relocs -lm
}
sqlite_train() { echo "$1" "$here/pgo/train.sql"; }
sqlite_held() { echo "$1" "$here/pgo/held.sql"; }

# ---- subject: btr ----
btr_fetch() {
	[ -s gzip.btr ] && [ -s python.btr ] && return 0
	log "recording the training and held-apart traces"
	head -c 3000000 /usr/bin/bash /usr/bin/gdb 2>/dev/null | head -c 3000000 >in.bin
	"$btr" record -q -b qemu -o gzip.btr -- gzip -c in.bin >/dev/null
	"$btr" record -q -b qemu -o python.btr -- python3 -c 'import json; print(len(json.dumps([{"k": i, "v": str(i) * 3} for i in range(60000)])))' >/dev/null
}
btr_build() {   # OUT FLAGS...
	local out=$1
	shift
	local objs=() f o
	mkdir -p "obj-$out"
	for f in "$src"/lib/*.c "$src"/lib/capture/*.c "$src"/lib/analysis/*.c "$src"/tools/btr/*.c; do
		o="obj-$out/$(echo "${f#$src/}" | tr / _).o"
		objs+=("$o")
		echo "$f $o"
	done | xargs -P "$(nproc)" -n 2 sh -c 'clang-16 "$@" -w -D_GNU_SOURCE -I"'"$src"'/include" -I"'"$src"'/lib" -c "$0" -o "$1"' "$@" 2>/dev/null || true
	# the agents' files compile to nothing in the library (and may be absent)
	clang-16 "$@" "${objs[@]}" -o "$out" -Wl,--emit-relocs $(pkg-config --libs libzstd libdw libelf zlib) -lZydis \
		-lpthread -lstdc++ -lm
}
btr_train() { echo "$1" report "$work/gzip.btr"; }
btr_held() { echo "$1" report "$work/python.btr"; }

printf '%-8s %-7s %10s %8s  %s\n' subject variant "cpu s" gain note
for s in $subjects; do
	${s}_fetch
	log "$s: building base"
	${s}_build "$s-base" -O2 $dbg
	log "$s: instrumented PGO"
	${s}_build "$s-gen" -O2 -fprofile-instr-generate
	LLVM_PROFILE_FILE="$work/$s-%p.profraw" $(${s}_train "./$s-gen") >/dev/null
	llvm-profdata-16 merge -o "$s.profdata" "$s"-*.profraw
	rm -f "$s"-*.profraw
	${s}_build "$s-instr" -O2 -fprofile-instr-use="$s.profdata"
	log "$s: btr record of base on the training input"
	"$btr" record -q -b qemu -o "$s-train.btr" -- $(${s}_train "./$s-base") >/dev/null
	"$btr" afdo "$s-train.btr" -o "$s.prof"
	${s}_build "$s-afdo" -O2 $dbg -fprofile-sample-use="$s.prof" -fprofile-sample-accurate
	"$btr" bolt "$s-train.btr" -o "$s.fdata"
	llvm-bolt-16 "$s-base" -o "$s-bolt" -data "$s.fdata" -reorder-blocks=ext-tsp -reorder-functions=hfsort \
		-split-functions -split-all-cold -dyno-stats >"$s-bolt.log" 2>&1
	prof=$(grep -o '[0-9]* out of [0-9]* functions in the binary ([0-9.]*%) have non-empty execution profile' \
		"$s-bolt.log" | head -1)
	# the variants agree on the held-apart input's output
	ref=$($(${s}_held "./$s-base") 2>&1 | md5sum)
	for v in instr afdo bolt; do
		[ "$($(${s}_held "./$s-$v") 2>&1 | md5sum)" = "$ref" ] || { log "$s-$v: output differs from base"; exit 1; }
	done
	: >"$s.times"
	for r in $(seq "$rounds"); do
		for v in base instr afdo bolt; do
			echo "$v $(cpu_time $(${s}_held "./$s-$v"))" >>"$s.times"
		done
	done
	base=$(awk '$1=="base" {print $2}' "$s.times" | median)
	for v in base instr afdo bolt; do
		m=$(awk -v v=$v '$1==v {print $2}' "$s.times" | median)
		note=""
		[ $v = bolt ] && note="llvm-bolt-16: $prof"
		[ $v = afdo ] && note="profile: $(grep -c '^[^ ]' "$s.prof") functions, trace $(du -h "$s-train.btr" | cut -f1)"
		printf '%-8s %-7s %10s %7.1f%%  %s\n' "$s" $v "$m" "$(echo "($base - $m) * 100 / $base" | bc -l)" "$note"
	done
	ig=$(awk -v b="$base" '$1=="instr" {print $2}' "$s.times" | median)
	ag=$(awk '$1=="afdo" {print $2}' "$s.times" | median)
	printf '%-8s afdo gain / instr gain = %s\n' "$s" \
		"$(echo "if ($base - $ig > 0) ($base - $ag) / ($base - $ig) else 0" | bc -l | awk '{printf "%.2f", $1}')"
done
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds, median CPU seconds (user+sys)"
