#!/usr/bin/env bash
# cli_multiuser.sh - another local user against root's btr (docs/reliability.md,
# "Threat model"): a user is created for the test and removed after.
#  - names planted where a writer might put its temporary file (symlinks to a
#    root-only file, FIFOs, the attacker's 0666 files) at every name the old
#    predictable OUT.tmp.PID could take: the test runs in its own PID namespace,
#    so the PIDs are small and all of them are planted; every writer: record
#    -b qemu and -b step, --ground-truth, import, flame -o, report --html
#  - -o naming another user's dangling symlink in a sticky directory
#    (fs.protected_symlinks on for the test: the kernel must decide)
#  - /tmp/perf-PID.map planted as FIFOs and as symlinks to /proc/kallsyms
#  - traces whose module path is a FIFO or /dev/zero: readers finish, warning
#  - DWARF naming a root-only file (#line): annotate --source and report
#    --html do not print it unless --source-root names its directory
#  - traces and ground-truth logs are 0600
# It runs in a private mount namespace with its own /tmp, so nothing planted
# reaches other programs.  Skipped (with the reason) unless run as root.
# Args: $1 btr binary, $2 build dir, $3 shared dir.
set -u
if [ "${BTR_MU_NS:-}" != 1 ] && [ "$(id -u)" = 0 ] && unshare -m -p -f --mount-proc true 2>/dev/null; then
	BTR_MU_NS=1 exec unshare -m -p -f --mount-proc bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
btr=$(realpath "$1"); build=$(realpath "$2"); shared=$(realpath -m "${3:-/nonexistent}")
[ "$(id -u)" = 0 ] || skip "not root: this test creates a user to attack root's btr with"
[ "${BTR_MU_NS:-}" = 1 ] || skip "unshare -m -p failed: the planted files need a private /tmp and PID numbers"
mount -t tmpfs -o mode=1777 btr-multiuser /tmp || skip "cannot mount a private /tmp"
command -v useradd >/dev/null && command -v setpriv >/dev/null || skip "useradd or setpriv absent"
need_qemu

u="btrmu$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
useradd -m -s /bin/sh "$u" >/dev/null 2>&1 || skip "useradd $u failed"
ps_old=$(cat /proc/sys/fs/protected_symlinks 2>/dev/null)
cleanup() {
	userdel -r "$u" >/dev/null 2>&1
	[ -n "$ps_old" ] && echo "$ps_old" >/proc/sys/fs/protected_symlinks 2>/dev/null
}
trap cleanup EXIT
ug=$(id -g "$u")
uid=$(id -u "$u")
as_u() { setpriv --reuid="$uid" --regid="$ug" --clear-groups -- "$@"; }
T=${BTR_MU_TIMEOUT:-120}   # a hang guard, not a measurement: every run here takes a few seconds

tmp=$(mktemp -d)
chmod 755 "$tmp"
cd "$tmp" || exit 1
mkdir pub && chmod 1777 pub            # a sticky directory like /tmp, root's
echo precious >victim && chmod 600 victim
WIN=3000                               # PIDs planted: 2..WIN (the namespace's PIDs start at 1)

# plant KIND PREFIX [SUFFIX]: as the attacker, PREFIX<N>SUFFIX for every N of the window
plant() {
	as_u /usr/bin/python3 - "$1" "$2" "$tmp/victim" "$WIN" "${3:-}" <<'EOF'
import os, sys
kind, prefix, victim, win, suffix = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
for n in range(2, win + 1):
    p = f"{prefix}{n}{suffix}"
    if kind == "link":
        os.symlink(victim, p)
    elif kind == "fifo":
        os.mkfifo(p, 0o666)
    elif kind == "kallsyms":
        os.symlink("/proc/kallsyms", p)
    else:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o666)
        os.fchmod(fd, 0o666)
        os.close(fd)
