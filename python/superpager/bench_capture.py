"""`superpager bench --capture`: how fast capture records and how small its traces are.

In one run, for a random-access workload (GUPS) and a sequential one (STREAM): the native run's
wall time, the capture's wall time and recorded accesses per second, and Valgrind lackey at a
small size beside a capture at that same size. Then bytes per access of every workload in the
suite. Medians over --repeats; the report goes into docs/PERFORMANCE.md between markers, so the
simulator's own benchmark and this one share the file.
"""
from __future__ import annotations

from typing import Any

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from . import capture as cap
from . import workloads as W
from .hostinfo import machine_line

START = "<!-- bench --capture: start -->"
END = "<!-- bench --capture: end -->"

# (label, workload, size for the rate rows, size for the lackey comparison)
RATE_CASES = [
    ("random access (gups)", "gups", "256MiB", "4MiB"),
    ("sequential (stream)", "stream", "64MiB", "2MiB"),
]
# Sizes for the bytes-per-access table: big enough to leave start-up behind, small enough that
# the whole suite captures in a few minutes.
SUITE_SIZES = {"gups": "256MiB", "btree": "32MiB", "rbtree": "16MiB", "transpose": "64MiB", "hashjoin": "64MiB", "fft": "32MiB",
               "pagerank": "64MiB", "stream": "64MiB", "partition": "64MiB", "webserver": "32MiB", "compile": "8MiB",
               "gzip": "8MiB", "bzip2": "4MiB", "sqlite3": "8MiB", "python3": "8MiB"}
TARGET_RANDOM, TARGET_SEQ, TARGET_BYTES = 20e6, 60e6, 2.0


def _native(argv, cwd) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, cwd=cwd, check=True)
    return time.monotonic() - t0


def _capture(argv, out, cwd, lackey=False):
    return cap.capture(argv, out, lackey=lackey, stdout=subprocess.DEVNULL, cwd=cwd)


def main(a) -> int:
    work = a.workdir or tempfile.mkdtemp(prefix="superpager-bench-capture-")
    os.makedirs(work, exist_ok=True)
    scratch = os.path.join(work, "scratch")
    os.makedirs(scratch, exist_ok=True)
    reps = max(1, a.repeats)
    has_lackey = shutil.which("valgrind") is not None
    rate_rows = []
    for label, name, size, small in RATE_CASES:
        argv = W.command(name, size)
        nat, caps = [], []
        for _ in range(reps):
            nat.append(_native(argv, scratch))
            caps.append(_capture(argv, os.path.join(work, f"{name}.spt"), scratch))
        r = caps[len(caps) // 2]
        rate = statistics.median(c.rate for c in caps)
        sec = statistics.median(c.seconds for c in caps)
        small_argv = W.command(name, small)
        small_cap = statistics.median(_capture(small_argv, os.path.join(work, f"{name}-small.spt"), scratch).rate
                                      for _ in range(reps))
        lackey_rate = None
        if has_lackey:
            lk = _capture(small_argv, os.path.join(work, f"{name}-lackey.spt"), scratch, lackey=True)
            lackey_rate = lk.rate
        target = TARGET_RANDOM if name == "gups" else TARGET_SEQ
        rate_rows.append((label, size, statistics.median(nat), sec, r.accesses, rate, target, small, small_cap, lackey_rate))
        print(f"{label}: native {statistics.median(nat):.2f}s, capture {sec:.2f}s, {rate / 1e6:.1f}M accesses/s", file=sys.stderr)
    size_rows: list[tuple[Any, ...]] = []
    for name, w in W.WORKLOADS.items():
        if W.available(w):
            size_rows.append((name, None, None, None, W.available(w)))
            continue
        size = SUITE_SIZES.get(name, w.default_size)
        r = _capture(W.command(name, size), os.path.join(work, f"suite-{name}.spt"), scratch)
        size_rows.append((name, size, r.accesses, r.bytes, None))
        print(f"{name}: {r.bytes_per_access:.3f} bytes per access", file=sys.stderr)
    text = report(a, reps, rate_rows, size_rows)
    print(text)
    if a.out:
        write_section(a.out, text)
        print(f"\nwrote {a.out}", file=sys.stderr)
    return 0


def report(a, reps, rate_rows, size_rows) -> str:
    lines = [START, "## Capture", "",
             f"Produced by `superpager bench --capture --repeats {reps}" + (f" --out {a.out}`" if a.out else "`") +
             f" (`make bench-capture`) on {machine_line()}. One run measures everything below; wall times include process start-up "
             "(qemu-user's is about 50 ms). Recorded accesses per second = accesses in the trace / wall time "
             "of the capture, program start to trace closed. Medians of the repeats.", "",
             "| workload | size | native | capture | accesses | recorded accesses/s | slowdown | target | met |"
             " lackey size | capture at that size | lackey | capture / lackey |",
             "|---|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|"]
    for label, size, nat, sec, acc, rate, target, small, small_cap, lk in rate_rows:
        lk_s = f"{lk / 1e6:.2f}M/s" if lk else "not installed"
        ratio = f"{small_cap / lk:.0f}x" if lk else "-"
        lines.append(f"| {label} | {size} | {nat:.2f} s | {sec:.2f} s | {acc / 1e6:.1f}M | {rate / 1e6:.1f}M/s | "
                     f"{sec / max(nat, 1e-9):.1f}x | at least {target / 1e6:.0f}M/s | {'yes' if rate >= target else 'NO'} | "
                     f"{small} | {small_cap / 1e6:.1f}M/s | {lk_s} | {ratio} |")
    lines += ["", "Trace size, every workload of the suite (target: at most 2 bytes per access):", "",
              "| workload | size | accesses | trace bytes | bytes per access | met |", "|---|---|---:|---:|---:|---|"]
    total_acc = total_bytes = 0
    for name, size, acc, nbytes, why in size_rows:
        if why:
            lines.append(f"| {name} | - | - | - | - | not run: {why} |")
            continue
        total_acc += acc
        total_bytes += nbytes
        bpa = nbytes / max(acc, 1)
        lines.append(f"| {name} | {size} | {acc / 1e6:.1f}M | {nbytes / 2**20:.2f} MiB | {bpa:.3f} | {'yes' if bpa <= TARGET_BYTES else 'NO'} |")
    if total_acc:
        lines.append(f"| all | | {total_acc / 1e6:.1f}M | {total_bytes / 2**20:.2f} MiB | {total_bytes / total_acc:.3f} | "
                     f"{'yes' if total_bytes / total_acc <= TARGET_BYTES else 'NO'} |")
    lines += ["", END]
    return "\n".join(lines)


def write_section(path: str, text: str, start: str = START, end: str = END) -> None:
    """Put the section (`text`, from marker `start` to marker `end`) into `path`, replacing an
    earlier one, keeping everything else."""
    old = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
    if start in old and end in old:
        new = old[:old.index(start)] + text + old[old.index(end) + len(end):]
    else:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text + "\n"
    from .output import write_text

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    write_text(path, new)
