"""Sweeps (`superpager sweep`): a grid on a local process pool and on a Ray cluster, resumed after
a kill, failures reported without losing the other runs."""
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

import superpager as sp
from superpager import sweep as sw

pytest.importorskip("duckdb", reason="the results store needs duckdb (make setup installs it)")

GRID = """
name = "t"
machines = ["skylake", "zen3"]
policies = ["base", "linux-thp"]
memory = ["1GiB", "2GiB"]
sample_every = 20000

[[gen]]
kind = "gups"
size = "32MiB"
accesses = "20k"
seed = [1, 2]

[[trace]]
path = "extra.spt"

[params.linux-thp]
max_ptes_none = [0, 511]
"""


@pytest.fixture
def grid(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sp.gen("seq", str(tmp_path / "extra.spt"), size="8MiB", progress=False)
    (tmp_path / "grid.toml").write_text(GRID)
    return tmp_path / "grid.toml"


def counters(db: str) -> dict:
    df = sp.results(db=db, sql="SELECT run_id, name, value FROM counters ORDER BY run_id, name")
    out: dict = {}
    for r in df.itertuples():
        out.setdefault(r.run_id, {})[r.name] = int(r.value)
    return out


def test_a_grid_expands_to_every_combination(grid, tmp_path):
    g = sw.load_grid(str(grid))
    assert g.policies == ["base", "linux-thp:max_ptes_none=0", "linux-thp:max_ptes_none=511"]
    assert len(g.gens) == 2 and len(g.traces) == 1
    assert g.size() == 3 * 2 * 3 * 2


def test_the_pool_and_one_process_store_the_same_counters(grid, tmp_path, cli):
    env_cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    for db, jobs in (("a.duckdb", "2"), ("b.duckdb", "1")):
        p = subprocess.run([sys.executable, "-m", "superpager.cli", "sweep", str(grid), "--db", db, "--jobs", jobs],
                           capture_output=True, text=True, cwd=tmp_path, env=os.environ | env_cache, timeout=600)
        assert p.returncode == 0, p.stderr
        assert "36 runs stored, 0 reused, 0 failed" in p.stderr
    a, b = counters(str(tmp_path / "a.duckdb")), counters(str(tmp_path / "b.duckdb"))
    assert len(a) == 36 and a == b
    # And the same as simulate gives for one of them.
    r = sp.simulate(str(tmp_path / "extra.spt"), machine="zen3", policy="linux-thp:max_ptes_none=0", memory="2GiB",
                    sample_every=20000, progress=False)
    rid = sp.results(db=str(tmp_path / "a.duckdb"),
                     where="trace LIKE '%extra.spt' AND machine = 'zen3' AND policy = 'linux-thp:max_ptes_none=0' AND memory = '2GiB'").run_id[0]
    assert a[rid] == r.counters


def test_a_killed_sweep_resumes_without_redoing_finished_runs(grid, tmp_path):
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "superpager.cli", "sweep", str(grid), "--db", "k.duckdb", "-v", "--jobs", "2"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path, env=env, start_new_session=True)
    done = []
    for line in p.stdout:
        if line.startswith("done"):
            done.append(line.split()[1])
        if len(done) == 12:
            os.killpg(p.pid, signal.SIGKILL)
            break
    p.wait()
    assert len(done) == 12
    q = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert q.returncode == 0, q.stderr
    stored_before = int(q.stderr.split(" already in ")[0].rsplit(", ", 1)[1])
    assert stored_before >= 12
    again = [l.split()[1] for l in q.stdout.splitlines() if l.startswith("done")]
    assert not set(again) & set(done), "a finished run was run again"
    assert len(again) == 36 - stored_before
    assert len(counters(str(tmp_path / "k.duckdb"))) == 36


def test_one_failed_run_is_reported_and_the_others_are_stored(grid, tmp_path):
    bad = grid.read_text().replace('memory = ["1GiB", "2GiB"]', 'memory = ["1GiB", "16MiB"]')
    grid.write_text(bad)
    p = subprocess.run([sys.executable, "-m", "superpager.cli", "sweep", str(grid), "--db", "f.duckdb", "--jobs", "2"],
                       capture_output=True, text=True, cwd=tmp_path, env=os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=600)
    assert p.returncode == 1
    assert "18 runs stored, 0 reused, 18 failed" in p.stderr
    assert "run failed: " in p.stderr and "too small" in p.stderr
    assert len(counters(str(tmp_path / "f.duckdb"))) == 18


