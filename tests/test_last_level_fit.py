"""calibrate's last-level fit (docs/RUNTIME_MODEL.md, "The last level's fit"): the sizes it
tries, the footprints it compares, how it fits memory's latency, and, end to end, that it finds
the size and the latency at which the model takes the times it is told were measured."""

import os

import pytest

from superpager import _core
from superpager.model import calibrate as cal


def test_the_sizes_tried_shrink_from_the_levels_size_to_the_level_above_in_whole_sets():
    got = cal.fit_sizes(16 << 20, 512 << 10, 16)
    assert got == [16 << 20, 12 << 20, 8 << 20, 6 << 20, 4 << 20, 3 << 20, 2 << 20, 1536 << 10, 1 << 20, 768 << 10, 512 << 10]
    # A 12-way 30MiB level: every size a whole number of 12-way sets of 64-byte lines.
    odd = cal.fit_sizes(30 << 20, 1280 << 10, 12)
    assert odd[0] == 30 << 20 and all(n % (12 * 64) == 0 for n in odd), odd
    assert min(odd) >= 1280 << 10 and odd == sorted(odd, reverse=True)
    # Nothing smaller than the level above is tried, and a level no larger than it gets itself.
    assert cal.fit_sizes(1 << 20, 1 << 20, 16) == [1 << 20]


def test_the_footprints_compared_step_down_by_quarters_to_four_times_the_level():
    both = lambda *fps: {(f, pg) for f in fps for pg in ("4k", "2m")}
    m = both(8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30)
    assert cal.fit_footprints(1 << 30, 4 << 20, m) == [16 << 20, 64 << 20, 256 << 20, 1 << 30]
    # A CPUID-sized 32MiB level: only footprints from 128MiB up.
    assert cal.fit_footprints(1 << 30, 32 << 20, m) == [256 << 20, 1 << 30]
    # A footprint measured on one page size only is left out; below 4x the level, none.
    assert cal.fit_footprints(1 << 30, 4 << 20, m - {(64 << 20, "2m")}) == [16 << 20, 256 << 20, 1 << 30]
    assert cal.fit_footprints(64 << 20, 32 << 20, m) == []


def test_memorys_latency_is_the_one_nearest_in_log_ratio_over_every_point():
    # Three points whose model times are affine in memory's latency, measured at 450 cycles.
    lines = [(20.0, 0.3, 20.0 + 0.3 * 450), (40.0, 0.5, 40.0 + 0.5 * 450), (5.0, 0.9, 5.0 + 0.9 * 450)]
    d, e = cal.fit_memory(lines, 60, 2000)
    assert d == 450.0 and e < 1e-12
    # Twice over one point and half under another weigh the same; a tie keeps the lower latency.
    d, e = cal.fit_memory([(0.0, 1.0, 200.0), (0.0, 1.0, 800.0)], 100, 1000)
    assert d == 400.0 and abs(e - __import__("math").log(2)) < 1e-9
    # Bounds are kept: the best inside them, not outside.
    assert cal.fit_memory(lines, 500, 900)[0] == 500.0
    with pytest.raises(cal.CalibrateError, match="no memory latency between 900 and 500"):
        cal.fit_memory(lines, 900, 500)


def test_the_last_levels_latency_is_read_where_the_size_tried_holds_the_chase_whole():
    # The Zen 5 VM, forty-fourth session: 2MB points at 1MiB (the L2), 2MiB, 4MiB (the L3's share
    # held part) and 8MiB; the L2 at 1MiB and 53.4 cycles; clock 3.789 GHz.
    mib = 1 << 20
    points = {(1 * mib, "2m"): 8.229, (2 * mib, "2m"): 16.553, (4 * mib, "2m"): 37.871, (8 * mib, "2m"): 130.194,
              (2 * mib, "4k"): 126.98}
    read = lambda size: cal.held_whole_cycles(points, mib, size, 3.789, 53.4)  # noqa: E731
    # 37.871 ns at 4MiB is over twice the 2MiB point's 16.553: memory served part of that chase,
    # so no size is read from it (HELD_WHOLE_SPREAD), 4MiB included.
    assert read(4 * mib) == pytest.approx(16.553 * 3.789), "the 4MiB point is not held whole"
    assert read(8 * mib) == pytest.approx(16.553 * 3.789), "nor the 8MiB one"
    assert read(3 * mib) == pytest.approx(16.553 * 3.789), "3MiB holds the 2MiB chase, not the 4MiB one"
    assert read(2 * mib) == pytest.approx(16.553 * 3.789)
    assert read(1536 << 10) is None, "no point past the level above lies within 1536KiB"
    assert read(mib) is None, "the level above's own point is not the level's"
    # Never faster than the level above; a footprint with a 4KB point only is not read.
    assert cal.held_whole_cycles(points, mib, 2 * mib, 3.789, 80.0) == 80.0
    assert cal.held_whole_cycles({(2 * mib, "4k"): 126.98}, mib, 2 * mib, 3.789, 53.4) is None


