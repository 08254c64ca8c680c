"""model_dict: Debian's python3 as one of the runtime model's programs (superpager bench --model,
docs/RUNTIME_MODEL.md). Builds a dict of about MiB mebibytes of int keys and values, issues a
zero-length madvise (the phase mark), then times a million lookups of random present keys.

usage: python3 model_dict.py MiB [lookups (millions; default 1)]
prints one line of key=value: populate_s access_s ops checksum"""

import mmap
import os
import random
import sys
import time

# About 100 bytes per entry: dict slot and index, key and value int objects, the key list while
# building; the resident size comes out about 1.3x MiB (CPython 3.11).
BYTES_PER_ENTRY = 100


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    mib = int(sys.argv[1])
    ops = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 1_000_000
    n = mib * 2**20 // BYTES_PER_ENTRY
    rnd = random.Random(1)
    t0 = time.monotonic()
    keys = list(range(1, 2 * n, 2))
    rnd.shuffle(keys)  # insertion order random: the key objects scatter over the heap
    d = {k: k ^ 0x5A5A for k in keys}
    probes = [rnd.randrange(n) * 2 + 1 for _ in range(ops)]
    del keys
    mark = mmap.mmap(-1, 4096)
    mark.madvise(mmap.MADV_NORMAL, 0, 0)  # the phase mark
    t1 = time.monotonic()
    s = 0
    for k in probes:
        s += d[k]
    t2 = time.monotonic()
    print(f"model_dict mib={mib} ops={ops} populate_s={t1 - t0:.4f} access_s={t2 - t1:.4f} checksum={s:x}", flush=True)
    # Leave without freeing the dict: its teardown touches every object, which is not the timed
    # lookups, and a capture's phase runs from the mark to the exit.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
