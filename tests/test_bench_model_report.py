"""`bench --model`'s report section (bench_model.render): the count of predictions within ±15%
and the host machine's notes under the table."""

from superpager.bench_model import END, START, render


def rows():
    # program, MiB, base s, thp s, measured, min, max, model, linear, model base s
    return [("rand", 64, 0.2, 0.18, 1.10, 1.05, 1.2, 1.12, 4.0, 0.2),
            ("chase", 1024, 1.5, 0.9, 1.65, 1.6, 1.7, 1.35, 6.2, 1.6)]


def _bench_args(**over):
    """`bench --model`'s arguments as the fake benches below take them: one 64MiB case of rand,
    two rounds, traces temporary, no report file, no calibration first; `over` replaces any."""
    import argparse
    args = dict(model_sizes="64", model_programs="rand", model_traces=None, repeats=2, out=None, model_calibrate=False)
    return argparse.Namespace(**{**args, **over})


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


def test_the_report_says_where_host_puts_4kb_pages():
    from superpager.bench_model import frames_line
    cal = {"date": "2026-12-03", "frames": {"footprint": "256MiB", "new_runs": [0.3009, 0.3042, 0.3454], "scatter": 0.3042}}
    line = frames_line(cal)
    assert "0.30 of a process's pages start a new run" in line and "2026-12-03" in line and "0.35" in line
    r = render(rows(), 5, notes=[], frames=line)
    assert line in r and r.index(line) < r.index(END)
    for broken in ({}, {"frames": {"scatter": "x", "new_runs": []}}, {"frames": None}):
        assert "address order" in frames_line(broken), broken
    assert "4KB pages: " not in render(rows(), 5, notes=[])


def test_the_report_says_where_a_nested_hosts_frames_put_guest_memory():
    from superpager.bench_model import frames_line
    cal = {"date": "2026-12-03", "tlb_probe": {"splintered": True},
           "host_frames": {"lines": 96, "strided_ns": 6.0, "control_ns": 5.8, "scattered": True}}
    line = frames_line(cal)
    assert "Guest memory in the host's frames: scattered" in line and "1.03x" in line, line
    assert "in order" in frames_line({**cal, "host_frames": {**cal["host_frames"], "strided_ns": 19.7, "scattered": False}})
    assert "no host-frames probe" in frames_line({**cal, "host_frames": None})
    # 2MB pages held whole: host is not nested, so the host's frames do not enter the model.
    assert "Guest memory" not in frames_line({**cal, "tlb_probe": {"splintered": False}})


