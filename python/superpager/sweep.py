"""Sweeps: a grid of traces x machines x policies x parameters x memory sizes, run on a local
process pool (every core by default) or on a Ray cluster, every run stored in the results store.

A grid file (docs/RESULTS.md has the full reference):

    name = "thp-vs-navarro"
    machines = ["skylake", "zen3"]
    policies = ["base", "linux-thp", "navarro"]
    memory = ["8GiB", "64GiB"]

    [[trace]]                 # trace files; globs and paths relative to this file
    path = "traces/*.spt"

    [[gen]]                   # synthetic traces, made on first use (any key may be a list)
    kind = "gups"
    size = ["64MiB", "256MiB"]
    accesses = "1M"

    [[workload]]              # suite workloads, captured on first use (qemu-user)
    name = "btree"
    size = "256MiB"

    [params.linux-thp]        # every combination becomes a policy variant
    max_ptes_none = [0, 511]

Runs already in the store (same trace content, machine, policy, memory, options, version) are
skipped, so a sweep that was killed resumes where it stopped; `force` runs them again.
One run's failure is reported at the end and does not stop the others.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import os
import sys
import time
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from . import _core, api
from . import store as st

GRID_KEYS = {"name", "description", "machines", "policies", "memory", "sample_every", "swap", "replacement", "bloat", "map_every", "map_region",
             "trace", "gen", "workload", "params"}
GEN_KEYS = {"kind", "size", "accesses", "seed", "stride", "elem", "alpha", "passes"}
WORKLOAD_KEYS = {"name", "size", "args"}


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: everything a worker needs (plain data, so it pickles and ships)."""

    trace: str
    machine: str
    policy: str
    memory: str = "64GiB"
    #: None: a scenario's own interval.
    sample_every: int | None = 1 << 20
    swap: str = "0"
    replacement: str = "clock"
    bloat: bool = False
    map_every: int | None = None
    map_region: str | None = None
    trace_sha256: str = ""
    #: `trace` is a scenario file (its memory, prelude and processes); machine and policy, when
    #: not empty, override the scenario's own.
    scenario: bool = False

    def options(self) -> dict:
        """The options that change the numbers, as the store keys them (defaults left out so that a
        sweep run and the same `simulate --db` run share a key)."""
        o: dict = {"sample_every": self.sample_every}
        if self.swap != "0":
            o["swap"] = self.swap
        if self.replacement != "clock":
            o["replacement"] = self.replacement
        if self.bloat:
            o["bloat"] = True
        if self.map_every:
            o["map_every"] = self.map_every
        if self.map_region:
            o["map_region"] = self.map_region
        return o

    def key(self) -> st.RunKey:
        return st.run_key(self.trace, self.machine, self.policy, self.memory, trace_sha256=self.trace_sha256, **self.options())

    def label(self) -> str:
        return f"{os.path.basename(self.trace)} {self.machine} {self.policy} {self.memory}"


def execute(spec: RunSpec, trace_path: str | None = None) -> tuple[bool, str, float]:
    """Run one spec (in a worker): (ok, the result's JSON or a one-line error, wall seconds)."""
    t0 = time.perf_counter()
    try:
        if spec.scenario:
            r = api.simulate(scenario=trace_path or spec.trace, machine=spec.machine or None, policy=spec.policy or None,
                             sample_every=spec.sample_every, bloat=spec.bloat, map_every=spec.map_every, map_region=spec.map_region,
                             progress=False)
            return True, r.to_json(), time.perf_counter() - t0
        r = one_pass([spec], trace_path)[0]
        r.trace = spec.trace
        return True, r.to_json(), time.perf_counter() - t0
    except Exception as e:  # a failed run is reported, never fatal to the sweep
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", time.perf_counter() - t0


def one_pass(specs: list[RunSpec], trace_path: str | None = None) -> api.ResultSet:
    """The runs of `specs` (over one trace, with the same memory and options) in one pass over
    the trace (api.run), each as api.simulate would run it alone."""
    s = specs[0]
    return api.run(trace_path or s.trace, [(api.machine_spec(x.machine, None), x.policy or "base") for x in specs], s.memory,
                   (1 << 20) if s.sample_every is None else s.sample_every, swap=s.swap, replacement=s.replacement, bloat=s.bloat,
                   map_every=s.map_every, map_region=s.map_region, progress=False)


