"""damon-live on another agent's DAMON monitor: its damon_aggregated trace events read through a
tracefs instance of ours (superpager/live/damon.py, DamonTrace), the instance recorded and
removed like every other change, and on this machine's kernel where such a monitor runs."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import superpager.live as live
from superpager.live import damon as dm
from superpager.live.sysfs import SysfsChanges, restore_stale


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    monkeypatch.setenv("SUPERPAGER_STATE", str(tmp_path / "state"))


def event(start, end, acc, n, target=0, age=3):
    return (f"       kdamond.0-73      [001] ..... 30646.608053: damon_aggregated: "
            f"target_id={target} nr_regions={n} {start}-{end}: {acc} {age}\n")


def burst(regions):
    return "".join(event(s, e, a, len(regions)) for s, e, a in regions)


A = [(0, 4096, 0), (4096, 8192, 5), (8192, 16384, 1)]
B = [(0, 8192, 2), (8192, 16384, 0)]


def test_a_whole_burst_is_one_aggregation_and_only_accessed_regions_are_hot():
    t = dm.DamonTrace()
    t.feed(burst(A))
    assert t.aggregations == 1 and t.latest == A
    t.read_events = lambda: None  # no tracefs: what was fed is all there is
    assert t.hot_regions() == [(4096, 8192, 5), (8192, 16384, 1)]


def test_a_burst_split_across_reads_completes_on_the_next():
    t = dm.DamonTrace()
    text = burst(A)
    cut = text.index(event(*A[2], 3))
    t.feed(text[:cut])
    assert t.aggregations == 0 and t.latest == [], "half an aggregation is not a ranking"
    t.feed(text[cut:] + burst(B))
    assert t.aggregations == 2 and t.latest == B


def test_a_burst_cut_short_is_dropped_and_the_next_one_kept():
    t = dm.DamonTrace()
    # The first region of A and then B: A's rest was lost (a full trace buffer).
    t.feed(event(*A[0], 3) + burst(B))
    assert t.aggregations == 1 and t.latest == B


def test_events_of_other_targets_and_other_lines_are_ignored():
    t = dm.DamonTrace()
    t.feed("# tracer: nop\n" + event(0, 4096, 9, 2, target=1) + burst(B) + "garbage line\n")
    assert t.latest == B


def damon_tree(root: Path, running_ops: str | None) -> Path:
    """DAMON's sysfs admin tree with kdamond 0 running `running_ops` (or off)."""
    kd = root / "kdamonds"
    ctx = kd / "0" / "contexts" / "0"
    files = {kd / "nr_kdamonds": "1", kd / "0" / "state": "on" if running_ops else "off", kd / "0" / "pid": "73",
             ctx / "avail_operations": "vaddr\nfvaddr\npaddr", ctx / "operations": running_ops or "vaddr",
             ctx / "monitoring_attrs" / "intervals" / "sample_us": "500000",
             ctx / "monitoring_attrs" / "intervals" / "aggr_us": "5000000"}
    for p, v in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(v + "\n")
    return root


class FakeTrace(dm.DamonTrace):
    """tracefs fills a new instance with its event tree; a plain directory does not."""

    def _make_instance(self, changes, path):
        super()._make_instance(changes, path)
        enable = path / self.EVENT
        enable.parent.mkdir(parents=True)
        enable.write_text("0\n")
        (path / "trace_pipe").write_text(burst(A))


def fake_tracefs(top: Path) -> Path:
    (top / "instances").mkdir(parents=True)
    (top / dm.DamonTrace.EVENT).parent.mkdir(parents=True)
    (top / dm.DamonTrace.EVENT).write_text("0\n")
    return top


def rmdir_like_tracefs(monkeypatch):
    """An instance is removed with its files, as tracefs does on rmdir."""
    import shutil
    from superpager.live import sysfs
    monkeypatch.setattr(sysfs, "_remove_dir", shutil.rmtree)