def test_model_traces_keeps_captures_and_predicts_from_them_next_time(tmp_path, monkeypatch, capsys):
    import importlib
    from superpager import bench_model, workloads
    live_run = importlib.import_module("superpager.live.run")
    captured = []
    ran = {}  # each fake capture's command line, as a real capture's header keeps it

    def fake_capture(exe, program, mib, trace):
        captured.append((program, mib))
        ran[trace] = bench_model.command(exe, program, mib)
        with open(trace, "w") as f:
            f.write("trace")

    monkeypatch.setattr(live_run, "thp_mode", lambda: "madvise")
    monkeypatch.setattr(workloads, "build", lambda _name: "/bin/true")
    monkeypatch.setattr(bench_model, "measure", lambda _e, _p, _m, pol: 1.0 if pol == "base" else 0.8)
    monkeypatch.setattr(bench_model, "_capture", fake_capture)
    monkeypatch.setattr(bench_model, "predicted", lambda trace, _p: (1.2, 4.0, 0.1, None, ("window", "window")) if open(trace).read() == "trace" else (0, 0, 0, None, ("none", "none")))
    # A fake capture is collapsed by line; any other file stands for an older capture, by page.
    monkeypatch.setattr(importlib.import_module("superpager.model.predict"), "trace_collapse",
                        lambda trace: "line" if open(trace).read() == "trace" else "page")
    monkeypatch.setattr(importlib.import_module("superpager.model.predict"), "trace_command", lambda trace: ran.get(trace))
    keep = tmp_path / "traces"
    a = _bench_args(model_programs="rand,gups", model_traces=str(keep))
    assert bench_model.main(a) == 0
    assert captured == [("rand", 64), ("gups", 64)]
    assert sorted(p.name for p in keep.iterdir()) == ["gups-64.spt", "rand-64.spt"]
    assert "| rand | 64MiB |" in capsys.readouterr().out
    # Run again: predicted from the kept captures, nothing captured.
    assert bench_model.main(a) == 0
    assert captured == [("rand", 64), ("gups", 64)]
    assert "predicting from" in capsys.readouterr().err
    # A kept capture whose runs were collapsed by page is captured again, by line.
    (keep / "rand-64.spt").write_text("old")
    assert bench_model.main(a) == 0
    assert captured == [("rand", 64), ("gups", 64), ("rand", 64)]
    assert "rand-64.spt has runs collapsed by page, not by line: capturing again" in capsys.readouterr().err
    # A kept capture of another command (here GUPS with a longer phase, 64M operations, as the
    # seventieth session's trial captured it) is captured again.
    ran[str(keep / "gups-64.spt")] = ["/bin/true", "gups", "64", "64"]
    assert bench_model.main(a) == 0
    assert captured[-1] == ("gups", 64) and len(captured) == 4
    assert "gups-64.spt ran gups 64 64, not gups 64: capturing again" in capsys.readouterr().err
    # Without it, captures are temporary.
    a.model_traces = None
    assert bench_model.main(a) == 0 and len(captured) == 6


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


def _fake_bench(monkeypatch, calls):
    """bench --model with its programs, captures and predictions faked; `calls` records the
    order in which calibrate and the measurements ran."""
    import importlib
    from superpager import bench_model, workloads
    live_run = importlib.import_module("superpager.live.run")
    monkeypatch.setattr(live_run, "thp_mode", lambda: "madvise")
    monkeypatch.setattr(workloads, "build", lambda _name: "/bin/true")
    monkeypatch.setattr(bench_model, "calibrated_chase", lambda: None)
    monkeypatch.setattr(bench_model, "calibrated_tlb_probe", lambda: None)
    monkeypatch.setattr(bench_model, "calibrated_walk_probes", lambda: None)

    def measure(_e, _p, _m, pol):
        calls.append("measure")
        return 1.0 if pol == "base" else 0.8

    def capture(_exe, _program, _mib, trace):
        with open(trace, "w") as f:
            f.write("trace")

    monkeypatch.setattr(bench_model, "measure", measure)
    monkeypatch.setattr(bench_model, "_capture", capture)
    monkeypatch.setattr(bench_model, "predicted", lambda _t, _p: (1.2, 4.0, 0.1, None, ("window", "window")))
    return bench_model


def test_model_calibrate_calibrates_into_the_file_host_reads_before_the_first_run(tmp_path, monkeypatch, capsys):
    from superpager.model import calibrate as cal_mod
    calls: list = []
    bench_model = _fake_bench(monkeypatch, calls)
    target = tmp_path / "cal.toml"
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(target))
    monkeypatch.setattr(cal_mod, "calibrate", lambda out, **_k: calls.append(("calibrate", str(out))))
    a = _bench_args(model_calibrate=True)
    assert bench_model.main(a) == 0
    assert calls[0] == ("calibrate", str(target)) and calls[1:] == ["measure"] * 4
    assert "calibrated by this bench (`--model-calibrate`)" in capsys.readouterr().out
    # Without the flag nothing is calibrated and the report does not say so.
    calls.clear()
    a.model_calibrate = False
    assert bench_model.main(a) == 0
    assert calls == ["measure"] * 4
    assert "--model-calibrate" not in capsys.readouterr().out