EOF
}
# planted_intact KIND PREFIX: every planted name is still what was planted
planted_intact() {
	local t=l
	[ "$1" = fifo ] && t=p
	[ "$1" = file ] && t=f
	[ "$(find "$(dirname "$2")" -maxdepth 1 -name "$(basename "$2")*" -type $t -user "$u" | wc -l)" -eq $((WIN - 1)) ]
}
victim_ok() { [ "$(cat victim)" = precious ]; }
mine_0600() { [ "$(stat -c '%U %a %F' "$1")" = "root 600 regular file" ]; }
writer_pid_note() {
	local p
	p=$("$btr" trace info "$1" 2>/dev/null | sed -n 's/.*written by .*, pid \([0-9]*\),.*/\1/p')
	[ -n "$p" ] && [ "$p" -le "$WIN" ] && note "$1: written by pid $p, inside the planted window"
	[ -n "$p" ] && [ "$p" -le "$WIN" ] || bad "$1: writer pid '$p' outside the planted window 2..$WIN: the attack was not aimed"
}

# ---- 1. planted temporary names, every writer ----
plant link pub/q.btr.tmp.
timeout $T "$btr" record -q -b qemu -o pub/q.btr -- /bin/true 2>q.err; rc=$?
check "record -b qemu, symlinks planted at q.btr.tmp.PID: exit 0 (got $rc: $(head -1 q.err))" [ $rc -eq 0 ]
check "record -b qemu: the root-only file the links point to is untouched" victim_ok
check "record -b qemu: the trace is root's, 0600 ($(stat -c '%U %a %F' pub/q.btr 2>&1))" mine_0600 pub/q.btr
check "record -b qemu: every planted link is still there, unfollowed" planted_intact link pub/q.btr.tmp.
writer_pid_note pub/q.btr

plant fifo pub/s.btr.tmp.
timeout $T "$btr" record -q -b step -o pub/s.btr -- /bin/true 2>s.err; rc=$?
check "record -b step, FIFOs planted at s.btr.tmp.PID: exit 0, no hang (got $rc: $(head -1 s.err))" [ $rc -eq 0 ]
check "record -b step: the trace is root's, 0600" mine_0600 pub/s.btr
check "record -b step: the FIFOs are untouched" planted_intact fifo pub/s.btr.tmp.

plant file pub/g.btr.tmp.
timeout $T "$btr" record -q -b qemu --ground-truth pub/gt.log -o pub/g.btr -- /bin/true 2>g.err; rc=$?
check "record --ground-truth, 0666 files planted at g.btr.tmp.PID: exit 0 (got $rc: $(head -1 g.err))" [ $rc -eq 0 ]
check "record: the trace is root's and 0600, not the attacker's file ($(stat -c '%U %a' pub/g.btr 2>&1))" mine_0600 pub/g.btr
check "record: the ground-truth log is root's and 0600 ($(stat -c '%U %a' pub/gt.log 2>&1))" mine_0600 pub/gt.log
check "record: the attacker's files are still theirs" planted_intact file pub/g.btr.tmp.
as_u touch pub/gt2.log && chmod 666 pub/gt2.log
timeout $T "$btr" record -q -b qemu --ground-truth pub/gt2.log -o pub/g2.btr -- /bin/true 2>g2.err; rc=$?
check "record --ground-truth naming the attacker's 0666 file: refused, exit 3 (got $rc)" [ $rc -eq 3 ]
check "record --ground-truth: the refusal names the file" grep -q "gt2.log" g2.err
check "record --ground-truth: nothing written into the attacker's file" [ ! -s pub/gt2.log ]

pd="$shared/traces/quipper/perf.data.intel_pt-4.14"
if [ -r "$pd" ]; then
	plant link pub/i.btr.tmp.
	timeout $T "$btr" import -o pub/i.btr "$pd" >/dev/null 2>i.err; rc=$?
	check "import, symlinks planted at i.btr.tmp.PID: exit 0 (got $rc: $(head -1 i.err))" [ $rc -eq 0 ]
	check "import: the root-only file is untouched" victim_ok
	check "import: the trace is root's, 0600" mine_0600 pub/i.btr
	check "import: the planted links are still there" planted_intact link pub/i.btr.tmp.
	writer_pid_note pub/i.btr
else
	note "$pd absent: import not attacked"
fi

