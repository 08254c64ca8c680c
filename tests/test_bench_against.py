"""`superpager bench --against DIR`: one build's simulation speed beside another's."""
from pathlib import Path

import superpager as sp

PACKAGE_PARENT = Path(sp.__file__).resolve().parent.parent


def test_a_directory_without_a_build_is_a_one_line_error(cli, tmp_path):
    rc, out, err = cli("bench", "--against", tmp_path / "nothing-here")
    assert rc == 2
    assert "no superpager package there" in err and len(err.strip().splitlines()) == 1, err


def test_a_build_against_itself_reports_every_case_with_a_ratio(cli, tmp_path):
    rc, out, err = cli("bench", "--against", PACKAGE_PARENT, "--accesses", "20k", "--repeats", "1", "--out", "r.md")
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
