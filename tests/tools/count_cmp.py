#!/usr/bin/env python3
"""count_cmp.py COUNTS REPORT_JSON [K N] - compare the independent counter's
per-thread instruction counts (tests/tools/insn_count.c, lines "PID TID N")
with btr's (`btr report --format json`).  Prints "THREADS BTR_TOTAL
COUNTER_TOTAL", then one line per differing thread; exits 1 if any thread
differs, the counter lost a thread, or no thread was recorded.  With K N:
N threads took K faults each, which the counter counts and btr does not (a
faulting instruction does not complete): those N threads must differ by
exactly K, the others not at all."""
import json
import sys

counts = {}
for line in open(sys.argv[1]):
    pid, tid, n = line.split()
    if tid == 'lost':
        print('counter lost', n)
        sys.exit(1)
    counts[int(tid)] = counts.get(int(tid), 0) + int(n)
rep = json.load(open(sys.argv[2]))
threads = {t['tid']: t['instructions'] for t in rep['thread_list']}
# The counter also sees btr's plugin probe (a QEMU run of its own before
# the recording): only the recorded threads are compared, and all of them.
k, nk = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 0)
diff = {t: counts[t] - n for t, n in threads.items() if t in counts}
bad = [f"tid {t}: btr {n} counter {counts.get(t)}" for t, n in threads.items()
       if t not in diff or diff[t] not in (0, k)]
faulted = sum(1 for d in diff.values() if k and d == k)
if k and faulted != nk:
    bad.append(f"{faulted} threads differ by {k} faults, expected {nk}")
total = sum(counts[t] for t in threads if t in counts)
print(len(threads), rep['instructions'], total)
if bad or total != rep['instructions'] + k * nk or not threads:
    print('\n'.join(bad))
    sys.exit(1)
