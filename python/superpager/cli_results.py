"""`superpager results`, `sweep` and `report`: the results store (superpager.store), grids of runs
on a process pool or a Ray cluster (superpager.sweep), and HTML reports (superpager.report)."""
from __future__ import annotations

import os
import sys
import time

from . import _core
from . import store as st
from .fmt import human, table
from .progress import Progress

EPILOG_RESULTS = """examples:
  superpager results list                              # every run in ./results.duckdb
  superpager results list --db sweep.duckdb --where "policy LIKE 'navarro%'"
  superpager results show 3fa9                         # one run, by a prefix of its id
  superpager results query "SELECT policy, avg(walks) FROM runs GROUP BY policy"
  superpager results query "SELECT name, value FROM counters WHERE run_id = '3fa9c2e07b1d4a55'" --csv
  superpager results export parquet/                   # every table as Parquet

tables (docs/RESULTS.md): runs (one row per run, headline counters as columns), counters
(run_id, name, value), metrics (run_id, kind = mix|derived|phase, name, value), series
(run_id, sample, name, value), maps (run_id, frame, accesses, cells), meta.
"""

EPILOG_SWEEP = """examples:
  superpager sweep grid.toml                           # every core, into ./results.duckdb
  superpager sweep grid.toml --jobs 1 --db one.duckdb  # serial
  superpager sweep grid.toml --engine ray --address 10.0.0.5:6379 --ship
  superpager sweep grid.toml --dry-run                 # list the runs, run nothing

A grid file (docs/RESULTS.md has every key):
  machines = ["skylake", "zen3"]
  policies = ["base", "linux-thp", "navarro"]
  memory = ["8GiB"]
  [[gen]]
  kind = "gups"
  size = ["64MiB", "256MiB"]
  accesses = "1M"
  [params.linux-thp]
  max_ptes_none = [0, 511]

Runs already in the store are skipped: run the same command again to resume a sweep that was
stopped. --force runs them again.
"""

EPILOG_REPORT = """examples:
  superpager report --db results.duckdb -o report/                 # every run in the store
  superpager report --db results.duckdb --where "sweep = 'demo'" -o report/
  superpager report 3fa9 --db results.duckdb -o one-run/           # one run, by id prefix
  superpager report results/ -o report/                            # a simulate/compare --out directory

Open report/index.html in a browser: it needs no network. Every figure is also written as PNG
and SVG beside it.
"""


