"""calibrate's fit of the overlap's bounds norm to its walk probe (model/calibrate.py
`fit_bounds_norm`; docs/RUNTIME_MODEL.md, "Bounds near each other"), on a stand-in model."""
import re

from superpager.model import calibrate as cal

# The walk probe of the fifty-first session (ns a load at k chases at once, 1GiB).
WALK = {"footprint": 1 << 30, "chains": [1, 2, 4, 8, 16, 32],
        "ns_4k": [241.572, 113.579, 49.094, 24.446, 12.242, 10.406],
        "ns_2m": [173.715, 82.206, 41.041, 20.682, 10.6, 8.224]}


def stand_in(monkeypatch, runs, right=2.0):
    """A model whose times are 0.8 of the probe's everywhere (the offset the fit must not see),
    and 1.3 times that past 6 chases unless the norm is `right`."""
    monkeypatch.setattr(cal, "_machine_overlap", lambda _toml: (6.0, 21.0, 4.0))
    monkeypatch.setattr(cal, "chase_trace", lambda _path, _fp: None)

    def model(_toml, _trace, settings):
        rob = float(re.search(r"rob=([\d.]+)", settings)[1])
        p = float(re.search(r"bounds_norm=([\d.]+)", settings)[1])
        k = int(rob / 4.0)
        runs.append((k, p))
        i = WALK["chains"].index(k)
        slow = 1.3 if k > 6 and p != right else 1.0
        return 0.8 * slow * WALK["ns_4k"][i], 0.8 * slow * WALK["ns_2m"][i]

    monkeypatch.setattr(cal, "model_chase_ns", model)


def test_the_norm_whose_fall_with_k_is_the_probes_is_taken(monkeypatch):
    runs = []
    stand_in(monkeypatch, runs)
    got = cal.fit_bounds_norm("", WALK)
    assert got["bounds_norm"] == 2.0
    errors = dict(got["bounds_norm_errors"])
    assert list(errors) == list(cal.BOUNDS_NORMS)
    assert errors[2.0] == 0.0, "0.8 of the probe everywhere is no error: the fit reads ratios to 4 chases"
    assert all(abs(e - 0.2624) < 1e-4 for p, e in errors.items() if p != 2.0), errors  # ln 1.3
    # 4 chases once (the largest k with no resource full: 6 walkers), then 8, 16 and 32 at each norm.
    assert runs[0] == (4, 0.0)
    assert sorted(set(k for k, _ in runs[1:])) == [8, 16, 32]
    assert len(runs) == 1 + 3 * len(cal.BOUNDS_NORMS)


def test_the_largest_bound_alone_wins_a_tie(monkeypatch):
    runs = []
    stand_in(monkeypatch, runs, right=-1.0)  # every norm 1.3x off: all equal
    assert cal.fit_bounds_norm("", WALK)["bounds_norm"] == 0.0


def test_no_fit_without_chases_on_both_sides_of_the_resources(monkeypatch):
    runs = []
    stand_in(monkeypatch, runs)
    assert cal.fit_bounds_norm("", {**WALK, "chains": [1, 2, 4], "ns_4k": WALK["ns_4k"][:3], "ns_2m": WALK["ns_2m"][:3]}) is None
    assert cal.fit_bounds_norm("", {**WALK, "chains": [8, 16], "ns_4k": WALK["ns_4k"][3:5], "ns_2m": WALK["ns_2m"][3:5]}) is None
    assert runs == []
