"""calibrate's host-frames probe (model/calibrate.py `host_frames_probe`): whether the L2 sees a
2MB page's 4KB pieces in order, which decides a nested host's `[walker.nested] host_frames`."""

import subprocess

import pytest

from superpager.cli_model import host_frames_line
from superpager.model import calibrate


def fake_chase(times: dict, huge: bool = True):
    """A stand-in for calibrate.chase: ns by layout, on 2MB pages when `huge`."""
    def chase(binary, footprint, pages, steps, seed, layout="dense"):
        return times[layout], (footprint if huge and pages == "2m" else 0)
    return chase


def test_the_verdict_is_scattered_only_when_the_strided_chase_is_not_much_slower(monkeypatch):
    monkeypatch.setattr(calibrate, "chase", fake_chase({"strided:65536": 6.0, "strided:69632": 5.8}))
    p = calibrate.host_frames_probe(None, 1000, 3)
    assert p == {"lines": 96, "strided_ns": 6.0, "control_ns": 5.8, "scattered": True}
    # In order: the strided lines crowd one L2 set and are served by the level past it.
    monkeypatch.setattr(calibrate, "chase", fake_chase({"strided:65536": 19.7, "strided:69632": 4.8}))
    assert calibrate.host_frames_probe(None, 1000, 3)["scattered"] is False
    # At the threshold it is not scattered (strictly under 1.5 times the control).
    monkeypatch.setattr(calibrate, "chase", fake_chase({"strided:65536": 7.5, "strided:69632": 5.0}))
    assert calibrate.host_frames_probe(None, 1000, 3)["scattered"] is False
    # No 2MB pages: no probe.
    monkeypatch.setattr(calibrate, "chase", fake_chase({"strided:65536": 6.0, "strided:69632": 5.8}, huge=False))
    assert calibrate.host_frames_probe(None, 1000, 3) is None


def test_the_line_says_what_was_read_and_whether_it_counts():
    sc = {"lines": 96, "strided_ns": 6.0, "control_ns": 5.8, "scattered": True}
    line = host_frames_line(sc, nested=True)
    assert "1.03x" in line and "does not see" in line and "host_frames" in line
    assert "not nested" in host_frames_line(sc, nested=False)
    assert "sees the guest's address bits" in host_frames_line({**sc, "strided_ns": 19.7, "scattered": False}, nested=True)
    assert "not run" in host_frames_line(None, nested=True)


def test_chase_refuses_a_stride_that_is_not_whole_lines():
    r = subprocess.run([str(calibrate.chase_binary()), str(1 << 20), "4k", "1000", "1", "strided:100"], capture_output=True, text=True)
    assert r.returncode == 2 and "not a multiple of 64" in r.stderr


def test_the_strided_chase_runs_one_line_every_stride():
    # 16 lines one every 64KiB on 4KB pages: a real run, whatever the machine.
    ns, _ = calibrate.chase(calibrate.chase_binary(), 16 << 16, "4k", 20_000, 1, "strided:65536")
    assert 0 < ns < 10_000


def _thp() -> bool:
    try:
        return "[never]" not in open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return False


@pytest.mark.skipif(not _thp(), reason="needs transparent huge pages (madvise or always) for the probe's 2MB pages")
def test_the_probe_runs_on_this_machine():
    p = calibrate.host_frames_probe(calibrate.chase_binary(), 50_000, 1)
    if p is None:
        pytest.skip("no 2MB pages were to be had just now (memory fragmented)")
    assert p["lines"] == 96 and p["strided_ns"] > 0 and p["control_ns"] > 0
    assert p["scattered"] == (p["strided_ns"] < calibrate.HOST_SCATTERED_BELOW * p["control_ns"])
