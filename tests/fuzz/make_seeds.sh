#!/usr/bin/env bash
# make_seeds.sh - (re)makes the seed corpora of the fuzz targets whose
# inputs are made here rather than found by libFuzzer: tests/fuzz/corpus/
# {image,insn,perfdata,ptflow}.  Every file is small (a few KB) and made on
# this machine from scratch (a tiny C program compiled here, byte strings
# written below, perf recording /bin/true, ptgen's walk over its own code);
# nothing comes from ../shared.  The seeds are committed, so ctest's
# fuzz_regress_NAME replays the same inputs everywhere; run this again only
# to change them:  bash tests/fuzz/make_seeds.sh BUILD_DIR
# (BUILD_DIR: a build with libbtr.a, for the ptflow generator.)
set -eu
build=$(realpath "${1:-build}")
src=$(cd "$(dirname "$0")/../.." && pwd)
c=$src/tests/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- image: small ELF files and pieces of them ----
mkdir -p "$c/image"
cat >"$tmp/tiny.c" <<'EOF'
static int sq(int x) { return x * x; }
int table(int i) { switch (i & 3) { case 0: return sq(i); case 1: return i + 7; case 2: return -i; default: return 3; } }
void _start(void) { int s = 0; for (int i = 0; i < 10; i++) s += table(i);
	__asm__ volatile("mov %0, %%edi; mov $60, %%eax; syscall" :: "r"(s & 1) : "rdi", "rax"); for (;;) ; }
EOF
common=(-Os -nostdlib -fno-stack-protector -fcf-protection=none -Wl,-z,max-page-size=0x1000 -Wl,-z,noseparate-code -Wl,--build-id)
gcc "${common[@]}" -static -no-pie -fno-pie -o "$c/image/exec_static" "$tmp/tiny.c"
gcc "${common[@]}" -static-pie -fpie -o "$c/image/pie_static" "$tmp/tiny.c"
gcc "${common[@]}" -g -static -no-pie -fno-pie -o "$tmp/dbg" "$tmp/tiny.c"
# byte 7 (EI_OSABI) odd: the fuzz target also looks up source lines (DWARF)
printf '\x01' | cat <(head -c 7 "$tmp/dbg") - <(tail -c +9 "$tmp/dbg") >"$c/image/exec_debug_lines"
gcc "${common[@]}" -shared -fpic -o "$c/image/shared_lib" "$tmp/tiny.c"
head -c 700 "$c/image/exec_static" >"$c/image/exec_truncated"      # headers only, segments cut
printf 'not an ELF file, added as raw bytes at 0x10000\n' >"$c/image/raw_text"
# section headers pointing past the end of the file
cp "$c/image/exec_static" "$c/image/bad_shoff"
printf '\xff\xff\xff\x7f' | dd of="$c/image/bad_shoff" bs=1 seek=40 conv=notrunc 2>/dev/null

# ---- insn: instruction bytes (each file: up to 16 bytes decoded in all modes,
# then the whole file as BTS records and as a filter expression) ----
mkdir -p "$c/insn"
w() { printf "$2" >"$c/insn/$1"; }
w jcc_short        '\x75\xfe'
w jcc_near         '\x0f\x84\x10\x00\x00\x00'
w call_rel32       '\xe8\x00\x01\x00\x00'
w call_indirect    '\xff\x15\x00\x00\x00\x00'
w jmp_rax          '\xff\xe0'
w ret_imm          '\xc2\x08\x00'
w far_jmp_mem      '\xff\x2c\x25\x00\x10\x00\x00'
w syscall_sysret   '\x0f\x05\x48\x0f\x07'
w prefixes_rep_ret '\xf3\xc3\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00'
w vex_vzeroupper   '\xc5\xf8\x77\xc4\xe2\x7d\x18\x05\x00\x00\x00\x00'
w evex_vmovdqu64   '\x62\xf1\xfe\x48\x6f\x05\x00\x01\x00\x00'
w bnd_jmp          '\xf2\xe9\x00\x00\x00\x00'
w endbr64_jmp      '\xf3\x0f\x1e\xfa\xeb\xfe'
w loop_jrcxz       '\xe2\xfe\xe3\xfc'
w too_long         '\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x66\x90'
w filter_expr      'kind=jcc,call && from=0x401000-0x402000'
# the .text of the tiny program above: real compiler output
objcopy -O binary --only-section=.text "$c/image/exec_static" "$c/insn/text_of_exec_static"

# ---- perfdata: perf record of /bin/true (file, pipe and zstd modes) ----
mkdir -p "$c/perfdata"
if perf record -q -N -e cpu-clock -c 20000 -o "$tmp/p.data" -- /bin/true >/dev/null 2>&1; then
	cp "$tmp/p.data" "$c/perfdata/file_mode"
	head -c 3000 "$tmp/p.data" >"$c/perfdata/file_mode_truncated"
	perf record -q -N -e cpu-clock -c 20000 -o - -- /bin/true >"$c/perfdata/pipe_mode" 2>/dev/null
	perf record -q -N -z -e cpu-clock -c 20000 -o "$c/perfdata/zstd_mode" -- /bin/true >/dev/null 2>&1 ||
		rm -f "$c/perfdata/zstd_mode"
	chmod 644 "$c"/perfdata/*
else
	echo "make_seeds: perf record not permitted here: perfdata seeds left as they are" >&2
fi

# ---- ptflow: ptgen's walk over the target's own image (tests/ptgen.h) ----
mkdir -p "$c/ptflow"
cat >"$tmp/gen.c" <<'EOF'
#include <stdio.h>
#include "ptgen.h"
/* argv: out, bytes, seed, psb_period, first byte (0: none) */
int main(int argc, char **argv)
{
	(void)argc;
	struct ptgen g;
	ptgen_code(&g, 0x400000, 16);  /* the image fuzz_ptflow decodes against */
	ptgen_walk(&g, strtoul(argv[2], 0, 0), strtoull(argv[3], 0, 0), strtoul(argv[4], 0, 0));
	FILE *f = fopen(argv[1], "wb");
	int lead = (int)strtol(argv[5], 0, 0);
	if (lead)
		fputc(lead, f);   /* flags of the fuzz target (data[0]); a 1-byte packet before the PSB */
	fwrite(g.pt, 1, g.pt_size, f);
	fclose(f);
	ptgen_free(&g);
	return 0;
}
EOF
gcc -O1 -I"$src/include" -I"$src/tests" -o "$tmp/gen" "$tmp/gen.c" "$build/libbtr.a" \
	$(pkg-config --libs libzstd libdw libelf zlib) -lZydis -lZycore -lstdc++ -lm -lpthread
"$tmp/gen" "$c/ptflow/walk_plain" 1500 1 4096 0
"$tmp/gen" "$c/ptflow/walk_psb_often" 2500 7 256 0
"$tmp/gen" "$c/ptflow/walk_insn_cb" 1200 3 512 0x04         # TNT byte: insn callback on
"$tmp/gen" "$c/ptflow/walk_errata_filter" 1200 5 512 0x0d   # TIP (no IP): errata cfg, insn cb, parallel
"$tmp/gen" "$c/ptflow/walk_switching" 1500 11 300 0x1c      # TNT byte: switch images at events, parallel
"$tmp/gen" "$tmp/long" 3000 13 1024 0
head -c 1777 "$tmp/long" >"$c/ptflow/walk_cut_mid_packet"
ls -l "$c/image" "$c/insn" "$c/perfdata" "$c/ptflow"