def test_model_calibrate_stops_with_calibrates_error_before_measuring(tmp_path, monkeypatch, capsys):
    from superpager.model import calibrate as cal_mod
    calls: list = []
    bench_model = _fake_bench(monkeypatch, calls)
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(tmp_path / "cal.toml"))

    def refuse(_out, **_k):
        raise cal_mod.CalibrateError("the host machine has no data caches")

    monkeypatch.setattr(cal_mod, "calibrate", refuse)
    a = _bench_args(model_calibrate=True)
    assert bench_model.main(a) == 2
    assert calls == []
    err = capsys.readouterr().err
    assert "bench --model: calibrate: the host machine has no data caches" in err and err.count("\n") >= 1


def test_a_model_or_live_flag_without_its_mode_is_refused(capsys):
    from superpager import cli
    for args, said in ((["bench", "--model-calibrate"], "--model-calibrate is for --model"),
                       (["bench", "--model-sizes", "64"], "--model-sizes is for --model"),
                       (["bench", "--live-idle", "3"], "--live-idle is for --live")):
        assert cli.main(args) == 2
        assert said in capsys.readouterr().err


def test_the_report_says_whether_the_tlb_probes_verdict_held_through_the_bench():
    same = render(rows(), 5, notes=[], tlb=((1.07, False), [(1.10, False), (0.98, False)]))
    assert ("2MB pages in the TLB (calibrate's TLB probe, sparse / packed on 2MB pages, splintered above 1.5): held whole (1.07) "
            "when `host` was calibrated; at the bench's start held whole (1.10); at the bench's end held whole (0.98). "
            "`host` models the machine as it was when these runs were made.") in same, same
    assert same.index("2MB pages in the TLB") < same.index(END)
    changed = render(rows(), 5, notes=[], tlb=((1.07, False), [(1.88, True), None]))
    assert "at the bench's start splintered (1.88); at the bench's end no 2MB pages to be had" in changed
    assert "**The verdict changed**" in changed and "(native, as calibrated)" in changed
    assert "2MB pages in the TLB" not in render(rows(), 5, notes=[])


def test_the_calibrated_tlb_probe_is_read_from_the_file_host_reads(tmp_path, monkeypatch):
    from superpager import _core, bench_model
    f = tmp_path / "host.toml"
    f.write_text('[calibration]\ndate = "2026-12-03"\n[calibration.tlb_probe]\npacked_2m_ns = 7.2\nsparse_2m_ns = 12.96\n'
                 'sparse_4k_ns = 28.2\nsplintered = true\n')
    monkeypatch.setenv("SUPERPAGER_CALIBRATION", str(f))
    monkeypatch.setattr(_core, "host_explain", lambda: ([("L1 latency", "4 cycles", "measured by superpager calibrate on 2026-12-03")], []))
    ratio, splintered = bench_model.calibrated_tlb_probe()
    assert abs(ratio - 1.8) < 1e-9 and splintered
    # A probe missing a number, or no probe: nothing said, no crash.
    f.write_text('[calibration]\n[calibration.tlb_probe]\npacked_2m_ns = 7.2\nsplintered = true\n')
    assert bench_model.calibrated_tlb_probe() is None
    f.write_text('[calibration]\ndate = "2026-12-03"\n')
    assert bench_model.calibrated_tlb_probe() is None


def test_the_bench_probes_the_tlb_at_its_start_and_end_where_a_calibration_recorded_a_probe(monkeypatch, capsys):
    calls: list = []
    bench_model = _fake_bench(monkeypatch, calls)
    monkeypatch.setattr(bench_model, "calibrated_tlb_probe", lambda: (1.07, False))

    def probe_now():
        calls.append("probe")
        return (1.9, True)

    monkeypatch.setattr(bench_model, "tlb_probe_now", probe_now)
    a = _bench_args(repeats=1)
    assert bench_model.main(a) == 0
    assert calls[0] == "probe" and calls[-1] == "probe" and calls.count("probe") == 2, calls
    assert "**The verdict changed**" in capsys.readouterr().out