# the other -o writers (random temporary names already): a flame graph, the HTML report
timeout $T "$btr" flame pub/q.btr -o pub/f.svg >/dev/null 2>f.err; rc=$?
check "flame -o into the sticky directory: exit 0 (got $rc: $(head -1 f.err))" [ $rc -eq 0 ]
check "flame -o: root's file" [ "$(stat -c %U pub/f.svg)" = root ]
check "flame: no temporary file left" [ -z "$(ls pub | grep 'f.svg.tmp')" ]

# ---- 2. -o naming another user's dangling symlink in a sticky directory ----
if [ -w /proc/sys/fs/protected_symlinks ]; then
	echo 1 >/proc/sys/fs/protected_symlinks
fi
if [ "$(cat /proc/sys/fs/protected_symlinks)" = 1 ]; then
	as_u ln -s "$tmp/made.btr" pub/d.btr
	as_u ln -s "$tmp/made.svg" pub/d.svg
	timeout $T "$btr" record -q -b qemu -o pub/d.btr -- /bin/true 2>d.err; rc=$?
	check "record -o another user's dangling link in a sticky dir: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "record -o dangling link: its target was not created" [ ! -e made.btr ]
	check "record -o dangling link: one line naming it ($(cat d.err))" [ "$(grep -c 'd.btr' d.err)" -eq 1 ]
	timeout $T "$btr" flame pub/q.btr -o pub/d.svg >/dev/null 2>d2.err; rc=$?
	check "flame -o another user's dangling link: exit 3 (got $rc)" [ $rc -eq 3 ]
	check "flame -o dangling link: its target was not created" [ ! -e made.svg ]
	# root's own link in root's directory is followed, by the kernel
	ln -s "$tmp/own.btr" link.btr
	timeout $T "$btr" record -q -b qemu -o link.btr -- /bin/true 2>/dev/null; rc=$?
	check "record -o own dangling link: exit 0, the target created, the link kept" \
		[ $rc -eq 0 -a -f own.btr -a -L link.btr ]
	check "record -o own dangling link: the target is 0600" mine_0600 own.btr
else
	note "fs.protected_symlinks is 0 and cannot be set: following another user's dangling link is then the admin's choice"
fi

# back to the machine's setting: with fs.protected_symlinks on, the kernel
# itself refuses root the attacker's links in /tmp below; btr must not rely on it
[ -n "$ps_old" ] && echo "$ps_old" >/proc/sys/fs/protected_symlinks 2>/dev/null

# ---- 3. /tmp/perf-PID.map planted by the attacker ----
plant fifo /tmp/perf- .map
timeout $T "$btr" record -b qemu -o pm1.btr -- /bin/true 2>pm1.err; rc=$?
check "record with FIFOs planted as /tmp/perf-PID.map: exit 0, no hang (got $rc: $(head -1 pm1.err))" [ $rc -eq 0 ]
check "record: the planted perf map is refused with a warning ($(head -2 pm1.err))" grep -q "perf-.*\.map: not read" pm1.err
find /tmp -maxdepth 1 -name 'perf-*.map' -user "$u" -delete
plant kallsyms /tmp/perf- .map
timeout $T "$btr" record -b qemu -o pm2.btr -- /bin/true 2>pm2.err; rc=$?
check "record with links to /proc/kallsyms planted as /tmp/perf-PID.map: exit 0 (got $rc)" [ $rc -eq 0 ]
"$btr" trace dump pm2.btr >pm2.dump 2>&1
check "record: no kernel symbol from /proc/kallsyms in the trace" [ "$(grep -c -e __start_rodata -e 'ffffffff8' pm2.dump)" -eq 0 ]
check "record: the planted perf map is refused with a warning" grep -q "perf-.*\.map: not read" pm2.err
find /tmp -maxdepth 1 -name 'perf-*.map' -user "$u" -delete

# ---- 4. module paths naming a FIFO or a device ----
mkdir prog && cp /bin/true prog/t
timeout $T "$btr" record -q -b qemu -o mod.btr -- "$tmp/prog/t" 2>/dev/null || bad "recording prog/t"
rm prog/t && mkfifo prog/t
for args in "report mod.btr" "script mod.btr" "check mod.btr" "pt decode mod.btr" "annotate mod.btr --function main"; do
	# shellcheck disable=SC2086
	timeout $T "$btr" $args >/dev/null 2>r.err; rc=$?
	check "'$args', module path a FIFO: finishes (exit 0, 1 or 3; got $rc)" [ $rc -le 3 ]
	check "'$args', module path a FIFO: a warning naming it" grep -q "prog/t: not read: not a regular file" r.err
