"""calibrate's probes that compare 4KB with 2MB pages run the two page sizes in turn, seed by
seed, so a drift in a shared host's load lands on both alike (calibrate.alternated)."""
from superpager.model import calibrate


def test_alternated_takes_turns_seed_by_seed():
    calls = []
    out = calibrate.alternated(lambda pg, seed: calls.append((pg, seed)) or f"{pg}{seed}", 3)
    assert calls == [("2m", 1), ("4k", 1), ("2m", 2), ("4k", 2), ("2m", 3), ("4k", 3)]
    assert out == {"2m": ["2m1", "2m2", "2m3"], "4k": ["4k1", "4k2", "4k3"]}


def test_the_chase_points_alternate_and_keep_their_order(monkeypatch):
    calls = []

    def chase(_b, footprint, pages, _steps, seed, layout="dense"):
        calls.append((footprint, pages, seed))
        # A drift: every run is slower than the one before. Run all 2MB first and 4KB would
        # read slower than 2MB at every point; in turn they read within a run of each other.
        return 100.0 + len(calls), 0
    monkeypatch.setattr(calibrate, "chase_binary", lambda: None)
    monkeypatch.setattr(calibrate, "chase", chase)
    monkeypatch.setattr(calibrate, "footprints", lambda largest: [1 << 20, 1 << 21])
    pts = calibrate.measure(1 << 21, 1000, 3)
    # In passes: a footprint's runs a pass apart (a slow spell lands on one of them), its page
    # sizes in turn within each pass.
    assert calls == [(fp, pg, seed) for seed in (1, 2, 3) for fp in (1 << 20, 1 << 21) for pg in ("2m", "4k")]
    assert [(fp, pg) for fp, pg, _ in pts] == [(1 << 20, "2m"), (1 << 21, "2m"), (1 << 20, "4k"), (1 << 21, "4k")]
    by = {(fp, pg): ns for fp, pg, ns in pts}
    assert by[1 << 20, "4k"] - by[1 << 20, "2m"] == 1.0, "the medians of runs 1,5,9 and 2,6,10"
    assert by[1 << 20, "2m"] == 105.0 and by[1 << 21, "2m"] == 107.0


def test_a_slow_spell_over_one_pass_leaves_the_points_medians(monkeypatch):
    # Runs 5 to 8 (the second pass's first footprint and its neighbour) take twice as long: with
    # the runs in passes each footprint has one slow run of three, which its median leaves out.
    calls = []

    def chase(_b, footprint, pages, _steps, seed, layout="dense"):
        calls.append(footprint)
        return (20.0 if 5 <= len(calls) <= 8 else 10.0), 0
    monkeypatch.setattr(calibrate, "chase_binary", lambda: None)
    monkeypatch.setattr(calibrate, "chase", chase)
    monkeypatch.setattr(calibrate, "footprints", lambda largest: [1 << 20, 1 << 21])
    assert all(ns == 10.0 for _, _, ns in calibrate.measure(1 << 21, 1000, 3))


def test_the_window_probe_alternates(monkeypatch):
    seen = []

    def fake(_b, args, _what, absent=None):
        seen.append((args[2], int(args[4])))
        return {"dep": "200", **{f"ns_p{p}": "20" for p in calibrate.WINDOW_PADS}, "huge_bytes": str(1 << 30), "sink": "0"}
    monkeypatch.setattr(calibrate, "_run_chase", fake)
    assert calibrate.window_probe(None, 1 << 30, 1000, 2) is not None
    runs = calibrate.WINDOW_PROBE_RUNS
    assert runs > 2 and seen == [(pg, s) for s in range(1, runs + 1) for pg in ("2m", "4k")], "at least WINDOW_PROBE_RUNS pairs, in turn"


def test_a_probe_that_cannot_be_read_stops_at_its_first_run(monkeypatch):
    seen = []

    def absent(_b, args, _what, absent=None):
        seen.append(args[2])
        return {}  # chase.c exited 3: no add chain on this architecture
    monkeypatch.setattr(calibrate, "_run_chase", absent)
    assert calibrate.window_probe(None, 1 << 30, 1000, 3) is None and seen == ["2m"]

    calls = []

    def no_huge(_b, footprint, pages, _steps, seed, ks):
        calls.append(pages)
        return [100.0] * len(ks), 0  # no 2MB-page bytes
    monkeypatch.setattr(calibrate, "chains", no_huge)
    assert calibrate.walk_probe(None, 1 << 30, 1000, 3) is None and calls == ["2m"]
    assert calibrate.alternated(lambda pg, seed: seed, 3, usable=lambda pg, r: r < 2) is None