def test_a_point_a_shared_level_did_not_hold_is_passed_over_and_the_largest_it_held_is_read():
    # The Zen 4 VM (1MiB L2, a 32MiB L3 shared), 2MB points at 2, 4 and 8MiB in two calibrations
    # an hour apart (fifty-fourth and fifty-fifth sessions; clock 3.648 GHz, the L2 at 14.1 cycles).
    mib, clock = 1 << 20, 3.648
    quiet = {(2 * mib, "2m"): 13.882, (4 * mib, "2m"): 16.052, (8 * mib, "2m"): 18.193}
    busy = {(2 * mib, "2m"): 13.565, (4 * mib, "2m"): 15.84, (8 * mib, "2m"): 62.167, (16 * mib, "2m"): 133.235}
    assert cal.held_whole_cycles(quiet, mib, 8 * mib, clock, 14.1) == pytest.approx(18.193 * clock), "the largest held"
    assert cal.held_whole_cycles(quiet, mib, 4 * mib, clock, 14.1) == pytest.approx(16.052 * clock)
    # An hour later other tenants took part of the 8MiB chase (62.2 ns, 4.6x the 2MiB point).
    assert cal.held_whole_cycles(busy, mib, 8 * mib, clock, 14.1) == pytest.approx(15.84 * clock)
    assert cal.held_whole_cycles(busy, mib, 32 * mib, clock, 14.1) == pytest.approx(15.84 * clock)
    # Right at the spread it is still held; just past it, not.
    edge = {(2 * mib, "2m"): 10.0, (4 * mib, "2m"): 20.0, (8 * mib, "2m"): 20.01}
    assert cal.held_whole_cycles(edge, mib, 8 * mib, 1.0, 1.0) == pytest.approx(20.0)


