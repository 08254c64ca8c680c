"""Superpage-aware replacement (docs/AMSQM.md): `trace merge` for heavy multi-process traces,
and the ARC replacement under memory pressure."""
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