def test_a_calibration_whose_two_timings_of_one_chase_disagree_is_flagged():
    # The Zen 5 VM (2026-12-03): one chase over 1GiB on 4KB pages took 363.2 ns among calibrate's
    # latency points and 208.2 ns in its walk probe, 74% apart; an hour before, 276.3 and 284.0.
    from superpager.model.calibrate import unsteady, unsteady_in
    walk = {"footprint": "1GiB", "chains": [1, 2, 4], "ns_4k": [208.223, 120.0, 60.0], "ns_2m": [175.9, 84.0, 42.0]}
    cal = {"points": [{"footprint": "512MiB", "ns": 211.0, "pages": "4k"}, {"footprint": "1GiB", "ns": 363.173, "pages": "4k"},
                      {"footprint": "1GiB", "ns": 217.1, "pages": "2m"}], "walk_probe": walk}
    warn = unsteady_in(cal)
    assert warn is not None and "363.2 ns" in warn and "208.2" in warn and "74% apart" in warn and "1GiB" in warn, warn
    # As calibrate returns it: footprints as numbers, points as lists.
    fresh = {"points": [[1 << 30, "4k", 363.173]], "walk_probe": {**walk, "footprint": 1 << 30}}
    assert unsteady_in(fresh) == warn
    # Within 15% (276.3 against 284.0, 2.8%), or either reading missing: nothing to say.
    assert unsteady(1 << 30, 276.278, 283.971) is None
    assert unsteady_in({**cal, "walk_probe": None}) is None and unsteady_in({"walk_probe": walk}) is None
    # A malformed size in the file gives no verdict rather than stopping the report.
    assert unsteady_in({**cal, "walk_probe": {**walk, "footprint": "1QiB"}}) is None
    r = render(rows(), 5, notes=[], unsteady=warn)
    assert f"Calibration: {warn}" in r and r.index("Calibration:") < r.index(END)
    assert "Calibration:" not in render(rows(), 5, notes=[])


def test_each_miss_says_which_resource_bounds_its_predictions():
    # The 12th entry: the model's bounds on base and fixed:2MiB (predict's `bound`).
    r = render([rows()[0] + (None, ("window", "window")), rows()[1] + (None, ("walkers", "fill_buffers"))], 5, notes=[])
    line = next(x for x in r.splitlines() if x.startswith("Where the misses sit"))
    assert "chase 1024MiB under, walkers / fill_buffers." in line and "rand" not in line, line
    assert "Where the misses sit" not in render(rows(), 5, notes=[]), "rows without bounds: no line"


def test_the_timed_runs_go_in_rounds_over_every_case_alternating_order_and_direction():
    from superpager.bench_model import schedule
    cases = [("rand", 64), ("rand", 4096), ("gups", 64)]
    s = list(schedule(cases, 3))
    # Each round visits every case once, forwards then backwards, the pair's order alternating.
    assert [(r, c) for r, c, _ in s] == [(0, c) for c in cases] + [(1, c) for c in cases[::-1]] + [(2, c) for c in cases]
    assert {p for r, _, p in s if r % 2 == 0} == {("base", "thp")}
    assert {p for r, _, p in s if r % 2 == 1} == {("thp", "base")}
    # So no case's pairs run back to back (save where a round turns round), and each case has
    # `repeats` pairs.
    assert all(sum(c == case for _, c, _ in s) == 3 for case in cases)


def test_the_bench_times_every_case_once_a_round_and_reports_each_cases_own_pairs(monkeypatch, capsys):
    from superpager import bench_model
    calls: list = []
    _fake_bench(monkeypatch, calls)
    timed = []
    # Each case runs at its own speed (gups gains 2x, rand 1.25x), so a pair credited to the
    # wrong case would move a median.
    monkeypatch.setattr(bench_model, "measure", lambda _e, p, m, pol: timed.append((p, m, pol)) or (1.0 if pol == "base" else (0.5 if p == "gups" else 0.8)))
    a = _bench_args(model_sizes="64,256", model_programs="rand,gups", repeats=3)
    assert bench_model.main(a) == 0
    cases = [("rand", 64), ("rand", 256), ("gups", 64), ("gups", 256)]
    assert [(p, m) for p, m, _ in timed[::2]] == cases + cases[::-1] + cases
    out = capsys.readouterr()
    assert "| rand | 64MiB | 1.000 | 0.800 | 1.250x |" in out.out
    assert "| gups | 256MiB | 1.000 | 0.500 | 2.000x |" in out.out
    assert "round 2 of 3: gups 256MiB 2.000x" in out.err
    assert "in each of 3 rounds over every case" in out.out


