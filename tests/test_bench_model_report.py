"""`bench --model`'s report section (bench_model.render): the count of predictions within ±15%
and the host machine's notes under the table."""

from superpager.bench_model import END, START, render


def rows():
    # program, MiB, base s, thp s, measured, min, max, model, linear, model base s
    return [("rand", 64, 0.2, 0.18, 1.10, 1.05, 1.2, 1.12, 4.0, 0.2),
            ("chase", 1024, 1.5, 0.9, 1.65, 1.6, 1.7, 1.35, 6.2, 1.6)]


def test_the_report_counts_predictions_within_tolerance_and_marks_misses():
    r = render(rows(), 5, notes=[])
    assert r.startswith(START) and r.endswith(END)
    assert "| rand | 64MiB |" in r and "+1.8% ok" in r
    assert "-18.2% **miss**" in r
    assert "Within ±15%: 1 of 2 (model); linear model: 0 of 2." in r
    assert "Note on `host`" not in r


def test_the_report_carries_the_host_notes_such_as_splintering():
    n = "calibrate's TLB probe found 2MB pages held in the TLB as smaller pieces (...)"
    r = render(rows(), 5, notes=[n])
    assert f"Note on `host`: {n}." in r
    assert r.index("Note on `host`") < r.index(END)