def add_parsers(sub, raw) -> None:
    r = sub.add_parser("results", help="list, show, query and export the runs in a results store (DuckDB)",
                       epilog=EPILOG_RESULTS, formatter_class=raw)
    rs = r.add_subparsers(dest="results_cmd", metavar="ACTION")
    for name, help_ in (("list", "one line per run"), ("show", "one run in full"), ("query", "run SQL, print the table"),
                        ("export", "write every table as Parquet")):
        p = rs.add_parser(name, help=help_, formatter_class=raw, epilog=EPILOG_RESULTS)
        p.add_argument("--db", default=st.DEFAULT_DB, help=f"the results store (default {st.DEFAULT_DB})")
        if name == "list":
            p.add_argument("--where", help="an SQL condition on the runs table, e.g. \"machine = 'zen3'\"")
            p.add_argument("--json", action="store_true")
        elif name == "show":
            p.add_argument("run", help="a run id, or a prefix of one that names a single run")
            p.add_argument("--json", action="store_true", help="the result as simulate --json prints it")
        elif name == "query":
            p.add_argument("sql", help="a query over runs, counters, metrics, series, maps (DuckDB SQL)")
            g = p.add_mutually_exclusive_group()
            g.add_argument("--json", action="store_true", help="records as JSON")
            g.add_argument("--csv", action="store_true", help="CSV with a header")
        else:
            p.add_argument("out", help="a directory for runs.parquet, counters.parquet, ...")
        p.set_defaults(fn=cmd_results)
    r.set_defaults(fn=lambda a: (r.print_help(), 2)[1])

    s = sub.add_parser("sweep", help="run a grid of traces x machines x policies x parameters x memory sizes on every core (or Ray)",
                       epilog=EPILOG_SWEEP, formatter_class=raw)
    s.add_argument("grid", help="grid file (TOML)")
    s.add_argument("--db", default=st.DEFAULT_DB, help=f"results store to write (default {st.DEFAULT_DB})")
    s.add_argument("--engine", choices=["local", "ray"], default="local", help="local process pool (default) or a Ray cluster")
    s.add_argument("--jobs", "-j", type=int, default=None, help="local workers (default: every core)")
    s.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a Ray instance started for this sweep)")
    s.add_argument("--ship", action="store_true", help="Ray: send trace files to the workers (default: they read them from the same path)")
    s.add_argument("--force", action="store_true", help="run again the runs already in the store")
    s.add_argument("--dry-run", action="store_true", help="print the runs and which are already stored; run nothing")
    s.add_argument("--verbose", "-v", action="store_true", help="a line per finished run on stdout")
    s.set_defaults(fn=cmd_sweep)

    rp = sub.add_parser("report", help="a static HTML report (tables, figures, a physical-memory map) from stored runs",
                        epilog=EPILOG_REPORT, formatter_class=raw)
    rp.add_argument("source", nargs="?", help="a run id (prefix) in --db, or a results directory (simulate/compare --out)")
    rp.add_argument("--db", default=None, help=f"results store to read (default {st.DEFAULT_DB} when no directory is given)")
    rp.add_argument("--where", help="an SQL condition choosing runs of the store, e.g. \"sweep = 'demo'\"")
    rp.add_argument("-o", "--out", required=True, help="directory for index.html and the figures")
    rp.add_argument("--title", help="the report's title")
    rp.set_defaults(fn=cmd_report)


def _print_df(df, as_json: bool = False, as_csv: bool = False) -> None:
    if as_json:
        print(df.to_json(orient="records", indent=2))
    elif as_csv:
        sys.stdout.write(df.to_csv(index=False))
    elif df.empty:
        print("(no rows)")
    else:
        cols = list(df.columns)
        rows = [[_cell(v) for v in rec] for rec in df.itertuples(index=False)]
        print(table(rows, cols, left=len(cols)))


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def cmd_results(a) -> int:
    if a.results_cmd == "export":
        with st.Store(a.db, read_only=True) as db:
            files = db.export(a.out)
        print("\n".join(f"wrote {f}" for f in files))
        return 0
    with st.Store(a.db, read_only=True) as db:
        if a.results_cmd == "list":
            where = f" WHERE {a.where}" if a.where else ""
            df = db.query("SELECT run_id, trace, machine, policy, memory, accesses, walks, tlb_misses, cycles, wall_s, sweep "
                          f"FROM runs{where} ORDER BY created, run_id")
            if a.json:
                _print_df(df, as_json=True)
                return 0
            if df.empty:
                print("(no runs)")
                return 0
            rows = [[r.run_id, os.path.basename(r.trace), r.machine, r.policy, r.memory, human(int(r.accesses or 0)),
                     human(int(r.walks or 0)), human(int(r.cycles or 0)), f"{r.wall_s:.2f}s", r.sweep or ""] for r in df.itertuples()]
            print(table(rows, ["run", "trace", "machine", "policy", "memory", "accesses", "walks", "cycles", "wall", "sweep"], left=5))
            print(f"\n{len(df)} runs in {a.db}")
            return 0
        if a.results_cmd == "show":
            rid = db.resolve(a.run)
            r = db.get(rid)
            if a.json:
                print(r.to_json())
                return 0
            from .cli import print_result

            print(f"run      {rid}")
            print_result(r, r.policy)
            return 0
        df = db.query(a.sql)
        _print_df(df, a.json, a.csv)
        return 0