def execute_group(specs: list[RunSpec]) -> list[tuple[bool, str, float]]:
    """Runs over one trace with the same memory and options (in a worker), in one pass that
    decodes the trace once for all of them (api.run): per run, what execute gives, its time being
    its engine's own. If the pass fails, each run is tried alone, so that one failing run is
    reported with its own error and the others still finish."""
    if len(specs) == 1:
        return [execute(specs[0])]
    try:
        rs = one_pass(specs)
    except Exception:
        return [execute(x) for x in specs]
    out = []
    for x, r, busy in zip(specs, rs, rs.busy_s):
        r.trace = x.trace
        out.append((True, r.to_json(), busy))
    return out


# --- grid files ------------------------------------------------------------------------------------


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def _product(table: dict) -> list[dict]:
    """Every combination of a table whose values may be lists."""
    keys = sorted(table)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(_as_list(table[k]) for k in keys))]


@dataclass
class Grid:
    path: str
    name: str
    traces: list[str] = field(default_factory=list)
    gens: list[dict] = field(default_factory=list)
    workloads: list[dict] = field(default_factory=list)
    machines: list[str] = field(default_factory=list)
    policies: list[str] = field(default_factory=list)
    memory: list[str] = field(default_factory=list)
    options: dict = field(default_factory=dict)

    def size(self) -> int:
        return (len(self.traces) + len(self.gens) + len(self.workloads)) * len(self.machines) * len(self.policies) * len(self.memory)


def load_grid(path: str) -> Grid:
    """Parse and check a grid file; errors name the file and key."""
    import glob

    def bad(key: str, why: str) -> _core.ConfigError:
        return _core.ConfigError(f"{path}: {key}: {why}")

    try:
        with open(path, "rb") as f:
            d = tomllib.load(f)
    except FileNotFoundError:
        raise _core.FileAccessError(f"{path}: no such grid file") from None
    except tomllib.TOMLDecodeError as e:
        raise _core.ConfigError(f"{path}: not valid TOML: {e}") from None
    def known(table: dict, keys: set[str], where: str = "") -> None:
        for k in table:
            if k not in keys:
                raise bad(f"{where}{k}", f"unknown key (known: {', '.join(sorted(keys))})")

    known(d, GRID_KEYS)
    here = os.path.dirname(os.path.abspath(path))
    g = Grid(path=path, name=str(d.get("name", os.path.splitext(os.path.basename(path))[0])))
    for i, t in enumerate(_as_list(d.get("trace", []))):
        if not isinstance(t, dict) or set(t) != {"path"}:
            raise bad(f"trace[{i}]", "give path = \"FILE.spt\" (a glob may match several)")
        pat = os.path.join(here, os.path.expanduser(str(t["path"])))
        hits = sorted(glob.glob(pat)) if any(ch in pat for ch in "*?[") else [pat]
        if not hits or not all(os.path.isfile(h) for h in hits):
            raise bad(f"trace[{i}].path", f"{t['path']}: no such trace file")
        g.traces += [os.path.normpath(h) for h in hits]
    for i, gsec in enumerate(_as_list(d.get("gen", []))):
        if not isinstance(gsec, dict) or "kind" not in gsec:
            raise bad(f"gen[{i}]", "needs kind = \"gups\" (see superpager gen --help)")
        known(gsec, GEN_KEYS, f"gen[{i}].")
        kinds = {k for k, _ in _core.gen_kinds()}
        for combo in _product(gsec):
            if combo["kind"] not in kinds:
                raise bad(f"gen[{i}].kind", f"unknown kind {combo['kind']!r} (known: {', '.join(sorted(kinds))})")
            g.gens.append(combo)
    for i, w in enumerate(_as_list(d.get("workload", []))):
        if not isinstance(w, dict) or "name" not in w:
            raise bad(f"workload[{i}]", "needs name = \"btree\" (see superpager workloads list)")
        known(w, WORKLOAD_KEYS, f"workload[{i}].")
        g.workloads += _product({k: v for k, v in w.items() if k != "args"} | ({"args": [w["args"]]} if "args" in w else {}))
    for key, default in (("machines", ["skylake"]), ("policies", ["base"]), ("memory", ["64GiB"])):
        v = d.get(key, default)
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x.strip() for x in v):
            raise bad(key, "a non-empty list of strings")
        setattr(g, key, list(v))
    params = d.get("params", {})
    if not isinstance(params, dict):
        raise bad("params", "a table of policy name -> {parameter = [values]}")
    policies = []
    for p in g.policies:
        name = p.split(":", 1)[0]
        if name in params:
            if not isinstance(params[name], dict) or not params[name]:
                raise bad(f"params.{name}", "a table of parameter = value or [values]")
            for combo in _product(params[name]):
                extra = ",".join(f"{k}={_tomlval(v)}" for k, v in combo.items())
                policies.append(f"{p},{extra}" if ":" in p else f"{p}:{extra}")
        else:
            policies.append(p)
    for name in params:
        if not any(p.split(":", 1)[0] == name for p in g.policies):
            raise bad(f"params.{name}", f"no policy {name!r} in policies")
    g.policies = list(dict.fromkeys(policies))
    for m in g.machines:
        for p in g.policies:
            try:
                _core.check_policy(p, m)
            except _core.SuperpagerError as e:
                raise bad("policies", f"{p} on {m}: {e}") from None
    for k in ("sample_every", "swap", "replacement", "bloat", "map_every", "map_region"):
        if k in d:
            g.options[k] = d[k]
    if not (g.traces or g.gens or g.workloads):
        raise bad("trace", "the grid has no traces: give [[trace]], [[gen]] or [[workload]] sections")
    return g


