"""calibrate's fit of the share's exponent to its two walk probes (model/calibrate.py
`fit_share_exponent`; docs/RUNTIME_MODEL.md, "The share's exponent, fitted"), on a stand-in
model, and the tenants' rate that keeps calibrate's chase at the share its fit chose."""
import re

import pytest

from superpager.model import calibrate as cal

# The walk probes of the fifty-third session (ns a load at k chases at once; 10:12-10:17).
NEAR = {"footprint": 1 << 30, "chains": [1, 2, 4, 8, 16, 32],
        "ns_4k": [286.6, 121.1, 53.6, 24.9, 12.5, 11.1], "ns_2m": [172.2, 81.9, 41.5, 21.4, 10.8, 8.3]}
FAR = {"footprint": 4 << 30, "chains": [1, 2, 4, 8, 16, 32],
       "ns_4k": [387.5, 188.5, 79.8, 40.0, 23.9, 28.6], "ns_2m": [244.8, 109.2, 52.5, 26.2, 12.1, 9.6]}
WHOLE, KEPT, RATE = 32 << 20, 4 << 20, 0.043936


@pytest.mark.parametrize("a", [1.0, 0.85, 0.7, 0.5])
def test_the_rate_keeps_the_chase_at_the_share_the_fit_chose(a):
    # F^a / (F^a + R_a^a) = KEPT / WHOLE, with F the chase's fills: R = F (C / s - 1).
    fills = RATE / (WHOLE / KEPT - 1)
    r = cal.share_rate(RATE, WHOLE, KEPT, a)
    assert fills ** a / (fills ** a + r ** a) == pytest.approx(KEPT / WHOLE, rel=1e-4)
    assert (r == RATE) == (a == 1.0)


def test_the_fifty_third_sessions_rate_at_0_7():
    assert cal.share_rate(RATE, WHOLE, KEPT, 0.7) == pytest.approx(0.1012, abs=1e-4)  # "A share that grows slower"


def stand_in(monkeypatch, runs, best):
    """A model 0.8 of the probes' times everywhere (the offset the fit must not see), and 1.3x
    fast besides at every k from 2 except with exponent `best` (None: as written)."""
    monkeypatch.setattr(cal, "_machine_overlap", lambda _toml: (6.0, 21.0, 4.0))
    monkeypatch.setattr(cal, "chase_trace", lambda _path, _fp: None)

    def model(_toml, trace, settings):
        k = int(float(re.search(r"rob=([\d.]+)", settings)[1]) / 4.0)
        m = re.search(r"share_exponent=([\d.]+)", settings)
        a = float(m[1]) if m else None
        if a is not None:
            assert "+walk_hiding=0+" in settings and f"tenant_fill_rate={cal.share_rate(RATE, WHOLE, KEPT, a):.6f}" in settings
        runs.append((trace.rsplit("-", 1)[1], k, a))
        p = FAR if trace.endswith(f"-{4 << 30}.spt") else NEAR
        i = p["chains"].index(k)
        off = 0.8 * (1.0 if k == 1 or a == best else 1 / 1.3)
        return off * p["ns_4k"][i], off * p["ns_2m"][i]

    monkeypatch.setattr(cal, "model_chase_ns", model)


def test_the_exponent_nearest_both_probes_is_taken_with_no_hiding_and_its_rate(monkeypatch):
    runs = []
    stand_in(monkeypatch, runs, best=0.7)
    got = cal.fit_share_exponent("", [NEAR, FAR], WHOLE, KEPT, RATE)
    assert got["exponent"] == 0.7 and got["walk_hiding"] == 0.0
    assert got["tenant_fill_rate"] == cal.share_rate(RATE, WHOLE, KEPT, 0.7)
    errors = dict(got["errors"])
    assert list(errors) == list(cal.SHARE_EXPONENTS) and errors[0.7] == 0.0
    assert got["as_written_error"] == pytest.approx(0.2624, abs=1e-4)  # ln 1.3
    # One chase once a footprint (it is every candidate's), then k from 2 on both footprints
    # for the model as written and each exponent.
    assert [k for _, k, _ in runs[:2]] == [1, 1]
    assert {k for _, k, _ in runs[2:]} == {2, 4, 8, 16, 32}
    assert len(runs) == 2 + 2 * 5 * (1 + len(cal.SHARE_EXPONENTS))


def test_the_model_as_written_is_kept_where_it_is_nearest_or_as_near(monkeypatch):
    stand_in(monkeypatch, [], best=None)
    got = cal.fit_share_exponent("", [NEAR, FAR], WHOLE, KEPT, RATE)
    assert got["exponent"] == 1.0 and "walk_hiding" not in got and "tenant_fill_rate" not in got
    stand_in(monkeypatch, [], best=-1.0)  # every candidate 1.3x off: a tie
    assert "walk_hiding" not in cal.fit_share_exponent("", [NEAR, FAR], WHOLE, KEPT, RATE)


def test_no_fit_without_one_chase_and_a_chase_count_from_two(monkeypatch):
    runs = []
    stand_in(monkeypatch, runs, best=0.7)
    one = {"footprint": 1 << 30, "chains": [1], "ns_4k": [286.6], "ns_2m": [172.2]}
    assert cal.fit_share_exponent("", [one], WHOLE, KEPT, RATE) is None
    no_one = {"footprint": 1 << 30, "chains": [2, 4], "ns_4k": [121.1, 53.6], "ns_2m": [81.9, 41.5]}
    assert cal.fit_share_exponent("", [no_one], WHOLE, KEPT, RATE) is None
    assert runs == []