class SweepBar:
    """The sweep's progress line: runs done, failed, and the time left."""

    def __init__(self, enabled: bool | None = None):
        self.bar = Progress("sweep", enabled=enabled, delay=0.5)

    def __call__(self, done: int, failed: int, total: int, elapsed: float) -> None:
        self.bar.label = f"sweep {done + failed}/{total} done, {failed} failed"
        self.bar.update((done + failed) / total if total else 1.0)

    def close(self) -> None:
        self.bar.close()


def cmd_sweep(a) -> int:
    from . import sweep as sw

    if a.jobs is not None and a.jobs < 1:
        raise _core.UsageError("--jobs must be at least 1")
    if a.engine == "local" and (a.address or a.ship):
        raise _core.UsageError("--address and --ship apply to --engine ray")
    g = sw.load_grid(a.grid)
    t0 = time.perf_counter()
    with st.Store(a.db) as db:
        note = Progress("preparing traces", delay=0.5)
        try:
            specs = sw.expand(g, db, progress=lambda m: setattr(note, "label", m))
        finally:
            note.close()
        have = set() if a.force else db.done_ids()
        stored = sum(1 for s in specs if s.key().run_id in have)
        if a.dry_run:
            rows = [[s.key().run_id, os.path.basename(s.trace), s.machine, s.policy, s.memory, "stored" if s.key().run_id in have else "to run"]
                    for s in specs]
            print(table(rows, ["run", "trace", "machine", "policy", "memory", ""], left=6))
            print(f"\n{len(specs)} runs: {stored} already in {a.db}, {len(specs) - stored} to run")
            return 0
        print(f"sweep {g.name}: {len(specs)} runs, {stored} already in {a.db}, {len(specs) - stored} to run "
              f"({a.engine}{'' if a.engine != 'local' else f', {a.jobs or os.cpu_count()} workers'})", file=sys.stderr)

        def on_run(s, ok, why, wall):
            if a.verbose:
                print(f"{'done' if ok else 'FAILED'} {s.key().run_id} {s.label()} {wall:.2f}s" + (f": {why}" if why else ""), flush=True)

        bar = SweepBar()
        try:
            out = sw.run(specs, db, engine=a.engine, jobs=a.jobs, address=a.address, ship=a.ship, force=a.force, sweep=g.name,
                         on_run=on_run, progress=bar)
        finally:
            bar.close()
    sw.print_failures(out)
    wall = time.perf_counter() - t0
    state = "interrupted" if out.interrupted else "finished"
    print(f"sweep {g.name} {state} in {wall:.1f}s: {out.done} runs stored, {out.reused} reused, {len(out.failed)} failed; "
          f"store {a.db}", file=sys.stderr)
    if not out.interrupted:
        print(f"next: superpager results query \"SELECT policy, avg(walks) FROM runs WHERE sweep = '{g.name}' GROUP BY policy\" --db {a.db}",
              file=sys.stderr)
    return 130 if out.interrupted else (1 if out.failed else 0)


def cmd_report(a) -> int:
    from . import report

    if a.source and os.path.isdir(a.source):
        if a.db or a.where:
            raise _core.UsageError("give a results directory, or --db with a run id or --where, not both")
        results = report.load_dir(a.source)
        title = a.title or f"superpager: {a.source}"
    else:
        db_path = a.db or st.DEFAULT_DB
        with st.Store(db_path, read_only=True) as db:
            if a.source:
                if a.where:
                    raise _core.UsageError("give a run id or --where, not both")
                results = [(db.resolve(a.source), db.get(db.resolve(a.source)))]
            else:
                where = f" WHERE {a.where}" if a.where else ""
                ids = [r[0] for r in db.query(f"SELECT run_id FROM runs{where} ORDER BY created, run_id").itertuples(index=False)]
                results = [(i, db.get(i)) for i in ids]
        if not results:
            raise _core.UsageError(f"{db_path}: no runs match" + (f" --where {a.where}" if a.where else ""))
        title = a.title or f"superpager: {len(results)} runs from {db_path}"
    path = report.write(results, a.out, title=title)
    print(f"wrote {path} ({len(results)} runs)")
    return 0

