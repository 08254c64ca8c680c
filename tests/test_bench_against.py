"""`superpager bench --against DIR`: one build's simulation speed beside another's."""
from pathlib import Path

import superpager as sp

PACKAGE_PARENT = Path(sp.__file__).resolve().parent.parent


def test_a_directory_without_a_build_is_a_one_line_error(cli, tmp_path):
    rc, out, err = cli("bench", "--against", tmp_path / "nothing-here")
    assert rc == 2
    assert "no superpager package there" in err and len(err.strip().splitlines()) == 1, err


def test_a_build_against_itself_reports_every_case_with_a_ratio(cli, tmp_path):
    # Three rounds: each build's median, so one stalled round (a 20k-access run takes a few
    # milliseconds; a busy machine once made one of them 6x slower) cannot decide the ratio.
    rc, out, err = cli("bench", "--against", PACKAGE_PARENT, "--accesses", "20k", "--repeats", "3", "--out", "r.md")
    assert rc == 0, err
    report = (tmp_path / "r.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| ") and "M |" in line]
    from superpager.bench_builds import CASES

    assert len(rows) == len(CASES) == 7, report
    assert any(r.startswith("| Zipf 1GiB, host, base |") for r in rows), "the data-cache case is timed"
    for row in rows:
        ratio = float(row.split("|")[5])
        assert 0.2 < ratio < 5, row  # the same build: a ratio near 1, whatever the noise
    assert "Geometric mean of new / old" in report
    assert "Counters both builds report: identical in every case." in report


def test_pressure_against_a_directory_without_a_build_is_a_one_line_error(cli, tmp_path):
    rc, out, err = cli("bench", "--pressure", "--against", tmp_path / "nothing-here")
    assert rc == 2
    assert "no superpager package there" in err and len(err.strip().splitlines()) == 1, err


def test_counters_that_differ_between_builds_are_named(monkeypatch):
    """A speed change must not change results: the report names any case whose counters (those
    both builds report) differ, and a counter only the new build has is not a difference."""
    from superpager import bench_builds

    def fake(parent, trace, machine, policy, kw=None):
        c = {"accesses": 10, "walks": 3}
        if parent == "NEW":
            c["walks"] = 4 if trace == "b" else 3
            c["new.counter"] = 1
        return 1.0, 10, parent, c

    monkeypatch.setattr(bench_builds, "_time", fake)
    runs = [("case a", "a", "m", "p", {}), ("case b", "b", "m", "p", {})]
    _times, _refs, _files, differ = bench_builds.interleave([("old", "OLD"), ("new", "NEW")], runs, 1)
    assert differ == ["case b"]
    assert "DIFFERENT in case b" in bench_builds.counters_line(differ)
