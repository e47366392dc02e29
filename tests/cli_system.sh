#!/usr/bin/env bash
# cli_system.sh - `btr record --system` (docs/record.md, "Whole-system
# recording"): boots the distribution's kernel once under
# qemu-system-x86_64 with a generated initramfs whose program is a tiny
# static no-libc binary (prog_nolibc_step), and checks the whole-system
# trace against an independent counter in the same QEMU run
# (tests/tools/sys_count.c: one callback per instruction, no btr code):
# the instructions btr decodes in the kernel (upper half) are within 1% of
# the counter's (not equal yet: docs/record.md), report reads the trace
# and finds user and kernel branches.
# Skips without qemu-system-x86_64 of plugin API v4 (QEMU 10: it exports
# qemu_plugin_read_register), a kernel with its System.map in /boot, or busybox.
. "$(dirname "$0")/lib.sh"
btr=$1
bin=$2
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Usage and bad input, without a VM.
"$btr" record --vm-kernel x -- true 2>"$tmp/e1"
check "--vm-kernel without --system: usage error (exit 2)" [ $? -eq 2 ]
"$btr" record --system -b qemu -- true 2>"$tmp/e2"
check "--system with -b: usage error (exit 2)" [ $? -eq 2 ]
"$btr" record --system --vm-kernel "$tmp/none" -o "$tmp/x.btr" -- true 2>"$tmp/e3"
check "--system with a missing kernel: exit 3" [ $? -eq 3 ]
check "... naming it" grep -q "$tmp/none" "$tmp/e3"
check "... and no trace left" [ ! -e "$tmp/x.btr" ]

q=$(command -v qemu-system-x86_64) || skip "qemu-system-x86_64 absent (apt-get install qemu-system-x86/bookworm-backports)"
nm -D "$q" 2>/dev/null | grep -q qemu_plugin_read_register ||
	skip "$q has no plugin API v2+ (qemu_plugin_read_register): QEMU 10 is needed"
ls /boot/vmlinuz-* >/dev/null 2>&1 || skip "no kernel in /boot (apt-get install linux-image-amd64)"
ls /boot/System.map-* >/dev/null 2>&1 || skip "no System.map in /boot"
command -v busybox >/dev/null || skip "busybox absent (apt-get install busybox-static)"
prog=$bin/prog_nolibc_step
[ -x "$prog" ] || skip "$prog not built"
[ -f "$bin/btr-sys-count.so" ] || skip "btr-sys-count.so not built"

# The counter in the same run: a wrapper adds its -plugin to the recording
# boot (the one with btr's -plugin; not to the boot that reads the
# kernel's symbols first).
cat >"$tmp/qemu" <<EOS
#!/bin/sh
case " \$* " in *" -plugin "*) exec "$q" "\$@" -plugin "$bin/btr-sys-count.so,out=$tmp/count" ;; esac
exec "$q" "\$@"
EOS
chmod +x "$tmp/qemu"

# (--append: the kernel's crypto self-tests and its W+X page-table scan
# are 70% of the boot's 1.4 G instructions; without them the boot, its
# decode and the sanitizer build's decode are 2.5 times faster)
start=$(date +%s.%N)
BTR_QEMU_SYSTEM=$tmp/qemu "$btr" record --system --append "cryptomgr.notests rodata=off" -o "$tmp/all.btr" -- "$prog" >"$tmp/console" 2>"$tmp/err" </dev/null
rc=$?
end=$(date +%s.%N)
check "record --system exits 0 ($(tail -1 "$tmp/err"))" [ $rc -eq 0 ]
[ $rc -eq 0 ] || finish cli_system
note "boot to power-off with both plugins: $(echo "$end - $start" | bc) s"
check "the guest program ran (its output on the console)" grep -q "nolibc_step ok" "$tmp/console"
# Debian's System.map is a placeholder: the kernel's /proc/kallsyms, read
# in a first boot, is kept in the cache as a System.map (sorted), and
# the trace names kernel functions with it
# (btr's cache, as btr finds it: the boot is made once per kernel, so the
# sanitizer run after make test reads what make test's run kept)
cache=${BTR_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/btr}
ksyms=$(ls -t "$cache"/kallsyms-vmlinuz-* 2>/dev/null | head -1)
if grep -q ' [Tt] ' /boot/System.map-* 2>/dev/null; then
	note "the System.map in /boot is a real one: the kallsyms boot is not used"
