"""Superpage-aware replacement (docs/AMSQM.md): `trace merge` for heavy multi-process traces,
and the ARC replacement under memory pressure."""
import pytest

import superpager as sp
from superpager import api


def test_merge_interleaves_inputs_as_separate_programs(cli, tmp_path):
    for name, seed in (("a", 1), ("b", 2)):
        cli("gen", "zipf", "--size", "2MiB", "--accesses", "20000", "--seed", seed, "-o", tmp_path / f"{name}.spt", check=True)
    code, out, err = cli("trace", "merge", "a.spt", "b.spt", "a.spt", "--slice", "500", "-o", "m.spt")
    assert code == 0, err
    assert "3 processes" in out and "switches" in out
    a, b, m = (api.trace_info(tmp_path / f) for f in ("a.spt", "b.spt", "m.spt"))
    assert m["processes"] == [1, 2, 3]
    assert m["accesses"] == 2 * a["accesses"] + b["accesses"]
    # Interleaved, not one after another: far more context switches than inputs.
    assert dict(m["events"])["ctx"] > 50
    r = sp.simulate(tmp_path / "m.spt", policy="base", machine="skylake")
    assert r["accesses"] == m["accesses"]


def test_merge_refuses_bad_inputs_with_one_line(cli, tmp_path):
    cli("gen", "seq", "--size", "1MiB", "--accesses", "5000", "-o", tmp_path / "a.spt", check=True)
    (tmp_path / "bad.spt").write_bytes(b"not a trace at all")
    code, _, err = cli("trace", "merge", "a.spt", "bad.spt", "-o", "m.spt")
    assert code != 0 and "bad.spt" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.spt").exists()
    code, _, err = cli("trace", "merge", "a.spt", "--quantum", "0", "-o", "m.spt")
    assert code != 0 and "--quantum" in err, err


def test_arc_adapts_under_pressure_and_counts_ghost_hits(tmp_path):
    t = tmp_path / "z.spt"
    api.gen("zipf", str(t), size="256MiB", accesses=400_000, seed=3, progress=False)
    rs = {rep: sp.simulate(t, machine="skylake", policy="base", memory="160MiB", swap="1GiB", replacement=rep, validate=rep == "arc")
          for rep in ("clock", "arc")}
    arc = rs["arc"]
    assert arc["faults.major"] > 0, "memory must be short enough to page"
    assert arc["replacement.arc.ghost_hits_b1"] + arc["replacement.arc.ghost_hits_b2"] > 0
    assert arc["replacement.arc.evict_t1"] + arc["replacement.arc.evict_t2"] == arc["swap.out"]
    assert "replacement.arc.misses" not in rs["clock"].counters


def test_bad_replacement_specs_name_the_problem(cli, tmp_path):
    cli("gen", "seq", "--size", "1MiB", "--accesses", "5000", "-o", tmp_path / "a.spt", check=True)
    code, _, err = cli("simulate", "a.spt", "--swap", "1GiB", "--replacement", "arc:depth=2")
    assert code != 0 and "replacement arc: unknown parameter 'depth'" in err, err
    code, _, err = cli("simulate", "a.spt", "--swap", "1GiB", "--replacement", "fifo")
    assert code != 0 and "unknown replacement 'fifo'" in err and "arc" in err, err


def test_the_seeds_ratios_as_printed_and_symmetric():
    from superpager import reproduce_amsqm as R

    class Fake:
        def __init__(self, tm, pf, p):
            self.tm, self.pf, self.p = tm, pf, p

    amsqm, arc = Fake(tm=300, pf=150, p=100), Fake(tm=500, pf=200, p=100)
    # tm_ratio = 1 - (300 - 100) / 500 as printed; 1 - 200 / 400 with the symmetric denominator.
    assert abs(R.tm_ratio(amsqm, arc, False) - 0.6) < 1e-12
    assert abs(R.tm_ratio(amsqm, arc, True) - 0.5) < 1e-12
    # pf_ratio = 1 - (150 - 100) / (200 - 100).
    assert abs(R.pf_ratio(amsqm, arc) - 0.5) < 1e-12
    assert R.memory_for(4096) == "12MiB"  # 75% of 16MiB
    assert R.memory_for(800) == "2560KiB"  # 75% of 3.1MiB, rounded up to 256KiB


def test_amsqm_demotes_superpages_on_writes_and_refuses_bad_parameters(tmp_path):
    t = tmp_path / "g.spt"
    api.gen("gups", str(t), size="16MiB", accesses=150_000, seed=2, progress=False)
    r = sp.simulate(t, machine="amsqm09", policy="navarro", memory="12MiB", swap="1GiB", replacement="amsqm", validate=True)
    assert r["replacement.amsqm.demoted_pieces"] > 0
    assert sum(v for k, v in r.counters.items() if k.startswith("demote.dirty.")) > 0
    off = sp.simulate(t, machine="amsqm09", policy="navarro", memory="12MiB", swap="1GiB", replacement="amsqm:write_demote=false")
    assert sum(v for k, v in off.counters.items() if k.startswith("demote.dirty.")) == 0
    with pytest.raises(sp.UsageError, match="gamma"):
        sp.simulate(t, machine="amsqm09", policy="navarro", memory="12MiB", swap="1GiB", replacement="amsqm:gamma=0.9")