def _bench_through(monkeypatch, calls, readings, refit=("[cache]\n", "the fit's clause")):
    """The fake bench with a calibration whose chase over 1GiB took 180.0 / 150.0 ns, `readings`
    given by the bench's own chase in turn, and calibrate's fit again faked (`refit_at`)."""
    from superpager import bench_model
    _fake_bench(monkeypatch, calls)
    monkeypatch.setattr(bench_model, "calibrated_chase", lambda: (1 << 30, 180.0, 150.0, "2026-12-05"))
    it = iter(readings)
    monkeypatch.setattr(bench_model, "chase_now", lambda _fp: calls.append("chase") or next(it))

    def refit_at(fp, median, _out, _say, walks=None):
        calls.append(("refit", fp, median) if walks is None else ("refit", fp, median, walks))
        return refit

    monkeypatch.setattr(bench_model, "refit_at", refit_at)

    def predicted(_t, _p):
        import os
        path = os.environ.get("SUPERPAGER_CALIBRATION")
        calls.append(("predict", open(path).read() if path and os.path.exists(path) else None))
        return (1.2, 4.0, 0.1, None, ("window", "window"))

    monkeypatch.setattr(bench_model, "predicted", predicted)
    return bench_model


def test_the_predictions_rest_on_the_median_of_the_benchs_readings_of_calibrates_chase(monkeypatch, capsys):
    calls: list = []
    # As calibrated 180.0 / 150.0; at the start, after round 1, at the end:
    bench_model = _bench_through(monkeypatch, calls, [(260.0, 170.0), (250.0, 160.0), (240.0, 165.0)])
    a = _bench_args(model_programs="rand,gups")
    assert bench_model.main(a) == 0
    # The chase between the rounds, every run before any prediction, the fit again on the median
    # of all four readings (245.0 / 162.5), and every prediction made with its machine file.
    assert calls[:4] == ["chase", "measure", "measure", "measure"] and calls[5:7] == ["chase", "measure"], calls
    first_prediction = next(i for i, c in enumerate(calls) if isinstance(c, tuple) and c[0] == "predict")
    assert "measure" not in calls[first_prediction:]
    assert calls[first_prediction - 1] == ("refit", 1 << 30, (245.0, 162.5))
    assert [c for c in calls if isinstance(c, tuple) and c[0] == "predict"] == [("predict", "[cache]\n")] * 2
    out = capsys.readouterr().out
    assert ("at the bench's start 260.0 / 170.0; after round 1 250.0 / 160.0; at the bench's end 240.0 / 165.0. The predictions rest "
            "on the median of these readings, 245.0 / 162.5: the fit's clause.") in out, out


def test_a_median_that_is_the_calibrations_own_needs_no_fit_again(monkeypatch, capsys):
    calls: list = []
    bench_model = _bench_through(monkeypatch, calls, [(180.0, 150.0), (170.0, 140.0), (190.0, 160.0)])
    a = _bench_args()
    assert bench_model.main(a) == 0
    assert not any(isinstance(c, tuple) and c[0] == "refit" for c in calls)
    assert ("predict", None) in calls
    assert "180.0 / 150.0: the calibration's own pair, so `host` as calibrated." in capsys.readouterr().out