def test_a_levels_latency_is_read_on_the_faster_page_size_at_each_footprint():
    # The Zen 4 VM's calibration of the sixty-sixth session (1MiB L2, 32MiB L3 shared; clock
    # 3.635 GHz): the 2MB run at 2MiB fell in a slow spell (24.4 ns) and its 4KB turn did not
    # (13.6 ns), so 4MiB's 46.9 ns read as held whole at the 4MiB size and the L3 at 170.6 cycles.
    mib, clock = 1 << 20, 3.635
    points = {(2 * mib, "2m"): 24.444, (2 * mib, "4k"): 13.614, (4 * mib, "2m"): 46.94, (4 * mib, "4k"): 49.942,
              (8 * mib, "2m"): 123.483, (8 * mib, "4k"): 82.323, (16 * mib, "4k"): 1.0}
    assert cal.level_points(points) == [(2 * mib, 13.614), (4 * mib, 46.94), (8 * mib, 82.323)], \
        "the faster page size a footprint; 16MiB has no 2MB point"
    # 4MiB's 46.9 ns is over twice the 2MiB footprint's 13.6: not held whole, so every size reads 2MiB.
    assert cal.held_whole_cycles(points, mib, 4 * mib, clock, 14.5) == pytest.approx(13.614 * clock)
    assert cal.held_whole_cycles(points, mib, 8 * mib, clock, 14.5) == pytest.approx(13.614 * clock)
    # The 2MB points alone (the rule before) read 4MiB as held, at 46.94 ns.
    only_2m = {k: v for k, v in points.items() if k[1] == "2m"}
    assert cal.held_whole_cycles(only_2m, mib, 4 * mib, clock, 14.5) == pytest.approx(46.94 * clock)
    # The level latencies of `fit`, from four times the level above to half the level: the L2 of
    # that calibration read 8.06, 8.10 and 4.97 ns at 128KiB, 256KiB and 512KiB on 2MB pages, the
    # first two in a slow spell on both page sizes, so 512KiB's 4.97 ns (18.1 cycles, where a
    # quarter of the level read 29.3).
    levels = [("L1d", 32 << 10, 8, 0.0), ("L2", mib, 8, 0.0), ("L3", 32 * mib, 16, 0.0)]
    pts = [(16 << 10, "2m", 1.086), (16 << 10, "4k", 1.104), (64 << 10, "2m", 4.301), (64 << 10, "4k", 3.85),
           (128 << 10, "2m", 8.058), (128 << 10, "4k", 8.253), (256 << 10, "2m", 8.102), (256 << 10, "4k", 8.201),
           (512 << 10, "2m", 4.972), (512 << 10, "4k", 7.281), (mib, "2m", 17.373), (mib, "4k", 19.6),
           (2 * mib, "2m", 24.444), (2 * mib, "4k", 13.614), (4 * mib, "2m", 46.94), (4 * mib, "4k", 49.942),
           (8 * mib, "2m", 123.483), (8 * mib, "4k", 82.323), (1 << 30, "2m", 167.155), (1 << 30, "4k", 228.325)]
    f = cal.fit(pts, levels, clock)
    assert f["level_cycles"][:2] == [pytest.approx(1.086 * clock, abs=0.01), pytest.approx(4.972 * clock, abs=0.01)], \
        "64KiB (3.85 ns, twice the L1) is not read for the L2"
    # A 4KB turn faster than its 2MB one is taken.
    faster_4k = [(fp, pg, 4.0 if (fp, pg) == (512 << 10, "4k") else ns) for fp, pg, ns in pts]
    assert cal.fit(faster_4k, levels, clock)["level_cycles"][1] == pytest.approx(4.0 * clock, abs=0.01)


def _input(levels):
    """calibrate's input to the machine file, with made-up latencies (the fit only needs a
    machine the model can run)."""
    n = len(levels)
    return {"cpu": "", "date": "2026-12-02", "method": "test", "clock_ghz": 3.0,
            "level_cycles": [4.0 * (i + 1) ** 2 for i in range(n)], "level_sizes": [""] * n, "dram_cycles": 400.0,
            "points": [], "tlb_probe": None, "walk_probe": None, "near_memory": None}