@pytest.mark.parametrize("text, msg", [
    ("bogus = 1\n[[trace]]\npath = 'extra.spt'\n", "grid.toml: bogus: unknown key"),
    ("[[trace]]\npath = 'nope.spt'\n", "grid.toml: trace[0].path: nope.spt: no such trace file"),
    ("[[gen]]\nkind = 'nosuch'\n", "grid.toml: gen[0].kind: unknown kind 'nosuch'"),
    ("policies = ['linux-thp:bogus=1']\n[[trace]]\npath = 'extra.spt'\n", "grid.toml: policies: linux-thp:bogus=1 on skylake"),
    ("[params.navarro]\nx = [1]\n[[trace]]\npath = 'extra.spt'\n", "grid.toml: params.navarro: no policy 'navarro' in policies"),
    ("machines = 'skylake'\n[[trace]]\npath = 'extra.spt'\n", "grid.toml: machines: a non-empty list of strings"),
    ("name = 'x'\n", "grid.toml: trace: the grid has no traces"),
    ("[[trace]\n", "grid.toml: not valid TOML"),
])
def test_bad_grid_files_give_one_line_errors(grid, cli, text, msg):
    grid.write_text(text)
    s, out, err = cli("sweep", str(grid), "--db", "x.duckdb")
    assert s == 2 and msg in err and err.count("\n") == 1, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ray_cluster_stores_the_same_counters_as_the_local_pool(grid, tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (make setup installs it)")
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if not ray_bin:
        pytest.skip("no ray command")
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache"), "RAY_USAGE_STATS_ENABLED": "0"}
    port = _free_port()
    # Ray's sockets live under its temp dir, whose path must stay short (AF_UNIX: 107 bytes).
    import tempfile

    tmp = tempfile.mkdtemp(prefix="spray-", dir="/tmp")
    start = subprocess.run([ray_bin, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                            "--disable-usage-stats", f"--temp-dir={tmp}"], capture_output=True, text=True, env=env, timeout=300)
    assert start.returncode == 0, start.stderr[-2000:]
    try:
        for db, extra in (("ray.duckdb", []), ("ship.duckdb", ["--ship"])):
            p = subprocess.run([sys.executable, "-m", "superpager.cli", "sweep", str(grid), "--db", db, "--engine", "ray",
                                "--address", f"127.0.0.1:{port}", *extra], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
            assert p.returncode == 0, p.stderr[-3000:]
            assert "36 runs stored" in p.stderr
        local = subprocess.run([sys.executable, "-m", "superpager.cli", "sweep", str(grid), "--db", "local.duckdb"],
                               capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
        assert local.returncode == 0, local.stderr
        c = counters(str(tmp_path / "local.duckdb"))
        assert len(c) == 36
        assert counters(str(tmp_path / "ray.duckdb")) == c
        assert counters(str(tmp_path / "ship.duckdb")) == c
    finally:
        subprocess.run([ray_bin, "stop", "--force"], capture_output=True, env=env, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_pool_starts_the_traces_with_the_most_records_first(tmp_path):
    # A sequential sweep compresses far better than random updates: by file size the short
    # trace would come first, by records (what a run's time follows) the long one does.
    short, long_ = str(tmp_path / "short.spt"), str(tmp_path / "long.spt")
    sp.gen("gups", short, size="64MiB", accesses=20_000, seed=1, progress=False)
    sp.gen("seq", long_, size="1MiB", passes=400, progress=False)
    assert sw.trace_cost(long_) > sw.trace_cost(short) and os.path.getsize(long_) < os.path.getsize(short)
    specs = [sw.RunSpec(short, "skylake", "base"), sw.RunSpec(str(tmp_path / "s.toml"), "", "", scenario=True),
             sw.RunSpec(long_, "skylake", "base"), sw.RunSpec(short, "skylake", "linux-thp")]
    order = sw.longest_first(specs)
    assert [(os.path.basename(s.trace), s.policy) for s in order] == [
        ("long.spt", "base"), ("short.spt", "base"), ("short.spt", "linux-thp"), ("s.toml", "")]


def test_the_runner_gives_the_same_results_on_a_pool_and_in_order(tmp_path):
    t = str(tmp_path / "g.spt")
    sp.gen("gups", t, size="64MiB", accesses=30_000, progress=False)
    runs = [("skylake", "base"), ("zen3", "linux-thp"), ("skylake", "navarro")]
    with sw.Runner(jobs=2) as pool:
        a = [pool.submit(t, runs, "1GiB", 0), pool.submit(t, runs[::-1], "2GiB", 0)]
        got = [p.result() for p in a]
        assert pool.submitted == 6
    with sw.Runner(jobs=1) as serial:
        want = [serial.run(t, runs, "1GiB", 0), serial.run(t, runs[::-1], "2GiB", 0)]
    assert [[r.to_dict() for r in rs] for rs in got] == [[r.to_dict() for r in rs] for rs in want]
    # One pass over the trace for every pair gives the same as a run each.
    together = sp.run(t, runs, "1GiB", 0, progress=False)
    assert [r.to_dict() for r in together] == [r.to_dict() for r in want[0]]


def test_the_runner_reuses_what_the_store_holds(tmp_path):
    from superpager import store as st

    t = str(tmp_path / "g.spt")
    sp.gen("gups", t, size="64MiB", accesses=30_000, progress=False)
    with st.Store(str(tmp_path / "r.duckdb")) as db:
        with sw.Runner(jobs=2, db=db) as pool:
            first = pool.run(t, [("skylake", "base"), ("skylake", "fixed:2MiB")], "1GiB", 0)
            assert (pool.submitted, pool.reused) == (2, 0)
        with sw.Runner(jobs=2, db=db) as pool:
            again = pool.run(t, [("skylake", "base"), ("skylake", "fixed:2MiB")], "1GiB", 0)
            assert (pool.submitted, pool.reused) == (0, 2)
    assert [r.to_dict() for r in first] == [r.to_dict() for r in again]


def test_the_runner_cuts_a_submission_into_one_pass_per_worker(tmp_path):
    t = str(tmp_path / "g.spt")
    sp.gen("gups", t, size="64MiB", accesses=30_000, progress=False)
    runs = [("skylake", "base"), ("zen3", "linux-thp"), ("skylake", "navarro"), ("skylake", "fixed:2MiB"), ("zen3", "base")]
    with sw.Runner(jobs=2) as pool:
        p = pool.submit(t, runs, "1GiB", 0)
        assert len({id(fut) for _spec, fut, _k in p.items}) == 2
        got = p.result()
    assert [(r.machine, r.policy) for r in got] == runs
    assert [r.to_dict() for r in got] == [sp.simulate(t, machine=m, policy=pol, memory="1GiB", sample_every=0).to_dict() for m, pol in runs]


def test_a_failing_run_in_a_shared_pass_fails_alone(tmp_path):
    t = str(tmp_path / "g.spt")
    sp.gen("gups", t, size="64MiB", accesses=30_000, progress=False)
    specs = [sw.RunSpec(trace=t, machine="skylake", policy=p, memory="1GiB", sample_every=0) for p in ("base", "no-such-policy", "linux-thp")]
    out = sw.execute_group(specs)
    assert [ok for ok, _payload, _wall in out] == [True, False, True]
    assert "no-such-policy" in out[1][1]
    alone = sp.simulate(t, machine="skylake", policy="linux-thp", memory="1GiB", sample_every=0)
    assert sp.Result.from_json(out[2][1]).counters == alone.counters


class _HeldPool:
    """A stand-in for the process pool: records what it was handed and finishes a task only when
    the test says so."""

    def __init__(self):
        import concurrent.futures as cf

        self.cf = cf
        self.started: list[tuple[str, object]] = []

    def submit(self, fn, arg):
        f = self.cf.Future()
        f.set_running_or_notify_cancel()
        self.started.append((arg, f))
        return f

    def finish(self, arg):
        f = next(f for a, f in self.started if a == arg)
        f.set_result(f"done {arg}")

    def shutdown(self, **kw):
        pass


def test_a_freed_worker_takes_the_costliest_waiting_task_from_any_submission():
    pool = sw.Runner(jobs=2)
    held = _HeldPool()
    pool._pool = held
    futs = {name: pool._start(print, name, cost) for name, cost in (("a", 1), ("b", 5), ("c", 3), ("d", 10), ("e", 2))}
    # Two workers: the first two tasks start as they come; the rest wait.
    assert [a for a, _f in held.started] == ["a", "b"]
    held.finish("a")
    assert [a for a, _f in held.started] == ["a", "b", "d"]
    held.finish("b")
    held.finish("d")
    assert [a for a, _f in held.started] == ["a", "b", "d", "c", "e"]
    assert futs["d"].result(timeout=1) == "done d"
    assert not futs["e"].done()
    # Closing cancels what never started, so that nothing waits on it for ever; what runs ends.
    late = pool._start(print, "f", 100)
    pool.close()
    assert late.cancelled()
    held.finish("c")
    assert futs["c"].result(timeout=1) == "done c"
    assert [a for a, _f in held.started] == ["a", "b", "d", "c", "e"]


def test_a_submission_is_cut_into_groups_of_equal_passes():
    # romer:offline plans over the trace (9 passes by default): alone in one task, the eight
    # runs of one pass each in the other.
    assert sp._core.policy_passes("romer:offline", "romer95") == 9
    assert sp._core.policy_passes("romer:offline,passes=2", "romer95") == 3
    assert sp._core.policy_passes("navarro", "skylake") == 1
    assert sw.balanced_groups(list("abcdefghi"), [1, 1, 1, 1, 1, 9, 1, 1, 1], 2) == [["f"], list("abcdeghi")]
    # Equal weights: the runs dealt out in turn; never an empty group.
    assert sw.balanced_groups(list("abcde"), [1] * 5, 2) == [["a", "c", "e"], ["b", "d"]]
    assert sw.balanced_groups(list("ab"), [1, 1], 4) == [["a"], ["b"]]
