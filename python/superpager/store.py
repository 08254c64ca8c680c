"""The results store: every run in one DuckDB file (`results.duckdb` by default), queryable with
SQL and exported to Parquet. docs/RESULTS.md documents the schema; SCHEMA_VERSION names it.

    with Store("results.duckdb") as db:
        key = run_key(trace="gups.spt", machine="skylake", policy="base", memory="64GiB")
        r = db.get(key)                       # a stored Result, or None
        if r is None:
            r = api.simulate(...); db.put(key, r, wall_s=...)
    Store.query("results.duckdb", "SELECT policy, avg(walks) FROM runs GROUP BY policy")

A run's identity is its inputs: the trace's *content* (sha256, so a renamed or copied trace is
the same run and an edited one is not), machine, policy, memory, the options that change its
numbers, and the superpager version. `run_id` is the first 16 hex digits of the hash of those.

Only one process writes the file at a time (DuckDB's rule): a sweep's workers hand their results
to the parent, which writes them, one transaction per run, so a sweep killed halfway keeps every
run it finished.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from . import _core

#: Bump when a table or column changes meaning; a store written by another schema is refused
#: with a one-line error instead of being misread.
SCHEMA_VERSION = 1
DEFAULT_DB = "results.duckdb"

#: Counters copied into columns of `runs`, for the queries people type most (the rest are rows of
#: `counters`). Column name -> counter name.
RUN_COLUMNS = {
    "accesses": "accesses",
    "walks": "walks",
    "walk_refs": "walk.refs",
    "faults": "faults",
    "cycles": "cycles.total",
    "cycles_walk": "cycles.walk",
    "footprint_bytes": "footprint.bytes",
}

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    trace VARCHAR, trace_sha256 VARCHAR, trace_truncated BOOLEAN,
    machine VARCHAR, policy VARCHAR, memory VARCHAR,
    options VARCHAR, version VARCHAR, sweep VARCHAR, created VARCHAR, wall_s DOUBLE,
    {", ".join(f"{c} UBIGINT" for c in RUN_COLUMNS)},
    tlb_misses UBIGINT, result VARCHAR
);
CREATE TABLE IF NOT EXISTS counters (run_id VARCHAR, name VARCHAR, value UBIGINT);
CREATE TABLE IF NOT EXISTS metrics (run_id VARCHAR, kind VARCHAR, name VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS series (run_id VARCHAR, sample INTEGER, name VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS maps (run_id VARCHAR, frame INTEGER, accesses UBIGINT, cells VARCHAR);
CREATE TABLE IF NOT EXISTS trace_hashes (path VARCHAR PRIMARY KEY, size UBIGINT, mtime_ns BIGINT, sha256 VARCHAR);
"""
TABLES = ("runs", "counters", "metrics", "series", "maps")


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise _core.UsageError("the results store needs the duckdb package: pip install duckdb (make setup installs it)") from None
    return duckdb


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class RunKey:
    """The inputs that determine a run's numbers (and so its identity in the store)."""

    trace: str
    trace_sha256: str
    machine: str
    policy: str
    memory: str
    options: str  # canonical JSON of the options that change the numbers
    version: str

    @property
    def run_id(self) -> str:
        blob = json.dumps([self.trace_sha256, self.machine, self.policy, self.memory, self.options, self.version])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _spec_ident(spec: str) -> str:
    """A machine or policy as it enters a key: a preset or NAME:k=v as written, a TOML file by its
    content too (an edited file is another run)."""
    path = spec.split("+", 1)[0] if not os.path.isfile(spec) else spec
    if path.endswith(".toml") and os.path.isfile(path):
        return f"{spec}#{sha256_file(path)[:16]}"
    return spec


