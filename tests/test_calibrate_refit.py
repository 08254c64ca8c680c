"""`superpager calibrate --refit FILE` (model/calibrate.py `refit`): the fits again from a
calibration file's own measurements, measuring nothing. Read back without a fit it gives the
very file calibrate wrote; bad files get one line naming the file and the key."""

import json
import subprocess
import sys

import pytest

from superpager import _core
from superpager.model import calibrate as cal

LEVELS = _core.host_cache_levels()


def _written(tmp_path):
    """A calibration as `calibrate` writes it: points of a three-step curve on both page sizes,
    every probe, and `fit`'s reading of the points (no last-level fit)."""
    levels = [(n, s, w, 0.0) for n, s, w in LEVELS]
    fps = cal.footprints(1 << 30)
    pts = []
    for fp in fps:
        ns = 1.2 if fp <= levels[0][1] // 4 else 5.0 if fp <= levels[-1][1] // 4 else 150.0 + fp / (1 << 30) * 100
        # As the file holds them: to the picosecond.
        pts += [(fp, "2m", round(ns, 3)), (fp, "4k", round(ns * (1.0 if fp < 1 << 22 else 1.3), 3))]
    f = cal.fit(pts, levels, 3.0)
    inp = {"cpu": "", "date": "2026-12-04", "method": "test; clock from /proc/cpuinfo (3.0 GHz)", "clock_ghz": 3.0,
           "points": [list(p) for p in pts],
           "tlb_probe": {"lines": 8192, "span": 32 << 20, "packed_2m_ns": 5.0, "sparse_2m_ns": 17.6, "sparse_4k_ns": 34.3, "splintered": True},
           "walk_probe": {"footprint": 1 << 30, "chains": [1, 2, 4, 8, 16, 32], "ns_4k": [336.3, 121.5, 55.4, 25.9, 12.7, 8.3],
                          "ns_2m": [237.5, 105.4, 48.1, 24.5, 13.6, 7.0], "walk_ns": 244.3, "walkers": 30, "walkers_rule": cal.WALKERS_RULE, "mlp": 32},
           "frames": {"footprint": 256 << 20, "new_runs": [0.99, 1.0, 1.0], "scatter": 1.0},
           "host_frames": {"lines": 96, "strided_ns": 4.2, "control_ns": 5.1, "scattered": True},
           "window_probe": {"footprint": 1 << 30, "pads": [0, 16, 32, 64, 96, 192], "ns_4k": [23.7, 44.0, 65.4, 111.3, 148.7, 290.4],
                            "ns_2m": [19.2, 34.9, 51.3, 70.5, 104.6, 196.8], "dep_4k": 364.5, "dep_2m": 211.6, "window": 247, "walk_hiding": 0.328},
           "scan_probe": {"hot": 768 << 10, "region": 1 << 30, "streams": 8, "ns_hot": 127.14, "ns_alone": 117.31},
           **f}
    text = _core.calibrated_host_toml(json.dumps(inp))
    path = tmp_path / "host.toml"
    path.write_text(text)
    return path, text


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_a_refit_without_the_fit_gives_back_the_file_calibrate_wrote(tmp_path):
    path, text = _written(tmp_path)
    out = tmp_path / "refit.toml"
    r = cal.refit(path, out, last_level_fit=False, bounds_norm_fit=False)
    assert r["last_level_fit_skipped"] == "--no-last-level-fit"
    assert out.read_text() == text, "every probe and point read back as calibrate handed them over"


@pytest.mark.parametrize("body, says", [
    ("", r"no \[calibration\] points"),
    ("[calibration\n", "not read"),
    ('[calibration]\npoints = [{footprint = "1GiB", pages = "2m", ns = 200.0}]\n', "cost.clock_ghz is missing"),
    ('[cost]\nclock_ghz = 3.0\n[calibration]\npoints = [{pages = "2m", ns = 200.0}]\n', "calibration.points: an entry without a footprint"),
])
def test_a_bad_file_is_named_with_its_key(tmp_path, body, says):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(cal.CalibrateError, match=says) as e:
        cal.refit(path, tmp_path / "out.toml")
    assert str(path) in str(e.value)
    assert not (tmp_path / "out.toml").exists(), "nothing written"


def test_the_command_refuses_a_missing_file_in_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "superpager.cli", "calibrate", "--refit", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o.toml")],
                       capture_output=True, text=True)
    assert p.returncode != 0
    assert "nope.toml" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_a_refit_keeps_no_norm_an_earlier_fit_left_in_the_file(tmp_path):
    # The bounds' norm is the refit's own fit or none (--bounds-norm-fit off here): one the file
    # held from an earlier `calibrate --bounds-norm-fit` goes, with its errors.
    path, text = _written(tmp_path)
    fitted = text.replace("[calibration.walk_probe]\n", "[calibration.walk_probe]\nbounds_norm = 2.0\nbounds_norm_errors = [[0.0, 0.3], [2.0, 0.07]]\n", 1)
    assert fitted != text
    path.write_text(fitted)
    assert _core.machine_info(str(path))["cache"].get("bounds_norm") is None, "only [cache] sets the model's norm"
    out = tmp_path / "refit.toml"
    cal.refit(path, out, last_level_fit=False)
    assert out.read_text() == text


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_a_refit_takes_chase_points_read_since_in_place_of_the_files(tmp_path):
    # bench --model's fit again on the median of its readings ("The machine's state through the bench").
    import tomllib
    path, _ = _written(tmp_path)
    out = tmp_path / "refit.toml"
    cal.refit(path, out, last_level_fit=False, points={(1 << 30, "4k"): 321.0, (1 << 30, "2m"): 201.5})
    got = {(p["footprint"], p["pages"]): p["ns"] for p in tomllib.loads(out.read_text())["calibration"]["points"]}
    was = {(p["footprint"], p["pages"]): p["ns"] for p in tomllib.loads(path.read_text())["calibration"]["points"]}
    assert got[("1GiB", "4k")] == 321.0 and got[("1GiB", "2m")] == 201.5
    assert {k: v for k, v in got.items() if k[0] != "1GiB"} == {k: v for k, v in was.items() if k[0] != "1GiB"}
    with pytest.raises(cal.CalibrateError, match=r"has no 4k point at 3GiB to replace"):
        cal.refit(path, out, last_level_fit=False, points={(3 << 30, "4k"): 300.0})


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_walk_probes_read_since_must_match_the_files_footprints_and_chains(tmp_path):
    path, _ = _written(tmp_path)
    out = tmp_path / "refit.toml"
    near = {"footprint": 1 << 30, "chains": [1, 2, 4, 8, 16, 32], "ns_4k": [300.0] * 6, "ns_2m": [200.0] * 6}
    with pytest.raises(cal.CalibrateError, match=r"host.toml: calibration.walk_probe is not over the footprint and chains of the times read since \(2GiB"):
        cal.refit(path, out, last_level_fit=False, share_probes=[{**near, "footprint": 2 << 30}, near])
    # The file has no far probe to read again.
    with pytest.raises(cal.CalibrateError, match=r"calibration.walk_probe_far is not over"):
        cal.refit(path, out, last_level_fit=False, share_probes=[near, {**near, "footprint": 4 << 30}])
    with pytest.raises(cal.CalibrateError, match=r"reads two walk probes, and 1 were given"):
        cal.refit(path, out, last_level_fit=False, share_probes=[near])
    assert not out.exists(), "nothing written"
