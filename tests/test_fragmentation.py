"""Navarro et al.'s fragmentation experiment (Figs. 4-5) on a small machine: after a web server
has filled memory, the cache-only scheme gets no 4MB superpages for a dense program, the daemon
scheme (contiguity-aware daemon, wired clustering) gets them from its second run on."""
import json

import pytest

import superpager as sp
from superpager import _core, api


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    t = str(tmp_path_factory.mktemp("frag") / "seq.spt")
    api.gen("seq", t, size="24MiB", passes=4, progress=False)
    out = {}
    for pol in ["navarro:fragmentation=cache", "navarro"]:
        out[pol] = json.loads(_core.fragmentation_experiment(
            "alpha21264", pol, "96MiB", t, runs=3, wired=48, web_files=6000, web_requests=30000, validate=True))
    return out


def program_runs(o):
    return [p for p in o["phases"] if p["label"].startswith("program run")]


def test_the_web_server_leaves_no_contiguity(runs):
    for o in runs.values():
        web = o["phases"][0]
        assert web["label"] == "web server" and web["page_ins"] > 0
        assert web["contiguity_end"] < 0.05


def test_cache_scheme_gets_no_largest_pages_and_the_daemon_does(runs):
    cache, daemon = program_runs(runs["navarro:fragmentation=cache"]), program_runs(runs["navarro"])
    assert [p["largest_pages_peak"] for p in cache] == [0, 0, 0]
    peaks = [p["largest_pages_peak"] for p in daemon]
    assert all(b >= a for a, b in zip(peaks, peaks[1:])) and peaks[-1] >= 2, peaks
    assert daemon[-1]["walks"] < cache[-1]["walks"] / 2
    c = runs["navarro"]["counters"]
    assert c["daemon.wakeups"] >= 1 and c["daemon.recovered.4MiB"] >= 1 and c["daemon.pages_to_cache"] > 0
    assert c["daemon.wired_pools"] == 1
    assert runs["navarro:fragmentation=cache"]["counters"]["daemon.wakeups"] == 0


def test_phases_and_series_cover_the_whole_run(runs):
    o = runs["navarro"]
    labels = [p["label"] for p in o["phases"]]
    assert labels == ["web server", "program run 1", "program run 2", "program run 3", "web server again"]
    assert o["phases"][-1]["page_ins"] > 0
    times = [s[0] for s in o["series"]]
    assert times == sorted(times) and len(times) > 6
    assert all(0.0 <= s[1] <= 1.0 for s in o["series"])


def test_strided_adversary_counts_every_request_and_preemption():
    out = {p: json.loads(_core.strided_preemption("alpha21264", p, "64MiB", 2, "1MiB", 200))
           for p in ["base", "navarro", "navarro:retry_smaller=true"]}
    assert out["base"]["reservations"] == 0 and out["base"]["faults"] == 200
    n, r = out["navarro"], out["navarro:retry_smaller=true"]
    # The free 4MB extents (one of them split by the process's page tables) make at most two
    # 4MB reservations; after that every request finds no extent.
    assert 1 <= n["counters"]["reserv.created.4MiB"] <= 2
    assert n["reservations_failed"] > 150
    # Retrying smaller sizes makes more (smaller) reservations and preempts more of them.
    assert r["reservations"] > n["reservations"]
    assert r["preemptions"] + r["dissolved_for_frames"] > n["preemptions"] + n["dissolved_for_frames"]
    with pytest.raises(_core.SuperpagerError, match="free_extents"):
        _core.strided_preemption("alpha21264", "navarro", "64MiB", 0, "1MiB", 10)


def test_strided_adversary_into_scattered_free_memory_preempts_on_every_fault():
    o = api.strided_preemption("alpha21264", "navarro", "64MiB", 8, "1MiB", 100, free_memory="scattered")
    assert o["free_memory"] == "scattered"
    assert o["faults"] == 100 and o["faults_preempting"] == 100
    assert o["dissolved_for_frames"] == 0
    # The other process's faults are its own: only the strided process's are counted.
    assert o["counters"]["faults"] > 3000
    with pytest.raises(_core.SuperpagerError, match="free_memory: unknown value 'loose'"):
        api.strided_preemption("alpha21264", "navarro", "64MiB", 8, "1MiB", 10, free_memory="loose")


def test_dirty_file_adversary_writes_512x_more_without_demote_on_write():
    run = lambda p: json.loads(_core.dirty_file("alpha21264", p, "256MiB", "16MiB", 512))
    d, w = run("navarro"), run("navarro:dirty=whole")
    assert d["superpages"]["4MiB"] == w["superpages"]["4MiB"] == 4
    assert d["pages_written"] == w["pages_written"] == 4
    assert d["dirty_pages"] == 4 and w["dirty_pages"] == 2048
    assert w["flush_bytes"] == 512 * d["flush_bytes"]
    with pytest.raises(_core.SuperpagerError, match="every"):
        _core.dirty_file("alpha21264", "navarro", "256MiB", "16MiB", 0)


def test_aligned_placement_lets_every_process_promote_a_shared_file():
    # 96MiB: the misaligned process's 192 512KB pages overflow the 128-entry TLB in every later
    # pass; 24 4MB pages fit.
    on = sp.shared_file("alpha21264", "navarro", "256MiB", "96MiB", 2, 3)
    off = sp.shared_file("alpha21264", "navarro:align_files=false", "256MiB", "96MiB", 2, 3)
    assert on["trace_addresses"] == off["trace_addresses"]
    assert on["placed_addresses"][0] == on["trace_addresses"][0]  # already aligned: left alone
    assert on["placed_addresses"][1] % (4 << 20) == 0 != on["trace_addresses"][1] % (4 << 20)
    assert off["placed_addresses"] == off["trace_addresses"]
    assert on["superpages"]["4MiB"] == 48 and off["superpages"]["4MiB"] == 24
    # Misaligned: refused when fully mapped, or when a later process finds the extent cached.
    refused = off["counters"]["file.promote_refused.misaligned"] + off["counters"]["file.map_at_fault_refused.misaligned"]
    assert on["counters"]["placement.moved"] == 1 and refused > 0
    assert on["walks_after_first_pass"] == [0, 0] and off["walks_after_first_pass"][1] > 0
    with pytest.raises(sp.SuperpagerError, match="align_files"):
        sp.shared_file("alpha21264", "navarro:align_files=maybe", "256MiB", "16MiB", 2, 3)