done
# (an AddressSanitizer build's library needs its runtimes loaded first, as
# cli_python does it)
pyenv=()
if grep -q '^BTR_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
	pyenv=(LD_PRELOAD="$(cc -print-file-name=libasan.so):$(cc -print-file-name=libubsan.so)"
		ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0")
fi
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
	env "${pyenv[@]}" BTR_LIBRARY="$build/libbtr.so.0" PYTHONPATH="$lib_src/python" timeout $T /usr/bin/python3 -s -c '
import sys, btr
try:
    for b in btr.open(sys.argv[1]).branches():
        pass
except btr.BtrError:
    pass
' mod.btr >/dev/null 2>py.err; rc=$?
	check "python binding, module path a FIFO: finishes (got $rc: $(tail -1 py.err))" [ $rc -eq 0 ]
fi
rm prog/t && ln -s /dev/zero prog/t
timeout $T "$btr" report mod.btr >/dev/null 2>r.err; rc=$?
check "report, module path /dev/zero: finishes (got $rc)" [ $rc -le 3 ]
check "report, module path /dev/zero: one warning naming it" [ "$(grep -c 'prog/t: not read' r.err)" -eq 1 ]
# ---- 5. DWARF naming a root-only file ----
mkdir -m 700 rootonly && printf 'password=hunter2\n%.0s' 1 2 3 4 >rootonly/secret.txt && chmod 600 rootonly/secret.txt
mkdir -m 755 upriv && chown "$u" upriv
cat >upriv/leak.c <<EOF
#line 1 "$tmp/rootonly/secret.txt"
int main(void) { volatile int s = 0;
for (int i = 0; i < 1000; i++) s += i;
return s & 1; }
EOF
chown "$u" upriv/leak.c
as_u gcc -g -O0 -o upriv/leak upriv/leak.c || bad "compiling the leak program as $u"
as_u "$btr" record -q -b qemu -o upriv/leak.btr -- "$tmp/upriv/leak" 2>leak.err ||
	bad "recording as $u: $(head -1 leak.err)"
check "a trace recorded by $u is $u's, 0600" [ "$(stat -c '%U %a' upriv/leak.btr)" = "$u 600" ]
"$btr" annotate --source upriv/leak.btr --function main >ann.out 2>ann.err; rc=$?
check "annotate --source of $u's trace: exit 0 (got $rc)" [ $rc -eq 0 ]
check "annotate --source: the root-only file named by DWARF is not printed" [ "$(grep -c hunter2 ann.out)" -eq 0 ]
check "annotate --source: one warning naming it ($(cat ann.err))" [ "$(grep -c 'secret.txt: not read' ann.err)" -eq 1 ]
"$btr" report upriv/leak.btr --html html >/dev/null 2>html.err; rc=$?
check "report --html of $u's trace: exit 0 (got $rc)" [ $rc -eq 0 ]
check "report --html: the root-only file is not embedded" [ "$(grep -c hunter2 html/index.html)" -eq 0 ]
check "report --html: one warning naming it ($(cat html.err))" [ "$(grep -c 'secret.txt: not read' html.err)" -eq 1 ]
check "report --html: index.html is root's" [ "$(stat -c %U html/index.html)" = root ]
"$btr" annotate --source --source-root "$tmp/rootonly" upriv/leak.btr --function main >ann2.out 2>/dev/null
check "annotate --source --source-root DIR: the reader's choice, the file is read" grep -q hunter2 ann2.out
# root's own trace of the same program: root could read the file, so it is
"$btr" record -q -b qemu -o own2.btr -- "$tmp/upriv/leak" 2>/dev/null
"$btr" annotate --source own2.btr --function main >ann3.out 2>/dev/null
check "annotate --source of root's own trace: root's file is read" grep -q hunter2 ann3.out

finish cli_multiuser
