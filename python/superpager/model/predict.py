"""`superpager predict`: the run time of a program under each policy, from a trace, with the
runtime model of docs/RUNTIME_MODEL.md (data caches, page-walk references through them, and
the overlap of independent misses), and the speedup of each policy over the first.

The time is the simulated cycles at the machine's clock. When the trace carries a phase mark
(a zero-length madvise, as the workloads issue between set-up and their access phase), the
prediction is of what follows the mark, which is what `superpager run` and the workloads time.
"""

from __future__ import annotations

import json

from .. import _core, api


def trace_header(trace: str) -> dict:
    """A trace's header: its provenance (source, collapse, command, ...)."""
    return json.loads(_core.TraceDumper(trace).header())


def collapse_of(header: dict) -> str:
    """How a trace's runs were collapsed, from its header: "line", "page" or "none" ("page"
    where the header does not say, as in every capture before the sixty-third session)."""
    return header.get("collapse", "page")


def trace_collapse(trace: str) -> str:
    """`collapse_of` a trace's header."""
    return collapse_of(trace_header(trace))


def trace_command(trace: str) -> list[str] | None:
    """The command line a capture ran, from its header (None where it does not say: a trace
    generated or converted, not captured)."""
    cmd = trace_header(trace).get("command")
    return [str(a) for a in cmd] if isinstance(cmd, list) else None


def collapse_note(trace: str, machine: str) -> str | None:
    """A note for a prediction with data caches from a trace whose runs were collapsed by page:
    its caches saw only the first line of each run (docs/RUNTIME_MODEL.md, "A record per line")."""
    if _core.machine_info(machine).get("cache") is None:
        return None
    header = trace_header(trace)
    if collapse_of(header) != "page":
        return None
    source = str(header.get("source", ""))
    how = ("generate it again with --collapse line" if source.startswith("superpager gen") else
           "import it again with --collapse line" if source.startswith("imported from") else
           "capture with --collapse line")
    return (f"{trace}: runs were collapsed by 4KiB page, so the data caches saw only the first line of each run "
            f"and count its other lines as hits, and the prefetcher sees no stream; {how} for "
            "every line (docs/RUNTIME_MODEL.md, \"A record per line\")")

#: The breakdown columns: (column, the cycles.* keys it sums). Daemon work (background copies
#: and zeroing) runs on another core and is reported in `daemon_copy_mib`, not charged.
PARTS = (
    ("work", ("cycles.access",)),
    ("data", ("cycles.data", "cycles.bandwidth")),
    ("walk", ("cycles.walk", "cycles.tlb")),
    ("faults", ("cycles.fault", "cycles.io")),
    ("zeroing", ("cycles.zero",)),
    ("copying", ("cycles.copy", "cycles.pte")),
    ("other", ("cycles.bookkeeping", "cycles.hash")),
)


def prediction(r: api.Result, clock_ghz: float, dependence: float = 0.0) -> dict:
    """One policy's predicted time and breakdown (seconds), from its results; `dependence`: the
    machine's (`bound`)."""
    src = r.phase if r.phase else r.counters
    total = src["cycles.total"]
    row = {
        "policy": r.policy,
        "machine": r.machine,
        "scope": "phase" if r.phase else "whole run",
        "cycles": total,
        "seconds": total / (clock_ghz * 1e9),
        "accesses": src.get("accesses", r.counters["accesses"]),
        "walks": src.get("walks", sum(v for k, v in r.counters.items() if k.startswith("walks."))),
        "daemon_copy_mib": r.counters.get("copy.bytes_background", 0) / 2**20,
        # Lines the data caches brought from memory (the program's and the walker's).
        "memory_lines": src.get("cache.dram.data", 0) + src.get("cache.dram.walk", 0),
    }
    for col, keys in PARTS:
        row[col] = sum(src.get(k, 0) for k in keys) / (clock_ghz * 1e9)
    row["bound"] = bound(src, dependence)
    return row


#: The overlap model's resources (docs/RUNTIME_MODEL.md, "Overlap"), in the order a tie goes.
BOUNDS = ("fill_buffers", "window", "walkers")


def bound(counters: dict, dependence: float = 0.0) -> str:
    """Which resource bounds the independent misses' stalls (`overlap.*_cycles`, the largest;
    ties to the first of BOUNDS): "fill_buffers", "window" or "walkers"; "bandwidth" where
    memory's line rate (`[cache] dram_line_cycles`) held the whole run longer than its work and
    stalls (`cycles.bandwidth` above 0); "none" where nothing stalls, or on a machine without
    data caches (no overlap model); "dependent" where the machine's `dependence` is 1, so that
    no miss overlaps another and none of the three bounds anything (the counters still hold what
    they would bound)."""
    if counters.get("cycles.bandwidth", 0) > 0:
        return "bandwidth"
    vals = [(counters.get(f"overlap.{b}_cycles", 0), b) for b in BOUNDS]
    best = max(vals, key=lambda v: v[0])  # max keeps the first of equals
    if best[0] <= 0:
        return "none"
    return "dependent" if dependence >= 1.0 else best[1]


def predict(trace: str, machine: str, policies: list[str], memory: str = "64GiB", progress: bool | None = None) -> list[dict]:
    """Predicted time of each policy on `machine`, with `speedup` over the first policy."""
    from .. import _core

    info = _core.machine_info(machine)
    dependence = (info.get("cache") or {}).get("dependence", 0.0)
    rs = api.compare(trace, [machine], policies, memory=memory, progress=progress)
    rows = [prediction(r, info["clock_ghz"], dependence) for r in rs]
    first = rows[0]["seconds"]
    for row in rows:
        row["speedup"] = first / row["seconds"] if row["seconds"] > 0 else float("nan")
    return rows