@pytest.fixture(scope="module")
def small_amsqm(tmp_path_factory):
    """`reproduce amsqm` on generated traces: the real run captures Debian's bzip2 and gzip and
    two suite programs; here each is a small `superpager gen` trace of its own kind."""
    from superpager import reproduce_amsqm as R

    d = tmp_path_factory.mktemp("amsqm")
    kinds = {"bzip2": ("gups", "6MiB"), "gzip": ("seq", "2MiB"), "apsi": ("stride", "4MiB"), "crafty": ("zipf", "8MiB")}

    def program_trace(name, progress):
        p = d / f"{name}.spt"
        if not p.exists():
            kind, size = kinds[name]
            api.gen(kind, str(p), size=size, accesses=60_000 if kind != "seq" else 0, seed=5, progress=False)
        return str(p)

    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(d / "cache"))
    mp.setattr(R, "program_trace", program_trace)
    yield R
    mp.undo()


def test_reproduce_amsqm_heavy_traces_and_verdicts(small_amsqm):
    R = small_amsqm
    out, runs = R.heavy(True, lambda m: None)
    text = "\n".join(out)
    assert len(runs) == 3 * len(R.QUICK_HEAVY)
    # Each heavy trace is four programs merged, paging under every configuration.
    for i in range(0, len(runs), 3):
        clock, arc, amsqm = runs[i:i + 3]
        assert clock.accesses == arc.accesses == amsqm.accesses > 0
        assert arc.major > 0, "memory at 75% of the footprint must page"
        # The verdict lines say what the runs say.
        n = R.QUICK_HEAVY[i // 3]
        ok = "holds" if amsqm.tm < arc.tm else "DOES NOT HOLD"
        assert f"| trace {n}: AMSQM takes fewer TLB misses than ARC | {amsqm.tm:,} against {arc.tm:,} | {ok} |" in text
    assert "| 11 | apsi + crafty + bzip2 + gzip |" in text


def test_reproduce_amsqm_sweeps_report_flat_parameters(small_amsqm):
    R = small_amsqm
    text = "\n".join(R.sweeps(True, lambda m: None))
    assert "| threshold, with `write_demote=false` |" in text
    assert "Our best values beside the seed's:" in text
    for p in ("beta", "alpha", "gamma"):
        assert f"Best {p}:" in text or f"Every value of {p} gives the same run" in text


def test_reproduce_amsqm_runs_both_views_of_references(small_amsqm, monkeypatch):
    R = small_amsqm
    monkeypatch.setattr(R, "SEEING_TRACES", [8])
    assert R.seeing(True, lambda m: None)[-2] == "Not run with `--quick`."
    text = "\n".join(R.seeing(False, lambda m: None))
    rows = [line for line in text.splitlines() if line.startswith("| 8 |")]
    assert [r.split(" | ")[2] for r in rows] == ["walks", "every"]
    clock, arc = (int(x.replace(",", "")) for x in rows[1].split(" | ")[3:5])
    ok = "holds" if arc < clock else "DOES NOT HOLD"
    assert f"| trace 8, sees=every: ARC faults less than CLOCK | {arc:,} against {clock:,} | {ok} |" in text


def test_every_replacement_takes_sees(tmp_path):
    t = tmp_path / "z.spt"
    api.gen("zipf", str(t), size="256MiB", accesses=200_000, seed=3, progress=False)
    walks = sp.simulate(t, machine="skylake", policy="base", memory="160MiB", swap="1GiB", replacement="arc")
    every = sp.simulate(t, machine="skylake", policy="base", memory="160MiB", swap="1GiB", replacement="arc:sees=every", validate=True)
    # TLB hits are requests too: more hits in T1 and T2 than the walks alone gave.
    hits = lambda r: r["replacement.arc.hits_t1"] + r["replacement.arc.hits_t2"]
    assert hits(every) > hits(walks) > 0
    for rep in ("clock", "lru", "amsqm"):
        sp.simulate(t, machine="skylake", policy="base", memory="160MiB", swap="1GiB", replacement=f"{rep}:sees=every")
    with pytest.raises(sp.UsageError, match="sees=all"):
        sp.simulate(t, machine="skylake", policy="base", memory="160MiB", swap="1GiB", replacement="clock:sees=all")


def test_reproduce_amsqm_sweeps_memory_pressure(small_amsqm, monkeypatch):
    R = small_amsqm
    monkeypatch.setattr(R, "PRESSURE_TRACES", [8])
    monkeypatch.setattr(R, "PRESSURES", [0.5, 0.9])
    assert R.pressures(True, lambda m: None)[-2] == "Not run with `--quick`."
    rows = [line for line in R.pressures(False, lambda m: None) if line.startswith("| 8 |")]
    assert [r.split(" | ")[2].split(" ")[1] for r in rows] == ["(50%)", "(90%)"]
    # Less memory, more faults, under every configuration.
    faults = [[int(x.replace(",", "")) for x in r.split(" | ")[3:6]] for r in rows]
    assert all(lo > hi for lo, hi in zip(faults[0], faults[1])), faults


def test_reproduce_amsqm_quick_leaves_the_slow_alternatives_out(small_amsqm):
    R = small_amsqm
    text = "\n".join(R.alternatives(True, lambda m: None))
    assert "| 11 | write_demote=false" in text
    assert "repromote=true" not in text.split("Not run")[0] and "sees=every" not in text.split("Not run")[0]
    assert "Not run with `--quick`: `repromote`, `sees`." in text
