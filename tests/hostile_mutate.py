#!/usr/bin/env python3
"""hostile_mutate.py FILE OUTDIR SEED NTRUNC NFLIP - deterministic damaged
copies of FILE for tests/cli_hostile.sh: NTRUNC truncations (the header and
chunk/record boundaries region first, then spread over the file) named
trunc-OFFSET, and NFLIP copies with 1..8 random bytes changed (half of them
within the first 4 KiB, where headers, attributes and the first chunk live)
named flip-K.  Same SEED, same files."""
import os
import random
import sys

path, out, seed, ntrunc, nflip = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
data = open(path, 'rb').read()
size = len(data)
rng = random.Random(seed)
os.makedirs(out, exist_ok=True)

offs = [o for o in (1, 8, 16, 40, 104, size // 2, size - 1) if 0 < o < size]
while len(offs) < ntrunc * 2 and size > 2:
    offs.append(rng.randrange(1, size))
seen = []
for o in offs:
    if o not in seen:
        seen.append(o)
for o in seen[:ntrunc]:
    with open(os.path.join(out, 'trunc-%d' % o), 'wb') as f:
        f.write(data[:o])

for k in range(nflip):
    b = bytearray(data)
    span = min(size, 4096) if k % 2 == 0 else size
    for _ in range(rng.randrange(1, 9)):
        i = rng.randrange(span)
        # a random byte, or an extreme one (lengths and counts)
        b[i] = rng.choice((rng.randrange(256), 0xff, 0x00, 0x7f, 0x80))
    with open(os.path.join(out, 'flip-%d' % k), 'wb') as f:
        f.write(bytes(b))
