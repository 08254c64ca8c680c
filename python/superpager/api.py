"""The Python API: the same power as the CLI, returning objects that convert to DataFrames.

    >>> import superpager as sp
    >>> sp.gen("gups", "gups.spt", size="256MiB", accesses=1_000_000)
    >>> r = sp.simulate("gups.spt", machine="skylake", policy="fixed:2MiB")
    >>> r["walks"], r.page_size_mix["2MiB"]
    >>> sp.compare("gups.spt", machines=["skylake", "zen3"], policies=["base", "fixed:2MiB"]).to_pandas()
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence

from . import _core
from .progress import Progress


@dataclass
class Result:
    """One simulated run: a machine, a policy, a trace."""

    machine: str
    policy: str
    memory: str
    counters: dict[str, int]
    page_size_mix: dict[str, float]
    derived: dict[str, float]
    killed: dict[str, str]
    series: list[dict] = field(repr=False)
    #: After a phase mark (a zero-length madvise in the trace): cycles.* of what followed it,
    #: with accesses, instructions, walks and faults (empty without a mark).
    phase: dict[str, int] = field(default_factory=dict, repr=False)
    #: With map_every: the physical-memory map, {region_bytes, legend, frames: [{accesses, cells}]},
    #: a character per cell ('0' + the legend's index; os/physmap.rs). Empty otherwise.
    map: dict = field(default_factory=dict, repr=False)
    trace: str = ""
    #: The trace was cut short (its writer stopped, or it is marked truncated): the run covers
    #: only the part present (read with allow_truncated).
    trace_truncated: bool = False

    @classmethod
    def from_json(cls, text: str, trace: str = "", trace_truncated: bool = False) -> Result:
        d = json.loads(text)
        # A result's own JSON (to_json) carries its trace; the arguments win when given.
        trace = trace or d.pop("trace", "")
        trace_truncated = trace_truncated or d.pop("trace_truncated", False)
        d.pop("trace", None)
        d.pop("trace_truncated", None)
        return cls(trace=trace, trace_truncated=trace_truncated, **d)

    def __getitem__(self, key: str) -> int:
        return self.counters[key]

    def tlb_misses(self) -> int:
        """Misses summed over the machine's TLB structures (`tlb.<structure>.misses`)."""
        return sum(v for k, v in self.counters.items() if k.startswith("tlb.") and k.endswith(".misses") and k.count(".") == 2)

    def to_dict(self) -> dict:
        return {
            "trace": self.trace,
            "trace_truncated": self.trace_truncated,
            "machine": self.machine,
            "policy": self.policy,
            "memory": self.memory,
            "counters": self.counters,
            "page_size_mix": self.page_size_mix,
            "derived": self.derived,
            "killed": self.killed,
            **({"phase": self.phase} if self.phase else {}),
            **({"map": self.map} if self.map else {}),
            "series": self.series,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def row(self) -> dict:
        """A flat record: identity columns, then every counter, mix share and derived figure."""
        r = {"trace": self.trace, "trace_truncated": self.trace_truncated, "machine": self.machine, "policy": self.policy,
             "memory": self.memory}
        r.update(self.counters)
        r.update({f"mix.{k}": v for k, v in self.page_size_mix.items()})
        r.update({f"derived.{k}": v for k, v in self.derived.items()})
        return r

    def to_pandas(self):
        """One-row DataFrame of every counter."""
        import pandas as pd

        return pd.DataFrame([self.row()])

    def series_rows(self) -> list[dict]:
        """One flat row per sample: nested maps become `name.key` columns, lists `name.i`."""
        out = []
        for s in self.series:
            r = {"machine": self.machine, "policy": self.policy}
            for k, v in s.items():
                if isinstance(v, dict):
                    r.update({f"{k}.{kk}": vv for kk, vv in v.items()})
                elif isinstance(v, list):
                    r.update({f"{k}.{i}": vv for i, vv in enumerate(v)})
                else:
                    r[k] = v
            out.append(r)
        return out

    def series_frame(self):
        """The sampled time series as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.series_rows())


class ResultSet(list):
    """Several runs over one trace (what `compare` returns)."""

    #: From a pass over a trace: the seconds each run's engine spent on it (decoding, shared by
    #: the runs, is not in it). Empty otherwise.
    busy_s: list[float] = []

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame([r.row() for r in self])

    def series_frame(self):
        import pandas as pd

        return pd.DataFrame([row for r in self for row in r.series_rows()])


def _path(p):
    """A str, a pathlib.Path or any os.PathLike as a str (None stays None)."""
    return None if p is None else os.fspath(p)


def machine_spec(machine: str | None, tlb: str | None) -> str:
    """`--tlb ENTRIES:WAYS[:PAGESIZE]` becomes an ad-hoc one-structure machine."""
    if tlb:
        return f"tlb:{tlb}"
    return _path(machine) or "skylake"


def run(
    trace: str | os.PathLike,
    runs: Sequence[tuple[str, str]],
    memory: str = "64GiB",
    sample_every: int = 1 << 20,
    allow_truncated: bool = False,
    validate: bool = False,
    progress: bool | None = None,
    label: str = "simulating",
    swap: str = "0",
    replacement: str = "clock",
    bloat: bool = False,
    map_every: int | None = None,
    map_region: str | None = None,
) -> ResultSet:
    """Simulate `trace` once for every (machine, policy) pair, decoding it once. `bloat`
    records touched pages to report `bloat.<size>` (a lookup per access); `map_every` keeps a
    frame of the physical-memory map every so many accesses (`Result.map`), with cells of
    `map_region` bytes (default: the machine's largest page size)."""
    trace = os.fspath(trace)
    if not os.path.exists(trace):
        raise _core.FileAccessError(f"{trace}: no such file")
    plan = Progress("planning", enabled=progress)

    def planning(what: str, fraction: float) -> None:
        plan.label = what
        plan.update(fraction)

    try:
        sim = _core.Simulation(trace, list(runs), memory, sample_every, allow_truncated, validate, swap, replacement, planning,
                               bloat=bloat, map_every=map_every or 0, map_region=map_region)
    finally:
        plan.close()
    bar = Progress(label, enabled=progress)
    try:
        while sim.step(4):
            bar.update(sim.progress())
    finally:
        bar.close()
    cut = sim.truncated()
    out = ResultSet(Result.from_json(j, trace=trace, trace_truncated=cut) for j in sim.results_json())
    out.busy_s = sim.busy_seconds()
    return out


def simulate(
    trace: str | os.PathLike | None = None,
    machine: str | None = None,
    policy: str | None = None,
    memory: str = "64GiB",
    tlb: str | None = None,
    sample_every: int | None = None,
    allow_truncated: bool = False,
    validate: bool = False,
    progress: bool | None = None,
    scenario: str | None = None,
    swap: str = "0",
    replacement: str = "clock",
    bloat: bool = False,
    map_every: int | None = None,
    map_region: str | None = None,
) -> Result:
    """Simulate one trace on one machine under one policy; or, with `scenario=FILE.toml`, a
    scenario (its memory, prelude and processes; `machine`/`policy` override its own).

    `bloat=True` adds `bloat.<size>` and `bloat.total`: bytes of resident superpages that no
    access touched (docs/USER_GUIDE.md, "Result fields"); it costs a lookup per access.

    `swap` (e.g. "8GiB") lets anonymous memory be swapped out under pressure, chosen by
    `replacement` ("clock", "lru" or "arc"); with no swap, running out of memory stops the run."""
    trace, scenario, policy = _path(trace), _path(scenario), _path(policy)
    if scenario is not None:
        if trace is not None:
            raise _core.UsageError("give a trace or a scenario, not both")
        return simulate_scenario(scenario, machine=machine_spec(machine, tlb) if (machine or tlb) else None,
                                 policy=policy, sample_every=sample_every, validate=validate, progress=progress, bloat=bloat,
                                 map_every=map_every, map_region=map_region)
    if trace is None:
        raise _core.UsageError("simulate needs a trace (or scenario=FILE.toml)")
    return run(trace, [(machine_spec(machine, tlb), policy or "base")], memory,
               (1 << 20) if sample_every is None else sample_every, allow_truncated, validate, progress,
               swap=swap, replacement=replacement, bloat=bloat, map_every=map_every, map_region=map_region)[0]


SCENARIO_DIR = os.path.join(os.path.dirname(__file__), "scenarios")


def scenarios() -> list[tuple[str, str]]:
    """Bundled scenarios: (name, first comment line)."""
    out = []
    for f in sorted(os.listdir(SCENARIO_DIR)):
        if f.endswith(".toml"):
            with open(os.path.join(SCENARIO_DIR, f)) as fh:
                text = fh.read()
            m = re.search(r'^description\s*=\s*"([^"]*)"', text, re.M)
            out.append((f[:-5], m.group(1) if m else ""))
    return out


def scenario_path(name_or_path: str) -> str:
    """A scenario file by path, or a bundled scenario by name."""
    name_or_path = os.fspath(name_or_path)
    if os.path.exists(name_or_path):
        return name_or_path
    bundled = os.path.join(SCENARIO_DIR, name_or_path + ("" if name_or_path.endswith(".toml") else ".toml"))
    if os.path.exists(bundled):
        return bundled
    names = ", ".join(n for n, _ in scenarios())
    raise _core.FileAccessError(f"{name_or_path}: no such scenario file (bundled scenarios: {names})")


def simulate_scenario(
    scenario: str,
    machine: str | None = None,
    policy: str | None = None,
    sample_every: int | None = None,
    validate: bool = False,
    progress: bool | None = None,
    bloat: bool = False,
    map_every: int | None = None,
    map_region: str | None = None,
) -> Result:
    """Run a scenario file (docs/SCENARIOS.md): prelude, then its processes, interleaved."""
    scenario = scenario_path(scenario)
    bar = Progress("scenario", enabled=progress)
    def report(label: str, f: float) -> None:
        bar.label = label
        bar.update(f)
    try:
        run_ = _core.ScenarioRun(scenario, machine, policy, sample_every, validate, report, bloat=bloat,
                                 map_every=map_every or 0, map_region=map_region)
        bar.label = f"simulating {os.path.basename(scenario)}"
        while run_.step(4):
            bar.update(run_.progress())
    finally:
        bar.close()
    return Result.from_json(run_.results_json(), trace=scenario)


def compare(
    trace: str | os.PathLike,
    machines: Iterable[str] = ("skylake",),
    policies: Iterable[str] = ("base",),
    memory: str = "64GiB",
    sample_every: int = 1 << 20,
    allow_truncated: bool = False,
    progress: bool | None = None,
    bloat: bool = False,
    map_every: int | None = None,
    map_region: str | None = None,
) -> ResultSet:
    """Every machine x every policy, side by side, in one pass over the trace."""
    runs = [(m, p) for m in machines for p in policies]
    return run(trace, runs, memory, sample_every, allow_truncated, False, progress, label="comparing", bloat=bloat,
               map_every=map_every, map_region=map_region)


def gen(kind: str, out: str, size: str = "64MiB", accesses: int = 0, seed: int = 1, stride: str = "4KiB",
        elem: int = 8, alpha: float = 0.99, base: int = 0x7F0000000000, passes: int = 1,
        progress: bool | None = None, warm: bool = False, collapse: str = "page") -> dict:
    """Generate a synthetic workload trace (see `superpager gen --help` for the kinds). `warm`
    (chase only): every page touched and the cycle run once before a phase mark, as calibrate's
    chase.c does before it times. `collapse`: consecutive accesses join into one record within
    a 4KiB page ("page") or a 64-byte line ("line", for the runtime model's caches)."""
    bar = Progress(f"gen {kind}", enabled=progress)
    try:
        return _core.gen(kind, os.fspath(out), size, accesses, seed, stride, elem, alpha, base, passes, bar.update, warm, collapse)
    finally:
        bar.close()


def _with_progress(label: str, progress: bool | None, fn):
    bar = Progress(label, enabled=progress)
    try:
        return fn(bar.update)
    finally:
        bar.close()


def mrc(trace: str, page_size: str = "4KiB", max_entries: int = 1536, stream: str = "all",
        progress: bool | None = None) -> dict:
    """Misses of a fully associative LRU TLB for 1..max_entries entries, from one pass."""
    accesses, cold, curve = _with_progress("mrc", progress, lambda cb: _core.mrc(os.fspath(trace), page_size, max_entries, stream, cb))
    return {"accesses": accesses, "cold_misses": cold, "page_size": page_size, "misses": curve}


def trace_info(trace: str, page_sizes: Sequence[str] = ("4KiB", "2MiB", "1GiB"), allow_truncated: bool = False,
               progress: bool | None = None) -> dict:
    """Records, accesses by kind, events, footprint in pages of each size, VMAs."""
    return _with_progress("reading", progress, lambda cb: _core.trace_info(os.fspath(trace), list(page_sizes), allow_truncated, cb))


def trace_import(src: str, fmt: str, out: str, fetches: bool = True, collapse: bool | str = True,
                 progress: bool | None = None) -> dict:
    """Convert a lackey, ChampSim or text trace into .spt. `collapse`: "page" (or True) joins
    consecutive accesses to one 4KiB page into a record, "line" to one 64-byte line; False keeps
    every access as its own record."""
    how = "none" if collapse is False else "page" if collapse is True else collapse
    return _with_progress(f"importing {fmt}", progress,
                          lambda cb: _core.trace_import(os.fspath(src), fmt, os.fspath(out), fetches, how, cb))


def trace_join(inputs: Sequence[str], out: str, progress: bool | None = None) -> dict:
    """Join traces one after another into one trace of several processes: each input's pids
    are shifted past the previous inputs' (docs/TRACE_FORMAT.md, "Joining traces")."""
    return _with_progress("joining", progress, lambda cb: _core.trace_join([os.fspath(p) for p in inputs], os.fspath(out), cb))


def trace_merge(inputs: Sequence[str], out: str, slice: int = 10_000, quantum: int | None = None, progress: bool | None = None) -> dict:
    """Merge traces side by side into one trace of several processes, as programs sharing a
    machine run (AMSQM's heavy traces): the input with the lowest instruction clock runs for
    `slice` instructions (accesses, for an input with no instruction marks), or with `quantum`
    the inputs take turns of that many accesses. Processes are renumbered in order of first
    appearance (docs/TRACE_FORMAT.md, "Merging traces")."""
    return _with_progress("merging", progress, lambda cb: _core.trace_merge([os.fspath(p) for p in inputs], os.fspath(out), slice, quantum, cb))


def fragmentation(machine: str, policy: str, memory: str, program: str, runs: int = 4, seed: int = 1,
                  wired: int = 0, web_files: int = 20000, web_min: str = "4KiB", web_max: str = "64KiB",
                  web_requests: int = 100000, web_alpha: float = 0.8, sample_every: int = 1_000_000,
                  validate: bool = False) -> dict:
    """Navarro et al.'s sustained-benefit experiment (Figs. 4-5) on one machine: `wired` wired frames,
    a web server filling memory with its files, the `program` trace run `runs` times in a row, the web
    server again. Returns a dict with `phases` (per phase: page_ins, walks, promotions,
    largest_pages_peak, contiguity_end, ...), the contiguity `series` and the run's `counters`."""
    return json.loads(_core.fragmentation_experiment(
        machine, policy, memory, program, runs=runs, seed=seed, wired=wired, web_files=web_files, web_min=web_min,
        web_max=web_max, web_requests=web_requests, web_alpha=web_alpha, sample_every=sample_every, validate=validate))


def strided_preemption(machine: str, policy: str, memory: str, free_extents: int, stride: str, touches: int,
                       free_memory: str = "extents") -> dict:
    """Navarro et al.'s strided-preemption adversary: memory wired except `free_extents` extents of the
    largest page size, then one write every `stride` bytes, `touches` times. `free_memory` says how the
    free memory lies: `"extents"`, whole; `"scattered"`, reserved by another process that populates every
    base page but one of each smallest-superpage region, so every free frame is alone inside a
    reservation. Counts are the strided process's (`faults_preempting`: its faults that preempted a
    reservation); `counters` are the whole run's."""
    return json.loads(_core.strided_preemption(machine, policy, memory, free_extents, stride, touches, free_memory))


def dirty_file(machine: str, policy: str, memory: str, file_size: str, every: int) -> dict:
    """Navarro et al.'s dirty-file adversary: map a file shared, read every page, write every `every`-th
    page; `flush_bytes` is what the flush writes."""
    return json.loads(_core.dirty_file(machine, policy, memory, file_size, every))


def shared_file(machine: str, policy: str, memory: str, file_size: str, processes: int, passes: int) -> dict:
    """Aligned placement of file mappings (Navarro et al.): `processes` processes map one file shared at
    Linux-like 2MB-aligned addresses (every other one off a 4MB boundary) and each reads every page
    `passes` times. Per process: `trace_addresses`, `placed_addresses` (where the OS put the mapping) and
    `walks` (and `walks_after_first_pass`); `superpages` counts file promotions per size."""
    return json.loads(_core.shared_file(machine, policy, memory, file_size, processes, passes))


def machines() -> list[tuple[str, str, str]]:
    return _core.machines()


def policies() -> list[tuple[str, str, str]]:
    return _core.policies()


def write_results(results: Sequence[Result], out_dir: str) -> list[str]:
    """Write results.json, counters.parquet (a row per run) and series.parquet (a row per
    sample), as one set: each file whole, under the directory's lock, any file of an earlier
    run that this set lacks removed (superpager.output). Deterministic: same results, same bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from . import output

    out_dir = os.fspath(out_dir)
    ident = ["trace", "trace_truncated", "machine", "policy", "memory"]

    def results_json(p: str) -> None:
        with open(p, "w") as f:
            json.dump([r.to_dict() for r in results], f, indent=2, sort_keys=True)
            f.write("\n")

    def counters(p: str) -> None:
        rows = [r.row() for r in results]
        cols = ident + sorted({k for r in rows for k in r} - set(ident))
        pq.write_table(pa.table({c: [r.get(c) for r in rows] for c in cols}), p, compression="zstd")

    srows = [row for r in results for row in r.series_rows()]

    def series(p: str) -> None:
        scols = list(dict.fromkeys(k for r in srows for k in r))
        pq.write_table(pa.table({c: [r.get(c) for r in srows] for c in scols}), p, compression="zstd")

    files = {"results.json": results_json, "counters.parquet": counters}
    if srows:
        files["series.parquet"] = series
    with output.locked_dir(out_dir):
        return output.write_set(out_dir, files)