def test_start_enables_the_event_in_an_instance_of_ours_and_restore_removes_it(tmp_path, monkeypatch):
    root = damon_tree(tmp_path / "admin", "paddr")
    top = fake_tracefs(tmp_path / "tracefs")
    rmdir_like_tracefs(monkeypatch)
    t = FakeTrace(str(root), str(top))
    ch = SysfsChanges("damon-trace-test")
    t.start(ch)
    inst = top / "instances" / f"superpager-{os.getpid()}"
    assert t.instance == inst and (inst / t.EVENT).read_text() == "1"
    assert (top / t.EVENT).read_text() == "0\n", "the system's own trace settings are left alone"
    assert "kdamond 0 (pid 73; sampling every 500000 us, aggregating every 5000000 us)" == t.monitor
    rec = json.loads(next((tmp_path / "state").glob("restore-*.json")).read_text())
    assert [c["kind"] for c in rec["changes"]] == ["dir", "value"]
    assert t.hot_regions() == [(4096, 8192, 5), (8192, 16384, 1)]
    assert ch.restore() == []
    assert not inst.exists() and not list((tmp_path / "state").glob("restore-*.json"))
    # The monitor read is another agent's: nothing of it was written.
    assert (root / "kdamonds" / "0" / "state").read_text() == "on\n"


def test_open_monitor_reads_a_running_paddr_kdamond_and_says_so(tmp_path, monkeypatch):
    root = damon_tree(tmp_path / "admin", "paddr")
    top = fake_tracefs(tmp_path / "tracefs")
    rmdir_like_tracefs(monkeypatch)
    monkeypatch.setattr(dm, "DamonTrace", FakeTrace)
    ch = SysfsChanges("damon-trace-test")
    mon, note = dm.open_monitor(ch, 5000, 100000, 1000000, str(root), str(top))
    assert isinstance(mon, dm.DamonTrace)
    assert "did not start is running" in note and "intervals apply, not sample_us=5000 and aggr_us=100000" in note
    assert ch.restore() == []


def test_without_a_paddr_monitor_both_reasons_are_given(tmp_path):
    root = damon_tree(tmp_path / "admin", "vaddr")
    with pytest.raises(dm.DamonUnavailable, match="did not start is running.*; no running kdamond monitors physical memory"):
        dm.open_monitor(SysfsChanges("t"), 5000, 100000, 1000000, str(root), str(tmp_path))
    ok, why = dm.availability(str(root))
    assert not ok and "no running kdamond monitors physical memory" in why


def test_a_crashed_runs_instance_is_removed_by_the_next_run(tmp_path):
    inst = tmp_path / "instances" / "superpager-1"
    inst.mkdir(parents=True)
    state = tmp_path / "state"
    state.mkdir()
    # Owner pid 2**22 + 1 is above the kernel's pid_max default: never running.
    (state / "restore-4194305-1.json").write_text(json.dumps(
        {"pid": 4194305, "start": "1", "label": "run", "changes": [{"path": str(inst), "old": "", "kind": "dir"}]}))
    out = restore_stale()
    assert len(out) == 1 and "restored 1 setting" in out[0], out
    assert not inst.exists()


def test_records_written_before_kinds_existed_still_restore_values(tmp_path):
    f = tmp_path / "setting"
    f.write_text("never\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "restore-4194305-2.json").write_text(json.dumps(
        {"pid": 4194305, "start": "1", "label": "old", "changes": [{"path": str(f), "old": "madvise"}]}))
    restore_stale()
    assert f.read_text() == "madvise"


