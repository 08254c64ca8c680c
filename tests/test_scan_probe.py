"""calibrate's scan probe (model/chase.c `scan`, model/calibrate.py `scan_probe`;
docs/RUNTIME_MODEL.md, "The last level's latency, read where it holds the chase"): a hot chase
stepped between random loads, timed with and without the hot set, and refused where the region
is no power of two lines."""

import pytest

from superpager.model import calibrate as cal


def test_chase_scan_times_the_loop_with_and_without_the_hot_set():
    # 200,000 iterations (tens of ms). One scheduler pause in either timing can still halve the
    # ratio on a busy 2-core machine (it failed at 20,000 iterations on 2026-12-05, in a run of
    # eight test files, and again at 200,000 in the sixty-eighth session, while a re-prediction
    # ran on both cores: ns_hot 7.2 against ns_alone 32.1). A pause only ever lengthens a
    # timing, and only one lengthened without the hot set fails the bound, so the test reads up
    # to three times and holds the best ratio to it. A loop that really ran faster with its hot
    # set would fail all three.
    ratios = []
    for seed in (1, 2, 3):
        f = cal._run_chase(cal.chase_binary(), ["scan", str(64 << 10), str(4 << 20), "2", "200000", str(seed)], "the scan probe")
        assert float(f["ns_hot"]) > 0 and float(f["ns_alone"]) > 0, f
        ratios.append(float(f["ns_hot"]) / float(f["ns_alone"]))
        # The hot chain runs through every iteration: with a one-line cycle it is an L1 hit, so
        # the loop with 64KiB of hot lines cannot be much faster than the one without.
        if ratios[-1] > 0.5:
            break
    assert max(ratios) > 0.5, ratios


@pytest.mark.parametrize("args", [
    [str(64 << 10), str(3 << 20), "2", "100", "1"],   # 49,152 region lines: no power of two
    ["64", str(4 << 20), "2", "100", "1"],             # one hot line
    [str(64 << 10), str(4 << 20), "65", "100", "1"],   # more streams than the loop takes
])
def test_bad_arguments_are_refused_with_a_reason(args):
    with pytest.raises(cal.CalibrateError, match="scan needs two hot lines"):
        cal._run_chase(cal.chase_binary(), ["scan", *args], "the scan probe")


def test_the_probe_takes_three_quarters_of_the_level_above_and_medians(monkeypatch):
    seen = []

    def fake(binary, args, what, absent=None):
        seen.append(args)
        seed = int(args[-1])
        return {"ns_hot": str(100.0 + seed), "ns_alone": str(90.0 + 2 * seed), "huge_bytes": str(8 << 20)}

    monkeypatch.setattr(cal, "_run_chase", fake)
    p = cal.scan_probe(cal.chase_binary(), 8 << 20, 1 << 20, 1000, 3)
    assert seen[0][:4] == ["scan", str(768 << 10), str(8 << 20), str(cal.SCAN_STREAMS)]
    assert p == {"hot": 768 << 10, "region": 8 << 20, "streams": cal.SCAN_STREAMS, "ns_hot": 102.0, "ns_alone": 94.0}
    # Without 2MB pages for half the region the probe says nothing.
    monkeypatch.setattr(cal, "_run_chase", lambda *a, **k: {"ns_hot": "1", "ns_alone": "1", "huge_bytes": "0"})
    assert cal.scan_probe(cal.chase_binary(), 8 << 20, 1 << 20, 1000, 3) is None