def _tomlval(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def gen_trace(spec: dict, progress: Callable[[str], None]) -> str:
    """A [[gen]] combination's trace, made once into the cache (same keys, same file)."""
    from .capture import cache_dir

    d = cache_dir() / "sweeps"
    d.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(json.dumps([spec, _core.__version__], sort_keys=True).encode()).hexdigest()[:12]
    path = d / f"gen-{spec['kind']}-{spec.get('size', '64MiB')}-{tag}.spt"
    if not path.exists():
        progress(f"generating {spec['kind']} {spec.get('size', '')}")
        from .cli import count

        tmp = str(path) + f".partial-{os.getpid()}"
        acc = spec.get("accesses", 0)
        api.gen(spec["kind"], tmp, size=str(spec.get("size", "64MiB")), accesses=count(str(acc)) if isinstance(acc, str) else int(acc),
                seed=int(spec.get("seed", 1)), stride=str(spec.get("stride", "4KiB")), elem=int(spec.get("elem", 8)),
                alpha=float(spec.get("alpha", 0.99)), passes=int(spec.get("passes", 1)), progress=False)
        os.replace(tmp, path)
    return str(path)


def expand(g: Grid, db: st.Store, progress: Callable[[str], None] = lambda m: None) -> list[RunSpec]:
    """The grid's runs, in a fixed order, with traces made and hashed."""
    from .reproduce import trace_for

    traces = list(g.traces)
    traces += [gen_trace(s, progress) for s in g.gens]
    traces += [trace_for(w["name"], str(w.get("size", "256MiB")), progress, tuple(str(a) for a in _as_list(w.get("args", []))))
               for w in g.workloads]
    out = []
    for t in traces:
        h = db.trace_sha256(t)
        for m, p, mem in itertools.product(g.machines, g.policies, g.memory):
            out.append(RunSpec(trace=t, machine=m, policy=p, memory=mem, trace_sha256=h, **g.options))
    return out


# --- engines ----------------------------------------------------------------------------------------


@dataclass
class Outcome:
    done: int = 0
    reused: int = 0
    failed: list[tuple[RunSpec, str]] = field(default_factory=list)
    interrupted: bool = False


def trace_cost(path: str) -> int:
    """The records a run over the trace reads (its index's count; the file size without one): a
    run's time follows it, not the file size (fft's 785M records compress to 29MB)."""
    totals = _core.trace_totals(os.fspath(path))
    return totals[0] if totals else os.path.getsize(path)


def longest_first(specs: list[RunSpec]) -> list[RunSpec]:
    """The runs in the order a pool should start them: the traces with the most records first,
    so that no long run is left for the end with the other workers idle; scenarios (whose cost
    their file does not tell) after, and ties in grid order."""
    costs: dict[str, int] = {}

    def cost(s: RunSpec) -> int:
        if s.scenario:
            return -1
        if s.trace not in costs:
            costs[s.trace] = trace_cost(s.trace)
        return costs[s.trace]

    return sorted(specs, key=lambda s: -cost(s))


def balanced_groups(items: list, weights: list[int], n: int) -> list[list]:
    """`items` cut into at most `n` groups of nearly equal total weight: the heaviest item goes
    first, each to the group with the least weight so far (longest processing time first), and
    each group keeps the items' order. `Runner.submit` cuts a trace's runs into one task per
    worker with it, so that a run that plans over the trace first (romer:offline, 9 passes on
    the default 8 planning passes) is not put beside half of the others (docs/RESULTS.md)."""
    groups: list[list[int]] = [[] for _ in range(min(n, len(items)))]
    totals = [0] * len(groups)
    for k in sorted(range(len(items)), key=lambda k: -weights[k]):
        g = totals.index(min(totals))
        groups[g].append(k)
        totals[g] += weights[k]
    return [[items[k] for k in sorted(g)] for g in groups if g]


def _local(specs: list[RunSpec], jobs: int) -> Iterator[tuple[RunSpec, tuple[bool, str, float]]]:
    """Runs on a process pool of `jobs` workers, yielding as each finishes."""
    import concurrent.futures as cf
    import multiprocessing as mp

    if jobs <= 1:
        for s in specs:
            yield s, execute(s)
        return
    # forkserver: workers start from a clean interpreter, not a copy of a parent holding a DuckDB
    # connection and its threads.
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("forkserver"), initializer=_one_thread) as pool:
        futs = {pool.submit(execute, s): s for s in longest_first(specs)}
        try:
            for f in cf.as_completed(futs):
                yield futs[f], f.result()
        finally:
            for f in futs:
                f.cancel()