def test_damon_live_on_this_machines_running_monitor(tmp_path):
    """Where a kdamond of the platform's monitors physical memory (these machines), damon-live
    reads its aggregations and leaves no instance behind."""
    if os.geteuid() != 0:
        pytest.skip("needs root: tracefs and MADV_COLLAPSE on another process")
    found = dm.running_paddr_kdamond()
    if found is None:
        pytest.skip("no running paddr kdamond here: damon-live starts its own (tests/test_live.py)")
    aggr = int((found[0] / "contexts" / "0" / "monitoring_attrs" / "intervals" / "aggr_us").read_text()) / 1e6
    if aggr > 10:
        pytest.skip(f"the running kdamond aggregates every {aggr:g} s: too slow for a test")
    if not _refused():
        pytest.skip("a kdamond of superpager's own can be added here: the shared path is not taken")
    p = __import__("subprocess").Popen(["sleep", str(2 * aggr + 2)])
    try:
        rep = live.attach(p.pid, "damon-live", duration=2 * aggr + 1, quiet=True)
    finally:
        p.kill()
        p.wait()
    c = rep.counters
    # Every step either ranked or found nothing accessed; at least one aggregation arrived.
    assert c["monitor"] == "shared" and c["aggregations"] >= 1 and c["rankings"] + c["rankings_reused"] + c["no_hot_regions"] >= 2, c
    assert any("damon_aggregated trace events" in n for n in rep.notes), rep.notes
    assert rep.settings_restored
    top = dm.tracefs_mount()
    if top is not None:  # else the run mounted tracefs itself, and unmounted it
        assert not list(Path(top).glob("instances/superpager-*")), "the tracefs instance was left behind"
    assert not list((tmp_path / "state").glob("tracefs-*")), "the run's own tracefs mount point was left behind"
    assert not list((tmp_path / "state").glob("restore-*.json"))


def _refused() -> bool:
    try:
        dm.Damon().check()
        return False
    except dm.DamonUnavailable:
        return True


def test_hot_regions_waits_for_nothing(tmp_path, monkeypatch):
    """A read with nothing new returns the last aggregation at once (trace_pipe read without blocking)."""
    top = fake_tracefs(tmp_path / "tracefs")
    inst = top / "instances" / "x"
    inst.mkdir()
    fifo = inst / "trace_pipe"
    os.mkfifo(fifo)
    t = dm.DamonTrace(tracefs=str(top))
    t.instance = inst
    t.latest = B
    keep = os.open(fifo, os.O_RDWR)  # a writer that never writes: a blocking read would hang
    try:
        t0 = time.monotonic()
        assert t.hot_regions() == [(0, 8192, 2)]
        assert time.monotonic() - t0 < 1.0
    finally:
        os.close(keep)


def test_a_killed_superpagers_instance_is_removed_by_restore(tmp_path):
    """SIGKILL leaves the tracefs instance and its record; `superpager restore` removes both."""
    if os.geteuid() != 0:
        pytest.skip("needs root: tracefs and MADV_COLLAPSE on another process")
    if dm.running_paddr_kdamond() is None or not _refused():
        pytest.skip("no running paddr kdamond here to share")
    mounted = dm.tracefs_mount()
    env = {**os.environ, "SUPERPAGER_STATE": str(tmp_path / "state")}
    cli = [sys.executable, "-m", "superpager.cli"]
    p = subprocess.Popen(cli + ["run", "--policy", "damon-live", "--quiet", "--", "sleep", "30"],
                         env=env, stderr=subprocess.PIPE, start_new_session=True)
    # Where tracefs is not mounted, the run mounts it in its state directory.
    top = Path(mounted) if mounted else tmp_path / "state" / f"tracefs-{p.pid}"
    inst = top / "instances" / f"superpager-{p.pid}"
    try:
        # Wait for the event to be switched on, not for its file: the kernel makes the file with
        # the instance, before the run records and writes the switch (a kill in between left 3
        # settings, not 2 or 4, on a fast machine).
        event = inst / dm.DamonTrace.EVENT

        def switched_on() -> bool:
            try:
                return event.read_text().strip() == "1"
            except OSError:
                return False
        deadline = time.monotonic() + 20
        while not switched_on() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert switched_on(), "damon-live made no tracefs instance with its event on"
        os.killpg(p.pid, signal.SIGKILL)  # superpager and its program, no chance to clean up
        p.wait()
        assert inst.exists(), "the crash left the instance (what restore is for)"
        r = subprocess.run(cli + ["restore"], env=env, capture_output=True, text=True)
        # The instance and its event's switch, and tracefs's mount and mount point where none was.
        assert r.returncode == 0 and re.search(r"restored [24] setting", r.stdout), r
        assert not inst.exists()
        if not mounted:
            assert not top.exists(), "the run's own tracefs mount point is still there"
    finally:
        restore_stale()