def test_the_far_probe_is_not_run_without_the_memory_for_it(monkeypatch):
    monkeypatch.setattr(cal, "memory_available", lambda: 5 << 30)
    monkeypatch.setattr(cal, "walk_times", lambda *_a, **_k: pytest.fail("the probe ran"))
    got, why = cal.walk_probe_far(cal.Path("/nonexistent"), 1 << 30, 1000, 1)
    assert got is None and why == "the far walk probe needs 6GiB free, and 5GiB is"


LEVELS = cal._core.host_cache_levels()


def _input(far: bool, shared: bool = True) -> dict:
    """calibrate's input to the machine file with a shared last level fitted at 4MiB (no fit
    run: `last_level_fit=False` keeps it as handed over), the two walk probes and a window probe."""
    levels = [(n, s, w, 0.0) for n, s, w in LEVELS]
    pts = [(fp, pg, 150.0 if pg == "2m" else 200.0) for fp in cal.footprints(1 << 30) for pg in ("2m", "4k")]
    f = cal.fit(pts, levels, 3.0)
    last = {"footprint": 1 << 30, "measured_4k_ns": 200.0, "measured_2m_ns": 150.0, "sizes": [8 << 20, 4 << 20],
            "ns_4k": [190.0, 201.0], "ns_2m": [140.0, 151.0], "chosen": 4 << 20, "tenant_fill_rate": RATE if shared else None}
    return {"cpu": "", "date": "2026-12-05", "method": "test", "clock_ghz": 3.0, "points": [list(p) for p in pts],
            "walk_probe": NEAR, "walk_probe_far": FAR if far else None,
            "window_probe": {"footprint": 1 << 30, "pads": [0, 16], "ns_4k": [17.5, 30.0], "ns_2m": [13.4, 25.0],
                             "dep_4k": 286.8, "dep_2m": 185.1, "window": 233, "walk_hiding": 0.172},
            **f, "last_level_fit": last}


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_fit_and_write_puts_the_fit_taken_into_cache_and_says_why_where_it_did_not_run(tmp_path, monkeypatch):
    levels = [(n, s, w, 0.0) for n, s, w in LEVELS]
    seen = []

    def fit(_toml, probes, whole, kept, rate, _progress=None):
        seen.append(([p["footprint"] for p in probes], whole, kept, rate))
        return {"exponent": 0.7, "as_written_error": 0.2, "errors": [[1.0, 0.18], [0.7, 0.1]], "walk_hiding": 0.0,
                "tenant_fill_rate": cal.share_rate(rate, whole, kept, 0.7)}

    monkeypatch.setattr(cal, "fit_share_exponent", fit)
    out = tmp_path / "host.toml"
    inp = _input(far=True)
    _, why = cal.fit_and_write(inp, levels, 1 << 30, out, last_level_fit=False)
    assert why is None and seen == [([1 << 30, 4 << 30], levels[-1][1], 4 << 20, RATE)]
    info = cal._core.machine_info(str(out))["cache"]
    assert info["share_exponent"] == 0.7 and info["walk_hiding"] == 0.0
    assert info["tenant_fill_rate"] == pytest.approx(cal.share_rate(RATE, levels[-1][1], 4 << 20, 0.7))
    for kw, says in [(dict(inp=_input(far=False)), "no far walk probe"),
                     (dict(inp=_input(far=True, shared=False)), "the last level's fit found no tenants"),
                     (dict(inp=_input(far=True), share_fit=False), "not asked for (--no-share-fit)")]:
        i = kw.pop("inp")
        _, why = cal.fit_and_write(i, levels, 1 << 30, out, last_level_fit=False, **kw)
        assert why.startswith(says), why
        c = cal._core.machine_info(str(out))["cache"]
        assert c["share_exponent"] == 1.0 and c["walk_hiding"] == pytest.approx(0.172), c
    assert len(seen) == 1


@pytest.mark.skipif(len(LEVELS) < 2, reason="CPUID and sysfs give fewer than two data-cache levels here")
def test_the_share_fit_reads_the_walk_probes_handed_over_in_place_of_the_files(tmp_path, monkeypatch):
    # bench --model's walk probes through the bench ("The share's probes through the bench").
    levels = [(n, s, w, 0.0) for n, s, w in LEVELS]
    seen = []
    monkeypatch.setattr(cal, "fit_share_exponent", lambda _t, probes, *_a: seen.append(probes) or None)
    later = [{**NEAR, "ns_4k": [250.0] + NEAR["ns_4k"][1:]}, {**FAR, "ns_2m": [260.0] + FAR["ns_2m"][1:]}]
    _, why = cal.fit_and_write(_input(far=True), levels, 1 << 30, tmp_path / "a.toml", last_level_fit=False, share_probes=later)
    _, _ = cal.fit_and_write(_input(far=True), levels, 1 << 30, tmp_path / "b.toml", last_level_fit=False)
    assert why == "the walk probes ran at no k from 2"  # the stand-in fit returns None
    assert seen == [later, [NEAR, FAR]]
