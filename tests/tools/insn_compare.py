#!/usr/bin/env python3
"""insn_compare.py COUNTS REPORT.json - btr's instruction counts against the
independent counter's (tests/tools/insn_count.c, run in the same QEMU run
as btr's plugin through tests/tools/qemu_count.sh).

COUNTS: the counter's lines "PID TID COUNT" (several per thread: summed).
REPORT.json: `btr report --format json` of the recording.

Every thread btr recorded must have exactly the counter's count, and the
totals must be equal, with these definitional differences, each derived
from the recording and not fitted per program:
- a process killed by a synchronous fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
  SIGTRAP) ran one instruction that did not retire: the counter's callback
  runs before an instruction executes, so it counts it; btr counts retired
  instructions (PT shows the faulting one as a FUP source).  Its thread may
  be one over, the process exactly one over;
- a process killed by a signal may have no counter lines: SIGKILL ends QEMU
  before any plugin callback, and QEMU 7.2 dumps core for an uncaught
  SIGSEGV without running the plugins' exit callbacks.  Its threads are left
  out and named (a process's tids are known here only for single-threaded
  ones, tid == pid; a multi-threaded one fails);
- threads the counter saw that btr did not record (btr's plugin probe, a
  QEMU run of its own before the recording): ignored.
Prints one summary line; exits 1 with the differences."""
import json, sys

FAULTS = {4, 5, 7, 8, 11}
counts = {}
for line in open(sys.argv[1]):
    pid, tid, n = line.split()
    if tid == 'lost':
        sys.exit('counter: %s instructions on untracked vcpus' % n)
    counts[int(tid)] = counts.get(int(tid), 0) + int(n)
rep = json.load(open(sys.argv[2]))
btr = {}
for t in rep['thread_list']:
    btr[t['tid']] = btr.get(t['tid'], 0) + t['instructions']
procs = rep.get('processes') or []
skip = set(p['pid'] for p in procs if p.get('signal') and p['pid'] not in counts)
faulted = [p for p in procs if p.get('signal') in FAULTS and p['pid'] not in skip]
bad = []
extra = {}
for t, n in btr.items():
    if t in skip:
        continue
    c = counts.get(t)
    if c is None:
        if n:
            bad.append('tid %d: btr %d, no counter line' % (t, n))
        continue
    if c != n:
        extra[t] = c - n
for p in faulted:
    # the faulting thread: one of the process's threads is one over
    tids = [t for t in extra if t in p.get('tids', [p['pid']])]
    if len(tids) == 1 and extra[tids[0]] == 1:
        del extra[tids[0]]
for t, d in extra.items():
    bad.append('tid %d: btr %d, counter %d' % (t, btr[t], counts[t]))
total_btr = sum(n for t, n in btr.items() if t not in skip)
total_cnt = sum(counts.get(t, 0) for t in btr if t not in skip) - len(faulted)
if total_btr != total_cnt:
    bad.append('total: btr %d, counter %d (%d faults)' % (total_btr, total_cnt + len(faulted), len(faulted)))
if not btr:
    bad.append('no threads')
print('%d threads, %d instructions%s%s' % (len(btr), total_btr,
      ', %d fault(s) not retired' % len(faulted) if faulted else '',
      ', tid(s) %s killed by a signal: no counter line' % sorted(skip) if skip else ''))
if bad:
    sys.exit('\n'.join(bad))
