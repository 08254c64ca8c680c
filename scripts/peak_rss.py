#!/usr/bin/env python3
"""Run a command and report the peak of its process tree's total resident memory (the sum over
the command and every descendant, sampled every 0.1 s from /proc), for docs/RESULTS.md's memory
figure. Usage: scripts/peak_rss.py COMMAND [ARGS...]"""
import os
import subprocess
import sys
import time


def tree_rss(root: int) -> int:
    """Bytes resident in `root` and its descendants now."""
    kids: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/statm") as f:
                rss[int(d)] = int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(int(fields[1]), []).append(int(d))
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += kids.get(p, [])
    return total


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    t0 = time.monotonic()
    p = subprocess.Popen(sys.argv[1:])
    peak = 0
    while p.poll() is None:
        peak = max(peak, tree_rss(p.pid))
        time.sleep(0.1)
    print(f"peak_rss: {peak / 2**20:.0f} MiB (command and its descendants, summed); wall {time.monotonic() - t0:.1f} s; "
          f"exit status {p.returncode}", file=sys.stderr)
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
