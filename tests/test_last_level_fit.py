"""calibrate's last-level fit (docs/RUNTIME_MODEL.md, "The last level's fit"): the sizes it
tries, how it chooses, and, end to end, that it finds the size at which the model takes the
time it is told was measured."""

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


def test_the_choice_is_the_nearest_in_log_ratio_on_both_page_sizes_and_the_larger_on_a_tie():
    # Measured 300 and 200: the second size is off by 1% and 2%, the third by 0% and 10%.
    assert cal.fit_choice([150, 303, 300], [140, 204, 220], 300, 200) == 1
    # Twice over and half under weigh the same (log ratios); a tie keeps the larger size.
    assert cal.fit_choice([600, 150], [200, 200], 300, 200) == 0
    assert cal.fit_choice([150, 600], [200, 200], 300, 200) == 0


def _input(levels):
    """calibrate's input to the machine file, with made-up latencies (the fit only needs a
    machine the model can run)."""
    n = len(levels)
    return {"cpu": "", "date": "2026-12-02", "method": "test", "clock_ghz": 3.0,
            "level_cycles": [4.0 * (i + 1) ** 2 for i in range(n)], "level_sizes": [""] * n, "dram_cycles": 400.0,
            "points": [], "tlb_probe": None, "walk_probe": None, "near_memory": None}


def test_the_fit_finds_the_size_at_which_the_model_takes_the_measured_time(monkeypatch, tmp_path):
    levels = [(name, size, ways, 0.0) for name, size, ways in _core.host_cache_levels()]
    if len(levels) < 2:
        pytest.skip("CPUID and sysfs give fewer than two data-cache levels here")
    monkeypatch.setattr(cal, "FIT_ACCESSES", 100_000)
    inp = _input(levels)
    before = os.environ.get("SUPERPAGER_CALIBRATION")
    # What the model takes with the last level at its third size tried: told that this was
    # measured, the fit must come back to a size that gives exactly it.
    sizes = cal.fit_sizes(levels[-1][1], levels[-2][1], levels[-1][2])
    if len(sizes) < 3:
        pytest.skip("the last level is too close to the one above for three sizes")
    trace = str(tmp_path / "chase.spt")
    cal.chase_trace(trace, 64 << 20)
    toml = _core.calibrated_host_toml(__import__("json").dumps({**inp, "level_sizes": [*inp["level_sizes"][:-1], cal.size_text(sizes[2])]}))
    want = cal.model_chase_ns(toml, trace)
    got = cal.fit_last_level(inp, levels, 64 << 20, *want)
    assert got["sizes"] == sizes
    at = got["sizes"].index(got["chosen"])
    assert (got["ns_4k"][at], got["ns_2m"][at]) == (round(want[0], 3), round(want[1], 3)), got
    assert got["chosen"] >= sizes[2], "a tie keeps the larger size"
    assert got["ns_4k"][-1] >= got["ns_4k"][0], "a smaller last level never makes 4KB walks cheaper"
    assert os.environ.get("SUPERPAGER_CALIBRATION") == before, "the machine file read is put back"


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
