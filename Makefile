# Top-level entry points.  `make test` and `make demo` do all set-up on a
# fresh Debian machine (missing packages are installed by scripts/deps.sh).
BUILD ?= build
RELEASE ?= build-release
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 10

.PHONY: all deps qemu qemu-if-needed build test demo bench bench-speed release-pgo bench-pgo fuzz asan torture mutants clean install

all: build

deps:
	@scripts/deps.sh

# The qemu backend needs a qemu-x86_64 that loads TCG plugins; Debian 13's
# qemu-user cannot.  Where the system has none, scripts/build-qemu.sh builds
# one from the distribution's QEMU source package (minutes, once: it is
# cached by version under ~/.cache/btr, where btr finds it; docs/record.md).
# `make qemu` or BTR_BUILD_QEMU=1 builds it in any case.
BTR_BUILD_QEMU ?= 0
qemu: deps
	@scripts/build-qemu.sh

# A failed QEMU build does not stop btr's: the other backends still work,
# and `btr info` says why qemu does not.
qemu-if-needed: deps
	@if [ "$(BTR_BUILD_QEMU)" = 1 ]; then scripts/build-qemu.sh >/dev/null; \
	else scripts/build-qemu.sh --if-needed >/dev/null; fi || \
	echo "warning: no plugin-capable qemu-x86_64 could be built; the qemu backend is unusable (btr info)" >&2