def _ray_materialize(spec: RunSpec, blob) -> str:
    """On a Ray worker: the trace's path, written from the shipped bytes when the worker does not
    share the file system (or holds another file under that name)."""
    import tempfile

    if blob is None:
        return spec.trace
    path = os.path.join(tempfile.gettempdir(), f"superpager-ray-{spec.trace_sha256[:16]}.spt")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    return path


def _ray_task(spec: RunSpec, blob) -> tuple[bool, str, float]:
    return execute(spec, _ray_materialize(spec, blob))


def _ray(specs: list[RunSpec], address: str | None, ship: bool) -> Iterator[tuple[RunSpec, tuple[bool, str, float]]]:
    try:
        import ray
    except ImportError:
        raise _core.UsageError("--engine ray needs the ray package: pip install 'ray[default]' (make setup installs it)") from None
    import logging

    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.ERROR)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        blobs: dict[str, object] = {}
        if ship:
            for s in specs:
                if s.trace_sha256 not in blobs:
                    with open(s.trace, "rb") as f:
                        blobs[s.trace_sha256] = ray.put(f.read())
        refs = {remote.remote(s, blobs.get(s.trace_sha256)): s for s in specs}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    out = ray.get(r)
                except Exception as e:  # the worker died: a failed run, not a failed sweep
                    out = (False, f"ray: {str(e).splitlines()[0]}", 0.0)
                yield refs[r], out
    finally:
        ray.shutdown()


def run(specs: list[RunSpec], db: st.Store, engine: str = "local", jobs: int | None = None, address: str | None = None,
        ship: bool = False, force: bool = False, sweep: str | None = None,
        on_run: Callable[[RunSpec, bool, str, float], None] | None = None,
        progress: Callable[[int, int, int, float], None] | None = None) -> Outcome:
    """Run `specs` (skipping those already stored unless `force`), storing each as it finishes."""
    out = Outcome()
    t0 = time.perf_counter()
    have = set() if force else db.done_ids()
    todo = []
    seen = set()
    for s in specs:
        rid = s.key().run_id
        if rid in have:
            out.reused += 1
        elif rid not in seen:
            seen.add(rid)
            todo.append(s)
    if engine == "local":
        it: Iterable = _local(todo, jobs or os.cpu_count() or 1)
    elif engine == "ray":
        it = _ray(todo, address, ship)
    else:
        raise _core.UsageError(f"--engine {engine}: unknown engine (local or ray)")
    if progress:
        progress(0, 0, len(todo), 0.0)
    try:
        for s, (ok, payload, wall) in it:
            if ok:
                r = api.Result.from_json(payload, trace=s.trace)
                db.put(s.key(), r, wall, sweep=sweep)
                out.done += 1
            else:
                out.failed.append((s, payload))
            if on_run:
                on_run(s, ok, payload if not ok else "", wall)
            if progress:
                progress(out.done, len(out.failed), len(todo), time.perf_counter() - t0)
    except KeyboardInterrupt:
        out.interrupted = True
    return out


def print_failures(out: Outcome, file=sys.stderr) -> None:
    for s, why in out.failed:
        print(f"superpager: sweep: run failed: {s.label()}: {why}", file=file)