def test_the_fit_finds_the_size_and_memorys_latency_at_which_the_model_takes_the_measured_times(monkeypatch, tmp_path):
    levels = [(name, size, ways, 0.0) for name, size, ways in _core.host_cache_levels()]
    if len(levels) < 2:
        pytest.skip("CPUID and sysfs give fewer than two data-cache levels here")
    monkeypatch.setattr(cal, "FIT_ACCESSES", 100_000)
    inp = _input(levels)
    # The last level seen at 4x the level above, so that the fit compares two footprints: 16x
    # and 64x the level above (four and sixteen times the last level).
    above = levels[-2][1]
    inp["level_sizes"][-1] = cal.size_text(4 * above)
    largest = 64 * above
    before = os.environ.get("SUPERPAGER_CALIBRATION")
    sizes = cal.fit_sizes(4 * above, above, levels[-1][2])
    if len(sizes) < 3:
        pytest.skip("the last level is too close to the one above for three sizes")
    # What the model takes with the last level at its third size and memory at 480 cycles, at
    # both footprints: told that this was measured, the fit must come back to them.
    want = {}
    for fp in (largest // 4, largest):
        trace = str(tmp_path / f"chase-{fp}.spt")
        cal.chase_trace(trace, fp)
        want[fp] = cal.model_chase_ns(cal.with_memory(inp, sizes[2], 480.0), trace)
    inp["points"] = [[fp, pg, ns] for fp, (a, b) in want.items() for pg, ns in (("4k", a), ("2m", b))]
    got = cal.fit_last_level(inp, levels, largest, *want[largest])
    assert got["sizes"] == sizes and got["footprints"] == [largest // 4, largest]
    assert len(got["memory_cycles"]) == len(got["rms"]) == len(sizes)
    # No point lies within any size tried, so the last level keeps its latency as read at each.
    assert got["level_cycles"] == [inp["level_cycles"][-1]] * len(sizes)
    assert abs(got["memory_cycles"][2] - 480.0) <= 1.0, got
    assert got["rms"][2] < 0.005, got
    at = sizes.index(got["chosen"])
    assert got["rms"][at] <= got["rms"][2] and at <= 2, "the nearest pair; a tie keeps the larger size"
    assert got["ns_4k"][2] == pytest.approx(want[largest][0], rel=0.005), got
    assert os.environ.get("SUPERPAGER_CALIBRATION") == before, "the machine file read is put back"
    # A shared level is written with the reuse law; an unshared one with none.
    assert got.get("share_law") == ("reuse" if got["tenant_fill_rate"] is not None else None), got


def test_host_takes_the_share_law_the_fit_wrote_and_the_depth_law_from_a_file_without_one(monkeypatch, tmp_path):
    """`[calibration.last_level_fit] share_law` reaches host's `[cache] share_law`; a file from
    before the key keeps the depth law, so it predicts as it did."""
    levels = [(name, size, ways, 0.0) for name, size, ways in _core.host_cache_levels()]
    if len(levels) < 2:
        pytest.skip("CPUID and sysfs give fewer than two data-cache levels here")
    import json
    whole = levels[-1][1]
    inp = _input(levels)
    fit = {"footprint": 16 * whole, "measured_4k_ns": 300.0, "measured_2m_ns": 200.0, "sizes": [whole, whole // 8],
           "ns_4k": [290.0, 300.0], "ns_2m": [190.0, 200.0], "chosen": whole // 8, "tenant_fill_rate": 0.06}
    for law, want in (({"share_law": "reuse"}, "reuse"), ({}, "depth")):
        path = tmp_path / f"host-{want}.toml"
        text = _core.calibrated_host_toml(json.dumps({**inp, "last_level_fit": {**fit, **law}}))
        assert ('share_law = "reuse"' in text) == (want == "reuse"), text
        path.write_text(text)
        monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(path))
        assert _core.machine_info("host")["cache"]["share_law"] == want
        assert _core.machine_info("host+share_law=depth")["cache"]["share_law"] == "depth"


def test_the_fit_needs_two_levels():
    assert cal.fit_last_level(_input([("L1d", 32 << 10, 8, 0.0)]), [("L1d", 32 << 10, 8, 0.0)], 1 << 30, 300.0, 200.0) is None


def test_the_fit_says_why_it_does_not_run():
    two = [("L2", 512 << 10, 8, 0.0), ("L3", 16 << 20, 16, 0.0)]
    both = {"4k": 331.4, "2m": 209.2}
    assert cal.fit_skipped(True, two, 1 << 30, both) is None
    assert cal.fit_skipped(False, two, 1 << 30, both) == "--no-last-level-fit"
    assert cal.fit_skipped(True, two[:1], 1 << 30, both) == "one data-cache level"
    assert "no chase on both 4KB and 2MB pages at 1GiB" in cal.fit_skipped(True, two, 1 << 30, {"4k": 331.4})
    assert cal.fit_skipped(True, two, 32 << 20, both) == "--largest 32MiB is under 4x the L3's 16MiB"


def test_the_fits_chase_is_timed_warm_as_chase_c_times_it(tmp_path):
    """calibrate's chase.c writes every line and runs the cycle once before it times; the fit's
    trace does the same before a phase mark, so the model's timed steps hold no first touch."""
    from superpager import api
    from superpager.model.predict import predict
    path = str(tmp_path / "chase.spt")
    api.gen("chase", path, size="8MiB", accesses=50_000, seed=1, progress=False, warm=True)
    pages, lines = (8 << 20) // 4096, 50_000  # the warm pass: min(lines of 8MiB, accesses)
    rows = predict(path, "skylake", ["base"], progress=False)
    r = rows[0]
    assert r["scope"] != "whole run", r  # timed from the phase mark
    assert r["accesses"] == 50_000, r
    assert r["faults"] == 0 and r["zeroing"] == 0, "every page was touched before the mark"
    total = api.gen("chase", str(tmp_path / "c2.spt"), size="8MiB", accesses=50_000, seed=1, progress=False, warm=True)
    assert total["accesses"] == pages + lines + 50_000
    with pytest.raises(Exception, match="--warm applies to chase only"):
        api.gen("gups", str(tmp_path / "g.spt"), warm=True, progress=False)


def test_the_tenants_fill_rate_is_what_leaves_a_program_filling_at_f_the_size_kept():
    # kept / whole = F / (F + R): a quarter of 32MiB at F = 0.01 lines a ns leaves R = 0.03.
    assert cal.tenant_fill_rate(32 << 20, 8 << 20, (0.01, 0.01)) == pytest.approx(0.03)
    # The two page sizes' chases fill at different rates: the mean of the two rates.
    assert cal.tenant_fill_rate(32 << 20, 4 << 20, (0.01, 0.03)) == pytest.approx(0.02 * 7)
    assert cal.tenant_fill_rate(32 << 20, 32 << 20, (0.01, 0.01)) is None, "the whole level kept: no tenants seen"
    assert cal.tenant_fill_rate(32 << 20, 4 << 20, (0.0, 0.0)) is None, "nothing from memory: nothing to see"


def test_a_shared_last_level_leaves_the_fits_chase_the_size_the_fit_chose(monkeypatch, tmp_path):
    """The rate calibrate derives, written into host, makes the model keep about the chosen size
    for the chase it was derived from (the level simulated whole, its share solved for: the
    share's ways and the fitted size's sets differ, so not exactly)."""
    from superpager import api
    levels = [(name, size, ways, 0.0) for name, size, ways in _core.host_cache_levels()]
    if len(levels) < 2:
        pytest.skip("CPUID and sysfs give fewer than two data-cache levels here")
    whole, above = levels[-1][1], levels[-2][1]
    chosen = whole // 8
    if chosen < 2 * above:
        pytest.skip("the last level is too close to the one above for a share of an eighth")
    monkeypatch.setattr(cal, "FIT_ACCESSES", 200_000)
    inp = _input(levels)
    trace = str(tmp_path / "chase.spt")
    fp = 16 * whole
    cal.chase_trace(trace, fp)
    (a, b), fills = cal.model_chase(cal.with_memory(inp, chosen, 480.0), trace)
    rate = cal.tenant_fill_rate(whole, chosen, fills)
    assert rate is not None and rate > 0
    fit = {"footprint": fp, "measured_4k_ns": a, "measured_2m_ns": b, "sizes": [whole, chosen], "ns_4k": [a, a], "ns_2m": [b, b],
           "chosen": chosen, "footprints": [fp], "memory_cycles": [480.0, 480.0], "rms": [0.0, 0.0], "level_cycles": [],
           "tenant_fill_rate": rate}
    path = tmp_path / "host.toml"
    path.write_text(_core.calibrated_host_toml(__import__("json").dumps({**inp, "level_sizes": [*inp["level_sizes"][:-1], cal.size_text(chosen)],
                                                                          "last_level_fit": fit})))
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(path))
    info = _core.machine_info("host")["cache"]
    assert info["levels"][-1][1] == whole, "a shared level is simulated at CPUID's size"
    assert info["tenant_fill_rate"] == pytest.approx(rate)
    r = api.compare(trace, ["host+dependence=1"], ["fixed:2MiB"], memory="64GiB", progress=False)[0]
    name = info["levels"][-1][0]
    kept = r.phase[f"cache.{name}.kept_bytes"]
    assert 0.8 * chosen < kept < 1.25 * chosen, (kept, chosen)
    # Fewer of the chase's lines stay than in the whole level, and the counts say which.
    assert r.phase[f"cache.{name}.data.hits"] <= r.phase[f"cache.{name}.data.hits_whole"]
