"""calibrate's window probe (model/calibrate.py `window_probe`, chase.c `window`): how many
instructions the core holds behind an outstanding load (the model's `rob`), and how much of a
walk a full window hides (`walk_hiding`; docs/RUNTIME_MODEL.md, "Walks in a full window")."""

import pytest

from superpager import _core
from superpager.cli_model import window_probe_line
from superpager.model import calibrate

# The Zen 5 VM's medians of 2026-12-03 (5 runs each, 1GiB).
PADS = [0, 16, 32, 64, 96, 192]
NS_2M = [15.6, 29.9, 42.6, 68.1, 93.3, 192.5]
NS_4K = [16.4, 33.9, 48.3, 83.8, 119.2, 220.9]
DEP_2M, DEP_4K = 203.4, 263.1


def test_the_window_is_a_loads_latency_over_the_slope_of_its_time_against_the_adds():
    # Loads in flight: 13.0, 6.8, 4.8, 3.0, 2.2 and 1.06; the last is left out (nearly serial).
    w = calibrate.window_from(PADS, NS_2M, DEP_2M)
    assert w == 253
    # An exact window: 16 instructions a loop, 250 in the window, 200 ns a load.
    exact = [200 * (16 + p) / 250 for p in PADS]
    assert calibrate.window_from(PADS, exact, 200.0) == 250
    # Where the miss buffers bound the loads (more in flight than mlp), the pad is left out.
    capped = [200 / 10 if 200 / t > 10 else t for t in exact]
    assert calibrate.window_from(PADS, capped, 200.0, mlp=10) == 250
    assert calibrate.window_from(PADS, capped, 200.0) != 250
    # Nothing overlapped (every pad nearly serial), or time that does not grow: no window.
    assert calibrate.window_from(PADS, [199.0] * 6, 200.0) is None
    assert calibrate.window_from(PADS, [20.0] * 6, 200.0) is None


def test_walk_hiding_fits_the_share_of_a_walk_the_full_window_shows():
    k = calibrate.walk_hiding_from(PADS, NS_4K, NS_2M, DEP_4K, DEP_2M)
    assert k == 0.215
    # Shares made from a known k come back as it.
    n = [DEP_2M / t for t in NS_2M]
    made = [t + (DEP_4K - DEP_2M) / (1 + 0.35 * (x - 1)) / x for t, x in zip(NS_2M, n)]
    assert calibrate.walk_hiding_from(PADS, made, NS_2M, DEP_4K, DEP_2M) == pytest.approx(0.35, abs=0.002)
    # Walks that show whole at every pad: nothing hidden.
    whole = [t + (DEP_4K - DEP_2M) / x for t, x in zip(NS_2M, n)]
    assert calibrate.walk_hiding_from(PADS, whole, NS_2M, DEP_4K, DEP_2M) == 0
    # 4KB pages adding nothing to one load alone: no reading.
    assert calibrate.walk_hiding_from(PADS, NS_4K, NS_2M, DEP_2M, DEP_2M) is None


def test_the_probe_takes_medians_and_reads_both(monkeypatch):
    def fake(binary, args, what, absent=None):
        assert args[0] == "window" and absent == 3
        pg, seed = args[2], int(args[4])
        ns, dep = (NS_2M, DEP_2M) if pg == "2m" else (NS_4K, DEP_4K)
        out = {f"ns_p{p}": str(t * (1 + 0.01 * seed)) for p, t in zip(PADS, ns)}
        return {"dep": str(dep), **out, "huge_bytes": str(1 << 30 if pg == "2m" else 0), "sink": "0"}
    monkeypatch.setattr(calibrate, "_run_chase", fake)
    p = calibrate.window_probe(None, 1 << 30, 1000, 3)
    assert p["pads"] == PADS and p["ns_2m"] == [round(t * 1.04, 3) for t in NS_2M], "the median of seeds 1-7: the probe runs at least WINDOW_PROBE_RUNS"
    assert p["window"] == calibrate.window_from(PADS, p["ns_2m"], DEP_2M)
    assert p["walk_hiding"] == calibrate.walk_hiding_from(PADS, p["ns_4k"], p["ns_2m"], DEP_4K, DEP_2M)
    # No 2MB pages, or no add chain on this architecture (chase.c exits 3): no probe.
    monkeypatch.setattr(calibrate, "_run_chase", lambda b, a, w, absent=None: {**fake(b, a, w, absent), "huge_bytes": "0"})
    assert calibrate.window_probe(None, 1 << 30, 1000, 3) is None
    monkeypatch.setattr(calibrate, "_run_chase", lambda b, a, w, absent=None: {})
    assert calibrate.window_probe(None, 1 << 30, 1000, 3) is None


def test_the_line_says_what_the_model_takes():
    p = {"footprint": 1 << 30, "pads": PADS, "ns_4k": NS_4K, "ns_2m": NS_2M, "dep_4k": DEP_4K, "dep_2m": DEP_2M, "window": 257, "walk_hiding": 0.215}
    line = window_probe_line(p)
    assert "257 instructions" in line and "walk_hiding 0.215" in line and "0: 15.6 / 16.4" in line and "\n" not in line
    assert "core table" in window_probe_line({**p, "window": None}) and "walk_hiding 0" in window_probe_line({**p, "walk_hiding": None})
    assert "not run" in window_probe_line(None)


def test_the_window_probe_runs_here():
    # A real run, small and short, whatever the machine: every figure is read.
    r = calibrate._run_chase(calibrate.chase_binary(), ["window", str(4 << 20), "4k", "20000", "1"], "the window probe", absent=3)
    if not r:
        pytest.skip("chase.c has no add chain for this architecture")
    assert set(r) == {"dep", "huge_bytes", "sink", *(f"ns_p{p}" for p in calibrate.WINDOW_PADS)}
    assert all(float(r[f"ns_p{p}"]) > 0 for p in calibrate.WINDOW_PADS) and float(r["dep"]) > 0


def test_host_takes_the_probes_window_and_walk_hiding(tmp_path, monkeypatch):
    # A calibration file with the probe makes host's [cache] rob and walk_hiding the probe's.
    import json
    inp = {"cpu": "", "date": "2026-12-03", "method": "test", "clock_ghz": 3.0, "points": [[1 << 20, "2m", 5.0]],
           "level_cycles": [4.0 * (i + 1) for i in range(len(_core.host_cache_levels()))], "level_sizes": [""] * len(_core.host_cache_levels()),
           "dram_cycles": 400.0,
           "window_probe": {"footprint": 1 << 30, "pads": PADS, "ns_4k": NS_4K, "ns_2m": NS_2M, "dep_4k": DEP_4K, "dep_2m": DEP_2M,
                            "window": 257, "walk_hiding": 0.215}}
    if not _core.host_cache_levels():
        pytest.skip("this machine reports no data caches")
    text = _core.calibrated_host_toml(json.dumps(inp))
    path = tmp_path / "host.toml"
    path.write_text(text)
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(path))
    c = _core.machine_info("host")["cache"]
    assert (c["rob"], c["walk_hiding"]) == (257, 0.215)
