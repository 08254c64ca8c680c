"""calibrate's frame probe (model/calibrate.py `frame_probe`): how a process's 4KB pages lie in
physical memory, read back from /proc/self/pagemap, which becomes host's `[frames] scatter`."""

import os

import pytest

from superpager.cli_model import frame_probe_line
from superpager.model import calibrate


def test_new_run_share_counts_neighbouring_pages_whose_frames_are_not_neighbours():
    # 10, 11, 12 run up; 40 starts a run; 39 runs down; 7 starts one: 2 of 5 pairs.
    assert calibrate.new_run_share([10, 11, 12, 40, 39, 7]) == pytest.approx(2 / 5)
    assert calibrate.new_run_share([5, 6, 7, 8]) == 0.0
    # Absent pages (0) take no part; nothing readable gives None.
    assert calibrate.new_run_share([5, 0, 7, 8]) == 0.0
    assert calibrate.new_run_share([0, 0, 0]) is None


def test_frame_groups_count_the_aligned_groups_the_pages_lie_in_a_page():
    # Frames 8-15 fill one group of 8; 100 and 103 share another; 4096 lies alone: 3 groups, 11 pages.
    pfns = list(range(8, 16)) + [100, 103, 4096]
    assert calibrate.frame_groups(pfns, 8) == pytest.approx(3 / 11)
    # Groups of 512: frames 8-103 in the first, 4096 in the ninth.
    assert calibrate.frame_groups(pfns, 512) == pytest.approx(2 / 11)
    # Absent pages (0) take no part; nothing readable gives None.
    assert calibrate.frame_groups([0, 9, 0, 10], 8) == pytest.approx(1 / 2)
    assert calibrate.frame_groups([0, 0], 8) is None


def test_the_probe_line_says_what_was_read_or_why_not():
    line = frame_probe_line({"footprint": 256 << 20, "new_runs": [0.30, 0.87, 0.5], "scatter": 0.5})
    assert "0.50 of the pages start a new run" in line and "0.30, 0.87, 0.50" in line
    assert "not run" in frame_probe_line(None) and "root" in frame_probe_line(None)
    assert "groups" not in line, "a probe without the locality (an older file) says nothing of it"
    line = frame_probe_line({"footprint": 256 << 20, "new_runs": [0.30, 0.87, 0.5], "scatter": 0.5,
                             "groups_8": [0.507, 0.143, 0.131], "groups_512": [0.0611, 0.0107, 0.004]})
    assert "0.507, 0.143, 0.131 distinct groups of 8 frames a page" in line and "0.0107" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="frame numbers in /proc/self/pagemap need root (CAP_SYS_ADMIN)")
def test_the_probe_reads_real_frames():
    frames = calibrate.touched_frames(8 << 20)
    assert len(frames) == 2048 and all(frames), "every touched page present with a frame number"
    assert len(set(frames)) == 2048, "distinct frames"
    p = calibrate.frame_probe(8 << 20, repeats=3)
    assert p is not None and len(p["new_runs"]) == 3 and 0.0 <= p["scatter"] <= 1.0
    assert p["scatter"] == sorted(p["new_runs"])[1]
    # 2048 pages: at least 256 groups of 8 and 4 of 512 (1/8 and 1/512 a page), at most one each.
    assert len(p["groups_8"]) == 3 and all(1 / 8 <= g <= 1 for g in p["groups_8"])
    assert len(p["groups_512"]) == 3 and all(1 / 512 <= g <= 1 for g in p["groups_512"])