def scenario_sha256(path: str) -> str:
    """A scenario's identity: its file and the trace files its processes read."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        text = f.read()
    h.update(text)
    import tomllib

    try:
        procs = tomllib.loads(text.decode()).get("process", [])
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        procs = []  # the scenario loader reports the problem with its line
    for p in procs if isinstance(procs, list) else []:
        t = p.get("trace") if isinstance(p, dict) else None
        if isinstance(t, str):
            full = t if os.path.isabs(t) else os.path.join(os.path.dirname(os.path.abspath(path)), t)
            if os.path.isfile(full):
                h.update(sha256_file(full).encode())
    return h.hexdigest()


def run_key(trace: str, machine: str, policy: str, memory: str, trace_sha256: str | None = None, **options) -> RunKey:
    """The key of a run. `options` are the keyword arguments of api.simulate that change its
    numbers (sample_every, swap, replacement, bloat, map_every, ...); None values are left out."""
    opts = json.dumps({k: v for k, v in sorted(options.items()) if v is not None}, sort_keys=True)
    return RunKey(os.fspath(trace), trace_sha256 or sha256_file(os.fspath(trace)), _spec_ident(machine), _spec_ident(policy), memory,
                  opts, _core.__version__)


def _locked_error(path: str, e: Exception) -> _core.UsageError:
    m = re.search(r"PID (\d+)", str(e))
    who = f" (pid {m.group(1)})" if m else ""
    return _core.UsageError(f"{path}: the results store is open in another superpager process{who}, such as a running sweep; "
                            f"wait for it, or use another --db")


class Store:
    """An open results store. Use as a context manager; `read_only` opens without the write lock
    (several readers may share a file no writer holds)."""

    def __init__(self, path: str | os.PathLike = DEFAULT_DB, read_only: bool = False):
        duckdb = _duckdb()
        self.path = os.fspath(path)
        if read_only and not os.path.exists(self.path):
            raise _core.FileAccessError(f"{self.path}: no such results store (runs are stored with --db FILE, or by `superpager sweep`)")
        if os.path.exists(self.path) and not os.path.isfile(self.path):
            raise _core.FileAccessError(f"{self.path}: not a regular file (--db names a DuckDB file)")
        try:
            self.con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.IOException as e:
            if "lock" in str(e).lower():
                raise _locked_error(self.path, e) from None
            raise _core.FileAccessError(f"{self.path}: cannot open as a results store: {str(e).splitlines()[0]}") from None
        except duckdb.Error as e:
            raise _core.FileAccessError(f"{self.path}: not a results store (DuckDB: {str(e).splitlines()[0]})") from None
        try:
            self._check_schema(read_only)
        except BaseException:
            self.con.close()
            raise

    def _check_schema(self, read_only: bool) -> None:
        tables = {r[0] for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if "meta" in tables:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            v = int(row[0]) if row else None
            if v != SCHEMA_VERSION:
                raise _core.FileAccessError(f"{self.path}: results store schema version {v}, this superpager reads version "
                                            f"{SCHEMA_VERSION} (docs/RESULTS.md); export it with the superpager that wrote it")
            return
        if tables:
            raise _core.FileAccessError(f"{self.path}: a DuckDB file, but not a superpager results store (no meta table)")
        if read_only:
            raise _core.FileAccessError(f"{self.path}: an empty DuckDB file, not a results store")
        self.con.execute(SCHEMA)
        self.con.execute("INSERT INTO meta VALUES ('schema_version', ?), ('created_by', ?)",
                         [str(SCHEMA_VERSION), f"superpager {_core.__version__}"])

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- traces -------------------------------------------------------------------------------

    def trace_sha256(self, path: str) -> str:
        """The trace's content hash, remembered by (path, size, mtime) so a large trace is read
        once, not on every run."""
        path = os.path.realpath(os.fspath(path))
        st = os.stat(path)
        row = self.con.execute("SELECT size, mtime_ns, sha256 FROM trace_hashes WHERE path = ?", [path]).fetchone()
        if row and row[0] == st.st_size and row[1] == st.st_mtime_ns:
            return str(row[2])
        h = sha256_file(path)
        self.con.execute("INSERT OR REPLACE INTO trace_hashes VALUES (?, ?, ?, ?)", [path, st.st_size, st.st_mtime_ns, h])
        return h

    def key(self, trace: str, machine: str, policy: str, memory: str, **options) -> RunKey:
        return run_key(trace, machine, policy, memory, trace_sha256=self.trace_sha256(trace), **options)

    # --- runs ---------------------------------------------------------------------------------

    def has(self, run_id: str) -> bool:
        return self.con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone() is not None

    def done_ids(self) -> set[str]:
        return {r[0] for r in self.con.execute("SELECT run_id FROM runs").fetchall()}

    def get(self, key: RunKey | str):
        """The stored Result of a run, exactly as it was returned (`result` holds its JSON), or None."""
        from .api import Result

        rid = key.run_id if isinstance(key, RunKey) else key
        row = self.con.execute("SELECT result, trace, trace_truncated FROM runs WHERE run_id = ?", [rid]).fetchone()
        if row is None:
            return None
        r = Result.from_json(row[0], trace=row[1], trace_truncated=bool(row[2]))
        if r.map:
            r.map["frames"] = self.maps(rid)
        return r

    def put(self, key: RunKey, result, wall_s: float, sweep: str | None = None) -> str:
        """Store one run in one transaction (replacing a run of the same key: --force). The
        physical-memory map's frames go to `maps`, the rest of the result to `runs.result`."""
        import pyarrow as pa

        rid = key.run_id
        c = result.counters
        d = result.to_dict()
        for k in ("trace", "trace_truncated"):
            d.pop(k, None)
        frames = []
        if "map" in d:
            d["map"] = dict(d["map"])
            frames = d["map"].pop("frames")
        counters = pa.table({"run_id": [rid] * len(c), "name": list(c), "value": pa.array(list(c.values()), pa.uint64())})
        mk, mn, mv = [], [], []
        for kind, m in (("mix", result.page_size_mix), ("derived", result.derived), ("phase", result.phase)):
            for n, v in m.items():
                mk.append(kind)
                mn.append(n)
                mv.append(float(v))
        metrics = pa.table({"run_id": [rid] * len(mk), "kind": mk, "name": mn, "value": pa.array(mv, pa.float64())})
        si, sn, sv = [], [], []
        for i, s in enumerate(result.series):
            for n, v in s.items():
                if isinstance(v, dict):
                    for kk, vv in v.items():
                        si.append(i)
                        sn.append(f"{n}.{kk}")
                        sv.append(float(vv))
                elif isinstance(v, (int, float)):
                    si.append(i)
                    sn.append(n)
                    sv.append(float(v))
        series = pa.table({"run_id": [rid] * len(si), "sample": pa.array(si, pa.int32()), "name": sn, "value": pa.array(sv, pa.float64())})
        mp = pa.table({"run_id": [rid] * len(frames), "frame": pa.array(list(range(len(frames))), pa.int32()),
                       "accesses": pa.array([f["accesses"] for f in frames], pa.uint64()), "cells": [f["cells"] for f in frames]})
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for t in TABLES:
                con.execute(f"DELETE FROM {t} WHERE run_id = ?", [rid])
            con.execute(
                f"INSERT INTO runs VALUES ({', '.join('?' * (14 + len(RUN_COLUMNS)))})",
                [rid, key.trace, key.trace_sha256, result.trace_truncated, key.machine, key.policy, key.memory, key.options,
                 key.version, sweep, datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), wall_s,
                 *[c.get(n) for n in RUN_COLUMNS.values()], result.tlb_misses(), json.dumps(d, sort_keys=True)])
            for name, tbl in (("counters", counters), ("metrics", metrics), ("series", series), ("maps", mp)):
                if tbl.num_rows:
                    con.register("_incoming", tbl)
                    con.execute(f"INSERT INTO {name} SELECT * FROM _incoming")
                    con.unregister("_incoming")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return rid

    def maps(self, run_id: str) -> list[dict]:
        rows = self.con.execute("SELECT accesses, cells FROM maps WHERE run_id = ? ORDER BY frame", [run_id]).fetchall()
        return [{"accesses": a, "cells": c} for a, c in rows]

    def resolve(self, prefix: str) -> str:
        """A run_id from a unique prefix (as git takes commits)."""
        if not re.fullmatch(r"[0-9a-f]{1,16}", prefix):
            raise _core.UsageError(f"'{prefix}' is not a run id (hex digits, as `superpager results list` shows them)")
        ids = [r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE run_id LIKE ? ORDER BY run_id", [prefix + "%"]).fetchall()]
        if not ids:
            raise _core.UsageError(f"{self.path}: no run with id {prefix}")
        if len(ids) > 1:
            raise _core.UsageError(f"{self.path}: run id {prefix} is ambiguous ({', '.join(ids[:4])}{', ...' if len(ids) > 4 else ''})")
        return ids[0]

    def query(self, sql: str):
        """Run SQL; a DataFrame. Errors in the SQL are one-line UsageErrors."""
        duckdb = _duckdb()
        try:
            return self.con.execute(sql).df()
        except duckdb.Error as e:
            raise _core.UsageError(f"{self.path}: query failed: {str(e).splitlines()[0]}") from None

    def export(self, out_dir: str) -> list[str]:
        """Every table as Parquet (zstd) in `out_dir`, each file written whole."""
        from . import output

        os.makedirs(out_dir, exist_ok=True)
        written = []
        for t in (*TABLES, "meta"):
            dest = os.path.join(out_dir, f"{t}.parquet")

            def w(tmp: str, t: str = t) -> None:
                self.con.execute(f"COPY (SELECT * FROM {t} ORDER BY ALL) TO '{tmp.replace(chr(39), chr(39) * 2)}' (FORMAT parquet, COMPRESSION zstd)")

            written.append(output.write_file(dest, w))
        return written


@contextlib.contextmanager
def maybe(path: str | None) -> Iterator[Store | None]:
    """A store opened for writing when `path` is given, else None."""
    if not path:
        yield None
        return
    with Store(path) as s:
        yield s


def query(sql: str, db: str | os.PathLike = DEFAULT_DB):
    """Run SQL against a store (read-only); a pandas DataFrame."""
    with Store(db, read_only=True) as s:
        return s.query(sql)


def results(db: str | os.PathLike = DEFAULT_DB, sql: str | None = None, where: str | None = None):
    """The store's runs as a DataFrame (one row per run, its headline counters as columns);
    `where` filters them with an SQL condition; `sql` runs any query instead."""
    if sql is None:
        sql = "SELECT * EXCLUDE (result) FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY created, run_id"
    return query(sql, db)
