"""The runtime model's record: every `bench --model` table kept in the docs, row by row.

One bench says how the model did in one hour on a noisy machine; the tables kept in
docs/RUNTIME_MODEL.md and docs/RUNTIME_MODEL_HISTORY.md say how often each row is predicted
within the tolerance, and which way it errs. This reads them back:

    python -m superpager.model_record                      # every table in the two files
    python -m superpager.model_record --machine "family 25, model 17" --min-rows 32
    python -m superpager.model_record --markdown FILE...   # the summary as a markdown table

A table is found by its header row (`| program | size | ...` with `measured`, `model` and
`error` columns); the line `Measured on ...` above it names its machine, and the nearest
heading above it names the bench. Rows are keyed by program and size.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import bench_model

DEFAULT_FILES = ("docs/RUNTIME_MODEL.md", "docs/RUNTIME_MODEL_HISTORY.md")


def default_files() -> list[str]:
    """The two docs: under the current directory if it is a checkout, else beside this module's
    checkout (an editable install), else as named (and the error says so)."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if all((root / f).exists() for f in DEFAULT_FILES):
            return [str(root / f) for f in DEFAULT_FILES]
    return list(DEFAULT_FILES)


# The bench's tolerance (issue 24's ±15%), in percent as the tables print errors.
TOLERANCE = bench_model.TOLERANCE * 100

_PERCENT = re.compile(r"([-+]?\d+(?:\.\d+)?)%")
_SIZE = re.compile(r"(\d+)\s*MiB")
_NUMBER = re.compile(r"([-+]?\d+(?:\.\d+)?)")
_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[–-]\s*(\d+(?:\.\d+)?)")


@dataclass
class Row:
    """One row of one table: the model's error (percent) and what else the table gives."""

    error: float
    predicted: float | None = None
    # The pairs' ratios' range (the table's `range` column), where the table has one.
    spread: tuple[float, float] | None = None
    # The model's base time against the measured one, as model / measured - 1 (percent).
    base_error: float | None = None

    def miss_inside_spread(self, tolerance: float = TOLERANCE) -> bool | None:
        """For a miss, whether the prediction lies inside the pairs' range (None: not a miss,
        or no range)."""
        if abs(self.error) <= tolerance or self.spread is None or self.predicted is None:
            return None
        return self.spread[0] <= self.predicted <= self.spread[1]


@dataclass
class Table:
    """One `bench --model` table: where it is, the machine, and its rows."""

    path: str
    line: int
    heading: str
    machine: str
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)

    @property
    def errors(self) -> dict[tuple[str, int], float]:
        return {k: r.error for k, r in self.rows.items()}

    def within(self, tolerance: float = TOLERANCE) -> int:
        return sum(abs(r.error) <= tolerance for r in self.rows.values())


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _number(cell: str, pattern: re.Pattern = _NUMBER) -> float | None:
    m = pattern.search(cell)
    return float(m.group(1)) if m else None


def _columns(cells: list[str]) -> dict[str, int] | None:
    """The columns a model table is read by, or None if this header is not one."""
    if cells[:2] != ["program", "size"] or "measured" not in cells or "model" not in cells:
        return None
    m = cells.index("model")
    if "error" not in cells[m:]:
        return None
    cols = {"size": cells.index("size"), "model": m, "error": cells.index("error", m)}
    for name in ("range", "base s", "model base s"):
        if name in cells:
            cols[name] = cells.index(name)
    return cols


def _row(cells: list[str], cols: dict[str, int]) -> tuple[int, Row] | None:
    if len(cells) <= max(cols.values()):
        return None
    size, err = _number(cells[cols["size"]], _SIZE), _number(cells[cols["error"]], _PERCENT)
    if size is None or err is None:
        return None
    row = Row(err, _number(cells[cols["model"]]))
    if "range" in cols:
        ends = _RANGE.search(cells[cols["range"]])
        row.spread = (float(ends.group(1)), float(ends.group(2))) if ends else None
    if "base s" in cols and "model base s" in cols:
        base, model_base = _number(cells[cols["base s"]]), _number(cells[cols["model base s"]])
        if base and model_base is not None:
            row.base_error = (model_base / base - 1) * 100
    return int(size), row


def parse(path: str | Path, text: str | None = None) -> list[Table]:
    """Every model table in one markdown file, in the file's order."""
    text = Path(path).read_text() if text is None else text
    tables: list[Table] = []
    heading, machine = "", ""
    cols: dict[str, int] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            heading, cols = line.lstrip("#").strip(), None
            continue
        if line.startswith("Measured on "):
            machine = line[len("Measured on "):].split(";")[0].strip()
            continue
        if not line.startswith("|"):
            cols = None
            continue
        cells = _cells(line)
        header = _columns(cells)
        if header is not None:
            cols = header
            tables.append(Table(str(path), n, heading, machine))
            continue
        if cols is None or set(line) <= set("|-: "):
            continue
        found = _row(cells, cols)
        if found is not None:
            tables[-1].rows[(cells[0], found[0])] = found[1]
    return tables