build: deps qemu-if-needed
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Oracles (libipt, perf, go, llvm-bolt-16, genhtml, xmllint, dot, chromium,
# python3-jsonschema: the tools btr's output is compared with) are installed
# by scripts/deps.sh, so here a missing one fails its test instead of being
# noted (tests/lib.sh `oracle`, tests/check.h check_oracle_missing);
# BTR_ALLOW_MISSING_ORACLES=1 turns that back into a note.
export BTR_REQUIRE_ORACLES = 1

# cli_alloc_fail samples the allocation points; TORTURE_SHIFT moves the
# sample every day, so successive `make test` runs try every point (the
# exhaustive `make torture` takes ~8x as long).  TEST_TORTURE_STEP doubles
# the sampling strides: the registry's forms grew to over 300 s of the
# suite's 20 minutes; the daily shift still reaches every point.
TORTURE_SHIFT ?= $(shell date -u +%j)
TEST_TORTURE_STEP ?= 2

test: build
	cd $(BUILD) && TORTURE_SHIFT=$(TORTURE_SHIFT) TORTURE_STEP=$(TEST_TORTURE_STEP) ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory fuzz

demo: build
	@scripts/demo.sh $(BUILD)

release: deps qemu-if-needed
	@cmake -S . -B $(RELEASE) -DCMAKE_BUILD_TYPE=Release -DBTR_WERROR=OFF >/dev/null
	@cmake --build $(RELEASE) -j $(JOBS)

# The libraries, headers, CLI, plugin and agent, btr.pc and the docs under
# PREFIX (docs/library.md); a Release build.
PREFIX ?= /usr/local
install: release qemu-if-needed
	cmake --install $(RELEASE) --prefix $(PREFIX)
	@q=$$(if [ "$(BTR_BUILD_QEMU)" = 1 ]; then scripts/build-qemu.sh; else scripts/build-qemu.sh --if-needed; fi) || q=""; \
	if [ -n "$$q" ]; then install -D -m 755 "$$q" $(PREFIX)/lib/btr/qemu-x86_64 && \
	echo "installed $$q as $(PREFIX)/lib/btr/qemu-x86_64"; fi

bench: release
	@scripts/bench.sh $(RELEASE)

# issue 24's table from one run: btr vs libxdc (kafl-qemu hardware trace,
# gzip, python3), every analysis against decode, record against native,
# qemu alone and the per-TB floor; medians of BENCH_RUNS runs, peak RSS
BENCH_RUNS ?= 3
bench-speed: release
	@bash bench/speed_table.sh $(RELEASE) $(BENCH_RUNS)

# Profile-guided release (docs/performance.md): btr records itself decoding
# and analysing a training trace, `btr bolt` turns that into BOLT profiles of
# libbtr.so and btr, llvm-bolt-16 rewrites both; the result is
# $(RELEASE_PGO)/pgo/final/btr.  PGO_AFDO=1: clang-16 with `btr afdo`'s
# sample profile first ($(RELEASE_PGO)-afdo).  Optional, never part of test.
RELEASE_PGO ?= build-release-pgo
PGO_AFDO ?= 0
PGO_OUT = $(if $(filter 1,$(PGO_AFDO)),$(RELEASE_PGO)-afdo,$(RELEASE_PGO))
release-pgo: deps
	@PGO_AFDO=$(PGO_AFDO) JOBS=$(JOBS) scripts/release-pgo.sh $(PGO_OUT)

# the variants side by side on held-out traces (decode, report, cov)
PGO_RUNS ?= 5
bench-pgo: release release-pgo
	@RUNS=$(PGO_RUNS) bash bench/pgo_release.sh

# libFuzzer targets, each run for FUZZ_SECONDS
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DBTR_FUZZ=ON -DBTR_WERROR=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	@FUZZ_JOBS=$(JOBS) scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The whole suite under AddressSanitizer + UBSan, LeakSanitizer on (its
# default on x86-64 Linux, made explicit; test_sanitizers proves it works).
# Part of .ci/run.  ASan runs are 2-3x slower, and CI (make test, then this)
# must stay under 45 minutes, so here the repeated work is sampled less:
# ASAN_TORTURE_STEP multiplies cli_alloc_fail's sampling strides;
# ASAN_RACE_REPS runs each of cli_race's cases once (make test runs them 5
# times: repetition finds races, one run under ASan finds memory errors);
# ASAN_PROCS_N short processes in cli_procs instead of 60;
# ASAN_SAMPLE_STEP: the long case lists (hostile files x commands, benign
# programs, conformance streams, writers, -j readers) run one case in K,
# which one moving with TORTURE_SHIFT (tests/lib.sh `sampled`).
ASAN_TORTURE_STEP ?= 16
ASAN_SAMPLE_STEP ?= 3
ASAN_RACE_REPS ?= 1
ASAN_PROCS_N ?= 20
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBTR_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:$(ASAN_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  TORTURE_STEP=$(ASAN_TORTURE_STEP) TORTURE_SHIFT=$(TORTURE_SHIFT) BTR_RACE_REPS=$(ASAN_RACE_REPS) BTR_PROCS_N=$(ASAN_PROCS_N) BTR_SAMPLE_STEP=$(ASAN_SAMPLE_STEP) ctest --output-on-failure -j $(JOBS)

# Allocation failure at EVERY allocation of every command of
# tests/cli_alloc_fail.sh (ctest samples them; this takes minutes).
torture: build
	TORTURE_FULL=1 bash tests/cli_alloc_fail.sh $(BUILD)/btr $(BUILD) ../shared

# The mutation check (docs/reliability.md): each hand-made bug of
# tests/mutants/list applied alone to a scratch copy of the tree (never this
# one), rebuilt incrementally, its test family run; prints the score (exit 1
# below 90%).  A killed mutant stops at its first failing check; MUTANTS=REGEX
# tries only those ids; MUTANT_JOBS=2 runs two mutants at once (two scratch
# trees, each built with JOBS/2 make jobs).
MUTANTS ?=
MUTANT_JOBS ?= 1
mutants: deps
	@python3 tests/mutants/run.py --jobs $(MUTANT_JOBS) --build-jobs $$(( $(JOBS) / $(MUTANT_JOBS) > 0 ? $(JOBS) / $(MUTANT_JOBS) : 1 )) $(MUTANTS)

clean:
	rm -rf $(BUILD) $(RELEASE) $(FUZZ_BUILD) build-asan build-mutants