# --- a pool for code that runs many independent simulations (reproduce) ---------------------------


def _one_thread() -> None:
    """A pool worker's initializer: its runs use one thread (the pool fills the cores)."""
    os.environ["SUPERPAGER_THREADS"] = "1"


class Pending:
    """Runs submitted together: result() waits for them and gives a ResultSet in their order."""

    def __init__(self, runner: Runner, items: list):
        self.runner = runner
        # Per run: an api.Result (already known), or (spec, the future of its group's task, its
        # place in the group).
        self.items = items

    def result(self) -> api.ResultSet:
        out = api.ResultSet()
        for i, it in enumerate(self.items):
            if not isinstance(it, api.Result):
                spec, fut, k = it
                ok, payload, wall = fut.result()[k]
                if not ok:
                    raise _core.SimulationError(f"{spec.label()}: {payload}")
                r = api.Result.from_json(payload, trace=spec.trace)
                with self.runner.lock:
                    if self.runner.db is not None:
                        self.runner.db.put(spec.key(), r, wall, sweep=self.runner.label)
                    self.runner.results.append((spec.key().run_id if self.runner.db is not None else f"run{len(self.runner.results) + 1}", r))
                self.items[i] = it = r
            out.append(it)
        return out


class Runner:
    """Independent simulations on a process pool (`jobs` workers; 1: in this process), each
    (machine, policy) run a task of its own so that the workers stay busy. With a results store,
    runs it holds are taken from it and new ones are added. Results are the same whatever `jobs`.

        with Runner(jobs=2) as pool:
            a = pool.submit(trace, [("skylake", "base"), ("skylake", "navarro")], "4GiB", 0)
            b = pool.submit(...)
            base, nav = a.result()
    """

    def __init__(self, jobs: int | None = None, db: st.Store | None = None, label: str | None = None):
        self.jobs = jobs or os.cpu_count() or 1
        if self.jobs == 1:
            # Serial means serial: the runs in this process use one thread for their engines.
            _one_thread()
        self.db = db
        self.label = label
        self._pool = None
        #: Held around the store and the pool: several threads may submit (papers run side by
        #: side in `reproduce all`), and a store connection is not safe to share between threads.
        self.lock = threading.RLock()
        self.submitted = 0
        self.reused = 0
        #: Tasks not yet handed to the pool, a heap of (-cost, order, fn, arg, future): the pool
        #: is given at most `jobs` tasks at a time, and a freed worker takes the costliest task
        #: waiting from any submission (see _dispatch).
        self._waiting: list = []
        self._running = 0
        self._order = itertools.count()
        self._costs: dict[str, int] = {}
        self._weights: dict[tuple[str, str], int] = {}
        #: Every result this runner gave, (run id, Result), for reports.
        self.results: list[tuple[str, api.Result]] = []

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self.lock:
            # Tasks never started: cancelled, so that nothing waits on them for ever.
            for *_, f in self._waiting:
                f.cancel()
            self._waiting.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _executor(self):
        with self.lock:
            if self._pool is None:
                import concurrent.futures as cf
                import multiprocessing as mp

                self._pool = cf.ProcessPoolExecutor(max_workers=self.jobs, mp_context=mp.get_context("forkserver"), initializer=_one_thread)
            return self._pool

    def _start(self, fn, arg, cost: float):
        """A future of fn(arg): queued for the pool (the costliest waiting task starts first), or
        run now in this process."""
        import concurrent.futures as cf

        f: cf.Future = cf.Future()
        if self.jobs == 1:
            f.set_result(fn(arg))
            return f
        with self.lock:
            heapq.heappush(self._waiting, (-cost, next(self._order), fn, arg, f))
            self._dispatch()
        return f

    def _dispatch(self) -> None:
        """Hands waiting tasks to the pool while a worker is free, costliest first, across every
        submission (longest processing time first), so that a costly task submitted late does
        not run alone at the end. It helps only with costs that count what a run does: ordered
        by records x runs, `reproduce romer` got slower (docs/RESULTS.md); `_cost` counts passes.
        Called with the lock held."""
        while self._running < self.jobs and self._waiting:
            *_, fn, arg, f = heapq.heappop(self._waiting)
            if not f.set_running_or_notify_cancel():
                continue
            try:
                task = self._executor().submit(fn, arg)
            except Exception as e:  # a broken pool: the caller hears of it instead of waiting
                f.set_exception(e)
                continue
            self._running += 1
            task.add_done_callback(lambda done, f=f: self._finished(done, f))

    def _finished(self, done, f) -> None:
        """A pool task ended: its worker takes the next task, and its result goes to the caller."""
        with self.lock:
            self._running -= 1
            if self._pool is not None:
                self._dispatch()
        if done.cancelled():
            import concurrent.futures as cf

            f.set_exception(cf.CancelledError())
        elif done.exception() is not None:
            f.set_exception(done.exception())
        else:
            f.set_result(done.result())

    def _passes(self, spec: RunSpec) -> int:
        """Passes over its trace a run makes at most (`_core.policy_passes`: OFFLINE's planning
        passes count); 1 for a scenario or a policy that does not parse (its run reports that)."""
        if spec.scenario:
            return 1
        key = (spec.policy, spec.machine)
        if key not in self._weights:
            try:
                self._weights[key] = _core.policy_passes(spec.policy, spec.machine)
            except _core.SuperpagerError:
                self._weights[key] = 1
        return self._weights[key]

    def _cost(self, specs: list[RunSpec]) -> float:
        """What a task costs, for _dispatch: its trace's records times its runs' passes (one
        pass drives every engine, and the engines take most of the time). Scenarios, whose cost
        their file does not tell, start before any trace task, in the order submitted."""
        if any(s.scenario for s in specs):
            return float("inf")
        t = specs[0].trace
        if t not in self._costs:
            self._costs[t] = trace_cost(t)
        return self._costs[t] * sum(self._passes(s) for s in specs)

    def submit(self, trace: str, runs: list[tuple[str, str]], memory: str = "64GiB", sample_every: int = 0, **options) -> Pending:
        """Start the `runs` over `trace` that the store lacks. They are cut into as many tasks as
        there are workers (one serially), each a single pass over the trace for its runs: the
        trace is decoded once per task instead of once per run, and every worker has a share.
        A freed worker takes the costliest task waiting (_dispatch), whatever its submission."""
        with self.lock:
            h = self.db.trace_sha256(trace) if self.db is not None else ""
            specs = [RunSpec(trace=str(trace), machine=m, policy=p, memory=memory, sample_every=sample_every, trace_sha256=h, **options)
                     for m, p in runs]
            items: list = [self._stored(s) for s in specs]
        todo = [i for i, it in enumerate(items) if it is None]
        for group in balanced_groups(todo, [self._passes(specs[i]) for i in todo], self.jobs):
            task = [specs[i] for i in group]
            fut = self._start(execute_group, task, self._cost(task))
            for k, i in enumerate(group):
                items[i] = (specs[i], fut, k)
        with self.lock:
            self.submitted += len(todo)
        return Pending(self, items)

    def submit_scenario(self, path: str, policy: str | None = None, machine: str | None = None, sample_every: int | None = None,
                        **options) -> LazyResult:
        """A scenario run, started now; its result is awaited when first looked at."""
        spec = RunSpec(trace=str(path), machine=machine or "", policy=policy or "", memory="(scenario)", sample_every=sample_every,
                       scenario=True, trace_sha256=st.scenario_sha256(str(path)) if self.db is not None else "", **options)
        with self.lock:
            stored = self._stored(spec)
            self.submitted += stored is None
        item = stored if stored is not None else (spec, self._start(execute_group, [spec], self._cost([spec])), 0)
        return LazyResult(Pending(self, [item]))

    def _stored(self, spec: RunSpec) -> api.Result | None:
        """The stored Result of `spec` (counted as reused), or None."""
        if self.db is not None:
            r = self.db.get(spec.key())
            if r is not None:
                self.reused += 1
                self.results.append((spec.key().run_id, r))
                return r
        return None

    def run(self, trace: str, runs: list[tuple[str, str]], memory: str = "64GiB", sample_every: int = 0, **options) -> api.ResultSet:
        return self.submit(trace, runs, memory, sample_every, **options).result()


class LazyResult:
    """An api.Result still being computed on the pool: any use of it waits for it, so code that
    submits many runs and reads them afterwards runs them side by side unchanged."""

    def __init__(self, pending: Pending):
        self._pending = pending
        self._r: api.Result | None = None

    def resolve(self) -> api.Result:
        if self._r is None:
            self._r = self._pending.result()[0]
        return self._r

    def __getattr__(self, name: str):
        return getattr(self.resolve(), name)

    def __getitem__(self, key: str) -> int:
        return self.resolve()[key]