@dataclass
class RowRecord:
    program: str
    mib: int
    rows: list[Row]

    @property
    def errors(self) -> list[float]:
        return [r.error for r in self.rows]

    def within(self, tolerance: float = TOLERANCE) -> int:
        return sum(abs(e) <= tolerance for e in self.errors)

    def misses_inside(self, tolerance: float = TOLERANCE) -> tuple[int, int]:
        """(misses inside the pairs' range, misses with a range)."""
        seen = [r.miss_inside_spread(tolerance) for r in self.rows]
        return sum(s is True for s in seen), sum(s is not None for s in seen)

    def base_errors(self) -> list[float]:
        return [r.base_error for r in self.rows if r.base_error is not None]


def record(tables: list[Table], min_tables: int = 1) -> list[RowRecord]:
    """Each row's record over the tables that have it, rows in the order first seen."""
    rows: dict[tuple[str, int], list[Row]] = {}
    for t in tables:
        for key, r in t.rows.items():
            rows.setdefault(key, []).append(r)
    return [RowRecord(p, s, rs) for (p, s), rs in rows.items() if len(rs) >= min_tables]


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):+.1f}%" if values else "-"


def summary(tables: list[Table], tolerance: float = TOLERANCE, min_tables: int = 1, markdown: bool = False) -> str:
    if not tables:
        return "no model tables found"
    rows = record(tables, min_tables)
    totals = [f"{t.within(tolerance)}/{len(t.rows)}" for t in tables]
    machines = sorted({t.machine for t in tables if t.machine})
    inside = [r.misses_inside(tolerance) for r in rows]
    # One table with every row within is one hour's luck or the model's; how many of the tables
    # had it is the record's answer.
    whole = [i + 1 for i, t in enumerate(tables) if t.rows and t.within(tolerance) == len(t.rows)]
    out = [
        f"{len(tables)} tables (first listed first: {', '.join(totals)}); machines: {'; '.join(machines) or 'not named'}",
        f"Tables with every row within ±{tolerance:g}%: {len(whole)} of {len(tables)}"
        + (f" (the {', '.join(bench_model.ordinal(i) for i in whole)} listed)." if whole else "."),
        f"Misses (beyond ±{tolerance:g}%) whose prediction lies inside the range of the measured pairs' ratios: "
        f"{sum(i for i, _ in inside)} of {sum(n for _, n in inside)} (of the tables with a range column).",
        f"Each row: the tables that have it, how many put it within ±{tolerance:g}%, its error's median and range, "
        "its misses inside the pairs' range, and the model's base time against the measured one (median).",
    ]
    if markdown:
        out += ["", "| program | size | tables | within | median error | range | misses inside the pairs' range | base time, median error |",
                "|---|---|---:|---:|---:|---|---:|---:|"]
    for r, (ins, with_range) in zip(rows, inside):
        errs = r.errors
        med, lo, hi = statistics.median(errs), min(errs), max(errs)
        misses = f"{ins} of {with_range}" if with_range else "-"
        if markdown:
            out.append(f"| {r.program} | {r.mib}MiB | {len(errs)} | {r.within(tolerance)} | {med:+.1f}% | {lo:+.1f}% to {hi:+.1f}% "
                       f"| {misses} | {_median(r.base_errors())} |")
        else:
            out.append(f"{r.program:<14} {r.mib:>5}MiB {len(errs):>3} tables, {r.within(tolerance):>3} within; "
                       f"median {med:+6.1f}%, range {lo:+.1f}% to {hi:+.1f}%; misses inside the pairs' range {misses}; "
                       f"base time {_median(r.base_errors())}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m superpager.model_record", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", default=None, help="markdown files holding `bench --model` tables "
                    "(default: the two runtime-model docs)")
    ap.add_argument("--machine", default=None, help="only tables whose `Measured on` line contains this text")
    ap.add_argument("--min-rows", type=int, default=1, metavar="N", help="only tables of N rows or more (32: the full benches)")
    ap.add_argument("--last", type=int, default=None, metavar="N", help="only the first N tables found (the docs keep the newest first)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE, help="percent (default 15, the issue's)")
    ap.add_argument("--min-tables", type=int, default=1, metavar="N", help="only rows that N tables or more have (default 1)")
    ap.add_argument("--markdown", action="store_true", help="print the rows as a markdown table")
    a = ap.parse_args(argv)
    tables: list[Table] = []
    for f in a.files or default_files():
        try:
            tables += parse(f)
        except OSError as e:
            print(f"model_record: {f}: {e.strerror}", file=sys.stderr)
            return 2
    if a.machine is not None:
        tables = [t for t in tables if a.machine in t.machine]
    tables = [t for t in tables if len(t.rows) >= a.min_rows]
    if a.last is not None:
        tables = tables[: a.last]
    print(summary(tables, a.tolerance, a.min_tables, a.markdown))
    return 0 if tables else 1


if __name__ == "__main__":
    sys.exit(main())