def test_model_at_calibration_predicts_from_the_calibration_as_written(monkeypatch, capsys):
    calls: list = []
    bench_model = _bench_through(monkeypatch, calls, [(260.0, 170.0), (250.0, 160.0)])
    a = _bench_args(repeats=1, model_at_calibration=True)
    assert bench_model.main(a) == 0
    assert not any(isinstance(c, tuple) and c[0] == "refit" for c in calls)
    assert ("predict", None) in calls
    assert "The predictions rest on the first pair (`--model-at-calibration`)" in capsys.readouterr().out


def test_a_fit_again_that_fails_leaves_host_as_calibrated_and_says_so(monkeypatch, capsys):
    calls: list = []
    bench_model = _bench_through(monkeypatch, calls, [(260.0, 170.0), (250.0, 160.0)],
                                 refit=(None, "calibrate's fit redone with it failed (no points), so `host` as calibrated"))
    a = _bench_args(repeats=1)
    assert bench_model.main(a) == 0
    assert ("predict", None) in calls
    assert "failed (no points), so `host` as calibrated." in capsys.readouterr().out


def _walk(fp, ns_4k, ns_2m):
    return {"footprint": fp, "chains": [1, 2, 4], "ns_4k": ns_4k, "ns_2m": ns_2m}


def test_the_shares_fit_rests_on_the_median_of_the_walk_probes_read_with_the_chase(monkeypatch, capsys):
    # docs/RUNTIME_MODEL.md, "The share's probes through the bench".
    calls: list = []
    bench_model = _bench_through(monkeypatch, calls, [(260.0, 170.0), (250.0, 160.0), (240.0, 165.0)])
    calibrated = [_walk(1 << 30, [300.0, 150.0, 80.0], [200.0, 100.0, 50.0]), _walk(4 << 30, [400.0, 200.0, 100.0], [300.0, 150.0, 75.0])]
    monkeypatch.setattr(bench_model, "calibrated_walk_probes", lambda: calibrated)
    # At the start, after round 1 (the far probe not read: None), at the end.
    readings = iter([
        [_walk(1 << 30, [280.0, 120.0, 60.0], [180.0, 90.0, 40.0]), _walk(4 << 30, [380.0, 190.0, 90.0], [280.0, 140.0, 70.0])],
        None,
        [_walk(1 << 30, [290.0, 140.0, 70.0], [190.0, 95.0, 45.0]), _walk(4 << 30, [420.0, 210.0, 110.0], [320.0, 160.0, 80.0])],
    ])
    monkeypatch.setattr(bench_model, "walk_probes_now", lambda probes: calls.append("walks") or (next(readings) if probes is calibrated else None))
    assert bench_model.main(_bench_args(model_programs="rand,gups")) == 0
    # Each chase reading is followed by a reading of the walk probes, before the next run.
    assert calls[:5] == ["chase", "walks", "measure", "measure", "measure"], calls
    refit = next(c for c in calls if isinstance(c, tuple) and c[0] == "refit")
    near, far = refit[3][0]
    # Medians of three readings at each k (the calibration's and the two read), the unread one left out.
    assert near["ns_4k"] == [290.0, 140.0, 70.0] and near["ns_2m"] == [190.0, 95.0, 45.0]
    assert far["ns_4k"] == [400.0, 200.0, 100.0] and far["ns_2m"] == [300.0, 150.0, 75.0]
    assert refit[3][1] == 3
    err = capsys.readouterr().err
    assert "the share's walk probes over 1024MiB and 4096MiB, after round 1" in err
    assert "not read (no 2MB pages, or too little memory free)" in err


def test_the_median_of_one_calibrated_probe_and_no_readings_is_the_calibration():
    from superpager.bench_model import median_walk_probes
    one = [_walk(1 << 30, [300.0, 150.0, 80.0], [200.0, 100.0, 50.0])]
    assert median_walk_probes(one, [None, None]) == (one, 1)