else
	check "the kernel's symbols were read and cached ($ksyms)" [ -n "$ksyms" ]
	check "... more than 10,000 text symbols" [ "$(grep -c ' [Tt] ' "$ksyms" 2>/dev/null)" -gt 10000 ]
	check "... sorted by address" env LC_ALL=C sort -c -s -k1,1 "$ksyms"
	check "... with the exception entry points" grep -q ' asm_exc_page_fault$' "$ksyms"
fi
check "counter wrote its counts" grep -q '^kernel [1-9]' "$tmp/count"

# btr's decoded instructions, and those in the upper half (the kernel's)
"$btr" pt decode --stat --format json "$tmp/all.btr" >"$tmp/stat" 2>"$tmp/decode.err"
rc=$?; check "pt decode --stat exits 0 ($(head -1 "$tmp/decode.err"))" [ $rc -eq 0 ]
read -r bt bk gaps < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["instructions"], d["instructions_upper_half"], d["gaps"])' "$tmp/stat")
bu=$((bt - bk))
ck=$(awk '$1 == "kernel" { print $2 }' "$tmp/count")
cu=$(awk '$1 == "user" { print $2 }' "$tmp/count")
note "instructions: btr kernel $bk user $bu; counter kernel $ck user $cu; $gaps gaps; trace $(stat -c %s "$tmp/all.btr") bytes"
# Known wrong (docs/record.md): the counts are not equal yet, and user
# code is mostly lost in gaps (instruction fetch faults of demand paging).
# Checked: the kernel's count within 1% of the counter's.
[ -n "$ksyms" ] && check "fewer than 200 gaps with the kernel's symbols (got $gaps; about 1,800 without)" [ "$gaps" -lt 200 ]
check "kernel instructions within 1% of the counter's (btr $bk, counter $ck)" \
	python3 -c 'import sys; b, c = int(sys.argv[1]), int(sys.argv[2]); sys.exit(not (c > 0 and abs(b - c) * 100 < c))' "$bk" "$ck"
"$btr" report "$tmp/all.btr" >"$tmp/report" 2>&1
check "report reads the trace" [ $? -eq 0 ]
check "report: backend qemu-system" grep -q '^backend: *qemu-system' "$tmp/report"
check "report: kernel functions named (schedule, do_syscall_64 ...)" \
	grep -Eq '^ +[0-9]+ +[0-9.]+% +0xffffffff[0-9a-f]+ [a-z_]' "$tmp/report"
# The guest program's own flow: every branch of it that a user-mode
# recording of the same program (-b qemu, another plugin) holds is in the
# whole-system trace as often (the system trace has more: busybox is
# static at the same addresses; a syscall's target is the kernel's entry
# there, 0 in user mode)
if "$btr" record -q -b qemu -o "$tmp/user.btr" -- "$prog" >/dev/null 2>&1; then
	# the program's executable segment
	read -r lo hi < <(readelf -lW "$prog" | python3 -c 'import sys
for l in sys.stdin:
    w = l.split()
    if w[:1] == ["LOAD"] and w[6:7] == ["R"] and w[7:8] == ["E"]:
        print(w[2], hex(int(w[2], 16) + int(w[5], 16)))')
	edges() {  # FILE: "from-to-kind count" of the user branches from [lo, hi), syscalls and events aside
		"$btr" pt decode "$1" --branches --filter user 2>/dev/null | python3 -c '
import sys, collections
lo, hi = int(sys.argv[1], 16), int(sys.argv[2], 16)
c = collections.Counter()
for l in sys.stdin:
    w = l.split()
    if len(w) < 4 or w[1] != "->" or w[3] in ("syscall", "async"):
        continue
    if lo <= int(w[0], 16) < hi:
        c["-".join(w[:1] + w[2:])] += 1
for k in sorted(c):
    print(k, c[k])' "$lo" "$hi"
	}
	edges "$tmp/user.btr" >"$tmp/u.cnt"
	edges "$tmp/all.btr" >"$tmp/s.cnt"
	nu=$(wc -l <"$tmp/u.cnt")
	short=$(join -a1 -e0 -o 0,1.2,2.2 "$tmp/u.cnt" "$tmp/s.cnt" | awk '$3 < $2' | head -3 | tr '\n' ' ')
	check "the guest program's flow: its $nu edges of the user-mode recording, each as often in the system trace ($short)" \
		[ "$nu" -gt 20 -a -z "$short" ]
else
	bad "btr record -b qemu $prog failed"
fi
check "report: user (CPL 3) and kernel branches" \
	grep -Eq 'privilege: cpl_neq_0 \(user\) [1-9][0-9]*, cpl_eq_0 \(kernel\) [1-9]' "$tmp/report"
finish cli_system
