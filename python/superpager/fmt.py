"""Formatting for terminals and reports: counts and sizes in human units, plain tables, the
page-size mix, the side-by-side table of `compare`. Shared by the CLI, `demo` and the benchmarks.
"""
from __future__ import annotations

from typing import Any


def human(n: float) -> str:
    """A count in decimal units: 1.50k, 4.00M, 2.10G (sizes in bytes use `human_bytes`)."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}" if float(n).is_integer() else f"{n:.3g}"


def human_bytes(n: float) -> str:
    """A size in binary units, as sizes are given (4KiB, 2MiB, 1GiB): 1.50MiB."""
    for unit, div in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n:.0f}B"


def table(rows: list[list[str]], header: list[str], left: int = 2) -> str:
    """A plain table: the first `left` columns left-aligned (names), the rest right-aligned
    (figures)."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda r: "  ".join(str(x).rjust(w) if i >= left else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths))).rstrip()
    lines = [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def mix_str(mix: dict[str, float]) -> str:
    parts = [f"{k} {v * 100:.1f}%" for k, v in mix.items() if v > 0]
    return ", ".join(parts) if parts else "-"


def compare_table(rs) -> str:
    rows = []
    base: dict[str, Any] = {}
    for r in rs:
        base.setdefault(r.machine, r)
    for r in rs:
        c = r.counters
        acc = max(c["accesses"], 1)
        b = base[r.machine].counters
        saved = (1 - c["walks"] / b["walks"]) * 100 if b["walks"] else 0.0
        rows.append([
            r.machine, r.policy, human(c["accesses"]), human(c["walks"]),
            f"{c['walks'] / acc * 1000:.2f}", f"{saved:.1f}%" if r is not base[r.machine] else "",
            f"{c['cycles.total'] / acc:.2f}", human(c["faults"]), mix_str(r.page_size_mix),
        ])
    return table(rows, ["machine", "policy", "accesses", "walks", "walks/1k", "walks saved", "cycles/acc", "faults", "page sizes at end"])
