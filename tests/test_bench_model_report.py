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


def test_a_nested_host_gets_the_native_column_and_its_count():
    # The 11th entry: host+native's speedup (host nested: its TLB splinters 2MB pages).
    r = render([rows()[0] + (1.30,), rows()[1] + (1.62,)], 5, notes=[])
    assert "| native | error |" in r and "| 1.300x | +18.2% |" in r and "| 1.620x | -1.8% |" in r
    assert "native (`host+native`: one-dimensional walks, 2MB pages whole): 1 of 2." in r
    assert "native" not in render([r + (None,) for r in rows()], 5, notes=[])


def test_the_report_carries_the_host_notes_such_as_splintering():
    n = "calibrate's TLB probe found 2MB pages held in the TLB as smaller pieces (...)"
    r = render(rows(), 5, notes=[n])
    assert f"Note on `host`: {n}." in r
    assert r.index("Note on `host`") < r.index(END)


def test_model_traces_keeps_captures_and_predicts_from_them_next_time(tmp_path, monkeypatch, capsys):
    import argparse
    import importlib
    from superpager import bench_model, workloads
    live_run = importlib.import_module("superpager.live.run")
    captured = []

    def fake_capture(_exe, program, mib, trace):
        captured.append((program, mib))
        with open(trace, "w") as f:
            f.write("trace")

    monkeypatch.setattr(live_run, "thp_mode", lambda: "madvise")
    monkeypatch.setattr(workloads, "build", lambda _name: "/bin/true")
    monkeypatch.setattr(bench_model, "measure", lambda _e, _p, _m, pol: 1.0 if pol == "base" else 0.8)
    monkeypatch.setattr(bench_model, "_capture", fake_capture)
    monkeypatch.setattr(bench_model, "predicted", lambda trace, _p: (1.2, 4.0, 0.1, None) if open(trace).read() == "trace" else (0, 0, 0, None))
    keep = tmp_path / "traces"
    a = argparse.Namespace(model_sizes="64", model_programs="rand,gups", model_traces=str(keep), repeats=2, out=None)
    assert bench_model.main(a) == 0
    assert captured == [("rand", 64), ("gups", 64)]
    assert sorted(p.name for p in keep.iterdir()) == ["gups-64.spt", "rand-64.spt"]
    assert "| rand | 64MiB |" in capsys.readouterr().out
    # Run again: predicted from the kept captures, nothing captured.
    assert bench_model.main(a) == 0
    assert captured == [("rand", 64), ("gups", 64)]
    assert "predicting from" in capsys.readouterr().err
    # Without it, captures are temporary.
    a.model_traces = None
    assert bench_model.main(a) == 0 and len(captured) == 4


def test_the_report_gives_the_machines_state_when_calibrated_and_at_the_start_and_end():
    r = render(rows(), 5, notes=[], state=((1 << 30, 331.4, 209.2, "2026-12-02"), [(180.5, 158.4), None]))
    assert ("calibrate's chase over 1024MiB took 331.4 / 209.2 ns a step on 4KB / 2MB pages when `host` was calibrated (2026-12-02); "
            "at the bench's start 180.5 / 158.4; at the bench's end: no 2MB pages to be had.") in r, r
    assert r.index("The machine's state") < r.index(END)
    assert "The machine's state" not in render(rows(), 5, notes=[])


def test_the_calibrated_chase_is_the_largest_footprints_pair(tmp_path, monkeypatch):
    from superpager import _core, bench_model
    f = tmp_path / "host.toml"
    f.write_text('[calibration]\ndate = "2026-12-02"\n'
                 '[[calibration.points]]\nfootprint = "512MiB"\nns = 160.0\npages = "4k"\n'
                 '[[calibration.points]]\nfootprint = "1GiB"\nns = 331.4\npages = "4k"\n'
                 '[[calibration.points]]\nfootprint = "1GiB"\nns = 209.2\npages = "2m"\n')
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(f))
    monkeypatch.setattr(_core, "host_explain", lambda: ([("L1 latency", "4 cycles", "measured by superpager calibrate on 2026-12-02")], []))
    assert bench_model.calibrated_chase() == (1 << 30, 331.4, 209.2, "2026-12-02")
    # A hand-edited point whose footprint is not a size: nothing said, no crash.
    good = f.read_text()
    f.write_text(good.replace('footprint = "512MiB"', 'footprint = "lots"'))
    assert bench_model.calibrated_chase() is None
    f.write_text(good)
    # A calibration host does not use (another CPU's: its latencies are ESTIMATEs) says nothing.
    monkeypatch.setattr(_core, "host_explain", lambda: ([("L1 latency", "5 cycles", "ESTIMATE (run superpager calibrate)")], []))
    assert bench_model.calibrated_chase() is None
