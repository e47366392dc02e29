#!/bin/sh
# qemu_count.sh - qemu-x86_64 with the independent instruction counter
# (tests/tools/insn_count.c) loaded beside whatever plugin the caller gives,
# so that `btr record` and the counter see the same QEMU run:
#
#   BTR_COUNT_PLUGIN=build/btr-insn-count.so BTR_COUNT_OUT=counts.txt \
#   BTR_QEMU=tests/tools/qemu_count.sh btr record -o t.btr -- PROG
#
# btr's plugin follows a guest execve by starting this same command again
# (its qemu= argument), so every program of a process tree is counted.
# BTR_COUNT_QEMU names the real QEMU (default: qemu-x86_64 on PATH).
: "${BTR_COUNT_PLUGIN:?BTR_COUNT_PLUGIN: path of btr-insn-count.so}"
: "${BTR_COUNT_OUT:?BTR_COUNT_OUT: the file to append counts to}"
# QEMU calls the plugins' system-call callbacks last-loaded first, and
# btr's plugin does not return from a guest execve it follows: the counter
# goes after btr's plugin so that it writes its counts before that execve.
q=${BTR_COUNT_QEMU:-qemu-x86_64}
if [ "$1" = -plugin ]; then
	first=$2
	shift 2
	exec "$q" -plugin "$first" -plugin "$BTR_COUNT_PLUGIN,out=$BTR_COUNT_OUT" "$@"
fi
exec "$q" -plugin "$BTR_COUNT_PLUGIN,out=$BTR_COUNT_OUT" "$@"