def test_the_interval_around_a_median_is_the_sign_tests():
    from superpager.bench_model import interval_rank, median_interval
    # 5 pairs: only the range holds the median with 90% or more (1 - 2/32).
    assert median_interval([1.3, 1.0, 1.8, 1.1, 1.2]) == (1.0, 1.8, 0.9375)
    # 9: the 2nd to the 8th (1 - 2 x 10/512); the 3rd to the 7th would be 82%.
    lo, hi, cov = median_interval([float(x) for x in range(9, 0, -1)])
    assert (lo, hi) == (2.0, 8.0) and abs(cov - (1 - 20 / 512)) < 1e-12
    # 3: nothing reaches 90%; the range, with its 75%.
    assert median_interval([2.0, 1.0, 3.0]) == (1.0, 3.0, 0.75)
    assert interval_rank(8) == (2, 1 - 2 * 9 / 256)
    assert interval_rank(20, 0.95)[0] == 6  # 1 - 2 P(B <= 5) = 0.9586; j = 7 gives 0.885


def test_the_report_says_which_misses_lie_inside_their_medians_interval():
    # The 13th entry: (lo, hi, coverage). rand's 1.12 is inside 1.05-1.20 and ok; chase's 1.35
    # misses, outside 1.60-1.70; a third row misses inside its wide interval.
    rs = [rows()[0] + (None, None, (1.05, 1.2, 0.9375)), rows()[1] + (None, None, (1.6, 1.7, 0.9375)),
          ("gups", 4096, 0.3, 0.15, 1.9, 1.2, 2.5, 2.4, 5.8, 0.3, None, None, (1.2, 2.5, 0.9375))]
    r = render(rs, 5, notes=[])
    line = next(x for x in r.splitlines() if x.startswith("How far the runs pin"))
    assert "2 of 3 predictions lie inside" in line and "93.8% confidence" in line and "their range at 5 pairs" in line, line
    assert "do not tell from noise: gups 4096MiB (1.20–2.50); misses outside theirs: chase 1024MiB (1.60–1.70)." in line, line
    assert "How far" not in render(rows(), 5, notes=[]), "rows without intervals: no line"


def test_with_nine_pairs_the_line_names_the_order_statistics():
    from superpager.bench_model import interval_line
    line = interval_line([(True, False, "rand 64MiB (1.00–1.10)")], 9)
    assert "96.1% confidence" in line and "the 2nd smallest to the 2nd largest at 9 pairs" in line, line
    # 11 pairs: the 3rd to the 3rd largest (1 - 2 x 67/2048 = 93.5%; the 4th would be 77.4%).
    assert "93.5% confidence" in interval_line([(True, False, "x")], 11)
    assert "the 3rd smallest to the 3rd largest at 11 pairs" in interval_line([(True, False, "x")], 11)
    # Ordinals past ten: the 12th at 33 pairs, the 21st at 53.
    assert "the 12th smallest to the 12th largest at 33 pairs" in interval_line([(True, False, "x")], 33)
    assert "the 21st smallest to the 21st largest at 53 pairs" in interval_line([(True, False, "x")], 53)


def test_a_kept_capture_is_the_same_command_by_arguments_not_by_paths():
    from superpager.bench_model import command, same_command
    now = command("/root/.cache/superpager/workloads/model_access-0123abcd", "gups", 64)
    assert now[1:] == ["gups", "64"]
    # Another build of the workload, the same arguments: the same command.
    assert same_command(["/elsewhere/model_access-ffff", "gups", "64"], now)
    # A longer phase (an operations argument), another size, another program, another executable.
    assert not same_command(["/x/model_access-ffff", "gups", "64", "64"], now)
    assert not same_command(["/x/model_access-ffff", "gups", "256"], now)
    assert not same_command(["/x/model_access-ffff", "rand", "64"], now)
    assert not same_command(["/x/other-ffff", "gups", "64"], now)
    assert not same_command(None, now)
    # python3 on model_dict.py, wherever the source directory is.
    py = command("unused", "python3-dict", 256)
    assert same_command(["/usr/bin/python3", "/somewhere/else/model_dict.py", "256"], py)
